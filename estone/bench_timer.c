/*
** bench_timer.c -- what the timer service costs. Prints a table; asserts nothing.
**
**   1. "timeout" (Hedqvist 1998, section 6): start a timer and cancel it before it
**      fires, 1,000,000 times: ns per start+cancel+release.
**   2. 1,000,000 concurrent timers spread over ~2 s: bytes per timer (RSS delta)
**      and how late they fire (p50 / p99 / max).
**   3. Idle: timer-thread wake-ups and CPU time over 2 s, with no timer and with
**      one 10-second timer pending.
*/
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "timers/timer.h"

#define N_TIMEOUT    1000000u
#define N_CONCURRENT 1000000u

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {}
}

static timer_stats stats(void) {
  timer_stats s;
  timer_service_stats(&s);
  return s;
}

static void never(void *p, uint64_t a, uint64_t b) {
  (void)p, (void)a, (void)b;
}

/* ---- 1. timeout ---- */

static void *timeout_loop(void *arg) {
  size_t n = *(size_t *)arg;
  for (size_t i = 0; i < n; i++) {
    lpvm_timer *t = timer_start(5000, never, NULL, i, 0);
    timer_cancel(t);
    timer_release(t);
  }
  return NULL;
}

/* ns per start+cancel+release with `threads` threads, `early` = an earlier timer
** pending, so the thread sleeps toward it (the usual state of a busy VM). */
static void bench_timeout(int threads, int early) {
  timer_service_start(NULL);
  lpvm_timer *e = early ? timer_start(4000, never, NULL, 0, 0) : NULL;
  timer_service_sync();
  timer_stats s0 = stats();
  size_t per = N_TIMEOUT / (size_t)threads;
  pthread_t th[8];
  uint64_t t0 = mono_ns();
  for (int k = 0; k < threads; k++) pthread_create(&th[k], NULL, timeout_loop, &per);
  for (int k = 0; k < threads; k++) pthread_join(th[k], NULL);
  uint64_t dt = mono_ns() - t0;
  timer_service_sync();
  timer_stats s1 = stats();
  printf("  %-38s %8.1f ns/op  %7.1f ns/op/thread  wake-ups %6llu  never wheeled %5.1f%%\n",
         threads == 1 ? (early ? "1 thread, earlier timer pending" : "1 thread, otherwise empty")
                      : (early ? "2 threads, earlier timer pending" : "2 threads, otherwise empty"),
         (double)dt / N_TIMEOUT, (double)dt * threads / N_TIMEOUT,
         (unsigned long long)(s1.wakeups - s0.wakeups),
         100.0 * (double)(s1.never_wheeled - s0.never_wheeled) / N_TIMEOUT);
  if (e) {
    timer_cancel(e);
    timer_release(e);
  }
  timer_service_stop();
}

static void bench_malloc_baseline(void) {
  enum { BATCH = 256 };
  void *v[BATCH];
  uint64_t t0 = mono_ns();
  for (size_t i = 0; i < N_TIMEOUT; i += BATCH) {
    for (int j = 0; j < BATCH; j++) v[j] = malloc(timer_record_bytes());
    for (int j = 0; j < BATCH; j++) free(v[j]);
  }
  printf("  %-38s %8.1f ns/op\n", "(baseline: malloc+free of one record)",
         (double)(mono_ns() - t0) / N_TIMEOUT);
}

/* ---- 2. a million concurrent timers ---- */

static float *lateness_ms;
static _Atomic size_t n_fired;

static void record_lateness(void *p, uint64_t due_ns, uint64_t i) {
  (void)p;
  lateness_ms[i] = (float)((double)(int64_t)(mono_ns() - due_ns) / 1e6);
  atomic_fetch_add_explicit(&n_fired, 1, memory_order_relaxed);
}

static long rss_kb(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static void bench_concurrent(void) {
  lateness_ms = calloc(N_CONCURRENT, sizeof *lateness_ms);
  if (!lateness_ms) return;
  for (size_t i = 0; i < N_CONCURRENT; i++) lateness_ms[i] = -1;  /* touch the pages */
  timer_service_start(NULL);
  timer_service_sync();
  long rss0 = rss_kb();
  timer_stats s0 = stats();
  uint64_t t0 = mono_ns();
  for (size_t i = 0; i < N_CONCURRENT; i++) {
    /* 500 ms + an even spread over 2 s: all are started before the first fires */
    uint64_t ms = 500 + (uint64_t)i * 2000 / N_CONCURRENT;
    timer_release(timer_start(ms, record_lateness, NULL, mono_ns() + ms * 1000000u, i));
  }
  uint64_t t_start = mono_ns() - t0;
  timer_service_sync();
  long rss1 = rss_kb();
  while (atomic_load(&n_fired) < N_CONCURRENT) sleep_ms(10);
  timer_service_sync();
  timer_stats s1 = stats();
  qsort(lateness_ms, N_CONCURRENT, sizeof *lateness_ms, cmp_float);
  printf("  start 1,000,000 timers                 %8.1f ns/start\n",
         (double)t_start / N_CONCURRENT);
  printf("  record size                            %8zu bytes\n", timer_record_bytes());
  printf("  memory per pending timer (RSS delta)   %8.1f bytes\n",
         (double)(rss1 - rss0) * 1024.0 / N_CONCURRENT);
  printf("  lateness p50 / p99 / max               %6.2f / %.2f / %.2f ms\n",
         lateness_ms[N_CONCURRENT / 2], lateness_ms[N_CONCURRENT / 100 * 99],
         lateness_ms[N_CONCURRENT - 1]);
  printf("  earliest (negative = fired early)      %8.3f ms\n", lateness_ms[0]);
  printf("  timer-thread wake-ups while firing     %8llu\n",
         (unsigned long long)(s1.wakeups - s0.wakeups));
  timer_service_stop();
  free(lateness_ms);
}

/* ---- 3. idle ---- */

/* CPU ns and voluntary context switches of the thread named lpvm-timer. */
static int timer_thread_usage(uint64_t *cpu_ns, long *switches) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int found = -1;
  struct dirent *e;
  while (found < 0 && (e = readdir(d)) != NULL) {
    char path[300], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    int is_timer = fgets(buf, sizeof buf, f) && strncmp(buf, "lpvm-timer", 10) == 0;
    fclose(f);
    if (!is_timer) continue;
    snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
    f = fopen(path, "r");
    unsigned long long ns = 0;
    if (f) {
      if (fscanf(f, "%llu", &ns) != 1) ns = 0;
      fclose(f);
    }
    *cpu_ns = ns;
    snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
    f = fopen(path, "r");
    *switches = 0;
    while (f && fgets(buf, sizeof buf, f))
      if (sscanf(buf, "voluntary_ctxt_switches: %ld", switches) == 1) break;
    if (f) fclose(f);
    found = 0;
  }
  closedir(d);
  return found;
}

static double process_cpu_ms(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

static void bench_idle(int one_timer) {
  timer_service_start(NULL);
  lpvm_timer *t = one_timer ? timer_start(10000, never, NULL, 0, 0) : NULL;
  sleep_ms(100);
  uint64_t cpu0 = 0, cpu1 = 0;
  long sw0 = 0, sw1 = 0;
  timer_thread_usage(&cpu0, &sw0);
  double p0 = process_cpu_ms();
  timer_stats s0 = stats();
  sleep_ms(2000);
  timer_stats s1 = stats();
  double p1 = process_cpu_ms();
  timer_thread_usage(&cpu1, &sw1);
  printf("  %-26s wake-ups/s %5.1f  ctx switches/s %5.1f  timer-thread CPU %7.3f ms  process CPU %6.2f ms\n",
         one_timer ? "one 10 s timer pending" : "no timers",
         (double)(s1.wakeups - s0.wakeups) / 2.0, (double)(sw1 - sw0) / 2.0,
         (double)(cpu1 - cpu0) / 1e6, p1 - p0);
  if (t) {
    timer_cancel(t);
    timer_release(t);
  }
  timer_service_stop();
}

int main(void) {
#ifdef LPVM_WITH_JEMALLOC
  const char *alloc = "jemalloc";
#else
  const char *alloc = "system malloc (or LD_PRELOADed)";
#endif
  printf("lpvm timer service benchmark (%ld CPUs, allocator: %s)\n\n",
         sysconf(_SC_NPROCESSORS_ONLN), alloc);
  printf("1. timeout: 1,000,000 x (start 5 s timer, cancel, release)\n");
  bench_timeout(1, 0);
  bench_timeout(1, 1);
  bench_timeout(2, 0);
  bench_timeout(2, 1);
  bench_malloc_baseline();
  printf("\n2. 1,000,000 concurrent timers, timeouts 0.5 s + spread over 2 s\n");
  bench_concurrent();
  printf("\n3. idle, 2 s\n");
  bench_idle(0);
  bench_idle(1);
  return 0;
}
