/*
** luaproc_host.c -- the VM behind `require "luaproc"` in the stock interpreter.
**
** The first host state that requires luaproc starts lpvm in the interpreter's OS
** process (workers, timer thread) and sets Lua processes up; later host states share
** that VM. Each host state holds a sentinel whose finalizer runs at lua_close (the
** stock `lua` closes its state when the main chunk ends, error or not): it waits for
** every luaproc process to end -- luaproc's implied wait() -- and the last host out
** stops the VM and forgets the channels. If a VM was already running (a C program
** embedding lpvm and creating its own states), it is used and left alone.
**
** lpvm's worker count is fixed while the VM runs. setnumworkers from the host may
** still change it as long as the VM is empty (no task yet, the usual place for the
** call: right after require), by restarting the VM; later it is refused quietly.
*/
#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

#include "lpvm/lpvm.h"
#include "vm/lproc.h"
#include "vm/luaproc.h"

static struct {
  pthread_mutex_t mu;
  int users;        /* host states attached */
  int owned;        /* we started the VM (and stop it) */
  int workers;      /* 0 = lpvm's default (one per CPU) */
  int recycle;
} H = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0};

static const char host_key = 'h';   /* registry[&host_key]: the host's sentinel */

static int vm_start(void) {
  lpvm_config vc;
  lpvm_config_init(&vc);
  vc.workers = H.workers;
  int rc = lpvm_start(&vc);
  if (rc < 0) return rc;
  lproc_config pc;
  lproc_config_init(&pc);
  pc.recycle = H.recycle;
  /* count mode: a module loaded into somebody else's interpreter installs no signal
  ** handler (lproc_slice.c) */
  pc.reductions = LPROC_DEFAULT_REDUCTIONS;
  rc = lproc_setup(&pc);
  if (rc < 0) lpvm_stop();
  return rc;
}

static void vm_stop(void) {
  lpvm_stop();
  lproc_teardown();
  luaproc_chan_clear();
  luaproc_spawn_teardown();
}

static int wait_k(lua_State *L, lpvm_msg *m) {
  (void)L;
  if (m) lpvm_msg_free(m);
  return 0;
}

static const luaproc_cont wait_cont = {wait_k};

/* The host state closes: luaproc's implied wait(), then the last host stops the VM. */
static int host_gc(lua_State *L) {
  fflush(stdout);
  luaproc_procs_wait(L, &wait_cont);
  pthread_mutex_lock(&H.mu);
  if (--H.users == 0 && H.owned) {
    vm_stop();
    H.owned = 0;
  }
  pthread_mutex_unlock(&H.mu);
  return 0;
}

void luaproc_host_attach(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &host_key) != LUA_TNIL) {
    lua_pop(L, 1);
    return;   /* required again in the same state */
  }
  lua_pop(L, 1);
  pthread_mutex_lock(&H.mu);
  int rc = 0;
  if (H.users == 0) {
    rc = vm_start();
    H.owned = rc == 0;
    if (rc == LPVM_ESTATE) rc = 0;   /* a VM runs already: an embedder's; use it */
  }
  if (rc == 0) H.users++;
  pthread_mutex_unlock(&H.mu);
  if (rc != 0) luaL_error(L, "luaproc: cannot start the lpvm VM: %s", lpvm_strerror(rc));
  lua_newuserdatauv(L, 1, 0);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, host_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &host_key);
}

int luaproc_host_workers(int n) {
  int changed = 0;
  pthread_mutex_lock(&H.mu);
  if (H.owned && H.users == 1 && lpvm_task_count() == 0 && luaproc_procs_live() == 0) {
    lpvm_stop();
    lproc_teardown();
    int old = H.workers;
    H.workers = n;
    if (vm_start() == 0) {
      changed = 1;
    } else {   /* cannot happen short of exhaustion: get the old VM back */
      H.workers = old;
      H.owned = vm_start() == 0;
    }
  }
  pthread_mutex_unlock(&H.mu);
  return changed;
}

void luaproc_host_recycle(int n) {
  pthread_mutex_lock(&H.mu);
  H.recycle = n;
  pthread_mutex_unlock(&H.mu);
}
