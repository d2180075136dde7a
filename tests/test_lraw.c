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
