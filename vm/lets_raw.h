/*
** lets_raw.h -- Lua 5.4's values read (and a few written) in place, for the fast paths
** of `require "ets"` (vm/lets.c, vm/lmod_ets.c).
**
** Through the public API each argument of a C function, each upvalue and each element
** of a table costs a call into liblua (index2value, a type test, a push and a pop),
** and an insert or a lookup from Lua made a dozen such calls: more instructions than
** the table's own work. Lua 5.4 keeps these in plain structures (lstate.h: lua_State's
** top and ci, CallInfo's func; lobject.h: TValue, CClosure's upvalues, Table's array,
** TString), which are mirrored here. The mirror is trusted only once lets_raw_check
** has seen it read right -- arguments, upvalues, every kind of element and string, a
** table's array and hash part, written values read back through the API -- on values
** it made through the API (as lfun.c does for closures); until then, or when it read
** wrong (another Lua), lets_raw() is 0 and every caller keeps to the API.
**
** Values are only read, except that a table made a moment ago may get non-collectable
** values (integers, floats, booleans, nil) written into its array slots: Lua's write
** barrier concerns collectable values only, and the slots exist (lua_createtable made
** them), so no invariant of the collector or of the table is involved.
*/
#ifndef LPVM_LETS_RAW_H
#define LPVM_LETS_RAW_H

#include <lua.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct raw_value {   /* TValue: a Value and its tag */
  union { int64_t i; double n; const void *gc; } v;
  uint8_t tt;
} raw_value;

typedef struct raw_table {   /* Table: CommonHeader, flags, lsizenode, alimit, array, ... */
  void *next;
  uint8_t tt, marked, flags, lsizenode;
  unsigned alimit;           /* elements 1..alimit lie in array[] */
  raw_value *array;
  const void *node;
  const void *lastfree;      /* NULL: no hash part (ltable.c's isdummy) */
} raw_table;

#define RAW_BITRAS 0x80      /* in a table's flags: alimit is not the array's real size */

typedef struct raw_string {  /* TString: CommonHeader, extra, shrlen, hash, u, contents */
  void *next;
  uint8_t tt, marked, extra, shrlen;
  unsigned hash;
  size_t lnglen;             /* long strings; short ones use shrlen */
  char contents[];
} raw_string;

typedef struct raw_cclosure {   /* CClosure: CommonHeader, nupvalues, gclist, f, upvalue */
  void *next;
  uint8_t tt, marked, nupvalues;
  void *gclist;
  lua_CFunction f;
  raw_value upvalue[];
} raw_cclosure;

typedef struct raw_callinfo {   /* CallInfo: func, top, ... (a stack slot is a TValue) */
  raw_value *func;
} raw_callinfo;

typedef struct raw_state {   /* lua_State: CommonHeader, status, allowhook, nci, top, l_G, ci */
  void *next;
  uint8_t tt, marked, status, allowhook;
  unsigned short nci;
  raw_value *top;
  void *l_G;
  raw_callinfo *ci;
} raw_state;

/* Lua 5.4's variant tags (lobject.h): the type in bits 0-3, the variant in bits 4-5,
** bit 6 for collectable values. Nil's variants (nil, empty, absent key) share type 0. */
enum {
  RAW_FALSE = 0x01, RAW_TRUE = 0x11, RAW_INT = 0x03, RAW_FLOAT = 0x13, RAW_SHRSTR = 0x44,
  RAW_LNGSTR = 0x54, RAW_TABLE = 0x45, RAW_USERDATA = 0x47, RAW_CCLOSURE = 0x66
};

static inline int raw_is_nil(const raw_value *v) { return (v->tt & 0x0f) == 0; }

extern _Atomic int lets_raw_layout;   /* 0 not checked, 1 the mirror holds, -1 not */

/* May the mirror be used? (lets_raw_check has run and found it right.) */
static inline int lets_raw(void) {
  return atomic_load_explicit(&lets_raw_layout, memory_order_relaxed) == 1;
}

/* Argument i (>= 1) of the running C function, or NULL when it has fewer. */
static inline const raw_value *lets_raw_arg(lua_State *L, int i) {
  const raw_state *s = (const raw_state *)(void *)L;
  const raw_value *a = s->ci->func + i;
  return a < s->top ? a : NULL;
}

/* Upvalue i (1..its count) of the running C closure. */
static inline const raw_value *lets_raw_upvalue(lua_State *L, int i) {
  const raw_cclosure *c = ((const raw_state *)(void *)L)->ci->func->v.gc;
  return &c->upvalue[i - 1];
}

/* Once per run, before anything asks lets_raw(): the check above, run from a C
** function (a module's opener). Raises only as the API calls it makes do (memory). */
void lets_raw_check(lua_State *L);

#endif
