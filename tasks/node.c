/*
** node.c -- the node table: this node's name and creation, the entries of the
** nodes remote pids belong to, and the router hook for signals to remote ids.
**
** Entries are appended under a mutex and never move or go away (an id names its
** entry by index for the VM's life), so node_get reads them without a lock once the
** count published with release covers them. Lookups by name go through a small
** open-addressing hash, also under the mutex: they happen when a pid of another
** node is decoded, never on the local message path.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/node.h"
#include "tasks/term_int.h"

#define HASH_SIZE 32768           /* > 2 * NODE_MAX: probes stay short */

static struct {
  pthread_mutex_t mu;
  node_desc *entries[NODE_MAX + 1];   /* [0] unused: index 0 is never valid */
  _Atomic uint32_t count;             /* entries [1, count] exist */
  uint16_t hash[HASH_SIZE];           /* entry index, 0 = empty */
} N = { .mu = PTHREAD_MUTEX_INITIALIZER };

static node_desc nonode;
static _Atomic(const node_desc *) self_desc;
/* Every name this node has had: an encoder may still read a replaced one, so they
** are freed only by node_fini, when no task is left. Guarded by N.mu. */
static node_desc **retired;
static size_t nretired;
static _Atomic node_router_fn router;

static void desc_fill(node_desc *d, const char *name, size_t len, uint32_t creation) {
  d->creation = creation;
  d->len = (uint8_t)len;
  d->atom[0] = TAG_SMALL_ATOM_UTF8;
  d->atom[1] = (uint8_t)len;
  memcpy(d->atom + 2, name, len);
  memcpy(d->name, name, len);
  d->name[len] = 0;
  atomic_init(&d->conn, 0);
}

static void init_nonode(void) {
  desc_fill(&nonode, TERM_NODE, TERM_NODE_LEN, TERM_CREATION);
  atomic_store_explicit(&self_desc, &nonode, memory_order_release);
}

const node_desc *node_self(void) {
  const node_desc *d = atomic_load_explicit(&self_desc, memory_order_acquire);
  if (d) return d;
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, init_nonode);
  return atomic_load_explicit(&self_desc, memory_order_acquire);
}

/* The old descriptor is kept (an encoder may be reading it): one per start. */
int node_set_self(const char *name, size_t len, uint32_t creation) {
  (void)node_self();
  if (!name) {
    atomic_store_explicit(&self_desc, &nonode, memory_order_release);
    return 0;
  }
  if (len == 0 || len > NODE_NAME_MAX || !memchr(name, '@', len)) return LPVM_EINVAL;
  node_desc *d = malloc(sizeof *d);
  pthread_mutex_lock(&N.mu);
  node_desc **r = d ? realloc(retired, (nretired + 1) * sizeof *r) : NULL;
  if (r) (retired = r)[nretired++] = d;
  pthread_mutex_unlock(&N.mu);
  if (!r) {
    free(d);
    return LPVM_ENOMEM;
  }
  desc_fill(d, name, len, creation);
  atomic_store_explicit(&self_desc, d, memory_order_release);
  return 0;
}

void node_fini(void) {
  (void)node_self();
  atomic_store_explicit(&self_desc, &nonode, memory_order_release);
  pthread_mutex_lock(&N.mu);
  for (size_t i = 0; i < nretired; i++) free(retired[i]);
  free(retired);
  retired = NULL;
  nretired = 0;
  pthread_mutex_unlock(&N.mu);
}

int node_is_self(const char *name, size_t len, uint32_t creation) {
  if (len == TERM_NODE_LEN && memcmp(name, TERM_NODE, TERM_NODE_LEN) == 0) return 1;
  const node_desc *d = node_self();
  return len == d->len && memcmp(name, d->name, len) == 0 &&
         (creation == UINT32_MAX || creation == d->creation);
}

static uint32_t hash_of(const char *name, size_t len, uint32_t creation) {
  uint32_t h = 2166136261u ^ creation;
  for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)name[i]) * 16777619u;
  return h;
}

int node_intern(const char *name, size_t len, uint32_t creation) {
  if (len == 0 || len > NODE_NAME_MAX) return LPVM_EINVAL;
  pthread_mutex_lock(&N.mu);
  uint32_t h = hash_of(name, len, creation) & (HASH_SIZE - 1);
  int rc;
  for (;;) {
    uint16_t i = N.hash[h];
    if (i == 0) break;
    node_desc *d = N.entries[i];
    if (d->creation == creation && d->len == len && memcmp(d->name, name, len) == 0) {
      pthread_mutex_unlock(&N.mu);
      return i;
    }
    h = (h + 1) & (HASH_SIZE - 1);
  }
  uint32_t n = atomic_load_explicit(&N.count, memory_order_relaxed);
  node_desc *d = n < NODE_MAX ? malloc(sizeof *d) : NULL;
  if (!d) {
    rc = n < NODE_MAX ? LPVM_ENOMEM : LPVM_ELIMIT;
  } else {
    desc_fill(d, name, len, creation);
    N.entries[n + 1] = d;
    N.hash[h] = (uint16_t)(n + 1);
    atomic_store_explicit(&N.count, n + 1, memory_order_release);
    rc = (int)(n + 1);
  }
  pthread_mutex_unlock(&N.mu);
  return rc;
}

node_desc *node_get(uint32_t idx) {
  if (idx == 0 || idx > atomic_load_explicit(&N.count, memory_order_acquire))
    return NULL;
  return N.entries[idx];
}

void node_foreach_named(const char *name, size_t len,
                        void (*fn)(uint32_t idx, node_desc *d, void *ud), void *ud) {
  uint32_t n = atomic_load_explicit(&N.count, memory_order_acquire);
  for (uint32_t i = 1; i <= n; i++) {
    node_desc *d = N.entries[i];
    if (d->len == len && memcmp(d->name, name, len) == 0) fn(i, d, ud);
  }
}

lpvm_id node_remote_pid(uint32_t idx, uint32_t num, uint32_t serial) {
  if (idx == 0 || idx > NODE_MAX || num > 0xffffff || serial > 0xffffff) return 0;
  return LPVM_ID_REMOTE_BIT | (lpvm_id)idx << 48 | (lpvm_id)serial << 24 | num;
}

void node_set_router(node_router_fn fn) {
  atomic_store_explicit(&router, fn, memory_order_release);
}

int node_route(lpvm_id to, struct lpvm_sig *s, uint32_t *queued) {
  node_router_fn fn = atomic_load_explicit(&router, memory_order_acquire);
  return fn ? fn(to, s, queued) : LPVM_ENOPROC;
}
