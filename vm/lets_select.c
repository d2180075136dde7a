/*
** lets_select.c -- select/match with a limit, their continuations, and
** select_reverse, for `require "ets"` (vm/lmod_ets.c calls in here).
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
** #1 (no such table) once the table is gone, as ETS's badarg. Being a userdata, it
** cannot be sent to another process (ETS's can: a term).
*/
#include <lauxlib.h>
#include <lua.h>
#include <stdint.h>
#include <string.h>

#include "vm/lets.h"
#include "vm/lterm.h"

#define CONT_MT "lpvm.ets_continuation"

/* A continuation (userdata; both builders freed by __gc, so an error between its
** making and its return leaks nothing). Written only by the process that made it. */
typedef struct lets_cont {
  lpvm_tab tab;
  size_t limit;
  int reverse;     /* select_reverse */
  int done;        /* the last chunk reached the end: the next one is nil */
  lpvm_tbuf ms;    /* the specification, version byte first */
  lpvm_tbuf key;   /* the key to continue after, version byte first */
} lets_cont;

static int cont_gc(lua_State *L) {
  lets_cont *c = luaL_checkudata(L, 1, CONT_MT);
  lpvm_tbuf_free(&c->ms);
  lpvm_tbuf_free(&c->key);
  return 0;
}

static lets_cont *cont_new(lua_State *L) {
  lets_cont *c = lua_newuserdatauv(L, sizeof *c, 0);
  memset(c, 0, sizeof *c);
  lpvm_tbuf_init(&c->ms);
  lpvm_tbuf_init(&c->key);
  if (luaL_newmetatable(L, CONT_MT)) {
    lua_pushcfunction(L, cont_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  return c;
}

/* b := the bytes [p, p + n) (a whole term). */
static void copy_term(lua_State *L, lpvm_tbuf *b, const uint8_t *p, size_t n) {
  lpvm_tbuf_reset(b);
  b->len = 0;
  uint8_t *q = lpvm_tbuf_room(b, n);
  if (!q) luaL_error(L, "not enough memory");
  memcpy(q, p, n);
  b->len = n;
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

/* Run one chunk for the continuation at index ci (filled but for key and done) after
** the key term [after, after + alen) (NULL: from the start); push the results. */
static int chunk(lua_State *L, lpvm_task *self, int ci, const uint8_t *after,
                 size_t alen, lpvm_tbuf *out, int spec_arg) {
  lets_cont *c = lua_touserdata(L, ci);
  int rc = lpvm_ets_select_chunk(self, c->tab, c->ms.data, c->ms.len, c->reverse,
                                 after, alen, c->limit, out, &c->key);
  if (rc < 0) return fail(L, rc, spec_arg);
  c->done = c->key.len == 0;
  if (c->limit == SIZE_MAX) {   /* select_reverse/2: the list alone, [] when empty */
    push_term(L, out);
    return 1;
  }
  if (rc == 0) {
    lua_pushnil(L);
    return 1;
  }
  push_term(L, out);
  lua_pushvalue(L, ci);
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
  lets_cont *c = cont_new(L);
  int ci = lua_gettop(L);
  c->tab = tab;
  c->limit = limit;
  c->reverse = reverse;
  copy_term(L, &c->ms, ms->data, ms->len);
  return chunk(L, self, ci, NULL, 0, out, 2);
}

int lets_select_next(lua_State *L, lpvm_task *self, lpvm_tbuf *out) {
  lets_cont *old = luaL_testudata(L, 1, CONT_MT);
  if (!old) {   /* select(t) without a specification: say so, as before */
    if (lua_type(L, 1) == LUA_TSTRING || lua_type(L, 1) == LUA_TUSERDATA)
      luaL_checktype(L, 2, LUA_TTABLE);
    return luaL_typeerror(L, 1, "continuation");
  }
  if (old->done) {
    lua_pushnil(L);
    return 1;
  }
  lets_cont *c = cont_new(L);
  int ci = lua_gettop(L);
  c->tab = old->tab;
  c->limit = old->limit;
  c->reverse = old->reverse;
  copy_term(L, &c->ms, old->ms.data, old->ms.len);
  return chunk(L, self, ci, old->key.data, old->key.len, out, 1);
}
