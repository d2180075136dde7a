/*
** asan_uaf.c -- a use after free of a Lua object is still caught in the ASan build.
**
** The Lua states' allocator keeps freed small blocks on per-thread free lists
** (vm/lproc_small.h), where ASan would not see them freed; the ASan build has no
** lists, so a freed table goes to free() and ASan's quarantine. This program makes a
** table and its array in a state of lproc_alloc's, lets the collector free them, and
** reads the table: ctest (ASan builds only) passes when ASan reports
** heap-use-after-free. With lists in the ASan build the read goes unseen and it fails.
*/
#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>

#include "vm/lproc_int.h"

int main(void) {
  lua_State *L = lua_newstate(lproc_alloc, NULL);
  if (!L) return 2;
  lua_createtable(L, 4, 0);
  const volatile char *t = lua_topointer(L, -1);
  lua_pop(L, 1);
  lua_gc(L, LUA_GCCOLLECT);   /* the table is garbage: freed */
  int c = t[0];               /* heap-use-after-free */
  printf("read %d: not caught\n", c);
  lua_close(L);
  return 0;
}
