/*
** testvm.h -- a VM for a test, and a "collector" task that hands the messages it
** receives to the test's own thread, which can then wait for them with a timeout.
*/
#ifndef LPVM_TESTVM_H
#define LPVM_TESTVM_H

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lpvm/lpvm.h"
#include "lpvm/task.h"
#include "lpvm/term.h"
#include "testutil.h"

static inline void vm_start_n(int workers, int cache) {
  lpvm_config c;
  lpvm_config_init(&c);
  c.workers = workers;
  c.worker_cache = cache;
  cr_assert_eq(lpvm_start(&c), 0);
}

static inline void vm_stop(void) { cr_assert_eq(lpvm_stop(), 0); }

static inline void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- collector ----------------------------------------------------------------- */

typedef struct collected {
  struct collected *next;
  lpvm_msg *m;
} collected;

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  collected *head, *tail;
  int n;
} coll = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0};

static inline int coll_event(lpvm_task *t) {
  lpvm_msg *m;
  while ((m = lpvm_recv(t)) != NULL) {
    collected *c = malloc(sizeof *c);
    c->m = m;
    c->next = NULL;
    pthread_mutex_lock(&coll.mu);
    if (coll.tail) coll.tail->next = c;
    else coll.head = c;
    coll.tail = c;
    coll.n++;
    pthread_cond_broadcast(&coll.cv);
    pthread_mutex_unlock(&coll.mu);
  }
  return LPVM_WAIT;
}

static const lpvm_task_def coll_def = {
    .type = "collector", .prio = 20, .handle_event = coll_event};

/* Spawn a collector (optionally trapping exits); returns its id. */
static inline lpvm_id coll_spawn(void) {
  lpvm_id id;
  cr_assert_eq(lpvm_spawn_task(NULL, &coll_def, NULL, 0, &id), 0);
  return id;
}

/* Next collected message, or NULL after `ms` milliseconds. Caller frees it. */
static inline lpvm_msg *coll_next(long ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&coll.mu);
  while (!coll.head)
    if (pthread_cond_timedwait(&coll.cv, &coll.mu, &ts) != 0) break;
  collected *c = coll.head;
  if (c) {
    coll.head = c->next;
    if (!coll.head) coll.tail = NULL;
    coll.n--;
  }
  pthread_mutex_unlock(&coll.mu);
  if (!c) return NULL;
  lpvm_msg *m = c->m;
  free(c);
  return m;
}

/* Render a message as Erlang text for comparisons. */
static inline const char *fmt_msg(lpvm_msg *m, char *buf, size_t cap) {
  lpvm_term_format(lpvm_msg_data(m), lpvm_msg_len(m), buf, cap);
  return buf;
}

/* Wait for the next message and check its rendering starts with `prefix`. */
static inline void expect_msg(const char *prefix, long ms) {
  char buf[512];
  lpvm_msg *m = coll_next(ms);
  cr_assert_not_null(m, "no message (expected %s)", prefix);
  fmt_msg(m, buf, sizeof buf);
  cr_assert(strncmp(buf, prefix, strlen(prefix)) == 0, "got %s, expected %s...", buf,
            prefix);
  lpvm_msg_free(m);
}

static inline void expect_no_msg(long ms) {
  char buf[512];
  lpvm_msg *m = coll_next(ms);
  if (m) cr_assert_fail("unexpected message %s", fmt_msg(m, buf, sizeof buf));
}

/* Build a one-atom term. */
static inline lpvm_msg *atom_msg(const char *a) {
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_atom(&b, a);
  lpvm_msg *m = lpvm_tbuf_to_msg(&b);
  lpvm_tbuf_free(&b);
  return m;
}

/* A tuple of n integers, and reading one back (1 if m is exactly that). */
static inline lpvm_msg *ints_msg(int n, const int64_t *v) {
  lpvm_tbuf tb;
  lpvm_tbuf_init(&tb);
  lpvm_put_tuple(&tb, (uint32_t)n);
  for (int i = 0; i < n; i++) lpvm_put_int(&tb, v[i]);
  lpvm_msg *m = lpvm_tbuf_to_msg(&tb);
  lpvm_tbuf_free(&tb);
  return m;
}

static inline int get_ints(lpvm_msg *m, int n, int64_t *v) {
  lpvm_tread r;
  uint32_t arity;
  if (lpvm_tread_init(&r, lpvm_msg_data(m), lpvm_msg_len(m)) != 0 ||
      lpvm_get_tuple(&r, &arity) != 0 || arity != (uint32_t)n)
    return 0;
  for (int i = 0; i < n; i++)
    if (lpvm_get_int(&r, &v[i]) != 0) return 0;
  return 1;
}

/* Wait until no task is left (bounded). */
static inline int wait_no_tasks(long ms) {
  for (long i = 0; i < ms; i++) {
    if (lpvm_task_count() == 0) return 1;
    sleep_ms(1);
  }
  return lpvm_task_count() == 0;
}

#endif
