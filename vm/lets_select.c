/*
** lets_select.c -- select, match and their kin for `require "ets"` (select_count,
** select_delete, select_replace, match_object, match_delete, test_ms: registered by
** vm/lmod_ets.c with its upvalues), and select/match with a limit, their
** continuations, and select_reverse.
**
**   local objs, cont = ets.select(t, ms, limit)   -- nil when nothing matched at all
**   while objs do ...; objs, cont = ets.select(cont) end
**
** ETS's select/3 returns {Matches, Continuation} or '$end_of_table', and select/1
** continues. In Lua the two are two results, and '$end_of_table' is nil, as first/next
** say the end of a walk. A continuation is a userdata of its own: the table, the
** specification (encoded), the limit, the direction, and the key to continue after;
** each chunk returns a new one, so an old one can be run again and gives the same
** chunk of whatever the table then holds. It is valid as long as its table lives,
** whatever happens to the table (tasks/ets_select.c says why), and raises bad argument
** #1 (no such table) once the table is gone, as ETS's badarg.
**
** A continuation is a term, as ETS's is: a plain Lua table
**   {tab = <the table's reference>, ms = <the specification, encoded>, limit = n,
**    reverse = true (select_reverse; else absent), after = <the key, encoded>}
** (no `after`: the last chunk reached the end, the next is nil), so a process can send
** it to another, which continues on the same table (the sender's access rights are
** not carried: the receiver's own are checked, as for any call). Its bytes are read
** again by the table at every chunk, which checks them as it checks any term from
** outside (a forged or damaged one raises bad argument #1, never reaches further).
** Why not a userdata, as it was: a userdata cannot be sent; and the specification,
** encoded once, is one Lua string every later continuation shares.
*/
#include <lauxlib.h>
#include <lua.h>
#include <stdint.h>
#include <string.h>

#include "vm/lets.h"
#include "vm/lproc_int.h"
#include "vm/lterm.h"

#define SCRATCH_MT "lpvm.ets_select_scratch"

/* The next key's builder, in a userdata freed by __gc, so an error between the chunk
** and the continuation's making leaks nothing. */
static int scratch_gc(lua_State *L) {
  lpvm_tbuf_free(luaL_checkudata(L, 1, SCRATCH_MT));
  return 0;
}

static lpvm_tbuf *scratch_new(lua_State *L) {
  lpvm_tbuf *b = lua_newuserdatauv(L, sizeof *b, 0);
  lpvm_tbuf_init(b);
  if (luaL_newmetatable(L, SCRATCH_MT)) {
    lua_pushcfunction(L, scratch_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  return b;
}

/* The whole term in b as one Lua value (as lmod_ets.c decodes results). */
static void push_term(lua_State *L, const lpvm_tbuf *b) {
  if (lets_push_scalar(L, b->data, b->len) || lets_push_list(L, b->data, b->len)) return;
  lpvm_tread r;
  if (lpvm_tread_init(&r, b->data, b->len)) luaL_error(L, "ets: bad result term");
  lterm_push(L, &r);
}

static int fail(lua_State *L, int rc, int arg) {
  if (rc == LPVM_ENOMEM) return luaL_error(L, "not enough memory");
  if (rc == LPVM_ETS_ENOTAB || rc == LPVM_ETS_EACCESS || rc == LPVM_ETS_EOWNER) arg = 1;
  return luaL_argerror(L, arg, lpvm_ets_strerror(rc));
}

/* One chunk of tab after the key term [after, after + alen) (NULL: from the start),
** the specification the string at ms_idx; pushes the results and the continuation
** (or nil; the list alone for select_reverse/2, limit SIZE_MAX). */
static int chunk(lua_State *L, lpvm_task *self, lpvm_tab tab, int ms_idx, size_t limit,
                 int reverse, const uint8_t *after, size_t alen, lpvm_tbuf *out,
                 int spec_arg) {
  size_t mlen;
  const uint8_t *ms = (const uint8_t *)lua_tolstring(L, ms_idx, &mlen);
  lpvm_tbuf *next = scratch_new(L);
  int rc = lpvm_ets_select_chunk(self, tab, ms, mlen, reverse, after, alen, limit, out,
                                 next);
  if (rc < 0) return fail(L, rc, spec_arg);
  if (limit == SIZE_MAX) {
    push_term(L, out);
    return 1;
  }
  if (rc == 0) {
    lua_pushnil(L);
    return 1;
  }
  push_term(L, out);
  lua_createtable(L, 0, 5);
  lmod_push_ref(L, tab);
  lua_setfield(L, -2, "tab");
  lua_pushvalue(L, ms_idx);
  lua_setfield(L, -2, "ms");
  lua_pushinteger(L, (lua_Integer)limit);
  lua_setfield(L, -2, "limit");
  if (reverse) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "reverse");
  }
  if (next->len) {
    lua_pushlstring(L, (const char *)next->data, next->len);
    lua_setfield(L, -2, "after");
  }
  return 2;
}

int lets_select_first(lua_State *L, lpvm_task *self, lpvm_tab tab, const lpvm_tbuf *ms,
                      int limit_arg, int reverse, lpvm_tbuf *out) {
  size_t limit = SIZE_MAX;
  if (limit_arg) {
    lua_Integer n = luaL_checkinteger(L, limit_arg);
    if (n < 1) luaL_argerror(L, limit_arg, "limit must be a positive integer");
    limit = (uint64_t)n > SIZE_MAX - 1 ? SIZE_MAX - 1 : (size_t)n;
  }
  if (ms->err) return fail(L, ms->err, 2);
  lua_pushlstring(L, (const char *)ms->data, ms->len);
  return chunk(L, self, tab, lua_gettop(L), limit, reverse, NULL, 0, out, 2);
}

/* Field f of the table at 1 has type ty, or the argument is not a continuation. */
static void cont_field(lua_State *L, const char *f, int ty, int optional) {
  int got = lua_getfield(L, 1, f);
  if (got != ty && !(optional && got == LUA_TNIL))
    luaL_argerror(L, 1, "not a continuation");
}

int lets_select_next(lua_State *L, lpvm_task *self, lpvm_tbuf *out) {
  if (lua_type(L, 1) != LUA_TTABLE) {   /* select(t) without a specification: say so */
    if (lua_type(L, 1) == LUA_TSTRING || lua_type(L, 1) == LUA_TUSERDATA)
      luaL_checktype(L, 2, LUA_TTABLE);
    return luaL_typeerror(L, 1, "continuation");
  }
  lua_settop(L, 1);
  lua_getfield(L, 1, "tab");                     /* 2 */
  uint64_t tab = lmod_to_ref(L, 2);
  if (!tab) luaL_argerror(L, 1, "not a continuation");
  cont_field(L, "ms", LUA_TSTRING, 0);           /* 3 */
  cont_field(L, "limit", LUA_TNUMBER, 0);        /* 4 */
  lua_Integer limit = lua_tointeger(L, 4);
  if (!lua_isinteger(L, 4) || limit < 1) luaL_argerror(L, 1, "not a continuation");
  if ((uint64_t)limit > SIZE_MAX - 1) limit = (lua_Integer)(SIZE_MAX - 1);
  int rt = lua_getfield(L, 1, "reverse");        /* 5 */
  if (rt != LUA_TNIL && rt != LUA_TBOOLEAN) luaL_argerror(L, 1, "not a continuation");
  cont_field(L, "after", LUA_TSTRING, 1);        /* 6 */
  if (lua_isnil(L, 6)) {   /* the last chunk reached the end */
    lua_pushnil(L);
    return 1;
  }
  size_t alen;
  const uint8_t *after = (const uint8_t *)lua_tolstring(L, 6, &alen);
  return chunk(L, self, (lpvm_tab)tab, 3, (size_t)limit, lua_toboolean(L, 5), after, alen,
               out, 1);
}

/* ---- select, match and their kin (specifications encoded by lets_ms.c) --------------------------------------- */

static int run_select(lua_State *L, lpvm_tbuf *ms, int mode, int ret_true) {
  lpvm_tab tab = lets_check_tab(L, 1);
  if (ms->err) return lets_fail(L, ms->err, 2);
  lpvm_tbuf *out = mode == LPVM_ETS_SELECT ? lets_out(L) : NULL;
  int rc = lpvm_ets_select(lets_self(L), tab, ms->data, ms->len, mode, out);
  if (rc < 0) return lets_fail(L, rc, 2);
  if (out) lets_push_term(L, out);
  else if (ret_true)
    lua_pushboolean(L, 1);   /* match_delete returns true */
  else lua_pushinteger(L, rc);
  return 1;
}

/* With a limit (argument 3), or a continuation alone: lets_select.c. */
static int run_limited(lua_State *L, lpvm_tbuf *ms, int limit_arg, int reverse) {
  lpvm_tab tab = lets_check_tab(L, 1);
  return lets_select_first(L, lets_self(L), tab, ms, limit_arg, reverse, lets_out(L));
}

static int l_select(lua_State *L) {
  int n = lua_gettop(L);
  if (n == 1) return lets_select_next(L, lets_self(L), lets_out(L));
  lpvm_tbuf *b = lets_in(L);
  lets_put_ms(L, 2, b, 2);
  if (n >= 3 && !lua_isnil(L, 3)) return run_limited(L, b, 3, 0);
  return run_select(L, b, LPVM_ETS_SELECT, 0);
}

static int l_select_reverse(lua_State *L) {
  int n = lua_gettop(L);
  if (n == 1) return lets_select_next(L, lets_self(L), lets_out(L));
  lpvm_tbuf *b = lets_in(L);
  lets_put_ms(L, 2, b, 2);
  return run_limited(L, b, n >= 3 && !lua_isnil(L, 3) ? 3 : 0, 1);
}

static int l_select_count(lua_State *L) {
  lpvm_tbuf *b = lets_in(L);
  lets_put_ms(L, 2, b, 2);
  return run_select(L, b, LPVM_ETS_SELECT_COUNT, 0);
}

static int l_select_delete(lua_State *L) {
  lpvm_tbuf *b = lets_in(L);
  lets_put_ms(L, 2, b, 2);
  return run_select(L, b, LPVM_ETS_SELECT_DELETE, 0);
}

/* select_replace(t, ms): each matched object becomes its body's result. */
static int l_select_replace(lua_State *L) {
  lpvm_tab tab = lets_check_tab(L, 1);
  lpvm_tbuf *b = lets_in(L);
  lets_put_ms_replace(L, 2, b, 2);
  if (b->err) return lets_fail(L, b->err, 2);
  int rc = lpvm_ets_select(lets_self(L), tab, b->data, b->len, LPVM_ETS_SELECT_REPLACE, NULL);
  if (rc == LPVM_EINVAL)
    luaL_argerror(L, 2, "a result is not a tuple with its object's key: nothing replaced");
  if (rc < 0) return lets_fail(L, rc, rc == LPVM_ETS_ETYPE ? 1 : 2);
  lua_pushinteger(L, rc);
  return 1;
}

/* test_ms(object, ms): the body's result on that object, or false when no clause
** matches (erl: {ok, Result} or {ok, false}); a bad specification raises. */
static int l_test_ms(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 2);
  lpvm_tbuf *b = lets_out(L);
  lets_put_object(L, 1, b, 1);   /* the Lua array as the tuple, as insert takes it */
  if (b->err) return lets_fail(L, b->err, 1);
  size_t olen = b->len;
  uint8_t *obj = lua_newuserdatauv(L, olen, 0);   /* 3: the object's term (collected) */
  memcpy(obj, b->data, olen);
  lpvm_tbuf *ms = lets_in(L);
  lets_put_ms(L, 2, ms, 2);
  if (ms->err) return lets_fail(L, ms->err, 2);
  lpvm_tbuf *out = lets_out(L);
  int rc = lpvm_ets_test_ms(obj, olen, ms->data, ms->len, out);
  if (rc < 0) return lets_fail(L, rc, rc == LPVM_ETS_EOBJECT ? 1 : 2);
  if (rc == 0) lua_pushboolean(L, 0);
  else lets_push_term(L, out);
  return 1;
}

/* match and match_object: the pattern as a specification whose body is "$$" (the
** bindings) or "$_" (the object); a continuation alone continues, a limit chunks. */
static int match_with(lua_State *L, const char *body) {
  int n = lua_gettop(L);
  if (n == 1) return lets_select_next(L, lets_self(L), lets_out(L));
  lpvm_tbuf *b = lets_in(L);
  lets_put_pattern_ms(L, 2, b, body);
  if (n >= 3 && !lua_isnil(L, 3)) return run_limited(L, b, 3, 0);
  return run_select(L, b, LPVM_ETS_SELECT, 0);
}

static int l_match(lua_State *L) { return match_with(L, "$$"); }
static int l_match_object(lua_State *L) { return match_with(L, "$_"); }

static int l_match_delete(lua_State *L) {
  lpvm_tbuf *b = lets_in(L);
  lets_put_pattern_ms(L, 2, b, "true");
  return run_select(L, b, LPVM_ETS_SELECT_DELETE, 1);
}

const luaL_Reg lets_ms_fns[] = {
  {"match", l_match}, {"match_object", l_match_object},
  {"select", l_select}, {"select_reverse", l_select_reverse},
  {"select_count", l_select_count},
  {"select_delete", l_select_delete}, {"match_delete", l_match_delete},
  {"select_replace", l_select_replace}, {"test_ms", l_test_ms},
  {NULL, NULL}
};
