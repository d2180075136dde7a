/*
** task_int.h -- what the tasks/ files share with each other (private to tasks/).
**
** The scheduling word and the step are the tasks <-> sched interface: task_sched.h.
*/
#ifndef LPVM_TASK_INT_H
#define LPVM_TASK_INT_H

#include <stdatomic.h>
#include <stdint.h>

#include "lpvm/task.h"
#include "tasks/ptab.h"
#include "tasks/task_sched.h"
#include "tasks/tasks.h"

#include "tasks/sig.h"   /* signal kinds, sig_send */


/* lpvm_task.tflags */
#define TF_TRAP_EXIT   0x01u
#define TF_TIMEOUT     0x02u   /* the lpvm_set_timer timer fired */
#define TF_TO_THREAD   0x04u   /* MIGRATE asked for a private thread */
#define TF_TO_WORKER   0x08u   /* MIGRATE asked for the workers */
#define TF_DECLINED    0x10u   /* handle_event took nothing: wait for new mail */

/* signal.c */
/* WAITING -> QUEUED and schedule t, unless somebody else's CAS did (cur: the word
** as last seen): a spawn's. A signal's sender does the same in the CAS that raises
** PENDING (signal.c, notify); both schedule through the same code. */
void task_claim(lpvm_task *t, uint32_t cur);
struct lpvm_sig *sig_new(uint32_t kind, lpvm_id from, uint64_t ref, const void *data,
                         size_t len);
/* Push s to a task the caller has pinned (or owns); for a MESSAGE, returns the
** messages queued for t with it (0 for other signals). */
uint32_t sig_push(lpvm_task *t, struct lpvm_sig *s);
int sig_handle_all(lpvm_task *t);   /* 1: signals left over */
/* Answer what is left in a dead task's signal queue (LINK -> noproc, ...). */
void sig_drain_dead(lpvm_task *t);
/* The pin cache of messages sent in a step (signal.c): armed for a step's callbacks
** on a worker, its pin dropped at their end. This thread's only. */
typedef struct {
  lpvm_task *t;   /* pinned, or NULL */
  lpvm_id id;     /* t's id */
  int on;         /* inside a step's callbacks on a worker */
} sig_pin_cache;
extern _Thread_local sig_pin_cache sig_pins;
void sig_cache_drop(void);   /* unpin sig_pins.t (not NULL) */
static inline void sig_cache_begin(void) { sig_pins.on = 1; }
static inline void sig_cache_end(void) {
  sig_pins.on = 0;
  if (sig_pins.t) sig_cache_drop();
}

/* mailbox.c */
/* Count m as queued for t (before it is pushed); returns the new count. */
uint32_t mbox_count_in(lpvm_task *t, const struct lpvm_sig *m);
void mbox_append(lpvm_task *t, struct lpvm_sig *m);
void mbox_free_all(lpvm_task *t);
/* A message with room for `extra` bytes after its len-byte payload (binary.c's table). */
lpvm_msg *mbox_msg_alloc(size_t len, size_t extra);
/* binary.c: drop the references of a message with LPVM_MSGF_BINS. */
void bin_msg_release(lpvm_msg *m);

/* links.c: the task's own relations, touched only by the task itself. */
struct task_rel;
int rel_link_add(lpvm_task *t, lpvm_id other);       /* 1 if added, 0 if present */
int rel_link_del(lpvm_task *t, lpvm_id other);       /* 1 if it was there */
int rel_unlinking_add(lpvm_task *t, lpvm_id other);  /* an UNLINK sent, its ACK awaited */
void rel_unlinking_del(lpvm_task *t, lpvm_id other); /* one ACK came */
int rel_unlinking(const lpvm_task *t, lpvm_id other); /* 1 while an ACK is awaited */
int rel_mon_add(lpvm_task *t, uint64_t ref, lpvm_id target);
int rel_mon_del(lpvm_task *t, uint64_t ref, lpvm_id *target);
int rel_mon_name_add(lpvm_task *t, uint64_t ref, const char *name, size_t len);
char *rel_mon_name_take(lpvm_task *t, uint64_t ref);   /* NULL: by pid; caller frees */
int rel_watch_add(lpvm_task *t, uint64_t ref, lpvm_id watcher);
int rel_watch_del(lpvm_task *t, uint64_t ref, lpvm_id watcher);   /* watcher 0: any */
void rel_notify_exit(lpvm_task *t, const uint8_t *reason, size_t len);
void rel_free(lpvm_task *t);

/* names.c */
int names_init(void);
void names_fini(void);
void names_drop_task(lpvm_task *t);

/* ets.c: the ETS tables (tasks/ets_int.h); the exit hook deletes a dead task's tables
** or hands them to their heirs. */
int ets_init(void);
void ets_fini(void);
void ets_task_exit(lpvm_task *t);

/* ptab.c: the process table. */
int ptab_init(uint32_t cap);
void ptab_fini(void);
int ptab_alloc(lpvm_task *t, int port, lpvm_id *id);  /* reserve a slot, not visible */
void ptab_publish(lpvm_task *t);                        /* visible to lookups */
void ptab_unreserve(lpvm_id id);                        /* spawn failed */
void ptab_close(lpvm_task *t);                          /* the task is dead */
/* Call fn on every live task (pinned during the call). */
void ptab_foreach(void (*fn)(lpvm_task *t, void *ud), void *ud);

/* reasons.c: prebuilt terms for the atoms the core uses. */
extern const uint8_t term_normal[], term_kill[], term_killed[], term_noproc[],
    term_shutdown[], term_nomem[];
extern const size_t term_normal_len, term_kill_len, term_killed_len, term_noproc_len,
    term_shutdown_len, term_nomem_len;
int term_is(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen);

/* task_timer.c */
void task_timer_drop(lpvm_task *t);
/* timer_seq of a task whose receive timer is noted, not started (task_timer.c): the
** milliseconds, NOTED, and NOTED_NOW until the end of the step that noted it. No
** sequence number has bit 63 (lpvm_make_ref counts from 1 by one), so a stale
** TIMEOUT never matches a note. */
#define TIMER_NOTED     (UINT64_C(1) << 63)
#define TIMER_NOTED_NOW (UINT64_C(1) << 62)
/* The task whose receive timer this worker noted, or NULL. */
extern _Thread_local lpvm_task *task_noted;
/* At the end of each step of t on a worker while a task's receive timer is noted,
** while t is still this thread's (before it goes back to WAITING or QUEUED): the kept
** task's note started or kept. r: STEP_HANDOFF when t leaves the workers, STEP_DEAD
** (t NULL) when it died, STEP_WAIT otherwise. */
void task_timer_step_end(lpvm_task *t, int r);
static inline void task_timer_after_step(lpvm_task *t, int r) {
  if (task_noted) task_timer_step_end(t, r);
}
void task_timer_fired(lpvm_task *t, uint64_t seq);

/* tasks.c: the live, spawned and exited counts. */
void task_count_born(void);
void task_count_died(void);

#endif
