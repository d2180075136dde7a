/*
** mailbox.c -- messages and the message queue.
**
** A message is a signal of kind MESSAGE with its term bytes in the same allocation,
** built by the sender and handed over whole (the thesis's "temporary heap"): one
** malloc and no copy between send and receive. Only the owning task touches its
** message queue, a doubly-linked list so selective receive can take from the middle.
** Every message is counted from the moment it is pushed until it is taken: senders
** read the count, memory limits weigh the bytes. Senders add to mq_sent/mq_bytes_in
** (one atomic add each), the receiver to its own mq_taken/mq_bytes_out with plain
** stores: what is queued is the difference, so a message costs two read-modify-writes,
** not four.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/binary.h"
#include "tasks/task_int.h"
#include "tasks/term_int.h"

static lpvm_msg *msg_init(lpvm_msg *m, size_t len) {
  m->prev = NULL;
  m->from = 0;
  m->ref = 0;
  m->kind = SIG_MESSAGE;
  m->flags = 0;
  m->len = (uint32_t)len;
  return m;
}

lpvm_msg *mbox_msg_alloc(size_t len, size_t extra) {
  if (len > UINT32_MAX || extra > SIZE_MAX - sizeof(lpvm_msg) - len) return NULL;
  lpvm_msg *m = malloc(sizeof(lpvm_msg) + len + extra);
  return m ? msg_init(m, len) : NULL;
}

lpvm_msg *lpvm_msg_new(size_t len) { return mbox_msg_alloc(len, 0); }

lpvm_msg *lpvm_msg_init(void *block, size_t len) {
  return block && len <= UINT32_MAX ? msg_init(block, len) : NULL;
}

/* Built in place: the builder's buffer is the whole block, header first, so a put that
** grows it reallocates header and term together, and nothing is copied at the end.
** A message of shared binaries is copied once more (lpvm_msg_new_term appends their
** table): the positions the builder recorded count the header, which is taken off. */
void lpvm_msg_build(lpvm_tbuf *b, size_t hint) {
  size_t at = sizeof(lpvm_msg);
  b->len = b->cap = 0;
  b->err = 0;
  b->data = hint <= SIZE_MAX - at - 1 ? malloc(at + 1 + hint) : NULL;
  if (!b->data) {
    b->err = LPVM_ENOMEM;   /* cap == len: every put now fails (term_enc.c) */
    return;
  }
  b->data[at] = TERM_VERSION;
  b->len = at + 1;
  b->cap = at + 1 + hint;
}

lpvm_msg *lpvm_msg_built(lpvm_tbuf *b, lpvm_binrefs *refs) {
  size_t at = sizeof(lpvm_msg), len = b->len - at;
  lpvm_msg *m = NULL;
  if (b->err || !b->data || b->len - at > UINT32_MAX) {
    free(b->data);
    if (!b->err) b->err = LPVM_ENOMEM;
  } else if (refs && refs->n) {
    for (uint32_t i = 0; i < refs->n; i++) refs->v[i].pos -= (uint32_t)at;
    m = lpvm_msg_new_term(b->data + at, len, refs);
    free(b->data);
    if (!m) b->err = LPVM_ENOMEM;
  } else {
    if (b->cap - b->len > 256 && b->cap - b->len > len / 4) {   /* grew far past it */
      uint8_t *d = realloc(b->data, b->len);
      if (d) b->data = d;
    }
    m = msg_init((lpvm_msg *)(void *)b->data, len);
  }
  if (refs) refs->n = 0;
  b->data = NULL;
  b->len = b->cap = 0;
  return m;
}

uint8_t *lpvm_msg_data(lpvm_msg *m) { return (uint8_t *)(m + 1); }
size_t lpvm_msg_len(const lpvm_msg *m) { return m->len; }
lpvm_id lpvm_msg_from(const lpvm_msg *m) { return m->from; }
/* Every message with shared binaries ends here (or in mbox_free_all): the one place
** they (binary.c) are released. One without is only its block, which a taker may
** keep instead (lpvm_msg_init; vm/lmod_msg.c keeps it in its thread's small lists). */
void lpvm_msg_free(lpvm_msg *m) {
  if (m && (m->flags & LPVM_MSGF_BINS)) bin_msg_release(m);
  free(m);
}

/* What the sender sees: its own message counts, and another sender's may have been
** added and taken since its add (the difference then falls short): at least 1. */
uint32_t mbox_count_in(lpvm_task *t, const struct lpvm_sig *m) {
  atomic_fetch_add_explicit(&t->mq_bytes_in, m->len, memory_order_relaxed);
  uint32_t sent = atomic_fetch_add_explicit(&t->mq_sent, 1, memory_order_relaxed) + 1;
  int32_t q = (int32_t)(sent - atomic_load_explicit(&t->mq_taken, memory_order_relaxed));
  return q > 0 ? (uint32_t)q : 1;
}

/* Taken first: it never passes the sent count, so read against a later sent the
** difference is >= 0 (clamped all the same: the two loads are relaxed). */
size_t lpvm_queued_msgs(const lpvm_task *t) {
  lpvm_task *w = (lpvm_task *)t;
  uint32_t taken = atomic_load_explicit(&w->mq_taken, memory_order_relaxed);
  int32_t q = (int32_t)(atomic_load_explicit(&w->mq_sent, memory_order_relaxed) - taken);
  return q > 0 ? (size_t)q : 0;
}

size_t lpvm_queued_bytes(const lpvm_task *t) {
  lpvm_task *w = (lpvm_task *)t;
  uint64_t out = atomic_load_explicit(&w->mq_bytes_out, memory_order_relaxed);
  int64_t q = (int64_t)(atomic_load_explicit(&w->mq_bytes_in, memory_order_relaxed) - out);
  return q > 0 ? (size_t)q : 0;
}

void mbox_append(lpvm_task *t, struct lpvm_sig *m) {
  atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
  m->prev = t->mq_last;
  if (t->mq_last) atomic_store_explicit(&t->mq_last->next, m, memory_order_relaxed);
  else t->mq_first = m;
  t->mq_last = m;
  t->mq_len++;
  t->tflags &= ~TF_DECLINED;
}

void lpvm_mbox_take(lpvm_task *t, lpvm_msg *m) {
  if (m == t->timeout_mark) t->timeout_mark = m->prev;  /* the boundary stays put */
  lpvm_msg *next = atomic_load_explicit(&m->next, memory_order_relaxed);
  if (m->prev) atomic_store_explicit(&m->prev->next, next, memory_order_relaxed);
  else t->mq_first = next;
  if (next) next->prev = m->prev;
  else t->mq_last = m->prev;
  m->prev = NULL;
  atomic_store_explicit(&m->next, NULL, memory_order_relaxed);
  t->mq_len--;
  t->mq_gen++;
  /* the task's own counters: a load and a store, no lock prefix */
  atomic_store_explicit(&t->mq_taken,
                        atomic_load_explicit(&t->mq_taken, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  atomic_store_explicit(&t->mq_bytes_out,
                        atomic_load_explicit(&t->mq_bytes_out, memory_order_relaxed) + m->len,
                        memory_order_relaxed);
}

lpvm_msg *lpvm_recv(lpvm_task *t) {
  lpvm_msg *m = t->mq_first;
  if (m) lpvm_mbox_take(t, m);
  return m;
}

lpvm_msg *lpvm_mbox_next(lpvm_task *t, lpvm_msg *m) {
  return m ? atomic_load_explicit(&m->next, memory_order_relaxed) : t->mq_first;
}

size_t lpvm_mbox_len(const lpvm_task *t) { return t->mq_len; }

void mbox_free_all(lpvm_task *t) {
  lpvm_msg *m;
  while ((m = lpvm_recv(t)) != NULL) lpvm_msg_free(m);
}
