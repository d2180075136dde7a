/*
** xmpltask.h -- the thesis's example task (Hedqvist 1998, 5.2.3): a counter.
**
** Messages it understands (external terms):
**   {incr, N}        add N to the counter
**   {get, Pid}       reply {count, Self, N} to Pid
**   stop             exit with reason normal
** Anything else is dropped. It starts on a private thread (LPVM_TASK_START_THREAD),
** as in the thesis; spawn it with opts.thread = 0 to run it on the workers.
*/
#ifndef XMPLTASK_H
#define XMPLTASK_H

#include <lpvm/task.h>

typedef struct xmpl_task {
  lpvm_task task;   /* first: the record the runtime knows */
  int64_t counter;
  int setup_done;
} xmpl_task;

extern const lpvm_task_def xmpl_def;

#endif
