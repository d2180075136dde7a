/*
** luaproc_spawn.c -- luaproc.newproc(code | function) on lpvm processes.
**
** As luaproc does, a code string is compiled by the caller (a syntax error is
** newproc's `nil, message`, with luaproc's chunk name: the code itself) and a
** function is dumped. The new process is an ordinary lpvm Lua process that runs a
** small trampoline (compiled once per OS process):
**
**     return getmetatable(require "luaproc").__start(bytecode, nups, upvalues...)
**
** so its first act is to load luaproc (which sets the global `luaproc`, as luaproc
** does in every process) and to mark itself for wait() (luaproc_procs.c); __start
** then loads the bytecode and calls it.
**
** Upvalues: luaproc loads the dumped function in a fresh state, so its upvalues are
** nil there except _ENV. Here they are better than nil where that is safe: _ENV (or
** the caller's globals) is the new process's globals; a loaded module (`local
** luaproc = require "luaproc"`) or a module's function (`local send = luaproc.send`,
** `local print = print`) is looked up again by name; a nil, boolean, number or
** string is copied. Anything else (a table, a Lua function, a userdata) is nil, as in
** luaproc.
*/
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "vm/lproc_int.h"
#include "vm/lterm.h"
#include "vm/luaproc.h"

static const char trampoline_src[] =
    "return getmetatable(require 'luaproc').__start(...)";

static struct {
  pthread_mutex_t mu;
  char *code;
  size_t len;
} tramp = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

/* The trampoline's bytecode, compiled in L the first time. */
static int trampoline(lua_State *L, const char **code, size_t *len) {
  pthread_mutex_lock(&tramp.mu);
  if (!tramp.code && luaL_loadbuffer(L, trampoline_src, sizeof trampoline_src - 1,
                                     "=luaproc") == LUA_OK) {
    tramp.code = lproc_dump_top(L, &tramp.len);
    lua_pop(L, 1);
  }
  *code = tramp.code;
  *len = tramp.len;
  pthread_mutex_unlock(&tramp.mu);
  return tramp.code ? 0 : -1;
}

void luaproc_spawn_teardown(void) {
  pthread_mutex_lock(&tramp.mu);
  free(tramp.code);
  tramp.code = NULL;
  tramp.len = 0;
  pthread_mutex_unlock(&tramp.mu);
}

/* ---- upvalues ------------------------------------------------------------------------- */

/* Push (kind, a, b) for the value at v: "e" globals, "v" a copied value, "m" module
** a, "f" field b of module a ("_G" for globals), "n" nil. */
static void push_upvalue(lua_State *L, int v, const char *name) {
  int ty = lua_type(L, v);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  int g = lua_gettop(L);
  if (strcmp(name, "_ENV") == 0 || lua_rawequal(L, v, g)) {
    lua_settop(L, g - 1);
    lua_pushliteral(L, "e"), lua_pushnil(L), lua_pushnil(L);
    return;
  }
  if (ty == LUA_TNIL || ty == LUA_TBOOLEAN || ty == LUA_TNUMBER || ty == LUA_TSTRING) {
    lua_settop(L, g - 1);
    lua_pushliteral(L, "v"), lua_pushvalue(L, v), lua_pushnil(L);
    return;
  }
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  int loaded = g + 1, out = 0;
  if (lua_type(L, loaded) == LUA_TTABLE && (ty == LUA_TTABLE || ty == LUA_TFUNCTION)) {
    if (lproc_find_key(L, loaded, v)) {                           /* a module */
      lua_pushliteral(L, "m"), lua_insert(L, -2), lua_pushnil(L);
      out = 1;
    } else if (ty == LUA_TFUNCTION && lproc_find_key(L, g, v)) {   /* a global function */
      lua_pushliteral(L, "f"), lua_pushliteral(L, "_G"), lua_rotate(L, -3, -1);
      out = 1;
    } else if (ty == LUA_TFUNCTION) {                        /* a module's function */
      lua_pushnil(L);
      while (!out && lua_next(L, loaded)) {
        if (lua_type(L, -1) == LUA_TTABLE && lua_type(L, -2) == LUA_TSTRING &&
            lproc_find_key(L, lua_gettop(L), v)) {
          lua_remove(L, -2);                                 /* modname, field */
          lua_pushliteral(L, "f"), lua_rotate(L, -3, 1);
          out = 1;
        } else {
          lua_pop(L, 1);
        }
      }
    }
  }
  if (!out) lua_pushliteral(L, "n"), lua_pushnil(L), lua_pushnil(L);
  lua_rotate(L, g, 3);   /* the triple below globals and loaded */
  lua_settop(L, g + 2);
}

/* ---- newproc ----------------------------------------------------------------------------- */

static int fail(lua_State *L, const char *msg) {
  lua_pushnil(L);
  lua_pushstring(L, msg);
  return 2;
}

/* The start record: trampoline code, its upvalue (_ENV), and the arguments
** (bytecode, nups, triples...) from stack index `first` to the top. */
static lproc_start *make_start(lua_State *L, int first, const char *tcode, size_t tlen) {
  char err[LTERM_ERRSZ];
  lpvm_tbuf up, args;
  lpvm_tbuf_init(&up);
  lpvm_put_tuple(&up, 1);
  lpvm_put_atom(&up, "$env");
  lpvm_tbuf_init(&args);
  int bad = lterm_put_values(L, first, lua_gettop(L) - first + 1, &args, err) != 0;
  lproc_start *s = NULL;
  if (!bad && !up.err && !args.err) s = lproc_start_new(LS_FUNC, tcode, tlen, &up, &args);
  if (s) s->max_heap = lproc_cfg.max_heap;
  lpvm_tbuf_free(&up);
  lpvm_tbuf_free(&args);
  return s;
}

int luaproc_newproc(lua_State *L) {
  int ty = lua_type(L, 1);
  if (ty == LUA_TSTRING) {
    size_t len;
    const char *src = lua_tolstring(L, 1, &len);
    lua_settop(L, 1);
    if (luaL_loadbufferx(L, src, len, src, "t") != LUA_OK) return fail(L, lua_tostring(L, -1));
  } else if (ty == LUA_TFUNCTION) {
    if (lua_iscfunction(L, 1)) return fail(L, "cannot create a process from a C function");
    lua_settop(L, 1);
    lua_pushvalue(L, 1);
  } else {
    return luaL_typeerror(L, 1, "string or function");
  }
  int f = lua_gettop(L);   /* 2 */
  const char *tcode;
  size_t tlen;
  size_t len;
  char *code;
  if (trampoline(L, &tcode, &tlen) != 0 || !(code = lproc_dump_top(L, &len)))
    return fail(L, "cannot dump the process's function");
  lua_pushlstring(L, code, len);
  free(code);
  int nups = 0;
  while (lua_getupvalue(L, f, nups + 1)) lua_pop(L, 1), nups++;
  lua_pushinteger(L, nups);
  luaL_checkstack(L, 3 * nups + 4, "too many upvalues");
  for (int i = 1; i <= nups; i++) {
    const char *name = lua_getupvalue(L, f, i);
    int top = lua_gettop(L);
    push_upvalue(L, top, name ? name : "");
    lua_remove(L, top);
  }
  lproc_start *s = make_start(L, f + 1, tcode, tlen);
  if (!s) return fail(L, "not enough memory");
  lproc *parent = luaproc_is_process(L) ? lproc_of(L) : NULL;
  if (parent) s->creator = parent->task.id;
  lpvm_spawn_opts o = LPVM_SPAWN_OPTS_INIT;
  o.thread = lproc_cfg.threads ? 1 : 0;
  luaproc_procs_add();
  lpvm_id id;
  int rc = lproc_spawn(parent, s, &o, &id);
  if (rc != 0) {
    luaproc_procs_done();
    return fail(L, lpvm_strerror(rc));
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* ---- in the new process ---------------------------------------------------------------------- */

static int start_k(lua_State *L, int status, lua_KContext ctx) {
  (void)L, (void)status, (void)ctx;
  return 0;
}

/* __start(bytecode, nups, {kind, a, b} * nups) */
int luaproc_start(lua_State *L) {
  if (!luaproc_is_process(L) || luaproc_procs_marked(L))
    return luaL_error(L, "luaproc: __start is internal");
  luaproc_procs_mark(L);
  size_t len;
  const char *code = luaL_checklstring(L, 1, &len);
  int nups = (int)luaL_checkinteger(L, 2);
  if (luaL_loadbufferx(L, code, len, "=newproc", "b") != LUA_OK) return lua_error(L);
  int f = lua_gettop(L);
  for (int i = 1; i <= nups; i++) {
    int at = 3 * i;   /* kind, a, b at 3i, 3i+1, 3i+2 */
    const char *kind = lua_tostring(L, at);
    switch (kind ? kind[0] : 'n') {
      case 'e': lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS); break;
      case 'v': lua_pushvalue(L, at + 1); break;
      case 'm': lproc_push_module(L, lua_tostring(L, at + 1), 1); break;
      case 'f':
        lproc_push_module(L, lua_tostring(L, at + 1), 1);
        if (lua_type(L, -1) == LUA_TTABLE) lua_getfield(L, -1, lua_tostring(L, at + 2));
        else lua_pushnil(L);
        lua_remove(L, -2);
        break;
      default: lua_pushnil(L);
    }
    if (!lua_setupvalue(L, f, i)) lua_pop(L, 1);
  }
  lua_callk(L, 0, 0, 0, start_k);
  return 0;
}
