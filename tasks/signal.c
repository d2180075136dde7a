/*
** signal.c -- sending signals, and a task handling the ones it receives.
**
** Every interaction between tasks is a signal pushed on the receiver's MPSC queue
** (Hedqvist 5.2.1): the sender pins the receiver, pushes, raises PENDING and, if the
** receiver was waiting, schedules it. Only the receiver acts on a signal, so links,
** monitors and the mailbox need no lock, and the sender never waits for it.
*/
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lpvm/term.h"
#include "tasks/mpsc.h"
#include "tasks/node.h"
#include "tasks/task_int.h"

/* Signals a task handles per step before it yields to others: a flood of
** messages can't keep one task draining forever. */
#define SIG_BATCH 4096

/* A signal the VM owes (a DOWN, an EXIT, a receive's timeout, a kill) that cannot be
** allocated is lost, and whoever waits for it may wait for ever: memory has run out
** for the whole OS process (ulimit -v, strict overcommit), which a per-process
** max_heap prevents. Said once on stderr, with no allocation, so that such a wait is
** not silent. BEAM stops the node in this case. */
static void say_lost(void) {
  static atomic_flag said = ATOMIC_FLAG_INIT;
  static const char line[] = "lpvm: out of memory: signals (DOWN, EXIT, timeouts) are "
                             "being lost; set --max-heap (docs/reliability.md)\n";
  if (!atomic_flag_test_and_set(&said)) {
    ssize_t n = write(2, line, sizeof line - 1);
    (void)n;
  }
}

struct lpvm_sig *sig_new(uint32_t kind, lpvm_id from, uint64_t ref, const void *data,
                         size_t len) {
  struct lpvm_sig *s = malloc(sizeof(struct lpvm_sig) + len);
  if (!s) {
    say_lost();
    return NULL;
  }
  s->prev = NULL;
  s->from = from;
  s->ref = ref;
  s->kind = (uint16_t)kind;
  s->flags = 0;
  s->len = (uint32_t)len;
  if (len) memcpy(s + 1, data, len);
  return s;
}

static const uint8_t *sig_data(const struct lpvm_sig *s) {
  return (const uint8_t *)(s + 1);
}

/* Prefetching. A hop touches a handful of lines of its receiver, all cold when
** thousands of processes take turns, and each access waits for the one before: the
** sender's pushes (the record's counts, the signal queue's tail and stub, the
** scheduling word) and then the receiver's step (its Lua state). Asked for together
** up front, the misses overlap each other and the sender's remaining instructions.
**   - sig_push asks for the record's hot part, four lines from rq_next (the task's
**     fields and its type's, lpvm/task.h), before it touches the first of them;
**   - claimed, once a sender's CAS made the receiver runnable (next on this very
**     worker, in a chain of sends, once the sender's step ends), asks for four lines
**     at its hint (a Lua process's lua_State with the start of its global state),
**     and for the spans of lines its owner noted as it began to wait (lpvm/task.h,
**     more.hints: a Lua process's call frames, stack slots, closure, prototype, next
**     instructions and the lines of their field lookups, vm/lmod_hint.c), which its
**     step would otherwise miss one after the other, each found through the one
**     before.
** A prefetch never faults, so lines past a smaller record or a stale hint cost
** nothing but the fetch. Cachegrind ignores prefetches: built with -DLPVM_CG_PREFETCH
** they are loads, so that estone/cg_hop.sh shows which misses they cover (the misses
** move here). */
#ifdef LPVM_CG_PREFETCH   /* the value is kept: valgrind drops a load nobody uses */
static volatile char cg_sink;
#define PREFETCH(a) (cg_sink = *(const volatile char *)(a))
#else
#define PREFETCH(a) __builtin_prefetch((a), 1, 3)
#endif
static inline void prefetch4(const void *p) {
  const char *c = p;
  PREFETCH(c);
  PREFETCH(c + 64);
  PREFETCH(c + 128);
  PREFETCH(c + 192);
}

/* The sender whose CAS took t from WAITING to QUEUED (next: the word it stored)
** schedules it, so it is queued exactly once. */
static inline void claimed(lpvm_task *t, uint32_t next) {
  if (next & TS_THREAD) {   /* its own thread may run it (and end it) at once */
    thread_wake(t);
    return;
  }
  /* Read before the task is in a run queue: until then no worker can end it. */
  const void *h = atomic_load_explicit(&t->hint, memory_order_relaxed);
  if (h) {
    prefetch4(h);
    /* the further hints: spans of lines the hint's owner noted (none: 0; a Lua
    ** process notes them only in a big VM, lpvm_is_big, and the first always:
    ** its call frame) */
    if (atomic_load_explicit(&t->more.hints[0], memory_order_relaxed))
#pragma GCC unroll 8
      for (int i = 0; i < LPVM_TASK_HINTS; i++) {   /* 0: the hint's line again */
        int32_t d = atomic_load_explicit(&t->more.hints[i], memory_order_relaxed);
        const char *a = (const char *)h + (d & ~7);
        switch (d & 7) {   /* the span's lines after the first, then the first */
          case 7: PREFETCH(a + 7 * 64); /* fall through */
          case 6: PREFETCH(a + 6 * 64); /* fall through */
          case 5: PREFETCH(a + 5 * 64); /* fall through */
          case 4: PREFETCH(a + 4 * 64); /* fall through */
          case 3: PREFETCH(a + 3 * 64); /* fall through */
          case 2: PREFETCH(a + 2 * 64); /* fall through */
          case 1: PREFETCH(a + 64); /* fall through */
          default: PREFETCH(a);
        }
      }
  }
  sched_make_runnable(t);
}

/* The one WAITING -> QUEUED transition of a task nobody signals (task_sched.h): a
** spawn's. cur is the word last seen. */
void task_claim(lpvm_task *t, uint32_t cur) {
  while (ts_status(cur) == TS_WAITING) {
    uint32_t next = (cur & ~TS_STATUS) | TS_QUEUED;
    if (atomic_compare_exchange_weak_explicit(&t->sched_word, &cur, next,
                                              memory_order_acq_rel,
                                              memory_order_acquire)) {
      claimed(t, next);
      return;
    }
  }
}

/* Raise PENDING, and if t was WAITING take it to QUEUED in the same CAS: that sender
** schedules it. PENDING already up needs no locked instruction (a sender's burst to
** one receiver: all but its first message): whoever raised it has scheduled t or
** will, and t clears it only in begin_step, before it drains. Our push (the exchange
** in mpsc_push) precedes this load and the clear precedes t's reads of the queue, all
** seq_cst: if we saw PENDING before the clear, t's drain sees our push, and if only
** half of it (our link not yet stored), sig_handle_all raises PENDING again so t
** looks once more. A failed CAS reads the word again as the first load did. */
static void notify(lpvm_task *t) {
  uint32_t cur = atomic_load_explicit(&t->sched_word, memory_order_seq_cst);
  while (!(cur & TS_PENDING)) {
    uint32_t next = cur | TS_PENDING;
    if (ts_status(cur) == TS_WAITING) next = (next & ~TS_STATUS) | TS_QUEUED;
    if (atomic_compare_exchange_weak_explicit(&t->sched_word, &cur, next,
                                              memory_order_seq_cst,
                                              memory_order_seq_cst)) {
      if (ts_status(cur) == TS_WAITING) claimed(t, next);
      return;
    }
  }
}

uint32_t sig_push(lpvm_task *t, struct lpvm_sig *s) {
  prefetch4(&t->rq_next);
  uint32_t q = s->kind == SIG_MESSAGE || s->kind == SIG_DIST ? mbox_count_in(t, s) : 0;
  mpsc_push(t, s);
  notify(t);
  return q;
}

/* A remote id's signals go to the router (io/), which hands them to the connection
** of that node: links, monitors and exits keep their local rules. */
int sig_send_q(lpvm_id to, struct lpvm_sig *s, uint32_t *queued) {
  if (node_id_is_remote(to)) return node_route(to, s, queued);
  lpvm_task *t = ptab_pin(to);
  if (!t) return LPVM_ENOPROC;
  uint32_t q = sig_push(t, s);
  if (queued) *queued = q;
  ptab_unpin(t);
  return 0;
}

int sig_send(lpvm_id to, struct lpvm_sig *s) { return sig_send_q(to, s, NULL); }

/* Send a signal built here; a dead receiver just loses it. */
static int send_new(lpvm_id to, uint32_t kind, lpvm_id from, uint64_t ref,
                    const void *data, size_t len) {
  struct lpvm_sig *s = sig_new(kind, from, ref, data, len);
  if (!s) return LPVM_ENOMEM;
  int rc = sig_send(to, s);
  if (rc) free(s);
  return rc;
}

/* ---- receiving ------------------------------------------------------------------ */

static void deliver(lpvm_task *t, lpvm_tbuf *b, lpvm_id from) {
  lpvm_msg *m = lpvm_tbuf_to_msg(b);
  lpvm_tbuf_free(b);
  if (!m) return;  /* out of memory: the notice is lost, the task lives on */
  m->from = from;
  mbox_count_in(t, m);
  mbox_append(t, m);
}

static void die(lpvm_task *t, const uint8_t *reason, size_t len) {
  lpvm_set_reason(t, reason, len);
  t->state = LPVM_EXIT;
}

/* Erlang's exit-signal rules. `linked`: the signal comes from a dying link. */
static void on_exit_sig(lpvm_task *t, struct lpvm_sig *s, int linked) {
  const uint8_t *reason = sig_data(s);
  /* unlinked meanwhile; or the old link's exit, sent before our UNLINK was taken */
  if (linked && (rel_unlinking(t, s->from) || !rel_link_del(t, s->from))) return;
  if (!linked && term_is(reason, s->len, term_kill, term_kill_len)) {
    die(t, term_killed, term_killed_len);
  } else if (t->tflags & TF_TRAP_EXIT) {
    lpvm_tbuf b;
    lpvm_tbuf_init(&b);
    lpvm_put_tuple(&b, 3);
    lpvm_put_atom(&b, "EXIT");
    lpvm_put_pid(&b, s->from);
    lpvm_put_term(&b, reason, s->len);
    deliver(t, &b, s->from);
  } else if (lpvm_term_is_atom(reason, s->len, "normal")) {
    if (!linked && s->from == t->id) die(t, reason, s->len);
  } else {
    die(t, reason, s->len);
  }
}

/* {'DOWN', Ref, process | port, Who, Reason}: Who is the pid, or {Name, Node} for a
** monitor made by name (lpvm_monitor_name), as Erlang's. */
static void on_down(lpvm_task *t, struct lpvm_sig *s) {
  char *name = rel_mon_name_take(t, s->ref);   /* before rel_mon_del frees it */
  if (!rel_mon_del(t, s->ref, NULL)) {          /* demonitored: no DOWN */
    free(name);
    return;
  }
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 5);
  lpvm_put_atom(&b, "DOWN");
  lpvm_put_ref(&b, s->ref);
  lpvm_put_atom(&b, lpvm_id_is_port(s->from) ? "port" : "process");
  if (name) {   /* {Name, Node}: a remote name's DOWN comes from that node's id */
    const node_desc *nd = node_id_is_remote(s->from) ? node_get(node_id_index(s->from)) : NULL;
    lpvm_put_tuple(&b, 2);
    lpvm_put_atom(&b, name);
    lpvm_put_atom(&b, nd ? nd->name : node_self()->name);
    free(name);
  } else {
    lpvm_put_pid(&b, s->from);
  }
  lpvm_put_term(&b, sig_data(s), s->len);
  deliver(t, &b, s->from);
}

static const char *status_name(const lpvm_task *t) {
  if (t->suspended) return "suspended";
  switch (t->state) {
    case LPVM_WAIT: return "waiting";
    case LPVM_EXIT: return "exiting";
    default: return "runnable";
  }
}

static void on_info(lpvm_task *t, struct lpvm_sig *s) {
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 3);
  lpvm_put_atom(&b, "info");
  lpvm_put_ref(&b, s->ref);
  size_t mark = lpvm_put_map_open(&b);
  lpvm_put_atom(&b, "id"), lpvm_put_pid(&b, t->id);
  lpvm_put_atom(&b, "type"), lpvm_put_binary(&b, t->def->type, strlen(t->def->type));
  lpvm_put_atom(&b, "priority"), lpvm_put_int(&b, t->prio);
  lpvm_put_atom(&b, "status"), lpvm_put_atom(&b, status_name(t));
  lpvm_put_atom(&b, "mode"), lpvm_put_atom(&b, lpvm_on_thread(t) ? "thread" : "worker");
  lpvm_put_atom(&b, "message_queue_len"), lpvm_put_int(&b, t->mq_len);
  lpvm_put_atom(&b, "message_queue_bytes");
  lpvm_put_int(&b, (int64_t)(lpvm_queued_bytes(t) + lpvm_queued_msgs(t) * sizeof(lpvm_msg)));
  lpvm_put_atom(&b, "reductions"), lpvm_put_int(&b, (int64_t)t->reductions);
  lpvm_put_atom(&b, "trap_exit");
  lpvm_put_atom(&b, (t->tflags & TF_TRAP_EXIT) ? "true" : "false");
  uint32_t pairs = 9;
  if (t->def->handle_info) {
    int extra = t->def->handle_info(t, &b);
    if (extra > 0) pairs += (uint32_t)extra;
  }
  lpvm_patch_map(&b, mark, pairs);
  lpvm_msg *m = lpvm_tbuf_to_msg(&b);
  lpvm_tbuf_free(&b);
  if (m && lpvm_send_msg(t, s->from, m) != 0) { /* asker gone: nothing to do */ }
}

static void on_priority(lpvm_task *t, int prio) {
  (void)lpvm_set_prio(t, prio);  /* a forbidden change is silently refused */
}

static void on_migrate(lpvm_task *t, int to_thread) {
  t->tflags &= ~(TF_TO_THREAD | TF_TO_WORKER);
  int on_thread = lpvm_on_thread(t);
  if (to_thread && !on_thread) t->tflags |= TF_TO_THREAD;
  else if (!to_thread && on_thread && !(t->def->flags & LPVM_TASK_CANT_SCHEDULE))
    t->tflags |= TF_TO_WORKER;
}

/* Handle one signal; returns 1 when it must not be freed (it became a message). */
static int handle_one(lpvm_task *t, struct lpvm_sig *s) {
  switch (s->kind) {
    case SIG_MESSAGE: case SIG_DIST: mbox_append(t, s); return 1;
    case SIG_LINK:   /* one sent before it took our UNLINK is void */
      if (!rel_unlinking(t, s->from)) rel_link_add(t, s->from);
      break;
    case SIG_UNLINK:
      rel_link_del(t, s->from);
      if (!node_id_is_remote(s->from)) send_new(s->from, SIG_UNLINK_ACK, t->id, 0, NULL, 0);
      break;
    case SIG_UNLINK_ACK: rel_unlinking_del(t, s->from); break;
    case SIG_EXIT: on_exit_sig(t, s, 0); break;
    case SIG_EXIT_LINK: on_exit_sig(t, s, 1); break;
    case SIG_MONITOR: rel_watch_add(t, s->ref, s->from); break;
    case SIG_DEMONITOR: rel_watch_del(t, s->ref, 0); break;
    case SIG_DOWN: on_down(t, s); break;
    case SIG_SUSPEND: t->suspended++; break;
    case SIG_RESUME: if (t->suspended) t->suspended--; break;
    case SIG_INFO: on_info(t, s); break;
    case SIG_PRIORITY: on_priority(t, (int)s->ref); break;
    case SIG_MIGRATE: on_migrate(t, (int)s->ref); break;
    case SIG_TIMEOUT: task_timer_fired(t, s->ref); break;
    default: break;
  }
  return 0;
}

/* HandleSignals. Returns 1 if signals are left over (batch full). */
int sig_handle_all(lpvm_task *t) {
  for (int n = 0; n < SIG_BATCH; n++) {
    if (t->state == LPVM_EXIT) return 0;
    struct lpvm_sig *s = mpsc_pop(t);
    if (!s) {
      /* A push caught between its exchange and its link: its sender may have seen
      ** PENDING up and skipped the wake (notify), so keep it up: the step ends
      ** QUEUED and the next one takes the signal. */
      if (!mpsc_empty(t)) atomic_fetch_or_explicit(&t->sched_word, TS_PENDING, memory_order_seq_cst);
      return 0;
    }
    if (!handle_one(t, s)) free(s);
  }
  return 1;
}

/* A dead task's leftovers: a LINK or MONITOR that came too late gets noproc. A dead
** connection's: a wrapped LINK or MONITOR for its node gets noconnection, as the
** connection would have answered. */
void sig_drain_dead(lpvm_task *t) {
  struct lpvm_sig *s;
  while ((s = mpsc_pop(t)) != NULL) {
    sig_wrap w;
    if (s->kind == SIG_LINK)
      send_new(s->from, SIG_EXIT_LINK, t->id, 0, term_noproc, term_noproc_len);
    else if (s->kind == SIG_UNLINK && !node_id_is_remote(s->from))
      send_new(s->from, SIG_UNLINK_ACK, t->id, 0, NULL, 0);
    else if (s->kind == SIG_MONITOR)
      send_new(s->from, SIG_DOWN, t->id, s->ref, term_noproc, term_noproc_len);
    else if (s->kind == SIG_DIST && s->len >= sizeof w &&
             (memcpy(&w, sig_data(s), sizeof w), w.kind == SIG_LINK || w.kind == SIG_MONITOR))
      send_new(s->from, w.kind == SIG_LINK ? SIG_EXIT_LINK : SIG_DOWN, w.to,
               w.kind == SIG_LINK ? 0 : s->ref, term_noconnection, term_noconnection_len);
    lpvm_msg_free(s);   /* a message's binaries are released */
  }
}

/* ---- the public signal API --------------------------------------------------------- */

static lpvm_id self_id(const lpvm_task *self) { return self ? self->id : 0; }

/* The pin cache. A task sending many messages to one receiver in a step (msg10: ~45
** sends a step with one worker) pinned and unpinned the receiver's slot for each, two
** locked read-modify-writes a message. Inside a step on a worker (task_step arms the
** cache, sig_cache_end drops it when the step's callbacks return) a message's pin
** is kept for the next message to the same id; a send to another id, or the end of
** the step, releases it. The step is bounded (time slices), so a receiver that died
** meanwhile is reaped (its late signals answered) when the sender's step ends, by
** this worker's unpin, instead of at its own exit. A kept pin is used only while the
** receiver is not DEAD: a send to a task that has died fails (ENOPROC) as it would
** by a new pin. Only the thread's own step touches the cache. */
_Thread_local sig_pin_cache sig_pins;

void sig_cache_drop(void) {
  lpvm_task *t = sig_pins.t;
  sig_pins.t = NULL;
  sig_pins.id = 0;
  ptab_unpin(t);
}

/* Push message m to local id `to` through the cache (sig_pins.on). */
static int send_cached(lpvm_id to, lpvm_msg *m, uint32_t *queued) {
  lpvm_task *t = sig_pins.t;
  if (!t || sig_pins.id != to) {
    /* A new pin: ptab_pin refuses a dead task. Its record is not read here: the
    ** first touch of its lines is sig_push's, which prefetches them all at once (a
    ** read of the scheduling word first was one more miss in series, ~100 ns a hop
    ** in a ring of 10,000). */
    if (t) sig_cache_drop();
    if ((t = ptab_pin(to)) == NULL) return LPVM_ENOPROC;
    sig_pins.t = t;
    sig_pins.id = to;
  } else if (ts_status(atomic_load_explicit(&t->sched_word, memory_order_acquire)) ==
             TS_DEAD) {   /* a kept pin: the task may have died since (its line is warm) */
    return LPVM_ENOPROC;
  }
  uint32_t q = sig_push(t, m);
  if (queued) *queued = q;
  return 0;
}

int lpvm_send_msg_queued(lpvm_task *self, lpvm_id to, lpvm_msg *m, uint32_t *queued) {
  if (queued) *queued = 0;
  if (!m) return LPVM_EINVAL;
  m->kind = SIG_MESSAGE;
  m->from = self_id(self);
  int rc = sig_pins.on && !node_id_is_remote(to) ? send_cached(to, m, queued)
                                                   : sig_send_q(to, m, queued);
  if (rc) lpvm_msg_free(m);
  return rc;
}

/* A message to itself (EStone's timer micro sends itself 100 a loop) goes straight
** into the mailbox when its signal queue is empty: no signal of its own is then ahead
** of it (one that is, an exit to itself say, keeps it behind by the queue). A signal
** another sender pushes meanwhile may come after it: only each sender's own order is
** kept, as through the queue, where the two pushes race the same way. The running
** task alone touches its mailbox; the counts are the senders' atomic ones. */
int lpvm_send_msg_self(lpvm_task *self, lpvm_msg *m) {
  if (!self || !m || !mpsc_empty(self)) return lpvm_send_msg(self, self ? self->id : 0, m);
  m->kind = SIG_MESSAGE;
  m->from = self->id;
  mbox_count_in(self, m);
  mbox_append(self, m);
  return 0;
}

int lpvm_send_msg(lpvm_task *self, lpvm_id to, lpvm_msg *m) {
  return lpvm_send_msg_queued(self, to, m, NULL);
}

int lpvm_send(lpvm_task *self, lpvm_id to, const void *term, size_t len) {
  if (!term && len) return LPVM_EINVAL;
  lpvm_msg *m = lpvm_msg_new(len);
  if (!m) return LPVM_ENOMEM;
  if (len) memcpy(lpvm_msg_data(m), term, len);
  return lpvm_send_msg(self, to, m);
}

int lpvm_send_name(lpvm_task *self, const char *name, const void *term, size_t len) {
  lpvm_id to = lpvm_whereis(name);
  return to ? lpvm_send(self, to, term, len) : LPVM_ENOPROC;
}

/* An answer the runtime gives a task on behalf of a dead id. */
static void self_notice(lpvm_task *self, uint32_t kind, lpvm_id from, uint64_t ref) {
  struct lpvm_sig *s = sig_new(kind, from, ref, term_noproc, term_noproc_len);
  if (s) sig_push(self, s);
}

int lpvm_link(lpvm_task *self, lpvm_id other) {
  if (!self || !other) return LPVM_EINVAL;
  if (other == self->id) return 0;
  int rc = rel_link_add(self, other);
  if (rc <= 0) return rc;  /* already linked, or out of memory */
  if (send_new(other, SIG_LINK, self->id, 0, NULL, 0) == LPVM_ENOPROC)
    self_notice(self, SIG_EXIT_LINK, other, 0);
  return 0;
}

/* Erlang's guarantee: after unlink returns, the link has no effect on the caller,
** even if the other side's LINK or exit is already on its way (a port opened for us
** by another task links in its own setup). For a local id the UNLINK is always sent
** and answered (UNLINK_ACK); until the answer the caller ignores the other's LINK and
** linked exits (links.c). A dead id is answered at once: every signal it sent is
** already queued, ahead of the answer. A remote id keeps the connection's rules. */
int lpvm_unlink(lpvm_task *self, lpvm_id other) {
  if (!self || !other) return LPVM_EINVAL;
  if (other == self->id) return 0;
  int had = rel_link_del(self, other);
  if (node_id_is_remote(other) || rel_unlinking_add(self, other) != 0) {
    if (had) send_new(other, SIG_UNLINK, self->id, 0, NULL, 0);
    return 0;   /* (out of memory: the unlink as before the guarantee) */
  }
  struct lpvm_sig *s = sig_new(SIG_UNLINK, self->id, 0, NULL, 0);
  if (s && sig_send(other, s) == 0) return 0;
  free(s);
  struct lpvm_sig *ack = sig_new(SIG_UNLINK_ACK, other, 0, NULL, 0);
  if (ack) sig_push(self, ack);
  else rel_unlinking_del(self, other);
  return 0;
}

/* A monitor of target (name: by that name, its DOWN names it). */
static int monitor(lpvm_task *self, lpvm_id target, const char *name, size_t len,
                   uint64_t *ref) {
  uint64_t r = lpvm_make_ref();
  int rc = rel_mon_add(self, r, target);
  if (rc) return rc;
  if (name && (rc = rel_mon_name_add(self, r, name, len)) != 0) {
    rel_mon_del(self, r, NULL);
    return rc;
  }
  *ref = r;
  if (send_new(target, SIG_MONITOR, self->id, r, NULL, 0) == LPVM_ENOPROC)
    self_notice(self, SIG_DOWN, target, r);
  return 0;
}

int lpvm_monitor(lpvm_task *self, lpvm_id target, uint64_t *ref) {
  if (!self || !target || !ref) return LPVM_EINVAL;
  return monitor(self, target, NULL, 0, ref);
}

/* Erlang's monitor(process, Name): the task that holds name now is watched; a free
** name gets its noproc DOWN at once (an id no task has is watched). */
int lpvm_monitor_name(lpvm_task *self, const char *name, uint64_t *ref) {
  if (!self || !name || !ref) return LPVM_EINVAL;
  size_t len = strlen(name);
  if (len > 255) return LPVM_EINVAL;
  lpvm_id target = lpvm_whereis(name);
  return monitor(self, target ? target : LPVM_ID_DEAD, name, len, ref);
}

/* Erlang's monitor(process, {Name, Node}) for another node: the watched id is an
** id of that node (creation 0: no incarnation's) standing for the name, and the
** MONITOR signal carries the name as an atom term, which the connection sends as
** the monitor's target (io/dist_ctl.c). No connection can be made: DOWN
** noconnection at once, as erl. */
int lpvm_monitor_remote_name(lpvm_task *self, const char *name, const char *node,
                             uint64_t *ref) {
  size_t len = name ? strlen(name) : 0, nl = node ? strlen(node) : 0;
  if (!self || !ref || len == 0 || len > 255 || nl == 0) return LPVM_EINVAL;
  if (node_is_self(node, nl, UINT32_MAX)) return lpvm_monitor_name(self, name, ref);
  int idx = node_intern(node, nl, 0);
  if (idx < 0) return idx;
  lpvm_id target = node_remote_pid((uint32_t)idx, 0, 0);
  uint64_t r = lpvm_make_ref();
  int rc = rel_mon_add(self, r, target);
  if (rc) return rc;
  if ((rc = rel_mon_name_add(self, r, name, len)) != 0) {
    rel_mon_del(self, r, NULL);
    return rc;
  }
  *ref = r;
  uint8_t atom[3 + 255] = {131, 119, (uint8_t)len};
  memcpy(atom + 3, name, len);
  if (send_new(target, SIG_MONITOR, self->id, r, atom, 3 + len) == LPVM_ENOPROC) {
    struct lpvm_sig *s = sig_new(SIG_DOWN, target, r, term_noconnection,
                                 term_noconnection_len);
    if (s) sig_push(self, s);
  }
  return 0;
}

int lpvm_demonitor(lpvm_task *self, uint64_t ref) {
  lpvm_id target;
  if (!self) return LPVM_EINVAL;
  if (rel_mon_del(self, ref, &target))
    send_new(target, SIG_DEMONITOR, self->id, ref, NULL, 0);
  return 0;
}

int lpvm_unwatch(lpvm_task *self, uint64_t ref, lpvm_id watcher) {
  return self && watcher ? rel_watch_del(self, ref, watcher) : 0;
}

int lpvm_demonitor_quiet(lpvm_task *self, uint64_t ref) {
  return self ? rel_mon_del(self, ref, NULL) : 0;
}

int lpvm_exit(lpvm_task *self, lpvm_id target, const uint8_t *reason, size_t len) {
  if (!reason || lpvm_term_check(reason, len) != 0) return LPVM_EBADTERM;
  return send_new(target, SIG_EXIT, self_id(self), 0, reason, len);
}

int lpvm_exit_atom(lpvm_task *self, lpvm_id target, const char *atom) {
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_atom(&b, atom);
  int rc = b.err ? b.err : lpvm_exit(self, target, b.data, b.len);
  lpvm_tbuf_free(&b);
  return rc;
}

int lpvm_kill(lpvm_task *self, lpvm_id target) {
  return send_new(target, SIG_EXIT, self_id(self), 0, term_kill, term_kill_len);
}

int lpvm_suspend(lpvm_task *self, lpvm_id target) {
  return send_new(target, SIG_SUSPEND, self_id(self), 0, NULL, 0);
}

int lpvm_resume(lpvm_task *self, lpvm_id target) {
  return send_new(target, SIG_RESUME, self_id(self), 0, NULL, 0);
}

int lpvm_request_info(lpvm_task *self, lpvm_id target, uint64_t *ref) {
  if (!self || !ref) return LPVM_EINVAL;
  *ref = lpvm_make_ref();
  return send_new(target, SIG_INFO, self->id, *ref, NULL, 0);
}

int lpvm_set_prio_of(lpvm_task *self, lpvm_id target, int prio) {
  if (prio < LPVM_PRIO_MAX || prio > LPVM_PRIO_MIN) return LPVM_EINVAL;
  return send_new(target, SIG_PRIORITY, self_id(self), (uint64_t)prio, NULL, 0);
}

int lpvm_migrate(lpvm_task *self, lpvm_id target, int to_thread) {
  lpvm_task *t = ptab_pin(target);
  if (!t) return LPVM_ENOPROC;
  int rc = 0;
  if (!to_thread && (t->def->flags & LPVM_TASK_CANT_SCHEDULE)) rc = LPVM_ECANTSCHED;
  else {
    struct lpvm_sig *s = sig_new(SIG_MIGRATE, self_id(self), to_thread ? 1 : 0, NULL, 0);
    if (s) sig_push(t, s);
    else rc = LPVM_ENOMEM;
  }
  ptab_unpin(t);
  return rc;
}

/* References come from a global counter, taken in blocks per thread so that
** making one is a thread-local increment. */
uint64_t lpvm_make_ref(void) {
  static _Atomic uint64_t next_block = 1;
  static _Thread_local uint64_t cur, end;
  if (cur == end) {
    cur = atomic_fetch_add_explicit(&next_block, 1024, memory_order_relaxed);
    end = cur + 1024;
  }
  return cur++;
}
