/*
** test_lalloc.c -- lproc_alloc (vm/lproc.c) at the edges of Lua's allocator contract:
** a "free" of NULL (nsize 0, no block) gives NULL on every path, the count is Lua's
** sizes and not the classes', and a small block freed is the next one of its class
** (vm/lproc_small.h; not in the ASan build, which has no lists).
*/
#include <criterion/criterion.h>
#include <lua.h>
#include <stdint.h>
#include <stdlib.h>

#include "vm/lproc_int.h"
#include "vm/lproc_small.h"

/* While a new state's block is bumped, and when it is used up to its last byte. */
Test(lalloc, free_of_null_while_bumping) {
  lproc *p = calloc(1, sizeof *p);
  cr_assert_not_null(p);
  p->blk_bump = 1;
  void *g = lproc_alloc(p, NULL, LUA_TTHREAD, 1000);   /* the block's first object */
  cr_assert_not_null(p->blk);
  cr_assert_null(lproc_alloc(p, NULL, 0, 0));
  size_t left = LPROC_BLOCK - ((lproc_blk_head *)p->blk)->top;
  void *last = lproc_alloc(p, NULL, LUA_TSTRING, left);   /* the block is full */
  cr_assert(lproc_block_owns(p, last));
  cr_assert_null(lproc_alloc(p, NULL, 0, 0));
  cr_assert_eq(p->mem, 1000 + left);
  lproc_alloc(p, last, left, 0);
  lproc_alloc(p, g, 1000, 0);   /* the global state: the block goes */
  cr_assert_null(p->blk);
  cr_assert_eq(p->mem, 0);
  free(p);
}

Test(lalloc, small_blocks_counted_by_lua_size) {
  lproc *p = calloc(1, sizeof *p);
  cr_assert_not_null(p);
  cr_assert_null(lproc_alloc(p, NULL, 0, 0));
  void *a = lproc_alloc(p, NULL, LUA_TTABLE, 56);
  cr_assert_eq(p->mem, 56);
  lproc_alloc(p, a, 56, 0);
  cr_assert_eq(p->mem, 0);
  char *b = lproc_alloc(p, NULL, LUA_TSTRING, 49);   /* 49-56: a's class */
#if LPROC_SMALL_LISTS
  cr_assert_eq((void *)b, a);
#endif
  cr_assert_eq(p->mem, 49);
  b = lproc_alloc(p, b, 49, 56);   /* the same class: in place */
  for (int i = 0; i < 56; i++) b[i] = (char)i;
  b = lproc_alloc(p, b, 56, 300);   /* out of the lists' classes: moved */
  cr_assert_eq(p->mem, 300);
  for (int i = 0; i < 56; i++) cr_assert_eq(b[i], (char)i);
  lproc_alloc(p, b, 300, 0);
  cr_assert_eq(p->mem, 0);
  free(p);
}
