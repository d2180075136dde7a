/*
** llibs.c -- the standard libraries, present from the first line, loaded on first use.
**
** A process starts with an empty globals table whose metatable's __index resolves a
** missing name once: a library name opens that library (as luaL_requiref would, so
** it also lands in package.loaded), a base-library name opens the base library into
** a scratch table and copies just that function, `lpvm` opens the module. The result
** is stored in the globals table, so the next access is a plain table hit. Strings
** get a stand-in metatable whose __index and arithmetic metamethods open the string
** library, which then installs its own metatable. Both are one table until Lua code
** could reach it (`exposed`: then two, as lua5.4's would be): 80 bytes a process.
** An idle process thus holds only what it used (Figure 2 of the luaproc paper: a state with every library is 4x the
** size of a bare one).
**
** Coroutines: `coroutine.resume` and `coroutine.wrap` are replaced by versions that
** pass a scheduler yield (a count-hook preemption or a blocking lpvm call made inside
** the coroutine) up to the process's main thread and resume the coroutine again
** afterwards, so a coroutine can block in receive and can be preempted.
** `coroutine.yield` on the process's own thread raises, as lua5.4's on its main thread
** (it would otherwise yield to the scheduler and lose its values).
*/
#include <lauxlib.h>
#include <limits.h>
#include <pthread.h>
#include <lualib.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vm/lproc_int.h"
#include "vm/lraw.h"

typedef struct lib {
  const char *name;
  lua_CFunction open;
} lib;

static int open_coroutine(lua_State *L);
static int open_package(lua_State *L);

/* os and io with lsys.c's os.execute and io.popen (no system(), no popen()). */
static int open_os(lua_State *L) {
  luaopen_os(L);
  lsys_patch_os(L);
  return 1;
}

static int open_io(lua_State *L) {
  luaopen_io(L);
  lsys_patch_io(L);
  return 1;
}

/* math with a seed of each state's own. Lua seeds a new state's generator, and
** math.randomseed() without arguments, from the time in seconds and the state's
** address: a recycled state (lproc_pool.c) keeps its address and a new one often
** gets a freed one's, so processes started in one second drew the same numbers.
** Each opening, and each randomseed(), takes the VM's next seed instead (splitmix64
** over a counter from a start that differs per run and per OS process), as each
** Erlang process gets rand's seed of its own. */
static uint64_t seed_base;
static _Atomic uint64_t seed_count;
static pthread_once_t seed_once = PTHREAD_ONCE_INIT;

static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

static void seed_init(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  seed_base = mix64((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
              mix64((uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)&ts);
}

static void push_seeds(lua_State *L) {
  pthread_once(&seed_once, seed_init);
  uint64_t x = seed_base + atomic_fetch_add_explicit(&seed_count, 1, memory_order_relaxed) *
                               2 * 0x9e3779b97f4a7c15u;
  lua_pushinteger(L, (lua_Integer)mix64(x));
  lua_pushinteger(L, (lua_Integer)mix64(x + 0x9e3779b97f4a7c15u));
}

/* math.randomseed: liblua's, run in this frame (its upvalue 1, the generator, is this
** closure's too, and an error names 'randomseed'); without arguments, the next seed. */
static int math_randomseed(lua_State *L) {
  lua_CFunction seed = lua_tocfunction(L, lua_upvalueindex(2));
  if (lua_isnone(L, 1)) push_seeds(L);
  return seed(L);
}

static int open_math(lua_State *L) {
  luaopen_math(L);
  int t = lua_gettop(L);
  lua_getfield(L, t, "randomseed");
  if (lua_iscfunction(L, -1) && lua_getupvalue(L, -1, 1)) {   /* the generator */
    lua_pushvalue(L, -2);
    lua_pushcclosure(L, math_randomseed, 2);
    lua_pushvalue(L, -1);
    lua_setfield(L, t, "randomseed");
    push_seeds(L);
    lua_call(L, 2, 0);
  }
  lua_settop(L, t);
  return 1;
}

static const lib libs[] = {
    {"string", luaopen_string}, {"table", luaopen_table},
    {"math", open_math},     {"io", open_io},
    {"os", open_os},         {"coroutine", open_coroutine},
    {"utf8", luaopen_utf8},     {"debug", luaopen_debug},
    {"package", open_package},  {"lpvm", lmod_open},
    {NULL, NULL}};

/* Names the base library defines (Lua 5.4). */
static const char *const base_names[] = {
    "assert", "collectgarbage", "dofile", "error", "getmetatable", "ipairs",
    "loadfile", "load", "next", "pairs", "pcall", "print", "warn", "rawequal",
    "rawlen", "rawget", "rawset", "select", "setmetatable", "tonumber", "tostring",
    "type", "xpcall", NULL};

static void split(lua_State *L);

/* Lua code may from now on hold the lazy globals' metatable or the string stand-in
** (debug.getmetatable, getmetatable, a C module): first they become two tables (split),
** as a stand-alone lua's would be; the cleaning of the state (lproc_pool.c) then makes
** them anew instead of keeping them (llibs_take). libs_exposed 2 (an adopted state,
** lproc.c): exposed, but the tables may still be one. */
static void exposed(lua_State *L) {
  lproc *p = lproc_of(L);
  if (!p || p->libs_exposed != 1) split(L);
  if (p) p->libs_exposed = 1;
}

/* Open library `l` like luaL_requiref(L, name, open, 1): leaves it on the stack. */
static void open_lib(lua_State *L, const lib *l) {
  if (l->open == luaopen_debug) exposed(L);
  luaL_requiref(L, l->name, l->open, 1);
}

/* Push base function `name`: open the base library into a scratch table (it writes
** into the globals table it finds in the registry, so swap that in for the call). */
static void push_base_opened(lua_State *L, const char *name) {
  exposed(L);   /* this getmetatable is not watched */
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);   /* real globals */
  lua_newtable(L);                                       /* scratch */
  lua_pushvalue(L, -1);
  lua_rawseti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  lua_pushcfunction(L, luaopen_base);
  int rc = lua_pcall(L, 0, 0, 0);
  lua_pushvalue(L, rc == LUA_OK ? -2 : -3);              /* restore, even on error */
  lua_rawseti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  if (rc != LUA_OK) lua_error(L);
  lua_getfield(L, -1, name);
  lua_replace(L, -3);
  lua_pop(L, 1);
}

/* The base library's functions are plain C functions (no upvalues): found once per
** VM in a scratch state, so a process's first `select` or `pcall` pushes a pointer
** instead of opening the whole library again for each name (a gen_server process
** touches about ten of them: that was a seventh of starting one). */
#define NBASE (sizeof base_names / sizeof *base_names - 1)
#define GETMT 4   /* base_names[GETMT] is "getmetatable" (base_find checks) */
static lua_CFunction base_fns[NBASE];
static pthread_once_t base_once = PTHREAD_ONCE_INIT;

static void base_find(void) {
  if (strcmp(base_names[GETMT], "getmetatable") != 0) return;   /* GETMT names it */
  lua_State *S = luaL_newstate();
  if (!S) return;   /* then every name is opened as before */
  luaopen_base(S);
  for (size_t i = 0; i < NBASE; i++) {
    lua_getfield(S, -1, base_names[i]);
    if (lua_iscfunction(S, -1) && lua_getupvalue(S, -1, 1) == NULL)
      base_fns[i] = lua_tocfunction(S, -1);
    lua_settop(S, 1);
  }
  lua_close(S);
}

/* getmetatable, watched: it can hand Lua code the globals' metatable or the
** string stand-in. */
static int watched_getmetatable(lua_State *L) {
  exposed(L);
  return base_fns[GETMT](L);
}

static void push_base(lua_State *L, size_t i) {
  pthread_once(&base_once, base_find);
  if (i == GETMT && base_fns[i]) lua_pushcfunction(L, watched_getmetatable);
  else if (base_fns[i]) lua_pushcfunction(L, base_fns[i]);
  else push_base_opened(L, base_names[i]);
}

/* The preload entries open_package and lcode_install make besides the libraries. */
static const char *const c_preloads[] = {"luaproc", "ets", "_G", "lpvm.codeserver",
                                         "lpvm.evalserver", NULL};

static int c_preload(const char *name) {
  for (const char *const *n = c_preloads; *n; n++)
    if (strcmp(*n, name) == 0) return 1;
  return 0;
}

/* `require` before the package library is open: what is loaded already, `lpvm` and
** the standard libraries need no package library, and nearly every process requires
** only those (`local lpvm = require "lpvm"`). Opening package costs a process about
** 3.7 KB (the searchers, paths, the code server's hooks), half an idle process; so
** only another name opens it, which also replaces this global by the real require,
** and is handed to that -- unless the code server holds that module's bytecode
** (lcode_require: a gen_server child loads gen_server, gen and its callbacks so).
** The answers are the real require's: (module, ":preload:" or the module's path). */
/* light_require's common case, `require "lpvm"` not loaded yet: what open_lib's
** luaL_requiref(L, "lpvm", lmod_open, 1) does (package.loaded.lpvm, then the global
** `lpvm`, both set as lua_setfield would) without what it repeats of light_require's
** work (package.loaded found again, the name made again from C) and without calling
** lmod_open through lua_call: that call frame was the deepest of a process that
** requires lpvm and then waits, and Lua keeps a thread's frames (64 B each) until a
** collection shrinks them. Stack: the name, package.loaded. */
static int require_lpvm(lua_State *L) {
  lmod_open(L);                                          /* 3: the module */
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 3);
  lua_settable(L, 2);                                    /* loaded.lpvm = module */
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 3);
  lua_settable(L, 4);                                    /* lpvm = module */
  lua_settop(L, 3);
  lua_pushlstring(L, ":preload:", sizeof ":preload:" - 1);   /* no C-string cache */
  return 2;
}

static int light_require(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  lua_settop(L, 1);
  /* the name "_LOADED" pushed once with its length (lua_getfield and lua_setfield
  ** each took it through liblua's C-string cache) */
  lua_pushlstring(L, LUA_LOADED_TABLE, sizeof LUA_LOADED_TABLE - 1);   /* 2 */
  lua_pushvalue(L, 2);
  if (lua_gettable(L, LUA_REGISTRYINDEX) != LUA_TTABLE) {             /* 3 */
    /* luaL_getsubtable's, with a slot for the module about to be loaded (a resize
    ** of the new empty table saved, ~800 instructions) */
    lua_pop(L, 1);
    lua_createtable(L, 0, 1);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 3);
    lua_settable(L, LUA_REGISTRYINDEX);
  }
  lua_replace(L, 2);                                                   /* 2: loaded */
  lua_pushvalue(L, 1);   /* the name as a Lua string: no C-string cache, no interning */
  if (lua_gettable(L, 2) != LUA_TNIL) return 1;         /* loaded already */
  lua_pop(L, 1);
  if (lua_rawlen(L, 1) == 4 && memcmp(name, "lpvm", 4) == 0) return require_lpvm(L);
  for (const lib *l = libs; l->name; l++)
    if (name[0] == l->name[0] && l->open != open_package && strcmp(name, l->name) == 0) {
      open_lib(L, l);
      lua_pushliteral(L, ":preload:");
      return 2;
    }
  /* a Lua module the code server holds: loaded as the real require would find it, if
  ** no preload entry would answer first (package not open: its preloads are ours) */
  if (lua_getfield(L, 2, "package") == LUA_TNIL && !c_preload(name)) {
    lua_pop(L, 1);
    int n = lcode_require(L, name);
    if (n) return n;
  } else {
    lua_pop(L, 1);
  }
  open_lib(L, &libs[8]);                   /* package: require is the real one now */
  lua_pop(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  lua_getfield(L, -1, "require");
  lua_pushvalue(L, 1);
  lua_call(L, 1, LUA_MULTRET);
  return lua_gettop(L) - 3;
}

/* __index of the globals table: (t, key). */
static int globals_index(lua_State *L) {
  const char *k = lua_tostring(L, 2);
  if (lua_type(L, 2) != LUA_TSTRING) return 0;
  for (const lib *l = libs; l->name; l++)
    if (k[0] == l->name[0] && strcmp(k, l->name) == 0) {   /* first letters: fewer calls */
      open_lib(L, l);
      return 1;
    }
  if (strcmp(k, "require") == 0) {   /* the light require until package is opened */
    lua_pushcfunction(L, light_require);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, -2);
    lua_rawset(L, 1);
    return 1;
  }
  if (strcmp(k, "_G") == 0) {
    lua_pushvalue(L, 1);
  } else if (strcmp(k, "_VERSION") == 0) {
    lua_pushliteral(L, LUA_VERSION);
  } else {
    const char *const *n;
    for (n = base_names; *n && ((*n)[0] != k[0] || strcmp(*n, k) != 0); n++) {}
    if (!*n) return 0;
    push_base(L, (size_t)(n - base_names));
  }
  lua_pushvalue(L, 2);
  lua_pushvalue(L, -2);
  lua_rawset(L, 1);
  return 1;
}

/* ---- strings -------------------------------------------------------------------------- */

/* Open the string library (it replaces the stand-in metatable) and push the real
** metatable's field `event`. */
static void string_real(lua_State *L, const char *event) {
  open_lib(L, &libs[0]);
  lua_pop(L, 1);
  lua_pushliteral(L, "");
  lua_getmetatable(L, -1);
  lua_getfield(L, -1, event);
  lua_replace(L, -3);
  lua_pop(L, 1);
}

static int string_index(lua_State *L) {
  string_real(L, "__index");
  lua_pushvalue(L, 2);
  lua_gettable(L, -2);
  return 1;
}

static int lazy_index(lua_State *L);
static int has_index(lua_State *L, int t, lua_CFunction f);

/* The error of arithmetic with the globals table (operands 1 and 2), where the first
** Lua function up the stack is: with a string, the string library's ("attempt to add
** a 'string' with a 'table'"), else the VM's (less the variable's name). */
static int arith_error(lua_State *L, const char *event) {
  lua_Debug ar;
  int lvl = 1;
  while (lua_getstack(L, lvl, &ar) && lua_getinfo(L, "l", &ar) && ar.currentline <= 0) lvl++;
  luaL_where(L, lvl);
  if (lua_type(L, 1) == LUA_TSTRING || lua_type(L, 2) == LUA_TSTRING)
    lua_pushfstring(L, "%sattempt to %s a '%s' with a '%s'", lua_tostring(L, -1), event + 2,
                    luaL_typename(L, 1), luaL_typename(L, 2));
  else
    lua_pushfstring(L, "%sattempt to perform arithmetic on a %s value", lua_tostring(L, -1),
                    luaL_typename(L, lua_type(L, 1) == LUA_TNUMBER ? 2 : 1));
  return lua_error(L);
}

/* Arithmetic on strings ("10" + 1) is the string library's metamethods in 5.4. The
** globals table shares this metatable until it is exposed (llibs_install): arithmetic
** with it is the error a stand-alone lua raises (less the variable's name), not the
** string library's, whose trymt would call this stub of the other operand again. */
static int string_arith(lua_State *L, const char *event) {
  lua_settop(L, 2);
  for (int i = 1; i <= 2; i++) {
    if (lua_type(L, i) == LUA_TTABLE && lua_getmetatable(L, i) && has_index(L, 3, lazy_index))
      return arith_error(L, event);
    lua_settop(L, 2);
  }
  string_real(L, event);
  lua_insert(L, 1);
  lua_call(L, 2, 1);
  return 1;
}

/* __index of the one table llibs_install makes for both the globals and strings: a
** string's lookup is the stand-in's, any other the globals'. */
static int lazy_index(lua_State *L) {
  return lua_type(L, 1) == LUA_TSTRING ? string_index(L) : globals_index(L);
}

#define ARITH(fn, ev) static int fn(lua_State *L) { return string_arith(L, ev); }
ARITH(s_add, "__add")
ARITH(s_sub, "__sub")
ARITH(s_mul, "__mul")
ARITH(s_div, "__div")
ARITH(s_mod, "__mod")
ARITH(s_pow, "__pow")
ARITH(s_unm, "__unm")
ARITH(s_idiv, "__idiv")

/* The stand-in's fields with their names' lengths: llibs_install pushes each name
** with lua_pushlstring, which goes to the interning directly; lua_setfield's C name
** first takes liblua's C-string cache (a modulo and two strcmp), which on a new state
** never hits (every name is set once). All nine names are liblua's metamethod names,
** interned by lua_newstate already, so no string is made. The same table is the
** globals' metatable (its __index, lazy_index, tells the two apart) until Lua code
** could reach it (exposed: split). */
#define STUB(k, f) {k, sizeof k - 1, f}
static const struct {
  const char *name;
  size_t len;
  lua_CFunction fn;
} string_stub[] = {
    STUB("__index", lazy_index), STUB("__add", s_add), STUB("__sub", s_sub),
    STUB("__mul", s_mul),          STUB("__div", s_div), STUB("__mod", s_mod),
    STUB("__pow", s_pow),          STUB("__unm", s_unm), STUB("__idiv", s_idiv)};
#define NSTUB (sizeof string_stub / sizeof *string_stub)

/* ---- warn(): off until "@on" (or lua -W), as the stand-alone lua ---------------------- */

static void warn_on(void *ud, const char *msg, int tocont);
static void warn_cont(void *ud, const char *msg, int tocont);

static void warn_off(void *ud, const char *msg, int tocont) {
  lua_State *L = ud;
  if (!tocont && strcmp(msg, "@on") == 0) lua_setwarnf(L, warn_on, L);
}

static void warn_on(void *ud, const char *msg, int tocont) {
  lua_State *L = ud;
  if (!tocont && *msg == '@') {
    if (strcmp(msg, "@off") == 0) lua_setwarnf(L, warn_off, L);
    return;
  }
  fprintf(stderr, "Lua warning: ");
  warn_cont(ud, msg, tocont);
}

static void warn_cont(void *ud, const char *msg, int tocont) {
  lua_State *L = ud;
  fputs(msg, stderr);
  if (tocont) {
    lua_setwarnf(L, warn_cont, L);
  } else {
    fputc('\n', stderr);
    fflush(stderr);
    lua_setwarnf(L, warn_on, L);
  }
}

/* 1 if the table at t has field __index = the C function f. */
static int has_index(lua_State *L, int t, lua_CFunction f) {
  lua_pushliteral(L, "__index");
  int ok = lua_rawget(L, t) == LUA_TFUNCTION && lua_tocfunction(L, -1) == f;
  lua_pop(L, 1);
  return ok;
}

/* The same read in place (vm/lraw.h, its tail trusted): metatable mt's __index is the
** light C function f. */
static int raw_has_index(const lraw_global *g, const lraw_table *mt, lua_CFunction f) {
  const lraw_tvalue *v = mt ? lraw_get_shrstr(mt, g->tmname[0]) : NULL;
  return v && v->tt == LRAW_VLCF && v->v.f == f;
}

/* The globals table as the registry holds it (vm/lraw.h), or NULL. */
static const lraw_table *raw_globals(const lraw_global *g) {
  const lraw_table *reg = g->l_registry.v.gc;
  if (g->l_registry.tt != LRAW_VTABLE || lraw_real_asize(reg) < LUA_RIDX_GLOBALS) return NULL;
  const lraw_tvalue *v = &reg->array[LUA_RIDX_GLOBALS - 1];
  return v->tt == LRAW_VTABLE ? v->v.gc : NULL;
}

/* The cleaning of a finished state, before its registry is wiped: push the lazy
** globals' metatable and the string stand-in (string's metatable) if the owner left
** them as llibs_install made them, each else nil. Untouched means that no Lua code
** could reach them (nothing exposed them: see `exposed`) and each is still where
** it was put (setmetatable(_G, x) needs no getmetatable; the string library
** replaces the stand-in when first used). Neither refers to anything but C
** functions, so kept they hold nothing of the owner. Returns 1 if the stand-in is
** kept: the string type's metatable must stay. With vm/lraw.h's tail trusted, "still
** where it was put" is read in place (the two __index lookups through the API were
** about 400 of this function's 770 instructions), and the stand-in's place holds
** true instead of the table (it stays string's metatable; pushing it took a string
** and a lua_getmetatable, 240 more): either way a true value means kept. */
int llibs_take(lua_State *L) {
  lproc *p = lproc_of(L);
  int keep = p && !p->libs_exposed;
  int top = lua_gettop(L);
  if (keep && lraw_tail_ok()) {
    const lraw_global *g = lraw_g(L);
    const lraw_table *G = raw_globals(g);
    int kg = G && raw_has_index(g, G->metatable, lazy_index);
    int ks = raw_has_index(g, g->mt[LUA_TSTRING], lazy_index);
    if (kg) {
      lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
      lua_getmetatable(L, top + 1);
      lua_replace(L, top + 1);
    } else {
      lua_pushnil(L);
    }
    lua_pushboolean(L, ks);   /* it stays where it is: its place says so */
    return ks;
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);   /* top + 1 */
  if (keep && lua_getmetatable(L, top + 1) && has_index(L, top + 2, lazy_index)) {
    lua_replace(L, top + 1);
  } else {
    lua_settop(L, top);
    lua_pushnil(L);
  }
  lua_pushliteral(L, "");                                /* top + 2 */
  if (keep && lua_getmetatable(L, top + 2) && has_index(L, top + 3, lazy_index)) {
    lua_replace(L, top + 2);
  } else {
    lua_settop(L, top + 1);
    lua_pushnil(L);
  }
  return lua_type(L, top + 2) == LUA_TTABLE;
}

/* The cleaning's shortcut (lproc_pool.c clean_bare), read in place (vm/lraw.h's tail):
** the owner left both lazy tables where llibs_install put them, nothing exposed them,
** no basic type but strings has a metatable, and the globals table is empty (no array,
** no hash part: as a new one). Then nothing of llibs_install's is to be made again:
** llibs_install(L, LLIBS_IN_PLACE) only sets the warning function. */
int llibs_in_place(lua_State *L) {
  lproc *p = lproc_of(L);
  if (!p || p->libs_exposed || !lraw_tail_ok()) return 0;
  const lraw_global *g = lraw_g(L);
  const lraw_table *const *mt = g->mt;   /* table and userdata: always NULL */
  if (mt[LUA_TNIL] || mt[LUA_TBOOLEAN] || mt[LUA_TLIGHTUSERDATA] || mt[LUA_TNUMBER] ||
      mt[LUA_TFUNCTION] || mt[LUA_TTHREAD] || mt[LUA_TTABLE] || mt[LUA_TUSERDATA])
    return 0;
  const lraw_table *G = raw_globals(g);
  return G && !G->lastfree && lraw_real_asize(G) == 0 &&
         raw_has_index(g, G->metatable, lazy_index) &&
         raw_has_index(g, g->mt[LUA_TSTRING], lazy_index);
}

/* Lazy globals and the string stand-in: one table, the metatable of both (stub's
** fields; its __index, lazy_index, tells a string from the globals table), which
** saves a new state a table and its node (80 B) and their making; exposed() splits
** it in two before Lua code can reach either. kept: the stack index of llibs_take's
** two values (the globals' metatable, the stand-in kept: either nil), or 0 for a new
** state. */
void llibs_install(lua_State *L, int kept) {
  lua_setwarnf(L, lproc_cfg.warnings ? warn_on : warn_off, L);
  if (kept == LLIBS_IN_PLACE) return;   /* llibs_in_place: both where they were */
  int ks = kept && lua_toboolean(L, kept + 1);   /* the table is still string's */
  if (kept && lua_type(L, kept) == LUA_TTABLE) {
    lua_pushvalue(L, kept);
  } else if (ks) {
    lua_pushlstring(L, "", 0);
    lua_getmetatable(L, -1);
    lua_remove(L, -2);
  } else {
    lua_createtable(L, 0, (int)NSTUB);
    for (size_t i = 0; i < NSTUB; i++) {
      lua_pushlstring(L, string_stub[i].name, string_stub[i].len);
      lua_pushcfunction(L, string_stub[i].fn);
      lua_rawset(L, -3);   /* the table is new: raw is what lua_setfield did */
    }
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  lua_pushvalue(L, -2);
  lua_setmetatable(L, -2);
  lua_pop(L, 1);
  if (!ks) {
    lua_pushlstring(L, "", 0);   /* the C-string cache skipped */
    lua_pushvalue(L, -2);
    lua_setmetatable(L, -2);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* The one table of llibs_install made two, before Lua code can reach it: the globals
** get a metatable of their own (__index only), and the table, if still string's,
** becomes the stand-in alone (__index string_index). Nothing held it, so no one
** sees the change. */
static void split(lua_State *L) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);   /* G */
  int g = lua_gettop(L);
  if (lua_getmetatable(L, g) && has_index(L, g + 1, lazy_index)) {   /* G T */
    lua_pushlstring(L, "", 0);
    if (lua_getmetatable(L, -1) && lua_rawequal(L, -1, g + 1)) {
      lua_pushlstring(L, "__index", sizeof "__index" - 1);
      lua_pushcfunction(L, string_index);
      lua_rawset(L, g + 1);
    }
    lua_settop(L, g);
    lua_createtable(L, 0, 1);
    lua_pushlstring(L, "__index", sizeof "__index" - 1);
    lua_pushcfunction(L, globals_index);
    lua_rawset(L, -3);
    lua_setmetatable(L, g);
  }
  lua_settop(L, g - 1);
}
/* ---- package: `require "lpvm"` finds the module ---------------------------------------- */

/* require "string" (and every other library name) returns the library even before
** the global was touched: a preload entry opens it as the global access would, so
** both give the same table (lua-socket starts with `local string = require("string")`). */
static int preload_lib(lua_State *L) {
  open_lib(L, &libs[lua_tointeger(L, lua_upvalueindex(1))]);
  return 1;
}

static int preload_G(lua_State *L) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  return 1;
}

/* The boot script's folder: set once before the boot process starts, read by every
** process's open_package (the spawn that follows orders the accesses). */
static _Atomic(char *) script_dir;

void llibs_set_script_dir(const char *dir) {
  char *d = dir ? strdup(dir) : NULL;
  free(atomic_exchange(&script_dir, d));
}

/* Where the shipped Lua libraries are: $LPVM_LIBDIR, else the build's choice (the
** source tree's vm/lib for a build folder). */
#ifndef LPVM_LIBDIR
#define LPVM_LIBDIR "vm/lib"
#endif

/* package.loadlib(path, funcname), upvalue 1 the real one: glibc's dlopen copies
** the name onto the stack while it searches the library path, so a name of
** megabytes would overflow a worker's stack; no file name is longer than PATH_MAX.
** A NUL would cut either name silently. */
static int loadlib_checked(lua_State *L) {
  size_t len;
  luaL_checklstring(L, 1, &len);
  lmod_cstr(L, 1, 1, "path");
  luaL_checkstring(L, 2);
  lmod_cstr(L, 2, 2, "function name");
  if (len >= PATH_MAX) {
    lua_pushnil(L);
    lua_pushfstring(L, "file name too long (%I bytes; PATH_MAX is %d)", (lua_Integer)len,
                    PATH_MAX);
    lua_pushliteral(L, "open");   /* as loadlib: the library could not be opened */
    return 3;
  }
  lua_settop(L, 2);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, 2, LUA_MULTRET);
  return lua_gettop(L);
}

static int open_package(lua_State *L) {
  exposed(L);   /* C modules see everything */
  if (lproc_cfg.noenv) {   /* lua -E: package ignores LUA_PATH and LUA_CPATH */
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
  }
  luaopen_package(L);
  lua_getfield(L, -1, "loadlib");
  lua_pushcclosure(L, loadlib_checked, 1);
  lua_setfield(L, -2, "loadlib");
  ldl_wrap_package(L);   /* dlopen and dlclose under one lock (ldl.c) */
  lua_getfield(L, -1, "preload");
  lua_pushcfunction(L, lmod_open);
  lua_setfield(L, -2, "lpvm");
  lua_pushcfunction(L, luaproc_open);   /* vm/luaproc.c: luaproc compatibility */
  lua_setfield(L, -2, "luaproc");
  lua_pushcfunction(L, lmod_ets_open);  /* vm/lmod_ets.c: shared tables */
  lua_setfield(L, -2, "ets");
  for (const lib *l = libs; l->name; l++) {
    if (l->open == lmod_open || l->open == open_package) continue;
    lua_pushinteger(L, l - libs);
    lua_pushcclosure(L, preload_lib, 1);
    lua_setfield(L, -2, l->name);
  }
  lua_pushcfunction(L, preload_G);
  lua_setfield(L, -2, "_G");
  lua_pop(L, 1);
  lcode_install(L, -1);   /* Lua modules: the VM-wide code server (lcode.c) */
  /* The Lua libraries that ship with lpvm (vm/lib/: OTP behaviours, ets, code...)
  ** come first on package.path, so `require "gen_server"` finds them in every
  ** process and loads them only when asked for.
  ** The boot script's folder follows, so a script finds its siblings (modules
  ** spawned by name included) wherever it is run from. */
  const char *dir = getenv("LPVM_LIBDIR");
  if (!dir || !*dir) dir = LPVM_LIBDIR;
  const char *sd = atomic_load(&script_dir);
  lua_getfield(L, -1, "path");
  if (sd)
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s/?.lua;%s/?/init.lua;%s", dir, dir, sd, sd,
                    lua_tostring(L, -1));
  else
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, lua_tostring(L, -1));
  lua_setfield(L, -3, "path");
  lua_pop(L, 1);
  if (sd) {
    lua_getfield(L, -1, "cpath");
    lua_pushfstring(L, "%s/?.so;%s", sd, lua_tostring(L, -1));
    lua_setfield(L, -3, "cpath");
    lua_pop(L, 1);
  }
  return 1;
}

/* ---- coroutines that pass scheduler yields through ------------------------------------- */

/* After lua_resume(co) returned `st`: a scheduler yield travels up (our own thread
** yields, and resumes co when it is resumed); anything else is the user's. Returns
** the number of results for resume (ok flag first) or raises for wrap. */
static int co_finish(lua_State *L, lua_State *co, int st, int nres, int wrap);

static int co_resume_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  int wrap = (int)ctx;
  lua_State *co = lua_tothread(L, wrap ? lua_upvalueindex(1) : 1);
  int nres;
  lua_State *prev = lproc_slice_enter(co);
  int st = lua_resume(co, L, 0, &nres);
  lproc_slice_leave(prev);
  return co_finish(L, co, st, nres, wrap);
}

static int co_finish(lua_State *L, lua_State *co, int st, int nres, int wrap) {
  lproc *p = lproc_of(L);
  if (st == LUA_YIELD && p && p->sched_yield) {
    lua_pop(co, nres);
    if (lua_isyieldable(L))   /* pass it up; the flag stays for the next level */
      return lua_yieldk(L, 0, (lua_KContext)wrap, co_resume_k);
    p->sched_yield = 0;       /* can't pass it: resume co at once */
    if (p->wait == LP_RUN) {
      lua_State *prev = lproc_slice_enter(co);
      st = lua_resume(co, L, 0, &nres);
      lproc_slice_leave(prev);
      return co_finish(L, co, st, nres, wrap);
    }
    return luaL_error(L, "cannot block inside a coroutine resumed from C code");
  }
  if (st == LUA_OK || st == LUA_YIELD) {
    if (!lua_checkstack(L, nres + 1)) return luaL_error(L, "too many results to resume");
    if (!wrap) lua_pushboolean(L, 1);
    lua_xmove(co, L, nres);
    return wrap ? nres : nres + 1;
  }
  lua_xmove(co, L, 1);   /* the error object */
  if (wrap) {
    if (st != LUA_ERRMEM) (void)lua_resetthread(co);   /* as coroutine.wrap does */
    if (lua_type(L, -1) == LUA_TSTRING) {
      luaL_where(L, 1);
      lua_insert(L, -2);
      lua_concat(L, 2);
    }
    return lua_error(L);
  }
  lua_pushboolean(L, 0);
  lua_insert(L, -2);
  return 2;
}

static int co_start(lua_State *L, lua_State *co, int first, int wrap) {
  int narg = lua_gettop(L) - first + 1;
  int st = lua_status(co);
  if (!lua_checkstack(co, narg)) {
    if (wrap) return luaL_error(L, "too many arguments to resume");
    lua_pushboolean(L, 0);
    lua_pushliteral(L, "too many arguments to resume");
    return 2;
  }
  if (st == LUA_OK && lua_gettop(co) == 0) {
    if (wrap) return luaL_error(L, "cannot resume dead coroutine");
    lua_pushboolean(L, 0);
    lua_pushliteral(L, "cannot resume dead coroutine");
    return 2;
  }
  lua_xmove(L, co, narg);
  int nres;
  lua_State *prev = lproc_slice_enter(co);
  st = lua_resume(co, L, narg, &nres);
  lproc_slice_leave(prev);
  return co_finish(L, co, st, nres, wrap);
}

static int co_resume(lua_State *L) {
  lua_State *co = lua_tothread(L, 1);
  luaL_argexpected(L, co, 1, "coroutine");
  return co_start(L, co, 2, 0);
}

static int co_wrapped(lua_State *L) {
  return co_start(L, lua_tothread(L, lua_upvalueindex(1)), 1, 1);
}

static int co_wrap(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_State *co = lua_newthread(L);
  lua_pushvalue(L, 1);
  lua_xmove(L, co, 1);
  lua_pushcclosure(L, co_wrapped, 1);
  return 1;
}

/* coroutine.yield on a process's own thread (not in a coroutine it made) would yield
** to lpvm's scheduler, which resumes it with nothing: lua5.4 raises there, so this
** does too. lpvm's own yields (receive, preemption) come from C, not through here. */
static int co_yield(lua_State *L) {
  lproc *p = lproc_of(L);
  if (p && L == p->L) {   /* lua5.4's words, without a position as there */
    lua_pushliteral(L, "attempt to yield from outside a coroutine");
    return lua_error(L);
  }
  return lua_yield(L, lua_gettop(L));
}

/* coroutine.isyieldable([co]): false for a process's own thread, as for lua5.4's main
** thread. */
static int co_isyieldable(lua_State *L) {
  lua_State *co = lua_isnone(L, 1) ? L : lua_tothread(L, 1);
  luaL_argexpected(L, co, 1, "coroutine");
  lproc *p = lproc_of(L);
  lua_pushboolean(L, lua_isyieldable(co) && !(p && co == p->L));
  return 1;
}

static int open_coroutine(lua_State *L) {
  luaopen_coroutine(L);
  lua_pushcfunction(L, co_yield);
  lua_setfield(L, -2, "yield");
  lua_pushcfunction(L, co_isyieldable);
  lua_setfield(L, -2, "isyieldable");
  lua_pushcfunction(L, co_resume);
  lua_setfield(L, -2, "resume");
  lua_pushcfunction(L, co_wrap);
  lua_setfield(L, -2, "wrap");
  return 1;
}
