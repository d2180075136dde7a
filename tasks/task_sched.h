/*
** task_sched.h -- the one interface between tasks/ and sched/.
**
** tasks/ decides *whether* a task must be scheduled (the scheduling word below);
** sched/ decides *where*: a worker's run queue, the worker cache, or the task's
** private thread. A task woken by a running task goes to that task's worker, and
** moves to another worker only when an idle one takes work the busy one will not get
** to soon (sched/sched.c, wait_for_work): a chain of sends stays on one core. This header is all either side sees of the other: tasks/ calls
** the sched_* and thread_* functions below, sched/ calls task_step and reads the
** status bits. Neither includes the other's private header.
**
** The scheduling word (lpvm_task.sched_word) decides who may put a task on a run
** queue, so a task is never queued twice and never left waiting with a signal:
**
**   bits 0-1  status   WAITING -> QUEUED -> RUNNING -> (WAITING | QUEUED | DEAD)
**   bit  2    PENDING  a signal was pushed since the task last started draining
**   bit  3    THREAD   the task runs on a private thread (wake it, don't queue it)
**
** A sender pushes its signal, then sets PENDING; if the status was WAITING it also
** moves it to QUEUED, and that one successful CAS is what entitles it to schedule
** the task. A running task clears PENDING before it drains and may only go back to
** WAITING with a CAS that fails if PENDING came back meanwhile.
*/
#ifndef LPVM_TASK_SCHED_H
#define LPVM_TASK_SCHED_H

#include <stdint.h>

#include "lpvm/task.h"

#define TS_WAITING  0u
#define TS_QUEUED   1u
#define TS_RUNNING  2u
#define TS_DEAD     3u
#define TS_STATUS   3u
#define TS_PENDING  4u
#define TS_THREAD   8u

#define ts_status(w) ((w) & TS_STATUS)

/* ---- tasks/ offers sched/ ----------------------------------------------------------- */

/* What one step (RunTask) leaves the caller to do. */
enum {
  STEP_REQUEUE,   /* status is QUEUED: put it back on a run queue */
  STEP_WAIT,      /* status is WAITING: a sender will wake it */
  STEP_DEAD,      /* terminated: forget it */
  STEP_HANDOFF    /* moved to another mode (thread <-> workers): forget it */
};

/* Run one step of t (the thesis's RunTask); t's status is QUEUED. */
int task_step(lpvm_task *t);
/* A worker found no work of its own: a receive timer it noted (tasks/task_timer.c)
** is started before it looks elsewhere and sleeps. */
void task_timers_idle(void);

/* ---- sched/ offers tasks/ ----------------------------------------------------------- */

/* t's status is QUEUED and it is not in thread mode: put it on a run queue. */
void sched_make_runnable(lpvm_task *t);
/* Was the calling worker asked to give up its task (a higher priority is queued)?
** 0 on any thread that is not a worker. */
int sched_should_yield(void);
/* Index of the calling worker, -1 on any other thread. */
int sched_worker_index(void);
/* 1 on the worker of a VM of one worker: every step of a task that is not on a
** private thread runs on the calling thread. */
int sched_alone(void);
/* The VM now holds `live` tasks: past MEM_BIG_VM the workers move to their own
** pre-populated allocator arenas (sched/memory.c). */
#define MEM_BIG_VM 4096
void sched_note_size(uint64_t live);

/* Private threads (sched/thread.c). t's status is QUEUED with the THREAD bit set. */
int thread_start(lpvm_task *t);
void thread_wake(lpvm_task *t);

#endif
