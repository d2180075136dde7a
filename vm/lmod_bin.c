/*
** lmod_bin.c -- lpvm.binary(s): an immutable byte string shared between processes
** (docs/binaries.md). The value is a small userdata holding one reference to a
** lpvm_bin (lpvm/binary.h) and the range of it that it shows: sending it passes the
** reference, not the bytes; b:sub(i, j) is a sub-binary over the same buffer, as in
** BEAM (it keeps the whole buffer alive: tostring(b:sub(i, j)) copies the part out).
**
** It behaves like a read-only string where Lua lets a userdata: #b, b:len(),
** b:sub, b:byte, tostring(b), b == c and b < c between binaries (by bytes), b .. s
** and s .. b (strings), and the other string methods (b:find(...), b:upper(), ...)
** run on a copy made by tostring. Lua compares a userdata with a string as unequal
** without asking: b == "abc" is false; tostring(b) == "abc" is the test.
**
** The Lua collector does not see the bytes a userdata of 24 bytes holds elsewhere:
** each binary that enters a state (made or received) is reported to it as that many
** bytes allocated (LUA_GCSTEP, in 16 MiB installments: gc_charge), so a process that
** receives and drops large binaries collects them at about the pace it would collect
** strings of their size (BEAM counts them in the process's binary heap likewise).
*/
#include <lauxlib.h>
#include <limits.h>
#include <string.h>

#include "lpvm/binary.h"
#include "vm/lproc_int.h"
#include "vm/lraw.h"

typedef struct lbin {
  lpvm_bin *bin;   /* NULL only while it is being made */
  uint32_t off, len;
} lbin;

static const char bin_mt_key = 'b';

static const char *lbin_data(const lbin *b) {
  return (const char *)lpvm_bin_data(b->bin) + b->off;
}

/* The metatable's array part: [MT_MARK] is &bin_mt_key (a light userdata no Lua code
** can make: the test costs an array read, not a registry lookup per message), and
** [MT_INTERN] the state's interned binaries (push_whole). */
enum { MT_MARK = 1, MT_INTERN = 2 };

/* The binary at stack index idx > 0 read in place (vm/lraw.h): its userdata's
** metatable's mark, ~15 instructions where the C API's calls took ~190 of a 100 KB
** binary's message (docs/perf/bin.md). NULL: not a binary. */
static lbin *raw_bin(lua_State *L, int idx) {
  const lraw_state *s = (const lraw_state *)(void *)L;
  const lraw_tvalue *v = s->ci->func + idx;
  if (v >= s->top || v->tt != LRAW_VUSERDATA) return NULL;
  const lraw_udata0 *u = v->v.gc;
  const lraw_table *mt = u->metatable;
  if (u->nuvalue != 0 || !mt || lraw_real_asize(mt) < MT_MARK) return NULL;
  const lraw_tvalue *mark = &mt->array[MT_MARK - 1];
  if (mark->tt != LRAW_VLIGHTUD || mark->v.p != (void *)&bin_mt_key) return NULL;
  return lraw_udata_block(u);
}

lpvm_bin *lbin_to(lua_State *L, int idx, size_t *off, size_t *len) {
  if (idx > 0 && lraw_ok()) {
    lbin *b = raw_bin(L, idx);
    if (!b || !b->bin) return NULL;
    *off = b->off;
    *len = b->len;
    return b->bin;
  }
  if (lua_type(L, idx) != LUA_TUSERDATA || !lua_getmetatable(L, idx)) return NULL;
  int same = lua_rawgeti(L, -1, MT_MARK) == LUA_TLIGHTUSERDATA &&
             lua_touserdata(L, -1) == (void *)&bin_mt_key;
  lua_pop(L, 2);
  if (!same) return NULL;
  lbin *b = lua_touserdata(L, idx);
  if (!b->bin) return NULL;
  *off = b->off;
  *len = b->len;
  return b->bin;
}

const char *lbin_bytes(lua_State *L, int idx, size_t *len) {
  size_t off;
  lpvm_bin *bin = lbin_to(L, idx, &off, len);
  return bin ? (const char *)lpvm_bin_data(bin) + off : NULL;
}

static lbin *check_bin(lua_State *L, int arg) {
  size_t off, len;
  if (!lbin_to(L, arg, &off, &len)) luaL_typeerror(L, arg, "binary");
  return lua_touserdata(L, arg);
}

/* The bytes of a string, number or binary at idx (NULL if none of those). */
static const char *any_bytes(lua_State *L, int idx, size_t *len) {
  const char *p = lbin_bytes(L, idx, len);
  if (p) return p;
  return lua_type(L, idx) == LUA_TSTRING || lua_type(L, idx) == LUA_TNUMBER
             ? lua_tolstring(L, idx, len) : NULL;
}

static void push_metatable(lua_State *L);

/* Tell the collector about len bytes held outside its heap. The debt is kept in the
** thread's extra space (LUA_EXTRASPACE, unused otherwise) and paid in one step per
** GC_CHARGE bytes: a step per 100 KB message ran a whole cycle of a small heap
** each time (twice the cost of the message). */
#define GC_CHARGE ((size_t)16 << 20)
_Static_assert(LUA_EXTRASPACE >= sizeof(size_t), "the GC debt lives in the extra space");

static void gc_charge(lua_State *L, size_t len) {
  size_t *debt = lua_getextraspace(L);
  *debt += len;
  if (*debt < GC_CHARGE) return;
  size_t kb = *debt >> 10;
  *debt = 0;
  /* In generational mode a step is a minor collection, which frees young binaries
  ** only, and a major one waits for Lua's own bytes to grow (the debt does not count
  ** there): a binary held across two installments, then dropped, would stay until the
  ** Lua heap doubled. So a full collection, as the incremental step finishes its cycle
  ** with such a debt (tests/lua/test_gc_modes.lua "dropped binaries"). */
  if (!lraw_ok() || lraw_gc_generational(L))
    lua_gc(L, LUA_GCCOLLECT);
  else
    lua_gc(L, LUA_GCSTEP, (int)(kb > INT_MAX ? INT_MAX : kb));
}

/* A new binary value, with the metatable at the top of the stack (left there). */
static void push_new(lua_State *L, lpvm_bin *bin, size_t off, size_t len) {
  lbin *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->bin = NULL;   /* no reference yet: a failed allocation leaks nothing */
  lua_pushvalue(L, -2);
  lua_setmetatable(L, -2);
  lpvm_bin_keep(bin);
  b->bin = bin, b->off = (uint32_t)off, b->len = (uint32_t)len;
  gc_charge(L, len);
}

void lbin_push(lua_State *L, lpvm_bin *bin, size_t off, size_t len) {
  push_metatable(L);
  push_new(L, bin, off, len);
  lua_remove(L, -2);
}

/* A binary that arrives in a message. A whole one is interned per state by its
** buffer (a weak table, as lterm.c's foreign references): the same buffer received
** again is the same value, so a process that receives one binary many times makes
** no new userdata, no finalizer call, no collector charge (those were most of a
** message's cost). The table's value holds its own reference, so the buffer cannot
** be freed and its address reused while the entry exists. */
/* The interned value of buffer bin found in place (vm/lraw.h) and pushed, as
** lua_rawgetp pushes a value it finds (no barrier: a stack is traversed again at the
** end of every cycle, and a weak table holds no dead value past that), in the slot
** the C API's push would take: 1, or 0 if not found so (the C API's way then). The
** registry's and the intern table's lookups through the C API were ~300 of a 100 KB
** binary's ~1,730 instructions a message (docs/perf/bin.md). */
static int raw_interned(lua_State *L, lpvm_bin *bin) {
  const lraw_global *g = lraw_g(L);
  if (g->l_registry.tt != LRAW_VTABLE) return 0;
  const lraw_tvalue *v = lraw_get_lightud(g->l_registry.v.gc, &bin_mt_key);
  if (!v || v->tt != LRAW_VTABLE) return 0;
  const lraw_table *mt = v->v.gc;
  if (lraw_real_asize(mt) < MT_INTERN || mt->array[MT_INTERN - 1].tt != LRAW_VTABLE) return 0;
  v = lraw_get_lightud(mt->array[MT_INTERN - 1].v.gc, bin);
  if (!v || v->tt != LRAW_VUSERDATA) return 0;
  lraw_state *st = (lraw_state *)(void *)L;
  *st->top = *v;
  st->top++;
  return 1;
}

/* Push the whole binary of buffer bin: the interned value, or a new one (interned). */
static void push_whole(lua_State *L, lpvm_bin *bin) {
  if (lraw_ok() && raw_interned(L, bin)) return;
  push_metatable(L);                                       /* mt */
  lua_rawgeti(L, -1, MT_INTERN);                           /* mt T */
  if (lua_rawgetp(L, -1, bin) == LUA_TUSERDATA) {          /* mt T b */
    lua_replace(L, -3);
    lua_pop(L, 1);
    return;
  }
  lua_pop(L, 1);
  lua_insert(L, -2);                                       /* T mt */
  push_new(L, bin, 0, lpvm_bin_len(bin));                  /* T mt b */
  lua_pushvalue(L, -1);
  lua_rawsetp(L, -4, bin);
  lua_replace(L, -3);                                      /* b mt */
  lua_pop(L, 1);
}

void lbin_push_received(lua_State *L, lpvm_bin *bin, size_t off, size_t len) {
  if (off == 0 && len == lpvm_bin_len(bin)) push_whole(L, bin);
  else lbin_push(L, bin, off, len);
}

/* ---- the methods ------------------------------------------------------------------------ */

static int bin_gc(lua_State *L) {
  lbin *b = lua_touserdata(L, 1);
  lpvm_bin_drop(b->bin);
  b->bin = NULL;
  return 0;
}

static int bin_len(lua_State *L) {
  lua_pushinteger(L, check_bin(L, 1)->len);
  return 1;
}

static int bin_tostring(lua_State *L) {
  lbin *b = check_bin(L, 1);
  lua_pushlstring(L, lbin_data(b), b->len);
  return 1;
}

/* string.sub's and string.byte's index rules: negative from the end, clamped. */
static size_t pos_start(lua_Integer i, size_t len) {
  if (i > 0) return (size_t)i;
  if (i == 0 || (i < 0 && (size_t)-(i + 1) >= len)) return 1;   /* -(i+1) avoids overflow */
  return len - (size_t)-(i + 1);
}

static size_t pos_end(lua_Integer j, size_t len) {
  if (j > (lua_Integer)len) return len;
  if (j >= 0) return (size_t)j;
  if ((size_t)-(j + 1) >= len) return 0;
  return len - (size_t)-(j + 1);
}

/* b:sub(i [, j]) -> binary over the same buffer (string.sub's indexes) */
static int bin_sub(lua_State *L) {
  lbin *b = check_bin(L, 1);
  size_t i = pos_start(luaL_checkinteger(L, 2), b->len);
  size_t j = pos_end(luaL_optinteger(L, 3, -1), b->len);
  if (i > j) i = 1, j = 0;
  lbin_push(L, b->bin, b->off + i - 1, j - i + 1);
  return 1;
}

/* b:byte([i [, j]]) -> the bytes' codes, as string.byte */
static int bin_byte(lua_State *L) {
  lbin *b = check_bin(L, 1);
  lua_Integer pi = luaL_optinteger(L, 2, 1);
  size_t i = pos_start(pi, b->len), j = pos_end(luaL_optinteger(L, 3, pi), b->len);
  if (i > j) return 0;
  if (j - i >= (size_t)INT_MAX) return luaL_error(L, "string slice too long");
  int n = (int)(j - i) + 1;
  luaL_checkstack(L, n, "string slice too long");
  const unsigned char *p = (const unsigned char *)lbin_data(b);
  for (int k = 0; k < n; k++) lua_pushinteger(L, p[i - 1 + (size_t)k]);
  return n;
}

/* Both binaries: their bytes compared as strings are (memcmp, then length). */
static int bin_cmp(lua_State *L) {
  lbin *a = check_bin(L, 1), *b = check_bin(L, 2);
  size_t n = a->len < b->len ? a->len : b->len;
  int c = n ? memcmp(lbin_data(a), lbin_data(b), n) : 0;
  return c ? c : (a->len > b->len) - (a->len < b->len);
}

static int bin_eq(lua_State *L) {
  size_t off, len;
  int both = lbin_to(L, 1, &off, &len) && lbin_to(L, 2, &off, &len);
  lua_pushboolean(L, both && bin_cmp(L) == 0);
  return 1;
}

static int bin_lt(lua_State *L) {
  lua_pushboolean(L, bin_cmp(L) < 0);
  return 1;
}

static int bin_le(lua_State *L) {
  lua_pushboolean(L, bin_cmp(L) <= 0);
  return 1;
}

/* b .. x, x .. b: a string, whatever else x is (string, number, binary). */
static int bin_concat(lua_State *L) {
  size_t la, lb;
  const char *a = any_bytes(L, 1, &la), *b = any_bytes(L, 2, &lb);
  if (!a || !b)
    return luaL_error(L, "attempt to concatenate a %s value", luaL_typename(L, a ? 2 : 1));
  luaL_Buffer buf;
  char *p = luaL_buffinitsize(L, &buf, la + lb);
  memcpy(p, a, la);
  memcpy(p + la, b, lb);
  luaL_pushresultsize(&buf, la + lb);
  return 1;
}

/* A string method on a binary: the same call with tostring(b) in its place. */
static int bin_strmethod(lua_State *L) {
  lbin *b = check_bin(L, 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushlstring(L, lbin_data(b), b->len);
  lua_replace(L, 1);
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

/* b.name: a method; another string method is looked up as ("").name would (the
** string library may not be open yet in this process: llibs.c), wrapped once. */
static int bin_index(lua_State *L) {
  lua_settop(L, 2);
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL || lua_type(L, 2) != LUA_TSTRING)
    return 1;
  lua_pop(L, 1);
  lua_pushliteral(L, "");
  lua_pushvalue(L, 2);
  if (lua_gettable(L, -2) != LUA_TFUNCTION) return 0;
  lua_pushcclosure(L, bin_strmethod, 1);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, -2);
  lua_rawset(L, lua_upvalueindex(1));
  return 1;
}

static void push_metatable(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &bin_mt_key) == LUA_TTABLE) return;
  lua_pop(L, 1);
  static const luaL_Reg meta[] = {
      {"__gc", bin_gc}, {"__len", bin_len}, {"__tostring", bin_tostring},
      {"__eq", bin_eq}, {"__lt", bin_lt}, {"__le", bin_le}, {"__concat", bin_concat},
      {NULL, NULL}};
  static const luaL_Reg methods[] = {
      {"len", bin_len}, {"sub", bin_sub}, {"byte", bin_byte}, {"tostring", bin_tostring},
      {NULL, NULL}};
  lua_createtable(L, 2, 10);
  luaL_setfuncs(L, meta, 0);
  lua_pushliteral(L, "binary");
  lua_setfield(L, -2, "__name");
  lua_pushliteral(L, "binary");
  lua_setfield(L, -2, "__metatable");   /* getmetatable(b) == "binary": no tampering */
  lua_newtable(L);                      /* the methods: __index's upvalue */
  luaL_setfuncs(L, methods, 0);
  lua_pushcclosure(L, bin_index, 1);
  lua_setfield(L, -2, "__index");
  lua_pushlightuserdata(L, (void *)&bin_mt_key);
  lua_rawseti(L, -2, MT_MARK);
  lua_newtable(L);                      /* weak values: a binary nobody holds goes */
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "v");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_rawseti(L, -2, MT_INTERN);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &bin_mt_key);
}

/* ---- the lpvm functions ------------------------------------------------------------------- */

/* binary(s) -> a binary holding a copy of string s (a binary: itself) */
static int lmod_binary(lua_State *L) {
  size_t off, len;
  if (lbin_to(L, 1, &off, &len)) {
    lua_settop(L, 1);
    return 1;
  }
  if (lua_type(L, 1) != LUA_TSTRING) return luaL_typeerror(L, 1, "string");
  const char *s = lua_tolstring(L, 1, &len);
  if (len > LPVM_BIN_MAX) return luaL_argerror(L, 1, "string too long for a binary (4 GiB)");
  push_metatable(L);                                /* mt */
  lbin *b = lua_newuserdatauv(L, sizeof *b, 0);     /* mt b: made first, so that no */
  b->bin = NULL;                                    /* error can leak the buffer */
  lua_pushvalue(L, -2);
  lua_setmetatable(L, -2);
  lpvm_bin *bin = lpvm_bin_new(s, len);
  if (!bin) return luaL_error(L, "binary: not enough memory");
  b->bin = bin, b->off = 0, b->len = (uint32_t)len;   /* it owns the first reference */
  lua_rawgeti(L, -2, MT_INTERN);                    /* mt b T */
  lua_pushvalue(L, -2);
  lua_rawsetp(L, -2, bin);
  lua_pop(L, 1);
  gc_charge(L, len);
  return 1;
}

static int lmod_is_binary(lua_State *L) {
  size_t off, len;
  lua_pushboolean(L, lbin_to(L, 1, &off, &len) != NULL);
  return 1;
}

/* binary_stats() -> count, bytes: the binaries alive in this VM (every process's). */
static int lmod_binary_stats(lua_State *L) {
  size_t count, bytes;
  lpvm_bin_stats(&count, &bytes);
  lua_pushinteger(L, (lua_Integer)count);
  lua_pushinteger(L, (lua_Integer)bytes);
  return 2;
}

const lmod_fn lmod_bin_fns[] = {
    {"binary", lmod_binary},
    {"is_binary", lmod_is_binary},
    {"binary_stats", lmod_binary_stats},
    {NULL, NULL}};
