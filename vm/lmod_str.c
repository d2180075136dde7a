/*
** lmod_str.c -- Lua strings that reach C: the checks every `lpvm` call makes on a
** string it hands to libc or the core, and how a bad value is quoted in an error.
**
** A Lua string may hold NUL bytes and be any size. C sees it up to its first NUL, so
** "lib.so\0junk" would silently open lib.so and register("a\0b") would answer to
** "a": a string bound for C with a NUL inside is a programmer's mistake and raises
** (`bad argument #1 to 'file_open' (path must not contain a NUL byte)`). Sizes the
** OS itself refuses come back as nil, reason (enametoolong); sizes that would hurt
** before the OS is asked (glibc's dlopen copies the name onto the stack) are cut
** off here. An error message never copies the whole bad value: lmod_push_quoted
** keeps its first LMOD_QUOTE_MAX bytes and says how long it was.
*/
#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

#include "vm/lproc_int.h"

/* The string at idx (any string, or a number Lua converts) for C; raises naming
** argument `arg` and `what` if it holds a NUL byte. */
const char *lmod_cstr(lua_State *L, int idx, int arg, const char *what) {
  size_t len;
  const char *s = lua_tolstring(L, idx, &len);
  if (s && memchr(s, '\0', len)) {
    lua_pushfstring(L, "%s must not contain a NUL byte", what);
    luaL_argerror(L, arg, lua_tostring(L, -1));
  }
  return s;
}

const char *lmod_check_cstr(lua_State *L, int arg, const char *what) {
  luaL_checkstring(L, arg);
  return lmod_cstr(L, arg, arg, what);
}

const char *lmod_opt_cstr(lua_State *L, int arg, const char *dflt, const char *what) {
  return lua_isnoneornil(L, arg) ? dflt : lmod_check_cstr(L, arg, what);
}

/* Is the string at idx exactly `lit` (NULs and length included)? */
int lmod_streq(lua_State *L, int idx, const char *lit) {
  size_t len;
  const char *s = lua_type(L, idx) == LUA_TSTRING ? lua_tolstring(L, idx, &len) : NULL;
  return s && len == strlen(lit) && memcmp(s, lit, len) == 0;
}

/* Push the string at idx quoted for an error message: 'abc', with bytes that do not
** print as \xNN, cut after LMOD_QUOTE_MAX bytes ('abc...' (N bytes)). Returns it. */
const char *lmod_push_quoted(lua_State *L, int idx) {
  size_t len;
  idx = lua_absindex(L, idx);
  const char *s = lua_tolstring(L, idx, &len);
  if (!s) return lua_pushstring(L, luaL_typename(L, idx));
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addchar(&b, '\'');
  for (size_t i = 0; i < len && i < LMOD_QUOTE_MAX; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      luaL_addchar(&b, (char)c);
    } else {
      char esc[8];
      snprintf(esc, sizeof esc, "\\x%02X", c);
      luaL_addstring(&b, esc);
    }
  }
  luaL_addchar(&b, '\'');
  if (len > LMOD_QUOTE_MAX) {
    char more[48];
    snprintf(more, sizeof more, "... (%zu bytes)", len);
    luaL_addstring(&b, more);
  }
  luaL_pushresult(&b);
  return lua_tostring(L, -1);
}

/* luaL_checkoption with the value quoted (never copied whole into the message) and
** compared with its length (so "cur\0x" is not "cur"). */
int lmod_check_option(lua_State *L, int arg, const char *def, const char *const list[]) {
  if (def && lua_isnoneornil(L, arg)) lua_pushstring(L, def);
  else luaL_checkstring(L, arg), lua_pushvalue(L, arg);
  for (int i = 0; list[i]; i++)
    if (lmod_streq(L, -1, list[i])) {
      lua_pop(L, 1);
      return i;
    }
  return luaL_argerror(L, arg, lua_pushfstring(L, "invalid option %s", lmod_push_quoted(L, -1)));
}

/* A registered name (register, unregister, whereis): a string of 1..255 bytes without
** NUL, as the core's name table takes (tasks/names.c); anything else raises. A number
** is no name (Erlang's register takes atoms only): not coerced, so register(42) does
** not quietly name the caller "42". */
const char *lmod_check_name(lua_State *L, int arg) {
  size_t len;
  if (lua_type(L, arg) != LUA_TSTRING) luaL_typeerror(L, arg, "string (a name)");
  lua_tolstring(L, arg, &len);
  luaL_argcheck(L, len > 0 && len < 256, arg, "name of 1..255 bytes expected");
  return lmod_cstr(L, arg, arg, "name");
}
