/*
** lterm_raw.c -- a message's lists read straight from Lua's tables (vm/lraw.h).
**
** EStone's nested messages are lists of scalars and lists: very_big(15) is 76 tables
** and 315 values, and through the C API each element cost the encoder a lua_next, a
** key check, a type, a value read and a pop (~150 instructions), each nested table a
** lua_rawgeti, a type, a topointer, a checkstack and a pop more. Here a list is read
** from its array part and hash nodes through lraw.h's mirror of Lua's table, and a
** nested list is walked where it is. (The reader's side, lterm_plain.c's plain_seq,
** writes scalars and short strings met again into a new table's slots.)
**
** Only when lraw_ok(); otherwise enc_table keeps to the C API (the same bytes). The
** encoder only reads; the one call it makes into Lua (an element only the C API
** encodes: a function, a userdata) is followed by a check that the table's array is
** where and as big as it was (a finalizer run by a collection step in it could have
** changed the table).
*/
#include <lauxlib.h>
#include <string.h>

#include "lpvm/term.h"
#include "vm/lraw.h"
#include "vm/lterm_int.h"

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

/* The bytes of the scalars below are written here, one bounds check each
** (lpvm_tbuf_room grows the buffer), the same bytes as the lpvm_put_* functions'. */
static inline uint8_t *room(lpvm_tbuf *b, size_t n) {
  return b->cap - b->len >= n ? b->data + b->len : lpvm_tbuf_room(b, n);
}

static inline void wr32(uint8_t *q, uint32_t v) {   /* big-endian */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  v = __builtin_bswap32(v);
  memcpy(q, &v, 4);
#else
  q[0] = (uint8_t)(v >> 24), q[1] = (uint8_t)(v >> 16), q[2] = (uint8_t)(v >> 8);
  q[3] = (uint8_t)v;
#endif
}

/* n bytes from s to d: up to 16 with two (overlapping) loads and stores, without a
** call to memcpy (a message's strings are mostly short: very_big's are 1 to 17 bytes). */
static inline void copy_bytes(uint8_t *d, const char *s, size_t n) {
  if (n >= 8 && n <= 16) {
    uint64_t x, y;
    memcpy(&x, s, 8), memcpy(&y, s + n - 8, 8);
    memcpy(d, &x, 8), memcpy(d + n - 8, &y, 8);
  } else if (n >= 4 && n < 8) {
    uint32_t x, y;
    memcpy(&x, s, 4), memcpy(&y, s + n - 4, 4);
    memcpy(d, &x, 4), memcpy(d + n - 4, &y, 4);
  } else if (n < 4) {
    if (n) d[0] = (uint8_t)s[0], d[n / 2] = (uint8_t)s[n / 2], d[n - 1] = (uint8_t)s[n - 1];
  } else {
    memcpy(d, s, n);
  }
}

/* BINARY_EXT: tag, length, bytes (lpvm_put_binary). */
static inline void put_string(lpvm_tbuf *b, const char *s, size_t len) {
  if (len > UINT32_MAX) { lpvm_put_binary(b, s, len); return; }   /* its error */
  uint8_t *q = room(b, 5 + len);
  if (!q) return;
  q[0] = 109;
  wr32(q + 1, (uint32_t)len);
  copy_bytes(q + 5, s, len);
  b->len += 5 + len;
}

/* A pid: this node's are copied from the message's first one (e->pid: tag, node atom,
** ID, serial, creation) with their own ID and serial; the first, a port, another
** node's, or a node name too long for e->pid go through lpvm_put_pid. */
static inline void put_pid(lterm_enc *e, lpvm_tbuf *b, lpvm_id id) {
  size_t n = e->pidlen;
  if (n && !(id & (LPVM_ID_PORT_BIT | LPVM_ID_REMOTE_BIT))) {
    uint8_t *q = room(b, LTERM_PID_MAX);   /* the whole copy fits: n <= LTERM_PID_MAX */
    if (!q) return;
    memcpy(q, e->pid, LTERM_PID_MAX);
    wr32(q + n - 12, (uint32_t)id);
    wr32(q + n - 8, (uint32_t)(id >> 32));
    b->len += n;
    return;
  }
  size_t at = b->len;
  lpvm_put_pid(b, id);
  n = b->len - at;
  if (!b->err && !(id & (LPVM_ID_PORT_BIT | LPVM_ID_REMOTE_BIT)) && n >= 16 &&
      n <= LTERM_PID_MAX) {
    memcpy(e->pid, b->data + at, n);
    e->pidlen = (uint8_t)n;
  }
}

/* An integer: SMALL_INTEGER_EXT inline, the wider forms by lpvm_put_int. */
static inline void put_int(lpvm_tbuf *b, int64_t v) {
  uint8_t *q;
  if (v < 0 || v > 255) {
    lpvm_put_int(b, v);
  } else if ((q = room(b, 2))) {
    q[0] = 97, q[1] = (uint8_t)v;
    b->len += 2;
  }
}

/* An atom of up to 5 bytes (true, false): SMALL_ATOM_UTF8_EXT. */
static inline void put_atom(lpvm_tbuf *b, const char *name, size_t len) {
  uint8_t *q = room(b, 7);
  if (!q) return;
  q[0] = 119, q[1] = (uint8_t)len;
  memcpy(q + 2, name, 5);   /* "true" has its NUL: 5 bytes read either way */
  b->len += 2 + len;
}

/* What was put since mark goes (and the shared binaries recorded since): 1. */
static int unput(lterm_enc *e, size_t mark, uint32_t nbins) {
  e->b->len = mark;
  if (e->bins) e->bins->n = nbins;
  return 1;
}

/* The table h as a list from its array part, if its keys are 1..k there and its hash
** part holds nothing. t: its stack index, or 0 when it is not on the stack; then a
** value only the C API reads (a userdata, a function, a table that is not such a
** list) rewinds what was put and returns 1, and the caller (on the stack) encodes
** the whole table the C API's way (e->noraw: without trying this again inside it,
** so a deep message is never walked more than twice). The elements are put as they
** come, up to the first nil, and the list's count is patched in after; a non-nil
** past that nil (a hole: not a list) rewinds them. */
static int walk(lterm_enc *e, const lraw_table *h, int t) {
  if (h->lastfree) {   /* a hash part: a list only if every node is empty */
    const lraw_node *nd = h->node;
    for (size_t i = 0, n = (size_t)1 << h->lsizenode; i < n; i++)
      if (LRAW_NOVARIANT(nd[i].tt) != 0) return 1;
  }
  unsigned int asize = lraw_real_asize(h), k = 0;
  const lraw_tvalue *a = h->array;
  lpvm_tbuf *b = e->b;
  size_t mark = b->len;
  uint32_t nbins = e->bins ? e->bins->n : 0;   /* a rewind drops the binaries put since */
  if (asize > 0 && LRAW_NOVARIANT(a[0].tt) != 0) {   /* else [] : the tail alone */
    uint8_t *q = room(b, 5);
    if (!q) return 0;   /* b->err says why */
    q[0] = 108;   /* LIST_EXT; the count when known */
    b->len += 5;
  }
  for (; k < asize; k++) {
    const lraw_tvalue *v = &a[k];
    size_t len;
    switch (v->tt) {
      case LRAW_VNUMINT: put_int(b, v->v.i); break;
      case LRAW_VNUMFLT: lpvm_put_float(b, v->v.n); break;
      case LRAW_VSHRSTR: case LRAW_VLNGSTR: {
        const char *s = lraw_str(v, &len);
        put_string(b, s, len);
        break;
      }
      case LRAW_VLIGHTUD: put_pid(e, b, (lpvm_id)(uintptr_t)v->v.p); break;
      case LRAW_VTRUE: put_atom(b, "true", 4); break;
      case LRAW_VFALSE: put_atom(b, "false", 5); break;
      case LRAW_VTABLE:
        if (!e->noraw && walk_sub(e, v->v.gc) == 0) break;
        __attribute__((fallthrough));   /* on the stack, the C API's way */
      default: {   /* a table, a userdata, a function: the general encoder */
        if (LRAW_NOVARIANT(v->tt) == 0) goto ended;   /* nil: the list ends at k */
        if (!t) return unput(e, mark, nbins);
        lua_State *L = e->L;
        int sub = v->tt == LRAW_VTABLE;
        lua_rawgeti(L, t, (lua_Integer)k + 1);
        e->noraw += sub;
        int rc = lterm_enc_value(e, lua_gettop(L));
        e->noraw -= sub;
        lua_pop(L, 1);
        if (rc != 0) return rc < 0 ? rc : -1;
        /* That call may have made objects, and a collection step then run a
        ** finalizer that changed this table: if its array moved or changed size,
        ** what was put goes, and the caller encodes the table the C API's way. */
        if (h->array != a || lraw_real_asize(h) != asize) return unput(e, mark, nbins);
        break;
      }
    }
  }
ended:
  for (unsigned int j = k + 1; j < asize; j++)   /* a[k] is nil: past it, all nil? */
    if (LRAW_NOVARIANT(a[j].tt) != 0) return unput(e, mark, nbins);
  if (k > 0 && !b->err) wr32(b->data + mark + 1, k);
  lpvm_put_nil(b);
  return 0;
}

int lterm_raw_list(lterm_enc *e, int t, const void *self) {
  return walk(e, self, lua_absindex(e->L, t));   /* 0 means "off the stack" there */
}
