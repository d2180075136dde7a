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
#include <string.h>

#include "vm/lets.h"
#include "vm/lraw.h"
#include "vm/lraw_new.h"
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

static inline int put_tv(const lraw_tvalue *v, lpvm_tbuf *b);

size_t lets_scalar(lua_State *L, int idx, uint8_t *buf, size_t cap) {
  lpvm_tbuf b = {buf, 1, cap, 0};
  const lraw_tvalue *a;
  if (cap < 1) return 0;
  buf[0] = ETF_VERSION;
  if (lraw_ok() && idx > 0 && (a = lraw_arg(L, idx)) != NULL) {   /* read in place */
    if (a->tt == LRAW_VNUMINT && cap >= 12) put_int(&b, a->v.i);
    else if (put_tv(a, &b)) return 0;
    return b.err ? 0 : b.len;
  }
  if (cap >= 12 && lua_isinteger(L, idx)) {   /* the usual key, no call */
    put_int(&b, lua_tointegerx(L, idx, NULL));
    return b.err ? 0 : b.len;
  }
  return put_scalar(L, idx, LUA_TNONE, &b) || b.err ? 0 : b.len;
}

/* ---- an object's array read in place ------------------------------------------------ */

/* Through the API an object's element costs a call to fetch it, a type test, a call to
** read it and a pop (~190 instructions for {k + 1, k}); vm/lraw.h reads Lua's array
** part in place instead. An element of another kind, or an array Lua keeps elsewhere,
** takes the API path. */

/* One element read in place, as put_scalar would write it; -1 for another kind. */
static inline int put_tv(const lraw_tvalue *v, lpvm_tbuf *b) {
  size_t room = b->cap - b->len, len;
  const lraw_string *s;
  switch (v->tt) {
    case LRAW_VNUMINT:
      if (room < 11) return -1;
      put_int(b, v->v.i);
      return 0;
    case LRAW_VNUMFLT:
      if (room < 11) return -1;
      lpvm_put_float(b, v->v.n);
      return 0;
    case LRAW_VTRUE:
    case LRAW_VFALSE:
      if (room < 8) return -1;
      if (v->tt == LRAW_VTRUE) lpvm_put_atom_len(b, "true", 4);
      else lpvm_put_atom_len(b, "false", 5);
      return 0;
    case LRAW_VSHRSTR:
    case LRAW_VLNGSTR:
      s = v->v.gc;
      len = v->tt == LRAW_VSHRSTR ? s->shrlen : s->lnglen;
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

#define ASK_API ((size_t)-1)

/* The elements of the table t in place after buf's 3 header bytes: the tuple's
** length, or 0 as lets_object, or ASK_API when some of them lie outside the array
** part. Integers within 32 bits (an object's usual elements) are written by pointer,
** anything else by put_tv. */
static size_t object_in_place(lua_State *L, int idx, const lraw_table *t, uint8_t *buf,
                              size_t cap) {
  lua_Unsigned n = t->alimit;
  /* An array of its real size, full to its last element, and no hash part: its
  ** length is alimit (ltable.c's luaH_getn answers so without looking further).
  ** Else Lua says, and the elements must lie within alimit. */
  if ((t->flags & LRAW_BITRAS) || t->lastfree || n == 0 || lraw_is_nil(&t->array[n - 1])) {
    n = lua_rawlen(L, idx);   /* (may move alimit, never past the array's size) */
    if (n > t->alimit) return ASK_API;
  }
  if (n > 255) return 0;
  buf[2] = (uint8_t)n;
  uint8_t *q = buf + 3, *end = buf + cap;
  for (const lraw_tvalue *v = t->array, *vend = v + n; v < vend; v++) {
    if (v->tt == LRAW_VNUMINT && end - q >= 5) {   /* put_int's two short forms */
      lua_Integer x = v->v.i;
      if (x >= 0 && x <= 255) {
        q[0] = ETF_SMALL_INT, q[1] = (uint8_t)x;
        q += 2;
        continue;
      }
      if (x >= INT32_MIN && x <= INT32_MAX) {
        uint32_t u = (uint32_t)x;
        q[0] = ETF_INT;
        q[1] = (uint8_t)(u >> 24), q[2] = (uint8_t)(u >> 16);
        q[3] = (uint8_t)(u >> 8), q[4] = (uint8_t)u;
        q += 5;
        continue;
      }
    }
    lpvm_tbuf b = {buf, (size_t)(q - buf), cap, 0};
    if (put_tv(v, &b) || b.err) return 0;
    q = buf + b.len;
  }
  return (size_t)(q - buf);
}

size_t lets_object(lua_State *L, int idx, uint8_t *buf, size_t cap) {
  const lraw_tvalue *a;
  if (cap < 8) return 0;
  buf[0] = ETF_VERSION;   /* and SMALL_TUPLE_EXT (n <= 255) */
  buf[1] = ETF_SMALL_TUPLE;
  if (lraw_ok() && idx > 0) {
    if (!(a = lraw_arg(L, idx)) || a->tt != LRAW_VTABLE) return 0;
    size_t len = object_in_place(L, idx, a->v.gc, buf, cap);
    if (len != ASK_API) return len;
  } else if (lua_type(L, idx) != LUA_TTABLE) {
    return 0;
  }
  lpvm_tbuf b = {buf, 3, cap, 0};
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

/* The encoder's words are a message's ("cannot send a function value"): functions do
** travel in messages, but a table stores only plain terms, so say that. */
void lets_put_value(lua_State *L, int idx, lpvm_tbuf *b, int arg) {
  char err[LTERM_ERRSZ];
  if (!lterm_put_plain(L, idx, b, err)) return;
  if (strncmp(err, "cannot send a ", 14) == 0)
    luaL_argerror(L, arg, lua_pushfstring(L, "cannot store a %s in a table", err + 14));
  luaL_argerror(L, arg, err);
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

/* One scalar at *pp that is no collectable value (integers, floats, booleans, nil)
** written straight into a new table's array slot: Lua's barrier is for collectable
** values only, so none is owed. 1, or 0 (nothing written) for anything else. */
static inline __attribute__((always_inline)) int set_fast(lraw_tvalue *v, const uint8_t **pp,
                                                         const uint8_t *end) {
  const uint8_t *p = *pp;
  size_t left = (size_t)(end - p);
  if (left < 2) return 0;
  switch (p[0]) {
    case ETF_SMALL_INT:
      v->v.i = p[1];
      v->tt = LRAW_VNUMINT;
      *pp = p + 2;
      return 1;
    case ETF_INT:
      if (left < 5) return 0;
      v->v.i = (int32_t)be32(p + 1);
      v->tt = LRAW_VNUMINT;
      *pp = p + 5;
      return 1;
    case ETF_NEW_FLOAT: {
      if (left < 9) return 0;
      uint64_t bits = (uint64_t)be32(p + 1) << 32 | be32(p + 5);
      memcpy(&v->v.n, &bits, sizeof bits);
      v->tt = LRAW_VNUMFLT;
      *pp = p + 9;
      return 1;
    }
    case ETF_SMALL_ATOM_UTF8:   /* nil, true, false; any other atom is a string */
      if (p[1] == 4 && left >= 6 && memcmp(p + 2, "true", 4) == 0) v->tt = LRAW_VTRUE;
      else if (p[1] == 5 && left >= 7 && memcmp(p + 2, "false", 5) == 0) v->tt = LRAW_VFALSE;
      else if (p[1] == 3 && left >= 5 && memcmp(p + 2, "nil", 3) == 0) v->tt = 0;
      else return 0;
      *pp = p + 2 + p[1];
      return 1;
    default:
      return 0;
  }
}

/* The value just pushed moved into slot v of the table h made a moment ago, and popped
** in place: lua_rawseti's barrier does nothing for a table that is not black (a
** collection step while the value was made may have blackened it: then the API's
** way); lua_settop's one other task, closing a to-be-closed variable, has none to close
** above a C function's own pushes. */
static inline void move_top(lua_State *L, const lraw_table *h, lraw_tvalue *v,
                             lua_Integer k) {
  if (!(h->marked & LRAW_BLACK)) {
    lraw_state *st = (lraw_state *)(void *)L;
    *v = *--st->top;
  } else {
    lua_rawseti(L, -2, k);
  }
}

/* Anything else: lterm_dec.c's decoder, as the general path would at this depth (inside
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
** exact size, an improper tail dropped) here, anything else by lterm_dec.c. */
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
  if (n && n <= (size_t)(end - p) && lraw_ok()) {   /* (each element takes a byte at least) */
    /* made by lraw_new_array with its exact size, as push_objects_raw's tuples */
    lraw_tvalue *a = lraw_new_array(L, n);
    const lraw_table *th = ((const lraw_state *)(void *)L)->top[-1].v.gc;
    for (uint32_t k = 0; k < n; k++) {
      if (set_fast(&a[k], &p, end)) continue;
      push_any(L, &p, end, depth + 1);
      move_top(L, th, &a[k], (lua_Integer)k + 1);
    }
  } else {
    lua_createtable(L, (int)(n > 1u << 24 ? 1u << 24 : n), 0);
    for (uint32_t k = 1; k <= n; k++) {
      push_any(L, &p, end, depth + 1);
      lua_rawseti(L, -2, (lua_Integer)k);
    }
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

/* lets_push_objects through lraw.h: the list and each tuple made by lraw_new_array with
** their exact sizes (no luaH_resize), non-collectable elements written into their slots,
** anything else pushed and moved into its slot, each tuple moved into the list's. */
static void push_objects_raw(lua_State *L, const uint8_t *p, const uint8_t *end, int n) {
  const lraw_state *st = (const lraw_state *)(void *)L;
  lraw_tvalue *list = lraw_new_array(L, (unsigned)n);
  const lraw_table *lh = st->top[-1].v.gc;
  for (int i = 0; i < n; i++) {
    if (end - p >= 2 && p[0] == ETF_SMALL_TUPLE) {
      /* the usual object: its scalars read in this loop, no recursion and no stack
      ** check (the list, the tuple and one element are within LUA_MINSTACK) */
      uint32_t m = p[1];
      p += 2;
      lraw_tvalue *a = lraw_new_array(L, m);   /* m slots, which nothing below resizes */
      const lraw_table *th = st->top[-1].v.gc;
      for (uint32_t k = 0; k < m; k++) {
        if (set_fast(&a[k], &p, end)) continue;
        if (!push_fast(L, &p, end)) push_any(L, &p, end, 2);
        move_top(L, th, &a[k], (lua_Integer)k + 1);
      }
    } else {
      push_any(L, &p, end, 1);
    }
    move_top(L, lh, &list[i], i + 1);
  }
}

/* lets_push_ints: the list and its tuple made inline at once (lraw_new_list1), else one
** by one (lraw_new_here; lraw_new_array when the collector's debt or the thread's
** lists say no) and the tuple moved into the list's slot; the integers stored in their
** slots (not collectable: no barrier). */
void lets_push_ints(lua_State *L, const int64_t *v, int m) {
  if (m <= 0 || !lraw_ok()) {
    lua_createtable(L, m > 0, 0);
    if (m <= 0) return;
    lua_createtable(L, m, 0);
    for (int k = 0; k < m; k++) {
      lua_pushinteger(L, (lua_Integer)v[k]);
      lua_rawseti(L, -2, k + 1);
    }
    lua_rawseti(L, -2, 1);
    return;
  }
  lets_push_ints_raw(L, v, m);
}

void lets_push_ints_raw(lua_State *L, const int64_t *v, int m) {
  if (m <= 0) {
    lraw_new_empty(L);
    return;
  }
  const lraw_state *st = (const lraw_state *)(void *)L;
  lraw_tvalue *a = lraw_new_list1(L, (unsigned)m);
  if (a) {   /* the tuple already in the list: its slots set before anything allocates */
    if (m == 2) {   /* {K, V}: no loop */
      a[0].v.i = v[0], a[0].tt = LRAW_VNUMINT;
      a[1].v.i = v[1], a[1].tt = LRAW_VNUMINT;
      return;
    }
    for (int k = 0; k < m; k++) a[k].v.i = v[k], a[k].tt = LRAW_VNUMINT;
    return;
  }
  lraw_tvalue *list = lraw_new_here(L, 1);
  if (!list) list = lraw_new_array(L, 1);
  const lraw_table *lh = st->top[-1].v.gc;
  a = lraw_new_here(L, (unsigned)m);
  if (!a) a = lraw_new_array(L, (unsigned)m);
  for (int k = 0; k < m; k++) a[k].v.i = v[k], a[k].tt = LRAW_VNUMINT;
  move_top(L, lh, &list[0], 1);
}

void lets_push_objects(lua_State *L, const uint8_t *p, size_t len, int n) {
  const uint8_t *end = p + len;
  if (lraw_ok()) {
    push_objects_raw(L, p, end, n);
    return;
  }
  lua_createtable(L, n, 0);
  for (int i = 1; i <= n; i++) {
    if (end - p >= 2 && p[0] == ETF_SMALL_TUPLE) {
      uint32_t m = p[1];
      p += 2;
      lua_createtable(L, (int)m, 0);
      for (uint32_t k = 1; k <= m; k++) {
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
  if ((len == 3 || len == 6) && lraw_ok()) {
    /* an integer (a walk's usual key) pushed in place, as lua_pushinteger does: no
    ** barrier for a value that is not collectable, and the room is the caller's, as
    ** for any push */
    const uint8_t *q = p + 1;
    lraw_state *st = (lraw_state *)(void *)L;
    if (set_fast(st->top, &q, p + len) && q == p + len && st->top->tt == LRAW_VNUMINT) {
      st->top++;
      return 1;
    }
  }
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
