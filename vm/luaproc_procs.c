/*
** luaproc_procs.c -- counting luaproc processes, for luaproc.wait().
**
** newproc counts a process before spawning it; the process uncounts itself when its
** state goes away: a userdata with a finalizer sits in its registry, and lpvm runs
** finalizers both when it closes a finished state and when it cleans one for the
** recycling pool. So an error, a normal end or a kill all uncount it, with no
** message and no monitor per process. wait() returns when the count is zero; the
** waiters (processes and the host) are woken by the decrement that reaches zero.
*/
#include <lauxlib.h>
#include <stdlib.h>

#include "vm/luaproc.h"

static struct {
  pthread_mutex_t mu;
  long live;
  luaproc_waiter *waiters;
} P = {PTHREAD_MUTEX_INITIALIZER, 0, NULL};

static const char mark_key = 'm';   /* registry[&mark_key]: this state's sentinel */
static const uint8_t done_msg[1] = {131};

void luaproc_procs_add(void) {
  pthread_mutex_lock(&P.mu);
  P.live++;
  pthread_mutex_unlock(&P.mu);
}

void luaproc_procs_done(void) {
  luaproc_waiter *w = NULL;
  pthread_mutex_lock(&P.mu);
  if (--P.live <= 0) {
    P.live = 0;
    w = P.waiters;
    P.waiters = NULL;
  }
  pthread_mutex_unlock(&P.mu);
  while (w) {
    luaproc_waiter *next = w->next;
    luaproc_wake(w, luaproc_msg(done_msg, sizeof done_msg));
    free(w);
    w = next;
  }
}

long luaproc_procs_live(void) {
  pthread_mutex_lock(&P.mu);
  long n = P.live;
  pthread_mutex_unlock(&P.mu);
  return n;
}

int luaproc_procs_wait(lua_State *L, const luaproc_cont *c) {
  luaproc_check_block(L, "wait");
  luaproc_hostwait hw = LUAPROC_HOSTWAIT_INIT;
  luaproc_waiter *w = malloc(sizeof *w);
  if (!w) return luaL_error(L, "wait: not enough memory");
  luaproc_waiter_init(L, w, &hw);
  uint64_t ref = w->ref;
  pthread_mutex_lock(&P.mu);
  int none = P.live == 0;
  if (!none) {
    w->next = P.waiters;
    P.waiters = w;
  }
  pthread_mutex_unlock(&P.mu);
  if (none) {
    free(w);
    return 0;
  }
  return luaproc_block(L, ref, &hw, c);
}

/* ---- the sentinel ------------------------------------------------------------------------ */

static int sentinel_gc(lua_State *L) {
  (void)L;
  luaproc_procs_done();
  return 0;
}

void luaproc_procs_mark(lua_State *L) {
  lua_newuserdatauv(L, 1, 0);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, sentinel_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &mark_key);
}

int luaproc_procs_marked(lua_State *L) {
  int t = lua_rawgetp(L, LUA_REGISTRYINDEX, &mark_key);
  lua_pop(L, 1);
  return t != LUA_TNIL;
}
