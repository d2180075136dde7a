/*
** lterm_plain.c -- the receiver's fast path of local messages (lterm_plain_msg.c
** writes them; lterm.c and lterm_dec.c are the general codec).
**
** Most messages are a few scalars, or tables of scalars and pids (EStone's msgp
** shapes): received millions of times, they must not pay for what the general
** decoder keeps for the rare cases (function graphs, shared binaries, foreign terms,
** big integers, reasons). Here any local message of scalars, pids, shared binaries
** (their message's table's entries, lbin_push_received) and nested lists,
** tuples and maps is read straight from its bytes into Lua values (a list's table
** made and filled in place through vm/lraw.h when the mirror is trusted), and
** anything else is handed back (-1) to the general decoder, which reads it whole
** again. The bytes are Erlang's external term format either way: only the reading
** is shortened.
*/
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/dist.h"
#include "vm/lproc_int.h"
#include "vm/lproc_small.h"
#include "vm/lterm.h"
#include "vm/lterm_int.h"
#include "vm/lraw.h"
#include "vm/lraw_new.h"

/* The external format's tags these paths write and read (tasks/term_int.h has them all). */
enum {
  T_NEW_FLOAT = 70, T_NEW_PID = 88, T_SMALL_INT = 97, T_INT = 98, T_SMALL_TUPLE = 104,
  T_NIL = 106, T_STRING = 107, T_LIST = 108, T_BINARY = 109, T_MAP = 116,
  T_SMALL_ATOM_UTF8 = 119, T_NEWER_REF = 90, T_SMALL_BIG = 110, T_LPVM_BINREF = 200
};

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Where the words after the node atom at a (a SMALL_ATOM_UTF8, `left` bytes on, at
** least `after` of them needed past the atom) begin if the node is this one (by its
** name, or nonode@nohost as lpvm_get_pid and lpvm_get_ref also take), else NULL: the
** node's name compared in place of term_dec.c's general reading of the atom. */
static const uint8_t *local_node(const uint8_t *a, size_t left, size_t after) {
  static const char nonode[] = "nonode@nohost";
  size_t k;
  if (left < 2 + after || a[0] != T_SMALL_ATOM_UTF8 || (k = a[1]) > left - 2 - after)
    return NULL;
  if (k == sizeof nonode - 1) {   /* two overlapping 8-byte words, no call */
    uint64_t x, y, nx, ny;
    memcpy(&x, a + 2, 8), memcpy(&y, a + 2 + k - 8, 8);
    memcpy(&nx, nonode, 8), memcpy(&ny, nonode + k - 8, 8);
    if (x == nx && y == ny) return a + 2 + k;
  }
  const char *self = lpvm_node_name();
  if (self && strlen(self) == k && memcmp(a + 2, self, k) == 0) return a + 2 + k;
  return NULL;
}

/* The ID, serial and creation words of a NEW_PID_EXT at p, as local_node. */
static const uint8_t *local_pid(const uint8_t *p, size_t left) {
  return left < 1 ? NULL : local_node(p + 1, left - 1, 12);
}

/* A NEWER_REFERENCE_EXT at p of this node: its id (the first two words, as
** lpvm_get_ref reads them) and where it ends; NULL for another node's or a malformed
** one (the general decoder then reads it). */
static const uint8_t *local_ref(const uint8_t *p, size_t left, uint64_t *ref) {
  if (left < 3 || p[0] != T_NEWER_REF) return NULL;
  uint32_t nw = (uint32_t)p[1] << 8 | p[2];
  if (nw == 0 || nw > 5) return NULL;
  const uint8_t *q = local_node(p + 3, left - 3, 4 + 4 * (size_t)nw);
  if (!q) return NULL;
  q += 4;   /* the creation is not checked, as for a pid */
  *ref = be32(q);
  if (nw >= 2) *ref |= (uint64_t)be32(q + 4) << 32;
  return q + 4 * (size_t)nw;
}

/* The short strings a message's lists already hold, by their length and end bytes (or,
** for 0 to 3 bytes, by their element's bytes as one word: word_key): one met again is
** written from here into its slot (vm/lraw.h), without
** lua_pushlstring's hashing and lookup. Each was stored into an array slot of a table
** of the message being read, which the stack reaches until the end (each pair of a
** map empties the cache: see plain_map): the collector keeps them. Per
** message, on the C stack (a finalizer run by an allocation may read a message of
** its own). */
#define STR_SLOTS 32
typedef struct strs {
  uint32_t used;   /* the slots set: a message's first look clears 4 bytes, not 256 */
  int pids;        /* the state has the pid metatable (once set, for the message) */
  int room;        /* the stack has room up to this index (lraw_top's) with c->proc */
  uint8_t pidn;    /* a local pid's tag and node atom: their length (9 to 16) */
  const uint8_t *pid0;   /* ... where they are: local_pid0, or in the message (seen_pid) */
  lproc *proc;     /* the state's process when the mirror is trusted (strc), else NULL */
  const lpvm_binref *bins;   /* the message's shared binaries (lpvm_msg_bins), or NULL */
  uint32_t nbins;
  const lraw_string *s[STR_SLOTS];
  uint64_t key[STR_SLOTS];   /* a string of 0-3 bytes: its element's bytes (word_key), else 0 */
} strs;

/* The k bytes at x and y are the same: up to 32 compared as two or four (overlapping)
** words, without a call to memcmp. */
static inline int same_bytes(const char *x, const uint8_t *y, size_t k) {
  if (k < 4)   /* first: atoms' names and very_big's one-letter strings */
    return k == 0 || ((uint8_t)x[0] == y[0] && (uint8_t)x[k / 2] == y[k / 2] &&
                      (uint8_t)x[k - 1] == y[k - 1]);
  if (k >= 8 && k <= 16) {
    uint64_t a, b, c, d;
    memcpy(&a, x, 8), memcpy(&b, x + k - 8, 8), memcpy(&c, y, 8), memcpy(&d, y + k - 8, 8);
    return a == c && b == d;
  }
  if (k >= 4 && k < 8) {
    uint32_t a, b, c, d;
    memcpy(&a, x, 4), memcpy(&b, x + k - 4, 4), memcpy(&c, y, 4), memcpy(&d, y + k - 4, 4);
    return a == c && b == d;
  }
  if (k <= 32) {   /* 17-32: four overlapping words (very_big's 17-byte string) */
    uint64_t a, b, c, d, e, f, g, h;
    memcpy(&a, x, 8), memcpy(&b, x + 8, 8), memcpy(&c, x + k - 16, 8), memcpy(&d, x + k - 8, 8);
    memcpy(&e, y, 8), memcpy(&f, y + 8, 8), memcpy(&g, y + k - 16, 8), memcpy(&h, y + k - 8, 8);
    return ((a ^ e) | (b ^ f) | (c ^ g) | (d ^ h)) == 0;
  }
  return memcmp(x, y, k) == 0;
}

/* A BINARY_EXT of k <= 3 bytes at p (8 bytes readable there), which very_big's strings
** mostly are: its tag, length and bytes as one word, the bytes past the element masked
** off (never 0: the tag is in it). Two such words are equal if and only if the strings
** are, so one compare finds a string met again: no length test, no byte compares. */
static inline uint64_t word_key(const uint8_t *p, size_t k) {
  uint64_t w;
  memcpy(&w, p, 8);
  /* the element's 5 + k bytes are the word's first in memory: its low bytes on a
  ** little-endian machine, its high ones on a big-endian one */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  return k == 3 ? w : w & ~(~(uint64_t)0 >> (8 * (5 + k)));
#else
  return w & (~(uint64_t)0 >> (8 * (3 - k)));
#endif
}

static inline unsigned word_slot(uint64_t key) {   /* the length and bytes mixed */
  return (unsigned)((uint32_t)(key ^ key >> 32) * 0x9E3779B1u >> 27);   /* STR_SLOTS == 32 */
}

static inline unsigned str_slot(const uint8_t *s, size_t k) {
  /* odd factors: one-byte strings (atoms' names) fall in distinct slots */
  return (unsigned)(k * 11 + (k ? s[0] + 8u * s[k - 1] : 0)) & (STR_SLOTS - 1);
}


/* ---- short strings met again, across messages ------------------------------------------ */

/* A process that is sent the same short strings again and again (a burst of "hi", a
** server's "call" and its request names, a reply's tag) paid lua_pushlstring's hashing
** and string-table lookup for each: ~190 of msg10's ~1,650 instructions a message. A
** string the process decoded twice into the same bucket (its address, which
** interning makes the same for the same bytes while it lives, compared with the
** bucket's two last ones) is kept in one of the bucket's two ways, anchored as a user
** value of a userdata the registry holds (registry[&strc_key]); met again, its bytes
** are compared and the string is written to the stack in place (vm/lraw.h), as
** lua_pushlstring would have found it. Two ways a bucket: two strings that alternate
** in a bucket (msgp_medium's "message" and "funky_stuff" fell in one of the 8 slots
** of a way each, and "baby" and "abcdef" in another: four lua_pushlstring a message)
** are both kept. The userdata (lproc.strc) is made at the process's second short
** string, so a process that gets one message pays nothing; a recycled state's
** registry is wiped and its next process starts without one. (Lua code that removes
** registry[&strc_key] through the debug library takes the anchor away under the
** cache: like much else that library can do, it breaks the state.) */
#define STRC_BUCKETS 8
#define STRC_SLOTS (2 * STRC_BUCKETS)
typedef struct strcache {
  const void *seen[STRC_SLOTS];          /* the last strings pushed there: compared only */
  const lraw_string *s[STRC_SLOTS];      /* kept: the userdata's user value slot + 1 */
  uint8_t next[STRC_BUCKETS];            /* the way the next kept (bit 0), seen (bit 1) takes */
} strcache;

static const char strc_key = 0;

/* The bucket's first slot (its two ways: slot, slot + 1), from the length and end
** bytes mixed by one odd multiplier (their sum put common names in one slot). */
static inline unsigned strc_slot(const uint8_t *s, size_t k) {   /* k >= 1 */
  uint32_t h = ((uint32_t)s[0] | (uint32_t)s[k - 1] << 8 | (uint32_t)k << 16) * 0x9E3779B1u;
  return (h >> 29) * 2;   /* STRC_BUCKETS == 8 */
}

/* lua_pushlstring has just pushed a short string (bucket slot's): note it, keep it if
** the bucket saw it last or the time before, make the cache at the process's second
** string. */
static __attribute__((noinline)) void strc_miss(lua_State *L, lproc *p, unsigned slot) {
  const lraw_string *ts = ((const lraw_state *)(void *)L)->top[-1].v.gc;
  strcache *sc = p->strc;
  if ((uintptr_t)sc <= 1) {
    if (!sc || !lua_checkstack(L, 2)) {
      p->strc = (void *)1;
      return;
    }
    sc = lua_newuserdatauv(L, sizeof *sc, STRC_SLOTS);
    memset(sc, 0, sizeof *sc);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &strc_key);
    p->strc = sc;
  }
  unsigned b = slot / 2, nx = sc->next[b];
  if (sc->seen[slot] != ts && sc->seen[slot + 1] != ts) {
    sc->seen[slot + (nx >> 1)] = ts;
    sc->next[b] = (uint8_t)(nx ^ 2);
    return;
  }
  if (!lua_checkstack(L, 2) || lua_rawgetp(L, LUA_REGISTRYINDEX, &strc_key) != LUA_TUSERDATA ||
      lua_touserdata(L, -1) != (void *)sc) {   /* the registry was emptied under it */
    lua_pop(L, 1);
    p->strc = (void *)1;
    return;
  }
  slot += nx & 1;
  sc->next[b] = (uint8_t)(nx ^ 1);
  lua_pushvalue(L, -2);
  lua_setiuservalue(L, -2, (int)slot + 1);
  lua_pop(L, 1);
  sc->s[slot] = ts;
}

/* Push the k bytes at s as a string: a short one kept by the process's cache is
** written in place. Room on the stack as for plain_scalar. */
static inline __attribute__((always_inline)) void
push_str(lua_State *L, const uint8_t *s, size_t k, strs *c) {
  lproc *p = c->proc;
  if (p && k - 1 < LRAW_SHORTMAX) {
    unsigned slot = strc_slot(s, k);
    const strcache *sc = p->strc;
    if ((uintptr_t)sc > 1) {
      const lraw_string *t = sc->s[slot];
      if (!(t && t->shrlen == k && same_bytes(t->contents, s, k))) t = sc->s[slot + 1];
      if (t && t->shrlen == k && same_bytes(t->contents, s, k)) {
        lraw_state *st = (lraw_state *)(void *)L;
        st->top->v.gc = (void *)t;
        st->top->tt = LRAW_VSHRSTR;
        st->top++;
        return;
      }
    }
    lua_pushlstring(L, (const char *)s, k);
    strc_miss(L, p, slot);
    return;
  }
  lua_pushlstring(L, (const char *)s, k);
}

/* lua_gettop read in place (the mirror trusted). */
static inline int lraw_top(lua_State *L) {
  const lraw_state *st = (const lraw_state *)(void *)L;
  return (int)(st->top - (st->ci->func + 1));
}

/* A pid of this node when it is not distributed: NEW_PID_EXT's tag and the node atom
** nonode@nohost (which local_node takes on a named node too), for seen_pid to
** recognise a message's first pid without local_pid's reading of the atom. */
static const uint8_t local_pid0[16] = {T_NEW_PID, T_SMALL_ATOM_UTF8, 13, 'n', 'o', 'n', 'o',
                                       'd', 'e', '@', 'n', 'o', 'h', 'o', 's', 't'};

/* The per-message state: c->proc set when the mirror is trusted. */
static inline void strs_init(lua_State *L, strs *c) {
  c->used = 0, c->pids = 0, c->room = 0, c->bins = NULL, c->nbins = 0;
  c->pid0 = local_pid0, c->pidn = sizeof local_pid0;   /* until a named node's is noted */
  c->proc = lraw_ok() ? (lproc *)((const lraw_state *)(const void *)L)->l_G->ud : NULL;
}

/* A NEW_PID_EXT at p of this node, by the bytes of the message's first one: its tag
** and node atom (c->pidn of them, 9 to 16, at c->pid0: nonode@nohost's, or the
** message's first local pid's on a named node) compared as two
** overlapping words instead of local_pid's reading of the atom; where its ID word
** begins, or NULL (local_pid then reads it, and notes where it is for the next). */
static inline const uint8_t *seen_pid(const uint8_t *p, size_t left, const strs *c) {
  size_t n = c->pidn;
  if (left < n + 12) return NULL;
  uint64_t x, y, x0, y0;
  memcpy(&x, p, 8), memcpy(&y, p + n - 8, 8);
  memcpy(&x0, c->pid0, 8), memcpy(&y0, c->pid0 + n - 8, 8);
  return x == x0 && y == y0 ? p + n : NULL;
}

static inline void note_pid(const uint8_t *p, const uint8_t *q, strs *c) {
  size_t n = (size_t)(q - p);
  if (n >= 9 && n <= 16) c->pid0 = p, c->pidn = (uint8_t)n;
}

/* A shared binary's TAG_LPVM_BINREF: the entry of the message's table it names. Out of
** line: a message of scalars must not pay registers for it in plain_scalar. */
static __attribute__((noinline)) const uint8_t *
plain_binref(lua_State *L, const uint8_t *p, size_t left, strs *c) {
  uint32_t i;
  if (left < 5 || (i = be32(p + 1)) >= c->nbins) return NULL;
  /* a new value's push takes 4 more slots (seq_room's room, or asked for) */
  if (!(c->proc && lraw_top(L) + 6 <= c->room) && !lua_checkstack(L, 6)) return NULL;
  lbin_push_received(L, c->bins[i].bin, c->bins[i].off, c->bins[i].len);
  return p + 5;
}

/* Push the value at p if it is a scalar (or []), inline in every loop: past it, or
** NULL for anything else (nothing pushed), which plain_value then reads. The stack
** has room for three more values: a pid's first push makes the state's pid
** metatable (lmod.c) with two more. */
static inline __attribute__((always_inline)) const uint8_t *
plain_scalar(lua_State *L, const uint8_t *p, const uint8_t *end, strs *c) {
  size_t left = (size_t)(end - p), k;
  if (left < 2) {   /* only [] is a single byte */
    if (left == 0 || p[0] != T_NIL) return NULL;
    lua_createtable(L, 0, 0);
    return p + 1;
  }
  switch (p[0]) {
    case T_SMALL_INT: lua_pushinteger(L, p[1]); return p + 2;
    case T_INT:
      if (left < 5) return NULL;
      lua_pushinteger(L, (int32_t)be32(p + 1));
      return p + 5;
    case T_BINARY:
      if (left < 5 || (k = be32(p + 1)) > left - 5) return NULL;
      push_str(L, p + 5, k, c);
      return p + 5 + k;
    case T_SMALL_ATOM_UTF8:
      if ((k = p[1]) > left - 2) return NULL;
      p += 2;
      if (k == 3 && memcmp(p, "nil", 3) == 0) lua_pushnil(L);
      else if (k == 4 && memcmp(p, "true", 4) == 0) lua_pushboolean(L, 1);
      else if (k == 5 && memcmp(p, "false", 5) == 0) lua_pushboolean(L, 0);
      else push_str(L, p, k, c);
      return p + k;
    case T_NEW_PID: {
      const uint8_t *q = seen_pid(p, left, c);
      lpvm_id id;
      if (!q && (q = local_pid(p, left))) note_pid(p, q, c);
      if (q) {   /* this node's: ID and serial words, the creation is not checked */
        id = be32(q) | (uint64_t)be32(q + 4) << 32;
        if (id & (LPVM_ID_PORT_BIT | LPVM_ID_REMOTE_BIT)) return NULL;   /* too wide */
        if (c->proc && c->proc->pid_mt) {   /* lmod_push_pid's push, in place */
          lraw_state *st = (lraw_state *)(void *)L;
          st->top->v.p = (void *)(uintptr_t)id, st->top->tt = LRAW_VLIGHTUD;
          st->top++;
        } else {
          lmod_push_pid(L, id);   /* the state's first: its pid metatable made */
        }
        return q + 12;
      }
      lpvm_tread r = {p, end, 0};
      if (lpvm_get_pid(&r, &id)) return NULL;   /* another node's port */
      lmod_push_pid(L, id);
      return r.p;
    }
    case T_NEW_FLOAT: {
      if (left < 9) return NULL;
      uint64_t bits = (uint64_t)be32(p + 1) << 32 | be32(p + 5);
      double d;
      memcpy(&d, &bits, sizeof d);
      lua_pushnumber(L, d);
      return p + 9;
    }
    case T_NIL:   /* [] */
      if (c->proc) lraw_new_empty(L);
      else lua_createtable(L, 0, 0);
      return p + 1;
    case T_NEWER_REF: {
      uint64_t ref;
      const uint8_t *q = local_ref(p, left, &ref);
      if (!q) return NULL;   /* another node's: a foreign value */
      lmod_push_ref(L, ref);
      return q;
    }
    default:   /* a shared binary of the message's table (tag 200, out of the switch's
               ** range of the common tags), as the decoder's */
      return p[0] == T_LPVM_BINREF ? plain_binref(L, p, left, c) : NULL;
  }
}

static const uint8_t *plain_value(lua_State *L, const uint8_t *p, const uint8_t *end,
                                  int depth, strs *c);
static const uint8_t *plain_nested(lua_State *L, const uint8_t *p, const uint8_t *end,
                                   int depth, strs *c);

/* Room on the stack for a sequence's four values (plain_scalar's three and its table):
** lua_checkstack for 20 at a time, the room's end noted as an index from the function
** (which a reallocation keeps; a shrink keeps what lua_checkstack asked for), not a
** call a table (~20 instructions each, very_big's 76). */
static inline int seq_room(lua_State *L, strs *c) {
  if (c->proc) {
    int top = lraw_top(L);
    if (top + 4 <= c->room) return 1;
    if (!lua_checkstack(L, 20)) return 0;
    c->room = top + 20;
    return 1;
  }
  return lua_checkstack(L, 4);
}

/* n elements at p into a new sequence (a list's or a tuple's). When the mirror is
** trusted the table is made by lraw_new_array and each element is read by one
** switch on its tag: a value that is not collectable (an integer, a float, a
** boolean, nil, this node's pid once the state has the pid metatable) is written
** straight into its slot (a nil stays the empty slot the table was made with), a
** short string met before in this message is written from its first (c->s), a list
** or a tuple is read by plain_seq itself and copied from the stack into its slot;
** anything else (a string met first, a map, a byte list, a reference, [] , a short
** or malformed value) through plain_scalar and plain_nested, which push it or give
** up. */
static const uint8_t *plain_seq(lua_State *L, const uint8_t *p, const uint8_t *end,
                                uint32_t n, int depth, strs *c) {
  /* every element takes a byte at least: a bigger count is malformed, and is not
  ** allowed to size a table */
  if (depth >= LTERM_DEPTH || n > (size_t)(end - p) || !seq_room(L, c)) return NULL;
  if (n == 0 || !lraw_ok()) {
    lua_createtable(L, (int)n, 0);
    for (uint32_t i = 1; i <= n; i++) {
      const uint8_t *q = plain_scalar(L, p, end, c);
      if (!(p = q ? q : plain_nested(L, p, end, depth + 1, c))) return NULL;
      lua_rawseti(L, -2, (lua_Integer)i);
    }
    return p;
  }
  lraw_tvalue *a = lraw_new_here(L, n);   /* lua_createtable(L, n, 0)'s, made for less */
  if (!a) a = lraw_new_array(L, n);        /* the collector's step due, or Lua's way */
  const lraw_table *h = ((const lraw_state *)(void *)L)->top[-1].v.gc;   /* just made */
  if (!c->pids) {   /* looked up until a pid's first push installs the metatable */
    lproc *pr = lproc_of(L);
    c->pids = pr && pr->pid_mt;
  }
  for (uint32_t i = 0; i < n; i++) {
    lraw_tvalue *v = &a[i];
    size_t left = (size_t)(end - p), k;
    unsigned slot = STR_SLOTS;
    uint64_t wkey = 0;
    const uint8_t *q;
    if (left < 2) goto other;   /* [] alone is a single byte */
    switch (p[0]) {
      case T_SMALL_INT: v->v.i = p[1], v->tt = LRAW_VNUMINT; p += 2; continue;
      case T_INT:
        if (left < 5) goto other;
        v->v.i = (int32_t)be32(p + 1), v->tt = LRAW_VNUMINT;
        p += 5;
        continue;
      case T_NEW_FLOAT: {
        if (left < 9) goto other;
        uint64_t bits = (uint64_t)be32(p + 1) << 32 | be32(p + 5);
        memcpy(&v->v.n, &bits, sizeof bits);
        v->tt = LRAW_VNUMFLT;
        p += 9;
        continue;
      }
      case T_SMALL_ATOM_UTF8:
        if (p[1] == 4 && left >= 6 && memcmp(p + 2, "true", 4) == 0) {
          v->v.i = 0, v->tt = LRAW_VTRUE;
          p += 6;
          continue;
        }
        if (p[1] == 5 && left >= 7 && memcmp(p + 2, "false", 5) == 0) {
          v->v.i = 0, v->tt = LRAW_VFALSE;
          p += 7;
          continue;
        }
        if (p[1] == 3 && left >= 5 && memcmp(p + 2, "nil", 3) == 0) {
          p += 5;
          continue;
        }
        goto other;
      case T_NEW_PID: {
        if (!c->pids) goto other;
        if (!(q = seen_pid(p, left, c))) {
          if (!(q = local_pid(p, left))) goto other;
          note_pid(p, q, c);
        }
        lpvm_id id = be32(q) | (uint64_t)be32(q + 4) << 32;
        if (id & (LPVM_ID_PORT_BIT | LPVM_ID_REMOTE_BIT)) goto other;
        v->v.p = (void *)(uintptr_t)id, v->tt = LRAW_VLIGHTUD;
        p = q + 12;
        continue;
      }
      case T_BINARY:
        if (left < 5) goto other;
        if ((k = be32(p + 1)) <= 3 && left >= 8) {   /* the element's word is the key */
          const lraw_string *s = c->s[slot = word_slot(wkey = word_key(p, k))];
          if ((c->used >> slot & 1) && c->key[slot] == wkey && !(h->marked & LRAW_BLACK)) {
            v->v.gc = (void *)s, v->tt = LRAW_VSHRSTR;
            p += 5 + k;
            continue;
          }
          goto other;
        }
        if (k <= LRAW_SHORTMAX && k <= left - 5) {
          /* a short string: met before in this message? */
          const lraw_string *s = c->s[slot = str_slot(p + 5, k)];
          /* a table the collector has blackened needs lua_rawseti's barrier */
          if ((c->used >> slot & 1) && s->shrlen == k && same_bytes(s->contents, p + 5, k) &&
              !(h->marked & LRAW_BLACK)) {
            v->v.gc = (void *)s, v->tt = LRAW_VSHRSTR;
            p += 5 + k;
            continue;
          }
        }
        goto other;
      case T_SMALL_TUPLE:
        if (!(p = plain_seq(L, p + 2, end, p[1], depth + 1, c))) return NULL;
        goto pushed;
      case T_LIST:
        if (left < 5 || !(p = plain_seq(L, p + 5, end, be32(p + 1), depth + 1, c)) ||
            p >= end || *p != T_NIL)   /* an improper tail: the general decoder */
          return NULL;
        p++;
        goto pushed;
      default: goto other;
    }
  other:
    q = plain_scalar(L, p, end, c);
    if (!(p = q ? q : plain_nested(L, p, end, depth + 1, c))) return NULL;
  pushed:
    if (!(h->marked & LRAW_BLACK)) {
      /* the value just pushed copied into its slot (a new table, a string met first):
      ** lua_rawseti's barrier does nothing for a table that is not black (a
      ** collection step while the value was made may have blackened this one); then
      ** popped in place (lua_settop's one other task, closing a to-be-closed
      ** variable, has none to close here) */
      lraw_state *st = (lraw_state *)(void *)L;
      *v = *--st->top;
    } else {
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    if (slot < STR_SLOTS && v->tt == LRAW_VSHRSTR) {
      c->s[slot] = v->v.gc;
      c->key[slot] = wkey;
      c->used |= UINT32_C(1) << slot;
    }
  }
  return p;
}

/* pairs key-value pairs at p into a new table; a nil or NaN key drops its pair, as
** the general decoder does. */
static const uint8_t *plain_map(lua_State *L, const uint8_t *p, const uint8_t *end,
                                uint32_t pairs, int depth, strs *c) {
  if (depth >= LTERM_DEPTH || pairs > (size_t)(end - p) / 2 || !lua_checkstack(L, 5))
    return NULL;
  lua_createtable(L, 0, (int)pairs);
  for (uint32_t i = 0; i < pairs; i++) {
    if (!(p = plain_value(L, p, end, depth + 1, c))) return NULL;
    if (!(p = plain_value(L, p, end, depth + 1, c))) return NULL;
    int kt = lua_type(L, -2);
    if (kt == LUA_TNIL || (kt == LUA_TNUMBER && lua_tonumber(L, -2) != lua_tonumber(L, -2)))
      lua_pop(L, 2);
    else
      lua_rawset(L, -3);
    /* a pair dropped, or one whose key is another's in Lua (1 and 1.0, an atom and a
    ** binary of its name) and replaces its value: the strings cached from there may
    ** be unreached now */
    c->used = 0;
  }
  return p;
}

/* Push the value at p; past it, or NULL for what only the general decoder reads
** (the caller drops what was pushed). Room on the stack as for plain_scalar. */
static const uint8_t *plain_value(lua_State *L, const uint8_t *p, const uint8_t *end,
                                  int depth, strs *c) {
  const uint8_t *q = plain_scalar(L, p, end, c);
  return q ? q : plain_nested(L, p, end, depth, c);
}

/* plain_value past its scalars (whose caller tried plain_scalar already): a
** container, or NULL. */
static const uint8_t *plain_nested(lua_State *L, const uint8_t *p, const uint8_t *end,
                                   int depth, strs *c) {
  size_t left = (size_t)(end - p), k;
  if (left < 2) return NULL;
  switch (p[0]) {
    case T_SMALL_TUPLE: return plain_seq(L, p + 2, end, p[1], depth, c);
    case T_LIST:
      if (left < 5 || !(p = plain_seq(L, p + 5, end, be32(p + 1), depth, c))) return NULL;
      return p < end && *p == T_NIL ? p + 1 : NULL;   /* an improper tail: the general */
    case T_STRING: {   /* a list of bytes */
      if (left < 3 || (k = (size_t)p[1] << 8 | p[2]) > left - 3) return NULL;
      p += 3;
      lua_createtable(L, (int)k, 0);
      for (size_t i = 0; i < k; i++) {
        lua_pushinteger(L, p[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
      }
      return p + k;
    }
    case T_MAP:
      if (left < 5) return NULL;
      return plain_map(L, p + 5, end, be32(p + 1), depth, c);
    default: return NULL;
  }
}

/* A local message of scalars, pids and tables of them (whoever built it), pushed
** straight from its bytes: no decoder state, no graph probe; with skip, the first
** value must be this node's reference and is stepped over (a reply's tag,
** lterm_push_msg_tail). -1 (nothing pushed) for anything else, which the general
** decoder then reads, and for {lpvm_graph, _}, a graph (lfun.c). */
static inline __attribute__((always_inline)) int
push_plain(lua_State *L, const uint8_t *p, size_t len, int skip, const lpvm_binref *bins,
           uint32_t nbins) {
  const uint8_t *end = p + len;
  uint32_t n = 1;
  uint64_t ref;
  int tuple = 0;
  if (len < 3 || *p++ != 131) return -1;
  if (p[0] == T_SMALL_TUPLE) {
    n = p[1];
    p += 2;
    tuple = 1;
    if (n == 2 && end - p > 12 && p[0] == T_SMALL_ATOM_UTF8 && p[1] == 10 &&
        memcmp(p + 2, "lpvm_graph", 10) == 0)
      return -1;
  }
  if (skip) {
    if (n < 1 || !(p = local_ref(p, (size_t)(end - p), &ref))) return -1;
    n--;
    tuple = 1;   /* what is left are values of a tuple (none, for a lone reference) */
  }
  if (!lua_checkstack(L, (int)n + 3 + 20)) return -1;
  strs c;
  strs_init(L, &c);
  c.bins = bins, c.nbins = nbins;
  int base = c.proc ? lraw_top(L) : lua_gettop(L);
  /* the n values and a sequence's 4 past the last one's, and seq_room's 20 more at
  ** once (a nested list in the first sequence asked lua_checkstack again: ~28) */
  c.room = base + (int)n + 3 + 20;
  if (!tuple) {
    const uint8_t *q = plain_scalar(L, p, end, &c);
    p = q ? q : plain_nested(L, p, end, 0, &c);
  } else {
    for (uint32_t i = 0; i < n && p; i++) {
      if ((size_t)(end - p) >= 5 && *p == T_LIST) {   /* a list value: plain_seq at once,
                                                      ** not past plain_scalar's switch */
        p = plain_seq(L, p + 5, end, be32(p + 1), 1, &c);
        p = p && p < end && *p == T_NIL ? p + 1 : NULL;   /* an improper tail: the general */
        continue;
      }
      const uint8_t *q = plain_scalar(L, p, end, &c);
      p = q ? q : plain_nested(L, p, end, 1, &c);
    }
  }
  if (p == end) return (int)n;
  lua_settop(L, base);
  return -1;
}

int lterm_push_plain(lua_State *L, const uint8_t *p, size_t len, int skip) {
  return push_plain(L, p, len, skip, NULL, 0);
}

int lterm_push_plain_bins(lua_State *L, const lpvm_msg *m, int skip) {
  uint32_t nbins;
  const lpvm_binref *bins = lpvm_msg_bins(m, &nbins);
  return push_plain(L, lpvm_msg_data((lpvm_msg *)m), m->len, skip, bins, nbins);
}

const uint8_t *lterm_plain_at(lua_State *L, const uint8_t *p, const uint8_t *end) {
  if (!lua_checkstack(L, 4)) return NULL;
  int base = lua_gettop(L);
  strs c;
  strs_init(L, &c);
  const uint8_t *q = plain_scalar(L, p, end, &c);
  if (!q && !(q = plain_nested(L, p, end, 1, &c))) lua_settop(L, base);
  return q;
}

int lterm_call_head(const lpvm_msg *m, const char *label, size_t len, lpvm_id *pid,
                    uint64_t *ref, const uint8_t **at) {
  if (lpvm_id_is_remote(m->from)) return 0;
  const uint8_t *p = lpvm_msg_data((lpvm_msg *)m), *end = p + m->len, *q;
  if (m->len < 3 + 5 + len || p[0] != 131 || p[1] != T_SMALL_TUPLE || p[2] != 4 ||
      p[3] != T_BINARY || be32(p + 4) != len || memcmp(p + 8, label, len) != 0)
    return 0;
  p += 8 + len;
  if (!(q = local_pid(p, (size_t)(end - p)))) return 0;
  lpvm_id id = be32(q) | (uint64_t)be32(q + 4) << 32;
  if (id & (LPVM_ID_PORT_BIT | LPVM_ID_REMOTE_BIT)) return 0;
  p = q + 12;
  if (!(p = local_ref(p, (size_t)(end - p), ref)) || p >= end) return 0;
  *pid = id;
  *at = p;
  return 1;
}
