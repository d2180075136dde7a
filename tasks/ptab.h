/*
** ptab.h -- the process table as the rest of the core (io/) may use it: pin a live
** task by id, without a lock, to read it, and unpin it. The table's other functions
** (allocating, publishing, closing slots) are private to tasks/ (task_int.h).
*/
#ifndef LPVM_PTAB_H
#define LPVM_PTAB_H

#include "lpvm/task.h"

lpvm_task *ptab_pin(lpvm_id id);                        /* NULL if dead */
void ptab_unpin(lpvm_task *t);

#endif
