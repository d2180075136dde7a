/*
** memory.c -- how the workers' allocations get memory from the kernel.
**
** On the virtual machines lpvm is measured on, the first touch of a fresh 4 KiB page
** costs 10-15 us: every page fault is a trip through the hypervisor. Populating a
** new mapping in one go (MADV_POPULATE_WRITE) cost under 1 us a page (3.5-5 us on the
** guest measured on 27 November, against 4-7 us a first touch). A VM with a
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
**
** Huge pages: a worker arena's fresh extents of 2 MiB or more are mapped 2 MiB-aligned
** and given MADV_HUGEPAGE, so the kernel backs them with transparent huge pages (its
** `enabled` mode is `madvise` on the machines measured; in `always` the advice changes
** nothing, in `never` it is ignored). Populating or first touching a 2 MiB page costs
** about a quarter of what its 512 small pages cost (zeroing dominates, not the faults):
** ring100k's system time fell from 0.69 to 0.21-0.28 s and create100k's from 0.53-0.67
** to 0.19-0.22 s (docs/performance.md, "Huge pages"). jemalloc's own `thp:always` gave
** no huge pages. On a guest whose balloon reports free pages to its host a huge page
** is memory the host discarded, and its first touch costs more (docs/perf/create.md);
** small pages there were measured no faster in quiet side-by-side runs (create100k,
** spawn+exit and ring100k slower), so the advice stays. LPVM_THP=0 in the
** environment turns it off (LPVM_THP=1: on, the default).
** Purging (dirty decay) splits a huge page when part of it is given back; khugepaged
** may later put one together again, which is the RSS that 4 KiB pages would not have.
** A helper thread of the VM (the state maker, vm/lproc_maker.c) gets an arena of the
** same kind through lpvm_aux_arena.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "lpvm/lpvm.h"
#include "sched/sched.h"

#ifdef LPVM_WITH_JEMALLOC
#include <jemalloc/jemalloc.h>

#define POPULATE_AFTER ((size_t)16 << 20)
#define MEM_GROW_LIMIT ((size_t)4 << 20)
#define MEM_HUGE ((size_t)2 << 20)   /* a transparent huge page (x86-64, arm64 with 4K) */
#define MAX_WORKERS 64
#define AUX_SLOT MAX_WORKERS         /* arena_of's slot for the VM's helper threads */

static extent_hooks_t *dflt;      /* jemalloc's own hooks, which we delegate to */
static extent_hooks_t hooks;
static _Atomic size_t mapped;     /* bytes of fresh extents handed out so far */
static unsigned arena_of[MAX_WORKERS + 1];  /* 0 = not created yet (arena 0 is jemalloc's) */
static bool huge_on;              /* written once, by init_hooks (under the once) */
static pthread_mutex_t arena_mu = PTHREAD_MUTEX_INITIALIZER;

static void *populate_alloc(extent_hooks_t *h, void *new_addr, size_t size,
                            size_t alignment, bool *zero, bool *commit,
                            unsigned arena) {
  (void)h;
  void *p = NULL;
  /* jemalloc asks for its own metadata blocks (base) 2 MiB-aligned, for data extents
  ** page-aligned: metadata is left in small pages (a new arena's first 2 MiB block is
  ** mostly untouched, and would be resident whole as one huge page) */
  bool huge = huge_on && !new_addr && size >= MEM_HUGE && alignment < MEM_HUGE;
  if (huge) p = dflt->alloc(dflt, NULL, size, MEM_HUGE, zero, commit, arena);
  if (!p) {   /* no huge alignment asked for, or none to be had */
    huge = false;
    p = dflt->alloc(dflt, new_addr, size, alignment, zero, commit, arena);
  }
  if (!p || !*commit) return p;
  /* A huge page is faulted in whole at its first touch, for what populating it would
  ** cost, and only once used: populating is for the small pages' part. */
  size_t small_from = 0;
  if (huge && madvise(p, size, MADV_HUGEPAGE) == 0) small_from = size & ~(MEM_HUGE - 1);
  if (atomic_fetch_add_explicit(&mapped, size, memory_order_relaxed) >= POPULATE_AFTER &&
      small_from < size)   /* best effort: old kernels say EINVAL */
    madvise((char *)p + small_from, size - small_from, MADV_POPULATE_WRITE);
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
  const char *e = getenv("LPVM_THP");
  huge_on = !(e && strcmp(e, "0") == 0);
  /* in `never` mode the advice is taken and ignored: the pages are populated as small */
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  char mode[128] = "";
  if (!f || !fgets(mode, sizeof mode, f) || strstr(mode, "[never]")) huge_on = false;
  if (f) fclose(f);
}

/* Bind the calling thread to the arena of slot `index`, creating the arena on first
** use (arenas outlive a VM stop: jemalloc cannot destroy one that still holds memory). */
static void bind_slot(int index) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, init_hooks);
  if (!dflt || index < 0 || index > AUX_SLOT) return;
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

void mem_bind_worker(int index) {
  if (index >= 0 && index < MAX_WORKERS) bind_slot(index);
}

/* lpvm.h: the VM's helper threads share one arena of their own. */
void lpvm_aux_arena(void) { bind_slot(AUX_SLOT); }

/* lpvm.h: reading thread.arena sets the thread up (its tsd, tcache and arena), which is
** what jemalloc's first malloc on a thread does, without a malloc the compiler could
** drop. A failure here is jemalloc's own (it has memory at thread start). */
void lpvm_thread_arena(void) {
  unsigned idx;
  size_t sz = sizeof idx;
  (void)mallctl("thread.arena", &idx, &sz, NULL, 0);
}
#else
void mem_bind_worker(int index) { (void)index; }
void lpvm_aux_arena(void) {}
void lpvm_thread_arena(void) {}
#endif
