/*
** lmod_send.c -- sending: send (to a pid, a registered name or {name, node}) and
** send_alias; the message encoder's entry (lmod_build_msg). Receiving, references and
** aliases are lmod_msg.c's; the table of both is there (lmod_msg_fns).
**
** A send never waits and never fails for a dead pid (Erlang's); an unregistered name
** is a mistake. The sender pays for a long queue at the receiver (BEAM's sender
** punishment, below), so a flood's receiver catches up.
*/
#include <lauxlib.h>
#include <string.h>

#include "lpvm/binary.h"
#include "lpvm/dist.h"
#include "lpvm/lpvm.h"
#include "vm/lproc_int.h"
#include "vm/lraw.h"
#include "vm/lterm.h"


/* Encode the values from `first` to the top as one message. Raises on a value that
** cannot travel. */
lpvm_msg *lmod_build_msg(lua_State *L, int first, const char *fname) {
  char err[LTERM_ERRSZ];
  lpvm_msg *m = lterm_msg(L, first, lua_gettop(L) - first + 1, err);
  if (!m) luaL_error(L, "%s: %s", fname, err);
  return m;
}

/* Sending to a dead pid succeeds silently (Erlang); to an unregistered name is an
** error (Erlang's badarg). */
static lpvm_id check_target(lua_State *L, int arg, const char *fname) {
  int is_name;
  lpvm_id to = lmod_check_dest(L, arg, &is_name);
  if (is_name && !to)
    luaL_error(L, "%s: no process registered as %s", fname, lmod_push_quoted(L, arg));
  return to;
}

/* send({name, node}, ...): a registered name on another node (Erlang's {Name, Node} !
** Msg). Like Erlang it succeeds even when nobody has that name over there, when the
** node cannot be reached or this VM is not distributed (the message is dropped), and
** when the node is this one and the name is free. A name lpvm could never register
** or a node name without '@' is a mistake and raises. */
static int send_remote_name(lua_State *L, lproc *p) {
  lua_rawgeti(L, 1, 1);
  lua_rawgeti(L, 1, 2);
  size_t nl;
  const char *name = lua_tolstring(L, -2, &nl), *node = lua_tostring(L, -1);
  if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
    return luaL_argerror(L, 1, "pid, name or {name, node} expected");
  luaL_argcheck(L, nl >= 1 && nl <= 255 && strlen(name) == nl, 1,
                "{name, node}: name must be 1..255 bytes without NUL");
  luaL_argcheck(L, strchr(node, '@') != NULL, 1, "{name, node}: node name (name@host) expected");
  lua_pop(L, 2);   /* the table at 1 keeps both strings alive */
  if (strcmp(node, lpvm_node_name()) == 0) {
    if (!lpvm_whereis(name)) { lua_pushboolean(L, 1); return 1; }   /* dropped */
    lua_pushstring(L, name);
    lua_replace(L, 1);
    return -1;   /* a local name after all */
  }
  lpvm_msg *m = lmod_build_msg(L, 2, "send"), *flat = lpvm_msg_flatten(m);   /* binaries: bytes */
  if (!flat) lpvm_msg_free(m);
  int rc = flat ? lpvm_dist_send_name(&p->task, name, node, lpvm_msg_data(flat),
                                      lpvm_msg_len(flat)) : LPVM_ENOMEM;
  lpvm_msg_free(flat);
  if (rc && rc != LPVM_ENOPROC) return lmod_fail(L, rc);   /* ENOPROC: no connection */
  lua_pushboolean(L, 1);
  return 1;
}

static int send_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status, (void)ctx;
  lua_pushboolean(L, 1);
  return 1;
}

/* After BEAM's sender punishment: a send costs the sender part of its time slice in
** proportion to the receiver's queue (4 per queued message), so a sender that fills a
** mailbox faster than it drains gets a smaller share of the CPU and the receiver
** catches up. The send itself never waits: once the charge passes a time slice the
** sender goes to the back of its run queue, as the count hook would send it. A send
** to itself is not charged: the receiver is the sender, and slowing it down lets
** nobody catch up (EStone's timer micro sends itself 100 messages a loop, and each
** charge past the slice cost a yield and a step). */
#define SEND_PUNISH_PER_MSG 4u

int lmod_send(lua_State *L) {
  lproc *p = lproc_check(L);
  const lraw_tvalue *a = lraw_ok() ? lraw_arg(L, 1) : NULL;   /* a pid read in place */
  lpvm_id to = a && a->tt == LRAW_VLIGHTUD ? (lpvm_id)(uintptr_t)a->v.p : 0;
  if (lmod_light_is_ref(to)) to = 0;   /* a reference (vm/lmod.c): check_target's error */
  if (!to && a && a->tt == LRAW_VSHRSTR) {   /* a registered name, read in place */
    size_t len;
    const char *name = lraw_str(a, &len);
    if (strlen(name) == len) to = lpvm_whereis(name);   /* (a NUL: never registered) */
  }
  if (!to) {
    int t1 = lua_type(L, 1);
    if (t1 == LUA_TTABLE) {
      int n = send_remote_name(L, p);
      if (n >= 0) return n;
    }
    if (t1 == LUA_TLIGHTUSERDATA) to = lmod_to_pid(L, 1);   /* 0 for a reference */
    if (!to) to = check_target(L, 1, "send");   /* a name, or the error */
  }
  lpvm_msg *m;
  if (a) {   /* the mirror trusted: the values' count read in place */
    const lraw_state *st = (const lraw_state *)(void *)L;
    char err[LTERM_ERRSZ];
    if (!(m = lterm_msg(L, 2, (int)(st->top - (st->ci->func + 2)), err)))
      luaL_error(L, "send: %s", err);
  } else {
    m = lmod_build_msg(L, 2, "send");
  }
  uint32_t queued = 0;
  if (to == p->task.id) lpvm_send_msg_self(&p->task, m);   /* seen by this step's receive */
  else lpvm_send_msg_queued(&p->task, to, m, &queued);
  uint64_t charge = (uint64_t)p->punish + (uint64_t)queued * SEND_PUNISH_PER_MSG;
  p->punish = charge > UINT32_MAX ? UINT32_MAX : (uint32_t)charge;
  if (p->punish >= (uint32_t)lproc_cfg.reductions && lua_isyieldable(L)) {
    p->punish = 0;
    p->wait = LP_RUN;
    if (L != p->L) p->sched_yield = 1;
    return lua_yieldk(L, 0, 0, send_k);
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* send_alias(pid, alias, ...): send (alias, ...) to pid; it is dropped there unless
** alias is one of pid's active aliases (a late reply to a call that gave up). */
int lmod_send_alias(lua_State *L) {
  lproc *p = lproc_check(L);
  lpvm_id to = check_target(L, 1, "send_alias");
  size_t flen;
  uint64_t ref = lmod_to_ref(L, 2);
  /* a caller on another node gave its own reference: it arrives here as a foreign
  ** value, and the reply goes back to that node as an alias send */
  if (!ref && !lterm_foreign(L, 2, &flen)) ref = lmod_check_ref(L, 2);
  lpvm_msg *m = lmod_build_msg(L, 2, "send_alias");
  m->ref = lpvm_id_is_remote(to) ? LPVM_DIST_ALIAS_SEND : ref;
  lpvm_send_msg(&p->task, to, m);
  lua_pushboolean(L, 1);
  return 1;
}
