/*
** lmod_port_stream.c -- the calls every stream port takes: port_send, recv, set_active,
** set_packet, shutdown, controlling_process, port_close, is_port.
*/
#include <lauxlib.h>
#include <string.h>

#include "lpvm/port.h"
#include "vm/lmod_port_int.h"

#define CLOSE_LINGER_MS 5000           /* port_close: then the queue is dropped */
#define CLOSE_KILL_WAIT_MS 1000        /* port_close: at least this for a killed port's end */

static int send_k(lua_State *L, int status, lua_KContext base);

/* The answer to a wait for {ready}: 1 to retry the send, 0 if the port is gone
** (nil, "closed" pushed). Leaves the stack as [1] port [2] data [3] options. */
static int send_answer(lua_State *L, lua_KContext base) {
  lport_drop_monitor(lproc_of(L), (uint64_t)lua_tointeger(L, 4));
  const char *tag = lport_answer(L, base);
  int down = tag && strcmp(tag, "DOWN") == 0;
  lua_settop(L, 3);
  if (down) lport_reason(L, "closed");
  return !down;
}

/* Stack: [1] port [2] data [3] options. While the port is busy, wait for its
** {ready} (or its end: a monitor) and retry. A loop, not a recursion through the
** continuation: an answer that is already there must not grow the C stack. */
static int send_try(lua_State *L) {
  lproc *p = lproc_of(L);
  lpvm_id port = lmod_to_pid(L, 1);
  for (;;) {
    size_t len, off;
    struct lpvm_bin *bin = lbin_to(L, 2, &off, &len);   /* a binary goes by reference */
    const char *data = bin ? NULL : lua_tolstring(L, 2, &len);
    int rc = bin ? lpvm_port_send_bin(&p->task, port, bin, off, len)
                 : lpvm_port_send(&p->task, port, data, len);
    if (rc == LPVM_EINVAL) return luaL_argerror(L, 1, "stream port expected (spawn, fd or tcp)");
    if (rc != LPVM_EBUSY) return lport_ok(L, rc);
    if (lport_opt_flag(L, lua_istable(L, 3) ? 3 : 0, "nosuspend", 0))
      return lport_reason(L, "busy");
    if (p->in_pred || !lua_isyieldable(L)) return lport_reason(L, "busy");
    uint64_t mref = lport_push_monitor(L, p, port);   /* [4] */
    int base = lua_gettop(L);
    lport_push_wait(L, port, LPORT_W_READY, mref, -1);
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
int lmod_port_send(lua_State *L) {
  static const char *const known[] = {"nosuspend", NULL};
  lproc_check(L);
  lport_check_kind(L, 1, lport_stream, "stream port");
  lport_check_data(L, 2, &(size_t){0});
  lport_opt_table(L, 3, known);
  lua_settop(L, 3);
  return send_try(L);
}

/* After a timeout: the port's one answer to the withdrawn request. recv_cancelled is
** the timeout; data, eof or an error that had gone before the withdrawal are the
** answer (they came in time for the port, if not for the wait). */
static int cancel_k(lua_State *L, int status, lua_KContext base) {
  (void)status;
  const char *tag = lport_answer(L, base);
  lport_pending_set(L, lmod_to_pid(L, 1), 0);
  if (!tag || strcmp(tag, "recv_cancelled") == 0) return lport_reason(L, "timeout");
  int n = lport_value(L, base, tag, strcmp(tag, "data") == 0);
  return n ? n : lport_reason(L, tag);   /* eof, closed */
}

static int recv_k(lua_State *L, int status, lua_KContext base) {
  (void)status;
  const char *tag = lport_answer(L, base);
  lpvm_id port = lmod_to_pid(L, 1);
  if (!tag) {
    /* Timed out: withdraw the request (Erlang's recv leaves the bytes in the port),
    ** so the next recv asks for its own n instead of taking this one's answer. The
    ** port answers at once, or has ended (its closed is in the mailbox). */
    lproc *p = lproc_check(L);
    lua_settop(L, 1);
    if (lpvm_port_recv_cancel(&p->task, port) != 0) return lport_reason(L, "timeout");
    return lport_wait(L, port, LPORT_W_DATA | LPORT_W_EOF | LPORT_W_ERROR | LPORT_W_CLOSED |
                      LPORT_W_CANCELLED, 0, -1, cancel_k);
  }
  lport_pending_set(L, port, 0);
  int n = lport_value(L, base, tag, strcmp(tag, "data") == 0);
  return n ? n : lport_reason(L, tag);   /* eof, closed */
}

/* A recv on a port that has ended: the error it ended on, if its message is still in
** the mailbox (taken: the next recv says "closed"), else "closed". */
static int ended_k(lua_State *L, int status, lua_KContext base) {
  (void)status;
  const char *tag = lport_answer(L, base);
  return tag ? lport_value(L, base, tag, 0) : lport_reason(L, "closed");
}

/* recv(port [, n [, timeout]]) -> bytes | nil, "eof" | "closed" | "timeout" | reason.
** For ports with active = false; only the owner gets the answer. */
int lmod_recv(lua_State *L) {
  lproc *p = lport_check_proc(L, "recv");
  lpvm_id port = lport_check_kind(L, 1, lport_stream, "stream port");
  lua_Integer n = luaL_optinteger(L, 2, 0);
  luaL_argcheck(L, n >= 0, 2, "byte count must be >= 0");
  int64_t ms = lport_opt_ms(L, 3);
  lua_settop(L, 1);
  if (!lport_pending_get(L, port)) {
    int rc = lpvm_port_recv(&p->task, port, (size_t)n);
    if (rc == LPVM_EINVAL) return luaL_argerror(L, 2, "byte count over the port's max_packet");
    if (rc == LPVM_ENOPROC) return lport_wait(L, port, LPORT_W_ERROR, 0, 0, ended_k);
    if (rc != 0) return lport_fail(L, rc, 0);
    lport_pending_set(L, port, 1);
  }
  return lport_wait(L, port, LPORT_W_DATA | LPORT_W_EOF | LPORT_W_ERROR | LPORT_W_CLOSED, 0,
                    ms, recv_k);
}

/* set_active(port, true | false | "once") -> true | nil, "closed" */
int lmod_set_active(lua_State *L) {
  lproc *p = lproc_check(L);
  lpvm_id port = lport_check_kind(L, 1, lport_stream, "stream port");
  luaL_checkany(L, 2);
  return lport_ok(L, lpvm_port_set_active(&p->task, port, lport_to_active(L, 2, 2)));
}

/* set_packet(port, "raw" | "line" | 1 | 2 | 4) -> true | nil, "closed" */
int lmod_set_packet(lua_State *L) {
  lproc *p = lproc_check(L);
  lpvm_id port = lport_check_kind(L, 1, lport_stream, "stream port");
  luaL_checkany(L, 2);
  return lport_ok(L, lpvm_port_set_packet(&p->task, port, lport_to_packet(L, 2, 2)));
}

/* shutdown(port) -> true: no more writes (after the queue); reading goes on. */
int lmod_shutdown(lua_State *L) {
  lproc *p = lproc_check(L);
  lpvm_id port = lport_check_kind(L, 1, lport_stream, "stream port");
  return lport_ok(L, lpvm_port_shutdown(&p->task, port));
}

/* controlling_process(port, pid) -> true: only the owner may. */
int lmod_controlling_process(lua_State *L) {
  lproc *p = lproc_check(L);
  lpvm_id port = lport_check_kind(L, 1, lport_owned, "stream port or tcp listener");
  lpvm_id to = lmod_check_pid(L, 2);
  luaL_argcheck(L, !lpvm_id_is_port(to), 2, "a process expected, got a port");
  return lport_ok(L, lpvm_port_controlling_process(&p->task, port, to));
}

/* After the kill: the port is gone, or will be; the caller is not kept waiting
** longer than a second linger time (at least CLOSE_KILL_WAIT_MS) in any case. The
** monitor goes, and with it a DOWN that came. Stack: [1] port [2] linger [3] mref. */
static int close_done_k(lua_State *L, int status, lua_KContext base) {
  (void)status, (void)base;
  lproc *p = lproc_of(L);
  lpvm_id port = lmod_to_pid(L, 1);
  lport_drop_monitor(p, (uint64_t)lua_tointeger(L, 3));
  lport_flush(p, port);
  lport_pending_set(L, port, 0);
  lua_pushboolean(L, 1);
  return 1;
}

/* The wait after the queue was dropped: at least CLOSE_KILL_WAIT_MS, or the linger. */
static lua_Integer close_wait_ms(lua_State *L) {
  lua_Integer ms = lua_tointeger(L, 2);
  return ms < CLOSE_KILL_WAIT_MS ? CLOSE_KILL_WAIT_MS : ms;
}

/* After close_now: a port that still has not ended (it cannot take commands) is
** killed. Only then: a killed port takes its owner along, the caller is unlinked
** from it, but an owner that is another process would die with it. */
static int close_now_k(lua_State *L, int status, lua_KContext base) {
  lproc *p = lproc_of(L);
  lpvm_id port = lmod_to_pid(L, 1);
  if (!lport_answer(L, base)) {
    lua_settop(L, 3);
    lpvm_unlink(&p->task, port);
    lpvm_kill(&p->task, port);
    return lport_wait(L, port, 0, (uint64_t)lua_tointeger(L, 3), close_wait_ms(L),
                      close_done_k);
  }
  return close_done_k(L, status, base);
}

/* Stack: [1] port [2] linger [3] monitor reference. Still writing after the linger
** time: the port drops its queue and closes at once (close_now), ending normally.
** It was killed here, and a port closed by a process other than its owner took the
** owner along (reason killed), even an idle port closed with linger 0. */
static int close_k(lua_State *L, int status, lua_KContext base) {
  lproc *p = lproc_of(L);
  lpvm_id port = lmod_to_pid(L, 1);
  if (!lport_answer(L, base)) {
    lua_settop(L, 3);
    lpvm_port_close_now(&p->task, port);
    return lport_wait(L, port, 0, (uint64_t)lua_tointeger(L, 3), close_wait_ms(L),
                      close_now_k);
  }
  return close_done_k(L, status, base);
}

/* port_close(port [, linger_ms]) -> true. Waits until the port has ended (queued
** writes done, at most linger_ms, default 5 s, then dropped) and removes what it
** sent from the caller's mailbox: after it returns, no message of the port is seen. */
int lmod_port_close(lua_State *L) {
  lproc *p = lport_check_proc(L, "port_close");
  lpvm_id port = lport_check(L, 1);
  int64_t linger = lua_isnoneornil(L, 2) ? CLOSE_LINGER_MS : lport_opt_ms(L, 2);
  lua_settop(L, 1);
  lua_pushinteger(L, linger);
  int rc = lpvm_port_close(&p->task, port);
  if (rc != 0 && rc != LPVM_ENOPROC) return lport_fail(L, rc, 0);
  uint64_t mref = lport_push_monitor(L, p, port);   /* a dead port: DOWN at once */
  return lport_wait(L, port, 0, mref, linger, close_k);
}

int lmod_is_port(lua_State *L) {
  lpvm_id id = lmod_to_pid(L, 1);
  lua_pushboolean(L, id != 0 && lpvm_id_is_port(id));
  return 1;
}
