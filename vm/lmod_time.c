/*
** lmod_time.c -- the lpvm module's time functions: sleep, send_after, start_timer,
** cancel_timer, read_timer, now, now_us.
**
** A sleep is a wait like receive's (the task's own timer, then a yield with a
** continuation) that takes no message: what arrives meanwhile stays in the mailbox.
** send_after's timers belong to the timer service (tasks/task_timer.c), not to the
** process that started them: a process that ends leaves them to fire. One aimed at a
** local pid is tied to that pid, as Erlang's is: it goes when the target ends.
*/
#include <lauxlib.h>
#include <string.h>
#include <time.h>

#include "lpvm/lpvm.h"
#include "vm/lproc_int.h"

static int sleep_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status, (void)ctx;
  if (lproc_take_interrupt(lproc_of(L))) return luaL_error(L, "interrupted!");
  return 0;
}

/* sleep(ms): messages that arrive meanwhile wait in the mailbox. sleep(math.huge)
** never returns (a kill or an exit signal still ends the process). */
static int lmod_sleep(lua_State *L) {
  lproc *p = lproc_check(L);
  lmod_check_wait(L, p, "sleep");
  int64_t ms = lmod_check_ms(L, 1);
  if (!lua_isyieldable(L))
    return luaL_error(L, "sleep: cannot wait here (inside a C call such as a metamethod)");
  if (ms == 0) {
    p->wait = LP_RUN;   /* just give the others a turn */
  } else if (ms < 0) {
    p->wait = LP_SLEEP;   /* sleep(math.huge): for ever, as timer:sleep(infinity) */
  } else {
    if (lpvm_set_timer(&p->task, (uint64_t)ms) != 0) return luaL_error(L, "sleep: no timer");
    p->wait = LP_SLEEP;
  }
  if (L != p->L) p->sched_yield = 1;
  return lua_yieldk(L, 0, 0, sleep_k);
}

/* send_after(ms, pid | name, ...) and start_timer(ms, pid | name, ...) -> reference.
** A name is looked up when the timer fires (Erlang's send_after/3 with an atom): free
** then, the message is dropped; one with a NUL can never be registered, so its
** message goes nowhere. start_timer (`tagged`) is Erlang's erlang:start_timer/3: the
** message is "timeout", ref, ... ({timeout, TRef, Msg}), so a receiver can tell a
** stale timer's message from the current one's by its reference. */
static int timer_send(lua_State *L, int tagged, const char *fname) {
  lproc *p = lproc_check(L);
  int64_t ms = lmod_check_ms(L, 1);
  luaL_argcheck(L, ms >= 0, 1, "finite timeout expected (a message never sent is no message)");
  size_t nlen = 0;
  const char *name = lua_type(L, 2) == LUA_TSTRING ? lua_tolstring(L, 2, &nlen) : NULL;
  lpvm_id to = name ? LPVM_ID_DEAD : lmod_check_pid(L, 2);
  if (name && strlen(name) != nlen) name = NULL;   /* to LPVM_ID_DEAD: nowhere */
  uint64_t ref = lpvm_make_ref();
  if (tagged) {
    lua_pushliteral(L, "timeout");
    lmod_push_ref(L, ref);
    lua_rotate(L, 3, 2);   /* ms, dest, "timeout", ref, ... */
  }
  lpvm_msg *m = lmod_build_msg(L, 3, fname);
  int rc = lpvm_start_msg_timer(&p->task, (uint64_t)ms, to, name, m, ref);   /* takes m */
  if (rc != 0) return lmod_fail(L, rc);
  lmod_push_ref(L, ref);
  return 1;
}

static int lmod_send_after(lua_State *L) { return timer_send(L, 0, "send_after"); }
static int lmod_start_timer(lua_State *L) { return timer_send(L, 1, "start_timer"); }

/* Options of cancel_timer and read_timer: nil or a table of booleans (known: async,
** and info if `info`); anything else raises naming it. */
static void timer_opts(lua_State *L, int arg, int info, int *async, int *want_info) {
  static const char *const known_c[] = {"async", "info", NULL};
  static const char *const known_r[] = {"async", NULL};
  *async = 0, *want_info = 1;
  if (lua_isnoneornil(L, arg)) return;
  luaL_checktype(L, arg, LUA_TTABLE);
  lmod_check_keys(L, arg, info ? known_c : known_r, "timer option");
  static const char *const keys[] = {"async", "info"};
  for (int i = 0; i < 1 + info; i++) {
    int ty = lua_getfield(L, arg, keys[i]);
    if (ty != LUA_TNIL && ty != LUA_TBOOLEAN)
      luaL_argerror(L, arg, lua_pushfstring(L, "option '%s' must be a boolean, got %s",
                                            keys[i], luaL_typename(L, -1)));
    if (ty != LUA_TNIL) *(i ? want_info : async) = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
}

static void push_left(lua_State *L, int64_t left) {
  if (left >= 0) lua_pushinteger(L, (lua_Integer)left);
  else lua_pushboolean(L, 0);
}

/* The answer of cancel_timer / read_timer: returned, or (async) sent to the caller as
** the message  tag, ref, ms | false  and true returned (Erlang's {async, true}). */
static int timer_answer(lua_State *L, const char *tag, int async, int info, int64_t left) {
  if (!async) {
    if (info) push_left(L, left);
    else lua_pushboolean(L, 1);
    return 1;
  }
  if (info) {
    lproc *p = lproc_check(L);
    int top = lua_gettop(L);
    lua_pushstring(L, tag);
    lua_pushvalue(L, 1);
    push_left(L, left);
    lpvm_msg *m = lmod_build_msg(L, top + 1, tag);
    lua_settop(L, top);
    int rc = lpvm_send_msg(&p->task, p->task.id, m);
    if (rc != 0) return lmod_fail(L, rc);
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* cancel_timer(ref [, {async=, info=}]) -> ms it had left | false (it had fired, was
** cancelled, or its target died): Erlang's erlang:cancel_timer/2. */
static int lmod_cancel_timer(lua_State *L) {
  uint64_t ref = lmod_check_ref(L, 1);
  if (lua_gettop(L) == 1) {   /* the usual call: no options */
    push_left(L, lpvm_send_after_left(ref, 1));
    return 1;
  }
  int async, info;
  timer_opts(L, 2, 1, &async, &info);
  return timer_answer(L, "cancel_timer", async, info, lpvm_send_after_left(ref, 1));
}

/* read_timer(ref [, {async=}]) -> ms left | false: Erlang's erlang:read_timer/2. */
static int lmod_read_timer(lua_State *L) {
  uint64_t ref = lmod_check_ref(L, 1);
  int async, info;
  timer_opts(L, 2, 0, &async, &info);
  return timer_answer(L, "read_timer", async, 1, lpvm_send_after_left(ref, 0));
}

static int lmod_now(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)lpvm_now_ms());
  return 1;
}

/* For measuring: the same monotonic clock in microseconds. */
static int lmod_now_us(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushinteger(L, (lua_Integer)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
  return 1;
}

const lmod_fn lmod_time_fns[] = {
    {"sleep", lmod_sleep},
    {"send_after", lmod_send_after},
    {"start_timer", lmod_start_timer},
    {"cancel_timer", lmod_cancel_timer},
    {"read_timer", lmod_read_timer},
    {"now", lmod_now},
    {"now_us", lmod_now_us},
    {NULL, NULL}};
