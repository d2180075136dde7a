/*
** bench_futex.c -- why private-thread tasks take their timeouts from the timer wheel.
**
** A private-thread task blocks on a futex. Its timeout could instead be a timed
** futex wait. This measures a futex handoff between two threads with and without a
** timeout: if the timed wait costs no more, the choice rests on the rest (one timer
** mechanism with exactly-once semantics for every task, at 58 ns start+cancel, see
** bench_timer), and lpvm uses the wheel.
**
**   build/estone/bench_futex [handoffs]
*/
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static _Atomic uint32_t turn;
static int timed;
static long rounds = 200000;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void fwait(uint32_t seen) {
  struct timespec ts = {2, 0};
  syscall(SYS_futex, (uint32_t *)&turn, FUTEX_WAIT_PRIVATE, seen, timed ? &ts : NULL,
          NULL, 0);
}

static void fwake(void) {
  syscall(SYS_futex, (uint32_t *)&turn, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *peer(void *arg) {
  uint32_t me = (uint32_t)(uintptr_t)arg;
  for (long i = 0; i < rounds; i++) {
    uint32_t v;
    while (((v = atomic_load(&turn)) & 1) != me) fwait(v);
    atomic_fetch_add(&turn, 1);
    fwake();
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1) rounds = atol(argv[1]) > 0 ? atol(argv[1]) : rounds;
  for (timed = 0; timed < 2; timed++) {
    atomic_store(&turn, 0);
    pthread_t a, b;
    double t0 = now_s();
    pthread_create(&a, NULL, peer, (void *)0);
    pthread_create(&b, NULL, peer, (void *)1);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("futex handoff %-16s %8.0f ns\n", timed ? "with a timeout:" : "without timeout:",
           (now_s() - t0) * 1e9 / (double)(2 * rounds));
  }
  return 0;
}
