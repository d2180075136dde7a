/*
** luaproc_chan.c -- luaproc's named channels as core objects.
**
** A channel is a name and two FIFO queues of blocked parties: senders (each holding
** its encoded values) and receivers. At most one queue is non-empty: an arriving
** sender takes the oldest receiver if there is one, else it queues; an arriving
** receiver likewise. The match happens under the table lock, in O(1); the delivery
** (an lpvm message to a process, a condition-variable handoff to the host) happens
** after the lock is released. A channel is not a task: a rendezvous costs no
** scheduling of a third party, only the one message that wakes the blocked side
** (plus, when the sender was the one waiting, a one-byte "taken" to release it).
**
** One mutex guards the table and every queue: each critical section is a hash
** lookup and a couple of list operations, never an allocation of a message nor a
** copy of one.
*/
#include <stdlib.h>
#include <string.h>

#include "vm/luaproc.h"

typedef struct chan {
  struct chan *next;            /* hash chain */
  luaproc_waiter *snd, *snd_last;
  luaproc_waiter *rcv, *rcv_last;
  size_t len;
  char name[];
} chan;

static struct {
  pthread_mutex_t mu;
  chan **bucket;
  size_t nbucket, n;
} T = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

static const uint8_t taken[1] = {131};   /* a sender's "your message was taken" */

/* ---- the table ---------------------------------------------------------------------- */

static size_t hash(const char *s, size_t len) {
  size_t h = 1469598103934665603u;   /* FNV-1a */
  for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211u;
  return h;
}

static chan **slot(const char *name, size_t len) {
  if (T.nbucket == 0) return NULL;
  chan **c = &T.bucket[hash(name, len) & (T.nbucket - 1)];
  while (*c && ((*c)->len != len || memcmp((*c)->name, name, len) != 0)) c = &(*c)->next;
  return c;
}

static chan *find(const char *name) {
  chan **c = slot(name, strlen(name));
  return c ? *c : NULL;
}

static int grow(void) {
  size_t n = T.nbucket ? T.nbucket * 2 : 64;
  chan **b = calloc(n, sizeof *b);
  if (!b) return -1;
  for (size_t i = 0; i < T.nbucket; i++)
    for (chan *c = T.bucket[i], *next; c; c = next) {
      next = c->next;
      chan **head = &b[hash(c->name, c->len) & (n - 1)];
      c->next = *head;
      *head = c;
    }
  free(T.bucket);
  T.bucket = b;
  T.nbucket = n;
  return 0;
}

int luaproc_chan_new(const char *name) {
  size_t len = strlen(name);
  chan *c = calloc(1, sizeof *c + len + 1);
  if (!c) return LUAPROC_NOMEM;
  memcpy(c->name, name, len + 1);
  c->len = len;
  int rc = LUAPROC_OK;
  pthread_mutex_lock(&T.mu);
  chan **s = slot(name, len);
  if (s && *s) rc = LUAPROC_EXISTS;
  else if (T.n >= T.nbucket && grow() != 0) rc = LUAPROC_NOMEM;
  if (rc == LUAPROC_OK) {
    chan **head = &T.bucket[hash(name, len) & (T.nbucket - 1)];
    c->next = *head;
    *head = c;
    T.n++;
  }
  pthread_mutex_unlock(&T.mu);
  if (rc != LUAPROC_OK) free(c);
  return rc;
}

/* ---- queues --------------------------------------------------------------------------- */

static void push(luaproc_waiter **first, luaproc_waiter **last, luaproc_waiter *w) {
  w->next = NULL;
  if (*last) (*last)->next = w;
  else *first = w;
  *last = w;
}

static luaproc_waiter *pop(luaproc_waiter **first, luaproc_waiter **last) {
  luaproc_waiter *w = *first;
  if (w) {
    *first = w->next;
    if (!*first) *last = NULL;
  }
  return w;
}

/* Wake a list of waiters with an error; free them and the senders' messages. */
static void fail_all(luaproc_waiter *w) {
  while (w) {
    luaproc_waiter *next = w->next;
    if (w->msg) lpvm_msg_free(w->msg);
    luaproc_wake(w, NULL);
    free(w);
    w = next;
  }
}

static void fail_chan(chan *c) {
  fail_all(c->snd);
  fail_all(c->rcv);
  free(c);
}

int luaproc_chan_del(const char *name) {
  pthread_mutex_lock(&T.mu);
  chan **s = slot(name, strlen(name));
  chan *c = s ? *s : NULL;
  if (c) {
    *s = c->next;
    T.n--;
  }
  pthread_mutex_unlock(&T.mu);
  if (!c) return LUAPROC_NOCHAN;
  fail_chan(c);
  return LUAPROC_OK;
}

/* ---- the rendezvous ---------------------------------------------------------------------- */

int luaproc_chan_send(const char *name, lpvm_msg *m, luaproc_waiter *w) {
  luaproc_waiter *r = NULL;
  int rc = LUAPROC_WAITING;
  pthread_mutex_lock(&T.mu);
  chan *c = find(name);
  if (!c) rc = LUAPROC_NOCHAN;
  else if ((r = pop(&c->rcv, &c->rcv_last)) != NULL) rc = LUAPROC_OK;
  else if (!w) rc = LUAPROC_NOMEM;
  else {
    w->msg = m;
    push(&c->snd, &c->snd_last, w);
  }
  pthread_mutex_unlock(&T.mu);
  if (rc == LUAPROC_WAITING) return rc;
  free(w);
  if (rc == LUAPROC_OK) {
    luaproc_wake(r, m);
    free(r);
  } else {
    lpvm_msg_free(m);
  }
  return rc;
}

int luaproc_chan_recv(const char *name, int async, lpvm_msg **m, luaproc_waiter *w) {
  luaproc_waiter *s = NULL;
  int rc = LUAPROC_WAITING;
  pthread_mutex_lock(&T.mu);
  chan *c = find(name);
  if (!c) rc = LUAPROC_NOCHAN;
  else if ((s = pop(&c->snd, &c->snd_last)) != NULL) rc = LUAPROC_OK;
  else if (async) rc = LUAPROC_EMPTY;
  else if (!w) rc = LUAPROC_NOMEM;
  else push(&c->rcv, &c->rcv_last, w);
  pthread_mutex_unlock(&T.mu);
  if (rc == LUAPROC_WAITING) return rc;
  free(w);
  if (rc == LUAPROC_OK) {
    *m = s->msg;
    luaproc_wake(s, luaproc_msg(taken, sizeof taken));
    free(s);
  }
  return rc;
}

void luaproc_chan_clear(void) {
  pthread_mutex_lock(&T.mu);
  chan **b = T.bucket;
  size_t n = T.nbucket;
  T.bucket = NULL;
  T.nbucket = T.n = 0;
  pthread_mutex_unlock(&T.mu);
  for (size_t i = 0; i < n; i++)
    for (chan *c = b[i], *next; c; c = next) {
      next = c->next;
      fail_chan(c);
    }
  free(b);
}
