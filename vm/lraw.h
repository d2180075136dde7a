/*
** lraw.h -- Lua 5.4's own structures, mirrored, for the few hot paths that read Lua's
** values in place (and write a few into tables they have just made).
**
** Why: through the public API every value costs a call into liblua (index2value, a
** type test, a push, a pop: 40-190 instructions), and the hottest paths of lpvm touch
** many: a message's lists (the term codec), an ETS object's elements and a lookup's
** result, the arguments and upvalues of a C function called millions of times, a
** closure's prototype (to cache its dump), the collector's lists of objects with a
** finalizer (to clean a recycled state without a collection). Lua 5.4 keeps all of
** them in plain structures (lobject.h: TValue, Table, Node, TString, the closures;
** lstate.h: lua_State, CallInfo, global_State), the same through 5.4.0-5.4.6, and
** Debian's liblua is a shared library lpvm does not build: so they are mirrored here,
** one prefix (lraw_), one copy for every user.
**
** Trust: nothing here is used before lraw_check has run, once per VM on a state of
** its own (no process's finalizer can run in it), and seen every field a user reads
** agree with what the C API says of values it built: tags of every kind of value,
** integers and floats, strings' bytes and lengths, a table's array size and its
** "alimit is not the size" flag, hash nodes and their keys, values written in place
** read back, a C function's arguments and upvalues, two closures of one body sharing
** a prototype, the collector's finobj list and black bit, the allocator and registry
** in the global state, a full userdata's metatable and block. Another Lua (or a build with other options) fails some part of
** it, lraw_ok() answers 0, and every user keeps to the C API: the same results, by the
** slower way. Users must call lraw_ok() (one relaxed load) before each use.
**
** Rules for users: read only, except into the array slots of a table made a moment
** ago by lua_createtable (the slots exist), and there only values that are not
** collectable (integers, floats, booleans, nil: Lua's write barrier is for
** collectable values), or a collectable one while the table is not black (a white
** or gray table is traversed again, so lua_rawseti's barrier would do nothing
** either); and onto the stack's top, in room lua_checkstack made, a short string
** that something else keeps alive (vm/lterm_plain.c's kept strings) or a copy of a
** value on the stack already (receive's predicate call): the stack needs no barrier,
** a thread is traversed again at the end of every cycle; never call
** into Lua between taking a pointer into a table or the stack and its last use,
** unless that call cannot resize or move it.
*/
#ifndef LPVM_LRAW_H
#define LPVM_LRAW_H

#include <lua.h>
#include <stdatomic.h>
#include <stddef.h>

/* lobject.h's Value and TValue: 16 bytes, the tag after the value. */
typedef union lraw_value {
  void *gc;       /* a collectable object */
  void *p;        /* a light userdata */
  lua_Integer i;
  lua_Number n;
  lua_CFunction f;   /* a light C function */
} lraw_value;

typedef struct lraw_tvalue {
  lraw_value v;
  unsigned char tt;
} lraw_tvalue;

/* Value tags (lobject.h's makevariant, with BIT_ISCOLLECTABLE 0x40 for objects). An
** object's own header `tt` is the tag without that bit (a table's is 0x05). */
enum {
  LRAW_VFALSE = 0x01, LRAW_VTRUE = 0x11, LRAW_VLIGHTUD = 0x02, LRAW_VNUMINT = 0x03,
  LRAW_VNUMFLT = 0x13, LRAW_VSHRSTR = 0x44, LRAW_VLNGSTR = 0x54, LRAW_VTABLE = 0x45,
  LRAW_VLCL = 0x46, LRAW_VUSERDATA = 0x47, LRAW_VCCL = 0x66, LRAW_VLCF = 0x16
};
#define LRAW_NOVARIANT(tt) ((tt) & 0x0F)   /* 0: nil, empty or an absent key */
static inline int lraw_is_nil(const lraw_tvalue *v) { return LRAW_NOVARIANT(v->tt) == 0; }

/* lobject.h's Table. */
typedef struct lraw_table {
  void *next;
  unsigned char tt, marked, flags, lsizenode;
  unsigned int alimit;   /* elements 1..alimit lie in array[] */
  lraw_tvalue *array;
  void *node;
  void *lastfree;        /* NULL: no hash part (the shared dummy node) */
  void *metatable;
  void *gclist;
} lraw_table;

#define LRAW_BITRAS 0x80   /* Table.flags: alimit is not the array's size */
#define LRAW_VEMPTY 0x10   /* an empty slot, as a new array's are (nil's variant 1) */
#define LRAW_FLAGS_NEW 0x3F   /* Table.flags of a new table: no metamethod looked for */
#define LRAW_WHITES 0x18   /* an object's marked: lgc.h's two white bits */
#define LRAW_BLACK 0x20    /* an object's marked: lgc.h's BLACKBIT */
#define LRAW_SHORTMAX 40   /* LUAI_MAXSHORTLEN: longer strings are not interned */

/* lobject.h's Udata0 (a full userdata without user values) up to its metatable; its
** block (bindata, maximally aligned) follows: lraw_udata_block. */
typedef struct lraw_udata0 {
  void *next;
  unsigned char tt, marked;
  unsigned short nuvalue;
  size_t len;
  lraw_table *metatable;
} lraw_udata0;

static inline void *lraw_udata_block(const lraw_udata0 *u) { return (void *)(u + 1); }

/* lobject.h's Node: the value, the key's tag, the chain, the key. */
typedef struct lraw_node {
  lraw_value v;
  unsigned char tt, key_tt;
  int next;
  lraw_value key;
} lraw_node;

/* lobject.h's TString: the bytes at contents. */
typedef struct lraw_string {
  void *next;
  unsigned char tt, marked, extra, shrlen;
  unsigned int hash;
  size_t lnglen;   /* a long string's length (a short one's is shrlen) */
  char contents[];
} lraw_string;

/* lobject.h's CClosure and the head of LClosure. */
typedef struct lraw_cclosure {
  void *next;
  unsigned char tt, marked, nupvalues;
  void *gclist;
  lua_CFunction f;
  lraw_tvalue upvalue[];
} lraw_cclosure;

typedef struct lraw_lclosure {
  void *next;
  unsigned char tt, marked, nupvalues;
  void *gclist;
  const void *proto;
} lraw_lclosure;

/* lstate.h: the head of CallInfo, of lua_State, and global_State up to fixedgc. */
typedef struct lraw_callinfo {
  lraw_tvalue *func;   /* the function; its arguments follow it */
} lraw_callinfo;

typedef struct lraw_state {
  void *next;
  unsigned char tt, marked, status, allowhook;
  unsigned short nci;
  lraw_tvalue *top;
  struct lraw_global *l_G;
  lraw_callinfo *ci;
} lraw_state;

typedef struct lraw_global {
  lua_Alloc frealloc;
  void *ud;
  ptrdiff_t totalbytes, GCdebt;
  size_t GCestimate, lastatomic;
  struct { void *hash; int nuse, size; } strt;
  lraw_tvalue l_registry, nilvalue;
  unsigned int seed;
  unsigned char currentwhite, gcstate, gckind, gcstopem, genminormul, genmajormul, gcstp,
      gcemergency, gcpause, gcstepmul, gcstepsize;
  const void *allgc;
  void *sweepgc;
  const void *finobj;   /* objects with a finalizer, alive */
  const void *gray, *grayagain, *weak, *ephemeron, *allweak;
  const void *tobefnz;  /* objects found dead, their finalizer not yet run */
  const void *fixedgc;
  /* The tail (lraw_tail_ok: checked apart, so a Lua that differs only here keeps the
  ** rest): the generational lists, the main thread, the metamethods' names, the basic
  ** types' metatables. */
  const void *survival, *old1, *reallyold, *firstold1, *finobjsur, *finobjold1, *finobjrel;
  const void *twups;
  lua_CFunction panic;
  const void *mainthread;
  const void *memerrmsg;
  const lraw_string *tmname[25];   /* ltm.h's TM_N names: "__index" first */
  const lraw_table *mt[LUA_NUMTYPES];
} lraw_global;

/* lstate.h's CallInfo up to u.l.savedpc and lobject.h's Proto up to code: the frames
** of a process that waits, for the lines its next step reads (hints, vm/lmod_msg.c).
** Read only when lraw_calls_ok() (checked apart, as the tail). */
typedef struct lraw_ci {
  lraw_tvalue *func, *top;
  const struct lraw_ci *previous, *next;
  const void *savedpc;   /* u.l.savedpc: a Lua function's next instruction */
} lraw_ci;
typedef struct lraw_proto_head {
  void *next;
  unsigned char tt, marked, numparams, is_vararg, maxstacksize;
  int sizeupvalues, sizek, sizecode, sizelineinfo, sizep, sizelocvars, sizeabslineinfo,
      linedefined, lastlinedefined;
  const lraw_tvalue *k;   /* the constants */
  const void *code;       /* sizecode instructions */
} lraw_proto_head;

/* ---- trust ------------------------------------------------------------------------------ */

extern _Atomic int lraw_layout;   /* 0 not checked, 1 trusted, -1 refused */
extern _Atomic int lraw_tail;     /* the global state's tail: 1 trusted (set by the check) */
extern _Atomic int lraw_calls;    /* lraw_ci and lraw_proto_head: 1 trusted (set by the check) */

/* The check (once per VM, any thread; later callers wait for the first): 1 or -1. */
int lraw_check(void);

/* May the mirror be used? */
static inline int lraw_ok(void) {
  int l = atomic_load_explicit(&lraw_layout, memory_order_relaxed);
  return l == 1 || (l == 0 && lraw_check() == 1);
}

/* May the global state's tail (mt, tmname, mainthread) be read too? */
static inline int lraw_tail_ok(void) {
  return lraw_ok() && atomic_load_explicit(&lraw_tail, memory_order_relaxed) == 1;
}

/* May a frame's CallInfo links and a Lua function's prototype be read (lraw_ci)? */
static inline int lraw_calls_ok(void) {
  return lraw_ok() && atomic_load_explicit(&lraw_calls, memory_order_relaxed) == 1;
}

/* ---- reading (the layout trusted) ------------------------------------------------------- */

/* ltable.c's luaH_realasize: alimit, or the power of 2 above it when a length search
** lowered it (LRAW_BITRAS). */
static inline unsigned int lraw_real_asize(const lraw_table *h) {
  unsigned int n = h->alimit;
  if (!(h->flags & LRAW_BITRAS) || (n & (n - 1)) == 0) return n;
  n |= n >> 1, n |= n >> 2, n |= n >> 4, n |= n >> 8, n |= n >> 16;
  return n + 1;
}

/* A string value's bytes and length. */
static inline const char *lraw_str(const lraw_tvalue *v, size_t *len) {
  const lraw_string *s = v->v.gc;
  *len = v->tt == LRAW_VSHRSTR ? s->shrlen : s->lnglen;
  return s->contents;
}

/* The table at stack index idx (a table there: the caller checked). */
static inline lraw_table *lraw_table_at(lua_State *L, int idx) {
  return (lraw_table *)lua_topointer(L, idx);
}

/* ---- making (vm/lraw_new.c) ------------------------------------------------------------- */

/* Push a new table whose array part is n empty slots, as lua_createtable(L, n, 0)
** would (the caller has room on the stack, as for any push), and return that array
** (NULL for 0); the caller may write the slots by the rules above. The one maker of
** Lua objects here: the check (lraw_new_check) compares its tables with
** lua_createtable's. Memory refused, 0 or more than LRAW_NEWMAX slots:
** lua_createtable's way (its emergency collection, its error). */
#define LRAW_NEWMAX (1u << 24)
lraw_tvalue *lraw_new_array(lua_State *L, unsigned n);
/* Part of lraw_check: 1 if lraw_new_array's tables are lua_createtable's. */
int lraw_new_check(void);

/* Argument i (>= 1) of the running C function, or NULL when it has fewer. */
static inline const lraw_tvalue *lraw_arg(lua_State *L, int i) {
  const lraw_state *s = (const lraw_state *)(void *)L;
  const lraw_tvalue *a = s->ci->func + i;
  return a < s->top ? a : NULL;
}

/* Upvalue i (1..its count) of the running C closure. */
static inline const lraw_tvalue *lraw_upvalue(lua_State *L, int i) {
  const lraw_cclosure *c = ((const lraw_state *)(void *)L)->ci->func->v.gc;
  return &c->upvalue[i - 1];
}

/* The prototype of the Lua closure at idx, or NULL for anything else. */
static inline const void *lraw_proto(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TFUNCTION || lua_iscfunction(L, idx)) return NULL;
  const lraw_lclosure *h = lua_topointer(L, idx);
  return h && h->tt == (LRAW_VLCL & 0x3F) ? h->proto : NULL;
}

/* Does the state hold an object whose finalizer has not run (alive with one, or dead
** and waiting for it)? */
static inline int lraw_finalizers_pending(lua_State *L) {
  const lraw_global *g = ((const lraw_state *)(void *)L)->l_G;
  return g->finobj != NULL || g->tobefnz != NULL;
}

/* The incremental collector's step size (lgc.c's gcstepsize, a log2 of bytes): Lua's
** API sets it only with the mode (LUA_GCINC), and reads it never. */
static inline int lraw_gc_stepsize(lua_State *L) {
  return ((const lraw_state *)(void *)L)->l_G->gcstepsize;
}

/* Is the collector in generational mode (lgc.h's KGC_GEN)? */
static inline int lraw_gc_generational(lua_State *L) {
  return ((const lraw_state *)(void *)L)->l_G->gckind == 1;
}

/* The global state of L. */
static inline const lraw_global *lraw_g(lua_State *L) {
  return ((const lraw_state *)(void *)L)->l_G;
}

/* The value at short-string key k (interned: one object per content) in table h, or
** NULL when absent or nil: its main position (the string's hash) and the collision
** chain from there, as ltable.c looks (a wrong guess only misses: keys are compared). */
static inline const lraw_tvalue *lraw_get_shrstr(const lraw_table *h, const lraw_string *k) {
  if (!h->lastfree) return NULL;
  size_t size = (size_t)1 << h->lsizenode;
  const lraw_node *n = (const lraw_node *)h->node + (k->hash & (size - 1));
  for (size_t steps = 0; steps < size; steps++) {
    if (n->key_tt == LRAW_VSHRSTR && n->key.gc == k)
      return lraw_is_nil((const lraw_tvalue *)n) ? NULL : (const lraw_tvalue *)n;
    if (n->next == 0) break;
    n += n->next;
  }
  return NULL;
}

/* The value at light-userdata key p in table h, or NULL when absent or nil: ltable.c's
** main position of a pointer (its low 32 bits modulo the node count less one, made
** odd) and the chain from there (a wrong guess only misses: keys are compared). */
static inline const lraw_tvalue *lraw_get_lightud(const lraw_table *h, const void *p) {
  if (!h->lastfree) return NULL;
  size_t size = (size_t)1 << h->lsizenode;
  unsigned int u = (unsigned int)((size_t)p & 0xFFFFFFFFu);
  const lraw_node *n = (const lraw_node *)h->node + (u % (unsigned int)((size - 1) | 1));
  for (size_t steps = 0; steps < size; steps++) {
    if (n->key_tt == LRAW_VLIGHTUD && n->key.p == p)
      return lraw_is_nil((const lraw_tvalue *)n) ? NULL : (const lraw_tvalue *)n;
    if (n->next == 0) break;
    n += n->next;
  }
  return NULL;
}

#endif
