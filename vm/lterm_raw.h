/*
** lterm_raw.h -- Lua 5.4's table, value and string layout, mirrored for the term
** codec's hot loops (vm/lterm_raw.c says why and how it is trusted). Only the codec
** (lterm.c, lterm_plain.c, lterm_raw.c) includes it.
*/
#ifndef LPVM_LTERM_RAW_H
#define LPVM_LTERM_RAW_H

#include <lua.h>
#include <stdatomic.h>
#include <stddef.h>

#include "vm/lterm_int.h"

/* lobject.h's Value and TValue: 16 bytes, the tag after the value. */
typedef union lraw_value {
  void *gc;
  void *p;
  lua_Integer i;
  lua_Number n;
} lraw_value;

typedef struct lraw_tvalue {
  lraw_value v;
  unsigned char tt;
} lraw_tvalue;

/* lobject.h's Table. */
typedef struct lraw_table {
  void *next;
  unsigned char tt, marked, flags, lsizenode;
  unsigned int alimit;
  lraw_tvalue *array;
  void *node;
  void *lastfree;   /* NULL: no hash part (the shared dummy node) */
  void *metatable;
  void *gclist;
} lraw_table;

/* lobject.h's TString: the bytes at contents. */
typedef struct lraw_string {
  void *next;
  unsigned char tt, marked, extra, shrlen;
  unsigned int hash;
  size_t lnglen;   /* a long string's length (a short one's is shrlen) */
  char contents[];
} lraw_string;

/* Value tags (lobject.h's makevariant, with BIT_ISCOLLECTABLE for objects). */
enum {
  LRAW_VFALSE = 0x01, LRAW_VTRUE = 0x11, LRAW_VLIGHTUD = 0x02, LRAW_VNUMINT = 0x03,
  LRAW_VNUMFLT = 0x13, LRAW_VSHRSTR = 0x44, LRAW_VLNGSTR = 0x54, LRAW_VTABLE = 0x45
};
#define LRAW_NOVARIANT(tt) ((tt) & 0x0F)   /* 0: nil, empty or an absent key */
#define LRAW_BITRAS 0x80                   /* Table.flags: alimit is not the array's size */
#define LRAW_BLACK 0x20                    /* marked: lgc.h's BLACKBIT */
#define LRAW_SHORTMAX 40                   /* LUAI_MAXSHORTLEN: longer strings are not interned */

/* 1 when the layout above was checked against the running liblua (once per VM, on
** a state of its own), 0 when it was refused: callers then take the C API's way. */
extern _Atomic int lterm_raw_layout;   /* 0 unknown, 1 trusted, -1 refused */
int lterm_raw_check(void);
static inline int lterm_raw_ok(void) {
  int l = atomic_load_explicit(&lterm_raw_layout, memory_order_relaxed);
  return l == 1 || (l == 0 && lterm_raw_check() == 1);
}

/* The table at idx as the mirror (the layout must be trusted). */
static inline lraw_table *lraw_table_at(lua_State *L, int idx) {
  return (lraw_table *)lua_topointer(L, idx);
}

/* Encode the table at t (self: its address) as a list straight from its array part
** when its keys are 1..k in the array part and its hash part holds nothing: 0 done
** (or an element's error, < 0), 1 not such a table (nothing put). */
int lterm_raw_list(lterm_enc *e, int t, const void *self);

#endif
