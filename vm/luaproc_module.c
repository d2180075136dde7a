/*
** luaproc_module.c -- the entry point of build/vm/luaproc.so, the drop-in `luaproc`
** C module for the stock lua5.4 interpreter:
**
**     LUA_CPATH='build/vm/?.so;;' lua5.4 program.lua
**
** The first require starts an lpvm VM inside the interpreter (luaproc_host.c);
** everything else is the same module lpvm processes get from package.preload.
** This file is also globbed into lpvm_vm, where nothing references it and
** LUAPROC_MODULE is not defined.
*/
#include <errno.h>
#include <lua.h>
#include <stddef.h>

#include "vm/luaproc.h"

/* Exported (LPVM_API) although luaproc.so is built with hidden visibility: the
** module's entry point, and the lpvm API, are all it shows; the mallctl stub below
** stays inside it. */
LPVM_API LUAMOD_API int luaopen_luaproc(lua_State *L) { return luaproc_open(L); }

#ifdef LUAPROC_MODULE
/* The module does not load jemalloc (see vm/CMakeLists.txt): the workers' arena
** tuning of sched/memory.c then finds no jemalloc and leaves malloc alone. */
int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
  (void)name, (void)oldp, (void)oldlenp, (void)newp, (void)newlen;
  return ENOENT;
}
#endif
