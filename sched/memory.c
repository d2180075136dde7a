/*
** memory.c -- how the workers' allocations get memory from the kernel.
**
** On the virtual machines lpvm is measured on, the first touch of a fresh 4 KiB page
** costs 10-15 us: every page fault is a trip through the hypervisor. Populating a
** new mapping in one go (MADV_POPULATE_WRITE) costs under 1 us a page. A VM with a
** million processes touches gigabytes of new memory, so this decides whether creating
** them takes seconds or tens of seconds.
**
** With jemalloc as the process allocator, each worker thread gets an arena of its
** own whose extent hook populates fresh extents; everything else (reuse, splitting,
** merging, purging) is jemalloc's default hook, and the thread cache works as usual.
** Setting this up touches memory (a new arena's metadata), which costs a small program
** milliseconds, so the workers move to their arenas only once the VM holds
** MEM_BIG_VM tasks (sched.c), and populating starts once they have taken
** POPULATE_AFTER bytes of fresh extents there. Other threads (the embedding program,
** timers, private threads) keep jemalloc's default arenas. Without jemalloc
** (sanitizer builds) this does nothing.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>

#include "sched/sched.h"

#ifdef LPVM_WITH_JEMALLOC
#include <jemalloc/jemalloc.h>

#define POPULATE_AFTER ((size_t)16 << 20)
#define MEM_GROW_LIMIT ((size_t)4 << 20)
#define MAX_WORKERS 64

static extent_hooks_t *dflt;      /* jemalloc's own hooks, which we delegate to */
static extent_hooks_t hooks;
static _Atomic size_t mapped;     /* bytes of fresh extents handed out so far */
static unsigned arena_of[MAX_WORKERS];  /* 0 = not created yet (arena 0 is jemalloc's) */
static pthread_mutex_t arena_mu = PTHREAD_MUTEX_INITIALIZER;

static void *populate_alloc(extent_hooks_t *h, void *new_addr, size_t size,
                            size_t alignment, bool *zero, bool *commit,
                            unsigned arena) {
  (void)h;
  void *p = dflt->alloc(dflt, new_addr, size, alignment, zero, commit, arena);
  if (p && *commit &&
      atomic_fetch_add_explicit(&mapped, size, memory_order_relaxed) >= POPULATE_AFTER)
    madvise(p, size, MADV_POPULATE_WRITE);  /* best effort: old kernels say EINVAL */
  return p;
}

static void init_hooks(void) {
  size_t sz = sizeof dflt;
  if (mallctl("arena.0.extent_hooks", &dflt, &sz, NULL, 0) != 0) {
    dflt = NULL;
    return;
  }
  hooks = *dflt;
  hooks.alloc = populate_alloc;
}

/* Bind the calling worker to its arena, creating the arena on first use (arenas
** outlive a VM stop: jemalloc cannot destroy one that still holds memory). */
void mem_bind_worker(int index) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, init_hooks);
  if (!dflt || index < 0 || index >= MAX_WORKERS) return;
  pthread_mutex_lock(&arena_mu);
  if (arena_of[index] == 0) {
    unsigned idx;
    size_t sz = sizeof idx;
    extent_hooks_t *mine = &hooks;
    if (mallctl("arenas.create", &idx, &sz, &mine, sizeof mine) == 0) {
      arena_of[index] = idx;
      /* jemalloc maps ever larger extents (x1.5 to 2 each time, up to gigabytes): with
      ** the whole extent populated, the unused tail of the last one counted in the RSS
      ** (500 B a process at 100,000 idle ones, mem100k). Capped, the populated tail is
      ** at most MEM_GROW_LIMIT per worker. */
      char name[64];
      size_t limit = MEM_GROW_LIMIT;
      snprintf(name, sizeof name, "arena.%u.retain_grow_limit", idx);
      mallctl(name, NULL, NULL, &limit, sizeof limit);   /* best effort */
    }
  }
  unsigned idx = arena_of[index];
  pthread_mutex_unlock(&arena_mu);
  if (idx) mallctl("thread.arena", NULL, NULL, &idx, sizeof idx);
}
#else
void mem_bind_worker(int index) { (void)index; }
#endif
