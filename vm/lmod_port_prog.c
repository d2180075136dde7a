/*
** lmod_port_prog.c -- ports for OS programs (open_port) and for descriptors the VM
** already has (fd_port).
*/
#include <errno.h>
#include <limits.h>
#include <lauxlib.h>
#include <string.h>

#include "lpvm/port.h"
#include "vm/lmod_port_int.h"

extern char **environ;

/* argv from a table of strings or a shell command line; kept alive at the top. */
static const char **spawn_argv(lua_State *L, int arg) {
  if (lua_type(L, arg) == LUA_TSTRING) {
    const char **v = lua_newuserdatauv(L, 4 * sizeof *v, 0);
    v[0] = "/bin/sh", v[1] = "-c", v[2] = lmod_cstr(L, arg, arg, "command"), v[3] = NULL;
    return v;
  }
  luaL_argexpected(L, lua_type(L, arg) == LUA_TTABLE, arg, "table or string");
  lua_Integer n = luaL_len(L, arg);
  luaL_argcheck(L, n >= 1 && n < 100000, arg, "the program is missing");
  const char **v = lua_newuserdatauv(L, (size_t)(n + 1) * sizeof *v, 0);
  for (lua_Integer i = 1; i <= n; i++) {
    if (lua_rawgeti(L, arg, i) != LUA_TSTRING) luaL_argerror(L, arg, "arguments must be strings");
    v[i - 1] = lmod_cstr(L, -1, arg, "an argument");   /* kept alive by the table */
    lua_pop(L, 1);
  }
  v[n] = NULL;
  return v;
}

/* Is "K=V" overridden by a key of table t? */
static int env_overridden(lua_State *L, int t, const char *kv) {
  const char *eq = strchr(kv, '=');
  if (!eq) return 1;
  lua_pushlstring(L, kv, (size_t)(eq - kv));
  int has = lua_rawget(L, t) != LUA_TNIL;
  lua_pop(L, 1);
  return has;
}

/* env = {NAME = "value" | false}: the VM's environment with these set or removed
** (Erlang's env option). The strings live in a table left at the top. */
static const char **spawn_env(lua_State *L, int t) {
  int n = 0, k = 0;
  for (char **e = environ; *e; e++) n++;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    int is_false = lua_isboolean(L, -1) && !lua_toboolean(L, -1);   /* true is no value */
    if (lua_type(L, -2) != LUA_TSTRING || (!lua_isstring(L, -1) && !is_false))
      luaL_argerror(L, 2, "env must map names to strings or false");
    size_t len;
    const char *name = lmod_cstr(L, -2, 2, "an env name");
    lua_tolstring(L, -2, &len);
    if (len == 0 || strchr(name, '='))
      luaL_argerror(L, 2, "an env name must be non-empty, without '='");
    if (!lua_isboolean(L, -1)) lmod_cstr(L, -1, 2, "an env value");
    lua_pop(L, 1);
    n++;
  }
  lua_createtable(L, n, 0);   /* keeps the "K=V" strings alive */
  const char **v = lua_newuserdatauv(L, (size_t)(n + 1) * sizeof *v, 0);
  lua_rawseti(L, -2, n + 1);
  for (char **e = environ; *e; e++)
    if (!env_overridden(L, t, *e)) v[k++] = *e;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (lua_toboolean(L, -1) && lua_type(L, -1) != LUA_TBOOLEAN) {
      lua_pushfstring(L, "%s=%s", lua_tostring(L, -2), lua_tostring(L, -1));
      v[k++] = lua_tostring(L, -1);
      lua_rawseti(L, -4, k);
    }
    lua_pop(L, 1);
  }
  v[k] = NULL;
  return v;
}

static int stderr_mode(lua_State *L, int t) {
  static const char *const modes[] = {"inherit", "stdout", "pipe", "null", NULL};
  static const int vals[] = {LPVM_STDERR_INHERIT, LPVM_STDERR_TO_STDOUT, LPVM_STDERR_PIPE,
                             LPVM_STDERR_NULL};
  if (!t || lua_getfield(L, t, "stderr") == LUA_TNIL) {
    if (t) lua_pop(L, 1);
    return LPVM_STDERR_INHERIT;
  }
  for (int i = 0; modes[i]; i++)
    if (lmod_streq(L, -1, modes[i])) {
      lua_pop(L, 1);
      return vals[i];
    }
  return luaL_argerror(L, t, "stderr must be \"inherit\", \"stdout\", \"pipe\" or \"null\"");
}

/* open_port(argv | command [, opts]) -> port | nil, reason */
int lmod_open_port(lua_State *L) {
  static const char *const known[] = {LPORT_OPTS, "stderr", "env", "cwd", NULL};
  lproc *p = lproc_check(L);
  int t = lport_opt_table(L, 2, known);
  lua_settop(L, 2);
  lpvm_spawn_port_opts so = {NULL, NULL, NULL, LPVM_STDERR_INHERIT};
  so.argv = spawn_argv(L, 1);
  so.stderr_mode = stderr_mode(L, t);
  lpvm_port_opts po;
  lport_opts(L, t, &po);
  if (t && lua_getfield(L, t, "cwd") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TSTRING)   /* the option's type, not the table's */
      luaL_argerror(L, 2, lua_pushfstring(L, "cwd must be a string, got %s", luaL_typename(L, -1)));
    so.cwd = lmod_cstr(L, -1, 2, "cwd");
  }
  if (t && lua_getfield(L, t, "env") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TTABLE)
      luaL_argerror(L, 2, lua_pushfstring(L, "env must be a table, got %s", luaL_typename(L, -1)));
    so.env = spawn_env(L, lua_gettop(L));
  }
  lpvm_id port;
  int rc = lpvm_port_spawn(&p->task, &so, &po, &port);
  if (rc != 0) return lport_fail(L, rc, errno);
  lmod_push_pid(L, port);
  return 1;
}

/* fd_port(in_fd, out_fd [, opts]) -> port | nil, reason; nil for a side not used. */
/* A descriptor argument (nil: -1, not used), checked before it is cut to an int:
** 2^32 + 1 is no descriptor, not fd 1. */
static int check_fd(lua_State *L, int arg) {
  lua_Integer fd = luaL_optinteger(L, arg, -1);
  luaL_argcheck(L, fd >= -1 && fd <= INT_MAX, arg, "descriptor expected");
  return (int)fd;
}

int lmod_fd_port(lua_State *L) {
  static const char *const known[] = {LPORT_OPTS, NULL};
  lproc *p = lproc_check(L);
  int in = check_fd(L, 1), out = check_fd(L, 2);
  luaL_argcheck(L, in >= 0 || out >= 0, 1, "at least one descriptor expected");
  lpvm_port_opts po;
  lport_opts(L, lport_opt_table(L, 3, known), &po);
  lpvm_id port;
  int rc = lpvm_port_fd(&p->task, in, out, &po, &port);
  if (rc != 0) return lport_fail(L, rc, errno);
  lmod_push_pid(L, port);
  return 1;
}
