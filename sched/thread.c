/*
** thread.c -- private threads: a task that runs on a thread of its own.
**
** The thesis's RunTask' loop. The thread blocks on a futex on the task's own
** scheduling word until a sender moves it to QUEUED, so waking a private-thread task
** costs the sender one futex wake and no lock, and the wait object needs no memory of
** its own: the word lives as long as the task, and a sender holds a pin on the task
** while it wakes it. Timeouts arrive as TIMEOUT signals from the timer wheel, like
** for any task, so a private thread never polls.
*/
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sched/sched.h"

static _Atomic uint64_t live;
static pthread_mutex_t join_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t join_cv = PTHREAD_COND_INITIALIZER;

static void futex_wait(_Atomic uint32_t *word, uint32_t seen) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static void wait_queued(lpvm_task *t) {
  for (;;) {
    uint32_t w = atomic_load_explicit(&t->sched_word, memory_order_acquire);
    if (ts_status(w) == TS_QUEUED) return;
    futex_wait(&t->sched_word, w);
  }
}

static void *thread_main(void *arg) {
  lpvm_task *t = arg;
  lpvm_thread_arena();   /* before memory may run out (lpvm.h) */
  for (;;) {
    wait_queued(t);
    int r = task_step(t);
    if (r == STEP_REQUEUE || r == STEP_WAIT) continue;
    if (r == STEP_HANDOFF) sched_make_runnable(t);  /* back to the workers */
    break;
  }
  pthread_mutex_lock(&join_mu);
  if (atomic_fetch_sub(&live, 1) == 1) pthread_cond_broadcast(&join_cv);
  pthread_mutex_unlock(&join_mu);
  return NULL;
}

int thread_start(lpvm_task *t) {
  pthread_attr_t attr;
  pthread_t th;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  atomic_fetch_add(&live, 1);
  int rc = pthread_create(&th, &attr, thread_main, t);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    atomic_fetch_sub(&live, 1);
    return LPVM_ESYS;
  }
  return 0;
}

void thread_wake(lpvm_task *t) {
  futex_wake(&t->sched_word);
}

uint64_t thread_live(void) { return atomic_load(&live); }

void thread_join_all(void) {
  pthread_mutex_lock(&join_mu);
  while (atomic_load(&live) != 0) pthread_cond_wait(&join_cv, &join_mu);
  pthread_mutex_unlock(&join_mu);
}
