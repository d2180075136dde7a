/*
** luaproc.h -- what the luaproc_*.c files share: luaproc's API (Skyrme et al.,
** docs/luaproc.md) on lpvm's tasks and messages.
**
** Who may call. A *process* is an lpvm Lua process (the boot script of `lpvm`, a
** process made by luaproc.newproc or lpvm.spawn): it blocks by yielding, as
** lpvm.receive does, and is woken by a message. The *host* is a lua_State that is no
** lpvm process: the main chunk of the stock `lua5.4` interpreter after
** `require "luaproc"` loaded build/vm/luaproc.so. It blocks its OS thread on a
** condition variable while the processes run on the workers.
*/
#ifndef LPVM_LUAPROC_H
#define LPVM_LUAPROC_H

#include <lua.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "lpvm/task.h"

/* ---- waking a blocked caller (luaproc_wait.c) ----------------------------------- */

/* How a blocked host thread is woken. Lives on the host's stack while it waits. */
typedef struct luaproc_hostwait {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  lpvm_msg *msg;            /* what was delivered (NULL: an error) */
} luaproc_hostwait;
#define LUAPROC_HOSTWAIT_INIT {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL}

/* Somebody blocked on a channel or in wait(): a process (pid and the reference that
** tags its wake-up message) or the host. */
typedef struct luaproc_waiter {
  struct luaproc_waiter *next;
  lpvm_id pid;              /* 0 for the host */
  uint64_t ref;
  luaproc_hostwait *host;
  lpvm_msg *msg;            /* a waiting sender's values */
} luaproc_waiter;

/* Fill w for the caller (a process when L is one, else the host with hw, which
** must be LUAPROC_HOSTWAIT_INIT). */
void luaproc_waiter_init(lua_State *L, luaproc_waiter *w, luaproc_hostwait *hw);
/* Wake w with m (its payload goes to the woken caller; NULL = "error"). Takes m. */
void luaproc_wake(const luaproc_waiter *w, lpvm_msg *m);
/* Block the caller until the waiter tagged `ref` (or hw, for the host) is woken,
** then return c->k(L, msg): msg is the delivered message (k frees it) or NULL for an
** error. A process yields (so this returns through lua_yieldk); the host sleeps on
** hw. c must be static: it is kept across the yield. */
typedef int (*luaproc_resume_fn)(lua_State *L, lpvm_msg *m);
typedef struct luaproc_cont {
  luaproc_resume_fn k;
} luaproc_cont;
int luaproc_block(lua_State *L, uint64_t ref, luaproc_hostwait *hw, const luaproc_cont *c);
/* Raise unless the caller may block here (a process inside a C call may not). Call
** it before queueing a waiter. */
void luaproc_check_block(lua_State *L, const char *fname);
/* 1 if L is an lpvm process, 0 if it is the host. */
int luaproc_is_process(lua_State *L);
/* A message with a payload of len bytes copied from p (NULL payload: zeroed). */
lpvm_msg *luaproc_msg(const void *p, size_t len);

/* ---- channels (luaproc_chan.c) ---------------------------------------------------- */

enum { LUAPROC_OK = 0, LUAPROC_NOCHAN = -1, LUAPROC_EXISTS = -2, LUAPROC_NOMEM = -3,
       LUAPROC_EMPTY = -4, LUAPROC_WAITING = 1 };

int luaproc_chan_new(const char *name);
/* Wake every waiter with an error and forget the channel. */
int luaproc_chan_del(const char *name);
/* Offer m (takes it). A waiting receiver gets it at once (LUAPROC_OK); otherwise w
** (heap, with w->msg = m) joins the senders' queue (LUAPROC_WAITING) and is freed by
** whoever dequeues it. On an error m and w are freed. */
int luaproc_chan_send(const char *name, lpvm_msg *m, luaproc_waiter *w);
/* Take a waiting sender's message into *m (LUAPROC_OK; the sender is released);
** else with async LUAPROC_EMPTY, or w (heap) joins the receivers (LUAPROC_WAITING).
** On an error (or LUAPROC_EMPTY) w is freed. */
int luaproc_chan_recv(const char *name, int async, lpvm_msg **m, luaproc_waiter *w);
/* Free every channel (VM teardown in the host; waiters are woken with an error). */
void luaproc_chan_clear(void);

/* ---- processes (luaproc_procs.c) ---------------------------------------------------- */

/* Count a process made by newproc (before it is spawned), and uncount one. */
void luaproc_procs_add(void);
void luaproc_procs_done(void);
/* Block until every counted process has ended (c->k gets the wake-up message). */
int luaproc_procs_wait(lua_State *L, const luaproc_cont *c);
long luaproc_procs_live(void);
/* Mark L as a luaproc process: its end uncounts it (a finalizer in its registry). */
void luaproc_procs_mark(lua_State *L);
int luaproc_procs_marked(lua_State *L);

/* ---- the host's VM (luaproc_host.c) --------------------------------------------------- */

/* Start the VM for a host state (once per OS process; later hosts share it) and
** arrange its stop when L closes. Raises on failure. */
void luaproc_host_attach(lua_State *L);
/* setnumworkers in the host: restart the VM with n workers while it is still empty.
** Returns 1 if the count changed. */
int luaproc_host_workers(int n);
/* The recycle bound, kept across a host's VM restart. */
void luaproc_host_recycle(int n);

/* ---- newproc (luaproc_spawn.c) ---------------------------------------------------------- */

int luaproc_newproc(lua_State *L);
int luaproc_start(lua_State *L);         /* the trampoline's __start */
/* Free the cached trampoline (the host's VM stop: luaproc.so may be unloaded next). */
void luaproc_spawn_teardown(void);

/* ---- the module (luaproc.c) ------------------------------------------------------------ */

int luaproc_open(lua_State *L);

#endif
