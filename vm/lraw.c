/*
** lraw.c -- the check that lraw.h's mirror reads this Lua right.
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
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "vm/lraw.h"

_Atomic int lraw_layout = 0;
_Atomic int lraw_tail = 0;
_Atomic int lraw_calls = 0;

static const char long_s[] = "a string longer than forty bytes, so a long one";

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
  return ok && lraw_new_check();   /* lraw_new.c's tables, on a state of its own */
}

/* Full userdata without user values (vm/lmod_bin.c reads a binary's in place): the
** tag, the header, the metatable (or none), the block's address; and values at
** light-userdata keys (its interned binaries). */
static int udata_ok(lua_State *L) {
  lua_createtable(L, 1, 0);
  int t = lua_gettop(L);
  void *p = lua_newuserdatauv(L, 24, 0);
  lua_newtable(L);
  lua_pushvalue(L, -1);
  lua_setmetatable(L, -3);   /* t ud mt */
  lua_pushvalue(L, -2), lua_rawseti(L, t, 1);
  const lraw_table *h = lraw_table_at(L, t);
  const lraw_udata0 *u = h->array[0].v.gc;
  int ok = h->array[0].tt == LRAW_VUSERDATA && u->tt == (LRAW_VUSERDATA & 0x3F) &&
           u->nuvalue == 0 && u->len == 24 && u->metatable == lua_topointer(L, -1) &&
           lraw_udata_block(u) == p;
  p = lua_newuserdatauv(L, 8, 0);
  lua_rawseti(L, t, 1);
  u = h->array[0].v.gc;
  ok = ok && u->metatable == NULL && u->len == 8 && lraw_udata_block(u) == p;
  /* light-userdata keys (lraw_get_lightud): 40 of them, some colliding, in the
  ** registry too; each found with its value, an absent one not */
  static const char keys[48];
  lua_newtable(L);
  for (int i = 0; i < 40; i++) lua_pushinteger(L, i), lua_rawsetp(L, -2, keys + i);
  lua_pushinteger(L, 7), lua_rawsetp(L, LUA_REGISTRYINDEX, keys + 47);
  const lraw_table *k = lraw_table_at(L, -1), *reg = lraw_table_at(L, LUA_REGISTRYINDEX);
  for (int i = 0; ok && i < 40; i++) {
    const lraw_tvalue *v = lraw_get_lightud(k, keys + i);
    ok = v && v->tt == LRAW_VNUMINT && v->v.i == i;
  }
  const lraw_tvalue *r = lraw_get_lightud(reg, keys + 47);
  ok = ok && !lraw_get_lightud(k, keys + 41) && r && r->tt == LRAW_VNUMINT && r->v.i == 7;
  lua_pushnil(L), lua_rawsetp(L, LUA_REGISTRYINDEX, keys + 47);
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
  ok = ok && (lraw_table_at(L, mt)->marked & LRAW_BLACK) && lraw_gc_generational(L);
  lua_newtable(L);
  ok = ok && !(lraw_table_at(L, -1)->marked & LRAW_BLACK);
  lua_gc(L, LUA_GCINC, 0, 0, 11);   /* lraw_gc_stepsize: the byte after the step multiplier */
  ok = ok && lraw_gc_stepsize(L) == 11 && !lraw_gc_generational(L);
  lua_gc(L, LUA_GCINC, 0, 0, 13);
  ok = ok && lraw_gc_stepsize(L) == 13;
  lua_settop(L, mt - 1);
  return ok;
}

/* ---- the global state's tail, and the collector's parameters --------------------------- */

static int tail_panic(lua_State *L) {
  (void)L;
  return 0;
}

/* The main thread, the panic function, the metamethods' names (first and last), the
** basic types' metatables as lua_setmetatable sets them, and the collector's mode and
** parameters as lua_gc sets them (Lua 5.4 keeps pause and multipliers divided by 4). */
static int tail_check(lua_State *L) {
  const lraw_global *g = ((const lraw_state *)(void *)L)->l_G;
  lua_CFunction old = lua_atpanic(L, tail_panic);
  int ok = g->mainthread == (const void *)L && g->panic == tail_panic;
  lua_atpanic(L, old);
  lua_pushliteral(L, "__index");
  lua_pushliteral(L, "__close");
  ok = ok && g->tmname[0] == lua_topointer(L, -2) && g->tmname[24] == lua_topointer(L, -1);
  lua_pop(L, 2);
  /* a light C function at "__index" of a small table, found by lraw_get_shrstr */
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, 1), lua_setfield(L, -2, "__name");
  lua_pushcfunction(L, tail_panic), lua_setfield(L, -2, "__index");
  lua_pushinteger(L, 2), lua_setfield(L, -2, "__call");
  const lraw_tvalue *v = ok ? lraw_get_shrstr(lraw_table_at(L, -1), g->tmname[0]) : NULL;
  ok = ok && v && v->tt == LRAW_VLCF && v->v.f == tail_panic &&
       !lraw_get_shrstr(lraw_table_at(L, -1), g->tmname[1]);   /* "__newindex" */
  lua_pop(L, 1);
  for (int i = 0; i < LUA_NUMTYPES; i++) ok = ok && g->mt[i] == NULL;
  lua_pushboolean(L, 1);
  lua_newtable(L);
  const void *t = lua_topointer(L, -1);
  lua_setmetatable(L, -2);
  lua_pushinteger(L, 0);
  lua_newtable(L);
  const void *u = lua_topointer(L, -1);
  lua_setmetatable(L, -2);
  ok = ok && g->mt[LUA_TBOOLEAN] == t && g->mt[LUA_TNUMBER] == u && g->mt[LUA_TSTRING] == NULL;
  lua_pushnil(L), lua_setmetatable(L, -2);
  lua_pushnil(L), lua_setmetatable(L, -3);
  lua_pop(L, 2);
  ok = ok && g->mt[LUA_TBOOLEAN] == NULL && g->mt[LUA_TNUMBER] == NULL;
  lua_gc(L, LUA_GCGEN, 20, 100);
  ok = ok && g->gckind == 1 && g->genminormul == 20 && g->genmajormul == 25;
  lua_gc(L, LUA_GCINC, 120, 300, 11);
  ok = ok && g->gckind == 0 && g->gcpause == 30 && g->gcstepmul == 75 && g->gcstepsize == 11;
  lua_gc(L, LUA_GCINC, 200, 100, 13);
  ok = ok && g->gcpause == 50 && g->gcstepmul == 25 && g->gcstepsize == 13;
  unsigned char running = g->gcstp;
  lua_gc(L, LUA_GCSTOP);
  ok = ok && g->gcstp != running;
  lua_gc(L, LUA_GCRESTART);
  return ok && g->gcstp == running;
}

/* ---- call frames (lraw_ci, lraw_proto_head) -------------------------------------------------- */

/* Called by the Lua function of calls_ok with the string constant "lraw_k": its frame
** below this one, its closure, prototype, constants and next instruction. */
static int calls_cf(lua_State *L) {
  const lraw_ci *ci = (const lraw_ci *)(const void *)((const lraw_state *)(void *)L)->ci;
  const lraw_ci *up = ci->previous;
  lua_Debug ar;
  int ok = up && up->next == ci && ci->func->tt == LRAW_VLCF && ci->func->v.f == calls_cf &&
           ci->top >= ((const lraw_state *)(void *)L)->top && up->func < ci->func &&
           up->func->tt == LRAW_VLCL && lua_getstack(L, 1, &ar) && lua_getinfo(L, "f", &ar) &&
           up->func->v.gc == lua_topointer(L, -1);
  const lraw_proto_head *p = ok ? lraw_proto(L, -1) : NULL;
  const char *code = p ? p->code : NULL;
  ok = ok && p && p->tt == 0x0A /* LUA_VPROTO */ && p->sizek == 1 &&
       p->numparams == 0 && p->is_vararg && p->k[0].tt == LRAW_VSHRSTR &&
       strcmp(((const lraw_string *)p->k[0].v.gc)->contents, "lraw_k") == 0 &&
       p->sizecode > 2 && (const char *)up->savedpc > code &&
       (const char *)up->savedpc <= code + 4 * (size_t)p->sizecode;
  lua_pushboolean(L, ok);
  return 1;
}

static int calls_ok(lua_State *L) {
  if (luaL_loadstring(L, "local cf = ... return (cf('lraw_k'))") != LUA_OK) return 0;
  lua_pushcfunction(L, calls_cf);
  int ok = lua_pcall(L, 1, 1, 0) == LUA_OK && lua_toboolean(L, -1);
  lua_pop(L, 1);
  return ok;
}

/* ---- the check -------------------------------------------------------------------------- */

static void *check_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  (void)ud, (void)osize;
  if (nsize == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, nsize);
}

static int check_cf(lua_State *L) {
  int *ran = lua_touserdata(L, 1);
  lua_settop(L, 0);
  int ok = arrays_ok(L) && udata_ok(L) && hashes_ok(L) && writes_ok(L) && frames_ok(L) &&
           closures_ok(L) && collector_ok(L, ran);
  lua_pushboolean(L, ok);
  lua_pushboolean(L, ok && tail_check(L));
  lua_pushboolean(L, ok && calls_ok(L));
  return 3;
}

static void check_once(void) {
  int ok = 0, tail = 0, calls = 0, token = 0, ran = 0;
  lua_State *L = NULL;
  const char *off = getenv("LPVM_NO_LRAW");   /* to compare both ways, or rule it out */
  if (!(off && *off && strcmp(off, "0") != 0) && LUA_VERSION_NUM == 504 && sizeof(lraw_tvalue) == 16 &&
      offsetof(lraw_string, contents) == 24 && offsetof(lraw_cclosure, upvalue) == 32 &&
      sizeof(lraw_udata0) == 32)
    L = lua_newstate(check_alloc, &token);
  if (L) {
    const lraw_global *g = ((const lraw_state *)(void *)L)->l_G;
    ok = g && g->frealloc == check_alloc && g->ud == &token;
    lua_pushcfunction(L, check_cf);
    lua_pushlightuserdata(L, &ran);
    ok = ok && lua_pcall(L, 1, 3, 0) == LUA_OK && lua_toboolean(L, -3);
    tail = ok && lua_toboolean(L, -2);
    calls = ok && lua_toboolean(L, -1);
    lua_close(L);
  }
  atomic_store(&lraw_tail, tail ? 1 : -1);
  atomic_store(&lraw_calls, calls ? 1 : -1);
  atomic_store(&lraw_layout, ok ? 1 : -1);
}

int lraw_check(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, check_once);
  return atomic_load(&lraw_layout);
}
