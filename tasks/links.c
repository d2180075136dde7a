/*
** links.c -- a task's relations: links, monitors it holds, monitors on it.
**
** Only the task itself touches these (other tasks reach them through signals), so
** there is no lock. Most tasks have none at all: the record is allocated on first
** use and the arrays grow by doubling.
**
** A task can hold a million monitors (Erlang's are in a tree): past HX_FROM entries
** the links, the monitors held and the monitors on the task each get an index, a
** linear-probing hash from the key (id or ref, the first 8 bytes of an entry) to the
** entry's position, so a find, an add and a delete stay a few steps. Without it each
** was a scan: 100,000 monitors then 50,000 demonitors took 1.7 s, the target's
** 50,000 DEMONITOR signals 1.4 s more, a million minutes (the limits probe).
*/
#include <stdlib.h>
#include <string.h>

#include "lpvm/term.h"
#include "tasks/task_int.h"

typedef struct mon {
  uint64_t ref;
  lpvm_id id;
} mon;

/* A monitor this task made by name: its DOWN names {Name, Node}, as Erlang's
** monitor(process, Name) does, instead of the pid that held the name. */
typedef struct mon_name {
  uint64_t ref;
  char *name;       /* malloc'd, NUL-ended */
} mon_name;

/* An index over an array whose entries start with a uint64_t key (see the top):
** slot = position + 1, 0 = empty; cap a power of two, at least twice the entries. */
typedef struct hx {
  uint32_t *slot;
  uint32_t cap;
} hx;

#define HX_FROM 32

struct task_rel {
  hx ilinks, imons, iwatch;   /* NULL slots until an array passes HX_FROM */
  lpvm_id *links;
  lpvm_id *unlinking;   /* local ids unlinked whose UNLINK_ACK has not come (one per unlink) */
  mon *mons;        /* monitors this task holds: ref -> target */
  mon *watch;       /* monitors on this task: ref -> watcher */
  mon_name *names;  /* those of mons made by name: ref -> name */
  uint32_t nlinks, clinks, nunl, cunl, nmons, cmons, nwatch, cwatch, nnames, cnames;
};

static struct task_rel *rel_get(lpvm_task *t) {
  if (!t->rel) t->rel = calloc(1, sizeof(struct task_rel));
  return t->rel;
}

static uint64_t key_at(const void *arr, size_t stride, uint32_t i) {
  uint64_t k;
  memcpy(&k, (const char *)arr + (size_t)i * stride, sizeof k);
  return k;
}

static uint32_t hx_home(const hx *h, uint64_t key) {
  return (uint32_t)((key * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & (h->cap - 1);
}

/* The slot holding position pos (whose key is key); the index has it. */
static uint32_t hx_slot_of(const hx *h, uint64_t key, uint32_t pos) {
  uint32_t i = hx_home(h, key);
  while (h->slot[i] != pos + 1) i = (i + 1) & (h->cap - 1);
  return i;
}

static void hx_put(hx *h, uint64_t key, uint32_t pos) {
  uint32_t i = hx_home(h, key);
  while (h->slot[i]) i = (i + 1) & (h->cap - 1);
  h->slot[i] = pos + 1;
}

/* Index the n entries of arr afresh in cap slots (a power of two > 2n). */
static int hx_build(hx *h, const void *arr, size_t stride, uint32_t n, uint32_t cap) {
  uint32_t *slot = calloc(cap, sizeof *slot);
  if (!slot) return LPVM_ENOMEM;
  free(h->slot);
  h->slot = slot;
  h->cap = cap;
  for (uint32_t i = 0; i < n; i++) hx_put(h, key_at(arr, stride, i), i);
  return 0;
}

/* Entry n (just appended, its array holds n + 1) into the index, made or grown when
** needed. Out of memory the index is dropped: the scans still find everything. */
static void hx_added(hx *h, const void *arr, size_t stride, uint32_t n) {
  if (!h->slot && n + 1 < HX_FROM) return;
  if (!h->slot || 2 * (n + 1) > h->cap) {
    uint32_t cap = 64;
    while (cap < 4 * (n + 1)) cap *= 2;
    if (hx_build(h, arr, stride, n + 1, cap)) {
      free(h->slot);
      h->slot = NULL;
      h->cap = 0;
    }
    return;
  }
  hx_put(h, key_at(arr, stride, n), n);
}

/* Position of the first entry with this key, or -1 (the scan without an index). */
static int hx_find(const hx *h, const void *arr, size_t stride, uint32_t n, uint64_t key) {
  if (!h->slot) {
    for (uint32_t i = 0; i < n; i++)
      if (key_at(arr, stride, i) == key) return (int)i;
    return -1;
  }
  for (uint32_t i = hx_home(h, key); h->slot[i]; i = (i + 1) & (h->cap - 1))
    if (key_at(arr, stride, h->slot[i] - 1) == key) return (int)(h->slot[i] - 1);
  return -1;
}

/* Entry pos leaves (the array is about to move its last entry, n - 1, into pos):
** backward-shift deletion of pos's slot, then the moved entry's slot says pos. */
static void hx_removing(hx *h, const void *arr, size_t stride, uint32_t n, uint32_t pos) {
  if (!h->slot) return;
  uint32_t m = h->cap - 1;
  uint32_t i = hx_slot_of(h, key_at(arr, stride, pos), pos);
  for (uint32_t j = (i + 1) & m; h->slot[j]; j = (j + 1) & m) {
    uint32_t home = hx_home(h, key_at(arr, stride, h->slot[j] - 1));
    /* slot j may move back to i unless its home lies cyclically in (i, j] */
    if (((j - home) & m) >= ((j - i) & m)) {
      h->slot[i] = h->slot[j];
      i = j;
    }
  }
  h->slot[i] = 0;
  if (pos != n - 1) h->slot[hx_slot_of(h, key_at(arr, stride, n - 1), n - 1)] = pos + 1;
}

static void hx_clear(hx *h) {
  free(h->slot);
  h->slot = NULL;
  h->cap = 0;
}

static int grow(void **arr, uint32_t *cap, size_t elem) {
  uint32_t n = *cap ? *cap * 2 : 4;
  void *p = realloc(*arr, n * elem);
  if (!p) return LPVM_ENOMEM;
  *arr = p;
  *cap = n;
  return 0;
}

/* An id list (links, pending unlinks): append, find, remove one (order is not kept). */
static int ids_add(lpvm_id **arr, uint32_t *n, uint32_t *cap, lpvm_id id) {
  if (*n == *cap && grow((void **)arr, cap, sizeof(lpvm_id))) return LPVM_ENOMEM;
  (*arr)[(*n)++] = id;
  return 0;
}

static int ids_find(const lpvm_id *arr, uint32_t n, lpvm_id id) {
  for (uint32_t i = 0; i < n; i++)
    if (arr[i] == id) return (int)i;
  return -1;
}

static int ids_del(lpvm_id *arr, uint32_t *n, lpvm_id id) {
  int i = ids_find(arr, *n, id);
  if (i < 0) return 0;
  arr[i] = arr[--*n];
  return 1;
}

int rel_link_add(lpvm_task *t, lpvm_id other) {
  struct task_rel *r = rel_get(t);
  if (!r) return LPVM_ENOMEM;
  if (hx_find(&r->ilinks, r->links, sizeof *r->links, r->nlinks, other) >= 0) return 0;
  int rc = ids_add(&r->links, &r->nlinks, &r->clinks, other);
  if (!rc) hx_added(&r->ilinks, r->links, sizeof *r->links, r->nlinks - 1);
  return rc ? rc : 1;
}

int rel_link_del(lpvm_task *t, lpvm_id other) {
  struct task_rel *r = t->rel;
  if (!r) return 0;
  int i = hx_find(&r->ilinks, r->links, sizeof *r->links, r->nlinks, other);
  if (i < 0) return 0;
  hx_removing(&r->ilinks, r->links, sizeof *r->links, r->nlinks, (uint32_t)i);
  r->links[i] = r->links[--r->nlinks];
  return 1;
}

/* Erlang's unlink guarantee: once unlink(other) returns, the old link has no effect
** on the caller. Signals between two tasks keep their order, so everything `other`
** sent before it took our UNLINK (a LINK of its setup, the EXIT of its death) comes
** before its UNLINK_ACK: while an unlink is pending the task ignores both. */
int rel_unlinking_add(lpvm_task *t, lpvm_id other) {
  struct task_rel *r = rel_get(t);
  return r ? ids_add(&r->unlinking, &r->nunl, &r->cunl, other) : LPVM_ENOMEM;
}

void rel_unlinking_del(lpvm_task *t, lpvm_id other) {
  if (t->rel) ids_del(t->rel->unlinking, &t->rel->nunl, other);
}

int rel_unlinking(const lpvm_task *t, lpvm_id other) {
  return t->rel && ids_find(t->rel->unlinking, t->rel->nunl, other) >= 0;
}

static int mon_add(hx *h, mon **arr, uint32_t *n, uint32_t *cap, uint64_t ref, lpvm_id id) {
  if (*n == *cap && grow((void **)arr, cap, sizeof(mon))) return LPVM_ENOMEM;
  (*arr)[(*n)++] = (mon){ref, id};
  hx_added(h, *arr, sizeof(mon), *n - 1);
  return 0;
}

/* Drop the record of ref (and, when `only` is non-zero, only if its id is `only`). */
static int mon_del(hx *h, mon *arr, uint32_t *n, uint64_t ref, lpvm_id *id, lpvm_id only) {
  int i = -1;
  if (!h->slot) {
    for (uint32_t k = 0; k < *n && i < 0; k++)
      if (arr[k].ref == ref && (!only || arr[k].id == only)) i = (int)k;
  } else {
    for (uint32_t k = hx_home(h, ref); h->slot[k] && i < 0; k = (k + 1) & (h->cap - 1)) {
      const mon *e = &arr[h->slot[k] - 1];
      if (e->ref == ref && (!only || e->id == only)) i = (int)(h->slot[k] - 1);
    }
  }
  if (i < 0) return 0;
  if (id) *id = arr[i].id;
  hx_removing(h, arr, sizeof(mon), *n, (uint32_t)i);
  arr[i] = arr[--*n];
  return 1;
}

int rel_mon_add(lpvm_task *t, uint64_t ref, lpvm_id target) {
  struct task_rel *r = rel_get(t);
  return r ? mon_add(&r->imons, &r->mons, &r->nmons, &r->cmons, ref, target) : LPVM_ENOMEM;
}

/* Note that monitor ref was made by `name` (len bytes, no NUL). */
int rel_mon_name_add(lpvm_task *t, uint64_t ref, const char *name, size_t len) {
  struct task_rel *r = rel_get(t);
  if (!r) return LPVM_ENOMEM;
  if (r->nnames == r->cnames && grow((void **)&r->names, &r->cnames, sizeof(mon_name)))
    return LPVM_ENOMEM;
  char *copy = malloc(len + 1);
  if (!copy) return LPVM_ENOMEM;
  memcpy(copy, name, len);
  copy[len] = 0;
  r->names[r->nnames++] = (mon_name){ref, copy};
  return 0;
}

/* The name monitor ref was made by, taken out of the record (the caller frees it);
** NULL for a monitor by pid. */
char *rel_mon_name_take(lpvm_task *t, uint64_t ref) {
  struct task_rel *r = t->rel;
  if (!r) return NULL;
  for (uint32_t i = 0; i < r->nnames; i++)
    if (r->names[i].ref == ref) {
      char *name = r->names[i].name;
      r->names[i] = r->names[--r->nnames];
      return name;
    }
  return NULL;
}

int rel_mon_del(lpvm_task *t, uint64_t ref, lpvm_id *target) {
  if (!t->rel) return 0;
  if (t->rel->nnames) free(rel_mon_name_take(t, ref));
  return mon_del(&t->rel->imons, t->rel->mons, &t->rel->nmons, ref, target, 0);
}

int rel_watch_add(lpvm_task *t, uint64_t ref, lpvm_id watcher) {
  struct task_rel *r = rel_get(t);
  return r ? mon_add(&r->iwatch, &r->watch, &r->nwatch, &r->cwatch, ref, watcher)
           : LPVM_ENOMEM;
}

int rel_watch_del(lpvm_task *t, uint64_t ref, lpvm_id watcher) {
  return t->rel ? mon_del(&t->rel->iwatch, t->rel->watch, &t->rel->nwatch, ref, NULL, watcher)
                : 0;
}

/* The task is dying: tell everyone who holds a relation with it. */
void rel_notify_exit(lpvm_task *t, const uint8_t *reason, size_t len) {
  struct task_rel *r = t->rel;
  if (!r) return;
  for (uint32_t i = 0; i < r->nlinks; i++) {
    struct lpvm_sig *s = sig_new(SIG_EXIT_LINK, t->id, 0, reason, len);
    if (s && sig_send(r->links[i], s) != 0) free(s);
  }
  r->nlinks = 0;
  hx_clear(&r->ilinks);
  for (uint32_t i = 0; i < r->nwatch; i++) {
    struct lpvm_sig *s = sig_new(SIG_DOWN, t->id, r->watch[i].ref, reason, len);
    if (s && sig_send(r->watch[i].id, s) != 0) free(s);
  }
  r->nwatch = 0;
  hx_clear(&r->iwatch);
  for (uint32_t i = 0; i < r->nmons; i++) {
    struct lpvm_sig *s = sig_new(SIG_DEMONITOR, t->id, r->mons[i].ref, NULL, 0);
    if (s && sig_send(r->mons[i].id, s) != 0) free(s);
  }
  r->nmons = 0;
  hx_clear(&r->imons);
}

void rel_free(lpvm_task *t) {
  struct task_rel *r = t->rel;
  if (!r) return;
  hx_clear(&r->ilinks);
  hx_clear(&r->imons);
  hx_clear(&r->iwatch);
  free(r->links);
  free(r->unlinking);
  free(r->mons);
  free(r->watch);
  for (uint32_t i = 0; i < r->nnames; i++) free(r->names[i].name);
  free(r->names);
  free(r);
  t->rel = NULL;
}
