/*
** lraw.c -- the check that lraw.h's mirror reads this Lua right, and its one maker of
** Lua objects, lraw_new_array (a message's lists: lterm_plain.c).
**
** Once per VM (pthread_once; the first lraw_ok() of any thread runs it), on a state
** of its own made with an allocator of its own, so no process's code or finalizer
** runs meanwhile: values are built through the C API, read through the mirror and
** compared, field by field, for every field a user of lraw.h reads or writes. One
** mismatch and the mirror is refused for the VM's life (lraw_layout -1): every user
** then keeps to the C API. Out of memory during the check refuses it too (the check
** is not worth a retry: the API's way is always right). LPVM_NO_LRAW=1 in the
** environment refuses it without a check: every fast path then takes the API's way,
** which tests use to compare the two and a user to rule the mirror out.
*/
#include <lauxlib.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "vm/lraw.h"

_Atomic int lraw_layout = 0;

static const char long_s[] = "a string longer than forty bytes, so a long one";

/* The check state's allocator's data: two blocks watched (news_ok). */
typedef struct check_ud {
  void *watch[2];         /* blocks whose free or resize is checked, or NULL */
  size_t watch_size[2];   /* the size Lua must give when it frees or resizes each */
  int bad;                /* it gave another */
} check_ud;

/* lraw_new_array's template: see there. */
static _Atomic(void *) dummy_node;

/* ---- values and tables ------------------------------------------------------------------ */

/* One array slot against what the API reads at t[i]. */
static int slot_ok(lua_State *L, const lraw_table *h, int t, int i, int tag) {
  const lraw_tvalue *v = &h->array[i - 1];
  int ok = v->tt == tag;
  lua_rawgeti(L, t, i);
  switch (tag) {
    case LRAW_VNUMINT: ok = ok && v->v.i == lua_tointeger(L, -1); break;
    case LRAW_VNUMFLT: ok = ok && v->v.n == lua_tonumber(L, -1); break;
    case LRAW_VTRUE: case LRAW_VFALSE:
      ok = ok && lua_toboolean(L, -1) == (tag == LRAW_VTRUE);
      break;
    case LRAW_VLIGHTUD: ok = ok && v->v.p == lua_touserdata(L, -1); break;
    case LRAW_VSHRSTR: case LRAW_VLNGSTR: {
      size_t n, m;
      const char *s = lua_tolstring(L, -1, &n);
      ok = ok && v->v.gc == lua_topointer(L, -1) && lraw_str(v, &m) == s && m == n;
      break;
    }
    case LRAW_VTABLE: ok = ok && v->v.gc == lua_topointer(L, -1); break;
    case LRAW_VUSERDATA: ok = ok && lua_type(L, -1) == LUA_TUSERDATA; break;
    default: ok = ok && lua_isnil(L, -1); break;
  }
  lua_pop(L, 1);
  return ok;
}

/* Every kind of value in an array part; nil slots; a length search's flag. */
static int arrays_ok(lua_State *L) {
  lua_createtable(L, 9, 0);
  int t = lua_gettop(L);
  lua_pushinteger(L, -0x1122334455667788), lua_rawseti(L, t, 1);
  lua_pushnumber(L, 2.5), lua_rawseti(L, t, 2);
  lua_pushboolean(L, 1), lua_rawseti(L, t, 3);
  lua_pushboolean(L, 0), lua_rawseti(L, t, 4);
  lua_pushlightuserdata(L, (void *)&lraw_layout), lua_rawseti(L, t, 5);
  lua_pushliteral(L, "abc"), lua_rawseti(L, t, 6);
  lua_pushstring(L, long_s), lua_rawseti(L, t, 7);
  lua_newtable(L), lua_rawseti(L, t, 8);
  lua_newuserdatauv(L, 8, 0), lua_rawseti(L, t, 9);
  const lraw_table *h = lraw_table_at(L, t);
  static const int tags[] = {LRAW_VNUMINT, LRAW_VNUMFLT,  LRAW_VTRUE,
                             LRAW_VFALSE,  LRAW_VLIGHTUD, LRAW_VSHRSTR,
                             LRAW_VLNGSTR, LRAW_VTABLE,   LRAW_VUSERDATA};
  int ok = h->tt == (LRAW_VTABLE & 0x3F) && h->alimit == 9 && !(h->flags & LRAW_BITRAS) &&
           h->lastfree == NULL && lraw_real_asize(h) == 9;
  for (int i = 1; ok && i <= 9; i++) ok = slot_ok(L, h, t, i, tags[i - 1]);
  lua_pushnil(L), lua_rawseti(L, t, 9);   /* a slot set to nil reads as nil */
  ok = ok && lraw_is_nil(&h->array[8]) && slot_ok(L, h, t, 9, 0);
  /* a length search lowers alimit of an array of 8 holding 5: the flag and the size */
  lua_createtable(L, 8, 0);
  int u = lua_gettop(L);
  for (int i = 1; i <= 5; i++) lua_pushinteger(L, i), lua_rawseti(L, u, i);
  const lraw_table *g = lraw_table_at(L, u);
  ok = ok && lua_rawlen(L, u) == 5 && g->alimit == 5 && (g->flags & LRAW_BITRAS) &&
       lraw_real_asize(g) == 8 && lraw_is_nil(&g->array[7]) &&
       g->array[4].tt == LRAW_VNUMINT && g->array[4].v.i == 5;
  lua_settop(L, t - 1);
  return ok;
}

/* A hash part of 4 nodes holding two values: exactly those two, by their keys; a
** table with an array and a hash part. */
static int hashes_ok(lua_State *L) {
  lua_createtable(L, 0, 4);
  int m = lua_gettop(L);
  lua_pushinteger(L, 7), lua_setfield(L, m, "x");
  lua_pushinteger(L, 9), lua_setfield(L, m, "y");
  const lraw_table *k = lraw_table_at(L, m);
  int ok = k->lsizenode == 2 && k->lastfree != NULL && k->alimit == 0;
  if (ok) {
    const lraw_node *nd = k->node;
    lua_pushliteral(L, "x");
    const void *kx = lua_topointer(L, -1);
    int found = 0, others = 0;
    for (int i = 0; i < 4; i++) {
      if (LRAW_NOVARIANT(nd[i].tt) == 0) continue;
      if (nd[i].tt == LRAW_VNUMINT && nd[i].key_tt == LRAW_VSHRSTR &&
          (nd[i].v.i == 7) == (nd[i].key.gc == kx))
        found++;
      else
        others++;
    }
    ok = found == 2 && others == 0;
  }
  lua_createtable(L, 1, 1);
  lua_pushboolean(L, 1), lua_rawseti(L, -2, 1);
  lua_pushboolean(L, 1), lua_setfield(L, -2, "k");
  const lraw_table *b = lraw_table_at(L, -1);
  ok = ok && b->lastfree && b->alimit == 1 && b->array[0].tt == LRAW_VTRUE;
  lua_settop(L, m - 1);
  return ok;
}

/* Values written in place into a new table's slots read back through the API, a
** string included (the table is new: white). */
static int writes_ok(lua_State *L) {
  lua_pushliteral(L, "ab");
  lraw_tvalue s = {{.gc = (void *)lua_topointer(L, -1)}, LRAW_VSHRSTR};
  lua_createtable(L, 5, 0);
  lraw_table *t = lraw_table_at(L, -1);
  int ok = t->alimit == 5 && !(t->marked & LRAW_BLACK);
  if (ok) {
    t->array[0].v.i = -0x1122334455667788, t->array[0].tt = LRAW_VNUMINT;
    t->array[1].v.n = 2.5, t->array[1].tt = LRAW_VNUMFLT;
    t->array[2].tt = LRAW_VTRUE;
    t->array[3].tt = LRAW_VFALSE;
    t->array[4] = s;
    size_t n;
    ok = lua_rawlen(L, -1) == 5 && lua_rawgeti(L, -1, 1) == LUA_TNUMBER &&
         lua_isinteger(L, -1) && lua_tointeger(L, -1) == -0x1122334455667788 &&
         lua_rawgeti(L, -2, 2) == LUA_TNUMBER && lua_tonumber(L, -1) == 2.5 &&
         lua_rawgeti(L, -3, 3) == LUA_TBOOLEAN && lua_toboolean(L, -1) &&
         lua_rawgeti(L, -4, 4) == LUA_TBOOLEAN && !lua_toboolean(L, -1) &&
         lua_rawgeti(L, -5, 5) == LUA_TSTRING &&
         strcmp(lua_tolstring(L, -1, &n), "ab") == 0 && n == 2;
  }
  lua_pop(L, 7);
  return ok;
}

/* The state's bytes by the API, and the global state's own count (totalbytes plus the
** collector's debt, where lraw_new_array counts an array). */
static size_t api_bytes(lua_State *L) {
  return (size_t)lua_gc(L, LUA_GCCOUNT) * 1024 + (size_t)lua_gc(L, LUA_GCCOUNTB);
}

static int counted(lua_State *L) {
  const lraw_global *g = ((const lraw_state *)(void *)L)->l_G;
  return (size_t)(g->totalbytes + g->GCdebt) == api_bytes(L);
}

/* lraw_new_array's table against lua_createtable(L, 3, 0)'s: the same bytes counted,
** the same empty slots, the same fields. Made the short way (the collector's debt
** below 0 after a full collection): the same header as a table lua_createtable makes
** next, first on the collector's list. Written slots read back; a fourth element
** makes Lua resize the array, and the collector frees the table (check_alloc sees
** both freed with the sizes given here). The short way not taken here (a debt of
** another sign): it stays off, the rest of the mirror does not depend on it. */
static int news_ok(lua_State *L, check_ud *u) {
  const lraw_global *g = ((const lraw_state *)(void *)L)->l_G;
  lua_gc(L, LUA_GCSTOP);
  size_t at = api_bytes(L);
  lua_createtable(L, 3, 0);
  size_t api = api_bytes(L) - at;
  const lraw_table *h = lraw_table_at(L, -1);
  int ok = counted(L) && h->alimit == 3 && h->array[0].tt == LRAW_VEMPTY &&
           h->array[2].tt == LRAW_VEMPTY;
  lua_createtable(L, 0, 0);
  h = lraw_table_at(L, -1);
  ok = ok && h->array == NULL && h->alimit == 0 && h->lastfree == NULL &&
       h->lsizenode == 0 && h->metatable == NULL && h->flags == LRAW_FLAGS_NEW &&
       h->tt == (LRAW_VTABLE & 0x3F) && h->node != NULL && g->allgc == h;
  if (ok) atomic_store(&dummy_node, h->node);
  lua_pop(L, 2);
  lua_gc(L, LUA_GCRESTART);
  lua_gc(L, LUA_GCCOLLECT);   /* the debt now below 0: the short way */
  lua_gc(L, LUA_GCSTOP);
  const void *head = g->allgc;
  at = api_bytes(L);
  lraw_tvalue *a = lraw_new_array(L, 3);
  h = lraw_table_at(L, -1);
  int here = g->allgc == h && h->next == head;   /* made the short way */
  ok = ok && api_bytes(L) - at == api && counted(L) && h->array == a && h->alimit == 3 &&
       !(h->flags & LRAW_BITRAS) && lraw_real_asize(h) == 3 && h->lastfree == NULL &&
       a[0].tt == LRAW_VEMPTY && a[2].tt == LRAW_VEMPTY && lua_rawlen(L, -1) == 0 &&
       lua_rawgeti(L, -1, 3) == LUA_TNIL;
  lua_pop(L, 1);   /* the nil */
  lua_createtable(L, 0, 0);   /* the API's table, made next */
  const lraw_table *k = lraw_table_at(L, -1);
  ok = ok && (!here || (h->tt == k->tt && h->marked == k->marked && h->flags == k->flags &&
                        h->lsizenode == k->lsizenode && h->node == k->node &&
                        h->metatable == NULL && k->next == h));
  lua_pop(L, 1);
  if (ok) {
    u->watch[0] = a, u->watch_size[0] = 3 * sizeof *a;
    u->watch[1] = (void *)h, u->watch_size[1] = here ? sizeof *h : u->watch_size[1];
    for (int i = 0; i < 3; i++) a[i].v.i = 10 + i, a[i].tt = LRAW_VNUMINT;
    ok = lua_rawlen(L, -1) == 3;
    lua_pushinteger(L, 13), lua_rawseti(L, -2, 4);
    for (int i = 1; i <= 4; i++) {
      ok = ok && lua_rawgeti(L, -1, i) == LUA_TNUMBER && lua_tointeger(L, -1) == 9 + i;
      lua_pop(L, 1);
    }
    lua_createtable(L, 0, 1);   /* a metatable set through the API */
    lua_setmetatable(L, -2);
    ok = ok && u->watch[0] == NULL && !u->bad && counted(L) && h->metatable != NULL;
  }
  lua_pop(L, 1);
  lua_gc(L, LUA_GCRESTART);
  lua_gc(L, LUA_GCCOLLECT);
  ok = ok && counted(L) && !u->bad && (!here || u->watch[1] == NULL);   /* collected */
  u->watch[1] = NULL;
  if (!here) atomic_store(&dummy_node, NULL);
  return ok;
}

/* ---- frames and closures ---------------------------------------------------------------- */

/* Called with (42, a table, a full userdata) and upvalues (7, the same table). */
static int frame_cf(lua_State *L) {
  const lraw_tvalue *f = ((const lraw_state *)(void *)L)->ci->func;
  const lraw_tvalue *a1 = lraw_arg(L, 1), *a2 = lraw_arg(L, 2), *a3 = lraw_arg(L, 3);
  const lraw_cclosure *c = f->tt == LRAW_VCCL ? f->v.gc : NULL;
  int ok = lua_gettop(L) == 3 && c && c->nupvalues == 2 && c->f == frame_cf && a1 && a2 &&
           a3 && !lraw_arg(L, 4) && a1->tt == LRAW_VNUMINT && a1->v.i == 42 &&
           a2->tt == LRAW_VTABLE && a2->v.gc == lua_topointer(L, 2) &&
           a3->tt == LRAW_VUSERDATA && lua_type(L, 3) == LUA_TUSERDATA;
  if (ok) {
    const lraw_tvalue *u1 = lraw_upvalue(L, 1), *u2 = lraw_upvalue(L, 2);
    ok = u1->tt == LRAW_VNUMINT && u1->v.i == 7 && u2->tt == LRAW_VTABLE &&
         u2->v.gc == lua_topointer(L, lua_upvalueindex(2));
  }
  lua_pushboolean(L, ok);
  return 1;
}

static int frames_ok(lua_State *L) {
  lua_newtable(L);
  int t = lua_gettop(L);
  lua_pushinteger(L, 7);
  lua_pushvalue(L, t);
  lua_pushcclosure(L, frame_cf, 2);
  lua_pushinteger(L, 42);
  lua_pushvalue(L, t);
  lua_newuserdatauv(L, 8, 1);
  lua_call(L, 3, 1);
  int ok = lua_toboolean(L, -1);
  lua_settop(L, t - 1);
  return ok;
}

/* Two closures of one body share a prototype; another body has another. */
static int closures_ok(lua_State *L) {
  if (luaL_loadstring(L, "local t = {} for i = 1, 2 do t[i] = function() return i end end "
                         "return t[1], t[2], function() end") != LUA_OK)
    return 0;
  lua_call(L, 0, 3);
  const lraw_lclosure *a = lua_topointer(L, -3), *c = lua_topointer(L, -1);
  const void *pa = lraw_proto(L, -3), *pb = lraw_proto(L, -2), *pc = lraw_proto(L, -1);
  int ok = a->nupvalues == 1 && c->nupvalues == 0 && pa && pa == pb && pc && pa != pc;
  lua_pushcfunction(L, frame_cf);   /* a light C function has none */
  ok = ok && lraw_proto(L, -1) == NULL;
  lua_pop(L, 4);
  return ok;
}

/* ---- the collector ---------------------------------------------------------------------- */

static int count_gc(lua_State *L) {
  (*(int *)lua_touserdata(L, lua_upvalueindex(1)))++;
  return 0;
}

/* Two tables given a finalizer each become finobj's head; dropped and collected,
** their finalizers run and both lists are empty. A full generational collection
** leaves what the stack holds black; a new table is white. */
static int collector_ok(lua_State *L, int *ran) {
  const lraw_global *g = ((const lraw_state *)(void *)L)->l_G;
  int ok = g->l_registry.v.gc == lua_topointer(L, LUA_REGISTRYINDEX) &&
           g->l_registry.tt == LRAW_VTABLE && g->allgc && !lraw_finalizers_pending(L);
  if (!ok) return 0;
  lua_createtable(L, 0, 1);   /* the metatable */
  int mt = lua_gettop(L);
  lua_pushlightuserdata(L, ran);
  lua_pushcclosure(L, count_gc, 1);
  lua_setfield(L, mt, "__gc");
  for (int i = 0; i < 2; i++) {
    lua_newtable(L);
    lua_pushvalue(L, mt);
    lua_setmetatable(L, -2);
    ok = ok && g->finobj == lua_topointer(L, -1) && !g->tobefnz;
  }
  lua_settop(L, mt);
  lua_gc(L, LUA_GCCOLLECT);
  ok = ok && *ran == 2 && !lraw_finalizers_pending(L);
  lua_gc(L, LUA_GCGEN, 0, 0);
  lua_gc(L, LUA_GCCOLLECT);
  ok = ok && (lraw_table_at(L, mt)->marked & LRAW_BLACK);
  lua_newtable(L);
  ok = ok && !(lraw_table_at(L, -1)->marked & LRAW_BLACK);
  lua_gc(L, LUA_GCINC, 0, 0, 0);
  lua_settop(L, mt - 1);
  return ok;
}

/* ---- the check -------------------------------------------------------------------------- */

static void *check_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  check_ud *u = ud;
  for (int i = 0; ptr && i < 2; i++)
    if (ptr == u->watch[i]) {   /* news_ok's: freed or resized from its size */
      u->bad |= osize != u->watch_size[i];
      u->watch[i] = NULL;
    }
  if (nsize == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, nsize);
}

static int check_cf(lua_State *L) {
  int *ran = lua_touserdata(L, 1);
  check_ud *u = lua_touserdata(L, 2);
  lua_settop(L, 0);
  lua_pushboolean(L, arrays_ok(L) && hashes_ok(L) && writes_ok(L) && news_ok(L, u) &&
                         frames_ok(L) && closures_ok(L) && collector_ok(L, ran));
  return 1;
}

static void check_once(void) {
  int ok = 0, ran = 0;
  check_ud token = {{NULL, NULL}, {0, 0}, 0};
  lua_State *L = NULL;
  const char *off = getenv("LPVM_NO_LRAW");   /* to compare both ways, or rule it out */
  if (!(off && *off && strcmp(off, "0") != 0) && LUA_VERSION_NUM == 504 && sizeof(lraw_tvalue) == 16 &&
      offsetof(lraw_string, contents) == 24 && offsetof(lraw_cclosure, upvalue) == 32)
    L = lua_newstate(check_alloc, &token);
  if (L) {
    const lraw_global *g = ((const lraw_state *)(void *)L)->l_G;
    ok = g && g->frealloc == check_alloc && g->ud == &token;
    lua_pushcfunction(L, check_cf);
    lua_pushlightuserdata(L, &ran);
    lua_pushlightuserdata(L, &token);
    ok = ok && lua_pcall(L, 2, 1, 0) == LUA_OK && lua_toboolean(L, -1);
    lua_close(L);
  }
  atomic_store(&lraw_layout, ok ? 1 : -1);
}

int lraw_check(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, check_once);
  return atomic_load(&lraw_layout);
}

/* ---- making ------------------------------------------------------------------------------ */

/* dummy_node: the node part of a table without one, liblua's one static dummy node,
** the same for every state, learnt by the check (news_ok) from a table lua_createtable
** made. Until a thread sees it (an atomic: NULL then) lraw_new_array takes Lua's way. */

/* The table and its array made here, when the collector's debt stays <= 0 with
** both (lua_createtable then would make the table and, in luaC_checkGC, do nothing
** more): luaC_newobj's and luaH_new's stores, one call to the allocator each, the
** debt counted as luaM_malloc_ counts it. NULL (nothing made, nothing counted):
** Lua's way. */
static lraw_tvalue *new_here(lraw_state *s, unsigned n) {
  lraw_global *g = s->l_G;
  size_t size = (size_t)n * sizeof(lraw_tvalue);
  void *node = atomic_load_explicit(&dummy_node, memory_order_relaxed);
  if (!node || g->GCdebt + (ptrdiff_t)(sizeof(lraw_table) + size) > 0) return NULL;
  lraw_table *h = g->frealloc(g->ud, NULL, LUA_TTABLE, sizeof *h);   /* luaM_newobject */
  if (!h) return NULL;
  lraw_tvalue *a = g->frealloc(g->ud, NULL, 0, size);   /* luaM_reallocvector */
  if (!a) {
    g->frealloc(g->ud, h, sizeof *h, 0);
    return NULL;
  }
  g->GCdebt += (ptrdiff_t)(sizeof *h + size);
  h->marked = g->currentwhite & LRAW_WHITES;   /* luaC_newobj: white, linked first */
  h->tt = LRAW_VTABLE & 0x3F;
  h->next = (void *)g->allgc;
  g->allgc = h;
  h->flags = LRAW_FLAGS_NEW;   /* luaH_new: no metamethods, the dummy node */
  h->lsizenode = 0;
  h->node = node;
  h->lastfree = NULL;
  h->metatable = NULL;
  for (unsigned i = 0; i < n; i++) a[i].tt = LRAW_VEMPTY;
  h->array = a;
  h->alimit = n;
  lraw_tvalue *top = s->top;   /* pushed: the caller has the room, as for any push */
  top->v.gc = h, top->tt = LRAW_VTABLE;
  s->top = top + 1;
  return a;
}

lraw_tvalue *lraw_new_array(lua_State *L, unsigned n) {
  lraw_state *s = (lraw_state *)(void *)L;
  if (n - 1 >= LRAW_NEWMAX) {   /* 0, or too big for this short way */
    lua_createtable(L, (int)(n > INT_MAX ? INT_MAX : n), 0);
    return ((lraw_table *)s->top[-1].v.gc)->array;
  }
  lraw_tvalue *a = new_here(s, n);
  if (a) return a;
  lua_createtable(L, 0, 0);   /* its collector step taken here */
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
  h->alimit = n;   /* the real size: the flag LRAW_BITRAS is clear in a new table */
  return a;
}
