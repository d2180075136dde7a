/*
** lmod_port.c -- ports for Lua processes: OS programs, descriptors, TCP and files
** (the `lpvm` functions open_port, fd_port, port_send, recv, tcp_listen, ...).
**
** A thin layer over include/lpvm/port.h. Commands are messages, so most calls are
** one send and never block. The calls that need an answer (recv, tcp_accept,
** tcp_connect, the file helpers, a port_send over the high-water mark, port_close)
** block the calling *process*, not its worker: they run the module's own `receive`
** with a C predicate that takes only that port's answer (a selective receive), so
** other messages stay queued, in order, for the process's own receives.
**
** Ports are pids with the port bit (light userdata, lmod.c): they print as
** #Port<0.N>, compare by value, are table keys and travel in messages.
**
** Two waits can end without their answer: a recv or tcp_accept that timed out.
** The request is still queued at the port, so the next call on that port does not
** ask again but collects that answer (registry[&pending_key][port] marks them).
*/
#include <errno.h>
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/port.h"
#include "vm/lproc_int.h"

extern char **environ;

static const char pending_key = 'p';   /* registry[&pending_key]: port -> true */

#define CLOSE_LINGER_MS 5000           /* port_close: then the queue is dropped */

/* ---- arguments and results ------------------------------------------------------------- */

static lpvm_id check_port(lua_State *L, int arg) {
  lpvm_id id = lmod_to_pid(L, arg);
  if (!id || !lpvm_id_is_port(id)) luaL_typeerror(L, arg, "port");
  return id;
}

static lproc *check_proc(lua_State *L, const char *fname) {
  lproc *p = lproc_check(L);
  if (p->in_pred) luaL_error(L, "%s: cannot be called from a receive predicate", fname);
  return p;
}

/* nil, reason for a failed C call; LPVM_ESYS carries errno (saved by the caller). */
static int port_fail(lua_State *L, int rc, int err) {
  if (rc == LPVM_ESYS) {
    lua_pushnil(L);
    lua_pushstring(L, lpvm_errno_atom(err));
    return 2;
  }
  if (rc == LPVM_ENOPROC) {   /* the port has ended */
    lua_pushnil(L);
    lua_pushliteral(L, "closed");
    return 2;
  }
  if (rc == LPVM_EINVAL) {    /* an address that does not parse, a bad port number */
    lua_pushnil(L);
    lua_pushliteral(L, "einval");
    return 2;
  }
  return lmod_fail(L, rc);
}

static int push_ok(lua_State *L, int rc) {
  if (rc != 0) return port_fail(L, rc, 0);
  lua_pushboolean(L, 1);
  return 1;
}

static int push_reason(lua_State *L, const char *reason) {
  lua_pushnil(L);
  lua_pushstring(L, reason);
  return 2;
}

/* A timeout argument in ms: nil or math.huge = forever (-1), as receive's. */
static int64_t opt_ms(lua_State *L, int arg) {
  return lua_isnoneornil(L, arg) ? -1 : lmod_check_ms(L, arg);
}

/* Raise if table t has a key that is not in `known`. */
static void check_keys(lua_State *L, int t, const char *const known[]) {
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    int i = 0;
    while (k && known[i] && strcmp(known[i], k) != 0) i++;
    if (!k || !known[i]) {
      lua_pushfstring(L, "unknown option '%s'", k ? k : luaL_typename(L, -1));
      luaL_argerror(L, t, lua_tostring(L, -1));
    }
  }
}

/* The options table at arg (nil or absent: none): its index, or 0. */
static int opt_table(lua_State *L, int arg, const char *const known[]) {
  if (lua_isnoneornil(L, arg)) return 0;
  luaL_checktype(L, arg, LUA_TTABLE);
  check_keys(L, arg, known);
  return arg;
}

static lua_Integer opt_int(lua_State *L, int t, const char *k, lua_Integer dflt,
                           lua_Integer lo, lua_Integer hi) {
  if (!t || lua_getfield(L, t, k) == LUA_TNIL) {
    if (t) lua_pop(L, 1);
    return dflt;
  }
  int isint;
  lua_Integer v = lua_tointegerx(L, -1, &isint);
  if (!isint || v < lo || v > hi) {
    lua_pushfstring(L, "option '%s' must be an integer %I..%I", k, lo, hi);
    luaL_argerror(L, t, lua_tostring(L, -1));
  }
  lua_pop(L, 1);
  return v;
}

static int opt_flag(lua_State *L, int t, const char *k, int dflt) {
  if (!t || lua_getfield(L, t, k) == LUA_TNIL) {
    if (t) lua_pop(L, 1);
    return dflt;
  }
  int v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

/* true | false | "once" */
static int to_active(lua_State *L, int idx, int arg) {
  if (lua_type(L, idx) == LUA_TBOOLEAN)
    return lua_toboolean(L, idx) ? LPVM_ACTIVE_TRUE : LPVM_ACTIVE_FALSE;
  if (lua_type(L, idx) == LUA_TSTRING && strcmp(lua_tostring(L, idx), "once") == 0)
    return LPVM_ACTIVE_ONCE;
  return luaL_argerror(L, arg, "active must be true, false or \"once\"");
}

/* "raw" | "line" | 0 | 1 | 2 | 4 */
static int to_packet(lua_State *L, int idx, int arg) {
  if (lua_type(L, idx) == LUA_TSTRING) {
    const char *s = lua_tostring(L, idx);
    if (strcmp(s, "raw") == 0) return LPVM_PACKET_RAW;
    if (strcmp(s, "line") == 0) return LPVM_PACKET_LINE;
  } else if (lua_isinteger(L, idx)) {
    lua_Integer n = lua_tointeger(L, idx);
    if (n == 0 || n == 1 || n == 2 || n == 4) return (int)n;
  }
  return luaL_argerror(L, arg, "packet must be \"raw\", \"line\", 0, 1, 2 or 4");
}

#define PORT_OPTS "active", "packet", "high_water", "max_packet"

/* The options every stream port takes, from table t (0: defaults). */
static void port_opts(lua_State *L, int t, lpvm_port_opts *po) {
  *po = (lpvm_port_opts)LPVM_PORT_OPTS_INIT;
  if (!t) return;
  if (lua_getfield(L, t, "active") != LUA_TNIL) po->active = to_active(L, -1, t);
  if (lua_getfield(L, t, "packet") != LUA_TNIL) po->packet = to_packet(L, -1, t);
  lua_pop(L, 2);
  po->high_water = (size_t)opt_int(L, t, "high_water", 0, 1, LUA_MAXINTEGER);
  po->max_packet = (size_t)opt_int(L, t, "max_packet", 0, 1, LUA_MAXINTEGER);
}

/* Data to send: a string, or a table of strings and numbers (concatenated: an
** iolist). The bytes end up at index arg. */
static const char *check_data(lua_State *L, int arg, size_t *len) {
  if (lua_type(L, arg) == LUA_TTABLE) {
    luaL_Buffer b;
    lua_Integer n = luaL_len(L, arg);
    luaL_buffinit(L, &b);
    for (lua_Integer i = 1; i <= n; i++) {
      lua_rawgeti(L, arg, i);
      if (!lua_isstring(L, -1)) luaL_argerror(L, arg, "table of strings expected");
      luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    lua_replace(L, arg);
  }
  if (!lua_isstring(L, arg)) luaL_typeerror(L, arg, "string or table of strings");
  return lua_tolstring(L, arg, len);
}

/* ---- requests that are still queued at a port ------------------------------------------ */

static void pending_set(lua_State *L, lpvm_id port, int on) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &pending_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    if (!on) return;
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &pending_key);
  }
  if (on) lua_pushboolean(L, 1);
  else lua_pushnil(L);
  lua_rawsetp(L, -2, (void *)(uintptr_t)port);
  lua_pop(L, 1);
}

static int pending_get(lua_State *L, lpvm_id port) {
  int on = 0;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &pending_key) == LUA_TTABLE)
    on = lua_rawgetp(L, -1, (void *)(uintptr_t)port) != LUA_TNIL, lua_pop(L, 1);
  lua_pop(L, 1);
  return on;
}

/* ---- waiting for a port's answer ----------------------------------------------------------- */

/* The tags of the messages a port sends (docs/ports.md), as bits of a wait mask. */
enum {
  W_DATA = 1 << 0, W_EOF = 1 << 1, W_ERROR = 1 << 2, W_CLOSED = 1 << 3,
  W_CONNECTED = 1 << 4, W_ACCEPT = 1 << 5, W_READY = 1 << 6, W_OK = 1 << 7,
  W_POSITION = 1 << 8, W_EXIT_STATUS = 1 << 9, W_STDERR = 1 << 10
};

static const struct { const char *name; unsigned bit; } port_tags[] = {
    {"data", W_DATA}, {"eof", W_EOF}, {"error", W_ERROR}, {"closed", W_CLOSED},
    {"connected", W_CONNECTED}, {"tcp_accept", W_ACCEPT}, {"ready", W_READY},
    {"ok", W_OK}, {"position", W_POSITION}, {"exit_status", W_EXIT_STATUS},
    {"stderr", W_STDERR}, {NULL, 0}};

static unsigned tag_bit(const char *s, size_t n) {
  for (int i = 0; port_tags[i].name; i++)
    if (strlen(port_tags[i].name) == n && memcmp(port_tags[i].name, s, n) == 0)
      return port_tags[i].bit;
  return 0;
}

/* The receive predicate: upvalues port, mask, monitor reference (0: none). */
static int wait_pred(lua_State *L) {
  int ok = 0;
  size_t n;
  const char *tag = lua_type(L, 1) == LUA_TSTRING ? lua_tolstring(L, 1, &n) : NULL;
  if (tag && n == 4 && memcmp(tag, "DOWN", 4) == 0) {
    lua_Integer mref = lua_tointeger(L, lua_upvalueindex(3));
    ok = mref != 0 && lmod_to_ref(L, 2) == (uint64_t)mref;
  } else if (tag) {
    unsigned mask = (unsigned)lua_tointeger(L, lua_upvalueindex(2));
    ok = (tag_bit(tag, n) & mask) &&
         lua_touserdata(L, lua_upvalueindex(1)) == lua_touserdata(L, 2) &&
         lua_type(L, 2) == LUA_TLIGHTUSERDATA;
  }
  lua_pushboolean(L, ok);
  return 1;
}

static lua_CFunction receive_fn(void) {
  for (const lmod_fn *f = lmod_msg_fns; f->name; f++)
    if (strcmp(f->name, "receive") == 0) return f->fn;
  return NULL;   /* not reached: lmod_msg.c defines it */
}

/* Push receive(pred, ms) for wait_msg: ready for lua_callk(L, 2, ...). */
static void push_wait(lua_State *L, lpvm_id port, unsigned mask, uint64_t mref, int64_t ms) {
  luaL_checkstack(L, 8, "wait");
  lua_pushcfunction(L, receive_fn());
  lua_pushlightuserdata(L, (void *)(uintptr_t)port);
  lua_pushinteger(L, (lua_Integer)mask);
  lua_pushinteger(L, (lua_Integer)mref);
  lua_pushcclosure(L, wait_pred, 3);
  if (ms < 0) lua_pushnil(L);
  else lua_pushinteger(L, (lua_Integer)ms);
}

/* Wait for the next message of `port` whose tag is in `mask`, or for the DOWN of
** monitor `mref`; ms < 0: forever. Its values are pushed above the current top,
** which k receives as its context (a timeout pushes nil, "timeout"). A k that waits
** again nests one C frame: fine for the bounded two-step waits here (send_try
** loops instead). */
static int wait_msg(lua_State *L, lpvm_id port, unsigned mask, uint64_t mref, int64_t ms,
                    lua_KFunction k) {
  int base = lua_gettop(L);
  push_wait(L, port, mask, mref, ms);
  lua_callk(L, 2, LUA_MULTRET, base, k);
  return k(L, LUA_OK, base);
}

/* The tag of the answer at base + 1 (NULL: the wait timed out). */
static const char *answer(lua_State *L, lua_KContext base) {
  return lua_type(L, (int)base + 1) == LUA_TSTRING ? lua_tostring(L, (int)base + 1) : NULL;
}

/* ---- the caller's mailbox ---------------------------------------------------------------------- */

/* Is m {Tag, Port, ...} with a port tag? Sets *extra to a pid that follows. */
static int from_port(lpvm_msg *m, lpvm_id port, lpvm_id *extra) {
  lpvm_tread r;
  uint32_t arity;
  const char *a;
  size_t n;
  lpvm_id id;
  *extra = 0;
  if (lpvm_tread_init(&r, lpvm_msg_data(m), lpvm_msg_len(m)) != 0 ||
      lpvm_get_tuple(&r, &arity) != 0 || arity < 2 || lpvm_get_atom(&r, &a, &n) != 0 ||
      !tag_bit(a, n) || lpvm_get_pid(&r, &id) != 0 || id != port)
    return 0;
  if (arity == 3 && lpvm_get_pid(&r, extra) != 0) *extra = 0;
  return 1;
}

static int is_down(lpvm_msg *m, uint64_t mref) {
  lpvm_tread r;
  uint32_t arity;
  const char *a;
  size_t n;
  uint64_t ref;
  return lpvm_tread_init(&r, lpvm_msg_data(m), lpvm_msg_len(m)) == 0 &&
         lpvm_get_tuple(&r, &arity) == 0 && arity == 5 && lpvm_get_atom(&r, &a, &n) == 0 &&
         n == 4 && memcmp(a, "DOWN", 4) == 0 && lpvm_get_ref(&r, &ref) == 0 && ref == mref;
}

/* Drop every message `port` sent the caller. A connection a closed listener
** delivered and nobody took is closed too (it is the caller's). Not while a
** receive runs: its save pointer may point into the mailbox (check_proc). */
static void flush_port(lproc *p, lpvm_id port) {
  lpvm_msg *prev = NULL, *m;
  lpvm_id conn;
  while ((m = lpvm_mbox_next(&p->task, prev)) != NULL) {
    if (from_port(m, port, &conn)) {
      lpvm_mbox_take(&p->task, m);
      lpvm_msg_free(m);
      if (conn && lpvm_id_is_port(conn)) lpvm_port_close(&p->task, conn);
    } else {
      prev = m;
    }
  }
}

/* Stop monitor mref; its DOWN may already sit in the mailbox (after demonitor no
** new one comes). */
static void drop_monitor(lproc *p, uint64_t mref) {
  lpvm_demonitor(&p->task, mref);
  lpvm_msg *prev = NULL, *m;
  while ((m = lpvm_mbox_next(&p->task, prev)) != NULL) {
    if (is_down(m, mref)) {
      lpvm_mbox_take(&p->task, m);
      lpvm_msg_free(m);
      return;
    }
    prev = m;
  }
}

/* Monitor `port`, the reference pushed as an integer (so it survives a yield). */
static uint64_t push_monitor(lua_State *L, lproc *p, lpvm_id port) {
  uint64_t mref = 0;
  if (lpvm_monitor(&p->task, port, &mref) != 0) luaL_error(L, "not enough memory");
  lua_pushinteger(L, (lua_Integer)mref);
  return mref;
}

/* ---- spawn and fd ports ---------------------------------------------------------------------- */

/* argv from a table of strings or a shell command line; kept alive at the top. */
static const char **spawn_argv(lua_State *L, int arg) {
  if (lua_type(L, arg) == LUA_TSTRING) {
    const char **v = lua_newuserdatauv(L, 4 * sizeof *v, 0);
    v[0] = "/bin/sh", v[1] = "-c", v[2] = lua_tostring(L, arg), v[3] = NULL;
    return v;
  }
  luaL_argexpected(L, lua_type(L, arg) == LUA_TTABLE, arg, "table or string");
  lua_Integer n = luaL_len(L, arg);
  luaL_argcheck(L, n >= 1 && n < 100000, arg, "the program is missing");
  const char **v = lua_newuserdatauv(L, (size_t)(n + 1) * sizeof *v, 0);
  for (lua_Integer i = 1; i <= n; i++) {
    if (lua_rawgeti(L, arg, i) != LUA_TSTRING) luaL_argerror(L, arg, "arguments must be strings");
    v[i - 1] = lua_tostring(L, -1);   /* kept alive by the table */
    lua_pop(L, 1);
  }
  v[n] = NULL;
  return v;
}

/* Is "K=V" overridden by a key of table t? */
static int env_overridden(lua_State *L, int t, const char *kv) {
  const char *eq = strchr(kv, '=');
  if (!eq) return 1;
  lua_pushlstring(L, kv, (size_t)(eq - kv));
  int has = lua_rawget(L, t) != LUA_TNIL;
  lua_pop(L, 1);
  return has;
}

/* env = {NAME = "value" | false}: the VM's environment with these set or removed
** (Erlang's env option). The strings live in a table left at the top. */
static const char **spawn_env(lua_State *L, int t) {
  int n = 0, k = 0;
  for (char **e = environ; *e; e++) n++;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (lua_type(L, -2) != LUA_TSTRING || (!lua_isstring(L, -1) && !lua_isboolean(L, -1)))
      luaL_error(L, "open_port: env must map names to strings or false");
    lua_pop(L, 1);
    n++;
  }
  lua_createtable(L, n, 0);   /* keeps the "K=V" strings alive */
  const char **v = lua_newuserdatauv(L, (size_t)(n + 1) * sizeof *v, 0);
  lua_rawseti(L, -2, n + 1);
  for (char **e = environ; *e; e++)
    if (!env_overridden(L, t, *e)) v[k++] = *e;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (lua_toboolean(L, -1) && lua_type(L, -1) != LUA_TBOOLEAN) {
      lua_pushfstring(L, "%s=%s", lua_tostring(L, -2), lua_tostring(L, -1));
      v[k++] = lua_tostring(L, -1);
      lua_rawseti(L, -4, k);
    }
    lua_pop(L, 1);
  }
  v[k] = NULL;
  return v;
}

static int stderr_mode(lua_State *L, int t) {
  static const char *const modes[] = {"inherit", "stdout", "pipe", "null", NULL};
  static const int vals[] = {LPVM_STDERR_INHERIT, LPVM_STDERR_TO_STDOUT, LPVM_STDERR_PIPE,
                             LPVM_STDERR_NULL};
  if (!t || lua_getfield(L, t, "stderr") == LUA_TNIL) {
    if (t) lua_pop(L, 1);
    return LPVM_STDERR_INHERIT;
  }
  for (int i = 0; modes[i]; i++)
    if (lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), modes[i]) == 0) {
      lua_pop(L, 1);
      return vals[i];
    }
  return luaL_argerror(L, t, "stderr must be \"inherit\", \"stdout\", \"pipe\" or \"null\"");
}

/* open_port(argv | command [, opts]) -> port | nil, reason */
static int lmod_open_port(lua_State *L) {
  static const char *const known[] = {PORT_OPTS, "stderr", "env", "cwd", NULL};
  lproc *p = lproc_check(L);
  int t = opt_table(L, 2, known);
  lua_settop(L, 2);
  lpvm_spawn_port_opts so = {NULL, NULL, NULL, LPVM_STDERR_INHERIT};
  so.argv = spawn_argv(L, 1);
  so.stderr_mode = stderr_mode(L, t);
  lpvm_port_opts po;
  port_opts(L, t, &po);
  if (t && lua_getfield(L, t, "cwd") != LUA_TNIL) so.cwd = luaL_checkstring(L, -1);
  if (t && lua_getfield(L, t, "env") != LUA_TNIL) {
    luaL_argexpected(L, lua_type(L, -1) == LUA_TTABLE, 2, "env table");
    so.env = spawn_env(L, lua_gettop(L));
  }
  lpvm_id port;
  int rc = lpvm_port_spawn(&p->task, &so, &po, &port);
  if (rc != 0) return port_fail(L, rc, errno);
  lmod_push_pid(L, port);
  return 1;
}

/* fd_port(in_fd, out_fd [, opts]) -> port | nil, reason; nil for a side not used. */
static int lmod_fd_port(lua_State *L) {
  static const char *const known[] = {PORT_OPTS, NULL};
  lproc *p = lproc_check(L);
  int in = (int)luaL_optinteger(L, 1, -1), out = (int)luaL_optinteger(L, 2, -1);
  luaL_argcheck(L, in >= -1, 1, "descriptor expected");
  luaL_argcheck(L, out >= -1, 2, "descriptor expected");
  luaL_argcheck(L, in >= 0 || out >= 0, 1, "at least one descriptor expected");
  lpvm_port_opts po;
  port_opts(L, opt_table(L, 3, known), &po);
  lpvm_id port;
  int rc = lpvm_port_fd(&p->task, in, out, &po, &port);
  if (rc != 0) return port_fail(L, rc, errno);
  lmod_push_pid(L, port);
  return 1;
}

/* ---- stream commands ------------------------------------------------------------------------- */

static int send_k(lua_State *L, int status, lua_KContext base);

/* The answer to a wait for {ready}: 1 to retry the send, 0 if the port is gone
** (nil, "closed" pushed). Leaves the stack as [1] port [2] data [3] options. */
static int send_answer(lua_State *L, lua_KContext base) {
  drop_monitor(lproc_of(L), (uint64_t)lua_tointeger(L, 4));
  const char *tag = answer(L, base);
  int down = tag && strcmp(tag, "DOWN") == 0;
  lua_settop(L, 3);
  if (down) push_reason(L, "closed");
  return !down;
}

/* Stack: [1] port [2] data [3] options. While the port is busy, wait for its
** {ready} (or its end: a monitor) and retry. A loop, not a recursion through the
** continuation: an answer that is already there must not grow the C stack. */
static int send_try(lua_State *L) {
  lproc *p = lproc_of(L);
  lpvm_id port = lmod_to_pid(L, 1);
  for (;;) {
    size_t len;
    const char *data = lua_tolstring(L, 2, &len);
    int rc = lpvm_port_send(&p->task, port, data, len);
    if (rc == LPVM_EINVAL) return luaL_argerror(L, 1, "stream port expected (spawn, fd or tcp)");
    if (rc != LPVM_EBUSY) return push_ok(L, rc);
    if (opt_flag(L, lua_istable(L, 3) ? 3 : 0, "nosuspend", 0)) return push_reason(L, "busy");
    if (p->in_pred || !lua_isyieldable(L)) return push_reason(L, "busy");
    uint64_t mref = push_monitor(L, p, port);   /* [4] */
    int base = lua_gettop(L);
    push_wait(L, port, W_READY, mref, -1);
    lua_callk(L, 2, LUA_MULTRET, base, send_k);
    if (!send_answer(L, base)) return 2;
  }
}

static int send_k(lua_State *L, int status, lua_KContext base) {
  (void)status;
  if (!send_answer(L, base)) return 2;
  return send_try(L);
}

/* port_send(port, data [, {nosuspend = true}]) -> true | nil, "busy" | "closed" */
static int lmod_port_send(lua_State *L) {
  static const char *const known[] = {"nosuspend", NULL};
  lproc_check(L);
  check_port(L, 1);
  check_data(L, 2, &(size_t){0});
  opt_table(L, 3, known);
  lua_settop(L, 3);
  return send_try(L);
}

static int recv_k(lua_State *L, int status, lua_KContext base) {
  (void)status;
  const char *tag = answer(L, base);
  if (!tag) return push_reason(L, "timeout");   /* still pending */
  pending_set(L, lmod_to_pid(L, 1), 0);
  if (strcmp(tag, "data") == 0) {
    lua_pushvalue(L, (int)base + 3);
    return 1;
  }
  if (strcmp(tag, "error") == 0) {
    lua_pushnil(L);
    lua_pushvalue(L, (int)base + 3);
    return 2;
  }
  return push_reason(L, tag);   /* eof, closed */
}

/* recv(port [, n [, timeout]]) -> bytes | nil, "eof" | "closed" | "timeout" | reason.
** For ports with active = false; only the owner gets the answer. */
static int lmod_recv(lua_State *L) {
  lproc *p = check_proc(L, "recv");
  lpvm_id port = check_port(L, 1);
  lua_Integer n = luaL_optinteger(L, 2, 0);
  luaL_argcheck(L, n >= 0, 2, "byte count must be >= 0");
  int64_t ms = opt_ms(L, 3);
  lua_settop(L, 1);
  if (!pending_get(L, port)) {
    int rc = lpvm_port_recv(&p->task, port, (size_t)n);
    if (rc != 0) return port_fail(L, rc, 0);
    pending_set(L, port, 1);
  }
  return wait_msg(L, port, W_DATA | W_EOF | W_ERROR | W_CLOSED, 0, ms, recv_k);
}

/* set_active(port, true | false | "once") -> true | nil, "closed" */
static int lmod_set_active(lua_State *L) {
  lproc *p = lproc_check(L);
  lpvm_id port = check_port(L, 1);
  luaL_checkany(L, 2);
  return push_ok(L, lpvm_port_set_active(&p->task, port, to_active(L, 2, 2)));
}

/* set_packet(port, "raw" | "line" | 1 | 2 | 4) -> true | nil, "closed" */
static int lmod_set_packet(lua_State *L) {
  lproc *p = lproc_check(L);
  lpvm_id port = check_port(L, 1);
  luaL_checkany(L, 2);
  return push_ok(L, lpvm_port_set_packet(&p->task, port, to_packet(L, 2, 2)));
}

/* shutdown(port) -> true: no more writes (after the queue); reading goes on. */
static int lmod_shutdown(lua_State *L) {
  lproc *p = lproc_check(L);
  return push_ok(L, lpvm_port_shutdown(&p->task, check_port(L, 1)));
}

/* controlling_process(port, pid) -> true: only the owner may. */
static int lmod_controlling_process(lua_State *L) {
  lproc *p = lproc_check(L);
  lpvm_id port = check_port(L, 1);
  lpvm_id to = lmod_check_pid(L, 2);
  luaL_argcheck(L, !lpvm_id_is_port(to), 2, "a process expected, got a port");
  return push_ok(L, lpvm_port_controlling_process(&p->task, port, to));
}

/* After the kill: the port is gone, or will be; the caller is not kept waiting
** longer than a second linger time in any case. */
static int close_done_k(lua_State *L, int status, lua_KContext base) {
  (void)status, (void)base;
  lproc *p = lproc_of(L);
  lpvm_id port = lmod_to_pid(L, 1);
  flush_port(p, port);
  pending_set(L, port, 0);
  lua_pushboolean(L, 1);
  return 1;
}

/* Stack: [1] port [2] linger [3] monitor reference. */
static int close_k(lua_State *L, int status, lua_KContext base) {
  lproc *p = lproc_of(L);
  lpvm_id port = lmod_to_pid(L, 1);
  if (!answer(L, base)) {   /* still writing after the linger time: drop the queue */
    lua_settop(L, 3);
    lpvm_unlink(&p->task, port);   /* a killed port would take its owner along */
    lpvm_kill(&p->task, port);
    return wait_msg(L, port, 0, (uint64_t)lua_tointeger(L, 3), lua_tointeger(L, 2),
                    close_done_k);
  }
  return close_done_k(L, status, base);
}

/* port_close(port [, linger_ms]) -> true. Waits until the port has ended (queued
** writes done, at most linger_ms, default 5 s, then dropped) and removes what it
** sent from the caller's mailbox: after it returns, no message of the port is seen. */
static int lmod_port_close(lua_State *L) {
  lproc *p = check_proc(L, "port_close");
  lpvm_id port = check_port(L, 1);
  int64_t linger = lua_isnoneornil(L, 2) ? CLOSE_LINGER_MS : opt_ms(L, 2);
  lua_settop(L, 1);
  lua_pushinteger(L, linger);
  int rc = lpvm_port_close(&p->task, port);
  if (rc != 0 && rc != LPVM_ENOPROC) return port_fail(L, rc, 0);
  uint64_t mref = push_monitor(L, p, port);   /* a dead port: DOWN at once */
  return wait_msg(L, port, 0, mref, linger, close_k);
}

static int lmod_is_port(lua_State *L) {
  lpvm_id id = lmod_to_pid(L, 1);
  lua_pushboolean(L, id != 0 && lpvm_id_is_port(id));
  return 1;
}

/* ---- tcp ----------------------------------------------------------------------------------------- */

static const char *opt_host(lua_State *L, int arg) {
  const char *h = luaL_optstring(L, arg, "127.0.0.1");
  return strcmp(h, "localhost") == 0 ? "127.0.0.1" : h;
}

/* tcp_listen(host, port [, opts]) -> listener, bound_port | nil, reason */
static int lmod_tcp_listen(lua_State *L) {
  static const char *const known[] = {PORT_OPTS, "backlog", "reuseaddr", "v6only", NULL};
  lproc *p = lproc_check(L);
  const char *host = opt_host(L, 1);
  lua_Integer port = luaL_checkinteger(L, 2);
  luaL_argcheck(L, port >= 0 && port <= 65535, 2, "port number 0..65535 expected");
  int t = opt_table(L, 3, known);
  lpvm_tcp_listen_opts lo = LPVM_TCP_LISTEN_OPTS_INIT;
  lo.backlog = (int)opt_int(L, t, "backlog", 0, 0, 65535);
  lo.reuseaddr = opt_flag(L, t, "reuseaddr", 1);
  lo.v6only = opt_flag(L, t, "v6only", 0);
  lpvm_port_opts po;
  port_opts(L, t, &po);
  lpvm_id listener;
  int bound = 0;
  int rc = lpvm_tcp_listen(&p->task, host, (int)port, &lo, &po, &listener, &bound);
  if (rc != 0) return port_fail(L, rc, errno);
  lmod_push_pid(L, listener);
  lua_pushinteger(L, bound);
  return 2;
}

/* Stack: [1] listener [2] timeout [3] monitor reference. */
static int accept_k(lua_State *L, int status, lua_KContext base) {
  (void)status;
  lproc *p = lproc_of(L);
  lpvm_id l = lmod_to_pid(L, 1);
  drop_monitor(p, (uint64_t)lua_tointeger(L, 3));
  const char *tag = answer(L, base);
  if (!tag) return push_reason(L, "timeout");   /* the request stays queued */
  pending_set(L, l, 0);
  if (strcmp(tag, "tcp_accept") == 0) {
    lua_pushvalue(L, (int)base + 3);
    return 1;
  }
  if (strcmp(tag, "error") == 0) {
    lua_pushnil(L);
    lua_pushvalue(L, (int)base + 3);
    return 2;
  }
  return push_reason(L, "closed");   /* DOWN, or {closed} to the owner */
}

/* tcp_accept(listener [, timeout]) -> conn | nil, reason: the caller owns conn.
** tcp_accept(listener, pid) -> true: the connection goes to pid as
** ("tcp_accept", listener, conn), owned by pid. */
static int lmod_tcp_accept(lua_State *L) {
  lproc *p = lproc_check(L);
  lpvm_id l = check_port(L, 1);
  if (lua_type(L, 2) == LUA_TLIGHTUSERDATA) {
    lpvm_id to = lmod_to_pid(L, 2);
    luaL_argcheck(L, !lpvm_id_is_port(to), 2, "a process expected, got a port");
    return push_ok(L, lpvm_tcp_accept(&p->task, l, to));
  }
  check_proc(L, "tcp_accept");
  int64_t ms = opt_ms(L, 2);
  lua_settop(L, 2);
  if (!pending_get(L, l)) {
    int rc = lpvm_tcp_accept(&p->task, l, 0);
    if (rc != 0) return port_fail(L, rc, 0);
    pending_set(L, l, 1);
  }
  uint64_t mref = push_monitor(L, p, l);   /* acceptors need not own the listener */
  return wait_msg(L, l, W_ACCEPT | W_ERROR | W_CLOSED, mref, ms, accept_k);
}

/* Stack: [1] host [2] port [3] opts [4] the connection [5] error reason (stage 2). */
static int connect_k(lua_State *L, int status, lua_KContext base) {
  (void)status;
  lpvm_id conn = lmod_to_pid(L, 4);
  const char *tag = answer(L, base);
  if (!lua_isnil(L, 5)) {   /* the {closed} after an error came: the port is gone */
    lua_pushnil(L);
    lua_pushvalue(L, 5);
    return 2;
  }
  if (tag && strcmp(tag, "connected") == 0) {
    lua_pushvalue(L, 4);
    return 1;
  }
  if (tag && strcmp(tag, "error") == 0) {
    lua_pushvalue(L, (int)base + 3);
    lua_replace(L, 5);
    lua_settop(L, 5);
    return wait_msg(L, conn, W_CLOSED, 0, -1, connect_k);
  }
  return push_reason(L, "closed");
}

/* tcp_connect(host, port [, opts]) -> conn | nil, reason. Blocks the process until
** the connection is up, refused (econnrefused) or opts.timeout ms have passed. */
static int lmod_tcp_connect(lua_State *L) {
  static const char *const known[] = {PORT_OPTS, "timeout", NULL};
  lproc *p = check_proc(L, "tcp_connect");
  const char *host = opt_host(L, 1);
  lua_Integer port = luaL_checkinteger(L, 2);
  luaL_argcheck(L, port > 0 && port <= 65535, 2, "port number 1..65535 expected");
  int t = opt_table(L, 3, known);
  lua_Integer ms = opt_int(L, t, "timeout", 0, 0, LUA_MAXINTEGER);
  lpvm_port_opts po;
  port_opts(L, t, &po);
  lpvm_id conn;
  int rc = lpvm_tcp_connect(&p->task, host, (int)port, (uint64_t)ms, &po, &conn);
  if (rc != 0) return port_fail(L, rc, errno);
  lua_settop(L, 3);
  lmod_push_pid(L, conn);   /* [4] */
  lua_pushnil(L);           /* [5] */
  return wait_msg(L, conn, W_CONNECTED | W_ERROR | W_CLOSED, 0, -1, connect_k);
}

/* ---- files ------------------------------------------------------------------------------------------ */

/* file_open(path [, mode]) -> file | nil, reason; mode as io.open ("r" default). */
static int lmod_file_open(lua_State *L) {
  lproc *p = lproc_check(L);
  const char *path = luaL_checkstring(L, 1);
  const char *mode = luaL_optstring(L, 2, "r");
  static const char *const modes[] = {"r", "r+", "w", "w+", "a", "a+", "rb", "r+b", "wb",
                                      "w+b", "ab", "a+b", NULL};
  int ok = 0;
  for (int i = 0; modes[i] && !ok; i++) ok = strcmp(modes[i], mode) == 0;
  luaL_argcheck(L, ok, 2, "invalid mode");
  lpvm_id port;
  int rc = lpvm_file_open(&p->task, path, mode, 0, &port);
  if (rc != 0) return port_fail(L, rc, errno);
  lmod_push_pid(L, port);
  return 1;
}

/* Drop the monitor a file command waited under, and its DOWN if it already came. */
static void file_unmonitor(lproc *p, uint64_t mref) {
  lpvm_demonitor(&p->task, mref);
  for (lpvm_msg *m = lpvm_mbox_next(&p->task, NULL); m; m = lpvm_mbox_next(&p->task, m))
    if (is_down(m, mref)) {
      lpvm_mbox_take(&p->task, m);
      lpvm_msg_free(m);
      break;
    }
}

/* The answer of a file command: data | true | position | nil, reason. Stack: [base]
** the monitor reference (a port that dies before answering is "closed"). */
static int file_k(lua_State *L, int status, lua_KContext base) {
  (void)status;
  file_unmonitor(lproc_of(L), (uint64_t)lua_tointeger(L, (int)base));
  const char *tag = answer(L, base);
  if (!tag || strcmp(tag, "DOWN") == 0) return push_reason(L, "closed");
  if (strcmp(tag, "data") == 0 || strcmp(tag, "position") == 0) {
    lua_pushvalue(L, (int)base + 3);
    return 1;
  }
  if (strcmp(tag, "ok") == 0) {
    lua_pushboolean(L, 1);
    return 1;
  }
  if (strcmp(tag, "error") == 0) {
    lua_pushnil(L);
    lua_pushvalue(L, (int)base + 3);
    return 2;
  }
  return push_reason(L, tag);   /* eof, closed */
}

static int file_wait(lua_State *L, lpvm_id f, int rc, unsigned mask) {
  if (rc != 0) return port_fail(L, rc, 0);
  /* Watch the port: one that dies with the command unanswered must not leave the
  ** caller waiting forever. */
  uint64_t mref = push_monitor(L, lproc_of(L), f);
  return wait_msg(L, f, mask | W_ERROR | W_CLOSED, mref, -1, file_k);
}

/* file_read(file, n) -> bytes (fewer at the end) | nil, "eof" | nil, reason */
static int lmod_file_read(lua_State *L) {
  lproc *p = check_proc(L, "file_read");
  lpvm_id f = check_port(L, 1);
  lua_Integer n = luaL_checkinteger(L, 2);
  luaL_argcheck(L, n >= 0 && n <= (64 << 20), 2, "byte count 0..64 MiB expected");
  lua_settop(L, 1);
  return file_wait(L, f, lpvm_file_read(&p->task, f, (size_t)n), W_DATA | W_EOF);
}

/* file_write(file, data) -> true | nil, reason */
static int lmod_file_write(lua_State *L) {
  lproc *p = check_proc(L, "file_write");
  lpvm_id f = check_port(L, 1);
  size_t len;
  const char *data = check_data(L, 2, &len);
  int rc = lpvm_file_write(&p->task, f, data, len);
  lua_settop(L, 1);
  return file_wait(L, f, rc, W_OK);
}

/* file_seek(file [, whence [, offset]]) -> position | nil, reason; as file:seek. */
static int lmod_file_seek(lua_State *L) {
  static const char *const whences[] = {"set", "cur", "end", NULL};
  lproc *p = check_proc(L, "file_seek");
  lpvm_id f = check_port(L, 1);
  int whence = luaL_checkoption(L, 2, "cur", whences);
  lua_Integer off = luaL_optinteger(L, 3, 0);
  lua_settop(L, 1);
  return file_wait(L, f, lpvm_file_seek(&p->task, f, off, whence), W_POSITION);
}

const lmod_fn lmod_port_fns[] = {
    {"open_port", lmod_open_port},
    {"fd_port", lmod_fd_port},
    {"port_send", lmod_port_send},
    {"tcp_send", lmod_port_send},
    {"recv", lmod_recv},
    {"set_active", lmod_set_active},
    {"set_packet", lmod_set_packet},
    {"shutdown", lmod_shutdown},
    {"controlling_process", lmod_controlling_process},
    {"port_close", lmod_port_close},
    {"is_port", lmod_is_port},
    {"tcp_listen", lmod_tcp_listen},
    {"tcp_accept", lmod_tcp_accept},
    {"tcp_connect", lmod_tcp_connect},
    {"file_open", lmod_file_open},
    {"file_read", lmod_file_read},
    {"file_write", lmod_file_write},
    {"file_seek", lmod_file_seek},
    {"file_close", lmod_port_close},
    {NULL, NULL}};
