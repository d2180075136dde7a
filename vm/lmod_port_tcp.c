/*
** lmod_port_tcp.c -- TCP ports: tcp_listen, tcp_accept, tcp_connect.
*/
#include <errno.h>
#include <lauxlib.h>
#include <string.h>

#include "lpvm/port.h"
#include "vm/lmod_port_int.h"

static const char *opt_host(lua_State *L, int arg) {
  const char *h = lmod_opt_cstr(L, arg, "127.0.0.1", "host");
  return strcmp(h, "localhost") == 0 ? "127.0.0.1" : h;
}

/* tcp_listen(host, port [, opts]) -> listener, bound_port | nil, reason */
int lmod_tcp_listen(lua_State *L) {
  static const char *const known[] = {LPORT_OPTS, "backlog", "reuseaddr", "v6only", NULL};
  lproc *p = lproc_check(L);
  const char *host = opt_host(L, 1);
  lua_Integer port = luaL_checkinteger(L, 2);
  luaL_argcheck(L, port >= 0 && port <= 65535, 2, "port number 0..65535 expected");
  int t = lport_opt_table(L, 3, known);
  lpvm_tcp_listen_opts lo = LPVM_TCP_LISTEN_OPTS_INIT;
  lo.backlog = (int)lport_opt_int(L, t, "backlog", 0, 0, 65535);
  lo.reuseaddr = lport_opt_flag(L, t, "reuseaddr", 1);
  lo.v6only = lport_opt_flag(L, t, "v6only", 0);
  lpvm_port_opts po;
  lport_opts(L, t, &po);
  lpvm_id listener;
  int bound = 0;
  int rc = lpvm_tcp_listen(&p->task, host, (int)port, &lo, &po, &listener, &bound);
  if (rc != 0) return lport_fail(L, rc, errno);
  lmod_push_pid(L, listener);
  lua_pushinteger(L, bound);
  return 2;
}

/* Stack: [1] listener [2] timeout [3] monitor reference. */
static int accept_k(lua_State *L, int status, lua_KContext base) {
  (void)status;
  lproc *p = lproc_of(L);
  lpvm_id l = lmod_to_pid(L, 1);
  lport_drop_monitor(p, (uint64_t)lua_tointeger(L, 3));
  const char *tag = lport_answer(L, base);
  if (!tag) return lport_reason(L, "timeout");   /* the request stays queued */
  lport_pending_set(L, l, 0);
  int n = lport_value(L, base, tag, strcmp(tag, "tcp_accept") == 0);
  return n ? n : lport_reason(L, "closed");   /* DOWN, or {closed} to the owner */
}

/* tcp_accept(listener [, timeout]) -> conn | nil, reason: the caller owns conn.
** tcp_accept(listener, pid) -> true: the connection goes to pid as
** ("tcp_accept", listener, conn), owned by pid. */
int lmod_tcp_accept(lua_State *L) {
  lproc *p = lproc_check(L);
  lpvm_id l = lport_check_kind(L, 1, lport_listener, "tcp listener");
  if (lua_type(L, 2) == LUA_TLIGHTUSERDATA) {
    lpvm_id to = lmod_check_pid(L, 2);   /* a reference is light userdata too */
    luaL_argcheck(L, !lpvm_id_is_port(to), 2, "a process expected, got a port");
    return lport_ok(L, lpvm_tcp_accept(&p->task, l, to));
  }
  lport_check_proc(L, "tcp_accept");
  int64_t ms = lport_opt_ms(L, 2);
  lua_settop(L, 2);
  if (!lport_pending_get(L, l)) {
    int rc = lpvm_tcp_accept(&p->task, l, 0);
    if (rc != 0) return lport_fail(L, rc, 0);
    lport_pending_set(L, l, 1);
  }
  uint64_t mref = lport_push_monitor(L, p, l);   /* acceptors need not own the listener */
  return lport_wait(L, l, LPORT_W_ACCEPT | LPORT_W_ERROR | LPORT_W_CLOSED, mref, ms, accept_k);
}

/* Stack: [1] host [2] port [3] opts [4] the connection [5] error reason (stage 2). */
static int connect_k(lua_State *L, int status, lua_KContext base) {
  (void)status;
  lpvm_id conn = lmod_to_pid(L, 4);
  const char *tag = lport_answer(L, base);
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
    return lport_wait(L, conn, LPORT_W_CLOSED, 0, -1, connect_k);
  }
  return lport_reason(L, "closed");
}

/* tcp_connect(host, port [, opts]) -> conn | nil, reason. Blocks the process until
** the connection is up, refused (econnrefused) or opts.timeout ms have passed. */
int lmod_tcp_connect(lua_State *L) {
  static const char *const known[] = {LPORT_OPTS, "timeout", NULL};
  lproc *p = lport_check_proc(L, "tcp_connect");
  const char *host = opt_host(L, 1);
  lua_Integer port = luaL_checkinteger(L, 2);
  luaL_argcheck(L, port > 0 && port <= 65535, 2, "port number 1..65535 expected");
  int t = lport_opt_table(L, 3, known);
  lua_Integer ms = lport_opt_int(L, t, "timeout", 0, 0, LUA_MAXINTEGER);
  lpvm_port_opts po;
  lport_opts(L, t, &po);
  lpvm_id conn;
  int rc = lpvm_tcp_connect(&p->task, host, (int)port, (uint64_t)ms, &po, &conn);
  if (rc != 0) return lport_fail(L, rc, errno);
  lua_settop(L, 3);
  lmod_push_pid(L, conn);   /* [4] */
  lua_pushnil(L);           /* [5] */
  return lport_wait(L, conn, LPORT_W_CONNECTED | LPORT_W_ERROR | LPORT_W_CLOSED, 0, -1, connect_k);
}
