/*
** ldl.c -- every dlopen and dlclose of the VM under one lock.
**
** Lua processes load C modules (require of lua-socket, cjson, lpeg...) with dlopen
** and, when a process ends, its state's CLIBS table dlcloses them: so one worker may
** dlclose a library while another dlopens one. glibc's loader serialises the two with
** a lock of its own, which ThreadSanitizer cannot see (ld.so is not instrumented), so
** TSan reports the loader's own bookkeeping as a race. Taking one lock of ours around
** both makes the order visible, costs nothing measurable (loading a module is rare
** and slow anyway), and lets lpvm's concurrency tests stay TSan-clean.
**
** The lock is recursive: a module's loading can run a finalizer (a GC step) that
** requires another module.
*/
#include <lauxlib.h>
#include <pthread.h>

#include "vm/lproc_int.h"

static pthread_mutex_t dl_mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

void ldl_lock(void) { pthread_mutex_lock(&dl_mu); }
void ldl_unlock(void) { pthread_mutex_unlock(&dl_mu); }

/* Upvalue 1 called with the arguments, under the lock; errors pass through. */
static int locked_call(lua_State *L) {
  int n = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  ldl_lock();
  int rc = lua_pcall(L, n, LUA_MULTRET, 0);
  ldl_unlock();
  if (rc != LUA_OK) return lua_error(L);
  return lua_gettop(L);
}

/* t[k] = locked_call(t[k]), t at idx, if t[k] is a function. */
static void wrap_field(lua_State *L, int idx, const char *k, lua_Integer i) {
  idx = lua_absindex(L, idx);
  if ((k ? lua_getfield(L, idx, k) : lua_rawgeti(L, idx, i)) != LUA_TFUNCTION) {
    lua_pop(L, 1);
    return;
  }
  lua_pushcclosure(L, locked_call, 1);
  if (k) lua_setfield(L, idx, k);
  else lua_rawseti(L, idx, i);
}

void ldl_wrap_package(lua_State *L) {
  wrap_field(L, -1, "loadlib", 0);
  if (lua_getfield(L, -1, "searchers") == LUA_TTABLE) {
    wrap_field(L, -1, NULL, 3);   /* the C searcher */
    wrap_field(L, -1, NULL, 4);   /* the all-in-one C searcher */
  }
  lua_pop(L, 1);
  /* the table of loaded C libraries (loadlib.c's CLIBS): its __gc dlcloses them */
  if (lua_getfield(L, LUA_REGISTRYINDEX, "_CLIBS") == LUA_TTABLE && lua_getmetatable(L, -1)) {
    wrap_field(L, -1, "__gc", 0);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}
