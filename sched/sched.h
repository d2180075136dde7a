/*
** sched.h -- the scheduler seen from tasks/: make a task runnable, and its threads.
**
** tasks/ decides *whether* a task must be scheduled (task_int.h, the scheduling
** word); sched/ decides *where*: a worker's run queue, the worker cache, or the
** task's private thread. Neither looks inside the other.
*/
#ifndef LPVM_SCHED_H
#define LPVM_SCHED_H

#include "lpvm/lpvm.h"
#include "lpvm/task.h"

int sched_start(int workers, int worker_cache, int spin);
void sched_stop(void);
int sched_workers(void);

/* t's status is QUEUED and it is not in thread mode: put it on a run queue. */
void sched_make_runnable(lpvm_task *t);
/* Worker cache hint: the caller (a running task) is about to wait. */
int sched_should_yield(void);
/* Index of the calling worker, -1 on any other thread. */
int sched_worker_index(void);
void sched_fill_stats(lpvm_vmstats *out);

/* memory.c: workers allocate from arenas whose fresh memory comes pre-populated,
** once the VM is big (sched_note_size). */
#define MEM_BIG_VM 4096
void mem_bind_worker(int index);
/* The VM now holds `live` tasks (runtime.c calls it as tasks are born). */
void sched_note_size(uint64_t live);

/* Private threads (thread.c). t's status is QUEUED with the THREAD bit set. */
int thread_start(lpvm_task *t);
void thread_wake(lpvm_task *t);
uint64_t thread_live(void);
/* Wait until every private thread has ended. */
void thread_join_all(void);

#endif
