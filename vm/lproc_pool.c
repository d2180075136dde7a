/*
** lproc_pool.c -- recycled Lua states: a finished process's state, cleaned until
** nothing of its owner shows, waits in a bounded pool for the next spawn.
**
** Why: lua_newstate and the first touches of a new state's pages are about half of a
** spawn + exit (docs/performance.md, "Spawn and exit"). A recycled state must be
** indistinguishable from a new one (tests/lua/test_recycle.lua checks each part):
** registry, globals, every basic type's metatable, GC mode and parameters, hooks,
** warnings, heap limit. The cleaning (clean_cf) runs protected in the finished state
** on the worker that ran its process; the pool itself is a mutex-guarded stack
** shared by all workers (pool.mu guards v, n, cap; bound is read without it).
**
** A state whose spawned function returned keeps that function, with its upvalues cut
** loose, at the bottom of its main thread's stack (out of reach of Lua code): the
** next spawn whose bytecode it dumps to takes it instead of loading the bytecode
** (lproc_pool_reuse_fn, called by lfun.c's decoder).
*/
#include <lauxlib.h>
#include <lualib.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/lpvm.h"
#include "vm/lproc_int.h"
#include "vm/lraw.h"

/* A pooled state, and the bytecode length of the function it keeps (0: none, or
** not known: compared anyway) and its number (lfun.c's dump cache; 0: none). */
typedef struct pooled {
  lua_State *L;
  char *blk;   /* its first objects' block (lproc_block.c), or NULL */
  uint64_t fn_id;
  uint16_t fn_len;
} pooled;

static struct {
  pthread_mutex_t mu;
  pooled *v;
  int n, cap;
  _Atomic int bound;
  _Atomic int avail;   /* n, for a look without the lock (written under mu) */
} pool = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0, 0};

/* A cleaned state goes back to the pool only if it holds at most this many bytes more
** than a new one (fresh_bytes, measured on the first new state): a process that grew
** its registry, string table or call-info list gives back a state that stays bigger,
** and a leftover of its previous owner would show there too. A state cleaned without
** a collection (clean_quick) holds its old owners' garbage besides, which the next
** owner's collections free: it may hold LPROC_POOL_GARBAGE more before one runs. A
** process that reaches the lpvm module makes about 1.5 KB of it (the module, its
** metatable, the functions it looked up); with the 1 KB bound every such exit paid a
** full collection (18,000 instructions at 7-14 KB) and lost its kept function. The
** kept function's prototype is allowed for too, by its bytecode's length (fn_len, 0
** when not known): in memory a prototype takes 1.5-3 times its dump (an EStone
** chain's body, 1.4 KB, was never kept under the 1 KB bound: its state was closed
** and the next spawn made a new one). */
#define LPROC_POOL_SLACK 1024
#define LPROC_POOL_GARBAGE 8192
#define LPROC_POOL_FN_MAX 16384
static _Atomic size_t fresh_bytes;

static size_t pool_max_bytes(int collected, size_t fn_len) {
  size_t f = atomic_load_explicit(&fresh_bytes, memory_order_relaxed);
  size_t fn = 4 * fn_len < LPROC_POOL_FN_MAX ? 4 * fn_len : LPROC_POOL_FN_MAX;
  return f ? f + (collected ? LPROC_POOL_SLACK : LPROC_POOL_GARBAGE) + fn : 0;
}

/* A new state's collector mode and parameters, read in place (vm/lraw.h's tail: the
** check saw lua_gc set these bytes), packed; 0: not known yet. clean_bare compares. */
static _Atomic uint64_t fresh_gc;

static uint64_t gc_params(const lraw_global *g) {
  return (uint64_t)1 << 56 | (uint64_t)g->gckind << 48 | (uint64_t)g->gcstp << 40 |
         (uint64_t)g->gcpause << 32 | (uint64_t)g->gcstepmul << 24 |
         (uint64_t)g->gcstepsize << 16 | (uint64_t)g->genminormul << 8 | g->genmajormul;
}

void lproc_pool_fresh(lua_State *L) {
  if (!atomic_load_explicit(&fresh_bytes, memory_order_relaxed))
    atomic_store_explicit(&fresh_bytes, lproc_state_bytes(L), memory_order_relaxed);
  if (!atomic_load_explicit(&fresh_gc, memory_order_relaxed) && lraw_tail_ok())
    atomic_store_explicit(&fresh_gc, gc_params(lraw_g(L)), memory_order_relaxed);
}

void lproc_pool_setup(int bound) { atomic_store(&pool.bound, bound); }

lua_State *lproc_pool_take(uint16_t *fn_len, uint64_t *fn_id, char **blk) {
  pooled e = {NULL, NULL, 0, 0};
  *fn_len = 0;
  if (atomic_load_explicit(&pool.bound, memory_order_relaxed) == 0) return NULL;
  if (atomic_load_explicit(&pool.avail, memory_order_relaxed) == 0) return NULL;
  pthread_mutex_lock(&pool.mu);
  if (pool.n > 0) e = pool.v[--pool.n];
  atomic_store_explicit(&pool.avail, pool.n, memory_order_relaxed);
  pthread_mutex_unlock(&pool.mu);
  *fn_len = e.fn_len;
  *fn_id = e.fn_id;
  if (e.L) *blk = e.blk;
  return e.L;
}

/* ---- the cleaning ------------------------------------------------------------------------- */

/* A C library's finalizer finds its objects' metatable in the registry by name
** (luaL_checkudata: io's files, lpeg's patterns, luasocket's sockets) and fails
** without it: the file stays open, the pattern's code is never freed. So the first
** wipe keeps, for the collection that runs the finalizers, the metatables
** luaL_newmetatable made (tables with a __name) and the loaded C libraries (_CLIBS,
** the oldest object with a finalizer: its dlclose runs after the others). Key at -2,
** value at -1. */
static int needed_by_finalizers(lua_State *L) {
  if (lua_type(L, -2) != LUA_TSTRING) return 0;
  if (strcmp(lua_tostring(L, -2), "_CLIBS") == 0) return 1;
  if (lua_type(L, -1) != LUA_TTABLE) return 0;
  lua_pushliteral(L, "__name");
  int named = lua_rawget(L, -2) == LUA_TSTRING;
  lua_pop(L, 1);
  return named;
}

/* A registry that holds nothing but the main thread and the globals at 1 and 2 (a
** process that loaded no module, made no reference; most short ones), read through
** vm/lraw.h's mirror: the walk with lua_next (450 instructions) finds nothing to
** remove then. */
static int registry_bare(lua_State *L) {
  if (!lraw_ok()) return 0;
  const lraw_global *g = ((const lraw_state *)(void *)L)->l_G;
  const lraw_table *h = g->l_registry.v.gc;
  unsigned int n = lraw_real_asize(h);
  if (n < 2) return 0;
  for (unsigned int i = 2; i < n; i++)
    if (!lraw_is_nil(&h->array[i])) return 0;
  if (h->lastfree) {   /* a hash part (emptied ones stay until a rehash) */
    const lraw_node *node = h->node;
    for (size_t i = 0, size = (size_t)1 << h->lsizenode; i < size; i++)
      if (LRAW_NOVARIANT(node[i].tt) != 0) return 0;
  }
  return 1;
}

/* Empty the registry but for the main thread; the first time keep what finalizers
** need (returns how many entries), else install a new globals table. */
static int wipe_registry(lua_State *L, int first) {
  int kept = 0;
  if (!first && registry_bare(L)) goto globals;
  lua_pushnil(L);
  while (lua_next(L, LUA_REGISTRYINDEX)) {
    int keep = first && needed_by_finalizers(L);
    lua_pop(L, 1);
    kept += keep;
    if (keep || (lua_isinteger(L, -1) && lua_tointeger(L, -1) == LUA_RIDX_MAINTHREAD))
      continue;
    lua_pushvalue(L, -1);
    lua_pushnil(L);
    lua_rawset(L, LUA_REGISTRYINDEX);
  }
  if (first) return kept;
globals:
  lua_newtable(L);
  lua_rawseti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  return 0;
}

static int clean_cf(lua_State *L);

/* The metatables of the basic types (debug.setmetatable, the string library, pids),
** but the string type's if the stand-in is kept (llibs_take). Indices 1 to KEPT + 1
** (the kept function or nil, llibs_take's two values) stay. */
#define KEPT 2
static void clear_type_metatables(lua_State *L) {
  int strings = !lua_toboolean(L, KEPT + 1);   /* llibs_take: the stand-in stays */
  lua_settop(L, KEPT + 1);
  if (lraw_tail_ok()) {   /* vm/lraw.h: the global state's mt[], most often all NULL */
    const lraw_global *g = lraw_g(L);
    int any = 0;
    for (int i = 0; i < LUA_NUMTYPES; i++) any |= g->mt[i] && (i != LUA_TSTRING || strings);
    if (!any) return;
  }
  lua_pushnil(L);
  lua_pushboolean(L, 0);
  lua_pushlightuserdata(L, NULL);
  lua_pushinteger(L, 0);
  lua_pushliteral(L, "");
  lua_pushcfunction(L, clean_cf);
  lua_pushthread(L);
  for (int i = KEPT + 2; i <= KEPT + 8; i++) {
    if (i == KEPT + 6 && !strings) continue;
    if (!lua_getmetatable(L, i)) continue;   /* most have none: a look is cheaper */
    lua_pushnil(L);
    lua_replace(L, -2);
    lua_setmetatable(L, i);
  }
  lua_settop(L, KEPT + 1);
}

/* The kept function's upvalues hold its owner's values: they go after the
** collection (a finalizer may have set one). */
static void drop_upvalues(lua_State *L, int f) {
  if (lua_type(L, f) != LUA_TFUNCTION) return;
  for (int i = 1; lua_getupvalue(L, f, i); i++) {
    lua_pop(L, 1);
    lua_pushnil(L);
    lua_setupvalue(L, f, i);
  }
}

/* An empty main chunk's bytecode: lua_load of it makes a closure with one new upvalue. */
static char empty_chunk[64];
static size_t empty_len;
static pthread_once_t empty_once = PTHREAD_ONCE_INIT;

static int empty_writer(lua_State *L, const void *b, size_t sz, void *ud) {
  (void)L, (void)ud;
  if (empty_len + sz > sizeof empty_chunk) return 1;
  memcpy(empty_chunk + empty_len, b, sz);
  empty_len += sz;
  return 0;
}

static void empty_make(void) {
  lua_State *S = luaL_newstate();
  if (S && luaL_loadstring(S, "") == LUA_OK && lua_dump(S, empty_writer, NULL, 1) != 0)
    empty_len = 0;
  if (S) lua_close(S);
}

/* Before the collection the kept function lets go of its owner's variables without
** changing them: its closures made in its body share them (a finalizer among them
** still sees its globals and upvalues while it runs), so each upvalue is given a
** new variable of its own (joined to an empty chunk's), left nil. Returns 0 if
** that cannot be done: the function is not kept. */
static int detach_upvalues(lua_State *L, int f) {
  if (lua_type(L, f) != LUA_TFUNCTION) return 1;
  pthread_once(&empty_once, empty_make);
  for (int i = 1; lua_getupvalue(L, f, i); i++) {
    lua_pop(L, 1);
    if (!empty_len || luaL_loadbufferx(L, empty_chunk, empty_len, "=", "b") != LUA_OK)
      return 0;
    lua_upvaluejoin(L, f, i, -1, 1);
    lua_pop(L, 1);
    lua_pushnil(L);
    lua_setupvalue(L, f, i);
  }
  return 1;
}

/* The collector as a new state has it: generational with lpvm's multipliers
** (lproc_gc_default), and the incremental parameters a later collectgarbage
** ("incremental") uses at Lua 5.4's defaults (LUAI_GCPAUSE, LUAI_GCMUL,
** LUAI_GCSTEPSIZE). The pause and step multiplier are set without changing the mode
** (LUA_GCSETPAUSE, LUA_GCSETSTEPMUL); the step size only with LUA_GCINC, which leaves
** generational mode, so only a state whose step size differs (read in place, vm/lraw.h)
** or whose owner switched to incremental enters generational mode again: a full
** collection, which runs pending finalizers, so it is watched (clean_new). */
static void reset_gc_params(lproc *p, lua_State *L) {
  lua_gc(L, LUA_GCSETPAUSE, 200);
  lua_gc(L, LUA_GCSETSTEPMUL, 100);
  p->clean_watch = 1;
  if (!lraw_ok() || lraw_gc_stepsize(L) != 13) lua_gc(L, LUA_GCINC, 0, 0, 13);
  lproc_gc_default(L);
  p->clean_watch = 0;
  /* RESTART zeroes the GC debt, which would start a collection at the next
  ** allocation: only a stopped collector gets it. */
  if (!lua_gc(L, LUA_GCISRUNNING, 0)) lua_gc(L, LUA_GCRESTART, 0);
}

/* Clean a finished state for the next owner: nothing of this one may show (the
** test "a recycled state is a fresh one" in tests/lua/test_recycle.lua checks each
** part). Runs protected; the state has been reset (no frames, no pending
** to-be-closed). The old owner's objects are all unreachable once the registry and
** the basic types' metatables are cleared, so the full collection runs every
** finalizer of theirs now, while the state is nobody's; whatever a finalizer leaves
** behind is cleared again. A finalizer that makes a new table or userdata might have
** registered another finalizer, which would run in the next owner's life: the
** allocator sets clean_new then, and the state is closed instead. One that gives an
** existing object a finalizing metatable again, making nothing, leaves a finalizer
** pending after the last collection: closed too (clean_cf). */
static void watched_collect(lproc *p, lua_State *L) {
  p->clean_watch = 1;
  lua_gc(L, LUA_GCCOLLECT, 0);
  p->clean_watch = 0;
}

/* The old owner set no finalizer (or all of them ran in its life): nothing of it can
** run again, so one wipe does, and its garbage, which nothing reaches, is left to
** the next owner's collections like a new state's start-up garbage (unless the state
** is too big: below). Its upvalues need no detaching: no finalizer will see them. */
static void clean_quick(lproc *p, lua_State *L) {
  llibs_take(L);                 /* 2, 3: what of llibs_install may stay */
  clear_type_metatables(L);
  wipe_registry(L, 0);
  reset_gc_params(p, L);
}

/* The old owner changed nothing a new state has (a process that ran a function of its
** arguments and ended, spawn_exit's): no finalizer pending, a bare registry (the main
** thread and the globals), the globals table empty with its lazy metatable and the
** string stand-in in place (llibs_in_place), no other basic type's metatable, the
** collector as a new state's. All read in place (vm/lraw.h), nothing is made again:
** the state is a new one but for its garbage, as after clean_quick. */
static int clean_bare(lua_State *L) {
  uint64_t gc = atomic_load_explicit(&fresh_gc, memory_order_relaxed);
  return gc && lraw_tail_ok() && !lraw_finalizers_pending(L) && gc_params(lraw_g(L)) == gc &&
         registry_bare(L) && llibs_in_place(L);
}

/* Without the mirror (vm/lraw.h) a pending finalizer is seen by running it: a
** collection started from a new thread calls each finalizer on that thread, whose
** first call needs a CallInfo the thread has not got yet, a new allocation; a
** collection that calls none makes nothing new; one more frees the thread (a new
** state has no such garbage). Returns 1 if one ran (or it cannot be told). */
static int finalizer_ran(lproc *p, lua_State *L) {
  if (!lua_checkstack(L, 1)) return 1;
  lua_State *C = lua_newthread(L);
  p->clean_watch = 2;
  p->clean_new = 0;
  lua_gc(C, LUA_GCCOLLECT, 0);
  p->clean_watch = 0;
  lua_pop(L, 1);
  if (!p->clean_new) lua_gc(L, LUA_GCCOLLECT, 0);
  return p->clean_new;
}

static int clean_cf(lua_State *L) {
  lproc *p = lproc_of(L);
  lua_settop(L, 1);   /* the kept function, or nil */
  p->clean_new = 0;
  int collected = 1, bare = clean_bare(L), finalized = 0;
  if (bare) {
    collected = 0;
  } else if (lraw_ok() && !lraw_finalizers_pending(L)) {   /* vm/lraw.h: the collector's lists */
    clean_quick(p, L);
    collected = 0;
  } else {
    finalized = 1;
    lua_gc(L, LUA_GCSTOP);   /* no finalizer runs before the watched collection */
    if (!detach_upvalues(L, 1)) return 0;
    llibs_take(L);
    clear_type_metatables(L);
    int kept = wipe_registry(L, 1);
    reset_gc_params(p, L);
    watched_collect(p, L);         /* old owner's finalizers run now... */
    /* ...and then those of what the finalizers left over from its life kept alive (an
    ** emergency collection at max_heap separates the dead but runs none: what they
    ** reach lived through this collection), while C libraries' metatables are still
    ** registered. Without the mirror (vm/lraw.h) that is not seen: once more. */
    for (int i = 0; i < 3 && !p->clean_new && (lraw_ok() ? lraw_finalizers_pending(L) : !i); i++)
      watched_collect(p, L);
    if (p->libs_exposed) {         /* ...one of which may have reached them */
      lua_settop(L, 1);
      lua_settop(L, KEPT + 1);
    }
    clear_type_metatables(L);      /* ...and whatever they stored goes too */
    wipe_registry(L, 0);
    reset_gc_params(p, L);         /* a finalizer may have stopped or tuned it */
    if (kept && !p->clean_new) watched_collect(p, L);   /* what the first wipe kept */
  }
  /* Each collection halves a string table that is less than a quarter full: a
  ** process that made many strings needs one or two more to give a small state. */
  size_t fn_len = lua_type(L, 1) == LUA_TFUNCTION ? p->fn_len : 0;
  for (int i = 0; i < 2 && !p->clean_new && p->mem > pool_max_bytes(collected, fn_len); i++)
    watched_collect(p, L), collected = 1;
  /* A finalizer that gave its object (or another old one) a finalizing metatable
  ** again made nothing the allocator saw, and would run in the next owner's life, as
  ** that owner (lpvm.self, send, exit): such a state is closed. Without the mirror
  ** (vm/lraw.h) one more collection runs them, and tells if one ran. */
  if (p->clean_new) return 0;
  if (finalized && (lraw_ok() ? lraw_finalizers_pending(L) : finalizer_ran(p, L))) return 0;
  drop_upvalues(L, 1);
  lproc_state_init(L, bare ? LLIBS_IN_PLACE : 2);
  lua_settop(L, 1);
  lua_pushinteger(L, 1 + collected);   /* true; 2: the state was collected */
  return 1;
}

static int collect_cf(lua_State *L) {
  watched_collect(lproc_of(L), L);
  return 0;
}

/* Give the state to the pool if there is room and it cleans; else close it. The
** state's bytes are p->mem, the allocator's count, which matches Lua's
** (lproc_state_bytes: two lua_gc calls, ~110 instructions) while p owns it. */
void lproc_pool_release(lproc *p) {
  lua_State *L = p->L;
  p->L = NULL;
  p->helper = NULL;
  p->max_heap = 0;
  p->closing = 1;
  p->slices = 0;
  /* Room, looked at without the lock: the push below looks again under it (a state
  ** cleaned for a pool that filled meanwhile is closed). */
  int room = atomic_load_explicit(&pool.avail, memory_order_relaxed) <
             atomic_load_explicit(&pool.bound, memory_order_relaxed);
  /* A body that returned left its function (lproc_main): kept at 1 for the next spawn
  ** of the same function (lproc_pool_reuse_fn). A thread that ended normally has no
  ** frames, open upvalues or pending to-be-closed variables: nothing to reset. */
  int top = lua_gettop(L);
  int kept = room && p->fn_kept && lua_status(L) == LUA_OK && top >= 1 &&
             lua_type(L, -1) == LUA_TFUNCTION && !lua_iscfunction(L, -1);
  p->fn_kept = 0;
  if (kept && top > 1) {
    lua_insert(L, 1);
    lua_settop(L, 1);
  }
  /* __close handlers (and the code they call) are bounded by the closing hook: armed
  ** before any of them can run (resetthread, the cleaning, lua_close); the bare
  ** cleaning runs no Lua code and sets the new owner's hook itself. A __gc runs with
  ** Lua's hooks off (lgc.c GCTM): nothing bounds it (lua-api.md says so). */
  int closing = !kept;
  if (closing) lproc_slice_closing(L);
  if (room && (kept || lua_resetthread(L) == LUA_OK)) {
    size_t fn_len = kept ? p->fn_len : 0;
    int clean, collected = 0;
    if (clean_bare(L) && p->mem <= pool_max_bytes(0, fn_len)) {
      /* clean_cf's bare case, unprotected (a protected call is 250 instructions): no
      ** collection, and nothing here allocates or raises; the stack holds the kept
      ** function or nothing, and nothing here leaves more */
      drop_upvalues(L, 1);
      lproc_state_init(L, LLIBS_IN_PLACE);
      clean = 1;
    } else {
      if (!closing) lproc_slice_closing(L), closing = 1;
      lua_pushcfunction(L, clean_cf);
      if (kept) lua_pushvalue(L, 1);
      clean = lua_pcall(L, kept, 1, 0) == LUA_OK && lua_toboolean(L, -1);
      collected = lua_tointeger(L, -1) == 2;
      lua_settop(L, kept);
    }
    if (clean && kept && p->mem > pool_max_bytes(collected, fn_len)) {
      lua_settop(L, 0);   /* a big function: the state without it may fit */
      lua_pushcfunction(L, collect_cf);
      clean = lua_pcall(L, 0, 0, 0) == LUA_OK && !p->clean_new;
      collected = 1;
      fn_len = 0;
      lua_settop(L, 0);
    }

    if (clean && !p->heap_refused && p->mem <= pool_max_bytes(collected, fn_len)) {
      lua_setallocf(L, lproc_alloc, NULL);
      pthread_mutex_lock(&pool.mu);
      if (pool.n < atomic_load(&pool.bound)) {
        if (pool.n == pool.cap) {
          int cap = pool.cap ? pool.cap * 2 : 16;
          pooled *v = realloc(pool.v, (size_t)cap * sizeof *v);
          if (v) pool.v = v, pool.cap = cap;
        }
        if (pool.n < pool.cap) {
          int fn = kept && lua_gettop(L) == 1;
          pool.v[pool.n++] = (pooled){L, p->blk, fn ? p->fn_id : 0, fn ? p->fn_len : 0};
          atomic_store_explicit(&pool.avail, pool.n, memory_order_relaxed);
          p->blk = NULL;
          L = NULL;
        }
      }
      pthread_mutex_unlock(&pool.mu);
      if (!L) return;
    }
  }
  if (!closing) lproc_slice_closing(L);
  lua_setallocf(L, lproc_alloc_closing, p);
  lua_close(L);
}

/* ---- the kept function ---------------------------------------------------------------- */

#define LPROC_KEEP_UPVALUES 32   /* more: not checked (pairs), loaded instead */

typedef struct same_dump {
  const char *p;
  size_t left;
} same_dump;

static int same_writer(lua_State *L, const void *b, size_t sz, void *ud) {
  (void)L;
  same_dump *d = ud;
  if (sz > d->left || memcmp(d->p, b, sz) != 0) return 1;   /* lua_dump stops */
  d->p += sz;
  d->left -= sz;
  return 0;
}

/* A closure whose prototype dumps to `code` is the function lua_load would make of
** it, but for its identity (nobody else holds it: its previous owner's objects are
** gone) and its upvalues, which the decoder sets, each of them. Two of them that are
** one variable (debug.upvaluejoin) would not be set apart: such a closure is not
** taken. The kept function was loaded from bytes of the same number as this spawn's
** (lproc_start.code_id, lfun.c's dump cache: one number, one string of bytes): it
** dumps to them, and the comparison is skipped. */
int lproc_pool_reuse_fn(lua_State *L, const void *code, size_t len) {
  void *ud;
  if (lua_getallocf(L, &ud) != lproc_alloc || !ud) return 0;
  lproc *p = ud;
  int f = p->fn_cand;
  p->fn_cand = 0;
  if (!f || p->L != L) return 0;
  size_t kept_len = p->fn_len;   /* the kept function's, if known */
  uint64_t kept_id = p->fn_id, id = p->start ? p->start->code_id : 0;
  p->fn_len = len <= UINT16_MAX ? (uint16_t)len : 0;   /* this process's, for the pool */
  p->fn_id = id;
  if (f == LPROC_NO_CAND || (kept_len && kept_len != len) || lua_type(L, f) != LUA_TFUNCTION ||
      lua_iscfunction(L, f))
    return 0;
  lua_pushvalue(L, f);
  same_dump d = {code, len};
  if (!(id && id == kept_id) && (lua_dump(L, same_writer, &d, 0) != 0 || d.left != 0)) {
    lua_pop(L, 1);
    return 0;
  }
  int top = lua_gettop(L), n = 0, distinct = 1;
  while (n <= LPROC_KEEP_UPVALUES && lua_getupvalue(L, top, n + 1)) lua_pop(L, 1), n++;
  if (n > LPROC_KEEP_UPVALUES) distinct = 0;
  for (int i = 1; distinct && i <= n; i++)
    for (int j = i + 1; distinct && j <= n; j++)
      distinct = lua_upvalueid(L, top, i) != lua_upvalueid(L, top, j);
  if (!distinct) lua_pop(L, 1);
  return distinct;
}

int lproc_recycle_get(void) { return atomic_load(&pool.bound); }

int lproc_recycle_set(int n) {
  int old = atomic_exchange(&pool.bound, n < 0 ? 0 : n);
  pthread_mutex_lock(&pool.mu);
  while (pool.n > n && pool.n > 0) {
    pooled e = pool.v[--pool.n];
    lproc_block_close(e.L, e.blk);
  }
  atomic_store_explicit(&pool.avail, pool.n, memory_order_relaxed);
  pthread_mutex_unlock(&pool.mu);
  return old;
}

void lproc_pool_teardown(int bound) {
  lproc_recycle_set(0);
  pthread_mutex_lock(&pool.mu);
  free(pool.v);
  pool.v = NULL;
  pool.cap = 0;
  pthread_mutex_unlock(&pool.mu);
  atomic_store(&pool.bound, bound);
}
