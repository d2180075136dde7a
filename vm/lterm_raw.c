/*
** lterm_raw.c -- a message's lists read straight from Lua's tables.
**
** EStone's nested messages are lists of scalars and lists: very_big(15) is 76 tables
** and 315 values, and through the C API each element cost the encoder a lua_next, a
** key check, a type, a value read and a pop (~150 instructions), the decoder a push
** and a lua_rawseti (~80). Lua's table layout (lobject.h's Table, TValue, TString,
** Node) has been the same through 5.4.0-5.4.6; the encoder here reads a table's array
** part and hash nodes through a mirror of it, and the reader (lterm_plain.c) writes
** integers, floats, booleans and pids straight into a new table's array part, and a
** short string met again in the message from the one it made the first time.
**
** The mirror is trusted only after lterm_raw_check compared it, once per VM on a
** throwaway state of its own (no finalizer of a process can run), with what the C
** API says of tables it built: array sizes and the "alimit is not the size" flag,
** every value tag this file reads, strings' bytes and lengths, hash nodes. A liblua
** that differs is refused and both sides keep the C API's way, byte for byte the
** same terms. The reader writes into slots lua_createtable made: values that are not
** collectable, and a string only while the table is not black (lua_rawseti's barrier
** would do nothing then either; a black table gets lua_rawseti). The encoder only
** reads, and calls nothing that could resize a table while it walks one.
*/
#include <lauxlib.h>
#include <pthread.h>
#include <string.h>

#include "lpvm/term.h"
#include "vm/lterm_raw.h"

_Atomic int lterm_raw_layout = 0;

/* lobject.h's Node: the value, the key's tag, the chain, the key. */
typedef struct lraw_node {
  lraw_value v;
  unsigned char tt, key_tt;
  int next;
  lraw_value key;
} lraw_node;

/* ltable.c's luaH_realasize: alimit, or the power of 2 above it when a length
** search lowered it (LRAW_BITRAS). */
static inline unsigned int real_asize(const lraw_table *h) {
  unsigned int n = h->alimit;
  if (!(h->flags & LRAW_BITRAS) || (n & (n - 1)) == 0) return n;
  n |= n >> 1, n |= n >> 2, n |= n >> 4, n |= n >> 8, n |= n >> 16;
  return n + 1;
}

static const char *raw_str(const lraw_tvalue *v, size_t *len) {
  const lraw_string *s = v->v.gc;
  *len = v->tt == LRAW_VSHRSTR ? s->shrlen : s->lnglen;
  return s->contents;
}

/* ---- the check ---------------------------------------------------------------------- */

static const char long_s[] = "a string longer than forty bytes, so a long one";

/* One array slot against what the API reads at t[i] (the API's value pushed). */
static int slot_ok(lua_State *L, const lraw_table *h, int t, int i, int tag) {
  const lraw_tvalue *v = &h->array[i - 1];
  int ok = v->tt == tag;
  lua_rawgeti(L, t, i);
  switch (tag) {
    case LRAW_VNUMINT: ok = ok && v->v.i == lua_tointeger(L, -1); break;
    case LRAW_VNUMFLT: ok = ok && v->v.n == lua_tonumber(L, -1); break;
    case LRAW_VTRUE: case LRAW_VFALSE:
      ok = ok && lua_toboolean(L, -1) == (tag == LRAW_VTRUE);
      break;
    case LRAW_VLIGHTUD: ok = ok && v->v.p == lua_touserdata(L, -1); break;
    case LRAW_VSHRSTR: case LRAW_VLNGSTR: {
      size_t n, m;
      const char *s = lua_tolstring(L, -1, &n);
      ok = ok && v->v.gc == lua_topointer(L, -1) && raw_str(v, &m) == s && m == n;
      break;
    }
    case LRAW_VTABLE: ok = ok && v->v.gc == lua_topointer(L, -1); break;
    default: ok = ok && lua_isnil(L, -1); break;
  }
  lua_pop(L, 1);
  return ok;
}

static int check_cf(lua_State *L) {
  /* an array of 8 of each kind of value the codec reads or writes directly */
  lua_createtable(L, 8, 0);
  int t = lua_gettop(L);
  lua_pushinteger(L, -42), lua_rawseti(L, t, 1);
  lua_pushnumber(L, 2.5), lua_rawseti(L, t, 2);
  lua_pushboolean(L, 1), lua_rawseti(L, t, 3);
  lua_pushboolean(L, 0), lua_rawseti(L, t, 4);
  lua_pushlightuserdata(L, (void *)&lterm_raw_layout), lua_rawseti(L, t, 5);
  lua_pushliteral(L, "abc"), lua_rawseti(L, t, 6);
  lua_pushstring(L, long_s), lua_rawseti(L, t, 7);
  lua_newtable(L), lua_rawseti(L, t, 8);
  const lraw_table *h = lraw_table_at(L, t);
  static const int tags[] = { LRAW_VNUMINT, LRAW_VNUMFLT, LRAW_VTRUE, LRAW_VFALSE,
                              LRAW_VLIGHTUD, LRAW_VSHRSTR, LRAW_VLNGSTR, LRAW_VTABLE };
  int ok = h->alimit == 8 && !(h->flags & LRAW_BITRAS) && h->lastfree == NULL &&
           real_asize(h) == 8;
  for (int i = 1; ok && i <= 8; i++) ok = slot_ok(L, h, t, i, tags[i - 1]);
  /* a slot set to nil and read back */
  lua_pushnil(L), lua_rawseti(L, t, 8);
  ok = ok && LRAW_NOVARIANT(h->array[7].tt) == 0 && slot_ok(L, h, t, 8, 0);
  /* a length search lowers alimit of an array of 8 holding 5: the flag and the size */
  lua_createtable(L, 8, 0);
  int u = lua_gettop(L);
  for (int i = 1; i <= 5; i++) lua_pushinteger(L, i), lua_rawseti(L, u, i);
  const lraw_table *g = lraw_table_at(L, u);
  ok = ok && lua_rawlen(L, u) == 5 && g->alimit == 5 && (g->flags & LRAW_BITRAS) &&
       real_asize(g) == 8 && LRAW_NOVARIANT(g->array[7].tt) == 0 &&
       g->array[4].tt == LRAW_VNUMINT && g->array[4].v.i == 5;
  /* a hash part of 4 nodes holding two values: exactly those two, by their keys */
  lua_createtable(L, 0, 4);
  int m = lua_gettop(L);
  lua_pushinteger(L, 7), lua_setfield(L, m, "x");
  lua_pushinteger(L, 9), lua_setfield(L, m, "y");
  const lraw_table *k = lraw_table_at(L, m);
  ok = ok && k->lsizenode == 2 && k->lastfree != NULL && k->alimit == 0;
  if (ok) {
    const lraw_node *nd = k->node;
    lua_pushliteral(L, "x");
    const void *kx = lua_topointer(L, -1);
    int found = 0, others = 0;
    for (int i = 0; i < 4; i++) {
      if (LRAW_NOVARIANT(nd[i].tt) == 0) continue;
      if (nd[i].tt == LRAW_VNUMINT && nd[i].key_tt == LRAW_VSHRSTR &&
          (nd[i].v.i == 7) == (nd[i].key.gc == kx))
        found++;
      else
        others++;
    }
    ok = found == 2 && others == 0;
  }
  /* the collector's black bit: a full generational collection leaves what the stack
  ** holds old and black; a new table is white */
  lua_gc(L, LUA_GCGEN, 0, 0);
  lua_gc(L, LUA_GCCOLLECT);
  ok = ok && (lraw_table_at(L, t)->marked & LRAW_BLACK);
  lua_newtable(L);
  ok = ok && !(lraw_table_at(L, -1)->marked & LRAW_BLACK);
  lua_gc(L, LUA_GCINC, 0, 0, 0);
  lua_pushboolean(L, ok);
  return 1;
}

static void check_once(void) {
  int ok = 0;
  lua_State *L = LUA_VERSION_NUM == 504 ? luaL_newstate() : NULL;
  if (L) {
    lua_pushcfunction(L, check_cf);
    ok = lua_pcall(L, 0, 1, 0) == LUA_OK && lua_toboolean(L, -1);
    lua_close(L);
  }
  atomic_store(&lterm_raw_layout, ok ? 1 : -1);
}

int lterm_raw_check(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, check_once);
  return atomic_load(&lterm_raw_layout);
}

/* ---- the encoder's lists ------------------------------------------------------------ */

static int walk(lterm_enc *e, const lraw_table *h, int t);

/* A table element of a list, walked where it is (no lua_rawgeti, type, topointer,
** checkstack and pop, ~110 instructions a table), with enc_table's path bookkeeping:
** 0 put, 1 nothing put (on the path, too deep, or not walkable: the C API's way). */
static int walk_sub(lterm_enc *e, const lraw_table *sub) {
  unsigned slot = lterm_path_slot(sub);
  if (e->depth >= LTERM_DEPTH) return 1;
  if (e->onpath[slot])
    for (int i = 0; i < e->depth; i++)
      if (e->path[i] == sub) return 1;   /* a cycle: enc_table says so */
  e->path[e->depth++] = sub;
  e->onpath[slot]++;
  int rc = walk(e, sub, 0);
  e->onpath[slot]--;
  e->depth--;
  return rc;
}

/* The table h as a list from its array part, if its keys are 1..k there and its hash
** part holds nothing. t: its stack index, or 0 when it is not on the stack; then a
** value only the C API reads (a userdata, a function, a table that is not such a
** list) rewinds what was put and returns 1, and the caller (on the stack) encodes
** the whole table the C API's way (e->noraw: without trying this again inside it,
** so a deep message is never walked more than twice). */
static int walk(lterm_enc *e, const lraw_table *h, int t) {
  if (h->lastfree) {   /* a hash part: a list only if every node is empty */
    const lraw_node *nd = h->node;
    for (size_t i = 0, n = (size_t)1 << h->lsizenode; i < n; i++)
      if (LRAW_NOVARIANT(nd[i].tt) != 0) return 1;
  }
  unsigned int asize = real_asize(h), k = 0;
  const lraw_tvalue *a = h->array;
  while (k < asize && LRAW_NOVARIANT(a[k].tt) != 0) k++;
  for (unsigned int j = k + 1; j < asize; j++)   /* a[k] is nil: past it, all nil? */
    if (LRAW_NOVARIANT(a[j].tt) != 0) return 1;
  lpvm_tbuf *b = e->b;
  size_t mark = b->len;
  lpvm_put_list(b, k);   /* nothing for k == 0: [] is the tail alone */
  for (unsigned int i = 0; i < k; i++) {
    const lraw_tvalue *v = &a[i];
    size_t len;
    switch (v->tt) {
      case LRAW_VNUMINT: lpvm_put_int(b, v->v.i); break;
      case LRAW_VNUMFLT: lpvm_put_float(b, v->v.n); break;
      case LRAW_VSHRSTR: case LRAW_VLNGSTR: {
        const char *s = raw_str(v, &len);
        lpvm_put_binary(b, s, len);
        break;
      }
      case LRAW_VLIGHTUD: lpvm_put_pid(b, (lpvm_id)(uintptr_t)v->v.p); break;
      case LRAW_VTRUE: lpvm_put_atom_len(b, "true", 4); break;
      case LRAW_VFALSE: lpvm_put_atom_len(b, "false", 5); break;
      case LRAW_VTABLE:
        if (!e->noraw && walk_sub(e, v->v.gc) == 0) break;
        __attribute__((fallthrough));   /* on the stack, the C API's way */
      default: {   /* a table, a userdata, a function: the general encoder */
        if (!t) {
          b->len = mark;
          return 1;
        }
        lua_State *L = e->L;
        int sub = v->tt == LRAW_VTABLE;
        lua_rawgeti(L, t, (lua_Integer)i + 1);
        e->noraw += sub;
        int rc = lterm_enc_value(e, lua_gettop(L));
        e->noraw -= sub;
        lua_pop(L, 1);
        if (rc != 0) return rc < 0 ? rc : -1;
        a = h->array;   /* the same table, unchanged: read again all the same */
        break;
      }
    }
  }
  lpvm_put_nil(b);
  return 0;
}

int lterm_raw_list(lterm_enc *e, int t, const void *self) {
  return walk(e, self, t);
}
