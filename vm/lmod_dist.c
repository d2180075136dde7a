/*
** lmod_dist.c -- distribution in the lpvm module: net_start, net_stop, node, nodes,
** connect, disconnect, monitor_node (docs/distribution.md).
**
** connect waits for the handshake as net_kernel:connect_node does: it asks the
** connection for {nodeup | nodedown, Node} and receives it (lpvm/dist.lua), so the
** process blocks like any receive and the VM does not.
*/
#include <lauxlib.h>
#include <string.h>

#include "lpvm/dist.h"
#include "vm/lproc_int.h"

static int opt_field(lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  return lua_type(L, -1);
}

/* net_start(name [, {cookie=, longnames=, listen=, ticktime=}]) -> true | nil, reason */
static int lmod_net_start(lua_State *L) {
  lpvm_dist_opts o = {0};
  o.name = luaL_checkstring(L, 1);
  o.hidden = 1;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    if (opt_field(L, 2, "cookie") != LUA_TNIL) o.cookie = luaL_checkstring(L, -1);
    if (opt_field(L, 2, "listen") != LUA_TNIL) o.listen = luaL_checkstring(L, -1);
    if (opt_field(L, 2, "longnames") != LUA_TNIL) o.longnames = lua_toboolean(L, -1);
    if (opt_field(L, 2, "ticktime") != LUA_TNIL) {
      lua_Integer t = luaL_checkinteger(L, -1);
      luaL_argcheck(L, t >= 1 && t <= 3600, 2, "ticktime must be 1..3600 seconds");
      o.ticktime = (unsigned)t;
    }
  }
  int rc = lpvm_dist_start(&o);
  if (rc == LPVM_ESTATE) { lua_pushnil(L); lua_pushliteral(L, "already_started"); return 2; }
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
  if (lua_toboolean(L, 2)) {
    lpvm_tbuf b;
    lpvm_tbuf_init(&b);
    lpvm_put_tuple(&b, 2);
    lpvm_put_atom(&b, "wait");
    lpvm_put_pid(&b, p->task.id);
    if (!b.err) lpvm_send(&p->task, c, b.data, b.len);
    lpvm_tbuf_free(&b);
  }
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
** (at once if it cannot be made); flag false removes one such monitor. */
static int lmod_monitor_node(lua_State *L) {
  lproc *p = lproc_check(L);
  const char *n = check_node(L, 1);
  int on = lua_isnoneornil(L, 2) ? 1 : lua_toboolean(L, 2);
  lpvm_id c = lpvm_dist_conn(n, on);
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  if (c) {
    lpvm_put_tuple(&b, 3);
    lpvm_put_atom(&b, "monitor_node");
    lpvm_put_pid(&b, p->task.id);
    lpvm_put_atom(&b, on ? "true" : "false");
    lpvm_send(&p->task, c, b.data, b.len);
  } else if (on) {   /* no connection can be made: nodedown at once, as Erlang */
    lpvm_put_tuple(&b, 2);
    lpvm_put_atom(&b, "nodedown");
    lpvm_put_atom(&b, n);
    lpvm_send(&p->task, p->task.id, b.data, b.len);
  }
  lpvm_tbuf_free(&b);
  lua_pushboolean(L, 1);
  return 1;
}

const lmod_fn lmod_dist_fns[] = {
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
