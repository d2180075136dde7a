/*
** ets_lock.c -- the reader-group lock of read_concurrency tables, and the waits of
** the stripe lock and its per-group readers (ets_lock.h).
*/
#include <sched.h>
#include <stdlib.h>

#include "tasks/ets_lock.h"

/* A thread's group: handed out in turn on its first read lock, then fixed, so the
** workers of a small VM each get a line of their own. */
static _Atomic unsigned next_group;
_Thread_local int ets_rwl_my_group = -1;

int ets_rwl_group_init(void) {
  ets_rwl_my_group =
      (int)(atomic_fetch_add_explicit(&next_group, 1, memory_order_relaxed) % ETS_RGROUPS);
  return ets_rwl_my_group;
}

ets_rwl *ets_rwl_new(void) {
  ets_rwl *l;
  if (posix_memalign((void **)&l, 64, sizeof *l)) return NULL;
  for (int i = 0; i < ETS_RGROUPS; i++) atomic_init(&l->groups[i].readers, 0);
  atomic_init(&l->state, ETS_RWL_FREE);
  pthread_mutex_init(&l->wmu, NULL);
  return l;
}

void ets_rwl_free(ets_rwl *l) {
  if (!l) return;
  pthread_mutex_destroy(&l->wmu);
  free(l);
}

/* The reader counted itself in g and then saw a writer in or coming: it steps out
** of the writer's way, sleeps until the writer is done, and tries again. */
void ets_rwl_rdlock_wait(ets_rwl *l, ets_rgroup *g) {
  do {
    atomic_fetch_sub_explicit(&g->readers, 1, memory_order_release);
    pthread_mutex_lock(&l->wmu);
    pthread_mutex_unlock(&l->wmu);
    atomic_fetch_add_explicit(&g->readers, 1, memory_order_seq_cst);
  } while (atomic_load_explicit(&l->state, memory_order_seq_cst) != ETS_RWL_FREE);
}

void ets_rwl_wrlock(ets_rwl *l) {
  pthread_mutex_lock(&l->wmu);
  atomic_store_explicit(&l->state, ETS_RWL_WAITING, memory_order_seq_cst);
  for (int i = 0; i < ETS_RGROUPS; i++) {
    /* readers hold the lock for one operation, or one walk: wait them out */
    for (unsigned spins = 0;
         atomic_load_explicit(&l->groups[i].readers, memory_order_seq_cst) != 0; spins++)
      if (spins > 64) sched_yield();
  }
  atomic_store_explicit(&l->state, ETS_RWL_HELD, memory_order_relaxed);
}

void ets_rwl_wrunlock(ets_rwl *l) {
  atomic_store_explicit(&l->state, ETS_RWL_FREE, memory_order_release);
  pthread_mutex_unlock(&l->wmu);
}

void ets_slock_wait(int *spins) {
  if (++*spins > 64) sched_yield();
}

ets_sgroup *ets_sg_new(void) {
  ets_sgroup *sg;
  if (posix_memalign((void **)&sg, 64, ETS_RGROUPS * sizeof *sg)) return NULL;
  for (int g = 0; g < ETS_RGROUPS; g++)
    for (int s = 0; s < ETS_SG_STRIPES; s++) atomic_init(&sg[g].readers[s], 0);
  return sg;
}

/* The reader counted itself in c and then saw the stripe's writer bit: out of the
** writer's way until the bit clears, then in again. */
void ets_sg_rdlock_wait(ets_slock *l, _Atomic uint32_t *c) {
  int spins = 0;
  do {
    atomic_fetch_sub_explicit(c, 1, memory_order_release);
    while (atomic_load_explicit(&l->w, memory_order_relaxed) & ETS_SLOCK_W)
      ets_slock_wait(&spins);
    atomic_fetch_add_explicit(c, 1, memory_order_seq_cst);
  } while (atomic_load_explicit(&l->w, memory_order_seq_cst) & ETS_SLOCK_W);
}

void ets_sg_wait_readers(ets_sgroup *sg, unsigned s) {
  int spins = 0;
  for (int g = 0; g < ETS_RGROUPS; g++)
    while (atomic_load_explicit(&sg[g].readers[s], memory_order_seq_cst) != 0)
      ets_slock_wait(&spins);
}
