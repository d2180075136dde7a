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
void ets_rwl_rdlock(ets_rwl *l);
void ets_rwl_wrlock(ets_rwl *l);
/* Either side: a holder of the read lock never sees HELD. */
void ets_rwl_unlock(ets_rwl *l);

#endif
