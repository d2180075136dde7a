/*
** tasks.c -- tasks/ started, stopped and counted for the runtime (rt/runtime.c).
*/
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "tasks/node.h"
#include "tasks/task_int.h"
#include "tasks/tasks.h"

static struct {
  _Atomic uint64_t live, spawned, exited;
  void (*on_empty)(void);   /* written by tasks_init before any task exists */
} C;

int tasks_init(uint32_t max_tasks, void (*on_empty)(void)) {
  int rc = ptab_init(max_tasks);
  if (rc) return rc;
  if ((rc = names_init()) != 0 || (rc = ets_init()) != 0) {
    names_fini();
    ptab_fini();
    return rc;
  }
  C.on_empty = on_empty;
  return 0;
}

void tasks_fini(void) {
  node_fini();
  ets_fini();   /* the tables of tasks that never died (lpvm_stop kills; owner 0) */
  names_fini();
  ptab_fini();
}

static void kill_one(lpvm_task *t, void *ud) {
  (void)ud;
  struct lpvm_sig *s = sig_new(SIG_EXIT, 0, 0, term_kill, term_kill_len);
  if (s) sig_push(t, s);
}

void tasks_kill_all(void) { ptab_foreach(kill_one, NULL); }

/* One line per live task, for a stop that does not end. It reads only what another
** thread may read (the id, the type, the atomic scheduling word, the queued count):
** the task may be running while we look. */
static void dump_one(lpvm_task *t, void *ud) {
  static const char *const status[] = {"waiting", "queued", "running", "dead"};
  uint32_t w = atomic_load_explicit(&t->sched_word, memory_order_acquire);
  if (lpvm_id_is_port(t->id))
    fprintf((FILE *)ud, "  #Port<0.%" PRIu32 ">", lpvm_id_slot(t->id));
  else
    fprintf((FILE *)ud, "  <0.%" PRIu32 ".%" PRIu32 ">", lpvm_id_slot(t->id), lpvm_id_gen(t->id));
  fprintf((FILE *)ud, " %s, %s%s%s, %zu queued\n", t->def->type, status[ts_status(w)],
          (w & TS_PENDING) ? ", signals pending" : "", (w & TS_THREAD) ? ", own thread" : "",
          lpvm_queued_msgs(t));
}

void tasks_dump(FILE *out) { ptab_foreach(dump_one, out); }

void task_count_born(void) {
  uint64_t live = atomic_fetch_add(&C.live, 1) + 1;
  if (live == MEM_BIG_VM) sched_note_size(live);   /* lpvm_is_big from now on */
  atomic_fetch_add_explicit(&C.spawned, 1, memory_order_relaxed);
}

void task_count_died(void) {
  atomic_fetch_add_explicit(&C.exited, 1, memory_order_relaxed);
  if (atomic_fetch_sub(&C.live, 1) == 1 && C.on_empty) C.on_empty();
}

uint64_t tasks_live(void) { return atomic_load(&C.live); }
uint64_t tasks_spawned(void) { return atomic_load(&C.spawned); }
uint64_t tasks_exited(void) { return atomic_load(&C.exited); }
