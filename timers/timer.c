/*
** timer.c -- the timer service: one thread, one wheel, one lock-free in-queue.
**
** Starters and cancellers never touch the wheel (Hedqvist 1998, section 6: the
** proposed in-queue). A start allocates a record and pushes it on the in-queue; a
** cancel is one CAS on the record's state, plus a push only if the timer already
** sits in the wheel. The timer thread alone drains the queue, owns the wheel and
** fires. So a timer started and cancelled between two passes of the thread costs
** no wheel work and no thread wake-up at all. When its start request is still on
** top of the queue (start then cancel, as a receive-after does) the canceller even
** takes it back itself: the record never leaves the starter's cache.
**
** Exactly one outcome per timer, decided by CAS on the state in `word`:
**
**   NEW --thread takes the start request--> WHEEL --thread fires--> FIRED
**    |                                        |
**    +--cancel (1 CAS, thread drops it)       +--cancel (CAS, then push a cancel
**    v                                        v   request so the thread unlinks it)
**   CANCELLED                               CANCELLED
**
** The same word holds the reference count (starter + service), so the last
** release, which sees it is alone, frees without a locked instruction.
**
** timer_service_stop turns NEW and WHEEL into DROPPED (a later cancel still wins).
**
** Wake-up rule: `sleep_until` holds the deadline the thread sleeps toward (0 while it
** is awake). A starter wakes it only if its deadline is earlier, and the one starter
** that swaps sleep_until to 0 pays for the wake. Cancels never wake it, except that
** every FLUSH_AT-th request a thread leaves queued does, so cancelled records
** cannot pile up.
*/
#include "timers/timer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "lpvm/lpvm.h"
#include "timers/wheel.h"

enum { TM_NEW, TM_WHEEL, TM_FIRED, TM_CANCELLED, TM_DROPPED };
enum { SVC_STOPPED, SVC_BUSY, SVC_RUNNING };

#define FLUSH_AT     4096u                   /* queued requests that force a wake */
#define STATE_MASK   0xffu                   /* word: state in bits 0-7 ... */
#define REF_ONE      0x100u                  /* ... reference count above */
#define MAX_SLEEP_MS (UINT64_C(1) << 31)     /* re-check a far deadline every ~25 days */

/*
** 64 bytes, one jemalloc size class. The start request's queue link is node.next
** (unused until the node enters the wheel); the cancel request's link overlays `b`
** (dead once the cancel has won). The thread tells the two apart by `wheeled`: a
** cancel request exists only for a timer that has been wheeled.
*/
struct lpvm_timer {
  timer_wheel_node node;      /* first member: a node pointer is a timer pointer */
  _Atomic uint32_t word;      /* state | refs * REF_ONE */
  uint8_t wheeled;            /* written and read by the timer thread only */
  timer_fire_fn fn;
  void *p;
  uint64_t a;
  union {
    uint64_t b;
    lpvm_timer *cancel_next;
  } u;
};
_Static_assert(sizeof(lpvm_timer) <= 64, "timer record grew past 64 bytes");

static struct {
  /* In-queue: a Treiber stack drained whole with one exchange, then reversed.
  ** Chosen over Vyukov's queue because its push is one CAS with nothing left half
  ** done: the drainer never meets a producer preempted between its two stores.
  ** And a stack lets a canceller take its own request back off the top. No ABA:
  ** a pusher's CAS only checks that the head it linked to is still the head, and
  ** the one pop there is can only succeed while its record is on top (inq_unpush). */
  _Alignas(64) _Atomic(lpvm_timer *) head;

  _Alignas(64) _Atomic uint64_t sleep_until;
  _Atomic(timer_clock_fn) clock;
  _Atomic int phase;

  /* Sleeping and waking; the mutex is taken only on a wake, a sync or a pass. */
  _Alignas(64) pthread_mutex_t mu;
  pthread_cond_t cv;          /* thread sleeps here (CLOCK_MONOTONIC) */
  pthread_cond_t done_cv;     /* timer_service_sync waits here */
  bool kicked, stopping;
  uint64_t pass_started, pass_done;
  int sync_waiters;
  pthread_t thread;

  /* Timer thread only. */
  timer_wheel wheel;
  uint64_t ghost;             /* earliest deadline taken lately, even if cancelled */

  /* Statistics, written by the timer thread only... */
  _Atomic uint64_t wakeups, fired, cancelled, never_wheeled, pending;
  /* ...except requests taken back, counted per thread (count_unqueued). */
  uint64_t unqueued_base;     /* their sum when the service last started */
} S = {.mu = PTHREAD_MUTEX_INITIALIZER, .done_cv = PTHREAD_COND_INITIALIZER};

static pthread_once_t cv_once = PTHREAD_ONCE_INIT;

/* Requests this thread left in the in-queue since it last forced a wake. */
static _Thread_local uint32_t tl_queued;

/* ---- per-thread counters ---- */

/* Start requests taken back by their canceller happen on any thread, as often as
** starts: each thread counts them in a block of its own, with no locked
** instruction, and timer_service_stats sums the blocks. A block outlives its
** thread (the list only grows) and is reused by a later thread. It also keeps one
** freed record for its thread's next start (a receive's timer is started, taken back
** and freed on the same worker over and over: malloc and free were ~70 of its ~320
** instructions); a record kept there stays reachable, and goes to the block's next
** holder, when the thread ends. */
typedef struct count_block {
  _Atomic uint64_t unqueued;
  _Atomic bool in_use;
  struct count_block *next;
  lpvm_timer *spare;          /* the holder's: a freed record kept for its next start */
} count_block;

static _Atomic(count_block *) blocks;
static _Atomic uint64_t unqueued_fallback;  /* when a block cannot be allocated */
static _Thread_local count_block *my_block;
static pthread_key_t block_key;
static pthread_once_t block_once = PTHREAD_ONCE_INIT;

static void block_release(void *b) {
  atomic_store_explicit(&((count_block *)b)->in_use, false, memory_order_release);
}

static void block_key_init(void) {
  pthread_key_create(&block_key, block_release);
}

static count_block *block_claim(void) {
  pthread_once(&block_once, block_key_init);
  count_block *b = atomic_load_explicit(&blocks, memory_order_acquire);
  for (; b; b = b->next) {
    bool free_block = false;
    if (atomic_compare_exchange_strong(&b->in_use, &free_block, true)) break;
  }
  if (b == NULL) {
    if ((b = calloc(1, sizeof *b)) == NULL) return NULL;
    atomic_init(&b->in_use, true);
    b->next = atomic_load_explicit(&blocks, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&blocks, &b->next, b,
                                                  memory_order_release, memory_order_relaxed)) {}
  }
  pthread_setspecific(block_key, b);
  return my_block = b;
}

static void count_unqueued(void) {
  count_block *b = my_block ? my_block : block_claim();
  if (b == NULL) {
    atomic_fetch_add_explicit(&unqueued_fallback, 1, memory_order_relaxed);
    return;
  }
  atomic_store_explicit(&b->unqueued,
                        atomic_load_explicit(&b->unqueued, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}

static uint64_t sum_unqueued(void) {
  uint64_t n = atomic_load_explicit(&unqueued_fallback, memory_order_relaxed);
  for (count_block *b = atomic_load_explicit(&blocks, memory_order_acquire); b; b = b->next)
    n += atomic_load_explicit(&b->unqueued, memory_order_relaxed);
  return n;
}

static void init_cv(void) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&S.cv, &attr);
  pthread_condattr_destroy(&attr);
}

static void stat_inc(_Atomic uint64_t *c) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}

static bool running(void) {
  return atomic_load_explicit(&S.phase, memory_order_acquire) == SVC_RUNNING;
}

static bool on_timer_thread(void) {
  return running() && pthread_equal(pthread_self(), S.thread);
}

/* ---- clock ---- */

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t timer_now_ms(void) {
  timer_clock_fn clock = atomic_load_explicit(&S.clock, memory_order_relaxed);
  return clock ? clock() : mono_ns() / 1000000u;
}

/* The start time is rounded up, so the timer never fires before `ms` has passed
** by the real clock even though the wheel counts whole milliseconds. */
static uint64_t deadline_after(uint64_t ms) {
  timer_clock_fn clock = atomic_load_explicit(&S.clock, memory_order_relaxed);
  uint64_t now = clock ? clock() : (mono_ns() + 999999u) / 1000000u;
  return ms >= UINT64_MAX - 1 - now ? UINT64_MAX - 1 : now + ms;
}

/* ---- state and references ---- */

static unsigned state_of(uint32_t w) { return w & STATE_MASK; }
static unsigned refs_of(uint32_t w) { return w / REF_ONE; }

/* CAS the state from `from` to `to`, whatever the count does meanwhile. */
static bool move_state(lpvm_timer *t, unsigned from, unsigned to) {
  uint32_t w = atomic_load_explicit(&t->word, memory_order_relaxed);
  while (state_of(w) == from)
    if (atomic_compare_exchange_weak_explicit(&t->word, &w, (w & ~STATE_MASK) | to,
                                              memory_order_acq_rel, memory_order_relaxed))
      return true;
  return false;
}

static void timer_unref(lpvm_timer *t) {
  /* As the only holder left, nobody else can touch the word: skip the locked op. */
  if (refs_of(atomic_load_explicit(&t->word, memory_order_acquire)) == 1 ||
      refs_of(atomic_fetch_sub_explicit(&t->word, REF_ONE, memory_order_acq_rel)) == 1) {
    count_block *b = my_block;
    if (b && !b->spare) b->spare = t;
    else free(t);
  }
}

void timer_release(lpvm_timer *t) {
  if (t) timer_unref(t);
}

size_t timer_record_bytes(void) {
  return sizeof(lpvm_timer);
}

/* ---- waking the thread ---- */

static void kick(void) {
  pthread_mutex_lock(&S.mu);
  S.kicked = true;
  pthread_cond_signal(&S.cv);
  pthread_mutex_unlock(&S.mu);
}

/* Wake the thread if it sleeps toward a time later than d. seq_cst pairs with the
** thread's store of sleep_until and re-check of the queue (timer_pass): either the
** thread sees our push, or we see the deadline it is about to sleep toward. */
static void wake_before(uint64_t d) {
  uint64_t s = atomic_load(&S.sleep_until);
  while (s > d)
    if (atomic_compare_exchange_weak(&S.sleep_until, &s, 0)) {
      kick();
      return;
    }
}

/* ---- in-queue ---- */

/* A start request's link (node.next) may be read by a canceller trying inq_unpush
** while the drainer rewrites it, hence the relaxed atomic accesses. */
static lpvm_timer *link_of(const lpvm_timer *t, bool cancel) {
  if (cancel) return t->u.cancel_next;
  return (lpvm_timer *)__atomic_load_n(&t->node.next, __ATOMIC_RELAXED);
}

static void set_link(lpvm_timer *t, bool cancel, lpvm_timer *next) {
  if (cancel) t->u.cancel_next = next;
  else __atomic_store_n(&t->node.next, next ? &next->node : NULL, __ATOMIC_RELAXED);
}

static void inq_push(lpvm_timer *t, bool cancel) {
  lpvm_timer *h = atomic_load_explicit(&S.head, memory_order_relaxed);
  do set_link(t, cancel, h);
  while (!atomic_compare_exchange_weak_explicit(&S.head, &h, t, memory_order_seq_cst,
                                                memory_order_relaxed));
  if (++tl_queued == FLUSH_AT) {
    tl_queued = 0;
    wake_before(0);
  }
}

/*
** Take back the start request of a timer just cancelled while NEW, if it is still
** on top. No ABA: a cancelled timer is never pushed again, so once it has left the
** top (pushed over for good, or taken by the drainer) it can never be the head
** again; head == t thus proves that its link is still the one written at push.
** Pushes over it that were since taken back themselves do not matter.
*/
static bool inq_unpush(lpvm_timer *t) {
  lpvm_timer *h = atomic_load_explicit(&S.head, memory_order_acquire);
  if (h != t) return false;
  lpvm_timer *next = link_of(t, false);
  if (!atomic_compare_exchange_strong_explicit(&S.head, &h, next, memory_order_acq_rel,
                                               memory_order_relaxed))
    return false;
  if (tl_queued > 0) tl_queued--;
  return true;
}

/* Take every request at once, oldest first. */
static lpvm_timer *inq_take(void) {
  lpvm_timer *t = atomic_exchange_explicit(&S.head, NULL, memory_order_acquire);
  lpvm_timer *fifo = NULL;
  while (t) {
    lpvm_timer *next = link_of(t, t->wheeled);
    set_link(t, t->wheeled, fifo);
    fifo = t;
    t = next;
  }
  return fifo;
}

/* ---- public: start and cancel ---- */

static inline __attribute__((always_inline)) lpvm_timer *
start(uint64_t ms, timer_fire_fn fn, void *p, uint64_t a, uint64_t b, uint64_t *due) {
  if (!running()) return NULL;
  count_block *cb = my_block;
  lpvm_timer *t = cb ? cb->spare : NULL;
  if (t) cb->spare = NULL;
  else if ((t = malloc(sizeof *t)) == NULL) return NULL;
  uint64_t d = deadline_after(ms);
  t->node.deadline = d;
  atomic_init(&t->word, TM_NEW | 2 * REF_ONE);
  t->wheeled = 0;
  t->fn = fn;
  t->p = p;
  t->a = a;
  t->u.b = b;
  inq_push(t, false);
  wake_before(d);
  if (due) *due = d;
  return t;
}

lpvm_timer *timer_start(uint64_t ms, timer_fire_fn fn, void *p, uint64_t a, uint64_t b) {
  return start(ms, fn, p, a, b, NULL);
}

lpvm_timer *timer_start_due(uint64_t ms, timer_fire_fn fn, void *p, uint64_t a, uint64_t b,
                            uint64_t *due) {
  return start(ms, fn, p, a, b, due);
}

/* A cancel took t's start request back: the thread will never see t, so the
** service's reference is the canceller's to drop. */
static void drop_unqueued(lpvm_timer *t) {
  count_unqueued();
  timer_unref(t);
}

int timer_cancel(lpvm_timer *t) {
  if (t == NULL) return 0;
  uint32_t w = atomic_load_explicit(&t->word, memory_order_acquire);
  for (;;) {
    unsigned s = state_of(w);
    if (s != TM_NEW && s != TM_WHEEL && s != TM_DROPPED) return 0;
    if (atomic_compare_exchange_weak_explicit(&t->word, &w, (w & ~STATE_MASK) | TM_CANCELLED,
                                              memory_order_acq_rel, memory_order_acquire))
      break;
  }
  /* Won. Cancelled first, taken back second: the thread can no longer wheel t,
  ** so nothing but the drainer's link rewrite can race with inq_unpush. */
  if (state_of(w) == TM_WHEEL) inq_push(t, true);  /* the thread unlinks it later */
  else if (state_of(w) == TM_NEW && inq_unpush(t)) drop_unqueued(t);
  return 1;
}

/* ---- the timer thread ---- */

static void on_due(timer_wheel_node *n, void *ud) {
  (void)ud;
  lpvm_timer *t = (lpvm_timer *)n;
  /* Lost to a cancel: its queued request owns the reference and will drop it. */
  if (!move_state(t, TM_WHEEL, TM_FIRED)) return;
  stat_inc(&S.fired);
  if (t->fn) t->fn(t->p, t->a, t->u.b);
  timer_unref(t);
}

static void take_start(lpvm_timer *t) {
  if (t->node.deadline < S.ghost) S.ghost = t->node.deadline;
  if (move_state(t, TM_NEW, TM_WHEEL)) {
    t->wheeled = 1;
    timer_wheel_add(&S.wheel, &t->node, t->node.deadline);
    return;
  }
  stat_inc(&S.never_wheeled);  /* cancelled while still queued */
  stat_inc(&S.cancelled);
  timer_unref(t);
}

static void take_cancel(lpvm_timer *t) {
  /* Fails harmlessly if the wheel already popped it and on_due lost the CAS. */
  timer_wheel_del(&S.wheel, &t->node);
  stat_inc(&S.cancelled);
  timer_unref(t);
}

static void take_requests(void) {
  lpvm_timer *t = inq_take();
  while (t) {
    lpvm_timer *next = link_of(t, t->wheeled);
    if (t->wheeled) take_cancel(t);
    else take_start(t);
    t = next;
  }
}

/*
** One pass: take requests, fire what is due, publish the time to sleep toward.
** That time is the earliest deadline in the wheel or `ghost`, the earliest deadline
** taken since it last passed, even of a timer cancelled since. The ghost costs at
** most one early wake-up, and spares every later starter from waking the thread
** again when timers are started and cancelled in a loop (the thesis's "timeout").
*/
static uint64_t timer_pass(void) {
  for (;;) {
    /* Clock first: every timer started before the time we advance to is then in
    ** the wheel when we advance, so timers fire in deadline order. */
    uint64_t now = timer_now_ms();
    take_requests();
    timer_wheel_advance(&S.wheel, now, on_due, NULL);
    atomic_store_explicit(&S.pending, timer_wheel_count(&S.wheel), memory_order_relaxed);
    if (S.ghost <= now) S.ghost = UINT64_MAX;
    uint64_t next = timer_wheel_next(&S.wheel);
    if (S.ghost < next) next = S.ghost;
    atomic_store(&S.sleep_until, next);
    if (atomic_load(&S.head) == NULL) return next;
    atomic_store(&S.sleep_until, 0);
  }
}

/* With S.mu held. An injected clock does not follow real time: wait for a poke. */
static void sleep_toward(uint64_t until) {
  if (until == UINT64_MAX || atomic_load_explicit(&S.clock, memory_order_relaxed)) {
    pthread_cond_wait(&S.cv, &S.mu);
    return;
  }
  uint64_t now = mono_ns() / 1000000u;
  if (until > now + MAX_SLEEP_MS) until = now + MAX_SLEEP_MS;
  struct timespec ts = {.tv_sec = (time_t)(until / 1000u),
                        .tv_nsec = (long)(until % 1000u) * 1000000L};
  pthread_cond_timedwait(&S.cv, &S.mu, &ts);
}

static void *timer_main(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "lpvm-timer");
  pthread_mutex_lock(&S.mu);
  while (!S.stopping) {
    S.pass_started++;
    S.kicked = false;
    pthread_mutex_unlock(&S.mu);
    atomic_store(&S.sleep_until, 0);
    uint64_t until = timer_pass();
    pthread_mutex_lock(&S.mu);
    S.pass_done = S.pass_started;
    if (S.sync_waiters) pthread_cond_broadcast(&S.done_cv);
    if (S.kicked || S.stopping) continue;
    sleep_toward(until);
    stat_inc(&S.wakeups);
  }
  pthread_mutex_unlock(&S.mu);
  return NULL;
}

/* ---- public: the service ---- */

static void reset_state(timer_clock_fn clock) {
  atomic_store(&S.clock, clock);
  atomic_store(&S.head, NULL);
  atomic_store(&S.sleep_until, 0);  /* awake: its first pass takes what is queued */
  timer_wheel_init(&S.wheel, timer_now_ms());
  S.ghost = UINT64_MAX;
  S.kicked = S.stopping = false;
  S.pass_started = S.pass_done = 0;
  atomic_store(&S.wakeups, 0);
  atomic_store(&S.fired, 0);
  atomic_store(&S.cancelled, 0);
  atomic_store(&S.never_wheeled, 0);
  atomic_store(&S.pending, 0);
  S.unqueued_base = sum_unqueued();
}

int timer_service_start(timer_clock_fn clock) {
  int expect = SVC_STOPPED;
  if (!atomic_compare_exchange_strong(&S.phase, &expect, SVC_BUSY)) return LPVM_ESTATE;
  pthread_once(&cv_once, init_cv);
  reset_state(clock);
  if (pthread_create(&S.thread, NULL, timer_main, NULL) != 0) {
    atomic_store(&S.clock, NULL);
    atomic_store(&S.phase, SVC_STOPPED);
    return LPVM_ESYS;
  }
  atomic_store_explicit(&S.phase, SVC_RUNNING, memory_order_release);
  return 0;
}

static void drop_node(timer_wheel_node *n, void *ud) {
  (void)ud;
  lpvm_timer *t = (lpvm_timer *)n;
  /* If a cancel raced with stop (a caller mistake), its request owns the reference. */
  if (move_state(t, TM_WHEEL, TM_DROPPED)) timer_unref(t);
}

/* After the thread has ended: release the service's reference to every timer. */
static void drop_all(void) {
  lpvm_timer *t = inq_take();
  while (t) {
    lpvm_timer *next = link_of(t, t->wheeled);
    if (t->wheeled) {
      timer_wheel_del(&S.wheel, &t->node);
    } else {
      move_state(t, TM_NEW, TM_DROPPED);
    }
    timer_unref(t);
    t = next;
  }
  timer_wheel_drain(&S.wheel, drop_node, NULL);
  atomic_store(&S.pending, 0);
}

void timer_service_stop(void) {
  if (on_timer_thread()) return;  /* from a callback it would join itself */
  int expect = SVC_RUNNING;
  if (!atomic_compare_exchange_strong(&S.phase, &expect, SVC_BUSY)) return;
  pthread_mutex_lock(&S.mu);
  S.stopping = true;
  pthread_cond_signal(&S.cv);
  pthread_cond_broadcast(&S.done_cv);
  pthread_mutex_unlock(&S.mu);
  pthread_join(S.thread, NULL);
  drop_all();
  atomic_store(&S.clock, NULL);
  atomic_store(&S.phase, SVC_STOPPED);
}

void timer_service_poke(void) {
  if (running()) kick();
}

int timer_service_sync(void) {
  if (!running() || on_timer_thread()) return LPVM_ESTATE;
  pthread_mutex_lock(&S.mu);
  uint64_t want = S.pass_started + 1;  /* a pass that starts after this call */
  S.kicked = true;
  pthread_cond_signal(&S.cv);
  S.sync_waiters++;
  while (S.pass_done < want && !S.stopping) pthread_cond_wait(&S.done_cv, &S.mu);
  S.sync_waiters--;
  pthread_mutex_unlock(&S.mu);
  return 0;
}

void timer_service_stats(timer_stats *out) {
  if (out == NULL) return;
  out->wakeups = atomic_load_explicit(&S.wakeups, memory_order_relaxed);
  out->fired = atomic_load_explicit(&S.fired, memory_order_relaxed);
  uint64_t unqueued = sum_unqueued() - S.unqueued_base;
  out->cancelled = atomic_load_explicit(&S.cancelled, memory_order_relaxed) + unqueued;
  out->never_wheeled = atomic_load_explicit(&S.never_wheeled, memory_order_relaxed) + unqueued;
  out->pending = atomic_load_explicit(&S.pending, memory_order_relaxed);
}
