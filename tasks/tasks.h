/*
** tasks.h -- tasks/ as the runtime (rt/) starts, stops and counts it.
**
** The runtime knows every subsystem; tasks/ knows nothing of the runtime: it counts
** its live tasks itself and calls the `on_empty` hook it was given when the last one
** dies (that is what lpvm_wait waits for).
*/
#ifndef LPVM_TASKS_H
#define LPVM_TASKS_H

#include <stdint.h>
#include <stdio.h>

/* The process table (room for max_tasks), the name table and the ETS registry. on_empty is called,
** on the dying task's thread, each time the number of live tasks drops to 0. */
int tasks_init(uint32_t max_tasks, void (*on_empty)(void));
/* Once every task is dead and the threads that could touch one have stopped. */
void tasks_fini(void);
/* Send every live task an untrappable kill. */
void tasks_kill_all(void);
/* One line per live task on `out` (what a stuck stop is waiting for). */
void tasks_dump(FILE *out);
/* Drop the send-after messages still pending (the timer thread has stopped). */
void task_timer_shutdown(void);

uint64_t tasks_live(void);
uint64_t tasks_spawned(void);
uint64_t tasks_exited(void);

#endif
