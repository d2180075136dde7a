/*
** lmod_msg.c -- messages: receive, receive_ref, references and aliases (sending:
** lmod_send.c, time: lmod_time.c).
**
** receive keeps Erlang's save pointer (`scan`): the last message it looked at and
** left. A wake-up for new mail resumes the scan after it, so a mailbox of N messages
** the predicate rejected costs O(new messages) per wake, not O(N); rejected messages
** stay where they are, in order. The predicate runs inside the process through
** lua_pcallk, so it may be preempted, and its errors end the receive cleanly before
** they propagate.
**
** receive_ref(ref) is what gen_server.call waits with: it matches in C, without
** decoding, a message tagged with ref (send_alias), whose first value is ref, or a
** DOWN for ref; and it starts after the mailbox's end at the time ref was made (the
** mark, see lproc_int.h), so a call costs the same with 10,000 unrelated messages
** queued as with none (Erlang's ref-receive optimisation).
*/
#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/binary.h"
#include "lpvm/lpvm.h"
#include "vm/lproc_int.h"
#include "vm/lproc_small.h"
#include "vm/lmod_hint.h"
#include "vm/lraw.h"
#include "vm/lterm.h"
#include "vm/lterm_int.h"

/* A timeout in milliseconds: math.huge means for ever (-1), as Erlang's `infinity`;
** any other number must be >= 0 and is rounded up (a finite timeout too long for the
** clock saturates: it is accepted and fires, in theory, at the end of time). */
int64_t lmod_check_ms(lua_State *L, int arg) {
  /* receive(100): an integer as the float path below would give it, read in place */
  const lraw_tvalue *v = lraw_ok() ? lraw_arg(L, arg) : NULL;
  if (v && v->tt == LRAW_VNUMINT && v->v.i >= 0 && v->v.i < (INT64_C(1) << 53))
    return (int64_t)v->v.i;
  /* a number only: "5" is no timeout (Erlang's after "5" is an error; it was coerced) */
  if (lua_type(L, arg) != LUA_TNUMBER) luaL_typeerror(L, arg, "number (ms) or math.huge");
  lua_Number ms = lua_tonumber(L, arg);
  luaL_argcheck(L, ms >= 0 && ms == ms, arg, "timeout must be >= 0 or math.huge");
  if (ms == HUGE_VAL) return -1;
  if (ms >= 0x1p62) return INT64_C(1) << 62;
  return (int64_t)ceil(ms);
}

void lmod_drop_owned(lproc *p) {
  if (p->owned) {
    lpvm_msg_free(p->owned);
    p->owned = NULL;
  }
}

/* ---- aliases and the mark ------------------------------------------------------------------ */

static int alias_find(const lproc *p, uint64_t ref) {
  for (uint32_t i = p->nalias; i-- > 0;)
    if (p->aliases[i].ref == ref) return (int)i;
  return -1;
}

int lmod_alias_add(lproc *p, uint64_t ref, int mon) {
  if (p->nalias == p->calias) {
    uint32_t cap = p->calias ? p->calias * 2 : 4;
    struct lproc_alias *v = realloc(p->aliases, cap * sizeof *v);
    if (!v) return LPVM_ENOMEM;
    p->aliases = v, p->calias = cap;
  }
  p->aliases[p->nalias++] = (struct lproc_alias){ref, mon != 0};
  p->nalias_mon += mon != 0;
  return 0;
}

int lmod_alias_del(lproc *p, uint64_t ref) {
  int i = alias_find(p, ref);
  if (i < 0) return 0;
  p->nalias_mon -= p->aliases[i].mon;
  p->aliases[i] = p->aliases[--p->nalias];
  return 1;
}

/* The reference at the head of m's term: 1 and *ref for a reference itself, a tuple
** whose first element is one, or {'DOWN', ref, _, _, _} (*down set); else 0. Reads
** only the head of the term: what receive_ref matches and what ends a monitor alias. */
static int head_ref(lpvm_msg *m, uint64_t *ref, int *down) {
  lpvm_tread r;
  uint32_t n;
  const char *a;
  size_t len;
  *down = 0;
  if (lpvm_tread_init(&r, lpvm_msg_data(m), lpvm_msg_len(m))) return 0;
  if (lpvm_get_type(&r) == LPVM_T_TUPLE) {
    if (lpvm_get_tuple(&r, &n) || n == 0) return 0;
    if (n == 5 && lpvm_get_type(&r) == LPVM_T_ATOM) {
      if (lpvm_get_atom(&r, &a, &len) || len != 4 || memcmp(a, "DOWN", 4) != 0) return 0;
      *down = 1;
    }
  }
  return lpvm_get_type(&r) == LPVM_T_REF && !lpvm_get_ref(&r, ref);
}

/* m (not a process's values) is met in the mailbox while monitor aliases are active:
** if it is the DOWN of one, that alias ends here, as Erlang's {alias, demonitor} ends
** when the DOWN is delivered. The messages sent to it that came before the DOWN stay
** deliverable (LPVM_MSGF_ADMIT); later ones are dropped unseen (next_msg_drop). Every
** receive meets a DOWN before what came after it: they go through the mailbox in
** order, from its start, from a message already met, or from a mark made before the
** monitor (lmod_mark); receive_ref from a later mark takes no message tagged with
** another reference. */
static void alias_down(lproc *p, lpvm_msg *m) {
  uint64_t ref;
  int down;
  if (!head_ref(m, &ref, &down) || !down) return;
  int i = alias_find(p, ref);
  if (i < 0 || !p->aliases[i].mon) return;
  for (lpvm_msg *e = lpvm_mbox_next(&p->task, NULL); e && e != m; e = lpvm_mbox_next(&p->task, e))
    if (e->ref == ref) e->flags |= LPVM_MSGF_ADMIT;
  lmod_alias_del(p, ref);
}

void lmod_mark(lproc *p, uint64_t ref) {
  p->mark_ref = ref;
  p->mark_msg = p->task.mq_last;
  p->mark_gen = p->task.mq_gen;
}

/* Take m out of the mailbox keeping the mark valid (a take elsewhere voids it). */
void lmod_mbox_take(lproc *p, lpvm_msg *m) {
  int valid = p->mark_gen == p->task.mq_gen;
  lpvm_msg *prev = m->prev;
  lpvm_mbox_take(&p->task, m);
  if (!valid) return;
  if (m == p->mark_msg) p->mark_msg = prev;
  p->mark_gen = p->task.mq_gen;
}

/* m, not a process's values, nests deeper than Lua reads (a C task's, a port's:
** vm/lterm_depth.c): no receive could take it, so it goes, with a line on stderr.
** Looked at once (LPVM_MSGF_SHALLOW). */
static int too_deep(lproc *p, lpvm_msg *m) {
  if ((m->flags & (LPVM_MSGF_VALUES | LPVM_MSGF_SHALLOW)) || m->len < LTERM_DEEP_MIN) return 0;
  if (!lterm_too_deep(lpvm_msg_data(m), m->len)) {
    m->flags |= LPVM_MSGF_SHALLOW;
    return 0;
  }
  lpvm_id id = p->task.id, from = lpvm_msg_from(m);
  fprintf(stderr, "lpvm: process <0.%u.%u> dropped a message from <0.%u.%u>: it nests "
          "deeper than %d levels, which no Lua value holds\n", (unsigned)(uint32_t)id,
          (unsigned)((id >> 32) & 0x7fffffff), (unsigned)(uint32_t)from,
          (unsigned)((from >> 32) & 0x7fffffff), LTERM_DEPTH);
  return 1;
}

/* The message after `after` (NULL: the oldest) that Lua may see: a reply to an alias
** no longer active (a call that timed out), the wake-up of an interrupt (lproc.c)
** and a message too deep to decode are dropped here, unseen. A message of values
** (LPVM_MSGF_VALUES) is never a wake-up: its bytes are not compared. */
static __attribute__((noinline)) lpvm_msg *next_msg_drop(lproc *p, lpvm_msg *after) {
  lpvm_msg *m;
  while ((m = lpvm_mbox_next(&p->task, after)) != NULL &&
         ((m->ref && !(m->flags & LPVM_MSGF_ADMIT) && alias_find(p, m->ref) < 0) ||
          (!(m->flags & LPVM_MSGF_VALUES) && lproc_is_interrupt_msg(m)) ||
          too_deep(p, m))) {
    lmod_mbox_take(p, m);
    lpvm_msg_free(m);
  }
  if (m && p->nalias_mon && !m->ref && !(m->flags & LPVM_MSGF_VALUES)) alias_down(p, m);
  return m;
}

/* Inline, the usual cases read in place (twice a hop: the receive that finds nothing,
** then the wake's): none, or a message of values with no alias (lpvm_mbox_next's
** read, lpvm/task.h: the mailbox is the task's own). */
static inline lpvm_msg *next_msg(lproc *p, lpvm_msg *after) {
  lpvm_msg *m = after ? atomic_load_explicit(&after->next, memory_order_relaxed)
                      : p->task.mq_first;
  if (!m || (!m->ref && (m->flags & LPVM_MSGF_VALUES))) return m;
  return next_msg_drop(p, after);
}

/* 1 if m is for ref: tagged with it, or its head's reference is ref. */
static int ref_match(lpvm_msg *m, uint64_t ref) {
  uint64_t got;
  int down;
  return m->ref == ref || (head_ref(m, &got, &down) && got == ref);
}

/* Where a search for ref may start: after the mark if it is ref's and still valid. */
static lpvm_msg *ref_start(lproc *p, uint64_t ref) {
  if (p->mark_ref == ref && p->mark_gen == p->task.mq_gen) return p->mark_msg;
  return NULL;
}

void lmod_ref_wait_begin(lproc *p, uint64_t ref) {
  lmod_drop_owned(p);
  lmod_recv_finish(p);
  p->recv_ref = ref;
  p->scan = ref_start(p, ref);
}

/* unalias(ref), demonitor(ref [, "flush"]) and a call's end (lmod_call.c): the alias
** ref, if active, ends as Erlang ends one, at arrival. What came into the mailbox
** while it was active stays deliverable (LPVM_MSGF_ADMIT); what comes from the signal
** queue afterwards is dropped unseen (next_msg_drop). A monitor alias whose DOWN is
** already in the mailbox (no receive has met it yet) ended at that DOWN: only what
** came before it is kept, and it was not active. With flush, the DOWN of ref goes
** (Erlang's demonitor flush: {_, Ref, _, _, _}, one) and so does every message sent
** to the alias still queued: nothing of a call made by hand stays behind. Messages
** queued before ref was made cannot hold it: the walk starts at its mark if valid.
** Returns 1 if the alias was active. */
/* Flush m while a receive may be scanning: a receive predicate may call
** demonitor(ref, "flush"). The message the predicate is looking at stays, for its
** receive to take or leave (freeing it crashed the receive); the save pointer steps
** back over m. */
static void flush_msg(lproc *p, lpvm_msg *m) {
  if (m == p->cur) return;
  if (m == p->scan) p->scan = m->prev;
  lmod_mbox_take(p, m);
  lpvm_msg_free(m);
}

int lmod_ref_end(lproc *p, uint64_t ref, int flush) {
  int i = alias_find(p, ref);
  int active = i >= 0, mon = active && p->aliases[i].mon, down_seen = 0;
  if (!active && !flush) return 0;
  for (lpvm_msg *e = lpvm_mbox_next(&p->task, ref_start(p, ref)), *next; e; e = next) {
    next = lpvm_mbox_next(&p->task, e);
    uint64_t got;
    int down;
    if (e->ref == ref) {
      if (flush) {
        flush_msg(p, e);
      } else if (active) {
        e->flags |= LPVM_MSGF_ADMIT;
      }
    } else if (!down_seen && !e->ref && head_ref(e, &got, &down) && down && got == ref) {
      down_seen = 1;
      if (mon && !(e->flags & LPVM_MSGF_VALUES)) active = 0;   /* the DOWN ended it */
      if (flush) {
        flush_msg(p, e);
      } else if (!active) {
        break;   /* what came after the DOWN is not admitted */
      }
    }
  }
  if (i >= 0) lmod_alias_del(p, ref);
  return active;
}

/* ---- receive ------------------------------------------------------------------------------ */

void lmod_recv_finish(lproc *p) {
  if (p->timer_set) {
    lpvm_cancel_timer(&p->task);
    p->timer_set = 0;
  }
  p->scan = NULL;
  p->cur = NULL;
  p->timed_out = 0;
  p->polled = 0;
  p->wait = LP_RUN;
}

/* A message taken and read: one without shared binaries is only its block
** (lpvm_msg_init), which goes to this thread's free lists of small blocks
** (vm/lproc_small.h) for the next message or Lua object of its size: a list's block
** must fit every request of its class. One the in-place writer made to its term's
** size (LPVM_MSGF_SMALL) goes back to the class it came from; any other holds its
** header and term at least (one made elsewhere may be malloc's exact size), rounded
** down to the lists' 8 bytes. A lone binary's (lterm_plain_msg.c, LPVM_MSGF_SMALL
** with LPVM_MSGF_BINS) drops its reference and goes back to its class too. */
static inline void msg_done(lpvm_msg *m) {
  size_t sz = sizeof(lpvm_msg) + m->len;
  if (m->flags & LPVM_MSGF_BINS) {
    if (!(m->flags & LPVM_MSGF_SMALL)) {
      lpvm_msg_free(m);
      return;
    }
    lpvm_msg_drop_bins(m);
    sz = lpvm_msg_bin_size();
  }
  lproc_small_free(m, (m->flags & LPVM_MSGF_SMALL) ? sz : sz & ~(size_t)7);
}

/* Take m out of the mailbox and push its values. */
static int take_push(lua_State *L, lproc *p, lpvm_msg *m) {
  lmod_mbox_take(p, m);
  p->owned = m;   /* a failed decode (out of memory) must not leak it */
  int n = lterm_push_msg(L, m);
  p->owned = NULL;
  msg_done(m);
  return n;
}

/* Slot i of receive's stack (see recv_loop) is nil, read in place when it can be. */
static inline int slot_nil(lua_State *L, int i) {
  const lraw_tvalue *v = lraw_ok() ? lraw_arg(L, i) : NULL;
  return v ? lraw_is_nil(v) : lua_isnil(L, i);
}

static int recv_loop(lua_State *L, lproc *p);
static int recv_wait(lua_State *L, lproc *p, lua_KFunction k, int (*again)(lua_State *, lproc *));

static int recv_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status, (void)ctx;
  lproc *p = lproc_of(L);
  p->wait = LP_RUN;
  return recv_loop(L, p);
}

/* The predicate returned (status) for p->cur: raise its error, or return the
** message's values if it accepted it, or -1 if it rejected it (the scan goes on). */
static int pred_done(lua_State *L, lproc *p, int status) {
  p->in_pred = 0;
  if (status != LUA_OK && status != LUA_YIELD) {   /* the predicate failed */
    lmod_recv_finish(p);
    return lua_error(L);
  }
  int ok;
  if (lraw_ok()) {   /* the predicate's result read and popped in place */
    lraw_state *st = (lraw_state *)(void *)L;
    const lraw_tvalue *r = st->top - 1;
    ok = !lraw_is_nil(r) && r->tt != LRAW_VFALSE;
    st->top--;
  } else {
    ok = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  lpvm_msg *m = p->cur;
  int n = p->ncur;
  p->cur = NULL;
  if (ok) {
    lmod_mbox_take(p, m);
    msg_done(m);
    lmod_recv_finish(p);
    return n;
  }
  lua_pop(L, n);
  p->scan = m;
  return -1;
}

/* The predicate yielded (it was preempted) and has now returned. */
static int pred_k(lua_State *L, int status, lua_KContext ctx) {
  (void)ctx;
  int n = pred_done(L, lproc_of(L), status);
  return n >= 0 ? n : recv_loop(L, lproc_of(L));
}

/* Stack: [1] predicate or nil, [2] timeout or nil. A loop, not a recursion through
** the predicate's continuation: a mailbox of a million rejected messages would
** otherwise overflow the worker's C stack. */
/* lmod_recv_next, inlined into receive's loop (a call there cost a ring hop ~30
** instructions). */
__attribute__((always_inline)) static inline lpvm_msg *recv_next(lua_State *L, lproc *p) {
  for (;;) {
    if (lproc_take_interrupt(p)) {   /* the shell's Ctrl-C */
      lmod_recv_finish(p);
      luaL_error(L, "interrupted!");
    }
    /* The timer fired and every message queued before it has been looked at: stop
    ** here, or a flood of new messages would keep the scan (and the timeout) going. */
    if (p->timer_set && lpvm_timeout_reached(&p->task, p->scan)) p->timed_out = 1;
    lpvm_msg *m = p->timed_out ? NULL : next_msg(p, p->scan);
    if (m && !(m->flags & LPVM_MSGF_VALUES) && leval_is_request(m)) {   /* lpvm.eval (leval.c) */
      leval_take(L, p, m);
      continue;
    }
    return m;
  }
}

lpvm_msg *lmod_recv_next(lua_State *L, lproc *p) { return recv_next(L, p); }

static int recv_loop(lua_State *L, lproc *p) {
  for (;;) {
    lpvm_msg *m = recv_next(L, p);
    if (!m) return recv_wait(L, p, recv_k, recv_loop);
    if (slot_nil(L, 1)) {
      lmod_recv_finish(p);
      return take_push(L, p, m);
    }
    int base = lua_gettop(L);
    int n = lterm_push_msg(L, m);
    luaL_checkstack(L, n + 1, "too many values in a message");
    if (lraw_ok()) {   /* the predicate and the values copied in place */
      lraw_state *st = (lraw_state *)(void *)L;
      const lraw_tvalue *f = st->ci->func;
      lraw_tvalue *t = st->top;
      t[0] = f[1];
      for (int i = 1; i <= n; i++) t[i] = f[base + i];
      st->top = t + n + 1;
    } else {
      lua_pushvalue(L, 1);
      for (int i = 1; i <= n; i++) lua_pushvalue(L, base + i);
    }
    p->in_pred = 1;
    p->cur = m;
    p->ncur = n;
    int got = pred_done(L, p, lua_pcallk(L, n, 1, 0, 0, pred_k));
    if (got >= 0) return got;
  }
}

/* Nothing matched so far (stack: [2] the timeout or nil): poll the signal queue once
** for receive(0), time out (-1, nothing pushed), or wait for more with continuation
** k; `again` rescans (what it returns is returned). */
static inline __attribute__((always_inline)) int recv_wait_ms(lua_State *L, lproc *p, int64_t ms,
                                                            lua_KFunction k,
                                                            int (*again)(lua_State *, lproc *)) {
  /* Signals sent since this step began (a send to self, say) are still in the signal
  ** queue: before a poll says "timeout", and before a timer is started for a wait,
  ** bring them into the mailbox once (a message already sent is then taken with no
  ** timer and no step). A signal among them that ends the process (a kill) takes
  ** effect when the step ends. A wait for ever does not look: its yield ends the
  ** step, which takes them, and the look would cost every blocking receive. */
  if (ms >= 0 && !p->polled) {
    p->polled = 1;
    lpvm_msg *last = p->task.mq_last;
    if (lpvm_fetch_signals(&p->task) == 0) {
      if (p->task.mq_last != last) return again(L, p);
    } else if (lua_isyieldable(L)) {  /* killed: end the step now, it will not resume */
      p->wait = LP_RUN;
      if (L != p->L) p->sched_yield = 1;
      return lua_yieldk(L, 0, 0, k);
    }
  }
  if (p->timed_out || ms == 0) {
    lmod_recv_finish(p);
    return -1;
  }
  if (!lua_isyieldable(L)) {
    lmod_recv_finish(p);
    return luaL_error(L, "receive: cannot wait here (inside a C call such as a metamethod)");
  }
  if (ms > 0 && !p->timer_set) {
    if (lpvm_set_timer_lazy(&p->task, (uint64_t)ms) != 0)
      return luaL_error(L, "receive: no timer");
    p->timer_set = 1;
  }
  p->wait = LP_RECV;
  if (L != p->L) p->sched_yield = 1;
  lmod_note_hints(p, L);
  return lua_yieldk(L, 0, 0, k);
}

int lmod_recv_wait(lua_State *L, lproc *p, lua_KFunction k, int (*again)(lua_State *, lproc *)) {
  const lraw_tvalue *t = lraw_ok() ? lraw_arg(L, 2) : NULL;   /* the timeout in place */
  int64_t ms = t && t->tt == LRAW_VNUMINT ? t->v.i
               : t && lraw_is_nil(t)     ? -1
               : lua_isnil(L, 2)         ? -1
                                         : (int64_t)lua_tointeger(L, 2);
  return recv_wait_ms(L, p, ms, k, again);
}

/* lmod_recv_wait for receive and receive_ref: a timeout returns nil, "timeout". */
static int recv_wait(lua_State *L, lproc *p, lua_KFunction k, int (*again)(lua_State *, lproc *)) {
  int n = lmod_recv_wait(L, p, k, again);
  if (n >= 0) return n;
  lua_pushnil(L);
  lua_pushliteral(L, "timeout");
  return 2;
}

void lmod_check_wait(lua_State *L, lproc *p, const char *fname) {
  if (p->in_pred) luaL_error(L, "%s: cannot be called from a receive predicate", fname);
  if (p->in_eval) luaL_error(L, "%s: cannot wait inside lpvm.eval", fname);
}

/* receive() found nothing and waits for ever: a ring's or a chain's receive, at every
** hop. It needs none of what recv_loop's wait keeps (the stack [1] no predicate, [2] no
** timeout, read back on the wake; no timer, no poll of the signal queue), so it yields
** with a continuation of its own that takes the first message the wake finds: ~70
** instructions a hop less than through recv_any_wait, lmod_recv_wait and recv_loop.
** Whatever is left on the stack (receive(math.huge)'s argument) stays below the
** values pushed, which are what the call returns. */
static int recv_ever_k(lua_State *L, int status, lua_KContext ctx);

static __attribute__((noinline)) int recv_ever_wait(lua_State *L, lproc *p) {
  if (!lua_isyieldable(L)) {
    lmod_recv_finish(p);
    return luaL_error(L, "receive: cannot wait here (inside a C call such as a metamethod)");
  }
  p->wait = LP_RECV;
  if (L != p->L) p->sched_yield = 1;
  lmod_note_hints(p, L);
  return lua_yieldk(L, 0, 0, recv_ever_k);
}

static int recv_ever_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status, (void)ctx;
  lproc *p = lproc_of(L);
  p->wait = LP_RUN;
  p->timed_out = 0;   /* no timer of this receive's: a wait for ever does not end so */
  lpvm_msg *m = recv_next(L, p);
  if (!m) return recv_ever_wait(L, p);   /* only dropped messages came: wait on */
  p->scan = NULL;   /* an eval taken on the way may have moved it */
  return take_push(L, p, m);
}

/* receive(ms), read in place (lmod_receive: slot 1 an integer, nothing after it), found
** nothing: it waits with a continuation of its own too, which reads the timeout from
** slot 1 as it is, instead of recv_loop's stack ([1] no predicate, [2] the timeout:
** lua_settop and two pushes) read back on every wake. A request/reply's receive. */
static int recv_ms_wait(lua_State *L, lproc *p);

static int recv_ms_again(lua_State *L, lproc *p) {
  lpvm_msg *m = recv_next(L, p);
  if (!m) return recv_ms_wait(L, p);   /* timed out, or only dropped messages came */
  lmod_recv_finish(p);
  return take_push(L, p, m);
}

static int recv_ms_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status, (void)ctx;
  lproc *p = lproc_of(L);
  p->wait = LP_RUN;
  return recv_ms_again(L, p);
}

static __attribute__((noinline)) int recv_ms_wait(lua_State *L, lproc *p) {
  int n = recv_wait_ms(L, p, lraw_arg(L, 1)->v.i, recv_ms_k, recv_ms_again);
  if (n >= 0) return n;
  lua_pushnil(L);
  lua_pushliteral(L, "timeout");
  return 2;
}

/* receive(ms) found nothing: wait ([1] no predicate, [2] the timeout). */
static __attribute__((noinline)) int recv_any_wait(lua_State *L, lproc *p, int64_t ms) {
  lua_settop(L, 0);
  lua_pushnil(L);
  lua_pushinteger(L, ms);
  return recv_wait(L, p, recv_k, recv_loop);
}

/* receive() and receive(ms): any message. One already queued (a receiver draining a
** burst) is taken without the stack recv_loop keeps for a wait and without a timer.
** in_place: receive(ms)'s ms is the integer in slot 1 (recv_ms_wait reads it there). */
__attribute__((always_inline)) static inline int recv_any(lua_State *L, lproc *p, int64_t ms,
                                                          int in_place) {
  lmod_drop_owned(p);
  lmod_recv_finish(p);   /* a receive an error cut short may have left its state */
  lpvm_msg *m = recv_next(L, p);
  if (!m) return ms < 0 ? recv_ever_wait(L, p) : in_place ? recv_ms_wait(L, p)
                                                          : recv_any_wait(L, p, ms);
  p->scan = NULL;   /* an eval taken on the way may have moved it */
  return take_push(L, p, m);
}

/* lmod_receive's arguments through the C API: every form. */
static __attribute__((noinline)) int receive_args(lua_State *L, lproc *p) {
  int top = lua_gettop(L);
  if (top == 0) return recv_any(L, p, -1, 0);   /* receive(): nothing to check */
  int t1 = lua_type(L, 1);
  int64_t ms = -1;
  if (t1 == LUA_TNUMBER) {           /* receive(timeout) */
    luaL_argexpected(L, top < 2 || lua_isnil(L, 2), 2, "no value after a timeout");
    return recv_any(L, p, lmod_check_ms(L, 1), 0);
  }
  /* receive([pred [, timeout]]) */
  luaL_argexpected(L, t1 == LUA_TNONE || t1 == LUA_TNIL || t1 == LUA_TFUNCTION, 1,
                   "function or number");
  luaL_argexpected(L, top < 3, 3, "no value");
  if (!lua_isnoneornil(L, 2)) ms = lmod_check_ms(L, 2);
  lua_settop(L, 1);
  if (ms < 0) lua_pushnil(L);
  else lua_pushinteger(L, ms);
  lmod_drop_owned(p);
  lmod_recv_finish(p);   /* a receive an error cut short may have left its state */
  return recv_loop(L, p);
}

/* receive(pred) and receive(pred, ms) (EStone generic's call waits so) read in place:
** the stack is already recv_loop's ([1] the predicate, [2] the timeout, an integer
** as lmod_check_ms gives it, or nil pushed), without receive_args' checks through
** the C API (~150 instructions a call). The other forms go to receive_args. */
static __attribute__((noinline)) int receive_fn(lua_State *L, lproc *p, const lraw_tvalue *a) {
  if (LRAW_NOVARIANT(a->tt) != LUA_TFUNCTION) return receive_args(L, p);   /* any variant */
  const lraw_tvalue *b = lraw_arg(L, 2);
  if (!b) {
    lua_pushnil(L);   /* for ever */
  } else if (b->tt != LRAW_VNUMINT || b->v.i < 0 || b->v.i >= (INT64_C(1) << 53) ||
             lraw_arg(L, 3)) {
    return receive_args(L, p);
  }
  lmod_drop_owned(p);
  lmod_recv_finish(p);   /* a receive an error cut short may have left its state */
  return recv_loop(L, p);
}

/* receive([timeout]), receive(pred [, timeout]); a nil predicate means any message
** (so receive(nil, 100) waits 100 ms), a nil timeout for ever. Anything else is a
** programmer's mistake and raises. receive() and receive(ms) are read in place (no
** lua_gettop, lua_type), the rest by receive_args. */
int lmod_receive(lua_State *L) {
  lproc *p = lproc_check(L);
  lmod_check_wait(L, p, "receive");
  if (!lraw_ok()) return receive_args(L, p);
  const lraw_tvalue *a = lraw_arg(L, 1);
  int64_t ms = -1;
  if (a) {
    if (a->tt != LRAW_VNUMINT || a->v.i < 0 || a->v.i >= (INT64_C(1) << 53) || lraw_arg(L, 2))
      return receive_fn(L, p, a);
    ms = a->v.i;   /* what lmod_check_ms gives for it */
  }
  return recv_any(L, p, ms, 1);
}

static int ref_loop(lua_State *L, lproc *p);

static int ref_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status, (void)ctx;
  lproc *p = lproc_of(L);
  p->wait = LP_RUN;
  return ref_loop(L, p);
}

lpvm_msg *lmod_ref_next(lproc *p) {
  for (lpvm_msg *m = next_msg(p, p->scan); m; m = next_msg(p, m)) {
    if (ref_match(m, p->recv_ref)) return m;
    p->scan = m;
  }
  return NULL;
}

/* Stack: [1] the reference, [2] timeout or nil. */
static int ref_loop(lua_State *L, lproc *p) {
  lpvm_msg *m = lmod_ref_next(p);
  if (!m) return recv_wait(L, p, ref_k, ref_loop);
  lmod_recv_finish(p);
  lua_settop(L, 0);
  return take_push(L, p, m);
}

/* receive_ref(ref [, timeout]) -> the values of the first message tagged with ref,
** whose first value is ref, or that is a DOWN for ref; or nil, "timeout". */
static int lmod_receive_ref(lua_State *L) {
  lproc *p = lproc_check(L);
  lmod_check_wait(L, p, "receive_ref");
  uint64_t ref = lmod_check_ref(L, 1);
  luaL_argexpected(L, lua_gettop(L) < 3, 3, "no value");
  int64_t ms = lua_isnoneornil(L, 2) ? -1 : lmod_check_ms(L, 2);
  lua_settop(L, 1);
  if (ms < 0) lua_pushnil(L);
  else lua_pushinteger(L, ms);
  lmod_ref_wait_begin(p, ref);
  return ref_loop(L, p);
}

static int lmod_make_ref(lua_State *L) {
  lproc *p = lproc_check(L);
  uint64_t ref = lpvm_make_ref();
  lmod_mark(p, ref);
  lmod_push_ref(L, ref);
  return 1;
}

/* alias() -> a reference messages can be sent to with send_alias while active. */
static int lmod_alias(lua_State *L) {
  lproc *p = lproc_check(L);
  uint64_t ref = lpvm_make_ref();
  if (lmod_alias_add(p, ref, 0) != 0) return luaL_error(L, "alias: not enough memory");
  lmod_mark(p, ref);
  lmod_push_ref(L, ref);
  return 1;
}

/* unalias(ref) -> true if it was an active alias; the messages that arrive for it
** afterwards are dropped (lmod_ref_end). */
static int lmod_unalias(lua_State *L) {
  lproc *p = lproc_check(L);
  lua_pushboolean(L, lmod_ref_end(p, lmod_check_ref(L, 1), 0));
  return 1;
}

const lmod_fn lmod_msg_fns[] = {
    {"send", lmod_send},   /* lmod_send.c, as send_alias */
    {"receive", lmod_receive},
    {"receive_ref", lmod_receive_ref},
    {"make_ref", lmod_make_ref},
    {"alias", lmod_alias},
    {"unalias", lmod_unalias},
    {"send_alias", lmod_send_alias},
    {"call", lmod_call},   /* lmod_call.c */
    {NULL, NULL}};
