/*
** links.c -- a task's relations: links, monitors it holds, monitors on it.
**
** Only the task itself touches these (other tasks reach them through signals), so
** there is no lock. Most tasks have none at all: the record is allocated on first
** use and the arrays grow by doubling.
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

struct task_rel {
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
  if (ids_find(r->links, r->nlinks, other) >= 0) return 0;
  int rc = ids_add(&r->links, &r->nlinks, &r->clinks, other);
  return rc ? rc : 1;
}

int rel_link_del(lpvm_task *t, lpvm_id other) {
  return t->rel ? ids_del(t->rel->links, &t->rel->nlinks, other) : 0;
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

static int mon_add(mon **arr, uint32_t *n, uint32_t *cap, uint64_t ref, lpvm_id id) {
  if (*n == *cap && grow((void **)arr, cap, sizeof(mon))) return LPVM_ENOMEM;
  (*arr)[(*n)++] = (mon){ref, id};
  return 0;
}

/* Drop the record of ref (and, when `only` is non-zero, only if its id is `only`). */
static int mon_del(mon *arr, uint32_t *n, uint64_t ref, lpvm_id *id, lpvm_id only) {
  for (uint32_t i = 0; i < *n; i++)
    if (arr[i].ref == ref && (!only || arr[i].id == only)) {
      if (id) *id = arr[i].id;
      arr[i] = arr[--*n];
      return 1;
    }
  return 0;
}

int rel_mon_add(lpvm_task *t, uint64_t ref, lpvm_id target) {
  struct task_rel *r = rel_get(t);
  return r ? mon_add(&r->mons, &r->nmons, &r->cmons, ref, target) : LPVM_ENOMEM;
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
  return mon_del(t->rel->mons, &t->rel->nmons, ref, target, 0);
}

int rel_watch_add(lpvm_task *t, uint64_t ref, lpvm_id watcher) {
  struct task_rel *r = rel_get(t);
  return r ? mon_add(&r->watch, &r->nwatch, &r->cwatch, ref, watcher) : LPVM_ENOMEM;
}

int rel_watch_del(lpvm_task *t, uint64_t ref, lpvm_id watcher) {
  return t->rel ? mon_del(t->rel->watch, &t->rel->nwatch, ref, NULL, watcher) : 0;
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
  for (uint32_t i = 0; i < r->nwatch; i++) {
    struct lpvm_sig *s = sig_new(SIG_DOWN, t->id, r->watch[i].ref, reason, len);
    if (s && sig_send(r->watch[i].id, s) != 0) free(s);
  }
  r->nwatch = 0;
  for (uint32_t i = 0; i < r->nmons; i++) {
    struct lpvm_sig *s = sig_new(SIG_DEMONITOR, t->id, r->mons[i].ref, NULL, 0);
    if (s && sig_send(r->mons[i].id, s) != 0) free(s);
  }
  r->nmons = 0;
}

void rel_free(lpvm_task *t) {
  struct task_rel *r = t->rel;
  if (!r) return;
  free(r->links);
  free(r->unlinking);
  free(r->mons);
  free(r->watch);
  for (uint32_t i = 0; i < r->nnames; i++) free(r->names[i].name);
  free(r->names);
  free(r);
  t->rel = NULL;
}
