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
#include "vm/lproc_int.h"
#include "vm/lraw.h"
#include "vm/lterm_int.h"

/* ---- the encoder's lists ------------------------------------------------------------ */

static inline uint8_t *wr32(uint8_t *q, uint32_t v) {   /* big-endian */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  v = __builtin_bswap32(v);
  memcpy(q, &v, 4);
#else
  q[0] = (uint8_t)(v >> 24), q[1] = (uint8_t)(v >> 16), q[2] = (uint8_t)(v >> 8);
  q[3] = (uint8_t)v;
#endif
  return q + 4;
}

/* A pid the slow way (the message's first, a port, another node's, a node name too
** long for e->pid): lpvm_put_pid, whose bytes are kept in e->pid for the next ones
** when it is this node's. */
static void put_pid_slow(lterm_enc *e, lpvm_tbuf *b, lpvm_id id) {
  size_t at = b->len;
  lpvm_put_pid(b, id);
  size_t n = b->len - at;
  if (!b->err && !(id & (LPVM_ID_PORT_BIT | LPVM_ID_REMOTE_BIT)) && n >= 16 &&
      n <= LTERM_PID_MAX) {
    memcpy(e->pid, b->data + at, n);
    e->pidlen = (uint8_t)n;
  }
}

/* What was put since mark goes, and the shared binaries recorded since (those at mark
** or past it: their positions grow with the builder's length; a count taken at each
** table's start cost very_big(15) ~450 instructions a message): 1. */
static int unput(lterm_enc *e, size_t mark) {
  e->b->len = mark;
  lpvm_binrefs *r = e->bins;
  if (r)
    while (r->n && r->v[r->n - 1].pos >= mark) r->n--;
  return 1;
}

/* A table with no hash node in use (an empty hash part, or nodes all emptied). */
static inline int no_hash(const lraw_table *h) {
  if (h->lastfree) {   /* a hash part: a list only if every node is empty */
    const lraw_node *nd = h->node;
    for (size_t i = 0, n = (size_t)1 << h->lsizenode; i < n; i++)
      if (LRAW_NOVARIANT(nd[i].tt) != 0) return 0;
  }
  return 1;
}

/* The list's bytes are written through a cursor held in locals (w: the next byte,
** lim: the room's end): a byte stored through b->data may alias b's own fields, so
** with b->len as the cursor the compiler reloaded b->data, b->len and b->cap after
** every store. b->len is set from w (SYNC) before anything else puts into b or takes
** back what was put, and w is read again after (LOAD). NEED(n) makes room for n bytes
** (lpvm_tbuf_room grows the buffer); after an error (b->err says which) the walk
** returns 0, and what encloses it finds no room either. */
#define SYNC() (b->len = (size_t)(w - b->data))
#define LOAD() (w = b->data + b->len, lim = b->data + b->cap)
#define NEED(n)                                              \
  do {                                                       \
    if ((size_t)(lim - w) < (size_t)(n)) {                   \
      SYNC();                                                \
      if (!lpvm_tbuf_room(b, (size_t)(n))) goto nomem;       \
      LOAD();                                                \
    }                                                        \
  } while (0)

/* The table h (at stack index t) as a list from its array part, if its keys are 1..k
** there and its hash part holds nothing; 1 (nothing put) if it is not such a list. The
** elements are put as they come, up to the first nil, and the list's count is patched
** in after; a non-nil past that nil (a hole: not a list) takes them back. Scalars are
** written here with the lpvm_put_* functions' bytes: an integer of one byte, a string,
** true, false, a float and a local pid (copied from the message's first one, e->pid:
** tag, node atom, creation, with its own ID and serial words).
** A table element that is such a list is written in place, in this same loop: the
** enclosing list's place is kept in e->wfr (no call a table, no path bookkeeping: ~40
** instructions a table less than one call of walk each). A nested table that is not
** such a list, or one past the depth limit, or any value only the C API encodes (a
** userdata, a function) inside a nested list, takes back everything put since the
** element of h that holds it, which is then encoded the C API's way (e->noraw: without
** trying this again inside it, so a deep message is never walked more than twice).
** A cycle needs no look along the path here: walked, it goes down to the depth limit,
** which sends that element to the C API, where enc_table's path check finds it (the
** same error, found later: an error's cost). The C API is called only from h, when no
** nested list is open. The encoder only reads and calls nothing that resizes a table. */
static int walk(lterm_enc *e, const lraw_table *h, int t) {
  if (!no_hash(h)) return 1;
  /* nested lists open: e->depth - d0; e->wfr[d0] is h's place while one is, and
  ** e->wfr[d] that of the list enclosing the one at depth d + 1 (a walk called
  ** from inside this one, by the C API, starts deeper: their frames do not meet) */
  const int d0 = e->depth;
  unsigned int asize = lraw_real_asize(h), k = 0;
  const lraw_tvalue *a = h->array;
  lpvm_tbuf *b = e->b;
  size_t mark = b->len;
  uint8_t *w, *lim;
  const lraw_tvalue *v;
  LOAD();
opened:   /* a list begins at mark: a, asize, k = 0 */
  if (asize > 0 && LRAW_NOVARIANT(a[0].tt) != 0) {   /* else [] : the tail alone */
    NEED(5);
    w[0] = 108;   /* LIST_EXT; the count when known */
    w += 5;
  }
resumed:
  for (; k < asize; k++) {
    v = &a[k];
    switch (v->tt) {
      case LRAW_VNUMINT: {
        lua_Integer x = v->v.i;
        if (x >= 0 && x <= 255) {   /* SMALL_INTEGER_EXT */
          NEED(2);
          w[0] = 97, w[1] = (uint8_t)x;
          w += 2;
        } else {
          SYNC();
          lpvm_put_int(b, x);
          LOAD();
        }
        break;
      }
      case LRAW_VNUMFLT: {   /* NEW_FLOAT_EXT */
        uint64_t bits;
        memcpy(&bits, &v->v.n, 8);
        NEED(9);
        w[0] = 70;
        wr32(wr32(w + 1, (uint32_t)(bits >> 32)), (uint32_t)bits);
        w += 9;
        break;
      }
      case LRAW_VSHRSTR: case LRAW_VLNGSTR: {   /* BINARY_EXT */
        size_t len;
        const char *s = lraw_str(v, &len);
        if (len > UINT32_MAX) {   /* lpvm_put_binary's error */
          SYNC();
          lpvm_put_binary(b, s, len);
          goto nomem;
        }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        if (len <= 3) {   /* very_big's one-letter strings: the element as one word */
          /* a Lua string's bytes end with a NUL, so s[len] is there to read; the word's
          ** bytes past the element are room NEED made, written over next */
          uint64_t x = 109 | (uint64_t)len << 32 | (uint64_t)(uint8_t)s[0] << 40;
          if (len >= 1) x |= (uint64_t)(uint8_t)s[1] << 48;
          if (len >= 2) x |= (uint64_t)(uint8_t)s[2] << 56;
          NEED(8);
          memcpy(w, &x, 8);
          w += 5 + len;
          break;
        }
#endif
        NEED(5 + len);
        w[0] = 109;
        wr32(w + 1, (uint32_t)len);
        lterm_copy_bytes(w + 5, s, len);
        w += 5 + len;
        break;
      }
      case LRAW_VLIGHTUD: {   /* a pid, or a reference with its tag (vm/lmod.c) */
        uint64_t id = (uint64_t)(uintptr_t)v->v.p;
        size_t pn = e->pidlen;
        if (pn && !(id & (LPVM_ID_PORT_BIT | LPVM_ID_REMOTE_BIT))) {   /* not a reference */
          NEED(LTERM_PID_MAX);   /* the whole copy fits: pn <= LTERM_PID_MAX */
          memcpy(w, e->pid, LTERM_PID_MAX);
          wr32(wr32(w + pn - 12, (uint32_t)id), (uint32_t)(id >> 32));
          w += pn;
          break;
        }
        SYNC();
        if (lmod_light_is_ref(id)) lpvm_put_ref(b, id & ~LPVM_ID_REF_TAG);
        else put_pid_slow(e, b, (lpvm_id)id);
        LOAD();
        break;
      }
      case LRAW_VTRUE:   /* SMALL_ATOM_UTF8_EXT */
        NEED(7);
        w[0] = 119, w[1] = 4;
        memcpy(w + 2, "true", 5);   /* 5 bytes, its NUL the next byte's room */
        w += 6;
        break;
      case LRAW_VFALSE:
        NEED(7);
        w[0] = 119, w[1] = 5;
        memcpy(w + 2, "false", 5);
        w += 7;
        break;
      case LRAW_VTABLE: {
        const lraw_table *sub = v->v.gc;
        if (!e->noraw && e->depth < LTERM_DEPTH && no_hash(sub)) {   /* in place */
          e->wfr[e->depth++] = (lterm_wframe){a, asize, k, mark};
          mark = (size_t)(w - b->data);
          a = sub->array, asize = lraw_real_asize(sub), k = 0;
          goto opened;
        }
        if (e->depth > d0) goto refused;
      }
        __attribute__((fallthrough));   /* h's element: the C API's way */
      default: {   /* a table, a userdata, a function: the general encoder */
        if (LRAW_NOVARIANT(v->tt) == 0) goto ended;   /* nil: the list ends at k */
        if (e->depth > d0) goto refused;
      by_api:;
        SYNC();
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
        if (h->array != a || lraw_real_asize(h) != asize) return unput(e, mark);
        LOAD();
        break;
      }
    }
  }
ended:
  for (unsigned int j = k + 1; j < asize; j++)   /* a[k] is nil: past it, all nil? */
    if (LRAW_NOVARIANT(a[j].tt) != 0) {
      if (e->depth > d0) goto refused;
      SYNC();
      return unput(e, mark);
    }
  NEED(1);
  if (k > 0) wr32(b->data + mark + 1, k);
  *w++ = 106;   /* NIL_EXT: the list's tail, or [] */
  if (e->depth > d0) {   /* back to the enclosing list, past this element */
    const lterm_wframe *f = &e->wfr[--e->depth];
    a = f->a, asize = f->asize, k = f->k + 1, mark = f->mark;
    goto resumed;
  }
  SYNC();
  return 0;
refused: {   /* a nested list refused: h's element k goes to the C API */
    /* where that element's bytes begin */
    size_t at = e->depth == d0 + 1 ? mark : e->wfr[d0 + 1].mark;
    const lterm_wframe *f = &e->wfr[d0];
    e->depth = d0;
    a = f->a, asize = f->asize, k = f->k, mark = f->mark;
    unput(e, at);
    LOAD();
    v = &a[k];
    goto by_api;
  }
nomem:   /* b->err says why; what encloses this finds no room either */
  e->depth = d0;
  return 0;
}

#undef SYNC
#undef LOAD
#undef NEED

int lterm_raw_list(lterm_enc *e, int t, const void *self) {
  return walk(e, self, lua_absindex(e->L, t));   /* 0 means "off the stack" there */
}
