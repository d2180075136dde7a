/*
** lmod_ets.c -- `require "ets"` (also `lpvm.ets`): Lua's face of the shared tables
** in tasks/ets*.c. docs/ets.md is the user's guide, side by side with Erlang's ets.
**
** Thin on purpose: each function encodes its Lua arguments as terms (lets.c's fast
** paths for the common shapes, lterm.c for the rest), calls the C API of
** include/lpvm/ets.h and decodes what it wrote. An object is a Lua array {key, ...}
** stored as a tuple; a table id is a reference (or, for a named_table, its name);
** the end of a walk is nil. Errors are ETS's badarg, raised with the argument named:
** "bad argument #1 to 'insert' (no such table)". Match specifications are written by
** lets_ms.c. This file holds the functions on an operation's path (objects, keys,
** walks) with their helpers inline; the table-level functions are in lets_admin.c and
** select/match in lets_select.c, registered here with the same upvalues.
*/
#include <lauxlib.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/dist.h"
#include "lpvm/ets.h"
#include "vm/lets.h"
#include "vm/lraw.h"
#include "vm/lraw_new.h"
#include "vm/lproc_int.h"
#include "vm/lterm.h"

/* ---- buffers ------------------------------------------------------------------------ */

/* The output builder of this thread (results are decoded from it); the input side
** uses lterm_scratch(). Both are per thread: a C function runs on one thread. */
static pthread_key_t out_key;
static pthread_once_t out_once = PTHREAD_ONCE_INIT;

static void out_free(void *p) {
  lpvm_tbuf_free(p);
  free(p);
}

static void out_init(void) { pthread_key_create(&out_key, out_free); }

/* The thread's builder once it has one: a plain TLS load on every later call (the key
** is there for its destructor, which frees the builder when the thread ends). */
static _Thread_local lpvm_tbuf *out_tls;

static lpvm_tbuf *out_buf(lua_State *L) {
  lpvm_tbuf *b = out_tls;
  if (!b) {
    pthread_once(&out_once, out_init);
    if (!(b = calloc(1, sizeof *b))) luaL_error(L, "not enough memory");
    if (pthread_setspecific(out_key, b)) {
      free(b);
      luaL_error(L, "not enough memory");
    }
    out_tls = b;
  }
  lpvm_tbuf_reset(b);   /* (re)starts the term; gives back a buffer grown past 64 KiB */
  if (b->err) luaL_error(L, "not enough memory");
  return b;
}

static lpvm_tbuf *in_buf(lua_State *L) {
  lpvm_tbuf *b = lterm_scratch();
  if (!b) luaL_error(L, "not enough memory");
  return b;
}

/* Decode the whole term in b as one Lua value. */
static void push_term(lua_State *L, lpvm_tbuf *b) {
  if (lets_push_scalar(L, b->data, b->len) || lets_push_list(L, b->data, b->len)) return;
  lpvm_tread r;
  if (lpvm_tread_init(&r, b->data, b->len)) luaL_error(L, "ets: bad result term");
  lterm_push(L, &r);
}

/* ---- arguments ---------------------------------------------------------------------- */

static lpvm_task *self_of(lua_State *L) { return &lproc_check(L)->task; }

static int fail(lua_State *L, int rc, int arg) {
  if (rc == LPVM_ENOMEM) return luaL_error(L, "not enough memory");
  if (rc == LPVM_ETS_ENOTAB || rc == LPVM_ETS_EACCESS || rc == LPVM_ETS_EOWNER) arg = 1;
  return luaL_argerror(L, arg, lpvm_ets_strerror(rc));
}

/* Upvalue 1 of every function: the name cache (lets.c); upvalue 2: the metatable of
** references, so that a table id is checked without a registry lookup; upvalue 3:
** the last reference this function checked (held, so it cannot be another value at
** the same address), which a loop over one table passes again and again; upvalue 4:
** that reference's table id. */
static lpvm_tab check_tab_slow(lua_State *L, int arg);

static inline __attribute__((always_inline)) lpvm_tab check_tab(lua_State *L, int arg) {
  if (lraw_ok()) {   /* the held reference itself (one object): no API call */
    const lraw_tvalue *a = lraw_arg(L, arg), *held = lraw_upvalue(L, 3);
    if (a && a->tt == LRAW_VUSERDATA && held->tt == LRAW_VUSERDATA && a->v.gc == held->v.gc)
      return (lpvm_tab)lraw_upvalue(L, 4)->v.i;
  }
  return check_tab_slow(L, arg);
}

/* Anything else: a name, another reference, or an error. */
static __attribute__((noinline)) lpvm_tab check_tab_slow(lua_State *L, int arg) {
  if (!lraw_ok()) {
    /* the same address as the held reference, and a full userdata: the same value */
    void *u = lua_touserdata(L, arg);
    if (u && u == lua_touserdata(L, lua_upvalueindex(3)) && lua_type(L, arg) == LUA_TUSERDATA)
      return *(uint64_t *)u;
  }
  if (lua_type(L, arg) == LUA_TSTRING) {
    lpvm_tab t = lets_by_name(L, arg);
    if (!t) luaL_argerror(L, arg, "no such table");
    return t;
  }
  if (lua_type(L, arg) == LUA_TUSERDATA && lua_getmetatable(L, arg)) {
    int ok = lua_rawequal(L, -1, lua_upvalueindex(2));
    lua_pop(L, 1);
    if (ok) {
      lpvm_tab t = *(uint64_t *)lua_touserdata(L, arg);
      lua_pushvalue(L, arg);
      lua_replace(L, lua_upvalueindex(3));
      lua_pushinteger(L, (lua_Integer)t);
      lua_replace(L, lua_upvalueindex(4));
      return t;
    }
  }
  luaL_typeerror(L, arg, "table (reference or name)");
  return 0;
}

/* The count of arguments, and results pushed, in place when lraw.h is trusted (as
** lua_gettop, lua_pushinteger and lua_pushboolean do it: a value that is not
** collectable needs no barrier, and a C function is called with LUA_MINSTACK free
** slots). */
static inline int nargs(lua_State *L) {
  if (!lraw_ok()) return lua_gettop(L);
  const lraw_state *s = (const lraw_state *)(void *)L;
  return (int)(s->top - (s->ci->func + 1));
}

static inline void push_int(lua_State *L, lua_Integer v) {
  if (!lraw_ok()) {
    lua_pushinteger(L, v);
    return;
  }
  lraw_state *s = (lraw_state *)(void *)L;
  s->top->v.i = v, s->top->tt = LRAW_VNUMINT;
  s->top++;
}

static inline void push_bool(lua_State *L, int b) {
  if (!lraw_ok()) {
    lua_pushboolean(L, b);
    return;
  }
  lraw_state *s = (lraw_state *)(void *)L;
  s->top->v.i = 0, s->top->tt = b ? LRAW_VTRUE : LRAW_VFALSE;
  s->top++;
}

/* A scalar key (lets_scalar), an integer one written here, read in place. */
static inline size_t key_scalar(lua_State *L, int arg, uint8_t *buf, size_t cap) {
  const lraw_tvalue *a;
  size_t n;
  if (lraw_ok() && (a = lraw_arg(L, arg)) != NULL && a->tt == LRAW_VNUMINT &&
      (n = lets_int_term(buf, cap, a->v.i)) != 0)
    return n;
  return lets_scalar(L, arg, buf, cap);
}

/* An object: the Lua array {e1, ..., en} as the tuple {e1, ..., en}. */
static void put_object(lua_State *L, int idx, lpvm_tbuf *b, int arg) {
  idx = lua_absindex(L, idx);
  luaL_checktype(L, idx, LUA_TTABLE);
  lua_Unsigned n = lua_rawlen(L, idx);
  if (n > UINT32_MAX) luaL_argerror(L, arg, "object too long");
  lpvm_put_tuple(b, (uint32_t)n);
  for (lua_Unsigned i = 1; i <= n; i++) {
    lua_rawgeti(L, idx, (lua_Integer)i);
    lets_put_value(L, -1, b, arg);
    lua_pop(L, 1);
  }
}

/* An optional term argument (heir data, give_away data): NULL when nil. */
static lpvm_tbuf *opt_term(lua_State *L, int idx, int arg) {
  if (lua_isnoneornil(L, idx)) return NULL;
  lpvm_tbuf *b = in_buf(L);
  lets_put_value(L, idx, b, arg);
  return b;
}

/* A key: scalars in the caller's array (lets.c), anything else in the scratch. */
typedef struct key_term {
  const uint8_t *data;
  size_t len;
  uint8_t fast[LETS_KEYBUF];
} key_term;

static inline key_term *key_arg(lua_State *L, int arg, key_term *k) {
  if ((k->len = key_scalar(L, arg, k->fast, sizeof k->fast)) != 0) {
    k->data = k->fast;
    return k;
  }
  luaL_checkany(L, arg);
  lpvm_tbuf *b = in_buf(L);
  lets_put_value(L, arg, b, arg);
  k->data = b->data;
  k->len = b->len;
  return k;
}

/* ---- for the module's other files (lets_admin.c, lets_select.c) ------------------------ */

/* The helpers above, for the functions that are not on a hot path; each runs inside
** one of the module's C functions, whose upvalues check_tab reads. */
lpvm_tbuf *lets_out(lua_State *L) { return out_buf(L); }
lpvm_tbuf *lets_in(lua_State *L) { return in_buf(L); }
void lets_push_term(lua_State *L, lpvm_tbuf *b) { push_term(L, b); }
int lets_fail(lua_State *L, int rc, int arg) { return fail(L, rc, arg); }
lpvm_task *lets_self(lua_State *L) { return self_of(L); }
lpvm_tab lets_check_tab(lua_State *L, int arg) { return check_tab(L, arg); }
lpvm_tbuf *lets_opt_term(lua_State *L, int idx, int arg) { return opt_term(L, idx, arg); }
void lets_put_object(lua_State *L, int idx, lpvm_tbuf *b, int arg) { put_object(L, idx, b, arg); }

/* ---- deleting a table or a key ---------------------------------------------------------- */

/* delete(tab) deletes the table; delete(tab, key) the key's objects. */
static int l_delete(lua_State *L) {
  lpvm_tab tab = check_tab(L, 1);
  lpvm_task *self = self_of(L);
  int rc;
  if (lua_gettop(L) < 2) {
    rc = lpvm_ets_delete(self, tab);
  } else {
    key_term kt, *k = key_arg(L, 2, &kt);
    rc = lpvm_ets_delete_key(self, tab, k->data, k->len);
  }
  if (rc) return fail(L, rc, 2);
  lua_pushboolean(L, 1);
  return 1;
}

/* ---- objects -------------------------------------------------------------------------- */

/* Is the value at idx a table with nothing in it? */
static __attribute__((noinline, cold)) int empty_table(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TTABLE) return 0;
  lua_pushnil(L);
  if (lua_next(L, idx) == 0) return 1;
  lua_pop(L, 2);
  return 0;
}

/* The empty list of objects: true (the table's access checked all the same). */
static __attribute__((noinline, cold)) int insert_nothing(lua_State *L, lpvm_tab tab,
                                                         int only_new) {
  static const uint8_t nil[] = {131, 106};   /* VERSION, NIL_EXT */
  lpvm_task *self = self_of(L);
  int rc = only_new ? lpvm_ets_insert_new(self, tab, nil, sizeof nil)
                    : lpvm_ets_insert(self, tab, nil, sizeof nil);
  if (rc < 0) return fail(L, rc, 2);
  push_bool(L, 1);
  return 1;
}

/* insert(tab, obj, ...): one or more objects, all inserted atomically. No objects, or
** {} alone (an empty tuple has no key, so it can only be the empty list), is erl's
** insert(T, []): true, and the table is unchanged (its access is still checked). */
static int insert_common(lua_State *L, int only_new) {
  lpvm_tab tab = check_tab(L, 1);
  int n = nargs(L) - 1;
  if (n < 1) return insert_nothing(L, tab, only_new);
  uint8_t fast[LETS_OBJBUF];
  size_t len = n == 1 ? lets_object(L, 2, fast, sizeof fast) : 0;
  const uint8_t *data = fast;
  if (!len) {
    lpvm_tbuf *b = in_buf(L);
    if (n > 1) lpvm_put_list(b, (uint32_t)n);
    for (int i = 2; i <= n + 1; i++) put_object(L, i, b, i);
    if (n > 1) lpvm_put_nil(b);
    if (b->err) return fail(L, b->err, 2);
    data = b->data;
    len = b->len;
  }
  lpvm_task *self = self_of(L);
  int rc = only_new ? lpvm_ets_insert_new(self, tab, data, len)
                    : lpvm_ets_insert(self, tab, data, len);
  if (rc < 0) {
    if (rc == LPVM_ETS_EOBJECT && n == 1 && empty_table(L, 2)) return insert_nothing(L, tab, only_new);
    return fail(L, rc, 2);
  }
  push_bool(L, only_new ? rc : 1);
  return 1;
}

/* insert(tab, {k, v}) by the held reference with an array of integers, the usual
** call: read after one lraw_ok() (check_tab, nargs, lets_object and push_bool each
** ask it and read the frame again) and handed to lpvm_ets_insert_ints, which writes
** the object's bytes itself, with no term to encode here and check there (~100
** instructions an insert). Anything else: insert_common, from the start. */
#define INSERT_INTS 16
static int l_insert(lua_State *L) {
  if (lraw_ok()) {
    lraw_state *s = (lraw_state *)(void *)L;
    const lraw_tvalue *a = s->ci->func + 1, *held = lraw_upvalue(L, 3);
    int64_t v[INSERT_INTS];
    size_t n;
    if (s->top - a == 2 && a[0].tt == LRAW_VUSERDATA && held->tt == LRAW_VUSERDATA &&
        a[0].v.gc == held->v.gc && a[1].tt == LRAW_VTABLE &&
        (n = lets_int_row(a[1].v.gc, v, INSERT_INTS)) != 0) {
      lproc *p = (lproc *)s->l_G->ud;   /* lproc_check's, the layout trusted above */
      if (!p || !p->L) lproc_not_a_process(L);
      int rc = lpvm_ets_insert_ints(&p->task, (lpvm_tab)lraw_upvalue(L, 4)->v.i, v, n);
      if (rc < 0) return fail(L, rc, 2);
      s->top->v.i = 0, s->top->tt = LRAW_VTRUE;   /* as push_bool */
      s->top++;
      return 1;
    }
  }
  return insert_common(L, 0);
}
static int l_insert_new(lua_State *L) { return insert_common(L, 1); }

typedef int (*key_out_fn)(lpvm_task *, lpvm_tab, const uint8_t *, size_t, lpvm_tbuf *);

/* lookup, take: the list of objects as a Lua array. */
static int key_to_list(lua_State *L, key_out_fn fn) {
  lpvm_tab tab = check_tab(L, 1);
  key_term kt, *k = key_arg(L, 2, &kt);
  lpvm_tbuf *out = out_buf(L);
  int rc = fn(self_of(L), tab, k->data, k->len, out);
  if (rc < 0) return fail(L, rc, 2);
  push_term(L, out);
  return 1;
}

/* An integer key's object of integers (the usual {k, v}) is decoded under the lock
** into C integers and made into tables here (lpvm_ets_lookup_ints: no bytes copied out
** and parsed again); any other scalar key's objects are copied to the stack and rebuilt
** directly (lets.c); more than fit there take the general path. */
#define LOOKUP_INTS 16
static int lookup_any(lua_State *L, int ints_tried);

/* lookup(tab, k) by the held reference with an integer key, the usual call: its
** arguments, the process and the answer's tables read and made after one lraw_ok()
** (check_tab, self_of and lets_push_ints each ask it again), as l_insert. Anything
** else: lookup_any, from the start (nothing was changed); an object that is not a
** tuple of integers (ESPACE) without asking lpvm_ets_lookup_ints again. */
static int l_lookup(lua_State *L) {
  if (lraw_ok()) {
    lraw_state *s = (lraw_state *)(void *)L;
    const lraw_tvalue *a = s->ci->func + 1, *held = lraw_upvalue(L, 3);
    if (s->top - a >= 2 && a[0].tt == LRAW_VUSERDATA && held->tt == LRAW_VUSERDATA &&
        a[0].v.gc == held->v.gc && a[1].tt == LRAW_VNUMINT) {
      lproc *p = (lproc *)s->l_G->ud;   /* lproc_check's, the layout trusted above */
      if (!p || !p->L) lproc_not_a_process(L);
      int64_t v[LOOKUP_INTS];
      int rc = lpvm_ets_lookup_ints(&p->task, (lpvm_tab)lraw_upvalue(L, 4)->v.i, a[1].v.i,
                                    v, LOOKUP_INTS);
      lraw_tvalue *o;
      if (rc == 2 && (o = lraw_new_list1(L, 2)) != NULL) {   /* {{K, V}} made here */
        o[0].v.i = v[0], o[0].tt = LRAW_VNUMINT;   /* before anything can allocate */
        o[1].v.i = v[1], o[1].tt = LRAW_VNUMINT;
        return 1;
      }
      if (rc >= 0) {
        lets_push_ints_raw(L, v, rc);
        return 1;
      }
      if (rc != LPVM_ETS_ESPACE) return fail(L, rc, 2);
      return lookup_any(L, 1);
    }
  }
  return lookup_any(L, 0);
}

static __attribute__((noinline)) int lookup_any(lua_State *L, int ints_tried) {
  lpvm_tab tab = check_tab(L, 1);
  const lraw_tvalue *a;
  if (!ints_tried && lraw_ok() && (a = lraw_arg(L, 2)) != NULL && a->tt == LRAW_VNUMINT) {
    int64_t v[LOOKUP_INTS];
    int rc = lpvm_ets_lookup_ints(self_of(L), tab, a->v.i, v, LOOKUP_INTS);
    if (rc >= 0) {
      lets_push_ints(L, v, rc);
      return 1;
    }
    if (rc != LPVM_ETS_ESPACE) return fail(L, rc, 2);
  }
  uint8_t kb[LETS_KEYBUF], ob[LETS_OBJBUF];
  size_t kl = key_scalar(L, 2, kb, sizeof kb), ol;
  if (kl) {
    int rc = lpvm_ets_lookup_into(self_of(L), tab, kb, kl, ob, sizeof ob, &ol);
    if (rc >= 0) {
      lets_push_objects(L, ob, ol, rc);
      return 1;
    }
    if (rc != LPVM_ETS_ESPACE) return fail(L, rc, 2);
  }
  return key_to_list(L, lpvm_ets_lookup);
}
static int l_take(lua_State *L) { return key_to_list(L, lpvm_ets_take); }

static int l_lookup_element(lua_State *L) {
  lpvm_tab tab = check_tab(L, 1);
  lua_Integer pos = luaL_checkinteger(L, 3);
  key_term kt, *k = key_arg(L, 2, &kt);
  lpvm_tbuf *out = out_buf(L);
  if (pos < 1 || pos > UINT32_MAX) return fail(L, LPVM_ETS_EPOS, 3);
  int rc = lpvm_ets_lookup_element(self_of(L), tab, k->data, k->len, (uint32_t)pos, out);
  if (rc < 0) return fail(L, rc, rc == LPVM_ETS_EPOS ? 3 : 2);
  push_term(L, out);
  return 1;
}

static int l_member(lua_State *L) {
  lpvm_tab tab = check_tab(L, 1);
  key_term kt, *k = key_arg(L, 2, &kt);
  int rc = lpvm_ets_member(self_of(L), tab, k->data, k->len);
  if (rc < 0) return fail(L, rc, 2);
  push_bool(L, rc);
  return 1;
}

static int l_delete_object(lua_State *L) {
  lpvm_tab tab = check_tab(L, 1);
  lpvm_tbuf *b = in_buf(L);
  put_object(L, 2, b, 2);
  int rc = lpvm_ets_delete_object(self_of(L), tab, b->data, b->len);
  if (rc) return fail(L, rc, 2);
  lua_pushboolean(L, 1);
  return 1;
}

static int l_delete_all_objects(lua_State *L) {
  lpvm_tab tab = check_tab(L, 1);
  int rc = lpvm_ets_delete_all(self_of(L), tab);
  if (rc) return fail(L, rc, 1);
  lua_pushboolean(L, 1);
  return 1;
}

/* One {pos, incr [, threshold, setvalue]} at the top of the stack. */
static void incr_op(lua_State *L, int arg, lpvm_ets_incr *s) {
  lua_Integer v[4] = {0, 0, 0, 0};
  int n = (int)lua_rawlen(L, -1);
  if (n != 2 && n != 4) luaL_argerror(L, arg, "an update is {pos, incr} or {pos, incr, threshold, setvalue}");
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, -1, i + 1);
    if (!lua_isinteger(L, -1)) luaL_argerror(L, arg, "update values must be integers");
    v[i] = lua_tointeger(L, -1);
    lua_pop(L, 1);
  }
  if (v[0] < 1 || v[0] > UINT32_MAX) luaL_argerror(L, arg, "position out of range");
  *s = (lpvm_ets_incr){(uint32_t)v[0], v[1], n == 4, n == 4 ? v[2] : 0, n == 4 ? v[3] : 0};
}

/* update_counter(tab, key, incr | {pos, incr[, thr, set]} | {{...}, ...} | {} [, default]) */
static int l_update_counter(lua_State *L) {
  lpvm_tab tab = check_tab(L, 1);
  lpvm_ets_incr steps[64];
  int n = 1, many = 0;
  lpvm_tbuf *dflt = NULL;
  const lraw_tvalue *a3 = NULL, *a4 = NULL;
  int raw = lraw_ok();
  if (raw) a4 = lraw_arg(L, 4);   /* read in place */
  if (raw ? a4 && !lraw_is_nil(a4) : !lua_isnoneornil(L, 4)) {
    dflt = out_buf(L);
    put_object(L, 4, dflt, 4);
  }
  if (raw) a3 = lraw_arg(L, 3);   /* after put_object, which may have moved the stack */
  if (raw && a3 && a3->tt == LRAW_VNUMINT) {   /* pos 0: the element after the key */
    steps[0] = (lpvm_ets_incr){0, a3->v.i, 0, 0, 0};
  } else if (!raw && lua_isinteger(L, 3)) {
    steps[0] = (lpvm_ets_incr){0, lua_tointeger(L, 3), 0, 0, 0};
  } else {
    luaL_checktype(L, 3, LUA_TTABLE);
    lua_rawgeti(L, 3, 1);
    many = lua_type(L, -1) == LUA_TTABLE || empty_table(L, 3);
    lua_pop(L, 1);
    if (!many) {
      lua_pushvalue(L, 3);
      incr_op(L, 3, &steps[0]);
      lua_pop(L, 1);
    } else {
      n = (int)lua_rawlen(L, 3);
      if (n > 64) luaL_argerror(L, 3, "at most 64 updates");
      for (int i = 0; i < n; i++) {
        lua_rawgeti(L, 3, i + 1);
        luaL_argcheck(L, lua_istable(L, -1), 3, "a list of {pos, incr} updates expected");
        incr_op(L, 3, &steps[i]);
        lua_pop(L, 1);
      }
    }
  }
  key_term kt, *k = key_arg(L, 2, &kt);
  int64_t res[64];
  int rc = lpvm_ets_update_counter(self_of(L), tab, k->data, k->len, steps, n,
                                   dflt ? dflt->data : NULL, dflt ? dflt->len : 0, res);
  if (rc) return fail(L, rc, rc == LPVM_ETS_ENOKEY ? 2 : rc == LPVM_ETS_EOBJECT ? 4 : 3);
  if (!many) { push_int(L, res[0]); return 1; }
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushinteger(L, res[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* update_element(tab, key, {pos, value} | {{pos, value}, ...}) -> true | false */
static int l_update_element(lua_State *L) {
  lpvm_tab tab = check_tab(L, 1);
  luaL_checktype(L, 3, LUA_TTABLE);
  lua_rawgeti(L, 3, 1);
  int many = lua_type(L, -1) == LUA_TTABLE || empty_table(L, 3);
  lua_pop(L, 1);
  int n = many ? (int)lua_rawlen(L, 3) : 1;
  if (n > 64) luaL_argerror(L, 3, "at most 64 {pos, value} updates");
  uint32_t pos[64];
  lpvm_tbuf *vb = out_buf(L);   /* the new values as one list term */
  if (n) lpvm_put_list(vb, (uint32_t)n);   /* (none: just the empty list) */
  for (int i = 0; i < n; i++) {
    if (many) lua_rawgeti(L, 3, i + 1);
    else lua_pushvalue(L, 3);
    luaL_argcheck(L, lua_istable(L, -1) && lua_rawlen(L, -1) == 2, 3, "an update is {pos, value}");
    lua_rawgeti(L, -1, 1);
    lua_Integer p = lua_tointeger(L, -1);
    if (!lua_isinteger(L, -1) || p < 1 || p > UINT32_MAX) luaL_argerror(L, 3, "position out of range");
    pos[i] = (uint32_t)p;
    lua_rawgeti(L, -2, 2);
    lets_put_value(L, -1, vb, 3);
    lua_pop(L, 3);
  }
  lpvm_put_nil(vb);
  if (vb->err) return fail(L, vb->err, 3);
  key_term kt, *k = key_arg(L, 2, &kt);
  int rc = lpvm_ets_update_element(self_of(L), tab, k->data, k->len, pos, n, vb->data, vb->len);
  if (rc < 0) return fail(L, rc, 3);
  lua_pushboolean(L, rc);
  return 1;
}

/* ---- walking ---------------------------------------------------------------------------- */

typedef int (*walk_fn)(lpvm_task *, lpvm_tab, lpvm_tbuf *);

static int walk_end(lua_State *L, walk_fn fn) {
  lpvm_tab tab = check_tab(L, 1);
  lpvm_tbuf *out = out_buf(L);
  int rc = fn(self_of(L), tab, out);
  if (rc < 0) return fail(L, rc, 1);
  if (rc == 0) lua_pushnil(L);
  else push_term(L, out);
  return 1;
}

static int walk_step(lua_State *L, key_out_fn fn) {
  lpvm_tab tab = check_tab(L, 1);
  key_term kt, *k = key_arg(L, 2, &kt);
  lpvm_tbuf *out = out_buf(L);
  int rc = fn(self_of(L), tab, k->data, k->len, out);
  if (rc < 0) return fail(L, rc, 2);
  if (rc == 0) lua_pushnil(L);
  else push_term(L, out);
  return 1;
}

static int l_first(lua_State *L) { return walk_end(L, lpvm_ets_first); }
static int l_last(lua_State *L) { return walk_end(L, lpvm_ets_last); }
static int l_next(lua_State *L) { return walk_step(L, lpvm_ets_next); }
static int l_prev(lua_State *L) { return walk_step(L, lpvm_ets_prev); }

static int l_tab2list(lua_State *L) {
  lpvm_tab tab = check_tab(L, 1);
  lpvm_tbuf *out = out_buf(L);
  int rc = lpvm_ets_tab2list(self_of(L), tab, out);
  if (rc < 0) return fail(L, rc, 1);
  push_term(L, out);
  return 1;
}

/* foldl(fn, acc, tab), foldr: over a snapshot of the table (fn may change the table),
** first to last or last to first. The table is argument 3: its errors name #3 and the
** function (fail() would say #1). */
static int fold(lua_State *L, int backwards) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_settop(L, 3);
  lpvm_tab tab = check_tab(L, 3);
  lpvm_tbuf *out = out_buf(L);
  int rc = lpvm_ets_tab2list(self_of(L), tab, out);
  if (rc == LPVM_ENOMEM) return luaL_error(L, "not enough memory");
  if (rc < 0) return luaL_argerror(L, 3, lpvm_ets_strerror(rc));
  push_term(L, out);                       /* 4: the objects */
  lua_pushvalue(L, 2);                     /* 5: the accumulator */
  lua_Integer n = (lua_Integer)lua_rawlen(L, 4);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_pushvalue(L, 1);
    lua_rawgeti(L, 4, backwards ? n + 1 - i : i);
    lua_pushvalue(L, 5);
    lua_call(L, 2, 1);
    lua_replace(L, 5);
  }
  return 1;
}

static int l_foldl(lua_State *L) { return fold(L, 0); }
static int l_foldr(lua_State *L) { return fold(L, 1); }

/* ---- the module ------------------------------------------------------------------------- */

static const luaL_Reg ets_fns[] = {
  {"delete", l_delete},
  {"insert", l_insert}, {"insert_new", l_insert_new}, {"lookup", l_lookup},
  {"lookup_element", l_lookup_element}, {"member", l_member}, {"take", l_take},
  {"delete_object", l_delete_object}, {"delete_all_objects", l_delete_all_objects},
  {"update_counter", l_update_counter}, {"update_element", l_update_element},
  {"first", l_first}, {"last", l_last}, {"next", l_next}, {"prev", l_prev},
  {"tab2list", l_tab2list}, {"foldl", l_foldl}, {"foldr", l_foldr},
  {NULL, NULL}
};

int lmod_ets_open(lua_State *L) {
  luaL_newlibtable(L, ets_fns);
  lets_new_cache(L);
  lmod_push_ref_mt(L);          /* a table id's metatable: its id has bit 63 (lmod.c) */
  lua_newtable(L);              /* none checked yet: a value no caller can pass */
  lua_pushinteger(L, 0);        /* its table id */
  int t = lua_gettop(L) - 4;    /* the library, below its functions' four upvalues */
  const luaL_Reg *more[] = {lets_admin_fns, lets_ms_fns};
  for (int i = 0; i < 2; i++) {  /* the same four upvalues for every function */
    lua_pushvalue(L, t);
    for (int k = 1; k <= 4; k++) lua_pushvalue(L, t + k);
    luaL_setfuncs(L, more[i], 4);
    lua_pop(L, 1);
  }
  luaL_setfuncs(L, ets_fns, 4);
  return 1;
}
