/*
** mem_parts.c -- where the bytes of an idle Lua process go, part by part
** (docs/performance.md, "Bytes per idle process").
**
** Builds a process's state the way vm/lproc.c does, step by step, with an allocator
** that counts the bytes Lua asks for and, with jemalloc, the size classes jemalloc
** hands out for them (nallocx): a bare lua_newstate, the lazy globals and string
** stand-in (llibs_install), `require "lpvm"`, and the spawned function of the
** mem100k benchmark loaded from its dump with debug info as a child loads it (and,
** for comparison, stripped). Then the C records a process has besides its state.
** What this cannot see (call frames while blocked in receive, jemalloc's metadata,
** partly used slabs, populated pages) is the difference to `lpvm.info(pid).memory`
** and to the RSS growth of mem100k, which the docs list beside it.
**
** usage: build/estone/mem_parts
*/
#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/lproc_int.h"

#ifdef LPVM_WITH_JEMALLOC
#include <jemalloc/jemalloc.h>
static size_t size_class(size_t n) { return n ? nallocx(n, 0) : 0; }
#else
static size_t size_class(size_t n) { return n; }
#endif

static size_t req, cls;

static void *count_alloc(void *ud, void *p, size_t o, size_t n) {
  (void)ud;
  if (!p) o = 0;
  if (n == 0) {
    req -= o;
    cls -= size_class(o);
    free(p);
    return NULL;
  }
  void *q = realloc(p, n);
  if (q) {
    req += n - o;
    cls += size_class(n) - size_class(o);
  }
  return q;
}

typedef struct dump {
  char b[4096];
  size_t n;
} dump;

static int dump_w(lua_State *L, const void *p, size_t sz, void *ud) {
  (void)L;
  dump *d = ud;
  if (d->n + sz > sizeof d->b) return 1;
  memcpy(d->b + d->n, p, sz);
  d->n += sz;
  return 0;
}

static size_t r0, c0;

static void part(const char *what) {
  printf("| %-44s | %6zu | %6zu |\n", what, req - r0, cls - c0);
  r0 = req;
  c0 = cls;
}

/* mem100k's process: create.lua of ../shared/bench/lpvm */
static const char fn_src[] =
    "return function(parent) local l = require \"lpvm\" l.receive() l.send(parent, \"done\") end";

int main(void) {
  dump d[2];
  lua_State *S = luaL_newstate();
  if (!S || luaL_loadbuffer(S, fn_src, sizeof fn_src - 1, "@create.lua") != LUA_OK) return 1;
  lua_call(S, 0, 1);
  for (int strip = 0; strip < 2; strip++) {
    d[strip].n = 0;
    if (lua_dump(S, dump_w, &d[strip], strip) != 0) return 1;
  }
  lua_close(S);

  printf("| part | requested | jemalloc classes |\n|---|---|---|\n");
  lua_State *L = lua_newstate(count_alloc, NULL);
  if (!L) return 1;
  part("bare state (lua_newstate)");
  llibs_install(L, 0);
  part("lazy globals and string stand-in (llibs.c)");
  lua_getglobal(L, "require");
  lua_pushliteral(L, "lpvm");
  lua_call(L, 1, 1);
  lua_pop(L, 1);
  part("`require \"lpvm\"` (module table, package.loaded)");
  if (luaL_loadbufferx(L, d[0].b, d[0].n, "=spawn", "b") != LUA_OK) return 1;
  part("the spawned function, with debug info");
  lua_pop(L, 1);
  lua_gc(L, LUA_GCCOLLECT, 0);
  r0 = req;
  c0 = cls;
  if (luaL_loadbufferx(L, d[1].b, d[1].n, "=spawn", "b") != LUA_OK) return 1;
  printf("| %-44s | %6zu | %6zu |\n", "(the same function stripped: not used)", req - r0, cls - c0);
  lua_close(L);
  printf("| %-44s | %6zu | %6zu |\n", "process record (struct lproc, task inside)", sizeof(lproc),
         size_class(sizeof(lproc)));
  return 0;
}
