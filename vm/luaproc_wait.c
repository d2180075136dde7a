/*
** luaproc_wait.c -- blocking and waking a luaproc caller.
**
** luaproc's send, blocking receive and wait() suspend the caller until another party
** acts. The two kinds of caller block differently:
**   - an lpvm process yields, exactly as lpvm.receive does (its worker runs others),
**     and is woken by an ordinary lpvm message whose header carries the reference it
**     waits for (lpvm_msg.ref); its other mail, if it also uses the lpvm API, stays
**     where it is;
**   - the host (the stock interpreter's main chunk) is no task and has no mailbox: it
**     sleeps on a condition variable on its own stack, and the waker hands it the
**     message directly.
** The payload of a wake-up is the delivered values, or a one-byte "ok", or nothing
** at all for an error (the channel was deleted under the waiter).
*/
#include <lauxlib.h>
#include <string.h>

#include "vm/lproc_int.h"
#include "vm/luaproc.h"

int luaproc_is_process(lua_State *L) {
  lproc *p = lproc_of(L);
  return p != NULL && p->L != NULL;
}

lpvm_msg *luaproc_msg(const void *p, size_t len) {
  lpvm_msg *m = lpvm_msg_new(len);
  if (m && len) {
    if (p) memcpy(lpvm_msg_data(m), p, len);
    else memset(lpvm_msg_data(m), 0, len);
  }
  return m;
}

void luaproc_waiter_init(lua_State *L, luaproc_waiter *w, luaproc_hostwait *hw) {
  memset(w, 0, sizeof *w);
  if (luaproc_is_process(L)) {
    w->pid = lproc_of(L)->task.id;
    w->ref = lpvm_make_ref();
    return;
  }
  w->host = hw;
}

void luaproc_wake(const luaproc_waiter *w, lpvm_msg *m) {
  if (!m) m = lpvm_msg_new(0);
  if (w->host) {
    luaproc_hostwait *hw = w->host;
    pthread_mutex_lock(&hw->mu);
    hw->msg = m;
    hw->done = 1;
    pthread_cond_signal(&hw->cv);
    pthread_mutex_unlock(&hw->mu);   /* hw may be gone from here on */
    return;
  }
  if (!m) return;   /* out of memory: the waiter cannot be told (it stays blocked) */
  m->ref = w->ref;
  lpvm_send_msg(NULL, w->pid, m);   /* a dead waiter: the message is dropped */
}

/* The payload decides: none = error (NULL for k), anything else is the message. */
static int finish(lua_State *L, lpvm_msg *m, luaproc_resume_fn k) {
  if (m && lpvm_msg_len(m) == 0) {
    lpvm_msg_free(m);
    m = NULL;
  }
  return k(L, m);
}

/* ---- a process: yield until the tagged message is in the mailbox ------------------- */

static int block_k(lua_State *L, int status, lua_KContext ctx);

static int block_yield(lua_State *L, lproc *p, uint64_t ref) {
  p->wait = LP_RECV;   /* resumed by any new message; block_k looks for ours */
  if (L != p->L) p->sched_yield = 1;
  return lua_yieldk(L, 0, (lua_KContext)ref, block_k);
}

static int block_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  lproc *p = lproc_of(L);
  uint64_t ref = (uint64_t)ctx;
  p->wait = LP_RUN;
  for (lpvm_msg *m = lpvm_mbox_next(&p->task, NULL); m; m = lpvm_mbox_next(&p->task, m)) {
    if (m->ref != ref) continue;
    lpvm_mbox_take(&p->task, m);
    const luaproc_cont *c = lua_touserdata(L, -1);   /* pushed by block_process */
    lua_pop(L, 1);
    return finish(L, m, c->k);
  }
  return block_yield(L, p, ref);
}

/* What to do after the wake-up travels on the stack across the yield, as a light
** userdata pointing to the caller's static luaproc_cont. */
static int block_process(lua_State *L, uint64_t ref, const luaproc_cont *c) {
  lua_pushlightuserdata(L, (void *)c);
  return block_yield(L, lproc_of(L), ref);
}

/* ---- the host: sleep on the condition variable ----------------------------------------- */

static int block_host(lua_State *L, luaproc_hostwait *hw, const luaproc_cont *c) {
  pthread_mutex_lock(&hw->mu);
  while (!hw->done) pthread_cond_wait(&hw->cv, &hw->mu);
  lpvm_msg *m = hw->msg;
  pthread_mutex_unlock(&hw->mu);
  return finish(L, m, c->k);
}

int luaproc_block(lua_State *L, uint64_t ref, luaproc_hostwait *hw, const luaproc_cont *c) {
  if (luaproc_is_process(L)) return block_process(L, ref, c);
  return block_host(L, hw, c);
}

void luaproc_check_block(lua_State *L, const char *fname) {
  if (!luaproc_is_process(L)) return;
  lproc *p = lproc_of(L);
  if (p->in_pred) luaL_error(L, "%s: cannot be called from a receive predicate", fname);
  if (!lua_isyieldable(L))
    luaL_error(L, "%s: cannot wait here (inside a C call such as a metamethod)", fname);
}
