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
** of the caller's time. Here the reference never reaches Lua code: it is made, sent,
** waited for and dropped in C, and only the reply's values after it are decoded.
** (References are light userdata now, lmod.c: the general encoder's way pushes one.)
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
#include <stdio.h>
#include <string.h>

#include "lpvm/binary.h"
#include "vm/lproc_int.h"
#include "vm/lterm.h"

/* The call is over (stack: nothing of ours): the monitor, the alias, a queued DOWN
** and a reply that arrived since the wait last looked go. */
static void call_end(lproc *p, uint64_t ref) {
  lpvm_demonitor(&p->task, ref);
  lmod_ref_end(p, ref, 1);
}

/* m answers the call: a reply (its values after the reference are returned) or the
** monitor's DOWN (its reason is raised). */
static int call_done(lua_State *L, lproc *p, lpvm_msg *m) {
  uint64_t ref = p->recv_ref;
  lmod_recv_finish(p);
  lmod_mbox_take(p, m);
  lmod_alias_del(p, ref);   /* whatever happens next, no late reply may land */
  int one = lua_toboolean(L, 1);
  lua_settop(L, 0);
  p->owned = m;             /* a failed decode (out of memory) must not leak it */
  int n;
  int unwatched = 0;
  if (m->ref == ref) {      /* send_alias to our alias: a reply */
    n = lterm_push_msg_tail(L, m);
    unwatched = (m->flags & LPVM_MSGF_UNWATCH) != 0;
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
  if (unwatched) lpvm_demonitor_quiet(&p->task, ref);   /* the server dropped its half */
  else call_end(p, ref);
  if (one && n != 1) {
    lua_settop(L, 1);
    n = 1;
  }
  return n;
}

static int call_loop(lua_State *L, lproc *p);

/* A message built in place (lpvm_msg_build): a message of values, as lterm_msg's, with
** `flags` too; NULL with err set when out of memory. */
static lpvm_msg *built(lpvm_msg *m, char *err, unsigned flags) {
  if (m) m->flags |= LPVM_MSGF_VALUES | flags;
  else snprintf(err, LTERM_ERRSZ, "not enough memory");
  return m;
}

static int call_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status, (void)ctx;
  lproc *p = lproc_of(L);
  p->wait = LP_RUN;
  return call_loop(L, p);
}

/* Stack: [1] true for one value only (caller's functions) or nil, [2] the timeout or nil. */
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
** send would; NULL with err set on a value that cannot travel. A string label and a
** request without functions (the usual call) are written straight into the scratch
** buffer: the reference needs no userdata and the encoder no type tests for the
** first three; a function in the request (a graph, lfun.c) takes the general way. */
static lpvm_msg *call_msg(lua_State *L, lproc *p, uint64_t ref, char *err) {
  if (lua_type(L, 2) == LUA_TSTRING) {
    size_t len, sz;
    uint64_t r;
    int t = lterm_scalar(L, 3, &sz, &r);
    if (t >= 0) {   /* a scalar request: the message built in place, no copy */
      const char *label = lua_tolstring(L, 2, &len);
      lpvm_tbuf b;
      lpvm_msg_build(&b, 2 + 5 + len + 64 + 72 + sz);
      lpvm_put_tuple(&b, 4);
      lpvm_put_binary(&b, label, len);
      lpvm_put_pid(&b, p->task.id);
      lpvm_put_ref(&b, ref);
      lterm_put_scalar(L, 3, t, r, &b);
      return built(lpvm_msg_built(&b, NULL), err, 0);
    }
    lpvm_tbuf *b = lterm_msg_begin();
    if (b) {
      size_t len;
      const char *label = lua_tolstring(L, 2, &len);
      lpvm_put_tuple(b, 4);
      lpvm_put_binary(b, label, len);
      lpvm_put_pid(b, p->task.id);
      lpvm_put_ref(b, ref);
      if (lterm_put_shared(L, 3, b, err) == 0) return lterm_msg_end(b, err);
    }
  }
  lua_pushvalue(L, 2);
  lmod_push_pid(L, p->task.id);
  lmod_push_ref(L, ref);
  lua_pushvalue(L, 3);
  lpvm_msg *m = lterm_msg(L, -4, 4, err);
  lua_pop(L, 4);
  return m;
}

/* The call from its checked arguments (stack: [2] label, [3] request): monitor with
** an alias, send, wait. */
static int call_begin(lua_State *L, lproc *p, lpvm_id to, int64_t ms, int one) {
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
  lpvm_msg *m = lmod_alias_add(p, ref, 0) == 0 ? call_msg(L, p, ref, err) : NULL;
  if (!m) {
    lmod_alias_del(p, ref);
    lpvm_demonitor(&p->task, ref);
    return luaL_error(L, "call: %s", err);
  }
  m->flags |= LPVM_MSGF_UNWATCH;   /* the server may drop its half of the monitor */
  lpvm_send_msg(&p->task, to, m);
  lua_settop(L, 0);
  if (one) lua_pushboolean(L, 1);
  else lua_pushnil(L);
  if (ms < 0) lua_pushnil(L);
  else lua_pushinteger(L, ms);
  lmod_ref_wait_begin(p, ref);
  return call_loop(L, p);
}

int lmod_call(lua_State *L) {
  lproc *p = lproc_check(L);
  lmod_check_wait(L, p, "call");
  int is_name;
  lpvm_id to = lmod_check_dest(L, 1, &is_name);
  luaL_checkany(L, 3);
  int64_t ms = lua_isnoneornil(L, 4) ? -1 : lmod_check_ms(L, 4);
  luaL_argexpected(L, lua_gettop(L) < 5, 5, "no value");
  (void)is_name;
  return call_begin(L, p, to, ms, 0);
}

/* ---- caller: gen_server.call as one C function ------------------------------------ */

/* The closure caller(label, fname, default_ms) made: f(server, request [, timeout_ms])
** is (lpvm.call(server, label, request, timeout_ms or default_ms)), the reply's first
** value only, with its argument errors named as fname's (upvalues: [1] label, [2] fname, [3] default_ms). */
static int caller_call(lua_State *L) {
#define fname lua_tostring(L, lua_upvalueindex(2))
  int t = lua_type(L, 1);
  if (t != LUA_TSTRING && t != LUA_TLIGHTUSERDATA)
    return luaL_error(L, "bad argument #1 to '%s' (pid or name expected, got %s)", fname,
                      luaL_typename(L, 1));
  lproc *p = lproc_check(L);
  if (p->in_pred || p->in_eval) lmod_check_wait(L, p, fname);   /* raises */
  int64_t ms;
  if (lua_isnoneornil(L, 3)) {
    ms = (int64_t)lua_tointeger(L, lua_upvalueindex(3));
  } else {
    lua_Number v = lua_tonumber(L, 3);
    if (lua_type(L, 3) != LUA_TNUMBER || !(v >= 0))
      return luaL_error(L, "bad argument #3 to '%s' (timeout in ms >= 0 or math.huge expected, got %s)",
                        fname, lua_type(L, 3) == LUA_TNUMBER ? lua_tostring(L, 3) : luaL_typename(L, 3));
    ms = lmod_check_ms(L, 3);
  }
  int is_name;
  lpvm_id to = lmod_check_dest(L, 1, &is_name);
  lua_settop(L, 2);                           /* [1] server [2] request */
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 2);                           /* [2] label [3] request */
  (void)is_name;
  return call_begin(L, p, to, ms, 1);
#undef fname
}

/* caller(label, fname [, default_ms = 5000]) -> f(server, request [, timeout_ms]). */
static int lmod_caller(lua_State *L) {
  luaL_checkstring(L, 1);
  luaL_checkstring(L, 2);
  lua_Integer ms = luaL_optinteger(L, 3, 5000);
  luaL_argcheck(L, ms >= 0, 3, "timeout must be >= 0");
  lua_settop(L, 2);
  lua_pushinteger(L, ms);
  lua_pushcclosure(L, caller_call, 3);
  return 1;
}

/* ---- handle_call and dispatcher: the server's side of a call ------------------------- */

/* The reply {ref, value} (value at idx; [5] the reference) as send_alias(pid, ref,
** value) encodes it; a value without functions straight into the scratch builder, as
** call_msg. */
static lpvm_msg *reply_msg(lua_State *L, uint64_t ref, int idx, char *err) {
  size_t sz;
  uint64_t r;
  int t = lterm_scalar(L, idx, &sz, &r);
  if (t >= 0) {   /* a scalar reply: built in place, as call_msg */
    lpvm_tbuf b;
    lpvm_msg_build(&b, 2 + 72 + sz);
    lpvm_put_tuple(&b, 2);
    lpvm_put_ref(&b, ref);
    lterm_put_scalar(L, idx, t, r, &b);
    return built(lpvm_msg_built(&b, NULL), err, 0);
  }
  lpvm_tbuf *b = lterm_msg_begin();
  if (b) {
    lpvm_put_tuple(b, 2);
    lpvm_put_ref(b, ref);
    if (lterm_put_shared(L, idx, b, err) == 0) return lterm_msg_end(b, err);
  }
  lua_pushvalue(L, 5);
  lua_pushvalue(L, idx);
  lpvm_msg *m = lterm_msg(L, -2, 2, err);
  lua_pop(L, 2);
  return m;
}

/* A dispatcher's upvalues (see lmod_dispatcher), and the keys it uses as Lua strings
** (lua_getfield with a C string interns it first: ~100 instructions a field). */
enum { UP_SERVER = 1, UP_MSGH, UP_ON_RESULT, UP_ON_OTHER, UP_MOD, UP_HANDLE_CALL, UP_STATE,
       UP_GEN_CALL, UP_REPLY, UP_N = UP_REPLY };

static int ret_k(lua_State *L, int status, lua_KContext base) {
  (void)status;
  return lua_gettop(L) - (int)base;
}

/* Call the function at `fn` with the `nargs` values on top, returning what it returns
** (a tail call from C: it may wait). */
static int tail_call(lua_State *L, int fn, int nargs) {
  int base = lua_gettop(L) - nargs;
  lua_pushvalue(L, fn);
  lua_insert(L, base + 1);
  lua_callk(L, nargs, LUA_MULTRET, base, ret_k);
  return lua_gettop(L) - base;
}

/* Stack: [1] f [2] msgh [3] request [4] pid [5] ref [6] state, then f's results (or the
** error its message handler made, status not OK). A "reply" goes back at once, as
** send_alias(pid, ref, reply) would send it: handle_call returns true, new state,
** action; a dispatcher stores the new state in server.state and returns the action.
** Anything else (and a reply to another node's caller) is for the Lua side:
** handle_call returns false and {n = N, ok, results...} (xpcall's results packed), a
** dispatcher returns on_result(pid, ref, ok, results...). `dispatcher` is 0 for
** handle_call, 1 for a dispatcher, SERVED for serve (which pushed [5] itself),
** SERVED_UNWATCH for serve given lpvm.call's
** message (LPVM_MSGF_UNWATCH): its caller drops the monitor at the reply, so the
** reply drops the server's half (lpvm_unwatch) and says so, and no DEMONITOR follows. */
enum { SERVED = 2, SERVED_UNWATCH = 3 };

static int handle_done(lua_State *L, int status, int dispatcher) {
  int top = lua_gettop(L), nres = top - 6;
  int ok = status == LUA_OK || status == LUA_YIELD;
  if (ok && nres >= 1 && (dispatcher ? lua_rawequal(L, 7, lua_upvalueindex(UP_REPLY))
                                     : lmod_streq(L, 7, "reply"))) {
    lpvm_id to = lmod_to_pid(L, 4);
    uint64_t ref = lmod_to_ref(L, 5);   /* a light userdata's bits (lmod.c) */
    if (to && ref && !lpvm_id_is_remote(to)) {
      lproc *p = lproc_of(L);
      char err[LTERM_ERRSZ];
      if (nres < 2) lua_pushnil(L);
      lpvm_msg *m = reply_msg(L, ref, nres >= 2 ? 8 : lua_gettop(L), err);
      if (!m) return luaL_error(L, "send_alias: %s", err);
      m->ref = ref;
      if (dispatcher == SERVED_UNWATCH && lpvm_unwatch(&p->task, ref, to))
        m->flags |= LPVM_MSGF_UNWATCH;   /* the caller drops its half: no DEMONITOR */
      lpvm_send_msg(&p->task, to, m);
      if (dispatcher) {
        lua_pushvalue(L, lua_upvalueindex(UP_STATE));
        if (nres >= 3) lua_pushvalue(L, 9);
        else lua_pushnil(L);
        lua_settable(L, lua_upvalueindex(UP_SERVER));
      } else {
        lua_pushboolean(L, 1);
        if (nres >= 3) lua_pushvalue(L, 9);
        else lua_pushnil(L);
      }
      if (nres >= 4) lua_pushvalue(L, 10);
      else lua_pushnil(L);
      return dispatcher ? 1 : 3;
    }
  }
  if (!ok) {
    nres = 1;   /* the error object, on top */
    if (dispatcher && lua_isnil(L, 1)) {   /* a gen_server module without handle_call: */
      lua_pushliteral(L,                   /* say so (was "attempt to call a nil value") */
                      "the callback table has no function 'handle_call' (undef)");
      lua_replace(L, top);
    }
  }
  if (dispatcher) {    /* on_result(pid, ref, ok, results...) */
    luaL_checkstack(L, 4, "too many results");
    lua_pushvalue(L, 4);
    lua_insert(L, top - nres + 1);
    lua_pushvalue(L, 5);
    lua_insert(L, top - nres + 2);
    lua_pushboolean(L, ok);
    lua_insert(L, top - nres + 3);
    return tail_call(L, lua_upvalueindex(UP_ON_RESULT), nres + 3);
  }
  lua_createtable(L, nres + 1, 1);
  lua_pushboolean(L, ok);
  lua_rawseti(L, -2, 1);
  for (int i = 0; i < nres; i++) {
    lua_pushvalue(L, top - nres + 1 + i);
    lua_rawseti(L, -2, i + 2);
  }
  lua_pushinteger(L, nres + 1);
  lua_setfield(L, -2, "n");
  lua_pushboolean(L, 0);
  lua_insert(L, -2);
  return 2;
}

static int handle_k(lua_State *L, int status, lua_KContext dispatcher) {
  return handle_done(L, status, (int)dispatcher);
}

/* Stack: [1] f [2] msgh [3] request [4] pid [5] ref [6] state: the call. */
static int handle_begin(lua_State *L, int dispatcher) {
  lua_settop(L, 6);
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 3);
  lua_createtable(L, 2, 0);
  lua_pushvalue(L, 4);
  lua_rawseti(L, -2, 1);
  lua_pushvalue(L, 5);
  lua_rawseti(L, -2, 2);
  lua_pushvalue(L, 6);
  return handle_done(L, lua_pcallk(L, 3, LUA_MULTRET, 2, dispatcher, handle_k), dispatcher);
}

/* handle_call(f, msgh, request, pid, ref, state): f(request, {pid, ref}, state) under
** msgh, as xpcall(f, msgh, ...), and a "reply" is sent here; see handle_done. */
static int lmod_handle_call(lua_State *L) {
  luaL_checkany(L, 1);
  luaL_checkany(L, 2);
  luaL_checkany(L, 5);
  return handle_begin(L, 0);
}

/* A dispatcher: f(...), the values of one message as receive returned them. */
static int dispatch(lua_State *L) {
  int n = lua_gettop(L);
  if (n != 4 || !lua_rawequal(L, 1, lua_upvalueindex(UP_GEN_CALL))) {   /* on_other(n, ...) */
    luaL_checkstack(L, 2, "too many values");
    lua_pushinteger(L, n);
    lua_insert(L, 1);
    return tail_call(L, lua_upvalueindex(UP_ON_OTHER), n + 1);
  }
  /* [1] "$gen_call" [2] pid [3] ref [4] request -> handle_begin's stack */
  int server = lua_upvalueindex(UP_SERVER);
  lua_pushvalue(L, lua_upvalueindex(UP_MOD));
  lua_gettable(L, server);
  lua_pushvalue(L, lua_upvalueindex(UP_HANDLE_CALL));
  lua_gettable(L, -2);
  lua_replace(L, 1);
  lua_pop(L, 1);
  lua_pushvalue(L, lua_upvalueindex(UP_MSGH));
  lua_insert(L, 2);               /* f msgh pid ref request */
  lua_rotate(L, 3, 1);            /* f msgh request pid ref */
  lua_pushvalue(L, lua_upvalueindex(UP_STATE));
  lua_gettable(L, server);
  return handle_begin(L, 1);
}

/* The message m (taken, owned by p) for serve: a call of this node straight to
** handle_begin, its request the only value decoded (no label string, no values to
** move); any other message as receive returns it, to dispatch. */
static int serve_msg(lua_State *L, lproc *p, lpvm_msg *m) {
  static const char label[] = "$gen_call";   /* UP_GEN_CALL's */
  lpvm_id pid;
  uint64_t ref;
  const uint8_t *at;
  lua_settop(L, 0);
  if (!lterm_call_head(m, label, sizeof label - 1, &pid, &ref, &at)) {
    lterm_push_msg(L, m);
    p->owned = NULL;
    lpvm_msg_free(m);
    return dispatch(L);
  }
  int unwatch = (m->flags & LPVM_MSGF_UNWATCH) != 0;
  int server = lua_upvalueindex(UP_SERVER);   /* handle_begin's stack */
  lua_pushvalue(L, lua_upvalueindex(UP_MOD));
  lua_gettable(L, server);
  lua_pushvalue(L, lua_upvalueindex(UP_HANDLE_CALL));
  lua_gettable(L, -2);
  lua_replace(L, 1);
  lua_pushvalue(L, lua_upvalueindex(UP_MSGH));
  lterm_push_in(L, m, at);
  p->owned = NULL;
  lpvm_msg_free(m);
  lmod_push_pid(L, pid);
  lmod_push_ref(L, ref);
  lua_pushvalue(L, lua_upvalueindex(UP_STATE));
  lua_gettable(L, server);
  return handle_begin(L, unwatch ? SERVED_UNWATCH : SERVED);
}

static int serve_loop(lua_State *L, lproc *p);

static int serve_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status, (void)ctx;
  lproc *p = lproc_of(L);
  p->wait = LP_RUN;
  return serve_loop(L, p);
}

/* Stack: [1] nil (no predicate) [2] nil (no timeout), as lmod_recv_wait reads it. */
static int serve_loop(lua_State *L, lproc *p) {
  lpvm_msg *m = lmod_recv_next(L, p);
  if (!m) {
    int n = lmod_recv_wait(L, p, serve_k, serve_loop);
    return n > 0 ? n : 0;   /* without a timeout it only returns what serve_msg did */
  }
  lmod_recv_finish(p);
  lmod_mbox_take(p, m);
  p->owned = m;   /* a failed decode (out of memory) must not leak it */
  return serve_msg(L, p, m);
}

/* A dispatcher's second function: serve() is f(receive()), without the message's
** values crossing into Lua and back. */
static int serve(lua_State *L) {
  lproc *p = lproc_check(L);
  lmod_check_wait(L, p, "receive");
  if (lua_gettop(L) != 0) lua_settop(L, 0);
  lua_pushnil(L);
  lua_pushnil(L);
  lmod_drop_owned(p);
  lmod_recv_finish(p);
  return serve_loop(L, p);
}

/* dispatcher(server, msgh, on_result, on_other) -> f(...), serve(): a gen_server's
** loop in one C call per message. Given a message's values, f handles {"$gen_call",
** pid, ref, request} (exactly those four) as handle_call(server.mod.handle_call, msgh,
** request, pid, ref, server.state) would: a "reply" is sent, server.state set and the
** action returned; other results go to on_result(pid, ref, ok, results...), whose
** results f returns. Any other message: f returns on_other(n, values...). serve()
** waits for the next message and returns f(its values). */
static int lmod_dispatcher(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checkany(L, 2);
  luaL_checkany(L, 3);
  luaL_checkany(L, 4);
  lua_settop(L, 4);
  lua_pushliteral(L, "mod");
  lua_pushliteral(L, "handle_call");
  lua_pushliteral(L, "state");
  lua_pushliteral(L, "$gen_call");
  lua_pushliteral(L, "reply");
  for (int i = 1; i <= UP_N; i++) lua_pushvalue(L, i);
  lua_pushcclosure(L, dispatch, UP_N);
  lua_insert(L, 1);
  lua_pushcclosure(L, serve, UP_N);
  return 2;
}

const lmod_fn lmod_call_fns[] = {   /* "call" is in lmod_msg_fns, beside receive_ref */
    {"caller", lmod_caller},
    {"handle_call", lmod_handle_call},
    {"dispatcher", lmod_dispatcher},
    {NULL, NULL}};
