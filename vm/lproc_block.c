/*
** lproc_block.c -- a new state's first objects come from one block of its own.
**
** Why: a new process's state makes about a hundred small objects before it first
** waits (lua_newstate's global state, string table, 49 fixed strings, stack and
** registry; the lazy globals; `require "lpvm"`; the spawned function), and a
** create100k worker hands each of them to malloc and, at exit, back to free: every
** one of them on fresh memory, where jemalloc's thread cache has nothing and refills
** from its arena (docs/performance.md, "Spawn and exit"). Carved from one block they
** cost a bump of a pointer, and they take no allocator slack or per-object metadata.
**
** The block is made by the state's first allocation (lua_newstate's global state,
** asked for with blk_want set) and begins with it: the global state is the last
** object lua_close frees, so freeing it frees the block. Objects are bumped while
** they fit, 8-byte aligned (Lua's largest alignment); a freed object's space stays
** unused (the block is small), except the last one bumped, which is given back. A
** block object resized keeps its place when it shrinks or is the last one, else
** moves (to the block or malloc). Objects that do not fit go to malloc as before.
** The block belongs to the state: it moves with it through the pool (lproc_pool.c).
** With ASan, the block's unused and freed bytes are poisoned, so an overrun of a
** block object is still caught.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vm/lproc_int.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* The block's header: the offset of its first unused byte. 16 bytes, so the global
** state that follows is as aligned as malloc would give it. */
typedef struct blk_head {
  uint32_t top;
  uint32_t unused[3];
} blk_head;

#define HEAD sizeof(blk_head)
#define ALIGN(n) (((n) + 7) & ~(size_t)7)

/* The first allocation of a new state: its global state, at the block's start. */
static void *first(lproc *p, size_t nsize) {
  p->blk_want = 0;
  if (HEAD + ALIGN(nsize) > LPROC_BLOCK) return NULL;
  char *b = malloc(LPROC_BLOCK);
  if (!b) return NULL;
  blk_head *h = (blk_head *)b;
  h->top = (uint32_t)(HEAD + ALIGN(nsize));
  POISON(b + h->top, LPROC_BLOCK - h->top);
  p->blk = b;
  return b + HEAD;
}

void *lproc_block_alloc(lproc *p, size_t nsize) {
  if (!p->blk) return p->blk_want ? first(p, nsize) : NULL;
  blk_head *h = (blk_head *)p->blk;
  size_t need = ALIGN(nsize);
  if (need > LPROC_BLOCK - h->top) return NULL;
  char *q = p->blk + h->top;
  h->top += (uint32_t)need;
  UNPOISON(q, nsize);
  return q;
}

void lproc_block_free(lproc *p, void *ptr, size_t osize) {
  char *b = p->blk, *q = ptr;
  if (q == b + HEAD) {   /* the global state: lua_close is done with every object */
    UNPOISON(b, LPROC_BLOCK);
    free(b);
    p->blk = NULL;
    return;
  }
  blk_head *h = (blk_head *)b;
  if (q + ALIGN(osize) == b + h->top) h->top = (uint32_t)(q - b);   /* the last one */
  POISON(q, ALIGN(osize));
}

/* Resize block object ptr (osize bytes) to nsize > 0: NULL if out of memory. */
void *lproc_block_realloc(lproc *p, void *ptr, size_t osize, size_t nsize) {
  char *b = p->blk, *q = ptr;
  blk_head *h = (blk_head *)b;
  if (q + ALIGN(osize) == b + h->top && (size_t)(q - b) + ALIGN(nsize) <= LPROC_BLOCK) {
    h->top = (uint32_t)((size_t)(q - b) + ALIGN(nsize));   /* the last one: in place */
    if (nsize > osize) UNPOISON(q + osize, nsize - osize);
    else POISON(b + h->top, ALIGN(osize) - ALIGN(nsize));
    return q;
  }
  if (nsize <= osize) {   /* Lua counts on a shrink never failing: keep the place */
    if (ALIGN(osize) > ALIGN(nsize)) POISON(q + ALIGN(nsize), ALIGN(osize) - ALIGN(nsize));
    return q;
  }
  void *n = lproc_block_alloc(p, nsize);
  if (!n) n = malloc(nsize);
  if (!n) return NULL;
  memcpy(n, q, osize);
  lproc_block_free(p, q, osize);
  return n;
}
