/*
** names.c -- registered names: name -> id, one name per task (Erlang's register/2).
**
** A chained hash table under one rwlock: lookups (send to a name, whereis) share
** the lock, register and unregister are rare. The task's own record remembers its
** name so that its death removes it.
**
** A server called by name looks the same name up for every call (EStone generic:
** ~260 instructions of a call's ~11,000, the rwlock's two locked instructions among
** them). So each thread remembers its last answer with the table's generation, which
** every change (a register, a removal) moves under the write lock: while the
** generation has not moved, the answer stands. A change completes before its writer
** unlocks, and whoever learns of it (a message its writer sent afterwards) reads the
** moved generation, so a send after an unregister it has heard of still fails.
**
** The lock is made once, statically, and never destroyed, and the buckets are NULL
** while no VM runs: a name call from outside a VM (before lpvm_start, after lpvm_stop)
** finds no name (whereis 0, send_name and unregister ENOPROC) instead of walking a
** table that is not there.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/task_int.h"

typedef struct entry {
  struct entry *next;
  lpvm_id id;
  uint32_t hash;
  char name[];
} entry;

static struct {
  entry **b;              /* NULL while no VM runs */
  uint32_t nb, n;
  pthread_rwlock_t lock;  /* static, never destroyed */
  _Atomic uint64_t gen;   /* moved by every change (under the write lock) and init */
} N = {.lock = PTHREAD_RWLOCK_INITIALIZER};

/* A thread's last lookup: the name (up to 47 bytes), its id (0: none) and the
** generation it was read at (0: nothing remembered). Each thread's own. */
typedef struct memo {
  uint64_t gen;
  lpvm_id id;
  uint32_t len;
  char name[48];
} memo;
static _Thread_local memo my_memo;

/* Under the write lock, after a change to the table. */
static void changed(void) {
  atomic_fetch_add_explicit(&N.gen, 1, memory_order_release);
}

static uint32_t hash_str(const char *s) {
  uint32_t h = 2166136261u;  /* FNV-1a */
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
  return h;
}

int names_init(void) {
  entry **b = calloc(256, sizeof(entry *));
  if (!b) return LPVM_ENOMEM;
  pthread_rwlock_wrlock(&N.lock);
  N.nb = 256;
  N.n = 0;
  N.b = b;
  changed();   /* from 1; a runtime started again never meets an old memo */
  pthread_rwlock_unlock(&N.lock);
  return 0;
}

void names_fini(void) {
  pthread_rwlock_wrlock(&N.lock);
  entry **b = N.b;
  uint32_t nb = N.nb;
  N.b = NULL;
  N.nb = N.n = 0;
  changed();
  pthread_rwlock_unlock(&N.lock);
  if (!b) return;
  for (uint32_t i = 0; i < nb; i++)
    for (entry *e = b[i], *nx; e; e = nx) {
      nx = e->next;
      free(e);
    }
  free(b);
}

/* The link to the name's entry, or the empty link where it would go; NULL when no VM
** runs. Under the lock. */
static entry **find(const char *name, uint32_t h) {
  if (!N.b) return NULL;
  entry **pe = &N.b[h & (N.nb - 1)];
  for (; *pe; pe = &(*pe)->next)
    if ((*pe)->hash == h && strcmp((*pe)->name, name) == 0) break;
  return pe;
}

static void rehash(void) {
  uint32_t nb = N.nb * 2;
  entry **b = calloc(nb, sizeof(entry *));
  if (!b) return;  /* keep the old table: longer chains, still correct */
  for (uint32_t i = 0; i < N.nb; i++)
    for (entry *e = N.b[i], *nx; e; e = nx) {
      nx = e->next;
      e->next = b[e->hash & (nb - 1)];
      b[e->hash & (nb - 1)] = e;
    }
  free(N.b);
  N.b = b;
  N.nb = nb;
}

/* A name's length, or 0 when it cannot be one (none, empty, 256 bytes or more). */
static size_t name_len(const char *name) {
  size_t n = name ? strlen(name) : 0;
  return n < 256 ? n : 0;
}

/* The task's own record is updated through a pin so that a task dying at the same
** moment either sees its name (and removes it) or the registration fails. */
int lpvm_register(const char *name, lpvm_id id) {
  if (!name_len(name)) return LPVM_EINVAL;
  lpvm_task *t = ptab_pin(id);
  if (!t) return LPVM_ENOPROC;
  uint32_t h = hash_str(name);
  int rc = 0;
  pthread_rwlock_wrlock(&N.lock);
  entry **pe = find(name, h);
  if (!pe) {
    rc = LPVM_ENOPROC;
  } else if (*pe || t->reg_name) {
    rc = LPVM_EEXIST;
  } else if (ts_status(atomic_load(&t->sched_word)) == TS_DEAD) {
    rc = LPVM_ENOPROC;
  } else {
    size_t len = strlen(name);
    entry *e = malloc(sizeof(entry) + len + 1);
    char *own = strdup(name);
    if (!e || !own) {
      free(e);
      free(own);
      rc = LPVM_ENOMEM;
    } else {
      t->reg_name = own;
      memcpy(e->name, name, len + 1);
      e->id = id;
      e->hash = h;
      e->next = NULL;
      *pe = e;
      if (++N.n > N.nb) rehash();
      changed();
    }
  }
  pthread_rwlock_unlock(&N.lock);
  ptab_unpin(t);
  return rc;
}

/* Remove `name`; with `only` nonzero, only if it maps to that id. */
static lpvm_id remove_name(const char *name, lpvm_id only) {
  uint32_t h = hash_str(name);
  lpvm_id id = 0;
  pthread_rwlock_wrlock(&N.lock);
  entry **pe = find(name, h);
  if (pe && *pe && (!only || (*pe)->id == only)) {
    entry *e = *pe;
    id = e->id;
    *pe = e->next;
    free(e);
    N.n--;
    changed();
  }
  pthread_rwlock_unlock(&N.lock);
  return id;
}

int lpvm_unregister(const char *name) {
  if (!name_len(name)) return LPVM_EINVAL;
  lpvm_id id = remove_name(name, 0);
  if (!id) return LPVM_ENOPROC;
  lpvm_task *t = ptab_pin(id);
  if (t) {
    pthread_rwlock_wrlock(&N.lock);
    if (t->reg_name && strcmp(t->reg_name, name) == 0) {
      free(t->reg_name);
      t->reg_name = NULL;
    }
    pthread_rwlock_unlock(&N.lock);
    ptab_unpin(t);
  }
  return 0;
}

lpvm_id lpvm_whereis(const char *name) {
  size_t len = name_len(name);
  if (!len) return 0;
  memo *mm = &my_memo;
  uint64_t g = atomic_load_explicit(&N.gen, memory_order_acquire);
  if (mm->gen == g && mm->len == len && memcmp(mm->name, name, len) == 0) return mm->id;
  uint32_t h = hash_str(name);
  pthread_rwlock_rdlock(&N.lock);
  entry **pe = find(name, h);
  lpvm_id id = pe && *pe ? (*pe)->id : 0;
  g = atomic_load_explicit(&N.gen, memory_order_relaxed);   /* no change while we hold it */
  pthread_rwlock_unlock(&N.lock);
  if (len < sizeof mm->name) {
    memcpy(mm->name, name, len);
    mm->len = (uint32_t)len, mm->id = id, mm->gen = g;
  }
  return id;
}

void lpvm_foreach_name(void (*fn)(const char *name, lpvm_id id, void *ud), void *ud) {
  if (!fn) return;
  pthread_rwlock_rdlock(&N.lock);
  for (uint32_t i = 0; N.b && i < N.nb; i++)
    for (entry *e = N.b[i]; e; e = e->next) fn(e->name, e->id, ud);
  pthread_rwlock_unlock(&N.lock);
}

void names_drop_task(lpvm_task *t) {
  pthread_rwlock_wrlock(&N.lock);
  char *name = t->reg_name;
  t->reg_name = NULL;
  pthread_rwlock_unlock(&N.lock);
  if (name) remove_name(name, t->id);
  free(name);
}
