/*
** lets_admin.c -- the table-level functions of `require "ets"`: new, whereis, all, info,
** give_away, rename, setopts, safe_fixtable (vm/lmod_ets.c registers them beside the
** object functions, with the same upvalues, so a table argument is checked as theirs
** are: lets_check_tab). None is on an operation's hot path: they call the module's
** helpers through lets.h rather than inline, and lmod_ets.c keeps the functions that
** read and write objects (docs/ets.md, "Performance").
*/
#include <lauxlib.h>
#include <string.h>

#include "lpvm/dist.h"
#include "lpvm/ets.h"
#include "vm/lets.h"
#include "vm/lproc_int.h"

/* ---- the functions -------------------------------------------------------------------------- */

static const char *const types[] = {"set", "ordered_set", "bag", "duplicate_bag", NULL};
static const char *const accesses[] = {"protected", "public", "private", NULL};

static int find_word(const char *s, const char *const *list) {
  for (int i = 0; list[i]; i++)
    if (strcmp(s, list[i]) == 0) return i;
  return -1;
}

/* One option word from the array part: "set", "public", "named_table", ... */
static void opt_word(lua_State *L, const char *w, lpvm_ets_opts *o) {
  int i;
  if ((i = find_word(w, types)) >= 0) o->type = i;
  else if ((i = find_word(w, accesses)) >= 0) o->access = i;
  else if (strcmp(w, "named_table") == 0) o->named = 1;
  else if (strcmp(w, "read_concurrency") == 0) o->read_concurrency = 1;
  else if (strcmp(w, "write_concurrency") == 0) o->write_concurrency = 1;
  else if (strcmp(w, "compressed") != 0)   /* accepted: objects are compact already */
    luaL_argerror(L, 2, lua_pushfstring(L, "unknown option '%s'", w));
}

/* The field k of the options (argument 2): absent, or one of its own words. */
static void opt_field(lua_State *L, const char *k, const char *const *words, int *out) {
  int ty = lua_getfield(L, 2, k), i = -1;
  if (ty != LUA_TNIL && (ty != LUA_TSTRING || (i = find_word(lua_tostring(L, -1), words)) < 0))
    luaL_argerror(L, 2, lua_pushfstring(L, "%s must be %s, not '%s'", k,
                  words == types ? "set, ordered_set, bag or duplicate_bag"
                                 : "protected, public or private",
                  luaL_tolstring(L, -1, NULL)));
  if (i >= 0) *out = i;
  lua_pop(L, 1);
}

static int field_bool(lua_State *L, int t, const char *k, int dflt) {
  int r = lua_getfield(L, t, k) == LUA_TNIL ? dflt : lua_toboolean(L, -1);
  lua_pop(L, 1);
  return r;
}

/* ets.new(name [, opts]): opts is an array of words ("set", "public", ...) and/or the
** fields type, access, named_table, keypos, read_concurrency, write_concurrency,
** heir, heir_data. */
static int l_new(lua_State *L) {
  lpvm_task *self = lets_self(L);
  lpvm_ets_opts o = LPVM_ETS_OPTS_INIT;
  size_t nlen;
  o.name = luaL_checklstring(L, 1, &nlen);
  if (nlen > 255 || strlen(o.name) != nlen) luaL_argerror(L, 1, "a name is at most 255 bytes, no NUL");
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_Integer n = (lua_Integer)lua_rawlen(L, 2);
    for (lua_Integer i = 1; i <= n; i++) {
      if (lua_rawgeti(L, 2, i) != LUA_TSTRING) luaL_argerror(L, 2, "option words are strings");
      opt_word(L, lua_tostring(L, -1), &o);
      lua_pop(L, 1);
    }
    opt_field(L, "type", types, &o.type);
    opt_field(L, "access", accesses, &o.access);
    opt_field(L, "protection", accesses, &o.access);
    o.named = field_bool(L, 2, "named_table", o.named);
    o.read_concurrency = field_bool(L, 2, "read_concurrency", o.read_concurrency);
    o.write_concurrency = field_bool(L, 2, "write_concurrency", o.write_concurrency);
    if (lua_getfield(L, 2, "keypos") != LUA_TNIL) {
      lua_Integer k = lua_tointeger(L, -1);
      if (!lua_isinteger(L, -1) || k < 1 || k > UINT32_MAX) luaL_argerror(L, 2, "keypos must be a positive integer");
      o.keypos = (uint32_t)k;
    }
    if (lua_getfield(L, 2, "heir") != LUA_TNIL) {
      o.heir = lmod_to_pid(L, -1);
      if (!o.heir) luaL_argerror(L, 2, "heir must be a pid");
    }
    lua_pop(L, 2);
    lua_getfield(L, 2, "heir_data");
    lpvm_tbuf *b = o.heir ? lets_opt_term(L, -1, 2) : NULL;
    if (b) {
      o.heir_data = b->data;
      o.heir_data_len = b->len;
    }
  }
  lpvm_tab tab;
  int rc = lpvm_ets_new(self, &o, &tab);
  if (rc) return lets_fail(L, rc, 2);
  if (o.named) lua_pushvalue(L, 1);
  else lmod_push_ref(L, tab);
  return 1;
}

static int l_whereis(lua_State *L) {
  lpvm_tab t = lpvm_ets_whereis(luaL_checkstring(L, 1));
  if (t) lmod_push_ref(L, t);
  else lua_pushnil(L);
  return 1;
}

/* The id to show a user: the name of a named table, else the reference. */
static void push_id(lua_State *L, lpvm_tab t, const lpvm_ets_tabinfo *in) {
  if (in->named) lua_pushstring(L, in->name);
  else lmod_push_ref(L, t);
}

static int l_all(lua_State *L) {
  size_t cap = 64, n;
  lpvm_tab *ids = NULL;
  for (;;) {   /* tables come and go: retry until the snapshot fits */
    lpvm_tab *m = realloc(ids, cap * sizeof *ids);
    if (!m) { free(ids); return luaL_error(L, "not enough memory"); }
    ids = m;
    if ((n = lpvm_ets_all(ids, cap)) <= cap) break;
    cap = n + 16;
  }
  lua_createtable(L, (int)n, 0);
  int k = 0;
  for (size_t i = 0; i < n; i++) {
    lpvm_ets_tabinfo in;
    if (lpvm_ets_info(ids[i], &in)) continue;   /* deleted meanwhile */
    push_id(L, ids[i], &in);
    lua_rawseti(L, -2, ++k);
  }
  free(ids);
  return 1;
}

static void push_info_item(lua_State *L, lpvm_tab t, const lpvm_ets_tabinfo *in,
                           const char *item) {
  if (strcmp(item, "size") == 0) lua_pushinteger(L, (lua_Integer)in->size);
  else if (strcmp(item, "memory") == 0) lua_pushinteger(L, (lua_Integer)in->memory);
  else if (strcmp(item, "owner") == 0) lmod_push_pid(L, in->owner);
  else if (strcmp(item, "heir") == 0) { if (in->heir) lmod_push_pid(L, in->heir); else lua_pushstring(L, "none"); }
  else if (strcmp(item, "type") == 0) lua_pushstring(L, types[in->type]);
  else if (strcmp(item, "protection") == 0) lua_pushstring(L, accesses[in->access]);
  else if (strcmp(item, "name") == 0) lua_pushstring(L, in->name);
  else if (strcmp(item, "named_table") == 0) lua_pushboolean(L, in->named);
  else if (strcmp(item, "keypos") == 0) lua_pushinteger(L, in->keypos);
  else if (strcmp(item, "read_concurrency") == 0) lua_pushboolean(L, in->read_concurrency);
  else if (strcmp(item, "write_concurrency") == 0) lua_pushboolean(L, in->write_concurrency);
  else if (strcmp(item, "id") == 0) lmod_push_ref(L, t);
  else if (strcmp(item, "node") == 0) lua_pushstring(L, lpvm_node_name());
  else if (strcmp(item, "compressed") == 0 || strcmp(item, "decentralized_counters") == 0)
    lua_pushboolean(L, 0);   /* accepted by new, nothing to say: objects are compact */
  else luaL_argerror(L, 2, lua_pushfstring(L, "unknown info item '%s'", item));
}

static const char *const info_items[] = {"id", "name", "size", "memory", "owner", "heir",
    "type", "protection", "named_table", "keypos", "read_concurrency",
    "write_concurrency", "compressed", "decentralized_counters", "node", NULL};

/* info(tab) -> a table of every item; info(tab, item) -> one; nil if no such table. */
static int l_info(lua_State *L) {
  lpvm_tab t = 0;
  if (lua_type(L, 1) == LUA_TSTRING) t = lpvm_ets_whereis(lua_tostring(L, 1));
  else if (!(t = lmod_to_ref(L, 1))) luaL_typeerror(L, 1, "table (reference or name)");
  lpvm_ets_tabinfo in;
  const char *item = luaL_optstring(L, 2, NULL);
  if (!t || lpvm_ets_info(t, &in)) { lua_pushnil(L); return 1; }
  if (item) { push_info_item(L, t, &in, item); return 1; }
  lua_createtable(L, 0, 15);
  for (int i = 0; info_items[i]; i++) {
    push_info_item(L, t, &in, info_items[i]);
    lua_setfield(L, -2, info_items[i]);
  }
  return 1;
}

static int l_give_away(lua_State *L) {
  lpvm_tab tab = lets_check_tab(L, 1);
  lpvm_id to = lmod_check_pid(L, 2);
  lpvm_tbuf *b = lets_opt_term(L, 3, 3);
  int rc = lpvm_ets_give_away(lets_self(L), tab, to, b ? b->data : NULL, b ? b->len : 0);
  if (rc) return lets_fail(L, rc, 2);
  lua_pushboolean(L, 1);
  return 1;
}

static int l_rename(lua_State *L) {
  lpvm_tab tab = lets_check_tab(L, 1);
  const char *name = luaL_checkstring(L, 2);
  int rc = lpvm_ets_rename(lets_self(L), tab, name);
  if (rc) return lets_fail(L, rc, 2);
  lpvm_ets_tabinfo in;
  if (lpvm_ets_info(tab, &in) == 0 && in.named) lua_pushvalue(L, 2);
  else lmod_push_ref(L, tab);
  return 1;
}

/* setopts(tab, {heir = pid | "none", heir_data = x}) */
static int l_setopts(lua_State *L) {
  lpvm_tab tab = lets_check_tab(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  if (lua_getfield(L, 2, "heir") == LUA_TNIL) luaL_argerror(L, 2, "only 'heir' can be set");
  lpvm_id heir = lmod_to_pid(L, -1);
  if (!heir && !(lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), "none") == 0))
    luaL_argerror(L, 2, "heir must be a pid or \"none\"");
  lua_getfield(L, 2, "heir_data");
  lpvm_tbuf *b = heir ? lets_opt_term(L, -1, 2) : NULL;
  int rc = lpvm_ets_set_heir(lets_self(L), tab, heir, b ? b->data : NULL, b ? b->len : 0);
  if (rc) return lets_fail(L, rc, 2);
  lua_pushboolean(L, 1);
  return 1;
}

/* Iteration with first/next is always safe in lpvm (ets.h): nothing to fix. */
static int l_safe_fixtable(lua_State *L) {
  lpvm_tab tab = lets_check_tab(L, 1);
  luaL_checktype(L, 2, LUA_TBOOLEAN);
  lpvm_ets_tabinfo in;
  if (lpvm_ets_info(tab, &in)) return lets_fail(L, LPVM_ETS_ENOTAB, 1);
  lua_pushboolean(L, 1);
  return 1;
}

const luaL_Reg lets_admin_fns[] = {
  {"new", l_new}, {"whereis", l_whereis}, {"all", l_all}, {"info", l_info},
  {"give_away", l_give_away}, {"rename", l_rename}, {"setopts", l_setopts},
  {"safe_fixtable", l_safe_fixtable},
  {NULL, NULL}
};
