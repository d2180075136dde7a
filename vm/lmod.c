/*
** lmod.c -- the `lpvm` module table, and pids and references as Lua values.
**
** The module table starts empty: its metatable's __index finds a function by name in
** the C tables of lmod_proc.c and lmod_msg.c and stores it, so a process pays only for
** the functions it calls (a full table of 40 functions would be ~2.5 KB per process).
**
** A pid is a light userdata holding the 64-bit id. It costs no allocation, compares
** by value and is the same table key wherever it came from, which is what Erlang code
** expects of pids; tostring gives "<0.SLOT.GEN>" (ports "#Port<0.SLOT>") through the
** metatable that every light userdata of the state shares. (A C library that uses
** light userdata of its own would see them print as pids: none of the standard
** libraries does.)
** A reference (make_ref, alias, monitor, send_after, a call's tag) is a light userdata
** too: its 64 bits with LPVM_ID_REF_TAG, bits 62 and 63 together, which no pid or
** port id has (include/lpvm/task.h), so making, decoding and comparing one allocates
** nothing and the same reference is the same table key. lpvm_make_ref's counter stays
** below 2^62; a reference that does not fit (an ETS table id, whose id has bit 63, or
** one an erl node without a name made) is a small full userdata instead, interned per
** state in a weak table so that it too is one value per reference ("references").
*/
#include <lauxlib.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "vm/lproc_int.h"

static const char ref_mt_key = 'r';      /* registry[&ref_mt_key]: full references' metatable */

#define REF_FITS(r) ((r) != 0 && ((r) & LPVM_ID_REF_TAG) == 0)

static void ref_text(char *buf, size_t n, uint64_t r) {
  snprintf(buf, n, "#Ref<0.%u.%u>", (unsigned)(r >> 32), (unsigned)(uint32_t)r);
}

/* ---- light userdata: pids, ports, references --------------------------------------------- */

/* A remote pid shows its node entry's index first, as Erlang shows <N.ID.Serial>. */
static int light_tostring(lua_State *L) {
  lpvm_id id = (lpvm_id)(uintptr_t)lua_touserdata(L, 1);
  unsigned slot = lpvm_id_slot(id), gen = lpvm_id_gen(id);
  if (lmod_light_is_ref(id)) {
    char buf[48];
    ref_text(buf, sizeof buf, id & ~LPVM_ID_REF_TAG);
    lua_pushstring(L, buf);
  } else if (lpvm_id_is_remote(id) && !lpvm_id_is_port(id)) {
    lua_pushfstring(L, "<%d.%d.%d>", (int)((id >> 48) & 0x3fff), (int)(id & 0xffffff),
                    (int)((id >> 24) & 0xffffff));
  } else if (lpvm_id_is_port(id)) {
    lua_pushfstring(L, "#Port<0.%d>", (int)slot);
  } else {
    lua_pushfstring(L, "<0.%d.%d>", (int)slot, (int)gen);
  }
  return 1;
}

static void light_mt(lua_State *L, lproc *p) {
  if (p && p->pid_mt) return;
  /* made in every process that gets a pid (its first argument, often): the keys are
  ** pushed with their lengths and set raw (the table is new), which skips the C
  ** string cache's lookups of lua_setfield and lua_pushstring (~80 instructions each
  ** of the three strings, all new to the state) */
  lua_pushlightuserdata(L, NULL);
  lua_createtable(L, 0, 2);
  lua_pushlstring(L, "__tostring", sizeof "__tostring" - 1);
  lua_pushcfunction(L, light_tostring);
  lua_rawset(L, -3);
  lua_pushlstring(L, "__name", sizeof "__name" - 1);
  lua_pushlstring(L, "pid or reference", sizeof "pid or reference" - 1);   /* what
                                                 ** luaL_typeerror says was given */
  lua_rawset(L, -3);
  lua_setmetatable(L, -2);
  lua_pop(L, 1);
  if (p) p->pid_mt = 1;
}

/* "T expected, got reference" (or pid): the shared metatable's __name names both. */
static void light_typeerror(lua_State *L, int arg, const char *tname) {
  if (lua_type(L, arg) != LUA_TLIGHTUSERDATA) luaL_typeerror(L, arg, tname);
  int ref = lmod_light_is_ref((uint64_t)(uintptr_t)lua_touserdata(L, arg));
  luaL_argerror(L, arg, lua_pushfstring(L, "%s expected, got %s", tname,
                                        ref ? "reference" : "pid"));
}

void lmod_push_pid(lua_State *L, lpvm_id id) {
  light_mt(L, lproc_of(L));
  lua_pushlightuserdata(L, (void *)(uintptr_t)id);
}

lpvm_id lmod_to_pid(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TLIGHTUSERDATA) return 0;
  lpvm_id id = (lpvm_id)(uintptr_t)lua_touserdata(L, idx);
  return lmod_light_is_ref(id) ? 0 : id;
}

lpvm_id lmod_check_pid(lua_State *L, int arg) {
  lpvm_id id = lmod_to_pid(L, arg);
  if (!id) light_typeerror(L, arg, "pid");
  return id;
}

lpvm_id lmod_check_dest(lua_State *L, int arg, int *is_name) {
  *is_name = 0;
  if (lua_type(L, arg) == LUA_TSTRING) {   /* a name with a NUL is never registered */
    size_t len;
    const char *name = lua_tolstring(L, arg, &len);
    *is_name = 1;
    return strlen(name) == len ? lpvm_whereis(name) : 0;
  }
  return lmod_check_pid(L, arg);
}

/* ---- references ---------------------------------------------------------------------------- */

/* A reference that does not fit in a tagged light userdata: a full userdata holding it,
** with the metatable registry[&ref_mt_key], whose array part is as lmod_bin.c's:
** [MT_MARK] is &ref_mt_key (a light userdata no Lua code can make), so telling one
** costs an array read; [MT_INTERN] is the state's intern table (weak values, reference
** -> its userdata), so that one reference is one value. vm/lmod_ets.c checks a table id
** against the metatable (lmod_push_ref_mt). */
enum { MT_MARK = 1, MT_INTERN = 2 };

static int ref_tostring(lua_State *L) {
  char buf[48];
  ref_text(buf, sizeof buf, *(uint64_t *)lua_touserdata(L, 1));
  lua_pushstring(L, buf);
  return 1;
}

void lmod_push_ref_mt(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &ref_mt_key) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lmod_metatable(L, &ref_mt_key, "reference", ref_tostring, NULL);
  lua_pushlightuserdata(L, (void *)&ref_mt_key);
  lua_rawseti(L, -2, MT_MARK);
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "v");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_rawseti(L, -2, MT_INTERN);
}

/* The full userdata of ref, interned. */
static void ref_push_full(lua_State *L, uint64_t ref) {
  lmod_push_ref_mt(L);                                              /* mt */
  lua_rawgeti(L, -1, MT_INTERN);                                    /* mt T */
  if (lua_rawgeti(L, -1, (lua_Integer)ref) != LUA_TUSERDATA) {      /* mt T u */
    lua_pop(L, 1);
    *(uint64_t *)lua_newuserdatauv(L, sizeof(uint64_t), 0) = ref;
    lua_pushvalue(L, -3);
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_rawseti(L, -3, (lua_Integer)ref);
  }
  lua_replace(L, -3);                                               /* u T */
  lua_pop(L, 1);
}

void lmod_push_ref(lua_State *L, uint64_t ref) {
  if (!REF_FITS(ref)) {
    ref_push_full(L, ref);
    return;
  }
  light_mt(L, lproc_of(L));
  lua_pushlightuserdata(L, (void *)(uintptr_t)(ref | LPVM_ID_REF_TAG));
}

uint64_t lmod_to_ref(lua_State *L, int idx) {
  int t = lua_type(L, idx);
  if (t == LUA_TLIGHTUSERDATA) {
    uint64_t v = (uint64_t)(uintptr_t)lua_touserdata(L, idx);
    return lmod_light_is_ref(v) ? v & ~LPVM_ID_REF_TAG : 0;
  }
  if (t != LUA_TUSERDATA || !lua_getmetatable(L, idx)) return 0;
  int ok = lua_rawgeti(L, -1, MT_MARK) == LUA_TLIGHTUSERDATA &&
           lua_touserdata(L, -1) == (void *)&ref_mt_key;
  lua_pop(L, 2);
  return ok ? *(uint64_t *)lua_touserdata(L, idx) : 0;
}

uint64_t lmod_check_ref(lua_State *L, int arg) {
  uint64_t r = lmod_to_ref(L, arg);
  if (!r) light_typeerror(L, arg, "reference");
  return r;
}

void lmod_check_keys(lua_State *L, int t, const char *const known[], const char *what) {
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    int i = 0;
    while (k && known[i] && !lmod_streq(L, -1, known[i])) i++;   /* "link\0x" is no option */
    if (!k || !known[i]) {
      lua_pushfstring(L, "unknown %s %s", what, k ? lmod_push_quoted(L, -1) : luaL_typename(L, -1));
      luaL_argerror(L, t, lua_tostring(L, -1));
    }
  }
}

void lmod_weak_table(lua_State *L, const void *key, const char *mode) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, key) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushstring(L, mode);
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, key);
}

void lmod_metatable(lua_State *L, const void *key, const char *name, lua_CFunction tostr,
                    lua_CFunction eq) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, key) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_createtable(L, 0, 3);
  lua_pushcfunction(L, tostr);
  lua_setfield(L, -2, "__tostring");
  if (eq) {
    lua_pushcfunction(L, eq);
    lua_setfield(L, -2, "__eq");
  }
  lua_pushstring(L, name);
  lua_setfield(L, -2, "__name");
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, key);
}

/* ---- errors ---------------------------------------------------------------------------------- */

static const char *reason_of(int err) {
  switch (err) {
    case LPVM_ENOPROC: return "noproc";
    case LPVM_EINVAL: return "badarg";
    case LPVM_ENOMEM: return "enomem";
    case LPVM_ELIMIT: return "system_limit";
    case LPVM_EEXIST: return "already_registered";
    case LPVM_ECANTSCHED: return "cant_schedule";
    case LPVM_EPRIO: return "priority_forbidden";
    case LPVM_ESTATE: return "not_running";
    case LPVM_EBADTERM: return "badterm";
    case LPVM_ETIMEDOUT: return "timeout";
    default: return "error";
  }
}

int lmod_fail(lua_State *L, int err) {
  lua_pushnil(L);
  lua_pushstring(L, reason_of(err));
  return 2;
}

/* ---- the module table ------------------------------------------------------------------------ */

/* The module's names, hashed once per VM: lmod_index compared the key with strcmp to
** every name of its first letter (three special names first), ~1,400 instructions for
** a process's first `l.receive`. A slot holds a function, or a special name (ets,
** code, eval) with fn NULL. The first table naming a function wins, as in the scan. */
#define NAME_SLOTS 512   /* a power of two; more than twice the names, else no table */
typedef struct name_slot {
  const char *name;      /* NULL: empty */
  size_t len;
  lua_CFunction fn;      /* NULL: ets, code or eval */
} name_slot;
static name_slot name_tab[NAME_SLOTS];
static int name_tab_ok;   /* 0: too many names, the scan below answers */
static pthread_once_t name_once = PTHREAD_ONCE_INIT;

static const lmod_fn *const fn_tabs[] = {lmod_proc_fns, lmod_msg_fns, lmod_port_fns,
                                         lmod_log_fns,  lmod_dist_fns, lmod_bin_fns,
                                         lmod_call_fns, lmod_time_fns};
#define NTABS (sizeof fn_tabs / sizeof *fn_tabs)

static uint32_t name_hash(const char *s, size_t len) {   /* FNV-1a */
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h;
}

/* The slot of (s, len): its own, or the empty one where it would go. */
static name_slot *name_find(const char *s, size_t len) {
  uint32_t i = name_hash(s, len);
  for (;; i++) {
    name_slot *e = &name_tab[i & (NAME_SLOTS - 1)];
    if (!e->name || (e->len == len && memcmp(e->name, s, len) == 0)) return e;
  }
}

static void name_add(const char *name, lua_CFunction fn, int *n) {
  size_t len = strlen(name);
  name_slot *e = name_find(name, len);
  if (e->name) return;   /* named by an earlier table */
  e->name = name;
  e->len = len;
  e->fn = fn;
  ++*n;
}

static void name_build(void) {
  int n = 0, total = 3;
  for (size_t t = 0; t < NTABS; t++)
    for (const lmod_fn *f = fn_tabs[t]; f->name; f++) total++;
  if (total > NAME_SLOTS / 2) return;   /* the scan answers: never with today's ~100 */
  name_add("ets", NULL, &n);
  name_add("code", NULL, &n);
  name_add("eval", NULL, &n);
  for (size_t t = 0; t < NTABS; t++)
    for (const lmod_fn *f = fn_tabs[t]; f->name; f++) name_add(f->name, f->fn, &n);
  name_tab_ok = 1;
}

/* Whether the key names something: 1 and its function (NULL: ets, code or eval), or 0.
** Without the table, the scan (strcmp stops at a NUL: there "receive\0x" named
** receive, which the table, comparing the whole key, does not). */
static int name_lookup(const char *k, size_t len, lua_CFunction *fn) {
  pthread_once(&name_once, name_build);
  *fn = NULL;
  if (name_tab_ok) {
    const name_slot *e = name_find(k, len);
    *fn = e->fn;
    return e->name != NULL;
  }
  if (strcmp(k, "ets") == 0 || strcmp(k, "code") == 0 || strcmp(k, "eval") == 0) return 1;
  for (size_t t = 0; t < NTABS; t++)
    for (const lmod_fn *f = fn_tabs[t]; f->name; f++)
      if (f->name[0] == k[0] && strcmp(f->name, k) == 0) {
        *fn = f->fn;
        return 1;
      }
  return 0;
}

static int lmod_index(lua_State *L) {
  if (lua_type(L, 2) != LUA_TSTRING) return 0;
  size_t len;
  const char *k = lua_tolstring(L, 2, &len);
  lua_CFunction fn;
  if (!name_lookup(k, len, &fn)) return 0;
  if (fn) {
    lua_pushcfunction(L, fn);
  } else if (k[0] == 'e' && k[1] == 't') {
    /* lpvm.ets is require "ets"; lpvm.code, lpvm.eval: vm/lib/lpvm/code.lua and
    ** eval.lua, on first use */
    luaL_requiref(L, "ets", lmod_ets_open, 0);
  } else {
    lua_getglobal(L, "require");
    lua_pushstring(L, k[0] == 'c' ? "lpvm.code" : "lpvm.eval");
    lua_call(L, 1, 1);
  }
  lua_pushvalue(L, 2);
  lua_pushvalue(L, -2);
  lua_rawset(L, 1);
  return 1;
}

/* pairs(lpvm) should list every function: load them all first. */
static int lmod_pairs(lua_State *L) {
  for (size_t t = 0; t < NTABS; t++)
    for (const lmod_fn *f = fn_tabs[t]; f->name; f++) {
      lua_pushcfunction(L, f->fn);
      lua_setfield(L, 1, f->name);
    }
  lua_getglobal(L, "next");
  lua_pushvalue(L, 1);
  lua_pushnil(L);
  return 3;
}

/* The module table is made with one hash slot: every process that requires the
** module uses a function of it, whose first __index stored it into an empty table
** through a resize (~800 instructions); an unused module table keeps 24 B more. */
int lmod_open(lua_State *L) {
  lua_createtable(L, 0, 1);
  lua_createtable(L, 0, 2);   /* names pushed with their lengths and set raw, as light_mt */
  lua_pushlstring(L, "__index", sizeof "__index" - 1);
  lua_pushcfunction(L, lmod_index);
  lua_rawset(L, -3);
  lua_pushlstring(L, "__pairs", sizeof "__pairs" - 1);
  lua_pushcfunction(L, lmod_pairs);
  lua_rawset(L, -3);
  lua_setmetatable(L, -2);
  return 1;
}
