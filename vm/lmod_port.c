/*
** lmod_port.c -- ports for Lua processes: OS programs, descriptors, TCP and files
** (the `lpvm` functions open_port, fd_port, port_send, recv, tcp_listen, ...).
**
** A thin layer over include/lpvm/port.h. Commands are messages, so most calls are
** one send and never block. The calls that need an answer (recv, tcp_accept,
** tcp_connect, the file helpers, a port_send over the high-water mark, port_close)
** block the calling *process*, not its worker: they run the module's own `receive`
** with a C predicate that takes only that port's answer (a selective receive), so
** other messages stay queued, in order, for the process's own receives.
**
** Ports are pids with the port bit (light userdata, lmod.c): they print as
** #Port<0.N>, compare by value, are table keys and travel in messages.
**
** Two waits can end without their answer: a recv or tcp_accept that timed out.
** The request is still queued at the port, so the next call on that port does not
** ask again but collects that answer (registry[&pending_key][port] marks them).
**
** This file: what every port call shares (arguments, pending requests, waiting for
** an answer, the caller's mailbox) and the function table. The calls themselves:
** lmod_port_stream.c (any port), lmod_port_prog.c (programs and descriptors),
** lmod_port_tcp.c, lmod_port_file.c.
*/
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/port.h"
#include "vm/lmod_port_int.h"

static const char pending_key = 'p';   /* registry[&pending_key]: port -> true */

/* ---- arguments and results ----------------------------------------------------------- */

lpvm_id lport_check(lua_State *L, int arg) {
  lpvm_id id = lmod_to_pid(L, arg);
  if (!id || !lpvm_id_is_port(id)) luaL_typeerror(L, arg, "port");
  return id;
}

/* What a user calls each kind lpvm_port_kind names. */
static const struct { const char *kind, *name; } kind_names[] = {
    {"spawn", "program port"}, {"fd", "fd port"}, {"tcp", "tcp connection"},
    {"tcp_listen", "tcp listener"}, {"file", "file port"}, {NULL, NULL}};

const char *const lport_stream[] = {"spawn", "fd", "tcp", NULL};
const char *const lport_owned[] = {"spawn", "fd", "tcp", "tcp_listen", NULL};
const char *const lport_listener[] = {"tcp_listen", NULL};
const char *const lport_file[] = {"file", NULL};

lpvm_id lport_check_kind(lua_State *L, int arg, const char *const kinds[],
                         const char *expected) {
  lpvm_id id = lport_check(L, arg);
  const char *k = lpvm_port_kind(id);
  if (!k) return id;   /* ended: the call answers "closed" */
  for (int i = 0; kinds[i]; i++)
    if (strcmp(kinds[i], k) == 0) return id;
  const char *got = NULL;
  for (int i = 0; kind_names[i].kind && !got; i++)
    if (strcmp(kind_names[i].kind, k) == 0) got = kind_names[i].name;
  if (!got) got = lua_pushfstring(L, "%s port", k);
  return (lpvm_id)luaL_argerror(L, arg, lua_pushfstring(L, "%s expected, got %s", expected, got));
}

lproc *lport_check_proc(lua_State *L, const char *fname) {
  lproc *p = lproc_check(L);
  if (p->in_pred) luaL_error(L, "%s: cannot be called from a receive predicate", fname);
  return p;
}

/* nil, reason for a failed C call; LPVM_ESYS carries errno (saved by the caller). */
int lport_fail(lua_State *L, int rc, int err) {
  if (rc == LPVM_ESYS) {
    lua_pushnil(L);
    lua_pushstring(L, lpvm_errno_atom(err));
    return 2;
  }
  if (rc == LPVM_ENOPROC) {   /* the port has ended */
    lua_pushnil(L);
    lua_pushliteral(L, "closed");
    return 2;
  }
  if (rc == LPVM_EINVAL) {    /* an address that does not parse, a bad port number */
    lua_pushnil(L);
    lua_pushliteral(L, "einval");
    return 2;
  }
  return lmod_fail(L, rc);
}

int lport_ok(lua_State *L, int rc) {
  if (rc != 0) return lport_fail(L, rc, 0);
  lua_pushboolean(L, 1);
  return 1;
}

int lport_reason(lua_State *L, const char *reason) {
  lua_pushnil(L);
  lua_pushstring(L, reason);
  return 2;
}

/* A timeout argument in ms: nil or math.huge = forever (-1), as receive's. */
int64_t lport_opt_ms(lua_State *L, int arg) {
  return lua_isnoneornil(L, arg) ? -1 : lmod_check_ms(L, arg);
}

/* The options table at arg (nil or absent: none): its index, or 0. */
int lport_opt_table(lua_State *L, int arg, const char *const known[]) {
  if (lua_isnoneornil(L, arg)) return 0;
  luaL_checktype(L, arg, LUA_TTABLE);
  lmod_check_keys(L, arg, known, "option");
  return arg;
}

lua_Integer lport_opt_int(lua_State *L, int t, const char *k, lua_Integer dflt,
                           lua_Integer lo, lua_Integer hi) {
  if (!t || lua_getfield(L, t, k) == LUA_TNIL) {
    if (t) lua_pop(L, 1);
    return dflt;
  }
  int isint;
  lua_Integer v = lua_tointegerx(L, -1, &isint);
  if (!isint || v < lo || v > hi) {
    lua_pushfstring(L, "option '%s' must be an integer %I..%I", k, lo, hi);
    luaL_argerror(L, t, lua_tostring(L, -1));
  }
  lua_pop(L, 1);
  return v;
}

int lport_opt_flag(lua_State *L, int t, const char *k, int dflt) {
  if (!t || lua_getfield(L, t, k) == LUA_TNIL) {
    if (t) lua_pop(L, 1);
    return dflt;
  }
  int v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

/* true | false | "once" */
int lport_to_active(lua_State *L, int idx, int arg) {
  if (lua_type(L, idx) == LUA_TBOOLEAN)
    return lua_toboolean(L, idx) ? LPVM_ACTIVE_TRUE : LPVM_ACTIVE_FALSE;
  if (lmod_streq(L, idx, "once"))
    return LPVM_ACTIVE_ONCE;
  return luaL_argerror(L, arg, "active must be true, false or \"once\"");
}

/* "raw" | "line" | 0 | 1 | 2 | 4 */
int lport_to_packet(lua_State *L, int idx, int arg) {
  if (lmod_streq(L, idx, "raw")) return LPVM_PACKET_RAW;
  if (lmod_streq(L, idx, "line")) return LPVM_PACKET_LINE;
  if (lua_isinteger(L, idx)) {
    lua_Integer n = lua_tointeger(L, idx);
    if (n == 0 || n == 1 || n == 2 || n == 4) return (int)n;
  }
  return luaL_argerror(L, arg, "packet must be \"raw\", \"line\", 0, 1, 2 or 4");
}

/* The options every stream port takes, from table t (0: defaults). */
void lport_opts(lua_State *L, int t, lpvm_port_opts *po) {
  *po = (lpvm_port_opts)LPVM_PORT_OPTS_INIT;
  if (!t) return;
  if (lua_getfield(L, t, "active") != LUA_TNIL) po->active = lport_to_active(L, -1, t);
  if (lua_getfield(L, t, "packet") != LUA_TNIL) po->packet = lport_to_packet(L, -1, t);
  lua_pop(L, 2);
  po->high_water = (size_t)lport_opt_int(L, t, "high_water", 0, 1, LUA_MAXINTEGER);
  po->max_packet = (size_t)lport_opt_int(L, t, "max_packet", 0, 1, LUA_MAXINTEGER);
}

/* Data to send: a string, or a table of strings and numbers (concatenated: an
** iolist). The bytes end up at index arg. */
const char *lport_check_data(lua_State *L, int arg, size_t *len) {
  const char *bytes = lbin_bytes(L, arg, len);   /* a binary (lmod_bin.c): its bytes */
  if (bytes) return bytes;
  if (lua_type(L, arg) == LUA_TTABLE) {
    luaL_Buffer b;
    lua_Integer n = luaL_len(L, arg);
    luaL_buffinit(L, &b);
    for (lua_Integer i = 1; i <= n; i++) {
      lua_rawgeti(L, arg, i);
      if (!lua_isstring(L, -1)) luaL_argerror(L, arg, "table of strings expected");
      luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    lua_replace(L, arg);
  }
  if (!lua_isstring(L, arg)) luaL_typeerror(L, arg, "string, binary or table of strings");
  return lua_tolstring(L, arg, len);
}

/* ---- requests that are still queued at a port ---------------------------------------- */

void lport_pending_set(lua_State *L, lpvm_id port, int on) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &pending_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    if (!on) return;
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &pending_key);
  }
  if (on) lua_pushboolean(L, 1);
  else lua_pushnil(L);
  lua_rawsetp(L, -2, (void *)(uintptr_t)port);
  lua_pop(L, 1);
}

int lport_pending_get(lua_State *L, lpvm_id port) {
  int on = 0;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &pending_key) == LUA_TTABLE)
    on = lua_rawgetp(L, -1, (void *)(uintptr_t)port) != LUA_TNIL, lua_pop(L, 1);
  lua_pop(L, 1);
  return on;
}

/* ---- waiting for a port's answer ----------------------------------------------------- */

static const struct { const char *name; unsigned bit; } port_tags[] = {
    {"data", LPORT_W_DATA}, {"eof", LPORT_W_EOF}, {"error", LPORT_W_ERROR},
    {"closed", LPORT_W_CLOSED},
    {"connected", LPORT_W_CONNECTED}, {"tcp_accept", LPORT_W_ACCEPT}, {"ready", LPORT_W_READY},
    {"ok", LPORT_W_OK}, {"position", LPORT_W_POSITION}, {"exit_status", LPORT_W_EXIT_STATUS},
    {"stderr", LPORT_W_STDERR}, {"recv_cancelled", LPORT_W_CANCELLED}, {NULL, 0}};

static unsigned tag_bit(const char *s, size_t n) {
  for (int i = 0; port_tags[i].name; i++)
    if (strlen(port_tags[i].name) == n && memcmp(port_tags[i].name, s, n) == 0)
      return port_tags[i].bit;
  return 0;
}

/* The receive predicate: upvalues port, mask, monitor reference (0: none). */
static int wait_pred(lua_State *L) {
  int ok = 0;
  size_t n;
  const char *tag = lua_type(L, 1) == LUA_TSTRING ? lua_tolstring(L, 1, &n) : NULL;
  if (tag && n == 4 && memcmp(tag, "DOWN", 4) == 0) {
    lua_Integer mref = lua_tointeger(L, lua_upvalueindex(3));
    ok = mref != 0 && lmod_to_ref(L, 2) == (uint64_t)mref;
  } else if (tag) {
    unsigned mask = (unsigned)lua_tointeger(L, lua_upvalueindex(2));
    ok = (tag_bit(tag, n) & mask) &&
         lua_touserdata(L, lua_upvalueindex(1)) == lua_touserdata(L, 2) &&
         lua_type(L, 2) == LUA_TLIGHTUSERDATA;
  }
  lua_pushboolean(L, ok);
  return 1;
}

/* Push receive(pred, ms) for wait_msg: ready for lua_callk(L, 2, ...). */
void lport_push_wait(lua_State *L, lpvm_id port, unsigned mask, uint64_t mref, int64_t ms) {
  luaL_checkstack(L, 8, "wait");
  lua_pushcfunction(L, lmod_receive);
  lua_pushlightuserdata(L, (void *)(uintptr_t)port);
  lua_pushinteger(L, (lua_Integer)mask);
  lua_pushinteger(L, (lua_Integer)mref);
  lua_pushcclosure(L, wait_pred, 3);
  if (ms < 0) lua_pushnil(L);
  else lua_pushinteger(L, (lua_Integer)ms);
}

/* Wait for the next message of `port` whose tag is in `mask`, or for the DOWN of
** monitor `mref`; ms < 0: forever. Its values are pushed above the current top,
** which k receives as its context (a timeout pushes nil, "timeout"). A k that waits
** again nests one C frame: fine for the bounded two-step waits here (send_try
** loops instead). */
int lport_wait(lua_State *L, lpvm_id port, unsigned mask, uint64_t mref, int64_t ms,
                    lua_KFunction k) {
  int base = lua_gettop(L);
  lport_push_wait(L, port, mask, mref, ms);
  lua_callk(L, 2, LUA_MULTRET, base, k);
  return k(L, LUA_OK, base);
}

/* The tag of the answer at base + 1 (NULL: the wait timed out). */
const char *lport_answer(lua_State *L, lua_KContext base) {
  return lua_type(L, (int)base + 1) == LUA_TSTRING ? lua_tostring(L, (int)base + 1) : NULL;
}

/* The answer's value (at base + 3) when `ok`; nil, reason for {error, Port, Reason};
** 0 (nothing pushed) for any other tag. */
int lport_value(lua_State *L, lua_KContext base, const char *tag, int ok) {
  if (ok) {
    lua_pushvalue(L, (int)base + 3);
    return 1;
  }
  if (strcmp(tag, "error") != 0) return 0;
  lua_pushnil(L);
  lua_pushvalue(L, (int)base + 3);
  return 2;
}

/* ---- the caller's mailbox ------------------------------------------------------------ */

/* Is m {Tag, Port, ...} with a port tag? Sets *extra to a pid that follows. */
static int from_port(lpvm_msg *m, lpvm_id port, lpvm_id *extra) {
  lpvm_tread r;
  uint32_t arity;
  const char *a;
  size_t n;
  lpvm_id id;
  *extra = 0;
  if (lpvm_tread_init(&r, lpvm_msg_data(m), lpvm_msg_len(m)) != 0 ||
      lpvm_get_tuple(&r, &arity) != 0 || arity < 2 || lpvm_get_atom(&r, &a, &n) != 0 ||
      !tag_bit(a, n) || lpvm_get_pid(&r, &id) != 0 || id != port)
    return 0;
  if (arity == 3 && lpvm_get_pid(&r, extra) != 0) *extra = 0;
  return 1;
}

static int lport_is_down(lpvm_msg *m, uint64_t mref) {
  lpvm_tread r;
  uint32_t arity;
  const char *a;
  size_t n;
  uint64_t ref;
  return lpvm_tread_init(&r, lpvm_msg_data(m), lpvm_msg_len(m)) == 0 &&
         lpvm_get_tuple(&r, &arity) == 0 && arity == 5 && lpvm_get_atom(&r, &a, &n) == 0 &&
         n == 4 && memcmp(a, "DOWN", 4) == 0 && lpvm_get_ref(&r, &ref) == 0 && ref == mref;
}

/* Drop every message `port` sent the caller. A connection a closed listener
** delivered and nobody took is closed too (it is the caller's). Not while a
** receive runs: its save pointer may point into the mailbox (check_proc). */
void lport_flush(lproc *p, lpvm_id port) {
  lpvm_msg *prev = NULL, *m;
  lpvm_id conn;
  while ((m = lpvm_mbox_next(&p->task, prev)) != NULL) {
    if (from_port(m, port, &conn)) {
      lpvm_mbox_take(&p->task, m);
      lpvm_msg_free(m);
      if (conn && lpvm_id_is_port(conn)) lpvm_port_close(&p->task, conn);
    } else {
      prev = m;
    }
  }
}

/* Stop monitor mref; its DOWN may already sit in the mailbox (after demonitor no
** new one comes). */
void lport_drop_monitor(lproc *p, uint64_t mref) {
  lpvm_demonitor(&p->task, mref);
  lpvm_msg *prev = NULL, *m;
  while ((m = lpvm_mbox_next(&p->task, prev)) != NULL) {
    if (lport_is_down(m, mref)) {
      lpvm_mbox_take(&p->task, m);
      lpvm_msg_free(m);
      return;
    }
    prev = m;
  }
}

/* Monitor `port`, the reference pushed as an integer (so it survives a yield). */
uint64_t lport_push_monitor(lua_State *L, lproc *p, lpvm_id port) {
  uint64_t mref = 0;
  if (lpvm_monitor(&p->task, port, &mref) != 0) luaL_error(L, "not enough memory");
  lua_pushinteger(L, (lua_Integer)mref);
  return mref;
}

const lmod_fn lmod_port_fns[] = {
    {"open_port", lmod_open_port},
    {"fd_port", lmod_fd_port},
    {"port_send", lmod_port_send},
    {"tcp_send", lmod_port_send},
    {"recv", lmod_recv},
    {"set_active", lmod_set_active},
    {"set_packet", lmod_set_packet},
    {"shutdown", lmod_shutdown},
    {"controlling_process", lmod_controlling_process},
    {"port_close", lmod_port_close},
    {"is_port", lmod_is_port},
    {"tcp_listen", lmod_tcp_listen},
    {"tcp_accept", lmod_tcp_accept},
    {"tcp_connect", lmod_tcp_connect},
    {"file_open", lmod_file_open},
    {"file_read", lmod_file_read},
    {"file_write", lmod_file_write},
    {"file_seek", lmod_file_seek},
    {"file_close", lmod_port_close},
    {NULL, NULL}};
