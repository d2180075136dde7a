/*
** sched.c -- worker threads, their run queues, the worker cache, stealing, sleep.
**
** Each worker owns a run queue of 32 FIFO levels with a bitmap of the non-empty
** ones, under its own short mutex. The bitmap is also published in an atomic so
** that any worker can see, with one load per worker and no lock, whether some other
** queue holds a higher level than its own: it then steals that task first, which
** keeps "a higher level is always served first" true across workers without a
** global queue or lock on the send -> wake -> run path.
**
** The worker cache (Hedqvist 5.2.8): when a running task wakes another and its
** worker has nothing else queued, the woken task goes to the worker's one-slot
** cache and runs next on the same worker: a chain of message passing stays on one
** core with no thread switch.
**
** Balancing (wait_for_work): an idle worker takes only work that a busy worker will
** not get to soon (two or more waiting, a preempt flag up, or no new step for a
** while), and sleepers are kicked by the same rule, so a chain is not pulled to the
** other core at every hop.
**
** An idle worker spins for a short bounded time, then sleeps on its condition
** variable. Whoever queues work on a worker wakes it if it sleeps, and a sleeper
** re-checks its own queue after announcing itself (under its mutex), so work is never
** left queued while every worker sleeps. While another worker is awake, a sleeper
** wakes now and then to look for work stuck behind a long step (the watch).
**
** The poll: one idle worker at a time holds the I/O poll the runtime hands over
** (sched_poll): it looks in while it spins and sleeps in it rather than on its
** condition variable, so readiness wakes the worker that then runs the port, with no
** other thread in between (see "the poll" below).
*/
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched/sched.h"

#define LEVELS 32
#define NO_LEVEL LEVELS

typedef struct level {
  lpvm_task *head, *tail;
} level;

/* Each field says which threads write it. "Owner" is the worker's own thread.
**
** The fields are grouped by who writes them, a cache line (or more) each, because the
** other workers read some of them all the time: a busy worker reads every other
** worker's bitmap before each step (best_other), an idle one reads qlen, cache,
** preempt and runs once a microsecond (look_at). Sharing a line with what the owner
** writes at every step (cache, running_prio, preempt, runs) made each of those reads
** a miss for the reader and the owner's next write a miss for the owner: two
** transfers of the line between the cores per step while both worked. Now:
**   - the bitmap, alone: it changes only when a level empties or fills, so a busy
**     worker's look at another one's bitmap hits in its cache while that other
**     worker's queue keeps its levels (the queue itself changes at every push);
**   - the queue: mu, qlen and the levels change only when the queue does;
**   - the step: what the owner writes at every step;
**   - the sleep: the condition variable and the flags changed when it sleeps or
**     wakes, and the counters only statistics read. */
typedef struct worker {
  /* -- the bitmap (any thread, under mu, only when it changes) -- */
  _Atomic uint32_t bitmap;        /* non-empty levels, bit i = priority i; under mu,
                                  ** read by any worker without it */
  int index;                      /* set once by sched_start */
  /* -- the queue (any thread, under mu) -- */
  pthread_mutex_t mu __attribute__((aligned(64)));
  _Atomic uint32_t qlen;          /* under mu, read without it */
  int bound;                      /* owner, once: bound to its own allocator arena */
  level lv[LEVELS];               /* any thread, under mu (a queuer, a thief) */
  /* -- the step (the owner, at every step) -- */
  _Atomic(lpvm_task *) cache __attribute__((aligned(64)));
                                  /* set by the owner only (a store when it is
                                  ** empty); taken by the owner or an idle worker
                                  ** (exchange) */
  _Atomic int preempt;            /* raised by any queuer of a higher priority,
                                  ** cleared by the owner as it starts a task; read by
                                  ** idle workers (look_at) */
  _Atomic int running_prio;       /* owner; NO_LEVEL when not running a task */
  _Atomic uint64_t runs;          /* owner; read by idle workers (look_at): a step began */
  _Atomic uint64_t switches, cache_hits;  /* owner; stats read */
  lpvm_task *last;                /* owner */
  uint64_t backlog_at;            /* owner: runs + 1 when a backlog began, 0 = none */
  uint32_t unpolled;              /* owner: steps since it last looked in the poll */
  /* -- the sleep (under mu unless said) -- */
  pthread_cond_t cv __attribute__((aligned(64)));
  _Atomic int sleeping;           /* under mu: set by the owner, cleared by the owner
                                  ** or by the one waker that signals it */
  _Atomic int resting;            /* owner: it sleeps with no watch timeout (every
                                  ** other worker sleeps too: the idle VM); stats read */
  _Atomic int polling;            /* under mu, by the owner: it sleeps in the poll,
                                  ** so a waker ends the poll's wait, not the cv's */
  int kick;                       /* under mu */
  pthread_t th;                   /* set once by sched_start */
  _Atomic uint64_t steals, sleeps;  /* owner; stats read */
} __attribute__((aligned(64))) worker;

_Static_assert(offsetof(worker, cv) - offsetof(worker, cache) <= 64,
               "what the owner writes at every step fits one cache line");
_Static_assert(offsetof(worker, mu) - offsetof(worker, bitmap) == 64,
               "the bitmap has its line to itself (and the index, read only)");

/* Read-mostly fields first (read at every step by every worker), then, on lines of
** their own, those written while the VM runs: an idle worker's sleep and wake, the
** poll's holder (taken and given back by each busy worker every BUSY_POLL_EVERY
** steps) and the round robin of non-worker threads, so that none of those writes
** makes the busy workers miss on the fields they read at every step. */
static struct {
  worker *w;
  int n;
  int cache_on;
  int spin;
  int poll_on;                    /* there is a poll: set by sched_start */
  sched_poll poll;                /* set by sched_start */
  _Atomic int stop;
  _Atomic int big;                /* the VM grew big: workers move to their arenas
                                  ** (set once) */
  _Atomic int sleepers __attribute__((aligned(64)));
  _Atomic int watchers;           /* sleepers on a timed watch (sleep_until_kicked) */
  _Atomic int poll_owner __attribute__((aligned(64)));
                                  /* index of the worker that holds the poll, or -1:
                                  ** taken and given back by that worker */
  _Atomic uint32_t rr __attribute__((aligned(64)));  /* home_of: non-worker threads */
} S;

static _Thread_local worker *self_w;

static inline void bump(_Atomic uint64_t *c) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}

static inline int top_level(uint32_t bitmap) {
  return bitmap ? __builtin_ctz(bitmap) : NO_LEVEL;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* ---- run queues ------------------------------------------------------------------- */

/* Under w->mu. The bitmap's line is written only when the bitmap changes (the other
** workers read it before each of their steps): a push to a level that is already
** non-empty leaves it alone. (Plain stores instead of the locked read-modify-writes,
** which the mutex would allow, cost more instructions than they save here: +17 a
** spawn_exit task, callgrind, with no gain seen on the clock.) */
static void push_locked(worker *w, lpvm_task *t) {
  level *l = &w->lv[t->prio];
  t->rq_next = NULL;
  if (l->tail) l->tail->rq_next = t;
  else l->head = t;
  l->tail = t;
  uint32_t bit = 1u << t->prio;
  if (!(atomic_load_explicit(&w->bitmap, memory_order_relaxed) & bit))
    atomic_fetch_or(&w->bitmap, bit);
  atomic_fetch_add_explicit(&w->qlen, 1, memory_order_relaxed);
}

static lpvm_task *pop_locked(worker *w, int lvl) {
  level *l = &w->lv[lvl];
  lpvm_task *t = l->head;
  if (!t) return NULL;
  l->head = t->rq_next;
  if (!l->head) {
    l->tail = NULL;
    atomic_fetch_and(&w->bitmap, ~(1u << lvl));
  }
  atomic_fetch_sub_explicit(&w->qlen, 1, memory_order_relaxed);
  return t;
}

/* Under v->mu: wake v if it sleeps. The waker clears `sleeping` itself, so a sleeping
** worker is signalled once, not once per task queued while it wakes up. */
static int wake_locked(worker *v) {
  if (!atomic_load(&v->sleeping)) return 0;
  atomic_store(&v->sleeping, 0);
  atomic_fetch_sub(&S.sleepers, 1);
  v->kick = 1;
  if (atomic_load(&v->polling)) S.poll.wake();
  else pthread_cond_signal(&v->cv);
  return 1;
}

static void kick(worker *v) {
  pthread_mutex_lock(&v->mu);
  wake_locked(v);
  pthread_mutex_unlock(&v->mu);
}

/* Wake one sleeping worker (not `except`) so it can steal new work: one that does
** not hold the poll if there is one, so that readiness is still waited for. */
static void kick_sleeper(worker *except) {
  if (atomic_load(&S.sleepers) == 0) return;
  worker *poller = NULL;
  for (int i = 0; i < S.n; i++) {
    worker *v = &S.w[i];
    if (v != except && atomic_load(&v->sleeping)) {
      if (atomic_load_explicit(&v->polling, memory_order_relaxed)) {
        poller = v;
        continue;
      }
      kick(v);
      return;
    }
  }
  if (poller) kick(poller);
}

/* Tasks waiting on v: its queue and its cache. */
static uint32_t pending_on(worker *v) {
  return atomic_load_explicit(&v->qlen, memory_order_relaxed) +
         (atomic_load_explicit(&v->cache, memory_order_relaxed) != NULL);
}

static void enqueue(worker *w, lpvm_task *t) {
  int prio = t->prio;  /* once queued, t may run elsewhere: read it first */
  pthread_mutex_lock(&w->mu);
  push_locked(w, t);
  int wake = wake_locked(w);
  pthread_mutex_unlock(&w->mu);
  if (prio < atomic_load_explicit(&w->running_prio, memory_order_relaxed))
    atomic_store_explicit(&w->preempt, 1, memory_order_relaxed);
  /* Wake another worker only for work w will not get to soon: a thread that is not w
  ** queued on w while w runs a task. A backlog of w's own is note_backlog's. */
  if (!wake && w != self_w &&
      atomic_load_explicit(&w->running_prio, memory_order_relaxed) != NO_LEVEL)
    kick_sleeper(w);
}

static worker *home_of(lpvm_task *t) {
  if (t->worker >= 0 && t->worker < S.n) return &S.w[t->worker];
  return &S.w[atomic_fetch_add_explicit(&S.rr, 1, memory_order_relaxed) % (uint32_t)S.n];
}

void sched_make_runnable(lpvm_task *t) {
  worker *w = self_w;
  if (w && S.cache_on && atomic_load_explicit(&w->bitmap, memory_order_relaxed) == 0) {
    int prio = t->prio;
    /* Only the owner fills its cache and others only empty it: seen empty, it stays
    ** empty until this store, which needs no locked compare-and-swap. */
    if (atomic_load_explicit(&w->cache, memory_order_relaxed) == NULL) {
      atomic_store_explicit(&w->cache, t, memory_order_release);
      /* A higher level waits behind the running task. (Between steps, as when the
      ** poll delivers readiness, nothing runs: w takes its cache next, and waking a
      ** sleeper would only have it steal the task.) */
      int running = atomic_load_explicit(&w->running_prio, memory_order_relaxed);
      if (running != NO_LEVEL && prio < running) {
        atomic_store_explicit(&w->preempt, 1, memory_order_relaxed);
        kick_sleeper(w);
      }
      return;
    }
  }
  enqueue(w ? w : home_of(t), t);
}

/* ---- choosing the next task ------------------------------------------------------------ */

/* Take the first task of level `lvl` (or the highest, with NO_LEVEL) from v. */
static lpvm_task *take_from(worker *v, int lvl) {
  pthread_mutex_lock(&v->mu);
  if (lvl == NO_LEVEL) lvl = top_level(atomic_load(&v->bitmap));
  lpvm_task *t = lvl < NO_LEVEL ? pop_locked(v, lvl) : NULL;
  pthread_mutex_unlock(&v->mu);
  return t;
}

/* Steal from v: the first task of level `lvl` (NO_LEVEL: v's highest) for w to run,
** and up to half of the rest of that level into w's own queue, so that a busy
** producer is not robbed one lock round-trip at a time. Both queues are locked (in
** worker order, so two thieves cannot deadlock) while the tasks move: a task in
** transit is always visible in one of the two bitmaps, which keeps the
** higher-level-first rule exact across workers. */
#define STEAL_BATCH 16
static lpvm_task *steal_from(worker *w, worker *v, int lvl) {
  worker *first = w < v ? w : v, *second = w < v ? v : w;
  lpvm_task *t = NULL;
  pthread_mutex_lock(&first->mu);
  pthread_mutex_lock(&second->mu);
  if (lvl == NO_LEVEL) lvl = top_level(atomic_load(&v->bitmap));
  if (lvl < NO_LEVEL && (t = pop_locked(v, lvl)) != NULL) {
    uint32_t extra = atomic_load_explicit(&v->qlen, memory_order_relaxed) / 2;
    if (extra > STEAL_BATCH - 1) extra = STEAL_BATCH - 1;
    lpvm_task *u;
    while (extra-- > 0 && (u = pop_locked(v, lvl)) != NULL) push_locked(w, u);
  }
  pthread_mutex_unlock(&second->mu);
  pthread_mutex_unlock(&first->mu);
  if (t) bump(&w->steals);
  return t;
}

/* The other worker with the highest queued level, or NULL. (Alone, none: the loop
** over the one worker cost each step ~10 instructions.) */
static worker *best_other(worker *w, int *lvl) {
  worker *best = NULL;
  int bl = NO_LEVEL;
  for (int i = 0; i < S.n && S.n > 1; i++) {
    worker *v = &S.w[i];
    if (v == w) continue;
    int l = top_level(atomic_load(&v->bitmap));
    if (l < bl) bl = l, best = v;
  }
  *lvl = bl;
  return best;
}

/* The next task of w's own: its cache, its queue, or a higher level queued on
** another worker (stolen at once: a higher level is always served first). NULL when
** w has nothing of its own; an idle worker's stealing is in wait_for_work. */
static lpvm_task *next_task(worker *w) {
  int own = top_level(atomic_load(&w->bitmap));
  int other;
  worker *v = best_other(w, &other);
  /* The exchange only when something is there (only the owner fills the cache): a
  ** step taken from the queue costs no locked instruction here. */
  lpvm_task *t = atomic_load_explicit(&w->cache, memory_order_relaxed)
                     ? atomic_exchange(&w->cache, NULL)
                     : NULL;
  if (t) {
    if (t->prio <= own && t->prio <= other) {
      bump(&w->cache_hits);
      return t;
    }
    enqueue(w, t);  /* something more urgent is queued: the cache waits its turn */
    own = top_level(atomic_load(&w->bitmap));
  }
  if (own == NO_LEVEL) return NULL;
  if (v && other < own && (t = steal_from(w, v, other)) != NULL) return t;
  /* Take exactly the level we chose: if a thief emptied it meanwhile, a lower level
  ** of ours may no longer be the highest anywhere, so decide again. */
  return take_from(w, own);
}

/* ---- an idle worker: when to steal, when to sleep ---------------------------------------
**
** A task queued on a busy worker is not stolen as soon as an idle worker sees it: in
** a chain of message passing (A sends to B and waits, B sends to C ...) the one
** runnable task sits in the sender's cache and its worker runs it next, on a warm
** core, within a microsecond. Stealing it moves the chain to the other core at every
** hop (each worker in turn idle and stealing the other's next task), which made two
** workers 2-4x slower than one. So an idle worker takes from v only work that v will
** not get to soon:
**   - two or more tasks wait on v (cache + queue): v runs one, take another now;
**   - v's preempt flag is up: a higher level waits behind v's running task;
**   - v has had work waiting and has not started a new step for STEAL_PATIENCE_NS
**     (v runs a long task, or its thread is descheduled): v is stuck, take it.
** BEAM keeps such work on one scheduler the same way and balances on queue lengths.
** Waking a sleeper follows the same rule (enqueue, note_backlog): only for work the
** queuing worker will not get to soon. */
#define STEAL_PATIENCE_NS 20000
/* Spin rounds between two looks at the others (about a microsecond): each look reads
** the cache lines their owners write at every step, and looking at every round made
** the busy worker's steps slower by half. */
#define LOOK_EVERY 32

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Take work from v for w: the queue first (v runs its cache next), then the cache. */
static lpvm_task *steal_any(worker *w, worker *v) {
  lpvm_task *t = NULL;
  if (atomic_load(&v->bitmap)) t = steal_from(w, v, NO_LEVEL);
  if (!t && atomic_load_explicit(&v->cache, memory_order_relaxed) &&
      (t = atomic_exchange(&v->cache, NULL)) != NULL)
    bump(&w->steals);
  return t;
}

/* What an idle worker saw of another one: v->runs when it first found work waiting
** there, and when. */
typedef struct sighting {
  uint64_t runs, since;
  int valid;
} sighting;

/* One look at v by idle w: a task to run, or NULL (and the sighting updated). */
static lpvm_task *look_at(worker *w, worker *v, sighting *s, uint64_t now) {
  uint32_t n = pending_on(v);
  if (n == 0) {
    s->valid = 0;
    return NULL;
  }
  if (n >= 2 || atomic_load_explicit(&v->preempt, memory_order_relaxed))
    return steal_any(w, v);
  uint64_t runs = atomic_load_explicit(&v->runs, memory_order_relaxed);
  if (!s->valid || s->runs != runs) {
    *s = (sighting){runs, now, 1};
    return NULL;
  }
  return now - s->since >= STEAL_PATIENCE_NS ? steal_any(w, v) : NULL;
}

/* One look at every other worker: a task to steal, or NULL. */
static lpvm_task *look_around(worker *w, sighting *seen) {
  uint64_t now = now_ns();
  for (int k = 0; k < S.n; k++) {
    if (k == w->index) continue;
    lpvm_task *t = look_at(w, &S.w[k], &seen[k], now);
    if (t) return t;
  }
  return NULL;
}

/* ---- the poll ------------------------------------------------------------------------------
**
** A packet for a port used to wake the poller thread, which queued the port and woke
** a sleeping worker to run it: two sleeps and wake-ups per packet. Now one idle worker
** at a time holds the poll (poll_owner): it looks in it every POLL_EVERY rounds of its
** spin, then sleeps in it (polling set, under its mutex, so a waker ends that wait
** with S.poll.wake instead of signalling the condition variable), and readiness wakes
** it directly; the ports it makes runnable land in its own cache and queue
** (sched_make_runnable on this worker), and it runs them next. The other idle workers
** sleep on their condition variables as before, and a sleeper to kick is one that
** does not hold the poll when there is one (kick_sleeper). When no worker is idle, a
** busy one looks in without waiting every BUSY_POLL_EVERY steps and after each step
** that ran out its slice (poll_when_busy), so readiness waits for at most that many
** short steps, or one long one, when every worker has work. */
#define BUSY_POLL_EVERY 64
/* Spin rounds between two looks in the poll by its idle holder. A look that finds
** nothing costs about a microsecond of system time (as much as 50 rounds of the
** spin): every 64 rounds, a packet waits about 1.5 us on average before it is seen,
** and the spin lasts about twice as long as without the looks. */
#define POLL_EVERY 64

static int take_poll(worker *w) {
  int none = -1;
  return S.poll_on && atomic_load_explicit(&S.poll_owner, memory_order_relaxed) == -1 &&
         atomic_compare_exchange_strong(&S.poll_owner, &none, w->index);
}

static void drop_poll(void) { atomic_store(&S.poll_owner, -1); }

/* One look in the poll by its holder, without waiting: 1 when it made tasks runnable
** (on this worker). */
static int poll_look(void) {
  if (!S.poll.watching() || S.poll.wait(0) == 0) return 0;
  S.poll.deliver();
  return 1;
}

/* After a step: a busy worker looks in the poll when no idle worker holds it, every
** BUSY_POLL_EVERY steps or after a step that used up its slice (`long_step`: a task
** requeued), so that steps of a millisecond do not make readiness wait 64 of them. */
static void poll_when_busy(worker *w, int long_step) {
  if (++w->unpolled < BUSY_POLL_EVERY && !long_step) return;
  w->unpolled = 0;
  if (!S.poll.watching() || !take_poll(w)) return;
  int got = S.poll.wait(0);
  drop_poll();
  if (got) S.poll.deliver();
}

static uint64_t ns_of(const struct timespec *ts) {
  return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

/* Sleep until kicked or given work of its own. A worker busy in one long step (a long
** C call, a descheduled thread) cannot see a task waiting behind it, and nobody
** queues anything that would kick a sleeper: so while another worker is awake, one
** that sleeps is a watcher and wakes every WATCH_NS to look (look_at's patience rule).
** When every other worker sleeps too it sleeps for good: an idle VM is never woken.
** A worker that holds the poll (`polls`) sleeps in it, and readiness ends its sleep
** too: what came is delivered once it is awake (sleeping cleared), so the ports land
** in its cache with no wake-up of its own. Returns 1 when the watch timed out. */
#define WATCH_NS 2000000
static int sleep_until_kicked(worker *w, int polls) {
  int timed_out = 0, got = 0;
  pthread_mutex_lock(&w->mu);
  atomic_store(&w->sleeping, 1);
  int watch = atomic_fetch_add(&S.sleepers, 1) + 1 < S.n;
  if (watch) atomic_fetch_add(&S.watchers, 1);
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_nsec += WATCH_NS;
  if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
  while (!w->kick && !atomic_load(&S.stop) && !atomic_load(&w->bitmap) && !timed_out &&
         !got) {
    bump(&w->sleeps);
    if (!watch) atomic_store(&w->resting, 1);   /* after the bump: stats see both */
    if (polls) {
      int ms = -1;
      if (watch) {
        uint64_t now = now_ns(), end = ns_of(&until);
        ms = now >= end ? 0 : (int)((end - now + 999999) / 1000000);
      }
      atomic_store(&w->polling, 1);
      pthread_mutex_unlock(&w->mu);
      got = S.poll.wait(ms);
      pthread_mutex_lock(&w->mu);
      atomic_store(&w->polling, 0);
      if (!got && watch && now_ns() >= ns_of(&until)) timed_out = 1;
    } else if (!watch) {
      pthread_cond_wait(&w->cv, &w->mu);
    } else {
      timed_out = pthread_cond_timedwait(&w->cv, &w->mu, &until) == ETIMEDOUT;
    }
  }
  if (watch) atomic_fetch_sub(&S.watchers, 1);
  atomic_store(&w->resting, 0);
  w->kick = 0;
  if (atomic_load(&w->sleeping)) {  /* woke on its own: nobody cleared it */
    atomic_store(&w->sleeping, 0);
    atomic_fetch_sub(&S.sleepers, 1);
  }
  pthread_mutex_unlock(&w->mu);
  if (got) S.poll.deliver();
  return timed_out;
}

/* Nothing of w's own: watch the others for a bounded time, stealing what they will
** not get to soon (above), then sleep. A worker with work of its own never sleeps,
** and whoever queues on a sleeper wakes it (enqueue), so sleeping while another
** worker has work waiting leaves that work to a worker that is awake. The first idle
** worker holds the poll meanwhile (above); readiness it delivers is work of its own
** (its cache or queue): it returns NULL and worker_main takes it. */
static lpvm_task *wait_for_work(worker *w) {
  sighting seen[SCHED_MAX_WORKERS] = {{0}};
  lpvm_task *t = NULL;
  int polls = take_poll(w);
  for (int i = 0; i == 0 || i < S.spin; i++) {  /* look at least once */
    if (atomic_load_explicit(&S.stop, memory_order_relaxed)) goto out;
    if (atomic_load_explicit(&w->bitmap, memory_order_relaxed)) goto out;
    if (i % LOOK_EVERY == 0 || i == S.spin - 1) {
      if (polls && i % POLL_EVERY == 0 && poll_look()) goto out;
      if ((t = look_around(w, seen)) != NULL) goto out;
    }
    cpu_relax();
  }
  while (sleep_until_kicked(w, polls)) {   /* a watch ended: one look, then sleep again */
    if (atomic_load(&w->bitmap) || atomic_load(&S.stop)) goto out;
    if ((t = look_around(w, seen)) != NULL) goto out;
    if (!polls) polls = take_poll(w);      /* the holder went to work: take over */
  }
out:
  if (polls) drop_poll();
  /* Back to work of its own while every other worker sleeps for good (woken by a
  ** kick, or its own queue filled between two watches): make one of them the watcher
  ** (it spins, sees this one awake and sleeps watching), or a task this one queues
  ** behind a long step would wait for it. Only with work: a worker woken to watch (or
  ** to steal) must not wake another in turn, or two idle workers would keep kicking
  ** each other awake. */
  if (!t && S.n > 1 && atomic_load(&w->bitmap) && atomic_load(&S.sleepers) == S.n - 1 &&
      atomic_load(&S.watchers) == 0)
    kick_sleeper(w);
  return t;
}

/* After each step, by the owner: two or more tasks waiting on w for BACKLOG_STEPS
** steps in a row is a backlog w will not get through soon: wake a sleeper to take
** some (an idle worker that is awake takes them at once, look_at). A short burst, such
** as the few processes a chain spawns before it runs, stays on w: waking the other
** worker for it moved the whole chain, its fresh states cold in the other core's
** caches, at every repetition. A backlog of slow steps is also found by the watch. */
#define BACKLOG_STEPS 8
static void note_backlog(worker *w) {
  if (pending_on(w) < 2) {
    w->backlog_at = 0;
    return;
  }
  uint64_t runs = atomic_load_explicit(&w->runs, memory_order_relaxed) + 1;
  if (w->backlog_at == 0) w->backlog_at = runs;
  else if (runs - w->backlog_at >= BACKLOG_STEPS) {
    w->backlog_at = runs;
    kick_sleeper(w);
  }
}

static int run(worker *w, lpvm_task *t) {
  if (!w->bound && atomic_load_explicit(&S.big, memory_order_relaxed)) {
    mem_bind_worker(w->index);
    w->bound = 1;
  }
  t->worker = (int8_t)w->index;
  atomic_store_explicit(&w->running_prio, t->prio, memory_order_relaxed);
  atomic_store_explicit(&w->preempt, 0, memory_order_relaxed);
  bump(&w->runs);
  if (t != w->last) bump(&w->switches);
  w->last = t;
  int r = task_step(t);
  atomic_store_explicit(&w->running_prio, NO_LEVEL, memory_order_relaxed);
  if (r == STEP_REQUEUE) enqueue(w, t);
  else if (r != STEP_WAIT) w->last = NULL;  /* dead or moved: don't compare later */
  note_backlog(w);
  return r;
}

static void *worker_main(void *arg) {
  worker *w = arg;
  self_w = w;
  lpvm_thread_arena();   /* before memory may run out (lpvm.h) */
  while (!atomic_load_explicit(&S.stop, memory_order_acquire)) {
    lpvm_task *t = next_task(w);
    if (!t) {
      task_timers_idle();
      t = wait_for_work(w);
    }
    if (!t) continue;
    int r = run(w, t);
    if (S.poll_on) poll_when_busy(w, r == STEP_REQUEUE);
  }
  self_w = NULL;
  return NULL;
}

/* ---- start, stop, introspection ---------------------------------------------------------- */

int sched_start(int workers, int worker_cache, int spin, const sched_poll *poll) {
  if (workers < 1 || workers > SCHED_MAX_WORKERS) return LPVM_EINVAL;
  S.w = aligned_alloc(64, sizeof(worker) * (size_t)workers);
  if (!S.w) return LPVM_ENOMEM;
  memset(S.w, 0, sizeof(worker) * (size_t)workers);
  S.n = workers;
  S.cache_on = worker_cache;
  S.spin = spin;
  atomic_store(&S.stop, 0);
  atomic_store(&S.big, 0);
  atomic_store(&S.sleepers, 0);
  atomic_store(&S.watchers, 0);
  S.poll_on = poll != NULL;
  if (poll) S.poll = *poll;
  atomic_store(&S.poll_owner, -1);
  for (int i = 0; i < workers; i++) {
    worker *w = &S.w[i];
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;  /* the watch's timeout is on the monotonic clock */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    w->index = i;
    atomic_store(&w->running_prio, NO_LEVEL);
  }
  for (int i = 0; i < workers; i++) {
    if (pthread_create(&S.w[i].th, NULL, worker_main, &S.w[i]) != 0) {
      S.n = i;  /* stop the ones that started */
      sched_stop();
      return LPVM_ESYS;
    }
  }
  return 0;
}

void sched_stop(void) {
  if (!S.w) return;
  atomic_store(&S.stop, 1);
  for (int i = 0; i < S.n; i++) {
    pthread_mutex_lock(&S.w[i].mu);
    S.w[i].kick = 1;
    if (atomic_load(&S.w[i].polling)) S.poll.wake();
    pthread_cond_signal(&S.w[i].cv);
    pthread_mutex_unlock(&S.w[i].mu);
  }
  for (int i = 0; i < S.n; i++) pthread_join(S.w[i].th, NULL);
  for (int i = 0; i < S.n; i++) {
    pthread_mutex_destroy(&S.w[i].mu);
    pthread_cond_destroy(&S.w[i].cv);
  }
  free(S.w);
  S.w = NULL;
  S.n = 0;
}

/* lpvm.h: the same flag the workers read to move to their arenas. */
int lpvm_is_big(void) { return atomic_load_explicit(&S.big, memory_order_relaxed); }

void sched_note_size(uint64_t live) {
  if (live >= MEM_BIG_VM) atomic_store_explicit(&S.big, 1, memory_order_relaxed);
}

int sched_should_yield(void) {
  worker *w = self_w;
  return w && atomic_load_explicit(&w->preempt, memory_order_relaxed);
}

int sched_worker_index(void) { return self_w ? self_w->index : -1; }

int sched_alone(void) { return self_w != NULL && S.n == 1; }

void sched_fill_stats(lpvm_vmstats *out) {
  out->workers = S.n;
  int n = (int)(sizeof out->worker / sizeof out->worker[0]);
  for (int i = 0; i < S.n && i < n; i++) {
    worker *w = &S.w[i];
    lpvm_worker_stats *o = &out->worker[i];
    o->runs = atomic_load_explicit(&w->runs, memory_order_relaxed);
    o->switches = atomic_load_explicit(&w->switches, memory_order_relaxed);
    o->steals = atomic_load_explicit(&w->steals, memory_order_relaxed);
    o->cache_hits = atomic_load_explicit(&w->cache_hits, memory_order_relaxed);
    o->sleeps = atomic_load_explicit(&w->sleeps, memory_order_relaxed);
    o->queue_len = atomic_load_explicit(&w->qlen, memory_order_relaxed);
    o->resting = (uint32_t)atomic_load(&w->resting);
  }
}
