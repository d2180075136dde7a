/*
** task_int.h -- what the tasks/ files share with each other and with sched/.
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
#ifndef LPVM_TASK_INT_H
#define LPVM_TASK_INT_H

#include <stdatomic.h>
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

/* Signal kinds. */
enum {
  SIG_MESSAGE = 1, SIG_LINK, SIG_UNLINK, SIG_EXIT, SIG_EXIT_LINK, SIG_MONITOR,
  SIG_DEMONITOR, SIG_DOWN, SIG_SUSPEND, SIG_RESUME, SIG_INFO, SIG_PRIORITY,
  SIG_MIGRATE, SIG_TIMEOUT,
  SIG_DIST       /* a signal for a remote id, wrapped for its connection (io/dist) */
};

/* lpvm_task.tflags */
#define TF_TRAP_EXIT   0x01u
#define TF_TIMEOUT     0x02u   /* the lpvm_set_timer timer fired */
#define TF_TO_THREAD   0x04u   /* MIGRATE asked for a private thread */
#define TF_TO_WORKER   0x08u   /* MIGRATE asked for the workers */
#define TF_DECLINED    0x10u   /* handle_event took nothing: wait for new mail */

/* What one step (RunTask) leaves the caller to do. */
enum {
  STEP_REQUEUE,   /* status is QUEUED: put it back on a run queue */
  STEP_WAIT,      /* status is WAITING: a sender will wake it */
  STEP_DEAD,      /* terminated: forget it */
  STEP_HANDOFF    /* moved to another mode (thread <-> workers): forget it */
};

/* task.c */
int task_step(lpvm_task *t);

/* signal.c */
struct lpvm_sig *sig_new(uint32_t kind, lpvm_id from, uint64_t ref, const void *data,
                         size_t len);
/* Push s to `to`; on LPVM_ENOPROC the signal is still the caller's. */
int sig_send(lpvm_id to, struct lpvm_sig *s);
/* Push s to a task the caller has pinned (or owns). */
void sig_push(lpvm_task *t, struct lpvm_sig *s);
int sig_handle_all(lpvm_task *t);   /* 1: signals left over */
/* Answer what is left in a dead task's signal queue (LINK -> noproc, ...). */
void sig_drain_dead(lpvm_task *t);

/* mailbox.c */
void mbox_append(lpvm_task *t, struct lpvm_sig *m);
void mbox_free_all(lpvm_task *t);

/* links.c: the task's own relations, touched only by the task itself. */
struct task_rel;
int rel_link_add(lpvm_task *t, lpvm_id other);       /* 1 if added, 0 if present */
int rel_link_del(lpvm_task *t, lpvm_id other);       /* 1 if it was there */
int rel_mon_add(lpvm_task *t, uint64_t ref, lpvm_id target);
int rel_mon_del(lpvm_task *t, uint64_t ref, lpvm_id *target);
int rel_watch_add(lpvm_task *t, uint64_t ref, lpvm_id watcher);
int rel_watch_del(lpvm_task *t, uint64_t ref);
void rel_notify_exit(lpvm_task *t, const uint8_t *reason, size_t len);
void rel_free(lpvm_task *t);

/* names.c */
int names_init(void);
void names_fini(void);
void names_drop_task(lpvm_task *t);

/* ptab.c: the process table. */
int ptab_init(uint32_t cap);
void ptab_fini(void);
int ptab_alloc(lpvm_task *t, int port, lpvm_id *id);  /* reserve a slot, not visible */
void ptab_publish(lpvm_task *t);                        /* visible to lookups */
void ptab_unreserve(lpvm_id id);                        /* spawn failed */
lpvm_task *ptab_pin(lpvm_id id);                        /* NULL if dead */
void ptab_unpin(lpvm_task *t);
void ptab_close(lpvm_task *t);                          /* the task is dead */
/* Call fn on every live task (pinned during the call). */
void ptab_foreach(void (*fn)(lpvm_task *t, void *ud), void *ud);

/* reasons.c: prebuilt terms for the atoms the core uses. */
extern const uint8_t term_normal[], term_kill[], term_killed[], term_noproc[],
    term_shutdown[];
extern const size_t term_normal_len, term_kill_len, term_killed_len, term_noproc_len,
    term_shutdown_len;
int term_is(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen);

/* task_timer.c */
void task_timer_drop(lpvm_task *t);
void task_timer_fired(lpvm_task *t, uint64_t seq);
void task_timer_shutdown(void);

/* runtime (sched/runtime.c) */
void rt_task_born(void);
void rt_task_died(void);

#endif
