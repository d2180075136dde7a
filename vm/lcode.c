/*
** lcode.c -- a VM-wide cache of compiled Lua modules.
**
** Processes share nothing, so every process that requires a module loads it into its
** own state. Compiling a module's source costs far more than loading its bytecode
** (gen_server.lua and gen.lua: ~1.5 ms against ~0.1 ms), and a supervisor starting
** 10,000 gen_server children would compile the same files 10,000 times. This
** searcher takes the place of Lua's own file searcher (package.searchers[2]): it finds
** the file the same way (package.searchpath over package.path), compiles it once, and
** keeps the bytecode, with debug information so tracebacks are unchanged, keyed by
** path and checked against the file's size and modification time, so an edited file
** is compiled again. Any worker may fill or read the cache: one mutex guards it.
*/
#include <lauxlib.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "vm/lproc_int.h"

#define LCODE_MAX_BYTES (64u << 20)   /* past this, modules are compiled, not kept */

typedef struct entry {
  struct entry *next;
  off_t size;
  struct timespec mtime;
  size_t len;
  char *code;
  char path[];
} entry;

static struct {
  pthread_mutex_t mu;
  entry *head;
  size_t bytes;
} C = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

/* Push the cached loader for path if it is current; 1 if found. */
static int cache_load(lua_State *L, const char *path, const struct stat *st) {
  char *copy = NULL;
  size_t len = 0;
  pthread_mutex_lock(&C.mu);
  for (entry *e = C.head; e; e = e->next)
    if (strcmp(e->path, path) == 0) {
      if (e->size == st->st_size && e->mtime.tv_sec == st->st_mtim.tv_sec &&
          e->mtime.tv_nsec == st->st_mtim.tv_nsec && (copy = malloc(e->len)) != NULL) {
        memcpy(copy, e->code, e->len);
        len = e->len;
      }
      break;
    }
  pthread_mutex_unlock(&C.mu);
  if (!copy) return 0;
  int rc = luaL_loadbufferx(L, copy, len, path, "b");
  free(copy);
  if (rc != LUA_OK) {   /* cannot happen for our own dump; compile it instead */
    lua_pop(L, 1);
    return 0;
  }
  return 1;
}

/* Keep the bytecode of the function on top (left there). */
static void cache_store(lua_State *L, const char *path, const struct stat *st) {
  size_t len;
  char *code = lproc_dump_top(L, &len);
  if (!code) return;
  size_t plen = strlen(path);
  entry *e = malloc(sizeof *e + plen + 1);
  if (!e) {
    free(code);
    return;
  }
  e->size = st->st_size;
  e->mtime = st->st_mtim;
  e->len = len;
  e->code = code;
  memcpy(e->path, path, plen + 1);
  pthread_mutex_lock(&C.mu);
  entry **pp = &C.head;
  while (*pp && strcmp((*pp)->path, path) != 0) pp = &(*pp)->next;
  if (*pp) {   /* an older version: replace it */
    entry *old = *pp;
    e->next = old->next;
    C.bytes -= old->len;
    *pp = e;
    free(old->code);
    free(old);
    C.bytes += len;
  } else if (C.bytes + len <= LCODE_MAX_BYTES) {
    e->next = C.head;
    C.head = e;
    C.bytes += len;
  } else {
    free(code);
    free(e);
  }
  pthread_mutex_unlock(&C.mu);
}

/* searcher(name) -> loader, path | message. Upvalue 1: the package table. */
static int lcode_searcher(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  lua_getfield(L, lua_upvalueindex(1), "searchpath");
  lua_pushstring(L, name);
  lua_getfield(L, lua_upvalueindex(1), "path");
  if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "'package.path' must be a string");
  lua_call(L, 2, 2);
  if (lua_isnil(L, -2)) return 1;   /* the "no file ..." message */
  lua_pop(L, 1);
  const char *path = lua_tostring(L, -1);
  struct stat st;
  int have_stat = stat(path, &st) == 0;
  if (!(have_stat && cache_load(L, path, &st))) {
    if (luaL_loadfilex(L, path, NULL) != LUA_OK)
      return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s", name, path,
                        lua_tostring(L, -1));
    if (have_stat) cache_store(L, path, &st);
  }
  lua_pushvalue(L, -2);   /* the loader gets name and path, as Lua's own searcher */
  return 2;
}

void lcode_install(lua_State *L, int package) {
  package = lua_absindex(L, package);
  if (lua_getfield(L, package, "searchers") != LUA_TTABLE) {
    lua_pop(L, 1);
    return;
  }
  lua_pushvalue(L, package);
  lua_pushcclosure(L, lcode_searcher, 1);
  lua_rawseti(L, -2, 2);
  lua_pop(L, 1);
}

void lcode_teardown(void) {
  pthread_mutex_lock(&C.mu);
  for (entry *e = C.head, *n; e; e = n) {
    n = e->next;
    free(e->code);
    free(e);
  }
  C.head = NULL;
  C.bytes = 0;
  pthread_mutex_unlock(&C.mu);
}
