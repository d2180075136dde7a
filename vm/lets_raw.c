/*
** lets_raw.c -- the check that lets_raw.h's mirror of Lua 5.4's structures reads this
** Lua right: values made through the API, read through the mirror, compared. Run once
** (the first `require "ets"`); a mismatch leaves lets_raw() at 0 and the ETS fast paths
** on the public API.
*/
#include <lauxlib.h>

#include "vm/lets_raw.h"

_Atomic int lets_raw_layout;

static const char long_string[] = "a string longer than Lua's short ones (40 bytes at most)";

/* String element i of the table on top: the mirror's bytes are Lua's. */
static int string_ok(lua_State *L, const raw_table *t, int i) {
  size_t len;
  lua_rawgeti(L, -1, i);
  const char *s = lua_tolstring(L, -1, &len);
  const raw_value *v = &t->array[i - 1];
  const raw_string *ts = v->v.gc;
  int ok = s && ts && s == ts->contents &&
           len == (v->tt == RAW_SHRSTR ? (size_t)ts->shrlen : ts->lnglen);
  lua_pop(L, 1);
  return ok;
}

/* A table of every kind of element read in place. */
static int elements_ok(lua_State *L) {
  lua_createtable(L, 8, 0);
  lua_pushinteger(L, -0x1122334455667788); lua_rawseti(L, -2, 1);
  lua_pushnumber(L, 2.5); lua_rawseti(L, -2, 2);
  lua_pushboolean(L, 1); lua_rawseti(L, -2, 3);
  lua_pushboolean(L, 0); lua_rawseti(L, -2, 4);
  lua_pushliteral(L, "ab"); lua_rawseti(L, -2, 5);
  lua_pushstring(L, long_string); lua_rawseti(L, -2, 6);
  lua_pushnil(L); lua_rawseti(L, -2, 8);   /* 7 never set (empty), 8 set to nil */
  const raw_table *t = lua_topointer(L, -1);
  const raw_value *a = t ? t->array : NULL;
  int ok = a && t->alimit == 8 && !(t->flags & RAW_BITRAS) && !t->lastfree &&
           lua_rawlen(L, -1) == 6 && t->alimit >= 6 &&
           a[0].tt == RAW_INT && a[0].v.i == -0x1122334455667788 &&
           a[1].tt == RAW_FLOAT && a[1].v.n == 2.5 && a[2].tt == RAW_TRUE &&
           a[3].tt == RAW_FALSE && a[4].tt == RAW_SHRSTR && a[5].tt == RAW_LNGSTR &&
           raw_is_nil(&a[6]) && raw_is_nil(&a[7]) && string_ok(L, t, 5) &&
           string_ok(L, t, 6);
  lua_pop(L, 1);
  return ok;
}

/* Values written in place into a new table read back through the API. */
static int writes_ok(lua_State *L) {
  int top = lua_gettop(L), ok = 0;
  lua_createtable(L, 4, 0);
  const raw_table *t = lua_topointer(L, -1);
  if (t && t->alimit == 4 && t->array) {
    t->array[0].v.i = -0x1122334455667788; t->array[0].tt = RAW_INT;
    t->array[1].v.n = 2.5; t->array[1].tt = RAW_FLOAT;
    t->array[2].tt = RAW_TRUE;
    t->array[3].tt = RAW_FALSE;
    ok = lua_rawlen(L, -1) == 4 &&
         lua_rawgeti(L, -1, 1) == LUA_TNUMBER && lua_isinteger(L, -1) &&
         lua_tointeger(L, -1) == -0x1122334455667788 &&
         lua_rawgeti(L, -2, 2) == LUA_TNUMBER && lua_tonumber(L, -1) == 2.5 &&
         lua_rawgeti(L, -3, 3) == LUA_TBOOLEAN && lua_toboolean(L, -1) &&
         lua_rawgeti(L, -4, 4) == LUA_TBOOLEAN && !lua_toboolean(L, -1);
  }
  lua_settop(L, top);
  return ok;
}

/* A hash part: lastfree set. */
static int hash_part_ok(lua_State *L) {
  lua_createtable(L, 1, 1);
  lua_pushboolean(L, 1); lua_rawseti(L, -2, 1);
  lua_pushboolean(L, 1); lua_setfield(L, -2, "k");
  const raw_table *t = lua_topointer(L, -1);
  int ok = t && t->lastfree && t->alimit == 1 && t->array && t->array[0].tt == RAW_TRUE;
  lua_pop(L, 1);
  return ok;
}

/* Called with (42, a table, a full userdata) and upvalues (7, the same table): the
** mirror finds the arguments and upvalues, and no fourth argument. */
static int frame_ok(lua_State *L) {
  const raw_value *f = ((const raw_state *)(void *)L)->ci->func;
  const raw_value *a1 = lets_raw_arg(L, 1), *a2 = lets_raw_arg(L, 2),
                  *a3 = lets_raw_arg(L, 3), *u1, *u2;
  const raw_cclosure *c = f->tt == RAW_CCLOSURE ? f->v.gc : NULL;
  int ok = lua_gettop(L) == 3 && c && c->nupvalues == 2 && c->f == frame_ok &&
           a1 && a2 && a3 && !lets_raw_arg(L, 4) &&
           a1->tt == RAW_INT && a1->v.i == 42 &&
           a2->tt == RAW_TABLE && a2->v.gc == lua_topointer(L, 2) &&
           a3->tt == RAW_USERDATA && lua_type(L, 3) == LUA_TUSERDATA;
  if (ok) {
    u1 = lets_raw_upvalue(L, 1);
    u2 = lets_raw_upvalue(L, 2);
    ok = u1->tt == RAW_INT && u1->v.i == 7 && u2->tt == RAW_TABLE &&
         u2->v.gc == lua_topointer(L, lua_upvalueindex(2));
  }
  lua_pushboolean(L, ok);
  return 1;
}

void lets_raw_check(lua_State *L) {
  if (atomic_load_explicit(&lets_raw_layout, memory_order_relaxed) != 0) return;
  int ok = LUA_VERSION_NUM == 504 && sizeof(raw_value) == 16 &&
           offsetof(raw_string, contents) == 24 && offsetof(raw_cclosure, upvalue) == 32 &&
           offsetof(raw_state, ci) == 32 && lua_checkstack(L, 8) &&
           elements_ok(L) && writes_ok(L) && hash_part_ok(L);
  if (ok) {
    lua_pushinteger(L, 7);
    lua_newtable(L);
    lua_pushvalue(L, -1);                      /* upvalue 2 and argument 2: one table */
    lua_insert(L, -3);                         /* t, 7, t */
    lua_pushcclosure(L, frame_ok, 2);          /* t, f */
    lua_insert(L, -2);                         /* f, t */
    lua_pushinteger(L, 42);
    lua_insert(L, -2);                         /* f, 42, t */
    lua_newuserdatauv(L, 8, 1);
    lua_call(L, 3, 1);
    ok = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  atomic_store_explicit(&lets_raw_layout, ok ? 1 : -1, memory_order_relaxed);
}
