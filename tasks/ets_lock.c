/*
** ets_lock.c -- the reader-group lock of read_concurrency tables, and the waits of
** the stripe lock (ets_lock.h).
*/
#include <sched.h>
#include <stdlib.h>

#include "tasks/ets_lock.h"

/* A thread's group: handed out in turn on its first read lock, then fixed, so the
** workers of a small VM each get a line of their own. */
static _Atomic unsigned next_group;
static _Thread_local int my_group = -1;

static ets_rgroup *group_of(ets_rwl *l) {
  if (my_group < 0)
    my_group = (int)(atomic_fetch_add_explicit(&next_group, 1, memory_order_relaxed) %
                     ETS_RGROUPS);
  return &l->groups[my_group];
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

void ets_rwl_rdlock(ets_rwl *l) {
  ets_rgroup *g = group_of(l);
  for (;;) {
    atomic_fetch_add_explicit(&g->readers, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&l->state, memory_order_seq_cst) == ETS_RWL_FREE) return;
    /* a writer is in or coming: step out of its way and sleep until it is done */
    atomic_fetch_sub_explicit(&g->readers, 1, memory_order_release);
    pthread_mutex_lock(&l->wmu);
    pthread_mutex_unlock(&l->wmu);
  }
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

void ets_rwl_unlock(ets_rwl *l) {
  if (atomic_load_explicit(&l->state, memory_order_relaxed) == ETS_RWL_HELD) {
    atomic_store_explicit(&l->state, ETS_RWL_FREE, memory_order_release);
    pthread_mutex_unlock(&l->wmu);
    return;
  }
  atomic_fetch_sub_explicit(&group_of(l)->readers, 1, memory_order_release);
}

void ets_slock_wait(int *spins) {
  if (++*spins > 64) sched_yield();
}
