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
  unsigned int asize = lraw_real_asize(h), k = 0;
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
        const char *s = lraw_str(v, &len);
        lpvm_put_binary(b, s, len);
        break;
      }
      case LRAW_VLIGHTUD: lmod_put_light(b, (uint64_t)(uintptr_t)v->v.p); break;
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
        /* That call may have made objects, and a collection step then run a
        ** finalizer that changed this table: if its array moved or changed size,
        ** what was put goes, and the caller encodes the table the C API's way. */
        if (h->array != a || lraw_real_asize(h) != asize) {
          b->len = mark;
          return 1;
        }
        break;
      }
    }
  }
  lpvm_put_nil(b);
  return 0;
}

int lterm_raw_list(lterm_enc *e, int t, const void *self) {
  return walk(e, self, lua_absindex(e->L, t));   /* 0 means "off the stack" there */
}
