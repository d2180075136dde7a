/*
** bench_core.c -- the runtime core's figures: message round trip, spawn+exit, and
** many-to-one throughput, on worker threads (with and without the worker cache)
** and on private threads. A benchmark, not a test: it prints, it asserts nothing.
**
**   build/estone/bench_core [scale [idle_seconds]]
**   (scale multiplies the iteration counts; idle_seconds defaults to 10)
*/
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "lpvm/lpvm.h"
#include "lpvm/task.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const uint8_t small_term[] = {131, 97, 42};  /* the integer 42 */

/* ---- ping-pong -------------------------------------------------------------------- */

typedef struct pp {
  lpvm_task task;
  lpvm_id peer;
  long left;
} pp;

typedef struct pp_arg {
  lpvm_id peer;
  long rounds;
} pp_arg;

static int pp_init(lpvm_task *t, void *arg) {
  pp_arg *a = arg;
  ((pp *)t)->peer = a->peer;
  ((pp *)t)->left = a->rounds;
  return a->peer ? LPVM_SETUP : LPVM_WAIT;  /* the pinger starts, the ponger waits */
}
static int pp_setup(lpvm_task *t) {
  lpvm_send(t, ((pp *)t)->peer, small_term, sizeof small_term);
  return LPVM_WAIT;
}
static int pp_event(lpvm_task *t) {
  pp *p = (pp *)t;
  lpvm_msg *m;
  while ((m = lpvm_recv(t)) != NULL) {
    lpvm_id from = lpvm_msg_from(m);
    size_t len = lpvm_msg_len(m);
    lpvm_msg_free(m);
    if (p->peer == 0) {            /* ponger: answer, or stop on an empty message */
      if (len == 0) return LPVM_EXIT;
      lpvm_send(t, from, small_term, sizeof small_term);
    } else if (--p->left > 0) {
      lpvm_send(t, p->peer, small_term, sizeof small_term);
    } else {
      lpvm_send(t, p->peer, NULL, 0);
      return LPVM_EXIT;
    }
  }
  return LPVM_WAIT;
}
static const lpvm_task_def pp_def = {.type = "pingpong", .prio = 20, .size = sizeof(pp),
                                     .init = pp_init, .setup = pp_setup,
                                     .handle_event = pp_event};

/* Run a pair of `def` tasks (the second one starts by calling the first) for
** `rounds` exchanges; returns the elapsed seconds. */
static double run_pair(const lpvm_task_def *def, int thread, long rounds) {
  lpvm_spawn_opts o = LPVM_SPAWN_OPTS_INIT;
  o.thread = thread;
  pp_arg a = {0, rounds};
  lpvm_id first;
  double t0 = now_s();
  lpvm_spawn_task_opt(NULL, def, &a, &o, &first);
  a.peer = first;
  lpvm_spawn_task_opt(NULL, def, &a, &o, NULL);
  lpvm_wait();
  return now_s() - t0;
}

static double bench_pingpong(int thread, long rounds) {
  return run_pair(&pp_def, thread, rounds) * 1e9 / (double)(2 * rounds);
}

/* ---- gs timeout: request/reply where every request arms a timeout ------------------
** The thesis's "gs timeout" EStone test: a client calls a server; each call sets a
** 2-second timer (receive ... after) that the reply cancels. */

static int gs_event(lpvm_task *t) {
  pp *p = (pp *)t;
  lpvm_msg *m;
  while ((m = lpvm_recv(t)) != NULL) {
    lpvm_id from = lpvm_msg_from(m);
    size_t len = lpvm_msg_len(m);
    lpvm_msg_free(m);
    if (p->peer == 0) {                       /* server */
      if (len == 0) return LPVM_EXIT;
      lpvm_send(t, from, small_term, sizeof small_term);
    } else {                                  /* client: the reply beat the timer */
      lpvm_cancel_timer(t);
      if (--p->left <= 0) {
        lpvm_send(t, p->peer, NULL, 0);
        return LPVM_EXIT;
      }
      lpvm_set_timer(t, 2000);
      lpvm_send(t, p->peer, small_term, sizeof small_term);
    }
  }
  return LPVM_WAIT;
}
static int gs_setup(lpvm_task *t) {
  lpvm_set_timer(t, 2000);
  lpvm_send(t, ((pp *)t)->peer, small_term, sizeof small_term);
  return LPVM_WAIT;
}
static int gs_timeout(lpvm_task *t) {
  (void)t;
  fprintf(stderr, "gs timeout: a call timed out\n");
  return LPVM_EXIT;
}
static const lpvm_task_def gs_def = {.type = "gs", .prio = 20, .size = sizeof(pp),
                                     .init = pp_init, .setup = gs_setup,
                                     .handle_event = gs_event,
                                     .handle_timeout = gs_timeout};

static double bench_gs_timeout(int thread, long calls) {
  return run_pair(&gs_def, thread, calls) * 1e9 / (double)calls;
}

/* ---- spawn + exit ------------------------------------------------------------------- */

static int exit_now(lpvm_task *t) {
  (void)t;
  return LPVM_EXIT;
}
static int init_idle(lpvm_task *t, void *a) {
  (void)t;
  (void)a;
  return LPVM_IDLE;
}
static const lpvm_task_def quick_def = {.type = "quick", .prio = 20, .init = init_idle,
                                        .idle = exit_now};
static long spawn_left;
static int spawn_thread;
static int spawner_idle(lpvm_task *t) {
  lpvm_spawn_opts o = LPVM_SPAWN_OPTS_INIT;
  o.thread = spawn_thread;
  for (int i = 0; i < 512 && spawn_left > 0; i++, spawn_left--)
    lpvm_spawn_task_opt(t, &quick_def, NULL, &o, NULL);
  return spawn_left > 0 ? LPVM_IDLE : LPVM_EXIT;
}
static const lpvm_task_def spawner_def = {.type = "spawner", .prio = 20,
                                          .init = init_idle, .idle = spawner_idle};

static double bench_spawn(int thread, long n) {
  spawn_left = n;
  spawn_thread = thread;
  double t0 = now_s();
  lpvm_spawn_task(NULL, &spawner_def, NULL, 0, NULL);
  lpvm_wait();
  return (now_s() - t0) * 1e9 / (double)n;
}

/* ---- four senders, one receiver --------------------------------------------------------- */

static long per_sender;
static _Atomic long received;
static long expected;
static int sink_event(lpvm_task *t) {
  lpvm_msg *m;
  while ((m = lpvm_recv(t)) != NULL) {
    lpvm_msg_free(m);
    if (atomic_fetch_add_explicit(&received, 1, memory_order_relaxed) + 1 == expected)
      return LPVM_EXIT;
  }
  return LPVM_WAIT;
}
static const lpvm_task_def sink_def = {.type = "sink", .prio = 20,
                                       .handle_event = sink_event};
typedef struct src {
  lpvm_task task;
  lpvm_id to;
  long left;
} src;
static int src_init(lpvm_task *t, void *arg) {
  ((src *)t)->to = *(lpvm_id *)arg;
  ((src *)t)->left = per_sender;
  return LPVM_IDLE;
}
static int src_idle(lpvm_task *t) {
  src *s = (src *)t;
  for (int i = 0; i < 1000 && s->left > 0; i++, s->left--)
    lpvm_send(t, s->to, small_term, sizeof small_term);
  return s->left > 0 ? LPVM_IDLE : LPVM_EXIT;
}
static const lpvm_task_def src_def = {.type = "src", .prio = 20, .size = sizeof(src),
                                      .init = src_init, .idle = src_idle};

static double bench_fan_in(int thread, long n) {
  lpvm_spawn_opts o = LPVM_SPAWN_OPTS_INIT;
  o.thread = thread;
  per_sender = n / 4;
  expected = per_sender * 4;
  atomic_store(&received, 0);
  lpvm_id sink;
  double t0 = now_s();
  lpvm_spawn_task_opt(NULL, &sink_def, NULL, &o, &sink);
  for (int i = 0; i < 4; i++) lpvm_spawn_task_opt(NULL, &src_def, &sink, &o, NULL);
  lpvm_wait();
  return (double)expected / (now_s() - t0);
}

static void run_config(const char *name, int thread, int cache, long rounds,
                       long spawns, long msgs) {
  lpvm_config c;
  lpvm_config_init(&c);
  c.worker_cache = cache;
  if (lpvm_start(&c) != 0) {
    fprintf(stderr, "lpvm_start failed\n");
    exit(1);
  }
  double pp_ns = bench_pingpong(thread, rounds);
  double gs_ns = bench_gs_timeout(thread, rounds / 2);
  double sp_ns = bench_spawn(thread, spawns);
  double fan = bench_fan_in(thread, msgs);
  lpvm_vmstats st;
  lpvm_stats(&st);
  uint64_t hits = 0, steals = 0;
  for (int i = 0; i < st.workers; i++) {
    hits += st.worker[i].cache_hits;
    steals += st.worker[i].steals;
  }
  lpvm_stop();
  printf("%-26s %12.0f %12.0f %14.0f %16.2f %12llu %10llu\n", name, pp_ns, gs_ns, sp_ns,
         fan / 1e6,
         (unsigned long long)hits, (unsigned long long)steals);
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* CPU time the whole process uses while the VM sits idle with one waiting task. */
static void bench_idle(double seconds) {
  if (lpvm_start(NULL) != 0) exit(1);
  lpvm_id id;
  lpvm_spawn_task(NULL, &sink_def, NULL, 0, &id);  /* waits for a message forever */
  usleep(100000);
  double c0 = cpu_s(), t0 = now_s();
  usleep((useconds_t)(seconds * 1e6));
  double used = cpu_s() - c0, wall = now_s() - t0;
  lpvm_vmstats st;
  lpvm_stats(&st);
  lpvm_stop();
  printf("idle VM (%d workers, one waiting task): %.3f ms CPU in %.1f s = %.4f%% of a CPU\n",
         st.workers, used * 1e3, wall, 100.0 * used / wall);
}

int main(int argc, char **argv) {
  double scale = argc > 1 ? atof(argv[1]) : 1.0;
  if (scale <= 0) scale = 1.0;
  long rounds = (long)(500000 * scale), spawns = (long)(1000000 * scale);
  long msgs = (long)(4000000 * scale);
  long trounds = (long)(100000 * scale), tspawns = (long)(20000 * scale);
  long tmsgs = (long)(1000000 * scale);
  printf("lpvm core benchmark: %ld round trips, %ld spawns, %ld messages 4->1\n",
         rounds, spawns, msgs);
  printf("%-26s %12s %12s %14s %16s %12s %10s\n", "configuration", "ns/message",
         "ns/gs call",
         "ns/spawn+exit", "Mmsg/s (4->1)", "cache hits", "steals");
  run_config("workers, worker cache", 0, 1, rounds, spawns, msgs);
  run_config("workers, no worker cache", 0, 0, rounds, spawns, msgs);
  run_config("private threads", 1, 1, trounds, tspawns, tmsgs);
  run_config("private threads, no cache", 1, 0, trounds, tspawns, tmsgs);
  bench_idle(argc > 2 ? atof(argv[2]) : 10.0);
  return 0;
}
