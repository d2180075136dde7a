/*
** ets_mem.c -- where the objects of the tables live: an allocator arena of their own,
** in transparent huge pages.
**
** A lookup or an insert in a table far bigger than the caches misses on the bucket
** and on the object, and on a virtual machine each such miss at a random place in a
** big table is also a TLB miss whose page walk (nested: the guest's tables and the
** host's) costs about as much as the miss itself. With 4 KiB pages a million objects
** of 64 bytes spread over 16,000 pages, more than the TLB holds; in 2 MiB pages they
** are 32. So the objects come from a jemalloc arena of ETS's own whose fresh extents
** of 2 MiB or more are mapped 2 MiB-aligned and given MADV_HUGEPAGE, as the workers'
** arenas are (sched/memory.c; the same LPVM_THP=0 turns it off). The workers move to
** those only once the VM holds many tasks, and a program with one big table and few
** processes would otherwise keep it in small pages.
**
** Objects are allocated through the calling thread's cache as usual and freed with
** free() as before (jemalloc finds any block's arena): a block freed into a thread's
** cache may serve that thread's next allocation of its size, ETS's or not, which costs
** nothing and only mixes a few blocks. Without jemalloc (the sanitizer builds) this
** is malloc.
*/
#include <stddef.h>
#include <stdlib.h>

#include "tasks/ets_int.h"

#ifdef LPVM_WITH_JEMALLOC
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include <jemalloc/jemalloc.h>

/* Weak: luaproc.so links this file without jemalloc (vm/CMakeLists.txt), where
** mallctl is a stub that fails, so no arena is made and mallocx is never called;
** a weak reference lets the module load with the symbol absent. */
#pragma weak mallocx

#define HUGE_PAGE ((size_t)2 << 20)

static extent_hooks_t *dflt;   /* jemalloc's own hooks, which ours delegate to */
static extent_hooks_t hooks;
static int mem_flags;          /* MALLOCX_ARENA(ours), or 0: none (written once) */

/* A fresh extent: 2 MiB-aligned and advised when it is at least a huge page (data
** extents are asked for page-aligned; jemalloc's metadata is left as asked). */
static void *huge_alloc(extent_hooks_t *h, void *new_addr, size_t size, size_t alignment,
                        bool *zero, bool *commit, unsigned arena) {
  (void)h;
  void *p = NULL;
  bool huge = !new_addr && size >= HUGE_PAGE && alignment < HUGE_PAGE;
  if (huge) p = dflt->alloc(dflt, NULL, size, HUGE_PAGE, zero, commit, arena);
  if (!p) {
    huge = false;
    p = dflt->alloc(dflt, new_addr, size, alignment, zero, commit, arena);
  }
  if (p && huge && *commit)
    madvise(p, size & ~(HUGE_PAGE - 1), MADV_HUGEPAGE);   /* best effort */
  return p;
}

static void make_arena(void) {
  const char *e = getenv("LPVM_THP");
  if (e && strcmp(e, "0") == 0) return;
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  char mode[128] = "";
  bool never = !f || !fgets(mode, sizeof mode, f) || strstr(mode, "[never]");
  if (f) fclose(f);
  if (never || !mallocx) return;   /* the default arenas, as before */
  size_t sz = sizeof dflt;
  if (mallctl("arena.0.extent_hooks", &dflt, &sz, NULL, 0) != 0) return;
  hooks = *dflt;
  hooks.alloc = huge_alloc;
  unsigned idx;
  extent_hooks_t *mine = &hooks;
  sz = sizeof idx;
  if (mallctl("arenas.create", &idx, &sz, &mine, sizeof mine) == 0)
    mem_flags = MALLOCX_ARENA(idx);
}

/* Once per process: an arena outlives a VM stop (jemalloc cannot destroy one that
** still holds memory), and the next VM uses it again. */
void ets_mem_init(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, make_arena);
}

void *ets_mem_alloc(size_t size) {
  return mem_flags ? mallocx(size, mem_flags) : malloc(size);
}
#else
void ets_mem_init(void) {}
void *ets_mem_alloc(size_t size) { return malloc(size); }
#endif
