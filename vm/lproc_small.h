/*
** lproc_small.h -- free lists of small blocks for the Lua states' allocator, one set
** per thread (the fast paths, inline in lproc_alloc; the rest in lproc_small.c).
**
** Why: every table, array, string and closure of a process is a malloc and, when the
** collector frees it, a free (lproc_alloc). Lua passes the size of every block it
** frees or resizes, so a block's size class is known without asking the allocator:
** a free list per class takes a freed block and hands it to the next new object of
** the class in a few instructions, where jemalloc's malloc + free cost ~67 and
** lproc_alloc around them ~85 more (docs/performance.md, "Small allocations").
**
** Why per thread, not per state: a state's own lists would hold memory in every idle
** process (mem100k) unless trimmed at each wait, which is on the message hop's path,
** and would have to be emptied when the state is recycled. A thread's lists are
** bounded (LPROC_SMALL_ROOM / LPROC_SMALL_BYTES, at most 706 KB in all) whatever the
** number of processes, hold nothing of any process (a recycled state is the same as
** a new one), and need no locks: a block freed on a worker goes to that worker's
** lists, wherever it was made (a migrated process, lua_close of a pooled state).
**
** Classes are 8 bytes wide up to LPROC_SMALL_MAX: class c holds blocks of at least
** 8 (c + 1) usable bytes, because every block of up to LPROC_SMALL_MAX bytes is
** malloc'ed (or realloc'ed) with its size rounded up to its class's (lproc_small_size),
** so a freed one of any size of the class fits every request of it. jemalloc rounds
** these sizes to its own classes anyway (8, 16, 32, 48, ...): no byte more is held.
**
** ASan: no lists (every block goes to malloc and free), so ASan's quarantine still
** reports a use after free of a Lua object (tests/asan_uaf.c).
*/
#ifndef LPROC_SMALL_H
#define LPROC_SMALL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define LPROC_SMALL_MAX 256                        /* bytes: the largest class */
#define LPROC_SMALL_NCLASS (LPROC_SMALL_MAX / 8)
/* A class holds at most LPROC_SMALL_ROOM blocks and LPROC_SMALL_BYTES bytes: 706 KB
** a thread in all. (The collector frees what it sweeps in bursts while the program
** makes objects between them: with 8 KB a class, an ETS lookup loop making {{k, v}}
** missed 19% of its allocations; with 16 KB, none. A process receiving EStone's
** very_big(15), 76 tables a message, 15 of their arrays 256 bytes: up to 128 bytes
** and 16 KB a class, 22 of its 152 allocations a message missed; up to 256 bytes, 13;
** and 24 KB a class, under 1.) */
#define LPROC_SMALL_ROOM 512
#define LPROC_SMALL_BYTES 24576

#if defined(__SANITIZE_ADDRESS__)
#define LPROC_SMALL_LISTS 0
#else
#define LPROC_SMALL_LISTS 1
#endif

/* One thread's lists; only that thread reads or writes them. */
typedef struct lproc_small {
  void *head[LPROC_SMALL_NCLASS];     /* first free block of the class (the next one
                                      ** is in its first word) */
  uint16_t room[LPROC_SMALL_NCLASS];  /* blocks the class may still take; all 0 until
                                      ** the thread's first free sets them up */
  uint8_t state;                      /* 0: not set up, 1: lists in use, 2: no lists
                                      ** (the thread is ending, or no key was left) */
} lproc_small;

extern _Thread_local lproc_small lproc_small_tl;

void *lproc_small_miss(size_t nsize);           /* lproc_small.c: a new block */
void lproc_small_spill(void *ptr, size_t osize);  /* lproc_small.c: to free() */

/* The size to malloc for a block of n bytes: its class's, for a small one (with
** ASan the exact size, so that an overrun past it is caught). */
static inline size_t lproc_small_size(size_t n) {
#if LPROC_SMALL_LISTS
  return n - 1 < LPROC_SMALL_MAX ? (n + 7) & ~(size_t)7 : n;
#else
  return n;
#endif
}

/* A block of nsize bytes from the lists, or NULL (none there, not small, 0). */
static inline void *lproc_small_pop(size_t nsize) {
#if LPROC_SMALL_LISTS
  size_t c = (nsize - 1) >> 3;
  if (c < LPROC_SMALL_NCLASS) {
    lproc_small *k = &lproc_small_tl;
    void *q = k->head[c];
    if (q) {
      k->head[c] = *(void **)q;
      k->room[c]++;
      return q;
    }
  }
#else
  (void)nsize;
#endif
  return NULL;
}

/* Block ptr of osize bytes to the lists: 0 if they cannot take it. */
static inline int lproc_small_push(void *ptr, size_t osize) {
#if LPROC_SMALL_LISTS
  size_t c = (osize - 1) >> 3;
  if (c < LPROC_SMALL_NCLASS) {
    lproc_small *k = &lproc_small_tl;
    if (k->room[c]) {
      k->room[c]--;
      *(void **)ptr = k->head[c];
      k->head[c] = ptr;
      return 1;
    }
  }
#else
  (void)ptr, (void)osize;
#endif
  return 0;
}

/* A new block of nsize > 0 bytes. */
static inline void *lproc_small_alloc(size_t nsize) {
  void *q = lproc_small_pop(nsize);
  return q ? q : lproc_small_miss(nsize);
}

/* Free a block of osize bytes (not NULL, not a state's block object). */
static inline void lproc_small_free(void *ptr, size_t osize) {
  if (!lproc_small_push(ptr, osize)) lproc_small_spill(ptr, osize);
}

/* Resize a block (not a state's block object) from osize > 0 to nsize > 0 bytes. */
static inline void *lproc_small_realloc(void *ptr, size_t osize, size_t nsize) {
#if LPROC_SMALL_LISTS
  if (((osize - 1) >> 3) == ((nsize - 1) >> 3) && nsize <= LPROC_SMALL_MAX)
    return ptr;   /* the same class: the block has the room */
#else
  (void)osize;
#endif
  return realloc(ptr, lproc_small_size(nsize));
}

#endif
