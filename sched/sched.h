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

/* The I/O poll an idle worker waits in instead of its condition variable, as the
** runtime hands it over (io/io.h's io_poll_*: sched/ does not include io/). One
** worker at a time holds it (sched.c, "the poll"). */
typedef struct sched_poll {
  /* Wait up to timeout_ms (-1: no limit, 0: only look); how many events came. */
  int (*wait)(int timeout_ms);
  /* Turn what this thread's last wait got into messages (tasks made runnable). */
  void (*deliver)(void);
  /* End the wait in progress, or the next one (any thread). */
  void (*wake)(void);
  /* Nonzero while there is something to poll: busy workers look in now and then. */
  int (*watching)(void);
} sched_poll;

/* `poll` may be NULL: idle workers then only sleep on their condition variables. */
int sched_start(int workers, int worker_cache, int spin, const sched_poll *poll);
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
