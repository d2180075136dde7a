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
** asked for with blk_bump set and no block yet) and begins with it: the global state is the last
** object lua_close frees, so freeing it frees the block. Objects are bumped while
** they fit, 8-byte aligned (Lua's largest alignment); a freed object's space stays
** unused (the block is small), except the last one bumped, which is given back. A
** block object resized keeps its place when it shrinks or is the last one, else
** moves (to the block or the heap). Objects that do not fit go to the heap as before
** (lproc_small.h: the thread's free lists, or malloc).
** The block belongs to the state: it moves with it through the pool (lproc_pool.c).
** With ASan, the block's unused and freed bytes are poisoned, so an overrun of a
** block object is still caught.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vm/lproc_int.h"
#include "vm/lproc_small.h"

/* Close a state that has no owner (pooled, in the maker's stock): its allocator needs
** the block it was made in, which a stand-in owner holds. */
void lproc_block_close(lua_State *L, char *blk) {
  lproc owner;
  memset(&owner, 0, sizeof owner);
  owner.blk = blk;
  lua_setallocf(L, lproc_alloc_closing, &owner);
  lua_close(L);
}

/* The first allocation of a new state: its global state, at the block's start. */
void *lproc_block_first(lproc *p, size_t nsize) {
  p->blk_bump = 0;   /* until the block is made */
  if (LPROC_BLK_HEAD + LPROC_BLK_ALIGN(nsize) > LPROC_BLOCK) return NULL;
  char *b = malloc(LPROC_BLOCK);
  if (!b) return NULL;
  lproc_blk_head *h = (lproc_blk_head *)b;
  h->top = (uint32_t)(LPROC_BLK_HEAD + LPROC_BLK_ALIGN(nsize));
  LPROC_POISON(b + h->top, LPROC_BLOCK - h->top);
  p->blk = b;
  p->blk_bump = 1;
  return b + LPROC_BLK_HEAD;
}

/* A new state's set-up is done (lproc_state_init: lua_newstate, the lazy tables): the
** next object bumped starts a cache line. What the process's body makes first (its
** function, call frames, module table) then lies on the same lines whatever the set-up
** took, and a ring hop, which reads them cold, does not pay for how they fall: the
** set-up made 80 B smaller (llibs.c's one lazy table) moved them by 16 B modulo 64 and
** cost a hop 1.7 more first-level misses (estone/cg_hop.sh: D1mr 18.2-18.6 before,
** 20.0 then, 17.7 aligned). At most 56 B of the block left unused (poisoned as the
** rest), once per new state. p: the state's owner, or NULL. */
void lproc_block_to_line(lproc *p) {
  if (!p || !p->blk || !p->blk_bump) return;
  lproc_blk_head *h = (lproc_blk_head *)p->blk;
  uintptr_t at = ((uintptr_t)p->blk + h->top + 63u) & ~(uintptr_t)63u;
  size_t top = at - (uintptr_t)p->blk;
  if (top <= LPROC_BLOCK) h->top = (uint32_t)top;
}

/* The global state, freed last by lua_close: the whole block goes. */
void lproc_block_drop(lproc *p) {
  LPROC_UNPOISON(p->blk, LPROC_BLOCK);
  free(p->blk);
  p->blk = NULL;
  p->blk_bump = 0;
}

/* Resize block object ptr (osize bytes) to nsize > 0: NULL if out of memory. */
void *lproc_block_realloc(lproc *p, void *ptr, size_t osize, size_t nsize) {
  char *b = p->blk, *q = ptr;
  lproc_blk_head *h = (lproc_blk_head *)b;
  size_t oa = LPROC_BLK_ALIGN(osize), na = LPROC_BLK_ALIGN(nsize), at = (size_t)(q - b);
  if (q + oa == b + h->top && at + na <= LPROC_BLOCK) {   /* the last one: in place */
    h->top = (uint32_t)(at + na);
    if (nsize > osize) LPROC_UNPOISON(q + osize, nsize - osize);
    else LPROC_POISON(b + h->top, oa - na);
    return q;
  }
  if (nsize <= osize) {   /* Lua counts on a shrink never failing: keep the place */
    if (oa > na) LPROC_POISON(q + na, oa - na);
    return q;
  }
  void *n = p->blk_bump ? lproc_block_alloc(p, nsize) : NULL;
  if (!n) n = lproc_small_alloc(nsize);   /* lproc_small.h: sized to its class */
  if (!n) return NULL;
  memcpy(n, q, osize);
  lproc_block_free(p, q, osize);
  return n;
}
