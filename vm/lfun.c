/*
** lfun.c -- Lua functions as terms: a closure travels with copies of its upvalues
** (docs/terms.md, "Functions").
**
** A message that holds a function is a graph: {lpvm_graph, Message}. Inside it every
** table and every Lua function gets a number in the order the encoder meets it (a
** table when it starts, a function before its upvalues), the decoder numbers them in
** the same order, and a value met again is {lpvm_ref, N}. So inside a graph a table or
** function reached twice is one value in the copy, and cycles (a recursive local
** function, two functions calling each other, a module table whose functions use it)
** travel. A function is {lpvm_fun, Bytecode, [Upvalue, ...]}: Bytecode is lua_dump's
** output with debug info (tracebacks keep their names and lines); an upvalue is a
** value, or {lpvm_upval, N, I} when it is the same variable as upvalue I of function
** N (two closures sharing a local keep sharing it). By name, resolved by the
** receiver: '$env' (the globals: the receiver's own), {'$mod', Name} (a loaded
** module), {'$fn', Module, Field} (a C function of a loaded module or of _G).
**
** A spawned function's bytecode is not loaded when the recycled state the process
** runs in kept its previous owner's function of the same bytecode (lproc_pool.c).
**
** The dump is cached per prototype (two closures made by the same `function` in a
** loop share it), in the sending process: registry[&protos_key] maps the prototype
** to one live closure of it (weak values, so a collected prototype's entry goes
** before its address can be reused) and registry[&codes_key] maps that closure to the
** bytecode (weak keys), after an 8-byte number no other dump of this VM has (code_ids):
** the same number means the same bytes, so a spawn's start carries it
** (lproc_start.code_id) and a recycled state that kept a function of that number
** takes it without comparing its dump (lproc_pool_reuse_fn).
**
** Security: lua_load of bytecode trusts the bytes completely (a crafted chunk can
** crash the VM). The decoder loads lpvm_fun only when its caller says the source is
** trusted: this VM's own encoder (local messages), or a node that passed the cookie
** handshake unless lpvm runs with --no-remote-code (lterm_push_msg, lproc_main);
** untrusted terms read as plain data (lterm_push_values_ex). What can be checked
** is checked either way: header, upvalue count, every reference and index.
*/
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/lproc_int.h"
#include "vm/lraw.h"
#include "vm/lterm.h"
#include "vm/lterm_int.h"

static const char protos_key = 'p';
static const char codes_key = 'c';

/* ---- the prototype of a closure -------------------------------------------------- */

/* The public API has no way to name a prototype: lraw.h's mirror reads it, once its
** check has passed (else every closure is cached by its own identity). */
static const void *proto_of(lua_State *L, int f) {
  return lraw_ok() ? lraw_proto(L, f) : NULL;
}

/* ---- dumping, cached ---------------------------------------------------------------- */

/* A cached dump's number: a new one per dump made, never 0. */
static _Atomic uint64_t code_ids;
#define CODE_ID_LEN sizeof(uint64_t)

/* The last spawned function's dump, in the spawning state: registry[&spawn_key] is a
** userdata of this record with the closure (its prototype then stays alive: no other
** can take its address) and the dump string (the bytes `code` points into) as user
** values. A spawn of the same prototype again (a loop of spawns) reads it without the
** protected call and the two weak tables' lookups (dump_cf: 930 instructions). It
** keeps the last spawned closure alive until another is spawned from the state. */
typedef struct spawn_cache {
  const void *proto;
  const char *code;   /* in the user value 2 */
  size_t len;
  uint64_t id;
} spawn_cache;
static const char spawn_key = 's';

/* The closure at 1, its dump string at -1 (dump_cf): the spawn cache set to them. */
static void spawn_cache_set(lua_State *L, const void *proto) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &spawn_key) != LUA_TUSERDATA) {
    lua_pop(L, 1);
    lua_newuserdatauv(L, sizeof(spawn_cache), 2);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &spawn_key);
  }
  spawn_cache *c = lua_touserdata(L, -1);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  lua_pushvalue(L, -2);
  lua_setiuservalue(L, -2, 2);
  lua_pop(L, 1);
  size_t len;
  const char *s = lua_tolstring(L, -1, &len);
  c->proto = proto;
  c->code = s + CODE_ID_LEN;
  c->len = len - CODE_ID_LEN;
  memcpy(&c->id, s, CODE_ID_LEN);
}

/* (f [, spawn]) -> its number and bytecode, one string; with spawn, also the spawn
** cache's. Raises when out of memory; run protected. */
static int dump_cf(lua_State *L) {
  int spawn = lua_toboolean(L, 2);
  lua_settop(L, 1);
  const void *proto = proto_of(L, 1);
  lmod_weak_table(L, &codes_key, "k");   /* 2 */
  lmod_weak_table(L, &protos_key, "v");  /* 3 */
  if (proto) {
    if (lua_rawgetp(L, 3, proto) == LUA_TFUNCTION && lua_rawget(L, 2) == LUA_TSTRING)
      goto done;
    lua_settop(L, 3);
  } else {
    lua_pushvalue(L, 1);
    if (lua_rawget(L, 2) == LUA_TSTRING) goto done;
    lua_pop(L, 1);
  }
  size_t len;
  lua_pushvalue(L, 1);
  char *code = lproc_dump_top(L, &len);
  lua_pop(L, 1);
  if (!code) return luaL_error(L, "cannot dump the function");
  uint64_t id = atomic_fetch_add_explicit(&code_ids, 1, memory_order_relaxed) + 1;
  luaL_Buffer buf;
  char *to = luaL_buffinitsize(L, &buf, CODE_ID_LEN + len);
  memcpy(to, &id, CODE_ID_LEN);
  memcpy(to + CODE_ID_LEN, code, len);
  free(code);
  luaL_pushresultsize(&buf, CODE_ID_LEN + len);
  lua_pushvalue(L, 1);
  lua_pushvalue(L, -2);
  lua_rawset(L, 2);   /* codes[f] = bytecode */
  if (proto) {
    lua_pushvalue(L, 1);
    lua_rawsetp(L, 3, proto);   /* protos[proto] = f */
  }
done:
  if (spawn && proto) spawn_cache_set(L, proto);
  return 1;
}

/* dump_cf's string at -1: the bytecode, its length and number. */
static const char *cached_code(lua_State *L, size_t *len, uint64_t *id) {
  const char *s = lua_tolstring(L, -1, len);
  memcpy(id, s, CODE_ID_LEN);
  *len -= CODE_ID_LEN;
  return s + CODE_ID_LEN;
}

/* ---- encoding --------------------------------------------------------------------------- */

int lfun_put_known(lua_State *L, int v, lpvm_tbuf *b, int tables) {
  int ty = lua_type(L, v);
  if (ty == LUA_TTABLE ? !tables : !lua_iscfunction(L, v)) return 0;   /* Lua code: no */
  if (!lua_checkstack(L, 6)) return 0;
  int top = lua_gettop(L);
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  int loaded = top + 1, globals = top + 2;
  int found = 0;
  if (ty == LUA_TTABLE && lua_rawequal(L, v, globals)) {
    lpvm_put_atom(b, "$env");
    lua_settop(L, top);
    return 1;
  }
  if (ty == LUA_TTABLE && lua_type(L, loaded) == LUA_TTABLE && lproc_find_key(L, loaded, v)) {
    lpvm_put_tuple(b, 2);
    lpvm_put_atom(b, "$mod");
    found = 1;
  } else if (ty == LUA_TFUNCTION && lproc_find_key(L, globals, v)) {
    lpvm_put_tuple(b, 3);
    lpvm_put_atom(b, "$fn");
    lpvm_put_binary(b, "_G", 2);
    found = 1;
  } else if (ty == LUA_TFUNCTION && lua_type(L, loaded) == LUA_TTABLE) {
    lua_pushnil(L);
    while (!found && lua_next(L, loaded)) {
      if (lua_type(L, -1) == LUA_TTABLE && lua_type(L, -2) == LUA_TSTRING &&
          lproc_find_key(L, lua_gettop(L), v)) {
        size_t n;
        const char *mod = lua_tolstring(L, -3, &n);
        lpvm_put_tuple(b, 3);
        lpvm_put_atom(b, "$fn");
        lpvm_put_binary(b, mod, n);
        found = 1;
        break;
      }
      lua_pop(L, 1);
    }
  }
  if (found) {
    size_t n;
    const char *k = lua_tolstring(L, -1, &n);
    lpvm_put_binary(b, k, n);
  }
  lua_settop(L, top);
  return found;
}

/* "cannot send a thread value" met in upvalue `name` -> "upvalue 'name' cannot be
** sent: thread" (an inner function's message is kept: it names the innermost). */
static int upvalue_fail(lterm_enc *e, const char *name) {
  if (strncmp(e->err, "upvalue '", 9) == 0) return -1;
  const char *why = strncmp(e->err, "cannot send a ", 14) == 0 ? e->err + 14 : e->err;
  char what[64];
  snprintf(what, sizeof what, "%.*s", (int)strcspn(why, " "), why);
  char msg[LTERM_ERRSZ];
  snprintf(msg, sizeof msg, "upvalue '%s' cannot be sent: %s", *name ? name : "?", what);
  memcpy(e->err, msg, LTERM_ERRSZ);
  return -1;
}

int lfun_put(lterm_enc *e, int f) {
  lua_State *L = e->L;
  lpvm_tbuf *b = e->b;
  uint64_t n;
  if (!e->funs) return lterm_enc_fail(e, "cannot send a %s value", "function");
  if (!e->shared) return LTERM_RETRY;   /* start again as a graph */
  if (lterm_map_get(&e->refs, lua_topointer(L, f), &n)) {
    lpvm_put_tuple(b, 2);
    lpvm_put_atom(b, "lpvm_ref");
    lpvm_put_int(b, (int64_t)n);
    return 0;
  }
  if (lua_iscfunction(L, f)) {
    if (lfun_put_known(L, f, b, 0)) return 0;
    return lterm_enc_fail(e, "cannot send a C function (not in a loaded module)%s", "");
  }
  if (e->depth >= LTERM_DEPTH) return lterm_enc_fail(e, "message nested too deep%s", "");
  if (!lua_checkstack(L, 8)) return lterm_enc_fail(e, "out of memory%s", "");
  lua_pushcfunction(L, dump_cf);
  lua_pushvalue(L, f);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    lua_pop(L, 1);
    return lterm_enc_fail(e, "cannot dump a function (out of memory)%s", "");
  }
  size_t len;
  uint64_t id;
  const char *code = cached_code(L, &len, &id);
  n = ++e->nrefs;
  if (lterm_map_put(&e->refs, lua_topointer(L, f), n) != 0) {
    lua_pop(L, 1);
    return lterm_enc_fail(e, "out of memory%s", "");
  }
  int nup = 0;
  while (lua_getupvalue(L, f, nup + 1)) lua_pop(L, 1), nup++;
  lpvm_put_tuple(b, 3);
  lpvm_put_atom(b, "lpvm_fun");
  lpvm_put_binary(b, code, len);
  lua_pop(L, 1);
  lpvm_put_list(b, (uint32_t)nup);
  e->path[e->depth++] = lua_topointer(L, f);   /* counts toward the nesting limit */
  int rc = 0;
  for (int i = 1; i <= nup && rc == 0; i++) {
    const char *name = lua_getupvalue(L, f, i);
    const void *cell = lua_upvalueid(L, f, i);
    uint64_t c;
    if (cell && lterm_map_get(&e->cells, cell, &c)) {
      lpvm_put_tuple(b, 3);
      lpvm_put_atom(b, "lpvm_upval");
      lpvm_put_int(b, (int64_t)(c >> 8));
      lpvm_put_int(b, (int64_t)(c & 0xff));
    } else if (cell && lterm_map_put(&e->cells, cell, n << 8 | (uint64_t)i) != 0) {
      rc = lterm_enc_fail(e, "out of memory%s", "");
    } else {
      rc = lterm_enc_value(e, lua_gettop(L));
      if (rc == -1) upvalue_fail(e, name ? name : "?");
    }
    lua_pop(L, 1);
  }
  e->depth--;
  if (rc == 0) lpvm_put_nil(b);
  return rc;
}

/* The bytes of lfun_put_spawn's term around the bytecode, which lfun_push_spawn
** compares (tests/test_lfun.c checks they are lterm_put's): {lpvm_graph, {lpvm_fun,
** <<Bytecode>>, ['$env']}} or with []. SMALL_TUPLE_EXT 104, SMALL_ATOM_UTF8_EXT 119,
** LIST_EXT 108, NIL_EXT 106. */
static const uint8_t spawn_head[] = {104, 2, 119, 10, 'l', 'p', 'v', 'm', '_', 'g', 'r', 'a',
                                     'p', 'h', 104, 3, 119, 8, 'l', 'p', 'v', 'm', '_', 'f',
                                     'u', 'n'};
static const uint8_t spawn_env[] = {108, 0, 0, 0, 1, 119, 4, '$', 'e', 'n', 'v', 106};
static const uint8_t spawn_none[] = {106};

/* spawn's function, when it has no upvalue but the globals (`function() end`, or a
** body that only uses globals): the bytes lterm_put would build, without its first
** pass (which stops at the function to start again as a graph) and its maps. Returns
** 0, leaving b alone, for any other function: lterm_put then encodes it. *id is the
** bytecode's number (dump_cf). */
int lfun_put_spawn(lua_State *L, int f, lpvm_tbuf *b, uint64_t *id) {
  if (lua_type(L, f) != LUA_TFUNCTION || lua_iscfunction(L, f) || !lua_checkstack(L, 4))
    return 0;
  f = lua_absindex(L, f);
  int nup = lua_getupvalue(L, f, 1) ? 1 : 0;
  if (nup) {
    int more = lua_getupvalue(L, f, 2) != NULL;
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    int env = !more && lua_rawequal(L, -1, -2);   /* '$env' (lfun_put_known) */
    lua_pop(L, more ? 3 : 2);
    if (!env) return 0;
  }
  size_t len;
  const char *code;
  const void *proto = NULL;   /* proto_of, the function's type known (checked above) */
  if (lraw_ok()) {
    const lraw_lclosure *h = lua_topointer(L, f);
    proto = h && h->tt == (LRAW_VLCL & 0x3F) ? h->proto : NULL;
  }
  const spawn_cache *c = NULL;
  if (proto && lua_rawgetp(L, LUA_REGISTRYINDEX, &spawn_key) == LUA_TUSERDATA)
    c = lua_touserdata(L, -1);   /* at -1 while its bytes are read */
  if (c && c->proto == proto) {
    code = c->code;
    len = c->len;
    *id = c->id;
  } else {
    if (proto) lua_pop(L, 1);
    lua_pushcfunction(L, dump_cf);
    lua_pushvalue(L, f);
    lua_pushboolean(L, 1);
    if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
      lua_pop(L, 1);
      return 0;
    }
    code = cached_code(L, &len, id);
  }
  /* The constant bytes written as they are, with the binary's (BINARY_EXT 109, a
  ** 32-bit length), in one reservation: the puts cost 340 instructions a spawn. */
  const uint8_t *tail = nup ? spawn_env : spawn_none;
  size_t ntail = nup ? sizeof spawn_env : sizeof spawn_none;
  size_t n = sizeof spawn_head + 5 + len + ntail;
  uint8_t *q = len > UINT32_MAX ? NULL
               : b->cap - b->len >= n ? b->data + b->len : lpvm_tbuf_room(b, n);
  if (q) {
    memcpy(q, spawn_head, sizeof spawn_head);
    q += sizeof spawn_head;
    *q++ = 109;
    *q++ = (uint8_t)(len >> 24), *q++ = (uint8_t)(len >> 16);
    *q++ = (uint8_t)(len >> 8), *q++ = (uint8_t)len;
    memcpy(q, code, len);
    memcpy(q + len, tail, ntail);
    b->len += n;
  } else if (len > UINT32_MAX) {
    lpvm_put_binary(b, code, len);   /* records the error, as lterm_put would */
  }
  lua_pop(L, 1);
  return 1;
}

/* ---- decoding ------------------------------------------------------------------------------ */

static int is_atom(lpvm_tread *r, const char *atom) {
  const char *a;
  size_t len;
  lpvm_tread probe = *r;
  if (lpvm_get_atom(&probe, &a, &len) || len != strlen(atom) || memcmp(a, atom, len)) return 0;
  *r = probe;
  return 1;
}

int lfun_push_known(lua_State *L, lpvm_tread *r) {
  if (is_atom(r, "$env")) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    return 1;
  }
  lpvm_tread probe = *r;
  uint32_t n;
  if (lpvm_get_tuple(&probe, &n) || (n != 2 && n != 3)) return 0;
  if (!is_atom(&probe, n == 2 ? "$mod" : "$fn")) return 0;
  const uint8_t *s;
  size_t len;
  char name[256];
  if (lpvm_get_binary(&probe, &s, &len) || len >= sizeof name || memchr(s, 0, len)) return 0;
  memcpy(name, s, len);
  name[len] = 0;
  if (n == 3 && lpvm_get_binary(&probe, &s, &len)) return 0;
  lproc_push_module(L, name, 0);
  if (n == 3) {
    lua_pushlstring(L, (const char *)s, len);
    lua_gettable(L, -2);
    lua_remove(L, -2);
  }
  *r = probe;
  return 1;
}

/* The decoding side of lfun_put_spawn: a spawn's term of one function whose only
** upvalue is '$env' (or none), as it writes them, pushed without the general
** decoder's set-up, the graph's numbering table (a table and its first slot: 700
** instructions a spawn) and the probes for names. Returns 1 with the function pushed,
** or 0, pushing nothing, for any other term (lterm_push_values_ex decodes it then);
** the function is what push_fun would make of it: loaded, or the recycled state's
** kept function (lproc_pool_reuse_fn), its upvalue set to the receiver's globals.
** Only for a trusted term: elsewhere a function term reads as plain data. */
int lfun_push_spawn(lua_State *L, const uint8_t *term, size_t len) {
  lpvm_tread r;
  uint32_t nlist;
  const uint8_t *code;
  size_t clen, head = 1 + sizeof spawn_head;   /* the version byte, then spawn_head */
  if (len <= head || memcmp(term + 1, spawn_head, sizeof spawn_head) != 0 ||
      lpvm_tread_init(&r, term, len))
    return 0;
  r.p = term + head;
  if (lpvm_get_binary(&r, &code, &clen) || clen < 5 || memcmp(code, LUA_SIGNATURE, 4) != 0 ||
      code[4] != 0x54)
    return 0;
  size_t rest = (size_t)(r.end - r.p);
  if (rest == sizeof spawn_env && memcmp(r.p, spawn_env, rest) == 0) nlist = 1;
  else if (rest == sizeof spawn_none && memcmp(r.p, spawn_none, rest) == 0) nlist = 0;
  else return 0;
  if (!lproc_pool_reuse_fn(L, code, clen)) {
    lproc_maker_hint(L, code, clen);
    if (luaL_loadbufferx(L, (const char *)code, clen, LPROC_SPAWN_CHUNK, "b") != LUA_OK)
      lua_error(L);
  }
  int f = lua_gettop(L);
  uint32_t nup = 0;
  while (nup <= nlist && lua_getupvalue(L, f, (int)nup + 1)) lua_pop(L, 1), nup++;
  if (nup != nlist) lterm_dec_bad(L);
  if (nlist) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    lua_setupvalue(L, f, 1);
  }
  return 1;
}

/* The numbering table (on the stack while a graph is decoded: d->refs). */
void lfun_number(lterm_dec *d, int idx) {
  if (!d->shared) return;
  lua_State *L = d->L;
  idx = lua_absindex(L, idx);
  lua_pushvalue(L, idx);
  lua_rawseti(L, d->refs, (lua_Integer)++d->nrefs);
}

static int get_small(lterm_dec *d, uint32_t max) {
  int64_t v;
  if (lpvm_get_int(d->r, &v) || v < 1 || (uint64_t)v > max) lterm_dec_bad(d->L);
  return (int)v;
}

/* {lpvm_fun, Bytecode, Upvalues}: the tuple header has been read. */
static void push_fun(lterm_dec *d, int depth) {
  lua_State *L = d->L;
  const uint8_t *code;
  size_t len;
  uint32_t nlist;
  if (lpvm_get_binary(d->r, &code, &len) || len < 5 || memcmp(code, LUA_SIGNATURE, 4) != 0 ||
      code[4] != 0x54)
    lterm_dec_bad(L);
  if (!lproc_pool_reuse_fn(L, code, len) &&   /* a recycled state's (lproc_pool.c) */
      luaL_loadbufferx(L, (const char *)code, len, "=message", "b") != LUA_OK)
    lua_error(L);
  int f = lua_gettop(L);
  luaL_checkstack(L, 6, "message nested too deep");
  lfun_number(d, f);
  uint32_t nup = 0;
  while (lua_getupvalue(L, f, (int)nup + 1)) lua_pop(L, 1), nup++;
  if (lpvm_get_type(d->r) == LPVM_T_NIL) nlist = 0;   /* [] is NIL_EXT alone */
  else if (lpvm_get_list(d->r, &nlist)) lterm_dec_bad(L);
  if (nlist != nup) lterm_dec_bad(L);
  for (uint32_t i = 1; i <= nup; i++) {
    lpvm_tread probe = *d->r;
    uint32_t n;
    if (lpvm_get_tuple(&probe, &n) == 0 && n == 3 && is_atom(&probe, "lpvm_upval")) {
      *d->r = probe;
      int g = get_small(d, d->nrefs), j = get_small(d, 255);
      lua_rawgeti(L, d->refs, g);
      if (lua_type(L, -1) != LUA_TFUNCTION || lua_iscfunction(L, -1) ||
          !lua_getupvalue(L, -1, j))
        lterm_dec_bad(L);
      lua_pop(L, 1);
      lua_upvaluejoin(L, f, (int)i, lua_gettop(L), j);
      lua_pop(L, 1);
      continue;
    }
    lterm_dec_value(d, depth + 1);
    lua_setupvalue(L, f, (int)i);
  }
  if (lpvm_get_nil(d->r)) lterm_dec_bad(L);
}

int lfun_push(lterm_dec *d, int depth) {
  lua_State *L = d->L;
  lpvm_tread probe = *d->r;
  uint32_t n;
  if (!d->shared) return 0;
  if (lfun_push_known(L, d->r)) return 1;
  if (lpvm_get_tuple(&probe, &n)) return 0;
  if (n == 2 && is_atom(&probe, "lpvm_ref")) {
    *d->r = probe;
    lua_rawgeti(L, d->refs, get_small(d, d->nrefs));
    return 1;
  }
  if (n == 3 && is_atom(&probe, "lpvm_fun")) {
    *d->r = probe;
    push_fun(d, depth);
    return 1;
  }
  return 0;
}

/* ---- the graph wrapper ------------------------------------------------------------------- */

int lfun_graph_begin(lterm_dec *d) {
  lpvm_tread probe = *d->r;
  uint32_t n;
  if (!d->trusted || lpvm_get_tuple(&probe, &n) || n != 2 || !is_atom(&probe, "lpvm_graph"))
    return 0;
  *d->r = probe;
  lua_newtable(d->L);
  d->refs = lua_gettop(d->L);
  d->shared = 1;
  d->nrefs = 0;
  return 1;
}
