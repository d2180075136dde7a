/*
** task_timer.c -- timers as tasks see them: SetTimer (handle_timeout) and send-after.
**
** The timer thread never touches a task: when a task's timer fires it sends the
** task a TIMEOUT signal carrying the timer's sequence number, and the task accepts
** it only if that timer is still its current one. A cancelled or replaced timer's
** late signal is therefore ignored, and handle_timeout runs at most once per timer.
**
** A receive's timer, started late (lpvm_set_timer_lazy). In a VM of one worker, a
** client's receive with a timeout waits while the server's step runs on the same
** thread, and the reply wakes it before that step ends (a request/reply, a
** gen_server call): its timer was started (a record on the timer service's
** in-queue) and taken back at every call, ~250 instructions of ~7,100. There the
** timer is only noted in the task (timer_seq holds the milliseconds with DEFERRED)
** and the worker keeps the one task whose timer is noted (task_noted): at the end
** of the next step the task is still WAITING, or before the worker looks for work
** elsewhere and sleeps, the timer is started for real; a task made runnable by then
** is left to its own step, which takes its message (the note is dropped: no timer
** was ever started) or waits again (the timer is started at that step's end: a note
** lives through one other step at most, so a stream of wake-ups that are not the
** reply cannot put the timeout off). The timeout is counted from the start, so it
** fires up to a step later than `ms` after the receive began, never earlier. Only
** with one worker: every step of a worker task then runs on this thread, so the
** note, the record and the start are this thread's alone (other threads only make
** the task runnable, which is read from its scheduling word); with more workers the
** woken task could run on another one while this one starts its timer.
**
** A noted task is always the kept one: a second task noting its timer first starts
** the kept one's (a woken task's timer is then started and cancelled, as without the
** note), so a step's end has only the kept task to look at (task_noted: one load
** when there is none, every step of a ring).
*/
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/task_int.h"
#include "timers/timer.h"

static void fire_timeout(void *p, uint64_t id, uint64_t seq) {
  (void)p;
  struct lpvm_sig *s = sig_new(SIG_TIMEOUT, 0, seq, NULL, 0);
  if (s && sig_send(id, s) != 0) free(s);
}

#define DEFERRED TIMER_NOTED
#define FRESH    TIMER_NOTED_NOW
#define MS_MASK  (FRESH - 1)

/* The task whose timer this worker noted, or NULL (see the top). */
_Thread_local lpvm_task *task_noted;

/* This thread is the worker of a VM of one worker: 1, no: -1, not asked yet: 0. A
** thread is a worker of one VM for its whole life, so it is asked once. */
static _Thread_local int8_t tl_alone;

static int is_deferred(const lpvm_task *t) { return (t->timer_seq & DEFERRED) != 0; }

int lpvm_set_timer(lpvm_task *self, uint64_t ms) {
  if (!self) return LPVM_EINVAL;
  if (self->timer || self->timer_seq) lpvm_cancel_timer(self);
  uint64_t seq = lpvm_make_ref();
  lpvm_timer *tm = timer_start(ms, fire_timeout, NULL, self->id, seq);
  if (!tm) return LPVM_ENOMEM;
  self->timer = tm;
  self->timer_seq = seq;
  return 0;
}

/* Start t's noted timer for real. Out of memory, the note stays (for the next try). */
static void start_noted(lpvm_task *t) {
  uint64_t ms = t->timer_seq & MS_MASK;
  t->timer_seq = 0;
  if (lpvm_set_timer(t, ms) != 0) t->timer_seq = DEFERRED | ms;
}

static __attribute__((noinline)) int set_lazy_slow(lpvm_task *self, uint64_t ms) {
  if (!self) return LPVM_EINVAL;
  if (__builtin_expect(tl_alone == 0, 0)) tl_alone = sched_alone() ? 1 : -1;
  if (tl_alone < 0 || ms > MS_MASK) return lpvm_set_timer(self, ms);
  lpvm_task *d = task_noted;
  if (d && d != self) {   /* another task's note is kept (woken, its step to come) */
    start_noted(d);
    if (is_deferred(d)) return lpvm_set_timer(self, ms);   /* out of memory: d stays */
  }
  if (self->timer || self->timer_seq) lpvm_cancel_timer(self);
  self->timer_seq = DEFERRED | FRESH | ms;
  task_noted = self;
  return 0;
}

/* The usual case first, with nothing to save: nothing kept but this task, no timer. */
int lpvm_set_timer_lazy(lpvm_task *self, uint64_t ms) {
  if (self && tl_alone > 0 && ms <= MS_MASK && (!task_noted || task_noted == self) &&
      !self->timer && !self->timer_seq) {
    self->timer_seq = DEFERRED | FRESH | ms;
    task_noted = self;
    return 0;
  }
  return set_lazy_slow(self, ms);
}

/* The kept task d's note, at the end of another task's step or before the worker
** sleeps: started if d still waits (nobody woke it); kept if d was woken, for its own
** step's end. 1 if d is no longer kept. */
static int settle(lpvm_task *d) {
  if (!is_deferred(d)) return 1;
  uint32_t w = atomic_load_explicit(&d->sched_word, memory_order_acquire);
  if (ts_status(w) != TS_WAITING || (w & TS_PENDING)) return 0;
  start_noted(d);
  return !is_deferred(d);   /* out of memory: kept, tried again */
}

void task_timer_step_end(lpvm_task *t, int r) {
  lpvm_task *d = task_noted;
  if (d != t) {   /* another task's note (t NULL: t died) */
    if (settle(d)) task_noted = NULL;
    return;
  }
  if (!is_deferred(t)) {   /* its message came (or it died, or slept): nothing started */
    task_noted = NULL;
    return;
  }
  if ((t->timer_seq & FRESH) && r != STEP_HANDOFF) {
    t->timer_seq &= ~FRESH;   /* noted in this step: looked at after the next one */
    return;
  }
  /* Noted before this step (its wake was not the end of its wait), or leaving the
  ** workers: start it now (out of memory, it stays kept and is tried again). */
  start_noted(t);
  if (!is_deferred(t)) task_noted = NULL;
}

void task_timers_idle(void) {
  lpvm_task *d = task_noted;
  if (d && settle(d)) task_noted = NULL;
}

int lpvm_cancel_timer(lpvm_task *self) {
  if (!self) return LPVM_EINVAL;
  int won = is_deferred(self);   /* a noted timer never fires: cancelled */
  if (self->timer) {
    won = timer_cancel(self->timer);
    timer_release(self->timer);
    self->timer = NULL;
  }
  self->timer_seq = 0;
  self->tflags &= ~TF_TIMEOUT;
  self->timeout_mark = NULL;
  return won;
}

void task_timer_fired(lpvm_task *t, uint64_t seq) {
  if (seq == 0 || seq != t->timer_seq) return;  /* stale: cancelled or replaced */
  t->tflags |= TF_TIMEOUT;
  t->timeout_mark = t->mq_last;   /* the messages a receive must still look at */
  t->timer_seq = 0;
  if (t->timer) {
    timer_release(t->timer);
    t->timer = NULL;
  }
}

int lpvm_timeout_reached(const lpvm_task *self, const lpvm_msg *seen) {
  if (!self || !(self->tflags & TF_TIMEOUT)) return 0;
  return self->timeout_mark == NULL || self->timeout_mark == seen;
}

static void ties_drop(lpvm_id id);

/* t has died (TS_DEAD is set): its own timer, and the send-afters aimed at it. */
void task_timer_drop(lpvm_task *t) {
  lpvm_cancel_timer(t);
  if (task_noted == t) task_noted = NULL;   /* t is about to be freed */
  ties_drop(t->id);
}

/* ---- send-after --------------------------------------------------------------------
** A reference names a pending send-after so any thread can cancel it. The table
** holds the starter's reference to the timer; whoever removes the entry (the
** firing timer, a cancel, or the death of its target) owns it and drops it.
**
** A send-after to a local pid is tied to that process, as Erlang's is: when the
** process ends its pending send-afters are cancelled (a million send_after(1h) to
** processes that die leave nothing behind), and one started to a pid already dead is
** cancelled before the start returns (read and cancel then say false). The ties are a
** second table, by target id (`ties`), whose lock is taken before a ref shard's and
** never while one is held. An entry is tied before its timer starts, so a fire always
** finds it tied or untied by a death, never half way. The starter looks at the target
** after tying: a death either finds the entry in its bucket or its TS_DEAD is seen
** by that look (each side stores, then a seq_cst read-modify-write of the shard's
** count, then loads the other's: the starter its tie then the target's state, the
** dead task its TS_DEAD then the count, which is 0 when it has nothing to look for). */

#define SHARDS 16
#define TIE_SHARDS 16

/* An entry's place in one of its two tables: by ref (R), by target (T). */
enum { R, T };
typedef struct hlink {
  struct pending *next;
  struct pending **prev;
} hlink;

typedef struct pending {
  hlink l[2];                  /* l[R] under its ref shard's lock, l[T] its tie's */
  uint64_t ref;
  uint64_t due;                /* timer_now_ms() when it fires (timer_start_due) */
  uint64_t ms;                 /* its delay: what it has left is at most that */
  lpvm_timer *tm;
  void *arg;       /* the timer's: still ours to free if a cancel wins (arg_free) */
  lpvm_id to;                  /* its target when tied (tie_of), else 0 */
  uint8_t named;
  uint8_t in[2];               /* in table R / T now (under that table's lock) */
} pending;

/* The argument of a send-after to a name: the name is looked up when the timer fires
** (Erlang's send_after/3 with an atom), and the message dropped if nobody holds it
** then. Its timer has the id 0 (no task's) for target. */
typedef struct named_msg {
  lpvm_msg *m;
  char name[];
} named_msg;

static void arg_free(void *arg, int named) {
  if (!named) {
    lpvm_msg_free(arg);
    return;
  }
  named_msg *nm = arg;
  lpvm_msg_free(nm->m);
  free(nm);
}

/* One shard of a table: buckets that double as they fill (a million pending
** send-afters are found, and removed, in a few steps). n is read without the lock
** by a dying task with no tie to look for (see the top). */
typedef struct hshard {
  pthread_mutex_t mu;
  pending **b;
  uint32_t nb;
  _Atomic uint32_t n;
} hshard;

#define H0 {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0}
static hshard shards[SHARDS] = {H0, H0, H0, H0, H0, H0, H0, H0,
                                H0, H0, H0, H0, H0, H0, H0, H0};
static hshard ties[TIE_SHARDS] = {H0, H0, H0, H0, H0, H0, H0, H0,
                                  H0, H0, H0, H0, H0, H0, H0, H0};
#undef H0

static uint64_t mix(uint64_t k) { return k * UINT64_C(0x9E3779B97F4A7C15); }
static uint64_t key_of(const pending *p, int w) { return w == R ? p->ref : p->to; }
static hshard *shard_of(uint64_t ref) { return &shards[mix(ref) >> 60]; }
static hshard *tie_of(lpvm_id id) { return &ties[mix(id) >> 60]; }
static pending **bucket(hshard *h, uint64_t key) {
  return &h->b[(mix(key) >> 20) & (h->nb - 1)];
}

static void hpush(pending **b, pending *p, int w) {
  p->l[w].next = *b;
  if (*b) (*b)->l[w].prev = &p->l[w].next;
  p->l[w].prev = b;
  *b = p;
}

/* Under h's lock. 0 when out of memory with no bucket at all. */
static int hadd(hshard *h, pending *p, int w) {
  uint32_t n = atomic_load_explicit(&h->n, memory_order_relaxed);
  if (n >= h->nb * 2u) {
    uint32_t nb = h->nb ? h->nb * 2 : 64;
    pending **b = calloc(nb, sizeof *b);
    if (b) {
      for (uint32_t i = 0; i < h->nb; i++)
        for (pending *e = h->b[i], *nx; e; e = nx) {
          nx = e->l[w].next;
          hpush(&b[(mix(key_of(e, w)) >> 20) & (nb - 1)], e, w);
        }
      free(h->b);
      h->b = b;
      h->nb = nb;
    } else if (!h->nb) {
      return 0;
    }
  }
  hpush(bucket(h, key_of(p, w)), p, w);
  p->in[w] = 1;
  atomic_store_explicit(&h->n, n + 1, memory_order_relaxed);
  return 1;
}

/* Under h's lock: p out of table w if it is there. 1 if it was. */
static int hdel(hshard *h, pending *p, int w) {
  if (!p->in[w]) return 0;
  *p->l[w].prev = p->l[w].next;
  if (p->l[w].next) p->l[w].next->l[w].prev = p->l[w].prev;
  p->in[w] = 0;
  atomic_store_explicit(&h->n, atomic_load_explicit(&h->n, memory_order_relaxed) - 1,
                        memory_order_relaxed);
  return 1;
}

/* Under the ref shard's lock. */
static pending *find_ref(hshard *h, uint64_t ref) {
  if (!h->nb) return NULL;
  pending *e = *bucket(h, ref);
  while (e && e->ref != ref) e = e->l[R].next;
  return e;
}

/* p has left the ref table (it is ours): out of its tie too, then freed. */
static void pending_free(pending *p) {
  if (p->to) {
    hshard *ts = tie_of(p->to);
    pthread_mutex_lock(&ts->mu);
    hdel(ts, p, T);
    pthread_mutex_unlock(&ts->mu);
  }
  free(p);
}

/* Take the entry of ref out of the ref table: whoever does owns it. */
static pending *pending_take(uint64_t ref) {
  hshard *sh = shard_of(ref);
  pthread_mutex_lock(&sh->mu);
  pending *p = find_ref(sh, ref);
  if (p) hdel(sh, p, R);
  pthread_mutex_unlock(&sh->mu);
  return p;
}

/* The same for an entry known by address, which may have left already: 1 if taken. */
static int pending_take_entry(pending *p) {
  hshard *sh = shard_of(p->ref);
  pthread_mutex_lock(&sh->mu);
  int taken = hdel(sh, p, R);
  pthread_mutex_unlock(&sh->mu);
  return taken;
}

static void fire_send(void *p, uint64_t to, uint64_t ref) {
  pending *e = pending_take(ref);
  if (e) {
    timer_release(e->tm);
    pending_free(e);
  }
  lpvm_msg *m = p;
  if (to == 0) {   /* to a name: whoever holds it now */
    named_msg *nm = p;
    m = nm->m;
    to = lpvm_whereis(nm->name);
    free(nm);
    if (!to) {
      lpvm_msg_free(m);
      return;
    }
  }
  if (sig_send(to, m) != 0) lpvm_msg_free(m);
}

int lpvm_send_after(lpvm_task *self, uint64_t ms, lpvm_id to, const void *term,
                    size_t len, uint64_t *ref) {
  if ((!term && len) || !ref) return LPVM_EINVAL;
  lpvm_msg *m = lpvm_msg_new(len);
  if (!m) return LPVM_ENOMEM;
  if (len) memcpy(lpvm_msg_data(m), term, len);
  return lpvm_send_msg_after(self, ms, to, m, ref);
}

/* A pending entry's end that is ours (taken out of the ref table): cancel its timer,
** the message back to us if that won. -1 if it had fired, else the ms it had left. */
static int64_t left_of(const pending *e, uint64_t now) {
  uint64_t left = e->due > now ? e->due - now : 0;   /* (due was rounded up) */
  left = left < e->ms ? left : e->ms;
  return left > INT64_MAX ? INT64_MAX : (int64_t)left;
}

static int64_t pending_cancel(pending *e) {
  int64_t left = left_of(e, timer_now_ms());
  int won = timer_cancel(e->tm);
  if (won) arg_free(e->arg, e->named);  /* it will never fire: the message is ours again */
  timer_release(e->tm);
  pending_free(e);
  return won ? left : -1;
}

/* Start the timer of m (arg: m, or its named_msg when named). Takes arg. The timer's
** reference is `given` when nonzero (start_timer: the caller made it with
** lpvm_make_ref and put it in the message), else a new one. */
static int start_send(lpvm_task *self, uint64_t ms, lpvm_id to, lpvm_msg *m, void *arg,
                      int named, uint64_t given, uint64_t *ref) {
  pending *p = malloc(sizeof *p);
  if (!p) {
    arg_free(arg, named);
    return LPVM_ENOMEM;
  }
  m->kind = SIG_MESSAGE;
  m->from = self ? self->id : 0;
  uint64_t r = given ? given : lpvm_make_ref();
  p->ref = r;
  p->ms = ms;
  p->arg = arg;
  p->named = (uint8_t)named;
  p->in[R] = p->in[T] = 0;
  p->to = 0;
  /* A local pid's is tied to it under its tie lock, held until the timer has started:
  ** a death that drains the tie finds the entry in both tables, or finds none because
  ** we saw the target dead (then no timer starts: Erlang's timer to a dead pid is no
  ** timer). Tied first, then the look (see the top); its own process is alive. */
  int tie = !named && to != LPVM_ID_DEAD && !lpvm_id_is_remote(to);
  hshard *ts = tie ? tie_of(to) : NULL;
  if (tie) {
    pthread_mutex_lock(&ts->mu);
    p->to = to;
    if (!hadd(ts, p, T)) p->to = 0;   /* out of memory: it fires untied */
    atomic_fetch_add_explicit(&ts->n, 0, memory_order_seq_cst);   /* our half of the pair */
    if (!(self && self->id == to) && !lpvm_is_alive(to)) {
      hdel(ts, p, T);
      pthread_mutex_unlock(&ts->mu);
      free(p);
      arg_free(arg, named);
      *ref = r;
      return 0;
    }
  }
  hshard *sh = shard_of(r);
  /* Hold the shard lock across start so the entry exists before it can fire; once
  ** unlocked, p belongs to whoever takes it (the firing timer may free it at once). */
  pthread_mutex_lock(&sh->mu);
  lpvm_timer *tm = NULL;
  if (hadd(sh, p, R)) {   /* (out of memory with no bucket yet: ENOMEM) */
    tm = p->tm = timer_start_due(ms, fire_send, arg, named ? 0 : to, r, &p->due);
    if (!tm) hdel(sh, p, R);
  }
  pthread_mutex_unlock(&sh->mu);
  if (tie) {
    if (!tm) hdel(ts, p, T);
    pthread_mutex_unlock(&ts->mu);
  }
  if (!tm) {
    free(p);
    arg_free(arg, named);
    return LPVM_ENOMEM;
  }
  *ref = r;
  return 0;
}

/* A dying task's send-afters (called after its TS_DEAD is set): cancelled. */
static void ties_drop(lpvm_id id) {
  hshard *ts = tie_of(id);
  /* the dead task's half of the pair (its TS_DEAD is stored): none tied in the shard */
  if (atomic_fetch_add_explicit(&ts->n, 0, memory_order_seq_cst) == 0) return;
  pending *mine = NULL;
  pthread_mutex_lock(&ts->mu);
  if (ts->nb) {
    for (pending *e = *bucket(ts, id), *nx; e; e = nx) {
      nx = e->l[T].next;
      if (e->to != id) continue;
      hdel(ts, e, T);
      if (pending_take_entry(e)) {   /* ours; else its taker frees it */
        e->to = 0;                   /* untied already: pending_free skips the lock */
        e->l[T].next = mine;
        mine = e;
      }
    }
  }
  pthread_mutex_unlock(&ts->mu);
  while (mine) {
    pending *e = mine;
    mine = e->l[T].next;
    pending_cancel(e);
  }
}

int lpvm_send_msg_after(lpvm_task *self, uint64_t ms, lpvm_id to, lpvm_msg *m,
                        uint64_t *ref) {
  if (!m || !ref) {
    lpvm_msg_free(m);
    return LPVM_EINVAL;
  }
  /* 0 is no task: dropped when it fires, as before (0 marks a name to fire_send) */
  return start_send(self, ms, to ? to : LPVM_ID_DEAD, m, m, 0, 0, ref);
}

static int send_named(lpvm_task *self, uint64_t ms, const char *name, lpvm_msg *m,
                      uint64_t given, uint64_t *ref) {
  if (!m || !ref || !name) {
    lpvm_msg_free(m);
    return LPVM_EINVAL;
  }
  size_t len = strlen(name);
  named_msg *nm = malloc(sizeof *nm + len + 1);
  if (!nm) {
    lpvm_msg_free(m);
    return LPVM_ENOMEM;
  }
  nm->m = m;
  memcpy(nm->name, name, len + 1);
  return start_send(self, ms, 0, m, nm, 1, given, ref);
}

int lpvm_send_msg_after_name(lpvm_task *self, uint64_t ms, const char *name, lpvm_msg *m,
                             uint64_t *ref) {
  return send_named(self, ms, name, m, 0, ref);
}

int lpvm_start_msg_timer(lpvm_task *self, uint64_t ms, lpvm_id to, const char *name,
                         lpvm_msg *m, uint64_t ref) {
  uint64_t out;
  if (!ref) {
    lpvm_msg_free(m);
    return LPVM_EINVAL;
  }
  if (name) return send_named(self, ms, name, m, ref, &out);
  if (!m) return LPVM_EINVAL;
  return start_send(self, ms, to ? to : LPVM_ID_DEAD, m, m, 0, ref, &out);
}

int64_t lpvm_send_after_left(uint64_t ref, int cancel) {
  if (cancel) {
    pending *e = pending_take(ref);
    return e ? pending_cancel(e) : -1;
  }
  hshard *sh = shard_of(ref);
  int64_t left = -1;
  uint64_t now = timer_now_ms();
  pthread_mutex_lock(&sh->mu);
  pending *e = find_ref(sh, ref);
  if (e) left = left_of(e, now);
  pthread_mutex_unlock(&sh->mu);
  return left;
}

int lpvm_cancel_send_after(uint64_t ref) { return lpvm_send_after_left(ref, 1) >= 0; }

/* VM stop, after the timer thread has stopped: send-afters that never fired give
** their messages back; the ties go with them. */
void task_timer_shutdown(void) {
  for (int i = 0; i < TIE_SHARDS; i++) {
    hshard *ts = &ties[i];
    pthread_mutex_lock(&ts->mu);
    free(ts->b);   /* the entries are freed below, from the ref table */
    ts->b = NULL;
    ts->nb = 0;
    atomic_store_explicit(&ts->n, 0, memory_order_relaxed);
    pthread_mutex_unlock(&ts->mu);
  }
  for (int i = 0; i < SHARDS; i++) {
    hshard *sh = &shards[i];
    pthread_mutex_lock(&sh->mu);
    pending **b = sh->b;
    uint32_t nb = sh->nb;
    sh->b = NULL;
    sh->nb = 0;
    atomic_store_explicit(&sh->n, 0, memory_order_relaxed);
    pthread_mutex_unlock(&sh->mu);
    for (uint32_t j = 0; j < nb; j++)
      for (pending *p = b[j], *next; p; p = next) {
        next = p->l[R].next;
        if (timer_cancel(p->tm)) arg_free(p->arg, p->named);
        timer_release(p->tm);
        free(p);
      }
    free(b);
  }
}
