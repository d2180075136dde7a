/*
** luaproc.c -- the `luaproc` module: luaproc's API (docs/luaproc.md) on lpvm.
**
** Requirable from every lpvm process (package.preload, see llibs.c) and, through
** build/vm/luaproc.so (luaproc_module.c), from the stock `lua5.4` interpreter, whose
** main chunk is then the *host* (luaproc.h). Channels are luaproc_chan.c, blocking
** is luaproc_wait.c, newproc is luaproc_spawn.c, wait() is luaproc_procs.c.
**
** Conventions follow luaproc: a runtime failure (no such channel, channel deleted,
** nothing to receive, a value that cannot travel) is `nil, message`; a wrong
** argument type raises, as luaL_check* does in luaproc. Messages carry nil, booleans,
** numbers and strings, encoded as lpvm message terms.
*/
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/lpvm.h"
#include "vm/lproc_int.h"
#include "vm/lterm.h"
#include "vm/luaproc.h"

/* nil, message: fmt's %s is the channel name at index 1, quoted (and cut). */
static int fail(lua_State *L, const char *fmt) {
  const char *name = lmod_push_quoted(L, 1);
  lua_pushnil(L);
  lua_pushfstring(L, fmt, name);
  return 2;
}

static int no_channel(lua_State *L) {
  return fail(L, "channel %s does not exist");
}

/* A channel name: any string without NUL (C sees it up to the first NUL). */
static const char *check_channel(lua_State *L) {
  return lmod_check_cstr(L, 1, "channel name");
}

/* ---- channels -------------------------------------------------------------------------- */

static int lp_newchannel(lua_State *L) {
  const char *name = check_channel(L);
  int rc = luaproc_chan_new(name);
  if (rc == LUAPROC_EXISTS) return fail(L, "channel %s already exists");
  if (rc != LUAPROC_OK) return fail(L, "not enough memory for channel %s");
  lua_pushboolean(L, 1);
  return 1;
}

static int lp_delchannel(lua_State *L) {
  const char *name = check_channel(L);
  if (luaproc_chan_del(name) != LUAPROC_OK) return no_channel(L);
  lua_pushboolean(L, 1);
  return 1;
}

/* ---- send ---------------------------------------------------------------------------------- */

/* Stack after a wake-up: [1] the channel name, then whatever the call left. */
static int send_k(lua_State *L, lpvm_msg *m) {
  if (!m) return fail(L, "channel %s was deleted while the sender waited");
  lpvm_msg_free(m);
  lua_pushboolean(L, 1);
  return 1;
}

static const luaproc_cont send_cont = {send_k};

/* The values from index 2 as one message, or NULL with `nil, message` pushed. */
static lpvm_msg *encode(lua_State *L) {
  int n = lua_gettop(L) - 1;
  for (int i = 2; i <= n + 1; i++) {
    int t = lua_type(L, i);
    if (t != LUA_TNIL && t != LUA_TBOOLEAN && t != LUA_TNUMBER && t != LUA_TSTRING) {
      lua_pushnil(L);
      lua_pushfstring(L, "cannot send value #%d: %s values cannot be sent (only nil, "
                      "booleans, numbers and strings)", i - 1, lua_typename(L, t));
      return NULL;
    }
  }
  char err[LTERM_ERRSZ];
  lpvm_msg *m = lterm_msg(L, 2, n, err);   /* only plain values: never fails on one */
  if (!m) {
    lua_pushnil(L);
    lua_pushliteral(L, "not enough memory");
  }
  return m;
}

/* send(channel, ...) -> true | nil, message: returns once a receiver took it. */
static int lp_send(lua_State *L) {
  const char *name = check_channel(L);
  luaproc_check_block(L, "send");
  lpvm_msg *m = encode(L);
  if (!m) return 2;
  luaproc_hostwait hw = LUAPROC_HOSTWAIT_INIT;
  luaproc_waiter *w = malloc(sizeof *w);
  uint64_t ref = 0;
  if (w) {
    luaproc_waiter_init(L, w, &hw);
    ref = w->ref;
  }
  switch (luaproc_chan_send(name, m, w)) {
    case LUAPROC_OK: lua_pushboolean(L, 1); return 1;
    case LUAPROC_NOCHAN: return no_channel(L);
    case LUAPROC_WAITING: lua_settop(L, 1); return luaproc_block(L, ref, &hw, &send_cont);
    default: return fail(L, "not enough memory to send on channel %s");
  }
}

/* ---- receive ---------------------------------------------------------------------------------- */

/* Push the values of m and free it (also if decoding raises, in a process). */
static int push_values(lua_State *L, lpvm_msg *m) {
  lproc *p = luaproc_is_process(L) ? lproc_of(L) : NULL;
  if (p) {
    lmod_drop_owned(p);
    p->owned = m;
  }
  int n = lterm_push_msg(L, m);
  if (p) p->owned = NULL;
  lpvm_msg_free(m);
  return n;
}

static int recv_k(lua_State *L, lpvm_msg *m) {
  if (!m) return fail(L, "channel %s was deleted while the receiver waited");
  return push_values(L, m);
}

static const luaproc_cont recv_cont = {recv_k};

/* receive(channel [, async]) -> values... | nil, message */
static int lp_receive(lua_State *L) {
  const char *name = check_channel(L);
  int async = lua_toboolean(L, 2);
  if (!async) luaproc_check_block(L, "receive");
  luaproc_hostwait hw = LUAPROC_HOSTWAIT_INIT;
  luaproc_waiter *w = NULL;
  uint64_t ref = 0;
  if (!async && (w = malloc(sizeof *w)) != NULL) {
    luaproc_waiter_init(L, w, &hw);
    ref = w->ref;
  }
  lpvm_msg *m = NULL;
  switch (luaproc_chan_recv(name, async, &m, w)) {
    case LUAPROC_OK: lua_settop(L, 0); return push_values(L, m);
    case LUAPROC_NOCHAN: return no_channel(L);
    case LUAPROC_EMPTY: return fail(L, "no senders waiting on channel %s");
    case LUAPROC_WAITING: lua_settop(L, 1); return luaproc_block(L, ref, &hw, &recv_cont);
    default: return fail(L, "not enough memory to receive on channel %s");
  }
}

/* ---- processes, workers, recycling --------------------------------------------------------- */

static int wait_k(lua_State *L, lpvm_msg *m) {
  (void)L;
  if (m) lpvm_msg_free(m);
  return 0;
}

static const luaproc_cont wait_cont = {wait_k};

/* wait(): until every process made by newproc has ended. Only the main script may
** wait: a luaproc process would wait for itself. */
static int lp_wait(lua_State *L) {
  if (luaproc_procs_marked(L))
    return luaL_error(L, "wait: only the main script may wait (a luaproc process would "
                      "wait for itself)");
  lua_settop(L, 0);
  return luaproc_procs_wait(L, &wait_cont);
}

static int workers_now(void) {
  static lpvm_vmstats st;   /* big; only its worker count is read */
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&mu);
  int n = lpvm_stats(&st) == 0 ? st.workers : 0;
  pthread_mutex_unlock(&mu);
  return n;
}

static int lp_getnumworkers(lua_State *L) {
  lua_pushinteger(L, workers_now());
  return 1;
}

/* lpvm's workers are fixed while the VM runs: only the host, before anything runs,
** can still change their number (luaproc_host.c). Elsewhere the call is accepted and
** getnumworkers keeps telling the truth. */
static void set_workers(lua_State *L, lua_Integer n) {
  if (n > 64) n = 64;
  if (!luaproc_is_process(L)) luaproc_host_workers((int)n);
}

static int lp_setnumworkers(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  luaL_argcheck(L, n > 0, 1, "number of workers must be positive");
  set_workers(L, n);
  return 0;
}

/* The paper's API (Listing 1): createworker / destroyworker / exit. */
static int lp_createworker(lua_State *L) {
  set_workers(L, workers_now() + 1);
  lua_pushboolean(L, 1);
  return 1;
}

static int lp_destroyworker(lua_State *L) {
  int n = workers_now();
  if (n > 1) set_workers(L, n - 1);
  lua_pushboolean(L, 1);
  return 1;
}

/* recycle(max): lpvm's pool of cleaned states (lpvm.recycle). */
static int lp_recycle(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  luaL_argcheck(L, n >= 0, 1, "recycle limit must be non-negative");
  if (n > 1000000) n = 1000000;
  lproc_recycle_set((int)n);
  luaproc_host_recycle((int)n);
  lua_pushboolean(L, 1);
  return 1;
}

/* ---- the module ------------------------------------------------------------------------------ */

static const luaL_Reg funcs[] = {
    {"newproc", luaproc_newproc},
    {"newchannel", lp_newchannel},
    {"delchannel", lp_delchannel},
    {"send", lp_send},
    {"receive", lp_receive},
    {"wait", lp_wait},
    {"setnumworkers", lp_setnumworkers},
    {"getnumworkers", lp_getnumworkers},
    {"recycle", lp_recycle},
    {"createworker", lp_createworker},
    {"destroyworker", lp_destroyworker},
    {"exit", lp_wait},
    {NULL, NULL}};

static const char *const std_libs[] = {"string", "table", "math", "io", "os",
                                       "coroutine", "utf8", "debug", NULL};

/* package.preload[name] for a lazily loaded library: touching the global opens it. */
static int preload_lib(lua_State *L) {
  lua_getglobal(L, luaL_checkstring(L, 1));
  return 1;
}

/* In a process, `require "string"` (what luaproc programs write) must find the
** lazily loaded libraries, which are not in package.loaded before first use. */
static void preload_std(lua_State *L) {
  int top = lua_gettop(L);
  lua_getglobal(L, "package");
  if (lua_type(L, -1) == LUA_TTABLE && lua_getfield(L, -1, "preload") == LUA_TTABLE) {
    for (const char *const *n = std_libs; *n; n++) {
      if (lua_getfield(L, -1, *n) == LUA_TNIL) {
        lua_pushcfunction(L, preload_lib);
        lua_setfield(L, -3, *n);
      }
      lua_pop(L, 1);
    }
  }
  lua_settop(L, top);
}

int luaproc_open(lua_State *L) {
  if (luaproc_is_process(L)) preload_std(L);
  else luaproc_host_attach(L);
  luaL_newlib(L, funcs);
  lua_createtable(L, 0, 1);   /* the trampoline of luaproc_spawn.c calls __start */
  lua_pushcfunction(L, luaproc_start);
  lua_setfield(L, -2, "__start");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_setglobal(L, "luaproc");   /* as luaproc (and Listing 1) expect */
  return 1;
}
