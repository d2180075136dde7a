/*
** lterm_dec.c -- Erlang external terms -> Lua values (the mapping is in lterm.h): a
** message's values pushed in the receiving process, foreign references (a term this
** node cannot show as a Lua value, kept whole), and which remote functions are
** trusted to load. lterm.c writes terms; the common shapes take lterm_plain*.c's
** in-place paths first.
**
** The decoder runs inside the receiving process, where errors are caught: a
** malformed term raises "malformed message" there and touches nothing else.
*/
#include <lauxlib.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/binary.h"
#include "lpvm/dist.h"
#include "vm/lproc_int.h"
#include "vm/lterm.h"
#include "vm/lterm_int.h"
#include "vm/lraw.h"

/* ---- decoding ------------------------------------------------------------------------ */

static void dec_value(lterm_dec *d, int depth);

_Noreturn void lterm_dec_bad(lua_State *L) {
  luaL_error(L, "malformed message (not a valid external term)");
  abort();   /* not reached */
}
#define dec_bad lterm_dec_bad

static void dec_atom(lua_State *L, lpvm_tread *r) {
  const char *s;
  size_t len;
  if (lpvm_get_atom(r, &s, &len)) dec_bad(L);
  if (len == 3 && memcmp(s, "nil", 3) == 0) lua_pushnil(L);
  else if (len == 4 && memcmp(s, "true", 4) == 0) lua_pushboolean(L, 1);
  else if (len == 5 && memcmp(s, "false", 5) == 0) lua_pushboolean(L, 0);
  else lua_pushlstring(L, s, len);
}

/* n elements into a new sequence. */
static void dec_seq(lterm_dec *d, uint32_t n, int depth) {
  lua_State *L = d->L;
  lua_createtable(L, (int)(n > 1u << 24 ? 1u << 24 : n), 0);
  lfun_number(d, -1);
  for (uint32_t i = 1; i <= n; i++) {
    dec_value(d, depth + 1);
    lua_rawseti(L, -2, (lua_Integer)i);
  }
}

static void dec_map(lterm_dec *d, uint32_t pairs, int depth) {
  lua_State *L = d->L;
  lua_createtable(L, 0, (int)(pairs > 1u << 24 ? 1u << 24 : pairs));
  lfun_number(d, -1);
  for (uint32_t i = 0; i < pairs; i++) {
    dec_value(d, depth + 1);
    dec_value(d, depth + 1);
    int kt = lua_type(L, -2);
    if (kt == LUA_TNIL || (kt == LUA_TNUMBER && lua_tonumber(L, -2) != lua_tonumber(L, -2)))
      lua_pop(L, 2);   /* not a valid key: dropped */
    else
      lua_rawset(L, -3);
  }
}

/* Whatever has no Lua counterpart: its Erlang text. */
static void dec_other(lua_State *L, lpvm_tread *r) {
  const uint8_t *start = r->p;
  if (lpvm_skip(r)) dec_bad(L);
  size_t n = (size_t)(r->p - start);
  uint8_t *tmp = malloc(n + 1);
  char text[256];
  if (!tmp) luaL_error(L, "not enough memory");
  tmp[0] = 131;
  memcpy(tmp + 1, start, n);
  lpvm_term_format(tmp, n + 1, text, sizeof text);
  free(tmp);
  lua_pushstring(L, text);
}

/* ---- foreign references ----------------------------------------------------------- */

/* A reference made by another node (an erl make_ref(), an erpc request id) has no
** 64-bit lpvm form: it becomes a userdata holding its exact bytes, interned by those
** bytes (weak table) so that the same reference is the same value (==, table key),
** and it encodes back unchanged: a reply carries the caller's own tag. */
static const char foreign_mt_key = 'f', foreign_tab_key = 'F';

static int foreign_tostring(lua_State *L) {
  size_t n = 0;
  const uint8_t *t = lterm_foreign(L, 1, &n);
  if (!t) return luaL_argerror(L, 1, "foreign term expected");
  char text[128];
  lpvm_term_format(t, n, text, sizeof text);
  lua_pushstring(L, text);
  return 1;
}

const uint8_t *lterm_foreign(lua_State *L, int idx, size_t *len) {
  if (lua_type(L, idx) != LUA_TUSERDATA || !lua_getmetatable(L, idx)) return NULL;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &foreign_mt_key);
  int same = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  if (!same) return NULL;
  *len = lua_rawlen(L, idx);
  return lua_touserdata(L, idx);
}

void lterm_push_foreign(lua_State *L, const uint8_t *term, size_t len) {
  lmod_weak_table(L, &foreign_tab_key, "v");               /* T */
  lua_pushlstring(L, (const char *)term, len);             /* T k: the bytes */
  lua_pushvalue(L, -1);
  if (lua_rawget(L, -3) != LUA_TUSERDATA) {                /* not interned yet */
    lua_pop(L, 1);
    memcpy(lua_newuserdatauv(L, len, 0), term, len);       /* T k u */
    lmod_metatable(L, &foreign_mt_key, "term", foreign_tostring, NULL);
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -2);
    lua_pushvalue(L, -2);
    lua_rawset(L, -5);
  }
  lua_replace(L, -3);                                      /* u k */
  lua_pop(L, 1);
}

static void dec_foreign(lua_State *L, lpvm_tread *r) {
  const uint8_t *start = r->p;
  if (lpvm_skip(r)) dec_bad(L);
  size_t n = (size_t)(r->p - start);
  uint8_t *t = malloc(n + 1);
  if (!t) luaL_error(L, "not enough memory");
  t[0] = 131;
  memcpy(t + 1, start, n);
  lterm_push_foreign(L, t, n + 1);   /* (no error path can leak t: the pushes only */
  free(t);                           /*  fail on memory, which ends the process)  */
}

/* An integer beyond 64 bits (SMALL_BIG_EXT 110 or LARGE_BIG_EXT 111 at p, already
** checked by lpvm_skip) as the nearest double, as Lua's tonumber reads a long numeral:
** beyond the float range it is +-math.huge. The top 8 bytes of the magnitude are
** converted once (the bytes below them only break a tie: a sticky bit), then scaled. */
static double big_to_double(const uint8_t *p) {
  size_t n = p[0] == 110 ? p[1] : ((size_t)p[1] << 24 | (size_t)p[2] << 16 |
                                   (size_t)p[3] << 8 | p[4]);
  const uint8_t *sign = p[0] == 110 ? p + 2 : p + 5, *dig = sign + 1;   /* little-endian */
  while (n > 0 && dig[n - 1] == 0) n--;
  if (n == 0) return 0.0;
  size_t k = n < 8 ? n : 8;
  uint64_t m = 0;
  for (size_t i = 0; i < k; i++) m = m << 8 | dig[n - 1 - i];
  for (size_t i = 0; i + k < n; i++)
    if (dig[i]) { m |= 1; break; }
  size_t shift = (n - k) * 8;
  double d = shift > 2048 ? HUGE_VAL : ldexp((double)m, (int)shift);
  return *sign ? -d : d;
}

void lterm_dec_value(lterm_dec *d, int depth) { dec_value(d, depth); }

static void dec_value(lterm_dec *d, int depth) {
  lua_State *L = d->L;
  lpvm_tread *r = d->r;
  const uint8_t *p;
  size_t len;
  uint32_t n;
  int64_t i;
  double dbl;
  lpvm_id id;
  uint64_t ref;
  if (depth > LTERM_DEPTH) luaL_error(L, "message nested too deep");
  luaL_checkstack(L, 4, "message nested too deep");
  switch (lpvm_get_type(r)) {
    case LPVM_T_ATOM:
      if (!lfun_push(d, depth)) dec_atom(L, r);
      return;
    case LPVM_T_INT:
      if (lpvm_get_int(r, &i)) dec_bad(L);
      lua_pushinteger(L, (lua_Integer)i);
      return;
    case LPVM_T_FLOAT:
      if (lpvm_get_float(r, &dbl)) dec_bad(L);
      lua_pushnumber(L, dbl);
      return;
    case LPVM_T_BINARY:
      if (lpvm_get_binary(r, &p, &len)) dec_bad(L);
      lua_pushlstring(L, (const char *)p, len);
      return;
    case LPVM_T_PID: case LPVM_T_PORT:
      if (lpvm_get_pid(r, &id)) { dec_other(L, r); return; }   /* another node's */
      lmod_push_pid(L, id);
      return;
    case LPVM_T_REF:
      if (lpvm_get_ref(r, &ref)) { dec_foreign(L, r); return; }
      lmod_push_ref(L, ref);
      return;
    case LPVM_T_TUPLE:
      if (lfun_push(d, depth)) return;
      if (lpvm_get_tuple(r, &n)) dec_bad(L);
      dec_seq(d, n, depth);
      return;
    case LPVM_T_NIL:
      if (lpvm_get_nil(r)) dec_bad(L);
      lua_newtable(L);
      lfun_number(d, -1);
      return;
    case LPVM_T_LIST:
      if (lpvm_get_list(r, &n)) dec_bad(L);
      dec_seq(d, n, depth);
      if (lpvm_get_type(r) == LPVM_T_NIL) (void)lpvm_get_nil(r);
      else if (lpvm_skip(r)) dec_bad(L);   /* an improper tail is dropped */
      return;
    case LPVM_T_STRING:
      if (lpvm_get_string(r, &p, &len)) dec_bad(L);
      lua_createtable(L, (int)len, 0);
      for (size_t k = 0; k < len; k++) {
        lua_pushinteger(L, p[k]);
        lua_rawseti(L, -2, (lua_Integer)k + 1);
      }
      return;
    case LPVM_T_MAP:
      if (lpvm_get_map(r, &n)) dec_bad(L);
      dec_map(d, n, depth);
      return;
    case LPVM_T_BIGINT: {
      const uint8_t *start = r->p;
      if (lpvm_skip(r)) dec_bad(L);
      lua_pushnumber(L, big_to_double(start));
      return;
    }
    case LPVM_T_OTHER: {
      lpvm_binref br;
      if (d->nbins && lpvm_get_binref(r, d->bins, d->nbins, &br) == 0)
        lbin_push_received(L, br.bin, br.off, br.len);   /* a shared binary stays shared */
      else
        dec_other(L, r);
      return;
    }
    default: dec_bad(L);
  }
}

static void dec_init(lterm_dec *d, lua_State *L, lpvm_tread *r, int trusted) {
  d->L = L, d->r = r, d->trusted = trusted, d->shared = 0, d->refs = 0, d->nrefs = 0;
  d->bins = NULL, d->nbins = 0;
}

void lterm_push(lua_State *L, lpvm_tread *r) {
  lterm_dec d;
  dec_init(&d, L, r, 1);
  int graph = lfun_graph_begin(&d);
  dec_value(&d, 0);
  if (graph) lua_remove(L, d.refs);
}

/* The values of the term r is at the start of, the first `skip` of them left out
** (decoded and dropped, so a graph's shared tables still resolve; a reference is just
** stepped over); m: the message it is (its binaries), or NULL. */
static int push_values(lua_State *L, lpvm_tread *rp, int trusted, const lpvm_msg *m,
                       int skip) {
  lpvm_tread r = *rp;
  uint32_t n;
  lterm_dec d;
  dec_init(&d, L, &r, trusted);
  if (m) d.bins = lpvm_msg_bins(m, &d.nbins);
  int graph = lfun_graph_begin(&d), count = 1;
  int tuple = lpvm_get_type(&r) == LPVM_T_TUPLE;
  if (tuple && graph && lfun_push(&d, 0)) {
    if (skip) {   /* a graph of one function: pushed (and skipped) */
      lua_pop(L, 1);
      count = 0;
    }
  } else if (tuple) {   /* several values */
    if (lpvm_get_tuple(&r, &n)) dec_bad(L);
    if (n > 250) luaL_checkstack(L, (int)(n > 1000000 ? 1000000 : n), "too many values");
    for (uint32_t i = 0; i < n; i++) {
      if ((int)i >= skip) dec_value(&d, 1);
      else if (lpvm_get_type(&r) == LPVM_T_REF) { if (lpvm_skip(&r)) dec_bad(L); }
      else { dec_value(&d, 1); lua_pop(L, 1); }
    }
    count = (int)n > skip ? (int)n - skip : 0;
  } else {
    dec_value(&d, 0);
    if (skip) {   /* one value, skipped */
      lua_pop(L, 1);
      count = 0;
    }
  }
  if (graph) lua_remove(L, d.refs);
  return count;
}

int lterm_push_values_ex(lua_State *L, const uint8_t *term, size_t len, int trusted) {
  lpvm_tread r;
  if (lpvm_tread_init(&r, term, len)) dec_bad(L);
  return push_values(L, &r, trusted, NULL, 0);
}

int lterm_push_values(lua_State *L, const uint8_t *term, size_t len) {
  return lterm_push_values_ex(L, term, len, 1);
}

/* Functions from other nodes: the cookie handshake is the trust boundary, as in
** Erlang (a node that knows the cookie may rpc anything anyway); lpvm
** --no-remote-code turns it off (docs/distribution.md, "Security"). */
static _Atomic int trust_remote = 1;

void lterm_trust_remote_funs(int on) { atomic_store(&trust_remote, on != 0); }
int lterm_remote_funs_trusted(void) { return atomic_load(&trust_remote); }

typedef struct push_args { const lpvm_msg *m; int skip; } push_args;

static int push_trusted(lua_State *L) {
  const push_args *a = lua_touserdata(L, 1);
  lua_pop(L, 1);
  lpvm_tread r;
  if (lpvm_tread_init(&r, lpvm_msg_data((lpvm_msg *)a->m), lpvm_msg_len(a->m))) dec_bad(L);
  return push_values(L, &r, 1, a->m, a->skip);
}

/* A big message is decoded after the minor collection its tables would have run
** in the middle of being made (see docs/performance.md, "Collecting before a big
** message"). */
/* Collecting before a big message (docs/performance.md, "Collecting before a big
** message"). Decoding a message whose tables are about as big as the receiver's heap
** (very_big(15): ~9 KB of tables, a forwarding process's heap ~9 KB) ran the minor
** collection its allocations were due in the middle of making them: the part made so
** far was marked (it is alive), and the message before it, dead by then, swept. Now
** the collection that the message's tables would bring forward (the debt plus a
** guess of what they take, LTERM_GC_FACTOR times its bytes, is positive) runs before
** they are made, while only the dead one is there; then the debt is lowered by what
** is left of the guess, so they are made without one, and the next big message
** collects them first. The guess is at most LTERM_GC_ROOM: past it a message's
** collection in the middle is a small part of making it, and a guess of many
** megabytes would leave that much garbage uncollected. Only in generational mode with the collector running, as Lua
** set it (a stopped one or the incremental collector of a process that chose it are
** left to their pace).
**
** LUA_GCSTEP 0 sets the debt to 0 first, and Lua 5.4's generational step takes its
** major collection only when the debt is positive: the step here is always a minor
** one, with the same effect as Lua's when the heap has not grown past the major
** threshold. That test, the heap past GCestimate (the heap after the last major
** collection) plus genmajormul percent of it, is made after the minor collection,
** whose garbage is young and not what the threshold is for: past it, the debt is
** made positive and Lua's own step decides (the major collection, or its full steps
** after a bad one). */
static void gc_before(lua_State *L, size_t len) {
  if (len < LTERM_GC_BEFORE || !lraw_tail_ok()) return;
  const lraw_global *g = lraw_g(L);
  if (g->gckind != 1 || g->gcstp != 0) return;
  ptrdiff_t need = len < LTERM_GC_ROOM / LTERM_GC_FACTOR ? (ptrdiff_t)len * LTERM_GC_FACTOR
                                                          : LTERM_GC_ROOM;
  if (g->GCdebt + need <= 0) return;
  lua_gc(L, LUA_GCSTEP, 0);
  if (g->gckind != 1) return;   /* a finalizer changed the mode */
  size_t total = (size_t)(g->totalbytes + g->GCdebt), base = g->GCestimate;
  if (g->lastatomic == 0 && total > base + base / 100 * (size_t)g->genmajormul * 4)
    lua_gc(L, LUA_GCSTEP, (int)(-g->GCdebt / 1024) + 1);   /* debt > 0: Lua decides */
  if (g->gckind == 1 && g->GCdebt + need > 0)
    lua_gc(L, LUA_GCSTEP, -(int)((g->GCdebt + need) / 1024 + 1));
}

static int push_msg(lua_State *L, const lpvm_msg *m, int skip) {
  gc_before(L, m->len);
  if (!(m->flags & LPVM_MSGF_BINS)) {
    if (!lpvm_id_is_remote(m->from)) {
      int n = lterm_push_plain(L, lpvm_msg_data((lpvm_msg *)m), m->len, skip);
      if (n >= 0) return n;
    }
  } else {
    const lpvm_binref *one = skip ? NULL : lpvm_msg_lone_bin(m);
    if (one) {   /* lpvm.send(pid, b): the binary, without the decoder's set-up */
      lbin_push_received(L, one->bin, one->off, one->len);
      return 1;
    }
    if (!lpvm_id_is_remote(m->from)) {   /* {tag, b}: read in place as well */
      int n = lterm_push_plain_bins(L, m, skip);
      if (n >= 0) return n;
    }
  }
  int remote = lpvm_id_is_remote(lpvm_msg_from(m));
  int trusted = !remote || atomic_load(&trust_remote);
  if (remote && trusted) {
    /* A peer's function term that does not load (damaged bytes) reads as plain data,
    ** as from an untrusted peer, instead of raising in every receive that meets it. */
    push_args a = {m, skip};
    int base = lua_gettop(L);
    lua_pushcfunction(L, push_trusted);
    lua_pushlightuserdata(L, &a);
    if (lua_pcall(L, 1, LUA_MULTRET, 0) == LUA_OK) return lua_gettop(L) - base;
    lua_settop(L, base);
    trusted = 0;
  }
  lpvm_tread r;
  if (lpvm_tread_init(&r, lpvm_msg_data((lpvm_msg *)m), lpvm_msg_len(m))) dec_bad(L);
  return push_values(L, &r, trusted, m, skip);   /* with its binaries */
}

void lterm_push_in(lua_State *L, const lpvm_msg *m, const uint8_t *at) {
  const uint8_t *end = lpvm_msg_data((lpvm_msg *)m) + m->len, *q;
  if (!(m->flags & LPVM_MSGF_BINS) && (q = lterm_plain_at(L, at, end))) {
    if (q == end) return;
    lua_pop(L, 1);
  }
  lpvm_tread r = {at, end, 0};
  lterm_dec d;
  dec_init(&d, L, &r, 1);
  d.bins = lpvm_msg_bins(m, &d.nbins);
  dec_value(&d, 1);
  if (r.p != end) dec_bad(L);
}

int lterm_push_msg(lua_State *L, const lpvm_msg *m) { return push_msg(L, m, 0); }
int lterm_push_msg_tail(lua_State *L, const lpvm_msg *m) { return push_msg(L, m, 1); }
