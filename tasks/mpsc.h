/*
** mpsc.h -- the signal queue: intrusive multi-producer, single-consumer FIFO.
**
** Dmitry Vyukov's design: a producer swaps itself in as the tail with one atomic
** exchange and then links the old tail to itself; the consumer owns the head. No
** lock, no CAS loop, and signals from one producer stay in the order it pushed them.
** Between a producer's exchange and its link the queue looks shorter to the
** consumer: mpsc_pop then returns NULL although a push is under way. That is
** harmless here because the producer raises the task's PENDING bit only after the
** link, and the task never goes to sleep while PENDING is set (task_sched.h).
*/
#ifndef LPVM_MPSC_H
#define LPVM_MPSC_H

#include <stdatomic.h>
#include <stddef.h>

#include "lpvm/task.h"

static inline void mpsc_init(lpvm_task *t) {
  struct lpvm_sig *stub = &t->sq_stub;
  atomic_store_explicit(&stub->next, NULL, memory_order_relaxed);
  t->sq_head = stub;
  atomic_store_explicit(&t->sq_tail, stub, memory_order_relaxed);
}

static inline void mpsc_push(lpvm_task *t, struct lpvm_sig *s) {
  atomic_store_explicit(&s->next, NULL, memory_order_relaxed);
  /* seq_cst: the sender's next load of the scheduling word must not pass it (notify) */
  struct lpvm_sig *prev = atomic_exchange_explicit(&t->sq_tail, s, memory_order_seq_cst);
  atomic_store_explicit(&prev->next, s, memory_order_release);
}

/* Consumer only. NULL when empty (or when a push is half done: see above). */
static inline struct lpvm_sig *mpsc_pop(lpvm_task *t) {
  struct lpvm_sig *head = t->sq_head;
  struct lpvm_sig *next = atomic_load_explicit(&head->next, memory_order_acquire);
  if (head == &t->sq_stub) {
    if (next == NULL) return NULL;
    t->sq_head = next;
    head = next;
    next = atomic_load_explicit(&head->next, memory_order_acquire);
  }
  if (next != NULL) {
    t->sq_head = next;
    return head;
  }
  if (head != atomic_load_explicit(&t->sq_tail, memory_order_seq_cst))
    return NULL;  /* a producer is between its exchange and its link */
  mpsc_push(t, &t->sq_stub);  /* re-insert the stub so `head` can be detached */
  next = atomic_load_explicit(&head->next, memory_order_acquire);
  if (next != NULL) {
    t->sq_head = next;
    return head;
  }
  return NULL;
}

/* Consumer only: true when nothing is queued (a half-done push counts as queued). */
static inline int mpsc_empty(lpvm_task *t) {
  struct lpvm_sig *head = t->sq_head;
  return head == &t->sq_stub &&
         atomic_load_explicit(&head->next, memory_order_acquire) == NULL &&
         atomic_load_explicit(&t->sq_tail, memory_order_seq_cst) == head;
}

#endif
