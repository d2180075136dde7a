/*
** task_timer.c -- timers as tasks see them: SetTimer (handle_timeout) and send-after.
**
** The timer thread never touches a task: when a task's timer fires it sends the
** task a TIMEOUT signal carrying the timer's sequence number, and the task accepts
** it only if that timer is still its current one. A cancelled or replaced timer's
** late signal is therefore ignored, and handle_timeout runs at most once per timer.
*/
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/task_int.h"
#include "timers/timer.h"

static void fire_timeout(void *p, uint64_t id, uint64_t seq) {
  (void)p;
  struct lpvm_sig *s = sig_new(SIG_TIMEOUT, 0, seq, NULL, 0);
  if (s && sig_send(id, s) != 0) free(s);
}

int lpvm_set_timer(lpvm_task *self, uint64_t ms) {
  if (!self) return LPVM_EINVAL;
  lpvm_cancel_timer(self);
  uint64_t seq = lpvm_make_ref();
  lpvm_timer *tm = timer_start(ms, fire_timeout, NULL, self->id, seq);
  if (!tm) return LPVM_ENOMEM;
  self->timer = tm;
  self->timer_seq = seq;
  return 0;
}

int lpvm_cancel_timer(lpvm_task *self) {
  if (!self) return LPVM_EINVAL;
  int won = 0;
  if (self->timer) {
    won = timer_cancel(self->timer);
    timer_release(self->timer);
    self->timer = NULL;
  }
  self->timer_seq = 0;
  self->tflags &= ~TF_TIMEOUT;
  self->timeout_mark = NULL;
  return won;
}

void task_timer_fired(lpvm_task *t, uint64_t seq) {
  if (seq == 0 || seq != t->timer_seq) return;  /* stale: cancelled or replaced */
  t->tflags |= TF_TIMEOUT;
  t->timeout_mark = t->mq_last;   /* the messages a receive must still look at */
  t->timer_seq = 0;
  if (t->timer) {
    timer_release(t->timer);
    t->timer = NULL;
  }
}

int lpvm_timeout_reached(const lpvm_task *self, const lpvm_msg *seen) {
  if (!self || !(self->tflags & TF_TIMEOUT)) return 0;
  return self->timeout_mark == NULL || self->timeout_mark == seen;
}

void task_timer_drop(lpvm_task *t) {
  lpvm_cancel_timer(t);
}

/* ---- send-after --------------------------------------------------------------------
** A reference names a pending send-after so any thread can cancel it. The table
** holds the starter's reference to the timer; whoever removes the entry (the
** firing timer or a cancel) drops it. */

#define SHARDS 16

typedef struct pending {
  struct pending *next;
  uint64_t ref;
  lpvm_timer *tm;
  lpvm_msg *m;     /* still ours to free if a cancel wins */
} pending;

static struct shard {
  pthread_mutex_t mu;
  pending *head;
} shards[SHARDS] = {
#define S0 {PTHREAD_MUTEX_INITIALIZER, NULL}
    S0, S0, S0, S0, S0, S0, S0, S0, S0, S0, S0, S0, S0, S0, S0, S0
#undef S0
};

static struct shard *shard_of(uint64_t ref) { return &shards[ref % SHARDS]; }

static lpvm_timer *pending_take(uint64_t ref, lpvm_msg **m) {
  struct shard *sh = shard_of(ref);
  lpvm_timer *tm = NULL;
  pthread_mutex_lock(&sh->mu);
  for (pending **pp = &sh->head; *pp; pp = &(*pp)->next)
    if ((*pp)->ref == ref) {
      pending *p = *pp;
      *pp = p->next;
      tm = p->tm;
      if (m) *m = p->m;
      free(p);
      break;
    }
  pthread_mutex_unlock(&sh->mu);
  return tm;
}

static void fire_send(void *p, uint64_t to, uint64_t ref) {
  lpvm_msg *m = p;
  lpvm_timer *tm = pending_take(ref, NULL);
  if (tm) timer_release(tm);
  if (sig_send(to, m) != 0) lpvm_msg_free(m);
}

int lpvm_send_after(lpvm_task *self, uint64_t ms, lpvm_id to, const void *term,
                    size_t len, uint64_t *ref) {
  if ((!term && len) || !ref) return LPVM_EINVAL;
  lpvm_msg *m = lpvm_msg_new(len);
  if (!m) return LPVM_ENOMEM;
  if (len) memcpy(lpvm_msg_data(m), term, len);
  return lpvm_send_msg_after(self, ms, to, m, ref);
}

int lpvm_send_msg_after(lpvm_task *self, uint64_t ms, lpvm_id to, lpvm_msg *m,
                        uint64_t *ref) {
  if (!m || !ref) {
    lpvm_msg_free(m);
    return LPVM_EINVAL;
  }
  pending *p = malloc(sizeof *p);
  if (!p) {
    lpvm_msg_free(m);
    return LPVM_ENOMEM;
  }
  m->kind = SIG_MESSAGE;
  m->from = self ? self->id : 0;
  uint64_t r = lpvm_make_ref();
  p->ref = r;
  p->m = m;
  struct shard *sh = shard_of(r);
  /* Hold the shard lock across start so the entry exists before it can fire; once
  ** unlocked, p belongs to whoever takes it (the firing timer may free it at once). */
  pthread_mutex_lock(&sh->mu);
  lpvm_timer *tm = p->tm = timer_start(ms, fire_send, m, to, r);
  if (tm) {
    p->next = sh->head;
    sh->head = p;
  }
  pthread_mutex_unlock(&sh->mu);
  if (!tm) {
    free(p);
    lpvm_msg_free(m);
    return LPVM_ENOMEM;
  }
  *ref = r;
  return 0;
}

int lpvm_cancel_send_after(uint64_t ref) {
  lpvm_msg *m = NULL;
  lpvm_timer *tm = pending_take(ref, &m);
  if (!tm) return 0;
  int won = timer_cancel(tm);
  if (won) lpvm_msg_free(m);  /* it will never fire: the message is ours again */
  timer_release(tm);
  return won;
}

/* VM stop, after the timer thread has stopped: send-afters that never fired give
** their messages back. */
void task_timer_shutdown(void) {
  for (int i = 0; i < SHARDS; i++) {
    struct shard *sh = &shards[i];
    pthread_mutex_lock(&sh->mu);
    pending *p = sh->head;
    sh->head = NULL;
    pthread_mutex_unlock(&sh->mu);
    while (p) {
      pending *next = p->next;
      if (timer_cancel(p->tm)) lpvm_msg_free(p->m);
      timer_release(p->tm);
      free(p);
      p = next;
    }
  }
}
