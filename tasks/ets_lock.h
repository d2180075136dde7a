/*
** ets_lock.h -- the table lock of read_concurrency tables: a reader-writer lock whose
** readers write only a cache line of their own ("reader groups", as ETS's
** freq_read locks), so readers on different threads never bounce a line between
** cores; writers pay instead, by checking every group (docs/architecture.md, "ETS").
**
** State (`state`, written by writers only, under `wmu`):
**   FREE --wrlock--> WAITING (new readers back off) --groups drained--> HELD
**   HELD --unlock--> FREE.
** A reader adds itself to its group and then reads state (both seq_cst); a writer
** sets WAITING and then reads the groups (seq_cst): one of the two always sees the
** other (a Dekker pair), so a reader either proceeds with no writer inside or backs
** off and sleeps on wmu until the writer leaves.
*/
#ifndef LPVM_ETS_LOCK_H
#define LPVM_ETS_LOCK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define ETS_RGROUPS 8   /* threads share groups beyond this many */

typedef struct ets_rgroup {
  _Atomic long readers;     /* readers of this group inside (written by them) */
  char pad[64 - sizeof(long)];
} ets_rgroup;

typedef struct ets_rwl {
  ets_rgroup groups[ETS_RGROUPS];
  pthread_mutex_t wmu;      /* writers one at a time; backed-off readers wait here */
  _Atomic int state;        /* ETS_RWL_FREE, _WAITING, _HELD */
  char pad[64];
} ets_rwl;

enum { ETS_RWL_FREE = 0, ETS_RWL_WAITING, ETS_RWL_HELD };

/* NULL when out of memory. The lock lives until ets_rwl_free. */
ets_rwl *ets_rwl_new(void);
void ets_rwl_free(ets_rwl *l);
void ets_rwl_wrlock(ets_rwl *l);

/* The calling thread's group (written by that thread only): -1 until its first read
** lock, when ets_rwl_group_init hands the groups out in turn. */
extern _Thread_local int ets_rwl_my_group;
int ets_rwl_group_init(void);
/* ets_lock.c: a reader that met a writer, and a writer's unlock. */
void ets_rwl_rdlock_wait(ets_rwl *l, ets_rgroup *g);
void ets_rwl_wrunlock(ets_rwl *l);

static inline ets_rgroup *ets_rwl_group(ets_rwl *l) {
  int g = ets_rwl_my_group;
  return &l->groups[g >= 0 ? g : ets_rwl_group_init()];
}

/* Inline: a lookup takes and drops this lock once, and with no writer about that is
** one atomic add and one load each way. */
static inline void ets_rwl_rdlock(ets_rwl *l) {
  ets_rgroup *g = ets_rwl_group(l);
  atomic_fetch_add_explicit(&g->readers, 1, memory_order_seq_cst);
  if (atomic_load_explicit(&l->state, memory_order_seq_cst) != ETS_RWL_FREE)
    ets_rwl_rdlock_wait(l, g);
}

/* Either side: a holder of the read lock never sees HELD. */
static inline void ets_rwl_unlock(ets_rwl *l) {
  if (atomic_load_explicit(&l->state, memory_order_relaxed) == ETS_RWL_HELD)
    ets_rwl_wrunlock(l);
  else
    atomic_fetch_sub_explicit(&ets_rwl_group(l)->readers, 1, memory_order_release);
}

/* The stripe lock of write_concurrency tables: one word, readers counted in its low
** bits and a writer's bit on top. A stripe is held for one single-key operation (a
** copy in or out and a few pointer changes), under the table lock, so a plain
** pthread_rwlock's bookkeeping (and its futex word beside the count) cost more than
** the wait they could save; here each side is one atomic operation when free.
** A writer sets its bit first, which turns new readers away, then waits for the
** readers inside to leave: writers are preferred, so readers cannot starve one.
** Waits spin briefly, then yield the CPU (holders never block while holding). */
typedef struct ets_slock {
  _Atomic uint32_t w;       /* readers inside | ETS_SLOCK_W (a writer in or coming) */
} ets_slock;

#define ETS_SLOCK_W 0x80000000u

void ets_slock_wait(int *spins);   /* ets_lock.c: a pause, then sched_yield */

static inline void ets_slock_init(ets_slock *l) { atomic_init(&l->w, 0); }

static inline void ets_slock_rdlock(ets_slock *l) {
  int spins = 0;
  for (;;) {
    uint32_t v = atomic_load_explicit(&l->w, memory_order_relaxed);
    if (!(v & ETS_SLOCK_W) &&
        atomic_compare_exchange_weak_explicit(&l->w, &v, v + 1, memory_order_acquire,
                                              memory_order_relaxed))
      return;
    if (v & ETS_SLOCK_W) ets_slock_wait(&spins);
  }
}

static inline void ets_slock_wrlock(ets_slock *l) {
  int spins = 0;
  for (;;) {   /* claim the writer's bit (one writer at a time)... */
    uint32_t v = atomic_load_explicit(&l->w, memory_order_relaxed);
    /* seq_cst: the writer's half of the Dekker pair with group readers (below) */
    if (!(v & ETS_SLOCK_W) &&
        atomic_compare_exchange_weak_explicit(&l->w, &v, v | ETS_SLOCK_W,
                                              memory_order_seq_cst, memory_order_relaxed))
      break;
    if (v & ETS_SLOCK_W) ets_slock_wait(&spins);
  }
  spins = 0;   /* ...then wait out the readers already inside */
  while (atomic_load_explicit(&l->w, memory_order_acquire) != ETS_SLOCK_W)
    ets_slock_wait(&spins);
}

/* Either side: a reader inside counts itself, so the count is 0 only for the writer. */
static inline void ets_slock_unlock(ets_slock *l) {
  if (atomic_load_explicit(&l->w, memory_order_relaxed) == ETS_SLOCK_W)
    atomic_store_explicit(&l->w, 0, memory_order_release);
  else
    atomic_fetch_sub_explicit(&l->w, 1, memory_order_release);
}

/* Stripe readers of read_concurrency tables (read_concurrency + write_concurrency):
** counted per reader group, not in the stripe's word, so lookups from two workers
** write no shared line at all (the word is only read, and stays in both caches).
** Group g's counters are one array of its own, ETS_RGROUPS arrays of 64 x 4 bytes
** (2 KB a table, made once per slot): a reader adds 1 to [its group][its stripe],
** then reads the stripe's word (both seq_cst); a writer sets the word's writer bit
** (seq_cst) and then waits for that stripe's counter to be 0 in every group. One of
** the two always sees the other (as ets_rwl's groups), so a reader either proceeds
** with no writer in the stripe or steps back out and waits for the bit to clear;
** writers keep their preference. */
#define ETS_SG_STRIPES 64

typedef struct ets_sgroup {
  _Atomic uint32_t readers[ETS_SG_STRIPES];   /* written by this group's readers */
} ets_sgroup;
_Static_assert(sizeof(ets_sgroup) % 64 == 0, "a group's counters share no line");

/* NULL when out of memory; ETS_RGROUPS groups, freed with free(). */
ets_sgroup *ets_sg_new(void);
/* ets_lock.c: a reader that met a writer's bit; a writer waiting out the groups. */
void ets_sg_rdlock_wait(ets_slock *l, _Atomic uint32_t *c);
void ets_sg_wait_readers(ets_sgroup *sg, unsigned s);

static inline _Atomic uint32_t *ets_sg_counter(ets_sgroup *sg, unsigned s) {
  int g = ets_rwl_my_group;
  return &sg[g >= 0 ? g : ets_rwl_group_init()].readers[s];
}

static inline void ets_sg_rdlock(ets_sgroup *sg, ets_slock *l, unsigned s) {
  _Atomic uint32_t *c = ets_sg_counter(sg, s);
  atomic_fetch_add_explicit(c, 1, memory_order_seq_cst);
  if (atomic_load_explicit(&l->w, memory_order_seq_cst) & ETS_SLOCK_W)
    ets_sg_rdlock_wait(l, c);
}

static inline void ets_sg_rdunlock(ets_sgroup *sg, unsigned s) {
  atomic_fetch_sub_explicit(ets_sg_counter(sg, s), 1, memory_order_release);
}

/* The word's writer bit, then every group's readers of stripe s gone; unlocked with
** ets_slock_unlock (the word holds the bit alone). */
static inline void ets_sg_wrlock(ets_sgroup *sg, ets_slock *l, unsigned s) {
  ets_slock_wrlock(l);
  uint32_t any = 0;   /* no reader inside (the usual case): one pass, no call */
#pragma GCC unroll 8
  for (int g = 0; g < ETS_RGROUPS; g++)
    any |= atomic_load_explicit(&sg[g].readers[s], memory_order_seq_cst);
  if (any) ets_sg_wait_readers(sg, s);
}

#endif
