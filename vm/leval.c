/*
** leval.c -- lpvm.eval: run code inside another live process (ALua's code as data,
** skynet's `inject`; docs/code.md, "Inject and eval").
**
** The request is a message {'$lpvm_eval', Ref, Code}: Code is a function (a term,
** lfun.c) or a chunk's source (a binary). Lua code cannot write atoms, so no Lua
** process can forge one; vm/lib/lpvm/eval.lua builds it through eval_request.
** The target runs it at a safe point of its own, never from another thread:
**   - waiting in receive: the request wakes it, and the receive loop runs it and
**     goes on waiting (lmod_msg.c, leval_take);
**   - running: the count hook, before it yields, runs the requests in the mailbox
**     (leval_poll). The hook looks only while some eval waits for an answer
**     (`pending`), so a VM that never evals pays one atomic load per slice.
** The code runs under pcall, unpreempted and unable to block (a receive in it
** fails); its error is sent back and the target goes on. The answer is an ordinary
** message ("$lpvm_eval_reply", Ref, ok, results...) to the requester.
*/
#include <lauxlib.h>
#include <stdatomic.h>
#include <string.h>

#include "vm/lproc_int.h"
#include "vm/lterm.h"

static _Atomic int pending;   /* evals waiting for an answer, VM-wide */

/* 131, SMALL_TUPLE_EXT 3, SMALL_ATOM_UTF8_EXT 10 '$lpvm_eval' */
static const uint8_t tag[] = {131, 104, 3, 119, 10, '$', 'l', 'p', 'v', 'm',
                              '_', 'e', 'v', 'a', 'l'};

int leval_is_request(const lpvm_msg *m) {
  /* another node's message is never one: an Erlang peer can write any atom */
  return !lpvm_id_is_remote(lpvm_msg_from(m)) && lpvm_msg_len(m) > sizeof tag &&
         memcmp(lpvm_msg_data((lpvm_msg *)m), tag, sizeof tag) == 0;
}

/* (msg) on the process's stack as light userdata: run it, answer. */
static int run_cf(lua_State *L) {
  lpvm_msg *m = lua_touserdata(L, 1);
  lproc *p = lproc_of(L);
  lpvm_tread r;
  const uint8_t *src;
  size_t len;
  if (lpvm_tread_init(&r, lpvm_msg_data(m), lpvm_msg_len(m))) return 0;
  r.p += sizeof tag - 1;   /* after the tag: Ref, Code */
  lua_settop(L, 0);
  lterm_push(L, &r);   /* 1: the reference */
  int ok;
  if (lpvm_get_type(&r) == LPVM_T_BINARY) {
    if (lpvm_get_binary(&r, &src, &len)) return 0;
    ok = luaL_loadbufferx(L, (const char *)src, len, "=eval", "t") == LUA_OK;
  } else {
    lterm_push(L, &r);
    ok = lua_type(L, -1) == LUA_TFUNCTION;
    if (!ok) lua_pushliteral(L, "eval: not a function");
  }
  if (ok) ok = lua_pcall(L, 0, LUA_MULTRET, 0) == LUA_OK;   /* 2..: results or error */
  if (!ok && lua_type(L, -1) != LUA_TSTRING) {
    lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, -1));
    lua_replace(L, 2);
    lua_settop(L, 2);
  }
  int n = lua_gettop(L) - 1;
  lua_pushliteral(L, "$lpvm_eval_reply");
  lua_pushvalue(L, 1);
  lua_pushboolean(L, ok);
  lua_rotate(L, 2, 3);   /* ref, tag, ref, ok, results... */
  lua_remove(L, 1);      /* tag, ref, ok, results... */
  /* a builder of its own: the hook may have interrupted a send using the scratch one */
  char err[LTERM_ERRSZ] = "";
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_msg *reply = NULL;
  if (lterm_put_values(L, 1, n + 3, &b, err) == 0) reply = lpvm_tbuf_to_msg(&b);
  if (!reply) {   /* results that cannot travel: say so */
    lua_settop(L, 2);
    lua_pushboolean(L, 0);
    lua_pushfstring(L, "eval: the results cannot be sent: %s", err);
    lpvm_tbuf_free(&b);
    lpvm_tbuf_init(&b);
    if (lterm_put_values(L, 1, 4, &b, err) == 0) reply = lpvm_tbuf_to_msg(&b);
  }
  lpvm_tbuf_free(&b);
  if (reply) lpvm_send_msg(&p->task, lpvm_msg_from(m), reply);
  return 0;
}

/* Take request m out of the mailbox and run it on L (protected). */
void leval_take(lua_State *L, lproc *p, lpvm_msg *m) {
  lpvm_mbox_take(&p->task, m);
  if (lua_checkstack(L, 3)) {   /* protected: m is freed below whatever happens */
    p->in_eval = 1;             /* receive, sleep, info refuse: a receive may be open */
    lua_pushcfunction(L, run_cf);
    lua_pushlightuserdata(L, m);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) lua_pop(L, 1);
    p->in_eval = 0;
  }
  lpvm_msg_free(m);
}

void leval_poll(lua_State *L, lproc *p) {
  if (atomic_load_explicit(&pending, memory_order_relaxed) == 0 || p->in_pred) return;
  lpvm_msg *m = lpvm_mbox_next(&p->task, NULL);
  while (m) {
    lpvm_msg *next = lpvm_mbox_next(&p->task, m);
    if (m != p->cur && leval_is_request(m)) {
      if (m == p->scan) p->scan = m->prev;   /* receive resumes after the one before */
      leval_take(L, p, m);
    }
    m = next;
  }
}

/* eval_request(pid, ref, fn | chunk) -> true | nil, "noproc" (lpvm.eval in Lua) */
static int eval_request(lua_State *L) {
  lproc *p = lproc_check(L);
  lpvm_id to = lmod_check_pid(L, 1);
  lmod_check_ref(L, 2);
  int ty = lua_type(L, 3);
  luaL_argexpected(L, ty == LUA_TFUNCTION || ty == LUA_TSTRING, 3, "function or string");
  char err[LTERM_ERRSZ];
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 3);
  lpvm_put_atom(&b, "$lpvm_eval");
  lpvm_tbuf code;
  lpvm_tbuf_init(&code);
  if (lterm_put(L, 2, &b, err) != 0 || lterm_put(L, 3, &code, err) != 0) {
    lpvm_tbuf_free(&b);
    lpvm_tbuf_free(&code);
    return luaL_error(L, "eval: %s", err);
  }
  lpvm_put_term(&b, code.data, code.len);
  lpvm_tbuf_free(&code);
  lpvm_msg *m = lpvm_tbuf_to_msg(&b);
  lpvm_tbuf_free(&b);
  if (!m) return luaL_error(L, "eval: not enough memory");
  atomic_fetch_add(&pending, 1);
  int rc = lpvm_send_msg(&p->task, to, m);
  if (rc != 0) {
    atomic_fetch_sub(&pending, 1);
    return lmod_fail(L, rc);
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* eval_done(): the answer (or a DOWN, or the timeout) came */
static int eval_done(lua_State *L) {
  (void)L;
  atomic_fetch_sub(&pending, 1);
  return 0;
}

static const luaL_Reg fns[] = {{"request", eval_request}, {"done", eval_done}, {NULL, NULL}};

int leval_open(lua_State *L) {
  luaL_newlib(L, fns);
  return 1;
}
