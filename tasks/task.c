/*
** task.c -- spawning a task, one step of it (the thesis's RunTask), and its death.
*/
#include <stdlib.h>
#include <string.h>

#include "lpvm/term.h"
#include "tasks/mpsc.h"
#include "tasks/task_int.h"

/* ---- spawning ------------------------------------------------------------------- */

static lpvm_task *task_alloc(const lpvm_task_def *def, void *arg) {
  if (def->allocate) return def->allocate(def, arg);
  size_t size = def->size ? def->size : sizeof(lpvm_task);
  if (size < sizeof(lpvm_task)) return NULL;
  return calloc(1, size);
}

static void task_free(lpvm_task *t) {
  if (t->def->free) t->def->free(t);
  else free(t);
}

static int check_spawn(lpvm_task *creator, const lpvm_task_def *def,
                       const lpvm_spawn_opts *o, int prio, int thread) {
  if (!def || !def->type) return LPVM_EINVAL;
  if (prio < LPVM_PRIO_MAX || prio > LPVM_PRIO_MIN) return LPVM_EINVAL;
  if (o->link && !creator) return LPVM_EINVAL;
  if (!thread && (def->flags & LPVM_TASK_CANT_SCHEDULE)) return LPVM_ECANTSCHED;
  return 0;
}

int lpvm_spawn_task_opt(lpvm_task *creator, const lpvm_task_def *def, void *arg,
                        const lpvm_spawn_opts *opts, lpvm_id *id) {
  static const lpvm_spawn_opts dflt = LPVM_SPAWN_OPTS_INIT;
  const lpvm_spawn_opts *o = opts ? opts : &dflt;
  if (!def) return LPVM_EINVAL;
  int prio = o->prio >= 0 ? o->prio : def->prio;
  int thread = o->thread >= 0 ? o->thread
                              : (def->flags & (LPVM_TASK_START_THREAD |
                                               LPVM_TASK_CANT_SCHEDULE)) != 0;
  int rc = check_spawn(creator, def, o, prio, thread);
  if (rc) return rc;
  lpvm_task *t = task_alloc(def, arg);
  if (!t) return LPVM_ENOMEM;
  t->def = def;
  t->prio = (uint8_t)prio;
  t->worker = (int8_t)sched_worker_index();
  mpsc_init(t);
  lpvm_id nid;
  if ((rc = ptab_alloc(t, (def->flags & LPVM_TASK_PORT_TYPE) != 0, &nid)) != 0) {
    task_free(t);
    return rc;
  }
  int st = def->init ? def->init(t, arg) : LPVM_SETUP;
  if (st < 0 || st > LPVM_IDLE) {
    ptab_unreserve(nid);
    task_free(t);
    return st < 0 ? st : LPVM_EINVAL;
  }
  t->state = (uint8_t)st;
  atomic_store_explicit(&t->sched_word, TS_WAITING | (thread ? TS_THREAD : 0),
                        memory_order_relaxed);
  if (thread && (rc = thread_start(t)) != 0) {
    if (def->terminate) def->terminate(t, term_shutdown, term_shutdown_len);
    ptab_unreserve(nid);
    task_free(t);
    return rc;
  }
  if (o->link) {
    rel_link_add(creator, nid);
    rel_link_add(t, creator->id);
  }
  task_count_born();
  if (id) *id = nid;
  ptab_publish(t);  /* visible: from here on others may signal it */
  /* Schedule it unless a sender already did. */
  if (st != LPVM_WAIT)
    task_claim(t, atomic_load_explicit(&t->sched_word, memory_order_acquire));
  return 0;
}

int lpvm_spawn_task(lpvm_task *creator, const lpvm_task_def *def, void *arg, int link,
                    lpvm_id *id) {
  lpvm_spawn_opts o = LPVM_SPAWN_OPTS_INIT;
  o.link = link;
  return lpvm_spawn_task_opt(creator, def, arg, &o, id);
}

/* ---- one step: RunTask ------------------------------------------------------------ */

static int has_event(const lpvm_task *t) {
  return t->mq_first != NULL && !(t->tflags & TF_DECLINED);
}

static int call_handle_event(lpvm_task *t) {
  uint32_t before = t->mq_gen;
  int st = t->def->handle_event ? t->def->handle_event(t) : (mbox_free_all(t), LPVM_WAIT);
  if (t->mq_gen == before) t->tflags |= TF_DECLINED;  /* took nothing: wait for more */
  return st;
}

static int call_callbacks(lpvm_task *t, int st) {
  if (st == LPVM_SETUP) st = t->def->setup ? t->def->setup(t) : LPVM_WAIT;
  if (st == LPVM_WAIT) {
    if (has_event(t)) st = call_handle_event(t);
    /* A fired timer is honoured in this step even if more mail keeps coming:
    ** handle_event has just looked at everything queued (Erlang's `after`). */
    if (st == LPVM_WAIT && (t->tflags & TF_TIMEOUT)) {
      t->tflags &= ~TF_TIMEOUT;
      t->timeout_mark = NULL;
      st = t->def->handle_timeout ? t->def->handle_timeout(t) : LPVM_WAIT;
    }
  }
  if (st == LPVM_IDLE) st = t->def->idle ? t->def->idle(t) : LPVM_WAIT;
  return (st >= LPVM_WAIT && st <= LPVM_EXIT) ? st : LPVM_WAIT;
}

#define REASON_NOMEM UINT32_MAX   /* reason_len with reason NULL: term_nomem */

static void task_die(lpvm_task *t) {
  const uint8_t *reason = t->reason ? t->reason : term_normal;
  size_t len = t->reason ? t->reason_len : term_normal_len;
  if (!t->reason && t->reason_len == REASON_NOMEM) reason = term_nomem, len = term_nomem_len;
  if (t->def->terminate) t->def->terminate(t, reason, len);
  atomic_fetch_or_explicit(&t->sched_word, TS_DEAD, memory_order_acq_rel);
  task_timer_drop(t);
  names_drop_task(t);
  ets_task_exit(t);   /* before the DOWNs: a monitor sees the tables gone or moved */
  rel_notify_exit(t, reason, len);
  rel_free(t);
  mbox_free_all(t);
  free(t->reason);
  t->reason = NULL;
  t->reason_len = 0;
  task_count_died();
  ptab_close(t);  /* may free t */
}

static int to_queued(lpvm_task *t) {
  atomic_fetch_sub_explicit(&t->sched_word, TS_RUNNING - TS_QUEUED,
                            memory_order_acq_rel);
  return STEP_REQUEUE;
}

/* MIGRATE: hand the task to a private thread, or back to the workers. */
static int migrate(lpvm_task *t) {
  int to_thread = (t->tflags & TF_TO_THREAD) != 0;
  t->tflags &= ~(TF_TO_THREAD | TF_TO_WORKER);
  if (to_thread) {
    atomic_fetch_or_explicit(&t->sched_word, TS_THREAD, memory_order_acq_rel);
    to_queued(t);
    if (thread_start(t) != 0) {  /* no thread: stay on the workers */
      atomic_fetch_and_explicit(&t->sched_word, ~TS_THREAD, memory_order_acq_rel);
      return STEP_REQUEUE;
    }
  } else {
    atomic_fetch_and_explicit(&t->sched_word, ~TS_THREAD, memory_order_acq_rel);
    to_queued(t);
  }
  return STEP_HANDOFF;
}

/* Start running: QUEUED -> RUNNING and clear PENDING before draining. Returns the
** word as it was. */
static uint32_t begin_step(lpvm_task *t) {
  uint32_t cur = atomic_load_explicit(&t->sched_word, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(
      &t->sched_word, &cur, (cur & ~(TS_STATUS | TS_PENDING)) | TS_RUNNING,
      memory_order_seq_cst, memory_order_relaxed)) {   /* before the drain: notify */
  }
  return cur;
}

/* Go back to WAITING unless a signal came in since the step began. */
static int end_step_wait(lpvm_task *t) {
  uint32_t cur = atomic_load_explicit(&t->sched_word, memory_order_relaxed);
  if (!(cur & TS_PENDING) &&
      atomic_compare_exchange_strong_explicit(&t->sched_word, &cur,
                                              (cur & ~TS_STATUS) | TS_WAITING,
                                              memory_order_acq_rel,
                                              memory_order_relaxed))
    return STEP_WAIT;
  return to_queued(t);
}

int task_step(lpvm_task *t) {
  uint32_t word = begin_step(t);
  int more = sig_handle_all(t);
  int st = t->state;
  if (!t->suspended && st != LPVM_EXIT) {
    int cache = !(word & TS_THREAD);   /* on a worker: its steps are bounded */
    if (cache) sig_cache_begin();
    st = call_callbacks(t, st);
    if (cache) sig_cache_end();
    if (t->state == LPVM_EXIT) st = LPVM_EXIT;  /* killed during lpvm_fetch_signals */
  }
  t->state = (uint8_t)st;
  t->reductions++;
  if (st == LPVM_EXIT) {
    task_die(t);
    task_timer_after_step(NULL, STEP_DEAD);   /* the kept task's note, if any */
    return STEP_DEAD;
  }
  /* A receive timer noted in this step, or before it, is kept or started while t is
  ** still this thread's (tasks/task_timer.c): once it is WAITING or QUEUED another
  ** thread may take it. (Only a worker of a VM of one worker notes: elsewhere
  ** task_noted stays NULL.) */
  if (t->tflags & (TF_TO_THREAD | TF_TO_WORKER)) {
    task_timer_after_step(t, STEP_HANDOFF);
    return migrate(t);
  }
  task_timer_after_step(t, STEP_WAIT);
  int runnable = more || (!t->suspended &&
                          (st == LPVM_IDLE ||
                           (st == LPVM_WAIT && (has_event(t) || (t->tflags & TF_TIMEOUT)))));
  return runnable ? to_queued(t) : end_step_wait(t);
}

/* ---- the running task's own business ------------------------------------------------ */

int lpvm_fetch_signals(lpvm_task *self) {
  if (!self) return LPVM_EINVAL;
  if (self->state != LPVM_EXIT) sig_handle_all(self);
  return self->state == LPVM_EXIT;
}

lpvm_id lpvm_self(const lpvm_task *self) { return self ? self->id : 0; }
int lpvm_prio(const lpvm_task *self) { return self ? self->prio : LPVM_EINVAL; }

int lpvm_set_prio(lpvm_task *self, int prio) {
  if (!self || prio < LPVM_PRIO_MAX || prio > LPVM_PRIO_MIN) return LPVM_EINVAL;
  unsigned f = self->def->flags;
  if (prio > self->prio && (f & LPVM_TASK_CANT_LOWER_PRIO)) return LPVM_EPRIO;
  if (prio < self->prio && (f & LPVM_TASK_CANT_RAISE_PRIO)) return LPVM_EPRIO;
  self->prio = (uint8_t)prio;
  return 0;
}

int lpvm_trap_exit(lpvm_task *self, int on) {
  if (!self) return LPVM_EINVAL;
  int old = (self->tflags & TF_TRAP_EXIT) != 0;
  if (on) self->tflags |= TF_TRAP_EXIT;
  else self->tflags &= ~TF_TRAP_EXIT;
  return old;
}

/* A reason that cannot be kept for lack of memory must not leave the task to end
** `normal` (links would not fire, a supervisor would not restart it): it ends with
** the static binary "not enough memory", as the Lua error that usually caused it. */
static int reason_nomem(lpvm_task *self) {
  free(self->reason);
  self->reason = NULL;
  self->reason_len = REASON_NOMEM;
  return LPVM_ENOMEM;
}

int lpvm_set_reason(lpvm_task *self, const uint8_t *term, size_t len) {
  if (!self || !term || len == 0 || len >= UINT32_MAX) return LPVM_EINVAL;
  uint8_t *copy = malloc(len);
  if (!copy) return reason_nomem(self);
  memcpy(copy, term, len);
  free(self->reason);
  self->reason = copy;
  self->reason_len = (uint32_t)len;
  return 0;
}

int lpvm_set_reason_atom(lpvm_task *self, const char *atom) {
  if (!atom) return LPVM_EINVAL;
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_atom(&b, atom);
  int rc = b.err ? (b.err == LPVM_ENOMEM && self ? reason_nomem(self) : b.err)
                 : lpvm_set_reason(self, b.data, b.len);
  lpvm_tbuf_free(&b);
  return rc;
}

int lpvm_on_thread(const lpvm_task *self) {
  return self && (atomic_load_explicit(&((lpvm_task *)self)->sched_word,
                                       memory_order_relaxed) & TS_THREAD) != 0;
}

int lpvm_should_yield(const lpvm_task *self) {
  return self && !lpvm_on_thread(self) && sched_should_yield();
}
