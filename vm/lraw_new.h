/*
** lraw_new.h -- lraw_new_array's common case (vm/lraw_new.c), inline for the reader of
** a message's lists (vm/lterm_plain.c's plain_seq), which makes one a list.
**
** Why: a received very_big(15) makes 76 lists; through the call each paid the
** function's saved registers and its tests (~20 instructions), and both blocks each
** tested the owner again (lproc_alloc_direct). Here: the collector's debt, one test of
** the owner, two pops from the thread's lists, the stores of luaC_newobj and luaH_new.
** What is not that case (the debt would turn positive, another allocator, an empty
** list on the thread, 0 or more than LRAW_NEWMAX slots) answers NULL, nothing made
** and nothing counted, and the caller takes lraw_new_array (Lua's way, its collector
** step). The same rules and the same check (lraw_new_check) as lraw_new_array: the
** mirror trusted (lraw_ok()), room on the stack for the push.
*/
#ifndef LPVM_VM_LRAW_NEW_H
#define LPVM_VM_LRAW_NEW_H

#include <stdatomic.h>

#include "vm/lproc_int.h"
#include "vm/lraw.h"

/* The node part of a table without one: liblua's one static dummy node, the same for
** every state; NULL until lraw_new_check has seen it (and then Lua's way). Written
** once by lraw_new_check (any thread that runs it), read by every maker. */
extern _Atomic(void *) lraw_dummy_node;

/* The stores of luaC_newobj and luaH_new, and luaH_resize's of the array a of n slots
** (its slots the caller's), for a table h just allocated. */
static inline void lraw_new_init(lraw_global *g, lraw_table *h, void *node, lraw_tvalue *a,
                                 unsigned n) {
  h->marked = g->currentwhite & LRAW_WHITES;   /* luaC_newobj: white, linked first */
  h->tt = LRAW_VTABLE & 0x3F;
  h->next = (void *)g->allgc;
  g->allgc = h;
  h->flags = LRAW_FLAGS_NEW;   /* luaH_new: no metamethods, the dummy node */
  h->lsizenode = 0;
  h->node = node;
  h->lastfree = NULL;
  h->metatable = NULL;
  h->array = a;
  h->alimit = n;   /* the real size: LRAW_BITRAS is clear */
}

/* Push a new table with n empty array slots, made here when the collector's debt
** stays <= 0 with both its blocks, and return its array; NULL (nothing pushed, made or
** counted) otherwise. Each block as g->frealloc(g->ud, NULL, tag, n) gives it: a
** process's state takes its allocator's common case (lproc_alloc_direct: both blocks
** from the thread's lists) inline, with one test of the owner for the two, and the
** rest through the allocator. */
static inline lraw_tvalue *lraw_new_here(lua_State *L, unsigned n) {
  lraw_state *s = (lraw_state *)(void *)L;
  lraw_global *g = s->l_G;
  size_t size = (size_t)n * sizeof(lraw_tvalue);
  void *node = atomic_load_explicit(&lraw_dummy_node, memory_order_relaxed);
  if (n - 1 >= LRAW_NEWMAX || !node ||
      g->GCdebt + (ptrdiff_t)(sizeof(lraw_table) + size) > 0)
    return NULL;
  lproc *p = g->frealloc == lproc_alloc ? lproc_alloc_direct(g->ud) : NULL;
  lraw_table *h = p ? lproc_small_pop(sizeof *h) : NULL;   /* luaM_newobject */
  lraw_tvalue *a = h ? lproc_small_pop(size) : NULL;      /* luaM_reallocvector */
  if (a) {
    p->mem += sizeof *h + size;
  } else {
    if (h) p->mem += sizeof *h;
    else if (!(h = g->frealloc(g->ud, NULL, LUA_TTABLE, sizeof *h))) return NULL;
    if (!(a = g->frealloc(g->ud, NULL, 0, size))) {
      g->frealloc(g->ud, h, sizeof *h, 0);
      return NULL;
    }
  }
  g->GCdebt += (ptrdiff_t)(sizeof *h + size);
  lraw_new_init(g, h, node, a, n);
  for (unsigned i = 0; i < n; i++) a[i].tt = LRAW_VEMPTY;   /* luaH_resize's setempty */
  lraw_tvalue *top = s->top;   /* lua_createtable's push */
  top->v.gc = h, top->tt = LRAW_VTABLE;
  s->top = top + 1;
  return a;
}

/* Push {{n slots}}, a list of one tuple (a lookup's usual answer: lets_push_ints), its
** four blocks all from the thread's lists with one test of the owner and one of the
** collector's debt, the tuple stored in the list's slot (both new and white: no
** barrier, and nothing allocates between). Returns the tuple's array, whose n slots
** are NOT set: the caller stores every one before anything else runs that can
** allocate (a collection step would read them). NULL, nothing made or counted: the
** cases lraw_new_here refuses, or a block the thread's lists lack (those taken are
** put back). The same rules as lraw_new_here. */
static inline lraw_tvalue *lraw_new_list1(lua_State *L, unsigned n) {
  lraw_state *s = (lraw_state *)(void *)L;
  lraw_global *g = s->l_G;
  size_t size = (size_t)n * sizeof(lraw_tvalue);
  size_t all = 2 * sizeof(lraw_table) + sizeof(lraw_tvalue) + size;
  void *node = atomic_load_explicit(&lraw_dummy_node, memory_order_relaxed);
  if (n - 1 >= LRAW_NEWMAX || !node || g->GCdebt + (ptrdiff_t)all > 0) return NULL;
  lproc *p = g->frealloc == lproc_alloc ? lproc_alloc_direct(g->ud) : NULL;
  if (!p) return NULL;
  lraw_table *lh = lproc_small_pop(sizeof *lh), *th = NULL;
  lraw_tvalue *la = NULL, *ta = NULL;
  if (!lh || !(la = lproc_small_pop(sizeof *la)) || !(th = lproc_small_pop(sizeof *th)) ||
      !(ta = lproc_small_pop(size))) {   /* each popped block has its room back */
    if (th) lproc_small_push(th, sizeof *th);
    if (la) lproc_small_push(la, sizeof *la);
    if (lh) lproc_small_push(lh, sizeof *lh);
    return NULL;
  }
  p->mem += all;
  g->GCdebt += (ptrdiff_t)all;   /* luaM_malloc_'s and luaM_reallocvector's counts */
  lraw_new_init(g, lh, node, la, 1);   /* lua_createtable's order: the list first */
  lraw_new_init(g, th, node, ta, n);
  la->v.gc = th, la->tt = LRAW_VTABLE;
  lraw_tvalue *top = s->top;   /* the list's push */
  top->v.gc = lh, top->tt = LRAW_VTABLE;
  s->top = top + 1;
  return ta;
}

/* Push a new empty table (lua_createtable(L, 0, 0)'s: no array, the dummy node), made
** here as lraw_new_here makes a list's (one block: the table) while the collector's
** debt stays <= 0 with it; else lua_createtable makes it (and takes its collector step,
** or Lua's way with memory refused). The mirror trusted, room on the stack for the
** push. (msgp_medium's big() has one, {123, true, []}: lua_createtable's luaH_new
** cost ~60 instructions more.) */
static inline void lraw_new_empty(lua_State *L) {
  lraw_state *s = (lraw_state *)(void *)L;
  lraw_global *g = s->l_G;
  void *node = atomic_load_explicit(&lraw_dummy_node, memory_order_relaxed);
  if (!node || g->GCdebt + (ptrdiff_t)sizeof(lraw_table) > 0) {
    lua_createtable(L, 0, 0);
    return;
  }
  lproc *p = g->frealloc == lproc_alloc ? lproc_alloc_direct(g->ud) : NULL;
  lraw_table *h = p ? lproc_small_pop(sizeof *h) : NULL;   /* luaM_newobject */
  if (h) {
    p->mem += sizeof *h;
  } else if (!(h = g->frealloc(g->ud, NULL, LUA_TTABLE, sizeof *h))) {
    lua_createtable(L, 0, 0);
    return;
  }
  g->GCdebt += (ptrdiff_t)sizeof *h;
  h->marked = g->currentwhite & LRAW_WHITES;   /* luaC_newobj: white, linked first */
  h->tt = LRAW_VTABLE & 0x3F;
  h->next = (void *)g->allgc;
  g->allgc = h;
  h->flags = LRAW_FLAGS_NEW;   /* luaH_new: no metamethods, the dummy node, no array */
  h->lsizenode = 0;
  h->node = node;
  h->lastfree = NULL;
  h->metatable = NULL;
  h->array = NULL;
  h->alimit = 0;
  lraw_tvalue *top = s->top;   /* lua_createtable's push */
  top->v.gc = h, top->tt = LRAW_VTABLE;
  s->top = top + 1;
}

#endif
