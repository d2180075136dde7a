/*
** lmod_dist.c -- distribution in the lpvm module: net_start, net_stop, node, nodes,
** connect, disconnect, monitor_node (docs/distribution.md).
**
** connect waits for the handshake as net_kernel:connect_node does: it asks the
** connection for {nodeup | nodedown, Node} and receives it (lpvm/dist.lua), so the
** process blocks like any receive and the VM does not.
*/
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/dist.h"
#include "vm/lproc_int.h"
#include "vm/lterm.h"

/* ---- a peer's spawn requests ------------------------------------------------------------- */

/* A read-only builder over a complete term (lproc_start_new copies it). */
static lpvm_tbuf view_of(const uint8_t *term, size_t len) {
  lpvm_tbuf v;
  v.data = (uint8_t *)term;
  v.len = v.cap = len;
  v.err = 0;
  return v;
}

/* The next element of a tuple being read, as a complete term (malloc'd) in *v. */
static int element(lpvm_tread *r, lpvm_tbuf *v) {
  const uint8_t *at = r->p;
  if (lpvm_skip(r)) return LPVM_EBADTERM;
  size_t n = (size_t)(r->p - at);
  uint8_t *w = malloc(n + 1);
  if (!w) return LPVM_ENOMEM;
  w[0] = 131;
  memcpy(w + 1, at, n);
  *v = view_of(w, n + 1);
  return 0;
}

/* A function spawned from another lpvm node (lpvm.spawn({node = N}, fn, ...)) is
** erlang:apply(Fun, Args), as erl sends spawn(N, Fun): args is {Fun, Args}, Fun
** the function as lfun.c encodes it, Args the arguments as a message. Refused
** (LPVM_EPERM) when this node does not take code from others. */
static lproc_start *apply_start(const uint8_t *args, size_t alen, int *rc) {
  lpvm_tread r;
  uint32_t n;
  lpvm_tbuf fun = {0}, a = {0};
  lproc_start *s = NULL;
  *rc = LPVM_EBADTERM;
  if (!lterm_remote_funs_trusted()) *rc = LPVM_EPERM;
  else if (lpvm_tread_init(&r, args, alen) == 0 && lpvm_get_tuple(&r, &n) == 0 && n == 2 &&
           (*rc = element(&r, &fun)) == 0 && (*rc = element(&r, &a)) == 0) {
    s = lproc_start_new(LS_TERM, "", 0, &fun, &a);
    *rc = s ? 0 : LPVM_ENOMEM;
  }
  free(fun.data);
  free(a.data);
  return s;
}

/* erlang:spawn(Node, M, F, A) runs require(M)[F](A...); rpc:call and rpc:cast arrive
** as erpc's execute_call and execute_cast, which lpvm.erpc (vm/lib/lpvm/erpc.lua)
** provides. */
static int d_spawn(lpvm_task *creator, const char *mod, size_t ml, const char *fn,
                   size_t fl, const uint8_t *args, size_t alen, lpvm_id *id) {
  if (ml == 4 && !memcmp(mod, "erpc", 4) && fl == 12 &&
      (!memcmp(fn, "execute_call", 12) || !memcmp(fn, "execute_cast", 12)))
    mod = "lpvm.erpc", ml = 9;
  lproc_start *s = NULL;
  if (ml == 6 && !memcmp(mod, "erlang", 6) && fl == 5 && !memcmp(fn, "apply", 5)) {
    int rc;
    s = apply_start(args, alen, &rc);
    if (!s) return rc;
  } else {
    lpvm_tbuf up, a = view_of(args, alen);
    lpvm_tbuf_init(&up);
    lpvm_put_binary(&up, fn, fl);
    if (!up.err) s = lproc_start_new(LS_MODULE, mod, ml, &up, &a);
    lpvm_tbuf_free(&up);
    if (!s) return LPVM_ENOMEM;
  }
  s->remote = 1;
  s->max_heap = lproc_cfg.max_heap;
  s->creator = creator->id;
  s->wait_marker = 1;
  lpvm_spawn_opts o = LPVM_SPAWN_OPTS_INIT;
  o.thread = lproc_cfg.threads ? 1 : 0;
  return lproc_spawn(NULL, s, &o, id);
}

static void d_release(lpvm_task *creator, lpvm_id id) { lproc_release(creator, id); }

static const lpvm_dist_spawner spawner = {d_spawn, d_release};

void lmod_dist_install(void) { lpvm_dist_set_spawner(&spawner); }

static int opt_field(lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  return lua_type(L, -1);
}

/* net_start(name [, {cookie=, longnames=, listen=, ticktime=, remote_code=,
** max_message=}]) -> true |
** nil, reason; remote_code = false is lpvm --no-remote-code. A name the node could not
** be reached by (empty, a second '@', a NUL, too long), a cookie that does not fit and
** an unknown option are mistakes and raise. remote_code is set before the node
** listens (no peer may come in trusted first) and put back if it does not start. */
static int lmod_net_start(lua_State *L) {
  static const char *const known[] = {"cookie", "listen", "longnames", "ticktime",
                                      "remote_code", "max_message", NULL};
  lpvm_dist_opts o = {0};
  size_t nl, cl;
  o.name = luaL_checklstring(L, 1, &nl);
  luaL_argcheck(L, strlen(o.name) == nl, 1, "node name must not contain a NUL byte");
  o.hidden = 1;
  int remote_code = -1;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    lmod_check_keys(L, 2, known, "net_start option");
    if (opt_field(L, 2, "cookie") != LUA_TNIL) {
      o.cookie = luaL_checklstring(L, -1, &cl);
      luaL_argcheck(L, strlen(o.cookie) == cl && cl <= 255, 2,
                    "cookie must be at most 255 bytes without NUL");
    }
    if (opt_field(L, 2, "listen") != LUA_TNIL) o.listen = luaL_checkstring(L, -1);
    if (opt_field(L, 2, "longnames") != LUA_TNIL) o.longnames = lua_toboolean(L, -1);
    if (opt_field(L, 2, "remote_code") != LUA_TNIL) remote_code = lua_toboolean(L, -1);
    if (opt_field(L, 2, "ticktime") != LUA_TNIL) {   /* (argument #2, not the field) */
      lua_Integer t = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
      luaL_argcheck(L, t >= 1 && t <= 3600, 2, "ticktime must be 1..3600 seconds");
      o.ticktime = (unsigned)t;
    }
    if (opt_field(L, 2, "max_message") != LUA_TNIL) {
      lua_Integer m = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
      luaL_argcheck(L, m >= 1 && m <= (lua_Integer)UINT32_MAX, 2,
                    "max_message must be 1..4294967295 bytes");
      o.max_message = (size_t)m;
    }
  }
  lmod_dist_install();
  int trusted = lterm_remote_funs_trusted();
  if (remote_code >= 0) lterm_trust_remote_funs(remote_code);
  int rc = lpvm_dist_start(&o);
  if (rc) lterm_trust_remote_funs(trusted);
  if (rc == LPVM_ESTATE) { lua_pushnil(L); lua_pushliteral(L, "already_started"); return 2; }
  if (rc == LPVM_EINVAL)   /* the cookie was checked above: the name is wrong */
    return luaL_argerror(L, 1, "node name expected (name or name@host: one '@', "
                               "a name part of 1..200 bytes, a host)");
  if (rc) return lmod_fail(L, rc);
  lua_pushboolean(L, 1);
  return 1;
}

static int lmod_net_stop(lua_State *L) {
  int rc = lpvm_dist_stop();
  if (rc) { lua_pushnil(L); lua_pushliteral(L, "not_started"); return 2; }
  lua_pushboolean(L, 1);
  return 1;
}

static int lmod_node(lua_State *L) {
  lua_pushstring(L, lpvm_node_name());
  return 1;
}

static void add_node(const char *node, void *ud) {
  lua_State *L = ud;
  lua_pushstring(L, node);
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
}

static int lmod_nodes(lua_State *L) {
  lua_newtable(L);
  lpvm_dist_nodes(add_node, L);
  return 1;
}

static const char *check_node(lua_State *L, int arg) {
  const char *n = luaL_checkstring(L, arg);
  luaL_argcheck(L, strchr(n, '@') != NULL, arg, "node name (name@host) expected");
  return n;
}

/* _dist_conn(node [, wait]) -> the connection task (started), or nil, reason; with
** wait, the connection answers {nodeup | nodedown, Node} to the caller. */
static int lmod_dist_conn(lua_State *L) {
  lproc *p = lproc_check(L);
  const char *n = check_node(L, 1);
  if (strcmp(n, lpvm_node_name()) == 0) { lua_pushboolean(L, 1); return 1; }
  lpvm_id c = lpvm_dist_conn(n, 1);
  if (!c) {
    lua_pushnil(L);
    lua_pushstring(L, strcmp(lpvm_node_name(), "nonode@nohost") ? "noconnection"
                                                                : "not_distributed");
    return 2;
  }
  if (lua_toboolean(L, 2)) lpvm_dist_wait(p->task.id, n);
  lmod_push_pid(L, c);
  return 1;
}

static int connect_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status, (void)ctx;
  return lua_gettop(L);
}

/* connect(node) -> true | false: the handshake's outcome (it may wait). */
static int lmod_connect(lua_State *L) {
  check_node(L, 1);
  lua_settop(L, 1);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "lpvm.dist");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "connect");
  lua_replace(L, -2);
  lua_insert(L, 1);
  lua_callk(L, 1, LUA_MULTRET, 0, connect_k);
  return connect_k(L, LUA_OK, 0);
}

static int lmod_disconnect(lua_State *L) {
  lua_pushboolean(L, lpvm_dist_disconnect(check_node(L, 1)) == 0);
  return 1;
}

/* monitor_node(node [, flag]): {"nodedown", node} arrives when the connection goes
** (at once if it cannot be made); flag false removes one such monitor. This node,
** once distributed, never goes down for its own processes (erl says nothing either):
** there is no connection to it, and subscribing answered nodedown at once. */
static int lmod_monitor_node(lua_State *L) {
  lproc *p = lproc_check(L);
  const char *n = check_node(L, 1);
  int on = lua_isnoneornil(L, 2) ? 1 : lua_toboolean(L, 2);
  if (strcmp(n, lpvm_node_name()) != 0 || strcmp(n, "nonode@nohost") == 0)
    lpvm_dist_monitor_node(p->task.id, n, on);
  lua_pushboolean(L, 1);
  return 1;
}

/* ---- spawning on another node ---------------------------------------------------------- */

static int spawn_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  return lua_gettop(L) - (int)ctx;
}

/* The argument list of a spawn request: [A1, ..., An] for a module; for a function,
** [Fun, Args] (erlang:apply's, see apply_start), which keeps a message's shape for
** the arguments, functions in them included. Raises on a value that cannot travel. */
static void spawn_args(lua_State *L, int top, lpvm_tbuf *b) {
  char err[LTERM_ERRSZ];
  int rc = 0, i = 3;
  lpvm_tbuf_init(b);
  if (lua_type(L, 2) == LUA_TFUNCTION) {
    lpvm_tbuf t;
    lpvm_put_list(b, 2);
    for (int k = 0; k < 2 && rc == 0; k++) {
      lpvm_tbuf_init(&t);
      rc = k == 0 ? lterm_put(L, 2, &t, err) : lterm_put_values(L, 3, top - 2, &t, err);
      if (rc == 0) lpvm_put_term(b, t.data, t.len);
      lpvm_tbuf_free(&t);
      if (rc != 0) i = k == 0 ? 2 : 3;
    }
  } else {
    lpvm_put_list(b, (uint32_t)(top - 2));
    for (; i <= top && rc == 0; i++) rc = lterm_put(L, i, b, err);
  }
  lpvm_put_nil(b);
  if (rc == 0) return;
  lpvm_tbuf_free(b);
  if (i == 2) luaL_error(L, "spawn: %s", err);
  luaL_error(L, "spawn: argument %s", err);
}

/* spawn({node = N [, fn = F] [, link = true]}, "mod" | f, args...): a spawn request;
** waits for the answer (lpvm.dist.spawn_wait): pid, or nil and the reason. */
int lmod_dist_spawn(lua_State *L, int link) {
  lproc *p = lproc_check(L);
  lua_getfield(L, 1, "node");
  const char *node = luaL_checkstring(L, -1);
  lua_getfield(L, 1, "fn");
  const char *fn = lua_isnil(L, -1) ? "main" : luaL_checkstring(L, -1);
  int has_fn = !lua_isnil(L, -1);
  lua_pop(L, 2);
  luaL_argcheck(L, strchr(node, '@') != NULL, 1, "option 'node' must be name@host");
  const char *mod;
  if (lua_type(L, 2) == LUA_TFUNCTION) {   /* a closure: erlang:apply(Fun, Args) there */
    luaL_argcheck(L, !lua_iscfunction(L, 2), 2, "cannot spawn a C function");
    luaL_argcheck(L, !has_fn, 1, "option 'fn' goes with a module name, not a function");
    mod = "erlang", fn = "apply";
  } else if (lua_type(L, 2) == LUA_TSTRING) {
    mod = lua_tostring(L, 2);
  } else {
    return luaL_typeerror(L, 2, "function or module name");
  }
  int top = lua_gettop(L);
  lpvm_tbuf b;
  spawn_args(L, top, &b);
  uint64_t ref = 0;
  int rc = b.err ? b.err : lpvm_dist_spawn_request(&p->task, node, mod, fn, b.data, b.len,
                                                   link ? LPVM_DIST_SPAWN_LINK : 0, &ref);
  lpvm_tbuf_free(&b);
  if (rc == LPVM_ENOPROC) { lua_pushnil(L); lua_pushliteral(L, "noconnection"); return 2; }
  if (rc) return lmod_fail(L, rc);
  int base = lua_gettop(L);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "lpvm.dist");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "spawn_wait");
  lua_remove(L, -2);
  lua_pushstring(L, node);
  lmod_push_ref(L, ref);
  lua_callk(L, 2, LUA_MULTRET, base, spawn_k);
  return spawn_k(L, LUA_OK, base);
}

/* _erpc_result(ref, ok, value): erpc's exit reason {Ref, return, Value} or
** {Ref, error, Value, []}, as a value lpvm.exit passes on unchanged. */
static int lmod_erpc_result(lua_State *L) {
  char err[LTERM_ERRSZ];
  int ok = lua_toboolean(L, 2);
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, ok ? 3 : 4);
  if (lterm_put(L, 1, &b, err) != 0) { lpvm_tbuf_free(&b); return luaL_error(L, "%s", err); }
  lpvm_put_atom(&b, ok ? "return" : "error");
  if (lterm_put(L, 3, &b, err) != 0) {
    lpvm_tbuf_free(&b);
    lpvm_tbuf_init(&b);
    lpvm_put_tuple(&b, 4);
    lterm_put(L, 1, &b, err);
    lpvm_put_atom(&b, "error");
    lpvm_put_binary(&b, "result cannot travel", 20);
    ok = 0;
  }
  if (!ok) lpvm_put_nil(&b);
  if (b.err) { lpvm_tbuf_free(&b); return luaL_error(L, "not enough memory"); }
  lterm_push_foreign(L, b.data, b.len);
  lpvm_tbuf_free(&b);
  return 1;
}

const lmod_fn lmod_dist_fns[] = {
  {"_erpc_result", lmod_erpc_result},
  {"net_start", lmod_net_start},
  {"net_stop", lmod_net_stop},
  {"node", lmod_node},
  {"nodes", lmod_nodes},
  {"connect", lmod_connect},
  {"disconnect", lmod_disconnect},
  {"monitor_node", lmod_monitor_node},
  {"_dist_conn", lmod_dist_conn},
  {NULL, NULL}
};
