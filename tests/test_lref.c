/*
** test_lref.c -- references as light userdata (vm/lmod.c): a reference and a pid
** share the light userdata type and its metatable, told apart only by the tag
** LPVM_ID_REF_TAG, so everything that reads one must tell which it holds: the
** checks, tostring, and every encoder (the C API's, the raw array walk, the plain
** scalars) and decoder (general, plain). A reference that does not fit (bits 62 or 63
** set: an ETS table id) stays an interned full userdata.
*/
#include <criterion/criterion.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "vm/lproc_int.h"
#include "vm/lraw.h"
#include "vm/lterm.h"
#include "vm/lterm_int.h"

static lua_State *new_state(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  return L;
}

/* The type of the term at t (after the version byte) and its pid or reference. */
static int read_term(const uint8_t *t, size_t len, uint64_t *v) {
  lpvm_tread r;
  cr_assert_eq(lpvm_tread_init(&r, t, len), 0);
  int ty = lpvm_get_type(&r);
  if (ty == LPVM_T_REF) cr_assert_eq(lpvm_get_ref(&r, v), 0);
  else if (ty == LPVM_T_PID || ty == LPVM_T_PORT) cr_assert_eq(lpvm_get_pid(&r, v), 0);
  return ty;
}

Test(lref, a_ref_is_never_a_pid_with_the_same_bits) {
  lua_State *L = new_state();
  const uint64_t n = 7 | UINT64_C(3) << 32;   /* a pid <0.7.3>, a reference 3.7 */
  lmod_push_pid(L, n);
  lmod_push_ref(L, n);
  cr_assert_eq(lua_type(L, 1), LUA_TLIGHTUSERDATA);
  cr_assert_eq(lua_type(L, 2), LUA_TLIGHTUSERDATA);
  cr_assert(!lua_rawequal(L, 1, 2));
  cr_assert(!lua_compare(L, 1, 2, LUA_OPEQ));
  cr_assert_eq(lmod_to_pid(L, 1), n);
  cr_assert_eq(lmod_to_ref(L, 1), 0, "a pid is no reference");
  cr_assert_eq(lmod_to_ref(L, 2), n);
  cr_assert_eq(lmod_to_pid(L, 2), 0, "a reference is no pid");
  /* two table keys */
  lua_newtable(L);
  lua_pushvalue(L, 1);
  lua_pushinteger(L, 1);
  lua_rawset(L, 3);
  lua_pushvalue(L, 2);
  lua_pushinteger(L, 2);
  lua_rawset(L, 3);
  lmod_push_ref(L, n);   /* pushed again: the same key */
  cr_assert_eq(lua_rawget(L, 3), LUA_TNUMBER);
  cr_assert_eq(lua_tointeger(L, -1), 2);
  lua_pop(L, 2);
  /* tostring through the shared metatable */
  cr_assert_str_eq(luaL_tolstring(L, 1, NULL), "<0.7.3>");
  cr_assert_str_eq(luaL_tolstring(L, 2, NULL), "#Ref<0.3.7>");
  lua_close(L);
}

static int check_pid_cf(lua_State *L) {
  lmod_check_pid(L, 1);
  return 0;
}

static int check_ref_cf(lua_State *L) {
  lmod_check_ref(L, 1);
  return 0;
}

/* The error of f(the value at idx), or NULL if it ran. */
static const char *fails(lua_State *L, lua_CFunction f, int idx) {
  lua_pushcfunction(L, f);
  lua_pushvalue(L, idx);
  if (lua_pcall(L, 1, 0, 0) == LUA_OK) return NULL;
  return lua_tostring(L, -1);
}

Test(lref, the_checks_name_what_was_given) {
  lua_State *L = new_state();
  lmod_push_pid(L, 9 | UINT64_C(1) << 32);
  lmod_push_ref(L, 12345);
  cr_assert_null(fails(L, check_pid_cf, 1));
  cr_assert_null(fails(L, check_ref_cf, 2));
  const char *e = fails(L, check_pid_cf, 2);
  cr_assert(e && strstr(e, "pid expected, got reference"), "%s", e ? e : "no error");
  e = fails(L, check_ref_cf, 1);
  cr_assert(e && strstr(e, "reference expected, got pid"), "%s", e ? e : "no error");
  lua_pushinteger(L, 3);
  e = fails(L, check_ref_cf, lua_gettop(L));
  cr_assert(e && strstr(e, "reference expected, got number"), "%s", e ? e : "no error");
  lua_close(L);
}

/* A reference that does not fit the tag (a table id has bit 63) is a full userdata,
** the same one for each push while it is held. */
Test(lref, a_wide_ref_is_an_interned_userdata) {
  lua_State *L = new_state();
  const uint64_t wide[] = {UINT64_C(1) << 63 | 5, UINT64_C(1) << 62 | 5, UINT64_MAX};
  for (int i = 0; i < 3; i++) {
    lua_settop(L, 0);
    lmod_push_ref(L, wide[i]);
    lmod_push_ref(L, wide[i]);
    cr_assert_eq(lua_type(L, 1), LUA_TUSERDATA);
    cr_assert(lua_rawequal(L, 1, 2));
    cr_assert_eq(lmod_to_ref(L, 1), wide[i]);
    cr_assert_eq(lmod_to_pid(L, 1), 0);
    lmod_push_ref_mt(L);
    lua_getmetatable(L, 1);
    cr_assert(lua_rawequal(L, -1, -2), "the table ids' metatable");
  }
  /* the largest that fits is light */
  lua_settop(L, 0);
  lmod_push_ref(L, (UINT64_C(1) << 62) - 1);
  cr_assert_eq(lua_type(L, 1), LUA_TLIGHTUSERDATA);
  cr_assert_eq(lmod_to_ref(L, 1), (UINT64_C(1) << 62) - 1);
  lua_close(L);
}

/* The values at the indices idx[0..n-1], in a table (a list) pushed on top. */
static void listed(lua_State *L, const int *idx, int n) {
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushvalue(L, idx[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

/* A pid, a port, a reference, a wide reference: each encoder puts each as itself,
** each decoder gives it back as the same value. */
Test(lref, every_codec_tells_a_ref_from_a_pid) {
  const uint64_t n = 7 | UINT64_C(3) << 32;
  lua_State *L = new_state();
  lmod_push_pid(L, n);                          /* 1 */
  lmod_push_pid(L, n | LPVM_ID_PORT_BIT);      /* 2 */
  lmod_push_ref(L, n);                          /* 3 */
  lmod_push_ref(L, n | UINT64_C(1) << 63);      /* 4 */
  const int types[] = {LPVM_T_PID, LPVM_T_PORT, LPVM_T_REF, LPVM_T_REF};
  const uint64_t vals[] = {n, n | LPVM_ID_PORT_BIT, n, n | UINT64_C(1) << 63};
  char err[LTERM_ERRSZ];
  for (int i = 1; i <= 4; i++) {
    for (int plain = 0; plain < 2; plain++) {
      lpvm_tbuf b;
      lpvm_tbuf_init(&b);
      cr_assert_eq(plain ? lterm_put_plain(L, i, &b, err) : lterm_put(L, i, &b, err), 0);
      uint64_t v = 0;
      cr_assert_eq(read_term(b.data, b.len, &v), types[i - 1], "value %d", i);
      cr_assert_eq(v, vals[i - 1], "value %d", i);
      /* the general decoder and the plain reader */
      cr_assert_eq(lterm_push_values(L, b.data, b.len), 1);
      cr_assert(lua_rawequal(L, -1, i), "value %d decoded", i);
      lua_pop(L, 1);
      const uint8_t *q = lterm_plain_at(L, b.data + 1, b.data + b.len);
      if (i != 2 || q) {   /* a port may be left to the general decoder */
        cr_assert_eq(q, b.data + b.len, "value %d read plain", i);
        cr_assert(lua_rawequal(L, -1, i), "value %d read plain", i);
        lua_pop(L, 1);
      }
      lpvm_tbuf_free(&b);
    }
  }
  /* in a list: the raw array walk (lterm_raw.c) and the C API's, then the plain
  ** reader's list (lterm_plain.c) */
  const int in_list[] = {1, 3, 4, 3, 1};   /* the port goes the general decoder's way */
  listed(L, in_list, 5);
  for (int raw = 0; raw < 2; raw++) {
    atomic_store(&lraw_layout, raw ? 1 : -1);
    lpvm_tbuf b;
    lpvm_tbuf_init(&b);
    cr_assert_eq(lterm_put(L, 5, &b, err), 0, "%s", err);
    atomic_store(&lraw_layout, 1);
    for (int dec = 0; dec < 2; dec++) {
      if (dec) cr_assert_eq(lterm_push_plain(L, b.data, b.len, 0), 1);
      else cr_assert_eq(lterm_push_values(L, b.data, b.len), 1);
      cr_assert_eq(lua_type(L, -1), LUA_TTABLE);
      for (int i = 1; i <= 5; i++) {
        lua_rawgeti(L, -1, i);
        cr_assert(lua_rawequal(L, -1, in_list[i - 1]), "element %d (raw %d, plain %d)", i,
                  raw, dec);
        lua_pop(L, 1);
      }
      lua_pop(L, 1);
    }
    lpvm_tbuf_free(&b);
  }
  /* a message of scalars (a pid, a reference, a wide one), lterm_msg_plain's way, read
  ** back plain */
  lua_settop(L, 4);
  lua_pushvalue(L, 3);
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 4);
  size_t hint = 1;
  lpvm_msg *m = lterm_msg_plain(L, 5, 3, &hint);
  cr_assert_not_null(m);
  cr_assert_eq(hint, 0);
  const uint8_t *t = lpvm_msg_data(m);
  cr_assert_eq(lterm_push_plain(L, t, m->len, 0), 3);
  for (int i = 0; i < 3; i++) cr_assert(lua_rawequal(L, 5 + i, 8 + i), "value %d", i);
  lua_settop(L, 7);
  cr_assert_eq(lterm_push_plain(L, t, m->len, 1), 2, "all but the leading reference");
  cr_assert(lua_rawequal(L, 1, 8) && lua_rawequal(L, 4, 9));
  lpvm_msg_free(m);
  lua_close(L);
}
