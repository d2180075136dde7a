/*
** lmod_log.c -- the log from Lua: lpvm.log, lpvm.log_level and lpvm.format, what
** the `logger` library (vm/lib/logger.lua) is written on. The handler, the level
** and the printing of values are llog.c's, shared with the crash reports.
*/
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "vm/llog.h"
#include "vm/lproc_int.h"
#include "vm/lterm.h"

static int check_level(lua_State *L, int arg) {
  size_t len;
  const char *name = luaL_checklstring(L, arg, &len);
  int l = strlen(name) == len ? llog_parse_level(name) : -2;   /* "error\0x" is none */
  if (l == -2)
    luaL_argerror(L, arg, lua_pushfstring(L, "log level expected (error, warning, notice, info, "
                                             "debug, ..., none, all), got %s",
                                          lmod_push_quoted(L, arg)));
  return l;
}

/* log(level, text) -> true if written, false if the level filtered it out */
static int lmod_log(lua_State *L) {
  int l = check_level(L, 1);
  if (l < 0) return luaL_argerror(L, 1, "an event's level cannot be 'none'");
  size_t len;
  const char *text = luaL_checklstring(L, 2, &len);
  lproc *p = lproc_of(L);
  if (!llog_enabled(l)) {
    lua_pushboolean(L, 0);
    return 1;
  }
  llog_write(l, p ? p->task.id : 0, text, len);
  lua_pushboolean(L, 1);
  return 1;
}

/* log_level([level]) -> the previous level's name */
static int lmod_log_level(lua_State *L) {
  int old = llog_level();
  if (!lua_isnoneornil(L, 1)) llog_set_level(check_level(L, 1));
  lua_pushstring(L, llog_level_name(old));
  return 1;
}

static int push_text(lua_State *L) {
  lua_pushlstring(L, lua_touserdata(L, lua_upvalueindex(1)), (size_t)lua_tointeger(L, 1));
  return 1;
}

/* format(value) -> the value as Lua text, as reports print it: {1, 2}, {k = "v"},
** "str", <0.5.0>. A value that cannot travel is shown by tostring. */
static int lmod_format(lua_State *L) {
  luaL_checkany(L, 1);
  char err[LTERM_ERRSZ];
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  if (lterm_put_plain(L, 1, &b, err) != 0 || b.err) {
    lpvm_tbuf_free(&b);
    luaL_tolstring(L, 1, NULL);
    return 1;
  }
  size_t cap = b.len * 2 + 64;
  if (cap > (1u << 20)) cap = 1u << 20;
  char *out = malloc(cap);
  if (!out) {
    lpvm_tbuf_free(&b);
    return luaL_error(L, "format: not enough memory");
  }
  size_t n = llog_format_term(b.data, b.len, 0, out, cap);
  lpvm_tbuf_free(&b);
  lua_pushlightuserdata(L, out);   /* pushlstring may raise (memory): free out either way */
  lua_pushcclosure(L, push_text, 1);
  lua_pushinteger(L, (lua_Integer)n);
  int rc = lua_pcall(L, 1, 1, 0);
  free(out);
  if (rc != LUA_OK) return lua_error(L);
  return 1;
}

const lmod_fn lmod_log_fns[] = {
    {"log", lmod_log},
    {"log_level", lmod_log_level},
    {"format", lmod_format},
    {NULL, NULL}};
