/*
** test_lfun.c -- functions as terms (vm/lfun.c): a round trip between two states, and
** malformed or untrusted function terms, which must give an error, never a crash.
*/
#include <criterion/criterion.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/lproc_int.h"
#include "vm/lterm.h"

/* The term of the function `src` returns, built in its own state. */
static lpvm_tbuf encode_fn(const char *src) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  cr_assert_eq(luaL_dostring(L, src), LUA_OK, "%s", lua_tostring(L, -1));
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  char err[LTERM_ERRSZ];
  cr_assert_eq(lterm_put(L, -1, &b, err), 0, "%s", err);
  lua_close(L);
  return b;
}

static int decode_cf(lua_State *L) {
  const uint8_t *t = lua_touserdata(L, 1);
  size_t len = (size_t)lua_tointeger(L, 2);
  int trusted = lua_toboolean(L, 3);
  lua_settop(L, 0);
  return lterm_push_values_ex(L, t, len, trusted);
}

/* Decode in a fresh state: LUA_OK with the value left on top of *out's stack. */
static int decode(lua_State *L, const uint8_t *t, size_t len, int trusted) {
  lua_pushcfunction(L, decode_cf);
  lua_pushlightuserdata(L, (void *)t);
  lua_pushinteger(L, (lua_Integer)len);
  lua_pushboolean(L, trusted);
  return lua_pcall(L, 3, 1, 0);
}

Test(lfun, round_trip_between_states) {
  lpvm_tbuf b = encode_fn(
      "local k = 3 local function f(n) if n == 0 then return k end return f(n - 1) + 1 end "
      "return f");
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  cr_assert_eq(decode(L, b.data, b.len, 1), LUA_OK, "%s", lua_tostring(L, -1));
  cr_assert_eq(lua_type(L, -1), LUA_TFUNCTION);
  lua_pushinteger(L, 4);
  cr_assert_eq(lua_pcall(L, 1, 1, 0), LUA_OK);
  cr_assert_eq(lua_tointeger(L, -1), 7);
  lua_settop(L, 0);
  /* untrusted: plain data, no bytecode loaded */
  cr_assert_eq(decode(L, b.data, b.len, 0), LUA_OK);
  cr_assert_neq(lua_type(L, -1), LUA_TFUNCTION);
  lua_close(L);
  lpvm_tbuf_free(&b);
}

/* {lpvm_graph, {lpvm_fun, Code, Ups}} with Ups written by `ups`. */
static lpvm_tbuf fun_term(const void *code, size_t len, void (*ups)(lpvm_tbuf *)) {
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 2);
  lpvm_put_atom(&b, "lpvm_graph");
  lpvm_put_tuple(&b, 3);
  lpvm_put_atom(&b, "lpvm_fun");
  lpvm_put_binary(&b, code, len);
  ups(&b);
  return b;
}

static void ups_none(lpvm_tbuf *b) { lpvm_put_nil(b); }
static void ups_two(lpvm_tbuf *b) {
  lpvm_put_list(b, 2);
  lpvm_put_int(b, 1);
  lpvm_put_int(b, 2);
  lpvm_put_nil(b);
}
static void ups_ref_far(lpvm_tbuf *b) {
  lpvm_put_list(b, 1);
  lpvm_put_tuple(b, 2);
  lpvm_put_atom(b, "lpvm_ref");
  lpvm_put_int(b, 9);
  lpvm_put_nil(b);
}
static void ups_ref_zero(lpvm_tbuf *b) {
  lpvm_put_list(b, 1);
  lpvm_put_tuple(b, 2);
  lpvm_put_atom(b, "lpvm_ref");
  lpvm_put_int(b, 0);
  lpvm_put_nil(b);
}
static void ups_upval_bad(lpvm_tbuf *b) {
  lpvm_put_list(b, 1);
  lpvm_put_tuple(b, 3);
  lpvm_put_atom(b, "lpvm_upval");
  lpvm_put_int(b, 1);
  lpvm_put_int(b, 200);   /* the function has one upvalue */
  lpvm_put_nil(b);
}

/* The bytecode of a function with one upvalue. */
static char *one_up_code(size_t *len) {
  lpvm_tbuf b = encode_fn("local x = 1 return function() return x end");
  lpvm_tread r;
  uint32_t n;
  const char *a;
  size_t al;
  const uint8_t *code;
  cr_assert_eq(lpvm_tread_init(&r, b.data, b.len), 0);
  cr_assert(lpvm_get_tuple(&r, &n) == 0 && lpvm_get_atom(&r, &a, &al) == 0);
  cr_assert(lpvm_get_tuple(&r, &n) == 0 && lpvm_get_atom(&r, &a, &al) == 0);
  cr_assert_eq(lpvm_get_binary(&r, &code, len), 0);
  char *c = malloc(*len);
  memcpy(c, code, *len);
  lpvm_tbuf_free(&b);
  return c;
}

Test(lfun, malformed_terms_are_errors) {
  size_t len;
  char *code = one_up_code(&len);
  struct {
    const void *code;
    size_t len;
    void (*ups)(lpvm_tbuf *);
  } bad[] = {
      {code, len, ups_none},          /* one upvalue expected */
      {code, len, ups_two},           /* too many */
      {code, len, ups_ref_far},       /* a reference to nothing yet */
      {code, len, ups_ref_zero},
      {code, len, ups_upval_bad},     /* upvalue index out of range */
      {"\x1bLuaQ", 5, ups_none},      /* another Lua version */
      {"return 1", 8, ups_none},      /* source, not bytecode */
      {code, len / 2, ups_none},      /* truncated */
      {code, 3, ups_none},
  };
  lua_State *L = luaL_newstate();
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    lpvm_tbuf b = fun_term(bad[i].code, bad[i].len, bad[i].ups);
    cr_assert_neq(decode(L, b.data, b.len, 1), LUA_OK, "case %zu decoded", i);
    lua_settop(L, 0);
    lpvm_tbuf_free(&b);
  }
  lua_close(L);
  free(code);
}

/* Random damage to the term structure after the bytecode (trusted) and anywhere
** (untrusted): an error or a value, never a crash. */
Test(lfun, damaged_terms_do_not_crash) {
  lpvm_tbuf b = encode_fn(
      "local t = {1, 2, {x = 'y'}} t.me = t local s = {t, t} "
      "return function() return t, s, print end");
  lpvm_tread r;
  uint32_t n;
  const char *a;
  size_t al, len;
  const uint8_t *code;
  cr_assert_eq(lpvm_tread_init(&r, b.data, b.len), 0);
  cr_assert(lpvm_get_tuple(&r, &n) == 0 && lpvm_get_atom(&r, &a, &al) == 0);
  cr_assert(lpvm_get_tuple(&r, &n) == 0 && lpvm_get_atom(&r, &a, &al) == 0);
  cr_assert_eq(lpvm_get_binary(&r, &code, &len), 0);
  size_t tail = (size_t)(r.p - b.data);   /* the upvalues start here: no bytecode after */
  uint8_t *copy = malloc(b.len);
  srand(7);
  lua_State *L = luaL_newstate();
  int ok = 0;
  for (int round = 0; round < 4000; round++) {
    memcpy(copy, b.data, b.len);
    int trusted = round % 2;
    for (int k = 0; k < 1 + round % 3; k++) {
      size_t at = trusted ? tail + (size_t)rand() % (b.len - tail) : (size_t)rand() % b.len;
      copy[at] = (uint8_t)rand();
    }
    ok += decode(L, copy, b.len, trusted) == LUA_OK;
    lua_settop(L, 0);
  }
  cr_assert(ok > 0 && ok < 4000, "some damage is harmless, some is refused (%d ok)", ok);
  lua_close(L);
  free(copy);
  lpvm_tbuf_free(&b);
}

/* spawn's fast path (lfun_put_spawn) builds what lterm_put builds, or declines. */
Test(lfun, spawn_fast_path_is_lterm_put) {
  static const struct { const char *src; int fast; } cases[] = {
      {"return function() end", 1},
      {"return function(p) return print(p) end", 1},      /* _ENV only: '$env' */
      {"local g = _G return function() return g end", 1},  /* the globals by name */
      {"local x = 1 return function() return x end", 0},
      {"local t = {} return function() return t, print end", 0},
      {"return print", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    cr_assert_eq(luaL_dostring(L, cases[i].src), LUA_OK, "%s", lua_tostring(L, -1));
    lpvm_tbuf a, b;
    lpvm_tbuf_init(&a);
    lpvm_tbuf_init(&b);
    char err[LTERM_ERRSZ];
    int top = lua_gettop(L);
    size_t empty = a.len;   /* the version byte */
    uint64_t id = 0;
    int fast = lfun_put_spawn(L, -1, &a, &id);
    cr_assert_eq(id != 0, fast, "%s: a number with the bytes", cases[i].src);
    cr_assert_eq(lua_gettop(L), top, "%s: stack", cases[i].src);
    cr_assert_eq(fast, cases[i].fast, "%s", cases[i].src);
    if (fast) {
      cr_assert_eq(lterm_put(L, -1, &b, err), 0, "%s", err);
      cr_assert_eq(a.len, b.len, "%s: length", cases[i].src);
      cr_assert(memcmp(a.data, b.data, a.len) == 0, "%s: bytes", cases[i].src);
    } else {
      cr_assert_eq(a.len, empty, "%s: left alone", cases[i].src);
    }
    lpvm_tbuf_free(&a);
    lpvm_tbuf_free(&b);
    lua_close(L);
  }
}

/* Its decoding side (lfun_push_spawn) takes exactly those terms, each as the general
** decoder would, declines every other, and raises on a damaged one. */
static int push_spawn_cf(lua_State *L) {
  size_t len;
  const char *t = lua_tolstring(L, 1, &len);
  int fast = lfun_push_spawn(L, (const uint8_t *)t, len);
  if (!fast) lua_pushnil(L);
  lua_pushboolean(L, fast);
  lua_insert(L, -2);
  return 2;   /* fast, the function or nil */
}

static int dump_writer(lua_State *L, const void *p, size_t sz, void *ud) {
  (void)L;
  lpvm_tbuf *b = ud;
  b->data = realloc(b->data, b->len + sz);
  memcpy(b->data + b->len, p, sz);
  b->len += sz;
  return 0;
}

Test(lfun, spawn_fast_decode) {
  static const struct { const char *src; int fast; } cases[] = {
      {"return function() return 7 end", 1},
      {"return function(p) return type(p) end", 1},
      {"local g = _G return function() return g end", 1},
      {"local x = 7 return function() return x end", 0},
      {"local t = {} return function() return t, print end", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    cr_assert_eq(luaL_dostring(L, cases[i].src), LUA_OK, "%s", lua_tostring(L, -1));
    lpvm_tbuf b;
    lpvm_tbuf_init(&b);
    char err[LTERM_ERRSZ];
    cr_assert_eq(lterm_put(L, -1, &b, err), 0, "%s", err);
    lua_pushcfunction(L, push_spawn_cf);
    lua_pushlstring(L, (const char *)b.data, b.len);
    cr_assert_eq(lua_pcall(L, 1, 2, 0), LUA_OK, "%s: %s", cases[i].src, lua_tostring(L, -1));
    cr_assert_eq(lua_toboolean(L, -2), cases[i].fast, "%s", cases[i].src);
    if (cases[i].fast) {
      cr_assert(lua_type(L, -1) == LUA_TFUNCTION, "%s: a function", cases[i].src);
      lua_pushvalue(L, -1);
      cr_assert_eq(lua_pcall(L, 0, 1, 0), LUA_OK, "%s: %s", cases[i].src, lua_tostring(L, -1));
      lua_pushvalue(L, -4);   /* the original: the same result */
      cr_assert_eq(lua_pcall(L, 0, 1, 0), LUA_OK, "%s: %s", cases[i].src, lua_tostring(L, -1));
      cr_assert(lua_rawequal(L, -1, -2) || (lua_isnil(L, -1) && lua_isnil(L, -2)),
                "%s: same result", cases[i].src);
    } else {
      cr_assert(lua_isnil(L, -1), "%s: nothing pushed", cases[i].src);
    }
    lpvm_tbuf_free(&b);
    lua_close(L);
  }
  /* A function of one upvalue with an empty upvalue list: the term's shape is the fast
  ** one, its count is not. */
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  cr_assert_eq(luaL_dostring(L, "return function() return print end"), LUA_OK);
  lpvm_tbuf code = {NULL, 0, 0, 0}, t;
  cr_assert_eq(lua_dump(L, dump_writer, &code, 0), 0);
  lpvm_tbuf_init(&t);
  lpvm_put_tuple(&t, 2);
  lpvm_put_atom(&t, "lpvm_graph");
  lpvm_put_tuple(&t, 3);
  lpvm_put_atom(&t, "lpvm_fun");
  lpvm_put_binary(&t, code.data, code.len);
  lpvm_put_list(&t, 0);
  lpvm_put_nil(&t);
  lua_pushcfunction(L, push_spawn_cf);
  lua_pushlstring(L, (const char *)t.data, t.len);
  cr_assert_neq(lua_pcall(L, 1, 2, 0), LUA_OK, "a damaged term raises");
  free(code.data);
  lpvm_tbuf_free(&t);
  lua_close(L);
}

/* The spawning state's cache of the last spawned prototype's dump (lfun.c spawn_cache):
** functions spawned in turn, closures of one prototype, and a prototype made after the
** cached one's closures were dropped each get their own bytes and number. */
static void spawn_bytes(lua_State *L, const char *expr, lpvm_tbuf *a, uint64_t *id) {
  cr_assert_eq(luaL_dostring(L, expr), LUA_OK, "%s", lua_tostring(L, -1));
  lpvm_tbuf_init(a);
  cr_assert_eq(lfun_put_spawn(L, -1, a, id), 1, "%s: fast", expr);
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  char err[LTERM_ERRSZ];
  cr_assert_eq(lterm_put(L, -1, &b, err), 0, "%s", err);
  cr_assert(a->len == b.len && memcmp(a->data, b.data, a->len) == 0, "%s: bytes", expr);
  lpvm_tbuf_free(&b);
  lua_pop(L, 1);
}

Test(lfun, spawn_cache) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  cr_assert_eq(luaL_dostring(L, "function mk() return function() return 1 end end "
                                "f = mk() g = function() return 2, 2 end"), LUA_OK);
  lpvm_tbuf f1, g1, f2, f3, h;
  uint64_t idf1, idg1, idf2, idf3, idh;
  spawn_bytes(L, "return f", &f1, &idf1);
  spawn_bytes(L, "return g", &g1, &idg1);
  spawn_bytes(L, "return f", &f2, &idf2);
  spawn_bytes(L, "return mk()", &f3, &idf3);   /* another closure, the same prototype */
  cr_assert_neq(idf1, idg1, "two functions, two numbers");
  cr_assert(idf1 == idf2 && idf2 == idf3, "one prototype, one number");
  /* every closure of both dropped, then many new prototypes: one may take the address */
  cr_assert_eq(luaL_dostring(L, "f, g, mk = nil collectgarbage() collectgarbage() "
                                "fs = {} for i = 1, 200 do "
                                "fs[i] = load('return function() return ' .. i .. ' end')() end"),
               LUA_OK);
  for (int i = 1; i <= 200; i += 37) {
    char expr[64];
    snprintf(expr, sizeof expr, "return fs[%d]", i);
    spawn_bytes(L, expr, &h, &idh);
    cr_assert(idh != idf1 && idh != idg1, "%s: a number of its own", expr);
    lpvm_tbuf_free(&h);
  }
  lpvm_tbuf_free(&f1);
  lpvm_tbuf_free(&g1);
  lpvm_tbuf_free(&f2);
  lpvm_tbuf_free(&f3);
  lua_close(L);
}
