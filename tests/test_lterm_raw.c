/*
** test_lterm_raw.c -- the term codec's direct reads and writes of Lua tables
** (vm/lterm_raw.c, lterm_plain.c, through vm/lraw.h): the encoder and the
** local-message reader give the same terms and values with it as through the C API,
** for tables whose array and hash parts are in every state a program can leave them
** (holes, a length search's lowered limit, emptied hash nodes, keys in the hash part).
*/
#include <criterion/criterion.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>

#include "vm/lterm.h"
#include "vm/lproc_int.h"
#include "vm/lterm_int.h"
#include "vm/lraw.h"

static const char *const cases[] = {
  "return {}",
  "return {1, 2, 3}",
  "return {1, nil, 3}",
  "return {nil, 2}",
  "return {1, 2, nil}",
  "local t = {1, 2, 3, 4, 5, 6, 7, 8} t[8] = nil t[7] = nil return t",
  /* a length search lowers the array's limit to 5 of 8; slot 8 set again after */
  "local t = {1, 2, 3, 4, 5, 6, 7, 8} t[6], t[7], t[8] = nil local _ = #t return t",
  "local t = {1, 2, 3, 4, 5, 6, 7, 8} t[6], t[7], t[8] = nil local _ = #t t[8] = 8 "
  "return t",
  "local t = {1, 2, 3, 4, 5, 6, 7, 8} t[6], t[7], t[8] = nil local _ = #t t[6] = 6 "
  "return t",
  "local t = {} for i = 1, 5 do t[#t + 1] = i end return t",
  "local t = {} t[1] = 1 t[2] = 2 t[3] = 3 t[4] = 4 t[5] = 5 t[8] = 8 return t",
  "local t = {} for i = 1, 100 do t[i] = i * i end return t",
  "local t = {} for i = 1, 100 do t[i] = i end for i = 1, 100 do t[i] = nil end return t",
  "local t = {} for i = 100, 1, -1 do t[i] = i end return t",
  "return {[1] = 1, [2] = 2, [3] = 3}",
  "return table.pack(1, 2, 3)",
  "local t = {x = 1} t.x = nil t[1] = 'a' return t",
  "local t = {1, 2} t.x = 1 t.x = nil return t",
  "local t = {1, 2} t.x = 1 return t",
  "return {1, 2.5, true, false, 'short', string.rep('long', 20), {1, {2, {}}}, -7, "
  "1 << 40, -(1 << 40), 300, -300, math.huge, 1e300, 0.0, -0.0}",
  "return {{}, {{}}, {{{}}}, {a = {1}}, {{x = 1}}}",
  /* short strings met again (the reader's cache), one-byte ones, a long one, and
  ** ones of one length in one slot of the cache ('aa' 'Aa', 'abc' 'axc') */
  "local s = {} for i = 1, 60 do s[i] = {'a', 'v', 'a', string.rep('x', i), {'a', 'v', "
  "''}, 'y', 'u', string.rep('x', i % 45), 'tr', 'ue', 'true', true, 'aa', 'Aa', 'abc', "
  "'axc', {'Aa', 'axc', 'aa'}} end return s",
  "return setmetatable({1, 2}, {__index = function() return 9 end, __len = function() "
  "return 5 end})",
  "return {print}",
  "local f = function() return 1 end return {f, {f}}",
  "local t = {} t[1] = t return t",
  "local t = {1, {2}} t[2][2] = t return t",
  "return {io.stdout}",
  /* nested lists walked off the stack, and what sends one back to the C API */
  "local t = {1, {2, {3, {4}}}} t[2][2][2][2] = t return t",
  "local t = {1, {2, {3, {4}}}} t[2][2][2][2] = t[2] return t",
  "return {1, {2, {3, {io.stdout}}}, {5, {6}}}",
  "return {1, {2, {3, {print}}}, {5, {6}}}",
  "return {1, {2, {3, {x = 1}}}, {5, {6}}}",
  "local x = {1, {2}} return {x, {x, {x}}}",
  "local t = {} for i = 1, 195 do t = {i, t} end return t",
  "local t = {} for i = 1, 250 do t = {i, t} end return t",
  "local t = {io.stdout} for i = 1, 150 do t = {i, t, {i}} end return t",
  "local t = {{a = 1}} for i = 1, 150 do t = {i, t, {i}} end return t",
  "return {coroutine.create(print)}",
  /* pids (pid(n): a light userdata, as lmod.c makes them): this node's copied from
  ** the message's first, a port's and another node's through lpvm_put_pid */
  "return {pid(1), pid(2), {pid(3), 'a', {pid(1 << 33 | 4)}}, pid(1)}",
  "return {pid(math.mininteger | 5), pid(1), pid(math.mininteger | 6), pid(2)}",
  "return {pid(1), {pid(2), pid(1 << 62 | 7)}}",
  /* nested lists a message writes in place (vm/lterm_plain.c: 4 levels, 8 tables)
  ** and one level or one table past that (the general encoder) */
  "return {1, {2, {3, {4}}}}",
  "return {1, {2, {3, {4, {5}}}}}",
  "return {{1}, {2}, {3}, {4}, {5}, {6}, {7}}",
  "return {{1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}}",
  "return {pid(1), 'funky', 'baby', {1, {123, true, {}}, 'abcdef'}}",
  "return {pid(1), {pid(2), {'abc', pid(1), {pid(1 << 33 | 4)}}}, true}",
  "return {1, {2, {}, {nil, 3}}}",
  "return {1, {2, {x = 1}}}",
  /* strings of every length around the encoder's word copies (0 to 45 bytes) */
  "local t, s = {}, 'abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ' "
  "for i = 0, 45 do t[#t + 1] = s:sub(1, i) t[#t + 1] = {s:sub(i + 1)} end return t",
  /* 17 to 32 bytes (compared as four words by the reader's cache): one byte changed
  ** in each word, between copies of the string */
  "local t, s = {}, 'abcdefghijklmnopqrstuvwxyz012345' for i = 17, 32 do "
  "local b = s:sub(1, i) t[#t + 1] = b for _, j in ipairs({2, 9, 12, i - 8, i - 1}) do "
  "t[#t + 1] = b:sub(1, j - 1) .. '#' .. b:sub(j + 1) t[#t + 1] = b end end return t",
  /* 0 to 3 bytes (the reader's cache keys them by the element's word): more of them
  ** than slots, zero bytes inside, ones that differ only by their length ('a', 'a\0'),
  ** met again nested and at the message's end (fewer than 8 bytes left there) */
  "local t = {} for r = 1, 3 do for i = 0, 90 do local b = string.char(i % 7, 65 + i % 5, "
  "i % 3) t[#t + 1] = b:sub(1, i % 4) t[#t + 1] = {b:sub(1, (i + 1) % 4), b:sub(2)} end "
  "end t[#t + 1] = 'a\\0' t[#t + 1] = 'ab' t[#t + 1] = 'a' return t",
};

static int pid_fn(lua_State *L) {
  lua_pushlightuserdata(L, (void *)(uintptr_t)(uint64_t)luaL_checkinteger(L, 1));
  return 1;
}

/* The term of cases[i] (put: lterm_put, plain: lterm_put_plain), raw or through the
** C API: the return code, and the bytes or the error. */
static char *encode(const char *src, int raw, int plain, int *rc, size_t *len) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  lua_register(L, "pid", pid_fn);
  cr_assert_eq(luaL_dostring(L, src), LUA_OK, "%s", lua_tostring(L, -1));
  atomic_store(&lraw_layout, raw ? 1 : -1);
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  char err[LTERM_ERRSZ] = "";
  *rc = plain ? lterm_put_plain(L, -1, &b, err) : lterm_put(L, -1, &b, err);
  atomic_store(&lraw_layout, 1);
  char *out;
  if (*rc == 0) {
    out = malloc(b.len);
    memcpy(out, b.data, b.len);
    *len = b.len;
  } else {
    out = strdup(err);
    *len = strlen(err);
  }
  lpvm_tbuf_free(&b);
  cr_assert_eq(lua_gettop(L), 1, "%s: the encoder left the stack as it found it", src);
  lua_close(L);
  return out;
}

Test(lterm_raw, encoder_same_terms_as_the_c_api) {
  cr_assert_eq(lraw_check(), 1);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int plain = 0; plain < 2; plain++) {
      int rc1, rc2;
      size_t l1, l2;
      char *a = encode(cases[i], 1, plain, &rc1, &l1);
      char *b = encode(cases[i], 0, plain, &rc2, &l2);
      cr_assert_eq(rc1, rc2, "%s: %d against %d", cases[i], rc1, rc2);
      cr_assert(l1 == l2 && memcmp(a, b, l1) == 0, "%s: different %s", cases[i],
                rc1 == 0 ? "terms" : "errors");
      free(a);
      free(b);
    }
}

/* Push the local message at t the plain reader's way, raw or not; re-encoded
** through the C API it must give the same bytes. */
static void reread(const char *src, const uint8_t *t, size_t len, int raw, int gen) {
  lua_State *L = luaL_newstate();
  if (gen) lua_gc(L, LUA_GCGEN, 0, 0);
  else lua_gc(L, LUA_GCINC, 0, 100, 0);   /* no pause: the collector runs all along */
  atomic_store(&lraw_layout, raw ? 1 : -1);
  for (int k = 0; k < 50; k++) {
    cr_assert_eq(lterm_push_plain(L, t, len, 0), 1, "%s: not read", src);
    if (k > 0) lua_remove(L, -2);
  }
  atomic_store(&lraw_layout, -1);
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  char err[LTERM_ERRSZ];
  cr_assert_eq(lterm_put_plain(L, -1, &b, err), 0, "%s: %s", src, err);
  atomic_store(&lraw_layout, 1);
  cr_assert(b.len == len && memcmp(b.data, t, len) == 0, "%s: read back differently", src);
  lpvm_tbuf_free(&b);
  lua_close(L);
}

Test(lterm_raw, reader_same_values_as_the_c_api) {
  cr_assert_eq(lraw_check(), 1);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    int rc;
    size_t len;
    char *t = encode(cases[i], 0, 1, &rc, &len);
    /* lists only (a map's pairs may come back in another order), no big integers (the
    ** general decoder reads them) */
    if (rc == 0 && len >= 3 && !strstr(cases[i], "x =") && !strstr(cases[i], "pack") &&
        !strstr(cases[i], "<<") && !strstr(cases[i], "nil") && !strstr(cases[i], "pid("))
      for (int raw = 0; raw < 2; raw++)
        for (int gen = 0; gen < 2; gen++) reread(cases[i], (uint8_t *)t, len, raw, gen);
    free(t);
  }
}

/* A message of one table and of two values (a string and the table), as lterm_msg
** builds it (lterm_plain.c writes lists of scalars and lists in place, the general
** encoder the rest): the bytes lterm_put and lterm_put_values give, or an error
** where they give one. */
Test(lterm_raw, message_bytes_as_the_encoders) {
  cr_assert_eq(lraw_check(), 1);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int two = 0; two < 2; two++) {
      lua_State *L = luaL_newstate();
      luaL_openlibs(L);
      lua_register(L, "pid", pid_fn);
      if (two) lua_pushstring(L, "message");
      cr_assert_eq(luaL_dostring(L, cases[i]), LUA_OK, "%s", lua_tostring(L, -1));
      char err[LTERM_ERRSZ] = "";
      lpvm_msg *m = lterm_msg(L, 1, two + 1, err);
      lpvm_tbuf b;
      lpvm_tbuf_init(&b);
      int rc = lterm_put_values(L, 1, two + 1, &b, err);
      cr_assert_eq(m != NULL, rc == 0, "%s: %s", cases[i], err);
      if (m) {
        cr_assert(m->len == b.len && memcmp(lpvm_msg_data(m), b.data, b.len) == 0,
                  "%s: other bytes", cases[i]);
        lpvm_msg_free(m);
      }
      lpvm_tbuf_free(&b);
      lua_close(L);
    }
}

/* Every message cut short (each of its prefixes) is refused by the plain reader,
** raw or not, and leaves the stack as it was: every count and length it reads is
** checked against the bytes left. */
Test(lterm_raw, reader_refuses_every_prefix) {
  cr_assert_eq(lraw_check(), 1);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    int rc;
    size_t len;
    char *t = encode(cases[i], 0, 1, &rc, &len);
    if (rc == 0 && !strstr(cases[i], "pid(")) {
      for (int raw = 0; raw < 2; raw++) {
        lua_State *L = luaL_newstate();
        atomic_store(&lraw_layout, raw ? 1 : -1);
        for (size_t cut = 0; cut < len; cut++) {
          uint8_t *c = malloc(cut + 1);   /* its own block: a read past it is seen */
          memcpy(c, t, cut);
          cr_assert_eq(lterm_push_plain(L, c, cut, 0), -1, "%s: %zu of %zu bytes read",
                       cases[i], cut, len);
          cr_assert_eq(lua_gettop(L), 0);
          free(c);
        }
        atomic_store(&lraw_layout, 1);
        lua_close(L);
      }
    }
    free(t);
  }
}

/* A message of two values, a string and each case's table ({"message", T}, as
** lpvm.send(to, "message", t) sends it): the reader takes a list value of the tuple
** straight to plain_seq; what it reads gives the same bytes again, every prefix is
** refused, and an improper list ([1|2]) is left to the general decoder, raw or not,
** the stack as it was. */
Test(lterm_raw, reader_lists_in_a_tuple) {
  cr_assert_eq(lraw_check(), 1);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    if (strstr(cases[i], "x =") || strstr(cases[i], "pack") || strstr(cases[i], "<<") ||
        strstr(cases[i], "nil") || strstr(cases[i], "pid(") || strstr(cases[i], "print") ||
        strstr(cases[i], "f = function"))
      continue;   /* as reader_same_values_as_the_c_api: lists only, no big integers;
                  ** no functions (a graph, the general decoder's) */
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    lua_pushstring(L, "message");
    cr_assert_eq(luaL_dostring(L, cases[i]), LUA_OK, "%s", lua_tostring(L, -1));
    lpvm_tbuf b;
    lpvm_tbuf_init(&b);
    char err[LTERM_ERRSZ] = "";
    int rc = lterm_put_values(L, 1, 2, &b, err);
    lua_close(L);
    if (rc != 0) {   /* a case the encoder refuses (a cycle, a function) */
      lpvm_tbuf_free(&b);
      continue;
    }
    for (int raw = 0; raw < 2; raw++) {
      L = luaL_newstate();
      atomic_store(&lraw_layout, raw ? 1 : -1);
      cr_assert_eq(lterm_push_plain(L, b.data, b.len, 0), 2, "%s: not read", cases[i]);
      lpvm_tbuf again;
      lpvm_tbuf_init(&again);
      atomic_store(&lraw_layout, -1);
      cr_assert_eq(lterm_put_values(L, 1, 2, &again, err), 0, "%s: %s", cases[i], err);
      cr_assert(again.len == b.len && memcmp(again.data, b.data, b.len) == 0,
                "%s: read back differently", cases[i]);
      lpvm_tbuf_free(&again);
      lua_settop(L, 0);
      atomic_store(&lraw_layout, raw ? 1 : -1);
      for (size_t cut = 0; cut < b.len; cut++) {
        uint8_t *c = malloc(cut + 1);   /* its own block: a read past it is seen */
        memcpy(c, b.data, cut);
        cr_assert_eq(lterm_push_plain(L, c, cut, 0), -1, "%s: %zu of %zu bytes read",
                     cases[i], cut, b.len);
        cr_assert_eq(lua_gettop(L), 0);
        free(c);
      }
      atomic_store(&lraw_layout, 1);
      lua_close(L);
    }
    lpvm_tbuf_free(&b);
  }
  /* {"m", [1|2]} and {"m", [1, 2 | 3]} (with no byte past them and with one) */
  static const uint8_t imp1[] = {131, 104, 2, 109, 0, 0, 0, 1, 'm',
                                 108, 0, 0, 0, 1, 97, 1, 97, 2};
  static const uint8_t imp2[] = {131, 104, 2, 109, 0, 0, 0, 1, 'm',
                                 108, 0, 0, 0, 2, 97, 1, 97, 2, 97, 3, 106};
  /* a tail of one byte that is not [] (malformed): refused, not stepped over */
  static const uint8_t imp3[] = {131, 104, 2, 109, 0, 0, 0, 1, 'm',
                                 108, 0, 0, 0, 1, 97, 1, 0};
  for (int raw = 0; raw < 2; raw++) {
    lua_State *L = luaL_newstate();
    atomic_store(&lraw_layout, raw ? 1 : -1);
    cr_assert_eq(lterm_push_plain(L, imp3, sizeof imp3, 0), -1);
    cr_assert_eq(lua_gettop(L), 0);
    cr_assert_eq(lterm_push_plain(L, imp1, sizeof imp1, 0), -1);
    cr_assert_eq(lua_gettop(L), 0);
    cr_assert_eq(lterm_push_plain(L, imp2, sizeof imp2, 0), -1);   /* a byte past */
    cr_assert_eq(lua_gettop(L), 0);
    cr_assert_eq(lterm_push_plain(L, imp2, sizeof imp2 - 1, 0), -1);
    cr_assert_eq(lua_gettop(L), 0);
    atomic_store(&lraw_layout, 1);
    lua_close(L);
  }
}

/* Every scalar the reader writes directly, in lists nested as EStone's very_big. */
Test(lterm_raw, reader_direct_scalars) {
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_list(&b, 3);
  for (int d = 0; d < 2; d++) {
    lpvm_put_list(&b, 9);
    lpvm_put_int(&b, 7);
    lpvm_put_int(&b, -100000);
    lpvm_put_int(&b, 255);
    lpvm_put_float(&b, -1.5);
    lpvm_put_atom(&b, "true");
    lpvm_put_atom(&b, "false");
    lpvm_put_atom(&b, "tru");
    lpvm_put_binary(&b, "s", 1);
    lpvm_put_atom(&b, "nil");
    lpvm_put_nil(&b);
  }
  lpvm_put_atom(&b, "nil");
  lpvm_put_nil(&b);
  lua_State *L = luaL_newstate();
  cr_assert_eq(lterm_push_plain(L, b.data, b.len, 0), 1);
  cr_assert_eq(lua_rawlen(L, -1), 2);   /* {l1, l2, nil} */
  for (int d = 1; d <= 2; d++) {
    cr_assert_eq(lua_rawgeti(L, -1, d), LUA_TTABLE);
    cr_assert_eq(lua_rawlen(L, -1), 8);
    lua_rawgeti(L, -1, 1);
    cr_assert(lua_isinteger(L, -1) && lua_tointeger(L, -1) == 7);
    lua_rawgeti(L, -2, 2);
    cr_assert(lua_isinteger(L, -1) && lua_tointeger(L, -1) == -100000);
    lua_rawgeti(L, -3, 3);
    cr_assert(lua_isinteger(L, -1) && lua_tointeger(L, -1) == 255);
    lua_rawgeti(L, -4, 4);
    cr_assert(!lua_isinteger(L, -1) && lua_tonumber(L, -1) == -1.5);
    lua_rawgeti(L, -5, 5);
    cr_assert(lua_isboolean(L, -1) && lua_toboolean(L, -1));
    lua_rawgeti(L, -6, 6);
    cr_assert(lua_isboolean(L, -1) && !lua_toboolean(L, -1));
    lua_rawgeti(L, -7, 7);
    cr_assert(lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), "tru") == 0);
    cr_assert_eq(lua_rawgeti(L, -8, 9), LUA_TNIL);
    lua_pushnil(L);
    int keys = 0;
    while (lua_next(L, -10)) keys++, lua_pop(L, 1);
    cr_assert_eq(keys, 8, "the nil at 9 is no key");
    lua_settop(L, 1);
  }
  lua_close(L);
  lpvm_tbuf_free(&b);
}

/* A map's value replaced by a later pair whose key is the same in Lua (1 and 1.0):
** the strings its lists held go unreached, and the reader must not give them again
** from its cache (ASan sees a freed one), while the collector runs all along. */
Test(lterm_raw, reader_cache_forgets_a_replaced_value) {
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_list(&b, 1 + 300 + 50);
  lpvm_put_map(&b, 2);
  lpvm_put_int(&b, 1);
  lpvm_put_list(&b, 2);
  lpvm_put_binary(&b, "zq1", 3);
  lpvm_put_binary(&b, "zq1", 3);
  lpvm_put_nil(&b);
  lpvm_put_float(&b, 1.0);
  lpvm_put_int(&b, 0);
  for (int i = 0; i < 300; i++) {   /* garbage enough for whole collection cycles */
    lpvm_put_list(&b, 8);
    for (int j = 0; j < 8; j++) lpvm_put_int(&b, i * 8 + j);
    lpvm_put_nil(&b);
  }
  for (int i = 0; i < 50; i++) {
    lpvm_put_list(&b, 1);
    lpvm_put_binary(&b, "zq1", 3);
    lpvm_put_nil(&b);
  }
  lpvm_put_nil(&b);
  lua_State *L = luaL_newstate();
  lua_gc(L, LUA_GCINC, 0, 100, 0);
  for (int k = 0; k < 20; k++) {
    cr_assert_eq(lterm_push_plain(L, b.data, b.len, 0), 1);
    cr_assert_eq(lua_rawlen(L, -1), 351);
    cr_assert_eq(lua_rawgeti(L, -1, 1), LUA_TTABLE);
    lua_rawgeti(L, -1, 1);
    cr_assert(lua_isinteger(L, -1) && lua_tointeger(L, -1) == 0, "1.0 replaced 1's value");
    lua_pop(L, 2);
    for (int i = 302; i <= 351; i++) {
      cr_assert_eq(lua_rawgeti(L, -1, i), LUA_TTABLE);
      lua_rawgeti(L, -1, 1);
      cr_assert_str_eq(lua_tostring(L, -1), "zq1");
      lua_pop(L, 2);
    }
    lua_pop(L, 1);
  }
  lua_close(L);
  lpvm_tbuf_free(&b);
}

/* Messages with shared binaries (lpvm.send(pid, "data", b), {tag, b}, binaries in
** nested lists, a sub-binary, more than the in-place writer takes): lterm_msg with
** the mirror trusted (lterm_plain_msg.c writes them in place) gives the bytes and
** the table (each entry's buffer, range and position) of the general encoder's
** (the mirror not trusted); read back (lterm_plain.c's reader, raw and not), the
** values write the same message again; every reference is dropped at the end. */
static const char *const bin_cases[] = {
  "return 'data', B1",
  "return {'data', B1}",
  "return B1, 'x', 7, B2",
  "return {B1, {B2, {1.5, B1}}, true}, B2",
  "return 'tag', {B2:sub(2, 4), 'abc', {}}",
  "return {B1, B1, B1, B1, B1, B1, B1, B1, B2}",   /* 9: the general encoder */
  "return {B1, x = B2}",                           /* a map: the general encoder */
};

static lpvm_msg *bin_msg(lua_State *L, int n, int raw, const char *src) {
  char err[LTERM_ERRSZ] = "";
  atomic_store(&lraw_layout, raw ? 1 : -1);
  lpvm_msg *m = lterm_msg(L, 1, n, err);
  atomic_store(&lraw_layout, 1);
  cr_assert(m, "%s: %s", src, err);
  return m;
}

static void same_msg(const lpvm_msg *a, const lpvm_msg *b, const char *src) {
  cr_assert(a->len == b->len && memcmp(lpvm_msg_data((lpvm_msg *)a),
                                       lpvm_msg_data((lpvm_msg *)b), a->len) == 0,
            "%s: other bytes", src);
  uint32_t na, nb;
  const lpvm_binref *va = lpvm_msg_bins(a, &na), *vb = lpvm_msg_bins(b, &nb);
  cr_assert(na == nb && na > 0, "%s: %u binaries against %u", src, na, nb);
  for (uint32_t i = 0; i < na; i++)
    cr_assert(va[i].bin == vb[i].bin && va[i].off == vb[i].off && va[i].len == vb[i].len &&
                  va[i].pos == vb[i].pos, "%s: binary %u differs", src, i);
}

Test(lterm_raw, binaries_in_place_as_the_encoder) {
  cr_assert_eq(lraw_check(), 1);
  size_t live0;
  lpvm_bin_stats(&live0, NULL);
  for (size_t i = 0; i < sizeof bin_cases / sizeof *bin_cases; i++)
    for (int raw = 0; raw < 2; raw++) {
      lua_State *L = luaL_newstate();
      luaL_openlibs(L);
      lpvm_bin *b1 = lpvm_bin_new("one binary", 10), *b2 = lpvm_bin_new("another one", 11);
      cr_assert(b1 && b2);
      lbin_push(L, b1, 0, 10);
      lua_setglobal(L, "B1");
      lbin_push(L, b2, 0, 11);
      lua_setglobal(L, "B2");
      lpvm_bin_drop(b1);   /* the state's values hold them now */
      lpvm_bin_drop(b2);
      cr_assert_eq(luaL_dostring(L, bin_cases[i]), LUA_OK, "%s", lua_tostring(L, -1));
      int n = lua_gettop(L);
      lpvm_msg *m1 = bin_msg(L, n, 1, bin_cases[i]), *m2 = bin_msg(L, n, 0, bin_cases[i]);
      same_msg(m1, m2, bin_cases[i]);
      lua_settop(L, 0);
      atomic_store(&lraw_layout, raw ? 1 : -1);
      cr_assert_eq(lterm_push_msg(L, m1), n, "%s: read", bin_cases[i]);
      atomic_store(&lraw_layout, 1);
      lpvm_msg *m3 = bin_msg(L, n, 1, bin_cases[i]);
      same_msg(m3, m2, bin_cases[i]);
      lpvm_msg_free(m1);
      lpvm_msg_free(m2);
      lpvm_msg_free(m3);
      lua_close(L);
      size_t live;
      lpvm_bin_stats(&live, NULL);
      cr_assert_eq(live, live0, "%s: %zu binaries left", bin_cases[i], live - live0);
    }
}
