/*
** lproc_finobj.c -- does a Lua state hold an object whose finalizer has not run?
**
** Why: cleaning a finished state for the pool (lproc_pool.c clean_cf) ran a full
** collection only so that its previous owner's finalizers run then, while the state
** is nobody's, and not in the next owner's life. A process that set no finalizer
** (most: `function() end`, a worker that computes and replies) pays the collection
** (about 4,000 instructions of a 17,800-instruction spawn + exit) for nothing; its
** garbage is invisible to the next owner (nothing reaches it) and goes in the next
** owner's collections, as a new state's own start-up garbage does.
**
** Lua's API cannot tell whether a finalizer is pending, so this reads the collector's
** two lists of such objects (global_State's finobj: objects with a __gc metatable,
** and tobefnz: those found dead, waiting for their finalizer) through a mirror of
** Lua 5.4's lstate.h, the way lfun.c reads a closure's prototype. The mirror is
** trusted only after lproc_finobj_check has seen it agree with a state it made
** itself: the allocator and its data, the registry, an object given a finalizer
** found at the head of finobj, both lists empty again once the finalizers ran.
** Otherwise (another Lua, another layout) every state counts as having finalizers
** and is collected as before.
*/
#include <lauxlib.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>

#include "vm/lproc_int.h"

/* Lua 5.4.4's global_State up to fixedgc (lstate.h), and the head of lua_State. */
typedef struct {
  void *hash;
  int nuse, size;
} strt_mirror;

typedef struct {
  const void *gc;   /* Value: a collectable object's address */
  unsigned char tt;
} tvalue_mirror;

typedef struct {
  lua_Alloc frealloc;
  void *ud;
  ptrdiff_t totalbytes, GCdebt;
  size_t GCestimate, lastatomic;
  strt_mirror strt;
  tvalue_mirror l_registry, nilvalue;
  unsigned int seed;
  unsigned char currentwhite, gcstate, gckind, gcstopem, genminormul, genmajormul, gcstp,
      gcemergency, gcpause, gcstepmul, gcstepsize;
  const void *allgc;
  void *sweepgc;
  const void *finobj;
  const void *gray, *grayagain, *weak, *ephemeron, *allweak;
  const void *tobefnz;
  const void *fixedgc;
} global_mirror;

typedef struct {
  void *next;
  unsigned char tt, marked, status, allowhook;
  unsigned short nci;
  void *top;
  global_mirror *l_G;
} state_mirror;

static _Atomic int layout = 0;   /* 0 unknown, 1 checked, -1 refused */

static const global_mirror *g_of(lua_State *L) { return ((const state_mirror *)L)->l_G; }

static void *check_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  (void)ud, (void)osize;
  if (nsize == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, nsize);
}

static int count_gc(lua_State *L) {
  int *ran = lua_touserdata(L, lua_upvalueindex(1));
  (*ran)++;
  return 0;
}

/* In a state of its own: two tables given a finalizer each become finobj's
** head; dropped and collected, their finalizers run and both lists are empty. */
static int layout_check(void) {
  if (LUA_VERSION_NUM != 504) return -1;
  int token = 0, ran = 0;
  lua_State *S = lua_newstate(check_alloc, &token);
  if (!S) return 0;
  const global_mirror *g = g_of(S);
  int ok = g && g->frealloc == check_alloc && g->ud == &token &&
           g->l_registry.gc == lua_topointer(S, LUA_REGISTRYINDEX) && g->allgc &&
           !g->finobj && !g->tobefnz;
  if (ok) {
    lua_createtable(S, 0, 1);   /* 1: the metatable */
    lua_pushlightuserdata(S, &ran);
    lua_pushcclosure(S, count_gc, 1);
    lua_setfield(S, 1, "__gc");
    lua_newtable(S);
    lua_pushvalue(S, 1);
    lua_setmetatable(S, 2);
    ok = g->finobj == lua_topointer(S, 2);
    lua_newtable(S);   /* (a userdata's lua_topointer is its block, not its header) */
    lua_pushvalue(S, 1);
    lua_setmetatable(S, 3);
    ok = ok && g->finobj == lua_topointer(S, 3) && !g->tobefnz;
    lua_settop(S, 0);
    lua_gc(S, LUA_GCCOLLECT);
    ok = ok && ran == 2 && !g->finobj && !g->tobefnz;
  }
  lua_close(S);
  return ok ? 1 : -1;
}

int lproc_finobj_pending(lua_State *L) {
  int lay = atomic_load_explicit(&layout, memory_order_relaxed);
  if (lay == 0) {
    lay = layout_check();
    if (lay != 0) atomic_store_explicit(&layout, lay, memory_order_relaxed);
  }
  if (lay != 1) return 1;
  const global_mirror *g = g_of(L);
  return g->finobj != NULL || g->tobefnz != NULL;
}
