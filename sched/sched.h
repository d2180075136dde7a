/*
** sched.h -- the scheduler's own start, stop and statistics (for the runtime), and
** what sched/'s files share. What tasks/ sees of sched/ is tasks/task_sched.h.
*/
#ifndef LPVM_SCHED_H
#define LPVM_SCHED_H

#include "lpvm/lpvm.h"
#include "lpvm/task.h"
#include "tasks/task_sched.h"

/* The most workers a VM runs (sched_start refuses more; an idle worker keeps one
** sighting per other worker on its stack). */
#define SCHED_MAX_WORKERS 64

int sched_start(int workers, int worker_cache, int spin);
void sched_stop(void);
void sched_fill_stats(lpvm_vmstats *out);

/* memory.c: workers allocate from arenas whose fresh memory comes pre-populated,
** once the VM is big (sched_note_size). */
void mem_bind_worker(int index);

/* Private threads (thread.c). */
uint64_t thread_live(void);
/* Wait until every private thread has ended. */
void thread_join_all(void);

#endif
