/*
** test_lraw.c -- the mirror of Lua's structures (vm/lraw.h): trusted on this liblua
** (Debian's 5.4: if this fails, every fast path that reads Lua in place has fallen
** back to the C API -- correct, but slower -- and lraw.h needs a look), and each of
** its readers agreeing with the API on values a program makes.
*/
#include <criterion/criterion.h>
#include <lauxlib.h>
#include <lualib.h>
#include <string.h>

#include "vm/lraw.h"

/* A state with the base library only (io's standard files have finalizers). */
static lua_State *state(const char *src) {
  lua_State *L = luaL_newstate();
  luaL_requiref(L, "_G", luaopen_base, 1);
  luaL_requiref(L, "string", luaopen_string, 1);
  lua_settop(L, 0);
  cr_assert_eq(luaL_dostring(L, src), LUA_OK, "%s", lua_tostring(L, -1));
  return L;
}

Test(lraw, trusted_on_this_lua) {
  cr_assert_eq(lraw_check(), 1, "lraw.h's mirror was refused by " LUA_RELEASE);
  cr_assert(lraw_ok());
  cr_assert(lraw_tail_ok(), "lraw.h's tail (mt, tmname, GC parameters) refused by " LUA_RELEASE);
  cr_assert(lraw_calls_ok(), "lraw.h's frames (lraw_ci, lraw_proto_head) refused by " LUA_RELEASE);
}

/* The tail: a metatable's light C function found at "__index" by the interned name. */
static int tail_fn(lua_State *L) { return lua_gettop(L); }

Test(lraw, tail_metatables_and_index) {
  cr_assert(lraw_tail_ok());
  lua_State *L = luaL_newstate();
  const lraw_global *g = lraw_g(L);
  lua_createtable(L, 0, 9);
  for (int i = 0; i < 8; i++) lua_pushinteger(L, i), lua_setfield(L, -2, i % 2 ? "__add" : "__x");
  lua_pushcfunction(L, tail_fn), lua_setfield(L, -2, "__index");
  lua_pushliteral(L, "");
  lua_pushvalue(L, -2);
  lua_setmetatable(L, -2);
  cr_assert_eq(g->mt[LUA_TSTRING], lraw_table_at(L, 1));
  const lraw_tvalue *v = lraw_get_shrstr(g->mt[LUA_TSTRING], g->tmname[0]);
  cr_assert(v && v->tt == LRAW_VLCF && v->v.f == tail_fn);
  lua_pushnil(L), lua_setfield(L, 1, "__index");
  cr_assert_null(lraw_get_shrstr(g->mt[LUA_TSTRING], g->tmname[0]), "a nil value reads as absent");
  lua_close(L);
}

Test(lraw, tables_as_the_api_sees_them) {
  cr_assert(lraw_ok());
  lua_State *L = state("local t = {} for i = 1, 100 do t[i] = i * 3 end "
                       "for i = 60, 100 do t[i] = nil end local _ = #t "
                       "return t, {x = 1, [2] = 'two'}, {1.5, 'a', string.rep('b', 50)}");
  const lraw_table *t = lraw_table_at(L, 1);
  lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
  cr_assert_eq(n, 59);
  cr_assert_leq((lua_Integer)t->alimit, (lua_Integer)lraw_real_asize(t));
  for (lua_Integer i = 1; i <= (lua_Integer)lraw_real_asize(t); i++) {
    const lraw_tvalue *v = &t->array[i - 1];
    int ty = lua_rawgeti(L, 1, i);
    if (i <= n) cr_assert(v->tt == LRAW_VNUMINT && v->v.i == lua_tointeger(L, -1));
    else cr_assert(lraw_is_nil(v) && ty == LUA_TNIL);
    lua_pop(L, 1);
  }
  const lraw_table *h = lraw_table_at(L, 2);
  cr_assert_not_null(h->lastfree, "a table with a key 'x' has a hash part");
  const lraw_table *s = lraw_table_at(L, 3);
  size_t len, alen;
  cr_assert_eq(s->array[0].tt, LRAW_VNUMFLT);
  cr_assert_eq(s->array[1].tt, LRAW_VSHRSTR);
  cr_assert_eq(s->array[2].tt, LRAW_VLNGSTR);
  lua_rawgeti(L, 3, 3);
  const char *a = lua_tolstring(L, -1, &alen);
  cr_assert_eq(lraw_str(&s->array[2], &len), a);
  cr_assert_eq(len, alen);
  lua_close(L);
}

Test(lraw, prototypes_and_finalizers) {
  cr_assert(lraw_ok());
  lua_State *L = state("local function mk() return function() return 1 end end "
                       "return mk(), mk(), function() end, print");
  cr_assert_not_null(lraw_proto(L, 1));
  cr_assert_eq(lraw_proto(L, 1), lraw_proto(L, 2), "two closures of one body");
  cr_assert_neq(lraw_proto(L, 1), lraw_proto(L, 3));
  cr_assert_null(lraw_proto(L, 4), "a C function has no prototype");
  lua_pushinteger(L, 1);
  cr_assert_null(lraw_proto(L, -1), "nor has a number");
  lua_settop(L, 0);
  lua_gc(L, LUA_GCCOLLECT);
  cr_assert_not(lraw_finalizers_pending(L));
  cr_assert_eq(luaL_dostring(L, "_G.keep = setmetatable({}, {__gc = function() end})"),
               LUA_OK);
  cr_assert(lraw_finalizers_pending(L), "an object alive with a finalizer");
  cr_assert_eq(luaL_dostring(L, "_G.keep = nil collectgarbage()"), LUA_OK);
  cr_assert_not(lraw_finalizers_pending(L), "its finalizer ran");
  lua_close(L);
}

/* An allocator that keeps each block's size before it, so that every free and resize
** is checked against the size Lua gives, counts the bytes alive, and refuses past a
** limit. */
typedef struct sized {
  size_t live, limit;
  int wrong;   /* a free or resize whose old size was not the block's */
} sized;

static void *sized_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  sized *z = ud;
  size_t *h = ptr ? (size_t *)ptr - 2 : NULL;
  if (h && h[0] != osize) z->wrong++;
  if (nsize == 0) {
    if (h) z->live -= h[0];
    free(h);
    return NULL;
  }
  size_t old = h ? h[0] : 0;
  if (z->limit && z->live - old + nsize > z->limit) return NULL;
  size_t *q = realloc(h, nsize + 2 * sizeof(size_t));
  if (!q) return NULL;
  z->live += nsize - old;
  q[0] = nsize;
  return q + 2;
}

static size_t lua_bytes(lua_State *L) {
  return (size_t)lua_gc(L, LUA_GCCOUNT) * 1024 + (size_t)lua_gc(L, LUA_GCCOUNTB);
}

static int new_big(lua_State *L) {
  lraw_new_array(L, (unsigned)lua_tointeger(L, 1));
  return 1;
}

/* Lists made by lraw_new_array in a state whose collector runs along (mode 0: the
** default pace, 1: incremental at pause 100, 2: generational), filled in place,
** grown by Lua, kept or dropped: Lua's count of bytes stays the allocator's, every
** block is freed with its size. Returns how many were made the short way (first on
** the collector's list). */
static int new_arrays_in(sized *z, int mode) {
  lua_State *L = lua_newstate(sized_alloc, z);
  const lraw_global *g = ((const lraw_state *)(void *)L)->l_G;
  if (mode == 1) lua_gc(L, LUA_GCINC, 100, 400, 0);
  if (mode == 2) lua_gc(L, LUA_GCGEN, 0, 0);
  int here = 0;
  lua_createtable(L, 64, 0);   /* lists kept, some of them */
  for (int round = 0; round < 4000; round++) {
    unsigned n = (unsigned)(round % 41);
    lraw_tvalue *a = lraw_new_array(L, n);
    lraw_table *h = lraw_table_at(L, -1);
    here += g->allgc == h && n > 0;
    cr_assert_eq(a, h->array);
    cr_assert_eq(h->alimit, n);
    cr_assert_eq(lua_rawlen(L, -1), 0, "new slots are empty");
    for (unsigned i = 0; i < n; i++) a[i].v.i = (lua_Integer)i * 7, a[i].tt = LRAW_VNUMINT;
    cr_assert_eq(lua_rawlen(L, -1), n);
    lua_pushliteral(L, "past the array");   /* a resize of the array by Lua */
    lua_rawseti(L, -2, (lua_Integer)n + 1);
    for (unsigned i = 1; i <= n; i++) {
      cr_assert_eq(lua_rawgeti(L, -1, i), LUA_TNUMBER);
      cr_assert_eq(lua_tointeger(L, -1), (lua_Integer)(i - 1) * 7);
      lua_pop(L, 1);
    }
    if (round % 3 == 0) lua_rawseti(L, 1, round % 64 + 1);
    else lua_pop(L, 1);
  }
  cr_assert_eq(lua_bytes(L), z->live, "Lua's count is the allocator's (mode %d)", mode);
  lua_gc(L, LUA_GCCOLLECT);
  cr_assert_eq(lua_bytes(L), z->live);
  /* memory refused: lua_createtable's error, and the counts still agree */
  z->limit = z->live + 4096;
  lua_pushcfunction(L, new_big);
  lua_pushinteger(L, 1000);
  cr_assert_eq(lua_pcall(L, 1, 1, 0), LUA_ERRMEM);
  lua_pop(L, 1);
  cr_assert_eq(lua_bytes(L), z->live);
  z->limit = 0;
  lua_close(L);
  cr_assert_eq(z->wrong, 0, "a block freed or resized with another size (mode %d)", mode);
  cr_assert_eq(z->live, 0);
  return here;
}

Test(lraw, new_arrays_as_lua_makes_them) {
  cr_assert(lraw_ok());
  for (int mode = 0; mode < 3; mode++) {
    sized z = {0, 0, 0};
    int here = new_arrays_in(&z, mode);
    cr_assert_gt(here, 1000, "the short way taken %d times of 3,900 (mode %d)", here, mode);
  }
}
