/*
** lmod_call.c -- lpvm.call(server, label, request [, timeout_ms]): the caller's side of
** gen_server.call (vm/lib/gen.lua) in one C call, as Erlang's gen:do_call is one
** function in one process.
**
** By hand the call is four lpvm functions: monitor(pid, "alias"), send({label, self,
** ref, request}), receive_ref(ref, timeout), demonitor(ref, "flush"). Each crossing
** into C checks its arguments again, and the reference becomes a Lua userdata that
** every decode of the reply looks up in the state's reference table (lmod_push_ref);
** on the gen_server.call benchmark that table and the garbage it makes were a third
** of the caller's time. Here the reference never reaches Lua code: it is made, sent
** (from one userdata per state, rewritten for each call and never interned:
** lmod_push_ref_temp), waited for and dropped in C, and only the reply's values after
** it are decoded.
**
** The protocol is receive_ref's (lmod_msg.c): the reference is also an alias, so the
** server's send_alias reply is tagged with it and a reply that comes after the caller
** gave up is dropped unseen; the wait starts after the mailbox's end at the monitor
** (the ref-receive optimisation); the monitor's DOWN ends the wait with the server's
** exit reason. Whatever ends the wait, the monitor and the alias end with it and a
** DOWN already queued is flushed, so nothing of the call stays behind.
**
**   reply          -> the reply's values after the reference
**   DOWN           -> raises the exit reason (error(reason, 0): no position added)
**   timeout        -> raises "timeout"
**   no such name   -> raises "noproc"; a call to oneself raises "calling_self"
** A dead pid gets its DOWN (noproc) at once, as with monitor.
*/
#include <lauxlib.h>
#include <string.h>

#include "vm/lproc_int.h"
#include "vm/lterm.h"

/* The call is over (stack: nothing of ours): the monitor, the alias and a queued
** DOWN go. */
static void call_end(lproc *p, uint64_t ref) {
  lpvm_demonitor(&p->task, ref);
  lmod_alias_del(p, ref);
  lmod_flush_down(p, ref);
}

/* m answers the call: a reply (its values after the reference are returned) or the
** monitor's DOWN (its reason is raised). */
static int call_done(lua_State *L, lproc *p, lpvm_msg *m) {
  uint64_t ref = p->recv_ref;
  lmod_recv_finish(p);
  lmod_mbox_take(p, m);
  lmod_alias_del(p, ref);   /* whatever happens next, no late reply may land */
  lua_settop(L, 0);
  p->owned = m;             /* a failed decode (out of memory) must not leak it */
  int n;
  if (m->ref == ref) {      /* send_alias to our alias: a reply */
    n = lterm_push_msg_tail(L, m);
  } else {                  /* {ref, ...} sent by hand, or {"DOWN", ref, _, _, reason} */
    n = lterm_push_msg(L, m);
    if (n == 5 && lua_type(L, 1) == LUA_TSTRING && strcmp(lua_tostring(L, 1), "DOWN") == 0) {
      p->owned = NULL;
      lpvm_msg_free(m);
      lpvm_demonitor(&p->task, ref);
      return lua_error(L);   /* the reason, on top */
    }
    lua_remove(L, 1);
    n--;
  }
  p->owned = NULL;
  lpvm_msg_free(m);
  call_end(p, ref);
  return n;
}

static int call_loop(lua_State *L, lproc *p);

static int call_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status, (void)ctx;
  lproc *p = lproc_of(L);
  p->wait = LP_RUN;
  return call_loop(L, p);
}

/* Stack: [1] nil, [2] the timeout or nil. */
static int call_loop(lua_State *L, lproc *p) {
  lpvm_msg *m = lmod_ref_next(p);
  if (m) return call_done(L, p, m);
  uint64_t ref = p->recv_ref;
  int n = lmod_recv_wait(L, p, call_k, call_loop);
  if (n >= 0) return n;
  call_end(p, ref);   /* timed out */
  lua_pushliteral(L, "timeout");
  return lua_error(L);
}

/* Encode {label, self, ref, request} (stack: [2] label, [3] request) in a message, as
** send would; NULL with err set on a value that cannot travel. */
static lpvm_msg *call_msg(lua_State *L, lproc *p, uint64_t ref, char *err) {
  lua_pushvalue(L, 2);
  lmod_push_pid(L, p->task.id);
  lmod_push_ref_temp(L, ref);
  lua_pushvalue(L, 3);
  lpvm_msg *m = lterm_msg(L, -4, 4, err);
  lua_pop(L, 4);
  return m;
}

int lmod_call(lua_State *L) {
  lproc *p = lproc_check(L);
  lmod_check_wait(L, p, "call");
  int is_name;
  lpvm_id to = lmod_check_dest(L, 1, &is_name);
  luaL_checkany(L, 3);
  int64_t ms = lua_isnoneornil(L, 4) ? -1 : lmod_check_ms(L, 4);
  luaL_argexpected(L, lua_gettop(L) < 5, 5, "no value");
  if (!to) {   /* an unregistered name */
    lua_pushliteral(L, "noproc");
    return lua_error(L);
  }
  if (to == p->task.id) {
    lua_pushliteral(L, "calling_self");
    return lua_error(L);
  }
  uint64_t ref;
  int rc = lpvm_monitor(&p->task, to, &ref);
  if (rc != 0) return luaL_error(L, "call: cannot monitor (%s)", lpvm_strerror(rc));
  lmod_mark(p, ref);   /* the DOWN is a signal: it cannot be in the mailbox yet */
  char err[LTERM_ERRSZ] = "not enough memory";
  lpvm_msg *m = lmod_alias_add(p, ref) == 0 ? call_msg(L, p, ref, err) : NULL;
  if (!m) {
    lmod_alias_del(p, ref);
    lpvm_demonitor(&p->task, ref);
    return luaL_error(L, "call: %s", err);
  }
  lpvm_send_msg(&p->task, to, m);
  lua_settop(L, 0);
  lua_pushnil(L);
  if (ms < 0) lua_pushnil(L);
  else lua_pushinteger(L, ms);
  lmod_ref_wait_begin(p, ref);
  return call_loop(L, p);
}
