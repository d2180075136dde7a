/*
** lets.c -- the fast paths of `require "ets"` (lets.h). The general path encodes every
** argument with lterm.c's encoder into a per-thread builder and decodes every result
** with its generic decoder; most calls, though, carry a key that is an integer or a
** string and objects that are short arrays of such values. Here those are written
** straight into the caller's stack array (no builder, no cycle or function
** bookkeeping) and read straight back into tables made with their exact sizes. The
** bytes are the very ones lterm.c writes, so a table cannot tell which path an object
** took, and whatever is not of these shapes goes the general way.
*/
#include <lauxlib.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "vm/lets.h"
#include "vm/lterm.h"
#include "vm/lterm_int.h"

/* The tags of Erlang's external term format read here (ERTS's, fixed for good). */
enum {
  ETF_VERSION = 131, ETF_NEW_FLOAT = 70, ETF_SMALL_INT = 97, ETF_INT = 98,
  ETF_SMALL_TUPLE = 104, ETF_LARGE_TUPLE = 105, ETF_NIL = 106, ETF_LIST = 108,
  ETF_BINARY = 109, ETF_SMALL_ATOM_UTF8 = 119
};

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* ---- encoding ------------------------------------------------------------------------ */

/* b never grows: every put is preceded by a check that its largest form fits (a
** builder over a fixed array must not reach tbuf_grow, which would realloc it). */

/* An integer as lpvm_put_int writes it; the caller checked that 11 bytes fit. */
static inline void put_int(lpvm_tbuf *b, lua_Integer v) {
  uint8_t *q = b->data + b->len;
  if (v >= 0 && v <= 255) {
    q[0] = ETF_SMALL_INT;
    q[1] = (uint8_t)v;
    b->len += 2;
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    uint32_t u = (uint32_t)v;
    q[0] = ETF_INT;
    q[1] = (uint8_t)(u >> 24); q[2] = (uint8_t)(u >> 16);
    q[3] = (uint8_t)(u >> 8); q[4] = (uint8_t)u;
    b->len += 5;
  } else {
    lpvm_put_int(b, v);
  }
}

/* The value at idx, whose lua_type is `type` (LUA_TNONE: not known yet). */
static int put_scalar(lua_State *L, int idx, int type, lpvm_tbuf *b) {
  size_t room = b->cap - b->len, len;
  const char *s;
  /* integers first: a counter's, an index's */
  if ((type == LUA_TNUMBER || type == LUA_TNONE) && lua_isinteger(L, idx)) {
    if (room < 11) return -1;
    put_int(b, lua_tointegerx(L, idx, NULL));
    return 0;
  }
  if (type == LUA_TNONE) type = lua_type(L, idx);
  switch (type) {
    case LUA_TNIL:
      if (room < 6) return -1;
      lpvm_put_atom_len(b, "nil", 3);
      return 0;
    case LUA_TBOOLEAN:
      if (room < 8) return -1;
      if (lua_toboolean(L, idx)) lpvm_put_atom_len(b, "true", 4);
      else lpvm_put_atom_len(b, "false", 5);
      return 0;
    case LUA_TNUMBER:
      if (room < 11) return -1;
      lpvm_put_float(b, lua_tonumber(L, idx));   /* integers were taken above */
      return 0;
    case LUA_TSTRING:
      s = lua_tolstring(L, idx, &len);
      if (len > room || room - len < 5) return -1;
      lpvm_put_binary(b, s, len);
      return 0;
    default:
      return -1;
  }
}

/* put_scalar with an object's usual element, an integer, written here (no call). */
static inline int put_elem(lua_State *L, int idx, int type, lpvm_tbuf *b) {
  if (type == LUA_TNUMBER && b->cap - b->len >= 11 && lua_isinteger(L, idx)) {
    put_int(b, lua_tointegerx(L, idx, NULL));
    return 0;
  }
  return put_scalar(L, idx, type, b);
}

size_t lets_scalar(lua_State *L, int idx, uint8_t *buf, size_t cap) {
  lpvm_tbuf b = {buf, 1, cap, 0};
  if (cap < 1) return 0;
  buf[0] = ETF_VERSION;
  if (cap >= 12 && lua_isinteger(L, idx)) {   /* the usual key, no call */
    put_int(&b, lua_tointegerx(L, idx, NULL));
    return b.err ? 0 : b.len;
  }
  return put_scalar(L, idx, LUA_TNONE, &b) || b.err ? 0 : b.len;
}

/* ---- an object's array read in place ------------------------------------------------ */

/* Through the API an object's element costs a call to fetch it, a type test, a call to
** read it and a pop (~190 instructions for {k + 1, k}). Lua 5.4 keeps a short array's
** elements in one vector of tagged values (lobject.h, ltable.h: Table's alimit and
** array, TValue, TString), which is read here through a mirror of that layout -- but
** only once lets_layout_check has seen the mirror read right, on a table of every kind
** of element it reads, made through the API (as lfun.c does for closures). Nothing is
** written through the mirror, so no barrier or invariant of the collector is involved;
** an element of any other kind, or an array Lua keeps elsewhere, takes the API path. */
typedef struct arr_value {
  union { int64_t i; double n; const void *gc; } v;
  uint8_t tt;
} arr_value;

typedef struct arr_table {   /* Table: CommonHeader, flags, lsizenode, alimit, array, ... */
  void *next;
  uint8_t tt, marked, flags, lsizenode;
  unsigned alimit;           /* elements 1..alimit lie in array[] */
  arr_value *array;
  const void *node;
  const void *lastfree;      /* NULL: no hash part (ltable.c's isdummy) */
} arr_table;

#define ARR_BITRAS 0x80      /* in flags: alimit is not the array's real size */

typedef struct arr_string {  /* TString: CommonHeader, extra, shrlen, hash, u, contents */
  void *next;
  uint8_t tt, marked, extra, shrlen;
  unsigned hash;
  size_t lnglen;             /* long strings; short ones use shrlen */
  char contents[];
} arr_string;

/* Lua 5.4's variant tags (lobject.h): the type in bits 0-3, the variant in 4-5, and
** bit 6 for collectable values. Nil's variants (nil, empty, absent key) share type 0. */
enum { TV_FALSE = 0x01, TV_TRUE = 0x11, TV_INT = 0x03, TV_FLOAT = 0x13, TV_SHRSTR = 0x44,
       TV_LNGSTR = 0x54 };

static _Atomic int arr_layout;   /* 0 not checked yet, 1 the mirror holds, -1 it does not */

static int arr_string_ok(lua_State *L, const arr_table *t, int i) {
  size_t len;
  lua_rawgeti(L, -1, i);
  const char *s = lua_tolstring(L, -1, &len);
  const arr_value *v = &t->array[i - 1];
  const arr_string *ts = v->v.gc;
  int ok = s && ts && s == ts->contents &&
           len == (v->tt == TV_SHRSTR ? (size_t)ts->shrlen : ts->lnglen);
  lua_pop(L, 1);
  return ok;
}

void lets_layout_check(lua_State *L) {
  if (atomic_load_explicit(&arr_layout, memory_order_relaxed) != 0) return;
  int ok = 0;
  if (LUA_VERSION_NUM == 504 && sizeof(arr_value) == 16 &&
      offsetof(arr_string, contents) == 24 && lua_checkstack(L, 6)) {
    lua_createtable(L, 8, 0);
    lua_pushinteger(L, -0x1122334455667788); lua_rawseti(L, -2, 1);
    lua_pushnumber(L, 2.5); lua_rawseti(L, -2, 2);
    lua_pushboolean(L, 1); lua_rawseti(L, -2, 3);
    lua_pushboolean(L, 0); lua_rawseti(L, -2, 4);
    lua_pushliteral(L, "ab"); lua_rawseti(L, -2, 5);
    lua_pushliteral(L, "a string longer than Lua's short ones (40 bytes at most)");
    lua_rawseti(L, -2, 6);
    lua_pushnil(L); lua_rawseti(L, -2, 8);   /* 7 never set (empty), 8 set to nil */
    const arr_table *t = lua_topointer(L, -1);
    const arr_value *a = t ? t->array : NULL;
    ok = a && t->alimit == 8 && !(t->flags & ARR_BITRAS) && !t->lastfree &&
         lua_rawlen(L, -1) == 6 && t->alimit >= 6 &&
         a[0].tt == TV_INT && a[0].v.i == -0x1122334455667788 &&
         a[1].tt == TV_FLOAT && a[1].v.n == 2.5 && a[2].tt == TV_TRUE &&
         a[3].tt == TV_FALSE && a[4].tt == TV_SHRSTR && a[5].tt == TV_LNGSTR &&
         (a[6].tt & 0x0f) == 0 && (a[7].tt & 0x0f) == 0 &&
         arr_string_ok(L, t, 5) && arr_string_ok(L, t, 6);
    lua_pop(L, 1);
    /* values written in place (lets_push_objects) read back through the API */
    int top = lua_gettop(L);
    lua_createtable(L, 4, 0);
    t = lua_topointer(L, -1);
    if (ok && t && t->alimit == 4 && t->array) {
      t->array[0].v.i = -0x1122334455667788; t->array[0].tt = TV_INT;
      t->array[1].v.n = 2.5; t->array[1].tt = TV_FLOAT;
      t->array[2].tt = TV_TRUE;
      t->array[3].tt = TV_FALSE;
      ok = lua_rawlen(L, -1) == 4 &&
           lua_rawgeti(L, -1, 1) == LUA_TNUMBER && lua_isinteger(L, -1) &&
           lua_tointeger(L, -1) == -0x1122334455667788 &&
           lua_rawgeti(L, -2, 2) == LUA_TNUMBER && lua_tonumber(L, -1) == 2.5 &&
           lua_rawgeti(L, -3, 3) == LUA_TBOOLEAN && lua_toboolean(L, -1) &&
           lua_rawgeti(L, -4, 4) == LUA_TBOOLEAN && !lua_toboolean(L, -1);
    } else {
      ok = 0;
    }
    lua_settop(L, top);
    /* a hash part: lastfree set (lets_object then asks lua_rawlen) */
    lua_createtable(L, 1, 1);
    lua_pushboolean(L, 1); lua_rawseti(L, -2, 1);
    lua_pushboolean(L, 1); lua_setfield(L, -2, "k");
    t = lua_topointer(L, -1);
    ok = ok && t && t->lastfree && t->alimit == 1 && t->array[0].tt == TV_TRUE;
    lua_pop(L, 1);
  }
  atomic_store_explicit(&arr_layout, ok ? 1 : -1, memory_order_relaxed);
}

/* One element read in place, as put_scalar would write it; -1 for another kind. */
static inline int put_tv(const arr_value *v, lpvm_tbuf *b) {
  size_t room = b->cap - b->len, len;
  const arr_string *s;
  switch (v->tt) {
    case TV_INT:
      if (room < 11) return -1;
      put_int(b, v->v.i);
      return 0;
    case TV_FLOAT:
      if (room < 11) return -1;
      lpvm_put_float(b, v->v.n);
      return 0;
    case TV_TRUE:
    case TV_FALSE:
      if (room < 8) return -1;
      if (v->tt == TV_TRUE) lpvm_put_atom_len(b, "true", 4);
      else lpvm_put_atom_len(b, "false", 5);
      return 0;
    case TV_SHRSTR:
    case TV_LNGSTR:
      s = v->v.gc;
      len = v->tt == TV_SHRSTR ? s->shrlen : s->lnglen;
      if (len > room || room - len < 5) return -1;
      lpvm_put_binary(b, s->contents, len);
      return 0;
    default:
      if ((v->tt & 0x0f) != 0) return -1;   /* a table, a function, ...: not a scalar */
      if (room < 6) return -1;
      lpvm_put_atom_len(b, "nil", 3);
      return 0;
  }
}

/* The elements of the table t in place: its length, as the API path below. */
static size_t object_in_place(lua_State *L, int idx, const arr_table *t, lpvm_tbuf *b) {
  lua_Unsigned n = t->alimit;
  /* An array of its real size, full to its last element, and no hash part: its
  ** length is alimit (ltable.c's luaH_getn answers so without looking further).
  ** Else Lua says, and the elements must lie within alimit. */
  if ((t->flags & ARR_BITRAS) || t->lastfree || n == 0 || (t->array[n - 1].tt & 0x0f) == 0) {
    n = lua_rawlen(L, idx);   /* (may move alimit, never past the array's size) */
    if (n > t->alimit) return 0;
  }
  if (n > 255) return 0;
  b->data[2] = (uint8_t)n;
  for (lua_Unsigned i = 0; i < n; i++)
    if (put_tv(&t->array[i], b)) return 0;
  return b->err ? 0 : b->len;
}

size_t lets_object(lua_State *L, int idx, uint8_t *buf, size_t cap) {
  if (lua_type(L, idx) != LUA_TTABLE || cap < 8) return 0;
  lpvm_tbuf b = {buf, 3, cap, 0};   /* the version and SMALL_TUPLE_EXT (n <= 255) */
  buf[0] = ETF_VERSION;
  buf[1] = ETF_SMALL_TUPLE;
  const arr_table *t;
  if (atomic_load_explicit(&arr_layout, memory_order_relaxed) == 1 &&
      (t = lua_topointer(L, idx)) != NULL) {
    size_t len = object_in_place(L, idx, t, &b);
    if (len) return len;
    b.len = 3;   /* another kind of element, or elsewhere: the API says */
    b.err = 0;
  }
  lua_Unsigned n = lua_rawlen(L, idx);
  if (n > 255) return 0;
  buf[2] = (uint8_t)n;
  int rc = 0;
  lua_Unsigned i = 1;
  for (; i + 1 <= n && rc == 0; i += 2) {   /* two at a time: one pop for both */
    int t1 = lua_rawgeti(L, idx, (lua_Integer)i);
    int t2 = lua_rawgeti(L, idx, (lua_Integer)i + 1);
    rc = put_elem(L, -2, t1, &b) || put_elem(L, -1, t2, &b);
    lua_pop(L, 2);
  }
  if (rc == 0 && i == n) {
    rc = put_elem(L, -1, lua_rawgeti(L, idx, (lua_Integer)i), &b);
    lua_pop(L, 1);
  }
  return rc || b.err ? 0 : b.len;
}

void lets_put_value(lua_State *L, int idx, lpvm_tbuf *b, int arg) {
  char err[LTERM_ERRSZ];
  if (lterm_put_plain(L, idx, b, err)) luaL_argerror(L, arg, err);
}

/* ---- decoding ------------------------------------------------------------------------ */

/* One scalar at *pp (no version byte): pushed, *pp advanced, 1; else 0. */
static inline int push_fast(lua_State *L, const uint8_t **pp, const uint8_t *end) {
  const uint8_t *p = *pp;
  size_t left = (size_t)(end - p), n;
  if (left < 2) return 0;
  switch (p[0]) {
    case ETF_SMALL_INT:
      lua_pushinteger(L, p[1]);
      *pp = p + 2;
      return 1;
    case ETF_INT:
      if (left < 5) return 0;
      lua_pushinteger(L, (int32_t)be32(p + 1));
      *pp = p + 5;
      return 1;
    case ETF_NEW_FLOAT: {
      if (left < 9) return 0;
      uint64_t bits = (uint64_t)be32(p + 1) << 32 | be32(p + 5);
      double d;
      memcpy(&d, &bits, sizeof d);
      lua_pushnumber(L, d);
      *pp = p + 9;
      return 1;
    }
    case ETF_BINARY:
      if (left < 5 || (n = be32(p + 1)) > left - 5) return 0;
      lua_pushlstring(L, (const char *)p + 5, n);
      *pp = p + 5 + n;
      return 1;
    case ETF_SMALL_ATOM_UTF8:   /* as lterm.c: nil, true, false, or the name */
      if ((n = p[1]) > left - 2) return 0;
      if (n == 3 && memcmp(p + 2, "nil", 3) == 0) lua_pushnil(L);
      else if (n == 4 && memcmp(p + 2, "true", 4) == 0) lua_pushboolean(L, 1);
      else if (n == 5 && memcmp(p + 2, "false", 5) == 0) lua_pushboolean(L, 0);
      else lua_pushlstring(L, (const char *)p + 2, n);
      *pp = p + 2 + n;
      return 1;
    default:
      return 0;
  }
}

/* Anything else: lterm.c's decoder, as the general path would at this depth (inside
** a list or tuple of the result: never a graph). */
static void push_slow(lua_State *L, const uint8_t **pp, const uint8_t *end, int depth) {
  lpvm_tread r = {*pp, end, 0};
  lterm_dec d = {.L = L, .r = &r, .trusted = 1};
  lterm_dec_value(&d, depth);
  *pp = r.p;
}

/* A tuple's or list's header at p: its length and header size, or 0. */
static size_t seq_header(const uint8_t *p, const uint8_t *end, uint32_t *n) {
  size_t left = (size_t)(end - p);
  if (left >= 2 && p[0] == ETF_SMALL_TUPLE) { *n = p[1]; return 2; }
  if (left >= 5 && (p[0] == ETF_LARGE_TUPLE || p[0] == ETF_LIST)) { *n = be32(p + 1); return 5; }
  return 0;
}

/* One value: scalars, tuples and lists (as lterm.c makes them: sequences of their
** exact size, an improper tail dropped) here, anything else by lterm.c. */
static void push_any(lua_State *L, const uint8_t **pp, const uint8_t *end, int depth) {
  if (push_fast(L, pp, end)) return;
  const uint8_t *p = *pp;
  uint32_t n;
  size_t h = depth < LTERM_DEPTH ? seq_header(p, end, &n) : 0;
  if (p < end && p[0] == ETF_NIL) {
    lua_newtable(L);
    *pp = p + 1;
    return;
  }
  if (!h) { push_slow(L, pp, end, depth); return; }
  luaL_checkstack(L, 4, "ets: object nested too deep");
  int list = p[0] == ETF_LIST;
  p += h;
  lua_createtable(L, (int)(n > 1u << 24 ? 1u << 24 : n), 0);
  for (uint32_t k = 1; k <= n; k++) {
    push_any(L, &p, end, depth + 1);
    lua_rawseti(L, -2, (lua_Integer)k);
  }
  if (list) {   /* the tail */
    if (p < end && p[0] == ETF_NIL) p++;
    else {
      lpvm_tread r = {p, end, 0};
      if (lpvm_skip(&r)) lterm_dec_bad(L);
      p = r.p;
    }
  }
  *pp = p;
}

/* One scalar at *pp that is no collectable value (integers, floats, booleans, nil)
** written straight into a new table's array slot: Lua's barrier is for collectable
** values only, so none is owed. 1, or 0 (nothing written) for anything else. */
static inline int set_fast(arr_value *v, const uint8_t **pp, const uint8_t *end) {
  const uint8_t *p = *pp;
  size_t left = (size_t)(end - p);
  if (left < 2) return 0;
  switch (p[0]) {
    case ETF_SMALL_INT:
      v->v.i = p[1];
      v->tt = TV_INT;
      *pp = p + 2;
      return 1;
    case ETF_INT:
      if (left < 5) return 0;
      v->v.i = (int32_t)be32(p + 1);
      v->tt = TV_INT;
      *pp = p + 5;
      return 1;
    case ETF_NEW_FLOAT: {
      if (left < 9) return 0;
      uint64_t bits = (uint64_t)be32(p + 1) << 32 | be32(p + 5);
      memcpy(&v->v.n, &bits, sizeof bits);
      v->tt = TV_FLOAT;
      *pp = p + 9;
      return 1;
    }
    case ETF_SMALL_ATOM_UTF8:   /* nil, true, false; any other atom is a string */
      if (p[1] == 4 && left >= 6 && memcmp(p + 2, "true", 4) == 0) v->tt = TV_TRUE;
      else if (p[1] == 5 && left >= 7 && memcmp(p + 2, "false", 5) == 0) v->tt = TV_FALSE;
      else if (p[1] == 3 && left >= 5 && memcmp(p + 2, "nil", 3) == 0) v->tt = 0;
      else return 0;
      *pp = p + 2 + p[1];
      return 1;
    default:
      return 0;
  }
}

void lets_push_objects(lua_State *L, const uint8_t *p, size_t len, int n) {
  const uint8_t *end = p + len;
  int in_place = atomic_load_explicit(&arr_layout, memory_order_relaxed) == 1;
  lua_createtable(L, n, 0);
  for (int i = 1; i <= n; i++) {
    if (end - p >= 2 && p[0] == ETF_SMALL_TUPLE) {
      /* the usual object: its scalars read in this loop, no recursion and no stack
      ** check (the list, the tuple and one element are within LUA_MINSTACK) */
      uint32_t m = p[1];
      p += 2;
      lua_createtable(L, (int)m, 0);
      /* its array of exactly m slots, which nothing below resizes (rawseti within it) */
      arr_value *a = in_place && m ? ((const arr_table *)lua_topointer(L, -1))->array : NULL;
      for (uint32_t k = 1; k <= m; k++) {
        if (a && set_fast(&a[k - 1], &p, end)) continue;
        if (!push_fast(L, &p, end)) push_any(L, &p, end, 2);
        lua_rawseti(L, -2, (lua_Integer)k);
      }
    } else {
      push_any(L, &p, end, 1);
    }
    lua_rawseti(L, -2, i);
  }
}

int lets_push_list(lua_State *L, const uint8_t *p, size_t len) {
  if (len < 2 || p[0] != ETF_VERSION || (p[1] != ETF_LIST && p[1] != ETF_NIL)) return 0;
  const uint8_t *q = p + 1;
  push_any(L, &q, p + len, 0);
  if (q != p + len) lterm_dec_bad(L);
  return 1;
}

int lets_push_scalar(lua_State *L, const uint8_t *p, size_t len) {
  if (len < 1 || p[0] != ETF_VERSION) return 0;
  const uint8_t *q = p + 1;
  if (!push_fast(L, &q, p + len)) return 0;
  if (q == p + len) return 1;
  lua_pop(L, 1);   /* trailing bytes: let the general decoder judge */
  return 0;
}

/* ---- names ------------------------------------------------------------------------------ */

/* The cache, shared by every function of the module (its upvalue 1): [1] = the names
** epoch its entries belong to, [2] = {[name] = id}. */
void lets_new_cache(lua_State *L) {
  lua_createtable(L, 2, 0);
  lua_pushinteger(L, (lua_Integer)lpvm_ets_names_epoch());
  lua_rawseti(L, -2, 1);
  lua_newtable(L);
  lua_rawseti(L, -2, 2);
}

lpvm_tab lets_by_name(lua_State *L, int arg) {
  int c = lua_upvalueindex(1);
  /* The epoch is read before the registry: an id found after a change is at worst
  ** filed under the older epoch, and forgotten at the next call. */
  lua_Integer ep = (lua_Integer)lpvm_ets_names_epoch();
  lua_rawgeti(L, c, 1);
  int same = lua_tointeger(L, -1) == ep;
  lua_pop(L, 1);
  if (!same) {   /* forget everything: names changed since */
    lua_pushinteger(L, ep);
    lua_rawseti(L, c, 1);
    lua_newtable(L);
    lua_rawseti(L, c, 2);
  }
  lua_rawgeti(L, c, 2);
  lua_pushvalue(L, arg);
  if (lua_rawget(L, -2) == LUA_TNUMBER) {
    lpvm_tab t = (lpvm_tab)lua_tointeger(L, -1);
    lua_pop(L, 2);
    return t;
  }
  lua_pop(L, 1);
  lpvm_tab t = lpvm_ets_whereis(lua_tostring(L, arg));
  if (t) {
    lua_pushvalue(L, arg);
    lua_pushinteger(L, (lua_Integer)t);
    lua_rawset(L, -3);
  }
  lua_pop(L, 1);
  return t;
}
