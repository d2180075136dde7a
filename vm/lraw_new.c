/*
** lraw_new.c -- lraw_new_array, the one maker of Lua objects through lraw.h's mirror
** (a message's lists, vm/lterm_plain.c; its common cases inline in vm/lraw_new.h), and
** the check that its tables are Lua's.
**
** Why: a received very_big(15) is 76 new tables, and lua_createtable(L, n, 0) cost
** ~310 instructions a table beside the collector: luaH_new (~100 with the table's
** allocation), then luaH_resize for the array (~180: a new hash part made, exchanged
** with the old, reinserted and freed, every slot cleared) for a table that never has a
** hash part. Here the table is made with luaC_newobj's and luaH_new's own stores and
** its array allocated next to it, each one call to the state's allocator, the bytes
** counted in the collector's debt as luaM_malloc_ counts them: ~150 instructions,
** the two allocations included.
** Only while that debt stays <= 0 with both blocks: lua_createtable's luaC_checkGC
** would then do nothing either (99% of a very_big(15) receiver's tables). Otherwise
** lua_createtable(L, 0, 0) makes the table and takes its collector step, and only the
** array is allocated here; memory refused goes Lua's way too.
**
** Trust: lraw_new_check (run by lraw_check, on a state of its own whose allocator
** watches the blocks) compares a table made here (a list's, and an empty one by
** lraw_new_empty) with the one lua_createtable makes right after it: the header (tag,
** colour, flags, node, sizes), its place on the collector's list, the bytes counted;
** then Lua reads, resizes, gives a metatable to and collects the list, and frees both
** its blocks with the sizes given here. The template it
** learns (liblua's static dummy node) is an atomic: a thread that does not see it yet
** takes Lua's way.
*/
#include <lauxlib.h>
#include <limits.h>
#include <stdlib.h>

#include "vm/lproc_int.h"
#include "vm/lraw.h"
#include "vm/lraw_new.h"

/* The node part of a table without one: liblua's one static dummy node, the same for
** every state; NULL until lraw_new_check has seen it (and then Lua's way). */
_Atomic(void *) lraw_dummy_node;

lraw_tvalue *lraw_new_array(lua_State *L, unsigned n) {
  lraw_state *s = (lraw_state *)(void *)L;
  if (n - 1 >= LRAW_NEWMAX) {   /* 0, or too big for this short way */
    lua_createtable(L, (int)(n > INT_MAX ? INT_MAX : n), 0);
    return ((lraw_table *)s->top[-1].v.gc)->array;
  }
  lraw_tvalue *a = lraw_new_here(L, n);
  if (a) return a;
  lua_createtable(L, 0, 0);   /* the table, and its collector step */
  lraw_table *h = s->top[-1].v.gc;
  lraw_global *g = s->l_G;
  size_t size = (size_t)n * sizeof(lraw_tvalue);
  a = g->frealloc(g->ud, NULL, 0, size);   /* as luaM_reallocvector asks */
  if (!a) {   /* Lua's own way: an emergency collection, a retry, an error */
    lua_pop(L, 1);
    lua_createtable(L, (int)n, 0);
    return ((lraw_table *)s->top[-1].v.gc)->array;
  }
  g->GCdebt += (ptrdiff_t)size;   /* luaM_realloc_'s count */
  for (unsigned i = 0; i < n; i++) a[i].tt = LRAW_VEMPTY;
  h->array = a;
  h->alimit = n;
  return a;
}

/* ---- the check ---------------------------------------------------------------------------- */

/* The check state's allocator: two blocks watched. */
typedef struct watch {
  void *p[2];        /* blocks whose free or resize is checked, or NULL */
  size_t size[2];    /* the size Lua must give when it frees or resizes each */
  int bad;           /* it gave another */
} watch;

static void *watch_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  watch *u = ud;
  for (int i = 0; ptr && i < 2; i++)
    if (ptr == u->p[i]) {
      u->bad |= osize != u->size[i];
      u->p[i] = NULL;
    }
  if (nsize == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, nsize);
}

/* The state's bytes by the API, and the global state's own count (totalbytes plus the
** collector's debt, where lraw_new_array counts what it makes). */
static size_t api_bytes(lua_State *L) {
  return (size_t)lua_gc(L, LUA_GCCOUNT) * 1024 + (size_t)lua_gc(L, LUA_GCCOUNTB);
}

static int counted(lua_State *L) {
  const lraw_global *g = ((const lraw_state *)(void *)L)->l_G;
  return (size_t)(g->totalbytes + g->GCdebt) == api_bytes(L);
}

/* With the collector stopped: lua_createtable(L, 3, 0)'s bytes and slots, an empty
** table's header (the template); after a full collection (the debt below 0) a table
** made here against the one lua_createtable makes next; then Lua's own use of it. */
static int check_on(lua_State *L, watch *u) {
  const lraw_global *g = ((const lraw_state *)(void *)L)->l_G;
  lua_gc(L, LUA_GCSTOP);
  size_t at = api_bytes(L);
  lua_createtable(L, 3, 0);
  size_t api = api_bytes(L) - at;
  const lraw_table *h = lua_topointer(L, -1);
  int ok = counted(L) && h->alimit == 3 && !(h->flags & LRAW_BITRAS) &&
           h->array[0].tt == LRAW_VEMPTY && h->array[2].tt == LRAW_VEMPTY;
  lua_createtable(L, 0, 0);
  h = lua_topointer(L, -1);
  ok = ok && h->array == NULL && h->alimit == 0 && h->lastfree == NULL &&
       h->lsizenode == 0 && h->metatable == NULL && h->flags == LRAW_FLAGS_NEW &&
       h->tt == (LRAW_VTABLE & 0x3F) && h->node != NULL && g->allgc == h;
  if (!ok) return 0;
  atomic_store(&lraw_dummy_node, h->node);
  lua_pop(L, 2);
  lua_gc(L, LUA_GCRESTART);
  lua_gc(L, LUA_GCCOLLECT);   /* the debt now below 0 */
  lua_gc(L, LUA_GCSTOP);
  const void *head = g->allgc;
  at = api_bytes(L);
  lraw_tvalue *a = lraw_new_array(L, 3);
  h = lua_topointer(L, -1);
  int here = g->allgc == h && h->next == head;   /* made here, not by Lua */
  ok = here && api_bytes(L) - at == api && counted(L) && h->array == a && h->alimit == 3 &&
       !(h->flags & LRAW_BITRAS) && lraw_real_asize(h) == 3 && a[0].tt == LRAW_VEMPTY &&
       a[2].tt == LRAW_VEMPTY && lua_rawlen(L, -1) == 0 && lua_rawgeti(L, -1, 3) == LUA_TNIL;
  lua_pop(L, 1);   /* the nil */
  lua_createtable(L, 0, 0);   /* the API's table, made next */
  const lraw_table *k = lua_topointer(L, -1);
  ok = ok && h->tt == k->tt && h->marked == k->marked && h->flags == k->flags &&
       h->lsizenode == k->lsizenode && h->node == k->node && h->lastfree == k->lastfree &&
       h->metatable == NULL && k->next == h && g->allgc == k;
  lua_pop(L, 1);
  if (!ok) return 0;
  /* an empty one (lraw_new_empty) against the API's, made next: header, bytes, list */
  head = g->allgc;
  at = api_bytes(L);
  lraw_new_empty(L);
  const lraw_table *e = lua_topointer(L, -1);
  size_t here_bytes = api_bytes(L) - at;
  lua_createtable(L, 0, 0);
  k = lua_topointer(L, -1);
  ok = e->next == head && k->next == e && g->allgc == k && counted(L) &&
       api_bytes(L) - at == 2 * here_bytes && e->array == NULL && e->alimit == 0 &&
       e->tt == k->tt && e->marked == k->marked && e->flags == k->flags &&
       e->lsizenode == k->lsizenode && e->node == k->node && e->lastfree == k->lastfree &&
       e->metatable == NULL && lua_rawlen(L, -2) == 0 && lua_rawgeti(L, -2, 1) == LUA_TNIL;
  lua_pop(L, 3);   /* the nil, both tables */
  if (!ok) return 0;
  u->p[0] = a, u->size[0] = 3 * sizeof *a;
  u->p[1] = (void *)h, u->size[1] = sizeof *h;
  for (int i = 0; i < 3; i++) a[i].v.i = 10 + i, a[i].tt = LRAW_VNUMINT;
  ok = lua_rawlen(L, -1) == 3;
  lua_pushinteger(L, 13), lua_rawseti(L, -2, 4);   /* Lua resizes the array */
  for (int i = 1; i <= 4; i++) {
    ok = ok && lua_rawgeti(L, -1, i) == LUA_TNUMBER && lua_tointeger(L, -1) == 9 + i;
    lua_pop(L, 1);
  }
  lua_createtable(L, 0, 1);   /* a metatable, through the API */
  lua_setmetatable(L, -2);
  ok = ok && u->p[0] == NULL && h->metatable != NULL && counted(L);
  lua_pop(L, 1);
  lua_gc(L, LUA_GCRESTART);
  lua_gc(L, LUA_GCCOLLECT);   /* and the table collected */
  return ok && u->p[1] == NULL && !u->bad && counted(L);
}

static int check_cf(lua_State *L) {
  lua_pushboolean(L, check_on(L, lua_touserdata(L, 1)));
  return 1;
}

int lraw_new_check(void) {
  watch u = {{NULL, NULL}, {0, 0}, 0};
  lua_State *L = lua_newstate(watch_alloc, &u);
  if (!L) return 0;
  lua_pushcfunction(L, check_cf);
  lua_pushlightuserdata(L, &u);
  int ok = lua_pcall(L, 1, 1, 0) == LUA_OK && lua_toboolean(L, -1);
  lua_close(L);
  if (!ok) atomic_store(&lraw_dummy_node, NULL);
  return ok;
}
