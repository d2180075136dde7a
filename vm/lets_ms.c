/*
** lets_ms.c -- match specifications of `require "ets"` written as Erlang's terms
** (lets.h; docs/ets.md, "Match specifications").
**
** They keep Erlang's shape, with Lua tables for tuples and lists:
** { {Head, {Guard...}, {Body...}}, ... }. In Head the strings "_" and "$N" are the
** match atoms; a guard {op, a, b} is a call ({">", "$1", 3}); in a Body "$_", "$$"
** and "$N" are the special atoms and a table builds a list. Everywhere else strings
** stay binaries, as in every other term lpvm sends.
*/
#include <lauxlib.h>
#include <string.h>

#include "vm/lets.h"

#define MS_DEPTH 100

/* Where a value sits decides what its strings mean. */
enum { IN_HEAD, IN_EXPR, IN_LITERAL };

static void put_ms_value(lua_State *L, int idx, lpvm_tbuf *b, int arg, int where,
                         int depth);

/* "_" and "$N" in a head, "$_", "$$" and "$N" in an expression: atoms. */
static int special_atom(const char *s, size_t n, int where) {
  if (where == IN_LITERAL || n == 0) return 0;
  if (where == IN_HEAD && n == 1 && s[0] == '_') return 1;
  if (s[0] != '$' || n < 2) return 0;
  if (where == IN_EXPR && n == 2 && (s[1] == '_' || s[1] == '$')) return 1;
  for (size_t i = 1; i < n; i++)
    if (s[i] < '0' || s[i] > '9') return 0;
  return 1;
}

static void put_ms_table(lua_State *L, int t, lpvm_tbuf *b, int arg, int where, int depth) {
  lua_Unsigned n = lua_rawlen(L, t);
  int seq = 1;
  lua_pushnil(L);
  lua_Unsigned count = 0;
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    lua_Integer k;
    if (!lua_isinteger(L, -1) || (k = lua_tointeger(L, -1)) < 1 || (lua_Unsigned)k > n) seq = 0;
    count++;
  }
  if (seq && count == n) {   /* a list */
    lpvm_put_list(b, (uint32_t)n);
    for (lua_Unsigned i = 1; i <= n; i++) {
      lua_rawgeti(L, t, (lua_Integer)i);
      put_ms_value(L, -1, b, arg, where, depth + 1);
      lua_pop(L, 1);
    }
    lpvm_put_nil(b);
    return;
  }
  lpvm_put_map(b, (uint32_t)count);   /* a map pattern: its keys are literal */
  lua_pushnil(L);
  while (lua_next(L, t)) {
    put_ms_value(L, -2, b, arg, IN_LITERAL, depth + 1);
    put_ms_value(L, -1, b, arg, where, depth + 1);
    lua_pop(L, 1);
  }
}

static void put_ms_value(lua_State *L, int idx, lpvm_tbuf *b, int arg, int where,
                         int depth) {
  idx = lua_absindex(L, idx);
  if (depth > MS_DEPTH) luaL_argerror(L, arg, "match specification nested too deep");
  if (lua_type(L, idx) == LUA_TSTRING) {
    size_t n;
    const char *s = lua_tolstring(L, idx, &n);
    if (special_atom(s, n, where)) { lpvm_put_atom_len(b, s, n); return; }
  }
  if (lua_type(L, idx) == LUA_TTABLE) { put_ms_table(L, idx, b, arg, where, depth); return; }
  lets_put_value(L, idx, b, arg);
}

/* A guard or body expression: {op, args...} is a call (op an atom), other tables build
** lists (bodies) and {"const", x} quotes x. */
static void put_expr(lua_State *L, int idx, lpvm_tbuf *b, int arg, int call, int depth) {
  idx = lua_absindex(L, idx);
  if (depth > MS_DEPTH) luaL_argerror(L, arg, "match specification nested too deep");
  if (lua_type(L, idx) != LUA_TTABLE) { put_ms_value(L, idx, b, arg, IN_EXPR, depth); return; }
  lua_Unsigned n = lua_rawlen(L, idx);
  lua_rawgeti(L, idx, 1);
  int is_call = call && n >= 1 && lua_type(L, -1) == LUA_TSTRING;
  if (is_call) {
    size_t fl;
    const char *f = lua_tolstring(L, -1, &fl);
    lpvm_put_tuple(b, (uint32_t)n);
    lpvm_put_atom_len(b, f, fl);
    int quote = fl == 5 && memcmp(f, "const", 5) == 0;
    lua_pop(L, 1);
    for (lua_Unsigned i = 2; i <= n; i++) {
      lua_rawgeti(L, idx, (lua_Integer)i);
      if (quote) put_ms_value(L, -1, b, arg, IN_LITERAL, depth + 1);
      else put_expr(L, -1, b, arg, 1, depth + 1);
      lua_pop(L, 1);
    }
    return;
  }
  lua_pop(L, 1);
  lpvm_put_list(b, (uint32_t)n);   /* a list built from expressions */
  for (lua_Unsigned i = 1; i <= n; i++) {
    lua_rawgeti(L, idx, (lua_Integer)i);
    put_expr(L, -1, b, arg, call, depth + 1);
    lua_pop(L, 1);
  }
  lpvm_put_nil(b);
}

/* A head: a Lua array at the top is the object's tuple. */
static void put_head(lua_State *L, int idx, lpvm_tbuf *b, int arg) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TTABLE) { put_ms_value(L, idx, b, arg, IN_HEAD, 0); return; }
  lua_Unsigned n = lua_rawlen(L, idx);
  lpvm_put_tuple(b, (uint32_t)n);
  for (lua_Unsigned i = 1; i <= n; i++) {
    lua_rawgeti(L, idx, (lua_Integer)i);
    put_ms_value(L, -1, b, arg, IN_HEAD, 1);
    lua_pop(L, 1);
  }
}

/* The list of one table's expressions (guards: calls; body: lists). tuple: the last
** one, when a table, builds a tuple ({{E1, ..., En}}): select_replace's new object. */
static void put_expr_list(lua_State *L, int idx, lpvm_tbuf *b, int arg, int call,
                          int tuple) {
  if (lua_isnil(L, idx)) { lpvm_put_nil(b); return; }
  if (!lua_istable(L, idx)) luaL_argerror(L, arg, "guards and bodies are tables");
  lua_Unsigned n = lua_rawlen(L, idx);
  lpvm_put_list(b, (uint32_t)n);
  for (lua_Unsigned i = 1; i <= n; i++) {
    if (lua_rawgeti(L, idx, (lua_Integer)i) == LUA_TTABLE && tuple && i == n) {
      lua_Unsigned k = lua_rawlen(L, -1);
      lpvm_put_tuple(b, 1);
      lpvm_put_tuple(b, (uint32_t)k);
      for (lua_Unsigned j = 1; j <= k; j++) {
        lua_rawgeti(L, -1, (lua_Integer)j);
        put_expr(L, -1, b, arg, call, 1);
        lua_pop(L, 1);
      }
    } else {
      put_expr(L, -1, b, arg, call, 0);
    }
    lua_pop(L, 1);
  }
  lpvm_put_nil(b);
}

static void put_ms(lua_State *L, int idx, lpvm_tbuf *b, int arg, int tuple);

void lets_put_ms(lua_State *L, int idx, lpvm_tbuf *b, int arg) { put_ms(L, idx, b, arg, 0); }

void lets_put_ms_replace(lua_State *L, int idx, lpvm_tbuf *b, int arg) {
  put_ms(L, idx, b, arg, 1);
}

/* { {head, {guard...}, {body...}}, ... }: a missing body is {"$_"}. */
static void put_ms(lua_State *L, int idx, lpvm_tbuf *b, int arg, int tuple) {
  luaL_checktype(L, idx, LUA_TTABLE);
  lua_Unsigned n = lua_rawlen(L, idx);
  lpvm_put_list(b, (uint32_t)n);
  for (lua_Unsigned i = 1; i <= n; i++) {
    if (lua_rawgeti(L, idx, (lua_Integer)i) != LUA_TTABLE)
      luaL_argerror(L, arg, "a clause is {head, guards, body}");
    int c = lua_gettop(L);
    lpvm_put_tuple(b, 3);
    lua_rawgeti(L, c, 1);
    put_head(L, -1, b, arg);
    lua_rawgeti(L, c, 2);
    put_expr_list(L, -1, b, arg, 1, 0);
    if (lua_rawgeti(L, c, 3) == LUA_TNIL) {
      lpvm_put_list(b, 1);
      lpvm_put_atom(b, "$_");
      lpvm_put_nil(b);
    } else {
      put_expr_list(L, -1, b, arg, 0, tuple);
    }
    lua_settop(L, c - 1);
  }
  lpvm_put_nil(b);
}

/* One clause {pattern, {}, {body}} for match, match_object and match_delete. */
void lets_put_pattern_ms(lua_State *L, int idx, lpvm_tbuf *b, const char *body) {
  luaL_checkany(L, idx);
  lpvm_put_list(b, 1);
  lpvm_put_tuple(b, 3);
  put_head(L, idx, b, idx);
  lpvm_put_nil(b);
  lpvm_put_list(b, 1);
  lpvm_put_atom(b, body);
  lpvm_put_nil(b);
  lpvm_put_nil(b);
}
