/*
** lproc.c -- the "lua" task type: a process is a lua_State whose main thread is
** resumed like a coroutine.
**
** Life of a process. `init` keeps the spawn argument (bytecode, upvalues and
** arguments as terms, built by the parent) and makes the task runnable; the first
** `idle` creates the state on the worker that runs it (or takes one from the
** recycling pool) and resumes a C trampoline that loads the function and calls it.
** From then on every callback is one lua_resume of the main thread:
**   - at the end of a time slice (lproc_slice.c: a CPU-time tick, or every
**     `reductions` instructions with --reductions) a hook yields: the callback
**     returns LPVM_IDLE, the task goes to the back of its run queue;
**   - a blocking call (receive, sleep, info, migrate) records what it waits for in
**     `wait` and yields with a continuation: the callback returns LPVM_WAIT, and
**     `handle_event` / `handle_timeout` resume it; the continuation, running inside
**     the protected resume, does the Lua work (decoding, the predicate);
**   - a return ends the process normally, an error ends it with a reason that holds
**     the message and a traceback (see lproc_exit.c).
** Nothing in Lua can unwind into the worker: every Lua call made from here is a
** resume or a pcall.
**
** Memory: the allocator counts the state's bytes and refuses past `max_heap`; the
** process then exits with reason `max_heap`. Small blocks come from and go back to
** the running thread's free lists (lproc_small.h), the rest to malloc. Finished states go back to a bounded
** pool after a cleaning that leaves nothing of their previous owner (lproc_pool.c).
*/
#include <lauxlib.h>
#include <lualib.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/lpvm.h"
#include "vm/llog.h"
#include "vm/lproc_int.h"
#include "vm/lproc_small.h"
#include "vm/lterm.h"
#include "vm/lterm_int.h"

lproc_config lproc_cfg = {.reductions = LPROC_DEFAULT_REDUCTIONS};

static _Atomic int boot_ok;

/* ---- configuration ---------------------------------------------------------------------- */

void lproc_config_init(lproc_config *c) {
  memset(c, 0, sizeof *c);   /* reductions 0: time slices (lproc_slice.c) */
  c->recycle = LPROC_DEFAULT_RECYCLE;
}

int lproc_log_level_ok(const char *name) { return llog_parse_level(name) != -2; }

int lproc_setup(const lproc_config *c) {
  if (!c || c->reductions < 0 || c->recycle < 0) return LPVM_EINVAL;
  if (c->log_level && !lproc_log_level_ok(c->log_level)) return LPVM_EINVAL;
  llog_set_level(c->log_level ? llog_parse_level(c->log_level) : LLOG_NOTICE);
  lproc_cfg = *c;
  lterm_trust_remote_funs(!c->no_remote_code);
  lproc_slice_setup(c->reductions);
  if (lproc_cfg.reductions == 0) lproc_cfg.reductions = LPROC_DEFAULT_REDUCTIONS;
  lproc_pool_setup(c->recycle);
  lproc_maker_setup();
  atomic_store(&boot_ok, 0);
  return 0;
}

int lproc_boot_ok(void) { return atomic_load(&boot_ok); }

/* ---- the allocator ----------------------------------------------------------------------- */

/* Erlang's max_heap_size counts the message queue (on-heap messages), and so does
** max_heap: the bytes of every message sent to the process and not yet taken, each
** with its header, from the moment it is sent (the signal queue included). */
static size_t queue_cost(const lproc *p) {
  return lpvm_queued_bytes(&p->task) + lpvm_queued_msgs(&p->task) * sizeof(lpvm_msg);
}

/* ud is the owning process, or NULL for a state between owners (boot, pool). */
/* Growing by nsize - osize would take p past max_heap (with its queue). */
static int over_heap(lproc *p, size_t osize, size_t nsize) {
  if (!p->max_heap || nsize <= osize ||
      p->mem + (nsize - osize) + queue_cost(p) <= p->max_heap)
    return 0;
  p->heap_refused = 1;   /* the process dies of it even if Lua copes (pcall) */
  if (lproc_slice_running) lproc_slice_end(lproc_slice_running);
  return 1;
}

/* Everything but the two common cases below (lproc_alloc). */
/* not inlined: lproc_alloc's common cases then need no saved registers */
__attribute__((noinline)) static void *alloc_slow(lproc *p, void *ptr, size_t osize,
                                                  size_t nsize) {
  void *q;
  if (ptr == NULL) {   /* a new object: osize is its type */
    if (nsize == 0) return NULL;
    if (!p) return lproc_small_alloc(nsize);
    if (p->max_heap && over_heap(p, 0, nsize)) return NULL;
    /* see clean_cf: only a table or a full userdata can get a finalizer (2: any
    ** new object, finalizer_ran) */
    if (p->clean_watch && (osize == LUA_TTABLE || osize == LUA_TUSERDATA || p->clean_watch == 2))
      p->clean_new = 1;
    if (!p->blk_bump || !(q = lproc_block_alloc(p, nsize)))   /* lproc_block.c */
      q = lproc_small_alloc(nsize);
    if (q) p->mem += nsize;
    return q;
  }
  if (!p) {
    if (nsize) return lproc_small_realloc(ptr, osize, nsize);
    lproc_small_free(ptr, osize);
    return NULL;
  }
  if (lproc_block_owns(p, ptr)) {   /* an object of the state's block */
    if (nsize == 0) {
      lproc_block_free(p, ptr, osize);
      p->mem -= osize;
      return NULL;
    }
    if (p->max_heap && over_heap(p, osize, nsize)) return NULL;
    q = lproc_block_realloc(p, ptr, osize, nsize);
    if (q) p->mem += nsize - osize;
    return q;
  }
  if (nsize == 0) {   /* lproc_alloc's push to the list failed: straight past it */
    p->mem -= osize;
    lproc_small_spill(ptr, osize);
    return NULL;
  }
  if (p->max_heap && over_heap(p, osize, nsize)) return NULL;
  q = lproc_small_realloc(ptr, osize, nsize);
  if (q) p->mem += nsize - osize;
  return q;
}

/* The common cases first, each a few instructions and no call: with no limit and no
** cleaning in play, a new object bumped from the state's block (lproc_block.c) or a
** small one taken from the thread's free list (lproc_small.h); a small object, not of
** the block, freed to the list. The rest: alloc_slow. */
void *lproc_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  lproc *p = ud;
  if (p) {
    if (ptr == NULL) {
      if (!p->max_heap && !p->clean_watch) {
        void *q;
        /* nsize 0 (Lua "freeing" NULL): the bump would give a pointer, the pop NULL */
        if (p->blk_bump) q = p->blk && nsize ? lproc_block_alloc(p, nsize) : NULL;
        else q = lproc_small_pop(nsize);
        if (q) {
          p->mem += nsize;
          return q;
        }
      }
    } else if (nsize == 0 && !lproc_block_owns(p, ptr) && lproc_small_push(ptr, osize)) {
      p->mem -= osize;
      return NULL;
    }
  }
  return alloc_slow(p, ptr, osize, nsize);
}

/* lua_close of a whole state (lproc_pool.c): every object goes straight to free(). The
** thread's lists would take a few and then refuse the rest (a failed push, the slow
** path and a second failed push for each: +16% to a gen_server child's stop, whose
** state is closed). The objects of the state's block (most of an idle process's, ~100)
** are the block's, which goes with the global state, freed last: each is only
** poisoned here, not given back to the block (lproc_alloc, alloc_slow and
** lproc_block_free took ~58 instructions an object for that), as nothing is bumped
** from the block once lua_close has started freeing (its finalizers ran before). */
void *lproc_alloc_closing(void *ud, void *ptr, size_t osize, size_t nsize) {
  lproc *p = ud;
  if (ptr && nsize == 0) {
    if (!p) {
      free(ptr);
      return NULL;
    }
    p->mem -= osize;
    if (!lproc_block_owns(p, ptr)) free(ptr);
    else if ((char *)ptr == p->blk + LPROC_BLK_HEAD) lproc_block_drop(p);
    else LPROC_POISON(ptr, LPROC_BLK_ALIGN(osize));
    return NULL;
  }
  return lproc_alloc(ud, ptr, osize, nsize);
}

/* Bytes a state holds, by Lua's own count (which matches what the allocator saw). */
size_t lproc_state_bytes(lua_State *L) {
  return (size_t)lua_gc(L, LUA_GCCOUNT, 0) * 1024 + (size_t)lua_gc(L, LUA_GCCOUNTB, 0);
}

static int lproc_panic(lua_State *L) {
  const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?";
  fprintf(stderr, "lpvm: unprotected Lua error (a bug in lpvm): %s\n", msg);
  abort();
}

/* ---- interrupts (the shell's Ctrl-C) ---------------------------------------------------- */

/* The process to interrupt, set by lproc_interrupt from any thread and taken (reset to
** 0) by that process: its count hook raises "interrupted!" in running code, and a
** receive or sleep it waits in is woken by a marker message (from outside any task,
** never shown to Lua: lmod_msg.c drops it) and raises there. */
static _Atomic lpvm_id interrupt_id;
static const uint8_t interrupt_marker[] = {131, 119, 15, '$', 'l', 'p', 'v', 'm', '_', 'i',
                                           'n', 't', 'e', 'r', 'r', 'u', 'p', 't'};

int lproc_interrupt(lpvm_id id) {
  atomic_store(&interrupt_id, id);
  return lpvm_send(NULL, id, interrupt_marker, sizeof interrupt_marker);
}

int lproc_take_interrupt(lproc *p) {
  lpvm_id want = p->task.id;
  if (atomic_load_explicit(&interrupt_id, memory_order_relaxed) != want) return 0;
  return atomic_compare_exchange_strong(&interrupt_id, &want, 0);
}

int lproc_is_interrupt_msg(lpvm_msg *m) {
  return lpvm_msg_from(m) == 0 && lpvm_msg_len(m) == sizeof interrupt_marker &&
         memcmp(lpvm_msg_data(m), interrupt_marker, sizeof interrupt_marker) == 0;
}

/* ---- a new state ------------------------------------------------------------------------- */

/* Every process's collector starts generational, a minor collection each time the heap
** has grown by half since the last (docs/performance.md, "The collector's mode and
** pace"): most of what a process allocates (a message's tables, an ETS tuple, a
** decoded term) is garbage before the next collection, which a minor one frees
** without going over what stays; the whole heap is traversed again only when it has
** doubled since the last major collection (Lua's major multiplier, 100). Entering the
** mode collects the state once: a new state does it here, before its libraries make
** anything; a recycled one is only given the parameters again (lproc_pool.c), unless
** its owner had switched to incremental. */
void lproc_gc_default(lua_State *L) {
  lua_gc(L, LUA_GCGEN, LPROC_GC_MINOR, LPROC_GC_MAJOR);
}

/* Entering generational mode collects the state (all it holds is old after it) but
** leaves the collector's debt as the allocations since lua_newstate made it (Lua
** 5.4.4's entergen sets no minor debt; a new state's is about +3.4 KB): the state's
** next allocation then ran a minor collection of nothing (~1,500 instructions, in
** llibs_install's first table). The debt is set here as that collection would have
** set it (the next minor collection when the heap has grown by LPROC_GC_MINOR
** percent), rounded up to whole KB, through the API: RESTART zeroes it, a negative
** STEP lowers it and runs nothing. (Rounded to the nearest KB, create.lua's process
** ran its first minor collection in its first run, on a bigger heap: 3,900.) */
static void gc_first_debt(lua_State *L) {
  size_t t = (size_t)lua_gc(L, LUA_GCCOUNT) * 1024 + (size_t)lua_gc(L, LUA_GCCOUNTB);
  int k = (int)((t / 100 * LPROC_GC_MINOR + 1023) / 1024);
  lua_gc(L, LUA_GCRESTART);
  lua_gc(L, LUA_GCSTEP, k > 0 ? -k : -1);
}

void lproc_state_init(lua_State *L, int kept) {
  /* a bare state's collector is a new one's already (lproc_pool.c clean_bare compares
  ** every parameter and the mode): nothing to set, and nothing that could collect */
  if (kept != LLIBS_IN_PLACE) lproc_gc_default(L);
  if (kept == 0) gc_first_debt(L);
  memset(lua_getextraspace(L), 0, LUA_EXTRASPACE);   /* lmod_bin.c's GC debt */
  llibs_install(L, kept);
  if (kept == 0) lproc_block_to_line(lproc_of(L));   /* the body's objects on lines */
  lproc_slice_init(L);
}

/* A new state whose allocator's owner is p (a process, or lproc_maker.c's stand-in). */
lua_State *lproc_state_make(lproc *p) {
  p->blk_bump = 1;   /* the global state, the first object, starts a block (lproc_block.c) */
  lua_State *L = lua_newstate(lproc_alloc, p);
  if (!p->blk) p->blk_bump = 0;
  if (L) lua_atpanic(L, lproc_panic);
  return L;
}

/* A state for p: recycled or made ahead (already initialised), or new (p->L->init is
** pending). */
static lua_State *lproc_newstate(lproc *p, int *fresh) {
  lua_State *L = lproc_pool_take(&p->fn_len, &p->fn_id, &p->blk);
  p->recycled = (L != NULL);
  /* lproc_maker.c: a state made ahead; not for a heap limit, which must see each of
  ** the new state's allocations as one made here would */
  if (!L && !p->max_heap &&
      (L = lproc_maker_take(&p->blk, &p->blk_bump, &p->fn_len, &p->fn_id)))
    p->recycled = LPROC_STOCK;
  *fresh = (L == NULL);
  if (L) {
    lua_setallocf(L, lproc_alloc, p);
    /* A state cleaned without a collection (lproc_pool.c: no finalizer was pending)
    ** still holds its old owner's garbage: a process with a heap limit must not count
    ** it, so it goes now (no finalizer among it: no code runs). */
    if (p->max_heap) lua_gc(L, LUA_GCCOLLECT);
    p->mem = lproc_state_bytes(L);
    return L;
  }
  return lproc_state_make(p);
}

/* ---- the trampoline: the body of every spawned process ------------------------------------ */

/* The body returned: lproc_main's frame holds the function at 1, returned for the
** pool (lproc_pool_release keeps it for the next spawn of the same function). */
static int main_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status, (void)ctx;
  lproc *p = lproc_of(L);
  lua_settop(L, 1);
  p->fn_kept = lua_type(L, 1) == LUA_TFUNCTION;
  return 1;
}

void lproc_push_module(lua_State *L, const char *name, int nil_on_error) {
  if (strcmp(name, "_G") == 0) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    return;
  }
  if (lua_getglobal(L, name) != LUA_TNIL) return;
  lua_pop(L, 1);
  lua_getglobal(L, "require");
  lua_pushstring(L, name);
  if (!nil_on_error) {
    lua_call(L, 1, 1);
  } else if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    lua_pop(L, 1);
    lua_pushnil(L);
  }
}

/* Push the function and set its upvalues; returns the function's stack index. */
static int push_func(lua_State *L, lproc_start *s) {
  const char *code = (const char *)s->data;
  if (luaL_loadbufferx(L, code, s->code_len, "=spawn", "b") != LUA_OK) lua_error(L);
  int f = lua_gettop(L);
  lpvm_tread r;
  uint32_t n = 0;
  if (lpvm_tread_init(&r, s->data + s->code_len, s->up_len) || lpvm_get_tuple(&r, &n))
    luaL_error(L, "spawn: malformed upvalues");
  for (uint32_t i = 1; i <= n; i++) {
    if (!lfun_push_known(L, &r)) lterm_push(L, &r);
    if (!lua_setupvalue(L, f, (int)i)) lua_pop(L, 1);
  }
  return f;
}

/* spawn("mod.name", ...): require it; call what it returns, or its main or start.
** A peer's spawn request names the function (the start's `up` is then a binary):
** module[fn], or for "main" what spawn("mod.name") would call. */
static int push_module(lua_State *L, lproc_start *s) {
  lpvm_tread r;
  const uint8_t *fn = NULL;
  size_t fl = 0;
  if (lpvm_tread_init(&r, s->data + s->code_len, s->up_len) == 0 &&
      lpvm_get_binary(&r, &fn, &fl) == 0 && fl == 4 && memcmp(fn, "main", 4) == 0)
    fn = NULL;
  lua_getglobal(L, "require");
  lua_pushlstring(L, (const char *)s->data, s->code_len);
  lua_call(L, 1, 1);
  if (fn) {
    if (lua_type(L, -1) != LUA_TTABLE) {   /* erl's spawn(N, M, F, A): M.F must exist */
      const char *got = luaL_typename(L, -1);
      const char *mod = lua_pushlstring(L, (const char *)s->data, s->code_len);
      const char *fname = lua_pushlstring(L, (const char *)fn, fl);
      luaL_error(L, "module %s returned a %s, not a table: it has no function %s", mod, got,
                 fname);
    }
    lua_pushlstring(L, (const char *)fn, fl);
    lua_gettable(L, -2);
    lua_remove(L, -2);
    if (lua_type(L, -1) != LUA_TFUNCTION) {   /* (the names pushed in order, then used) */
      const char *mod = lua_pushlstring(L, (const char *)s->data, s->code_len);
      luaL_error(L, "module %s has no function %s", mod,
                 lua_pushlstring(L, (const char *)fn, fl));
    }
    return lua_gettop(L);
  }
  if (lua_type(L, -1) == LUA_TTABLE) {
    lua_getfield(L, -1, "main");
    if (lua_type(L, -1) != LUA_TFUNCTION) {
      lua_pop(L, 1);
      lua_getfield(L, -1, "start");
    }
    lua_remove(L, -2);
  }
  if (lua_type(L, -1) != LUA_TFUNCTION) {
    const char *got = luaL_typename(L, -1);
    lua_pushlstring(L, (const char *)s->data, s->code_len);   /* not NUL-terminated */
    luaL_error(L, "module %s returned %s (a function, or a table with main or start, "
               "expected)", lmod_push_quoted(L, -1), got);
  }
  return lua_gettop(L);
}

/* A spawn's arguments when there are none: an empty tuple (lterm_put_values). */
const uint8_t lproc_no_args[3] = {131, 104, 0};
#define no_args lproc_no_args

/* (fresh [, kept]): kept is the function a recycled state's previous owner ran,
** which the decoder takes if this spawn's function dumps the same (lfun.c). A
** spawned function (LS_TERM) stays at 1 while it runs (a C temporary of this frame)
** and is returned for the pool. */
static int lproc_main(lua_State *L) {
  lproc *p = lproc_of(L);
  lproc_start *s = p->start;
  if (lua_toboolean(L, 1)) {   /* a fresh state */
    lproc_state_init(L, 0);
    lproc_pool_fresh(L);
  }
  lua_settop(L, 2);
  int trusted = !s->remote || lterm_remote_funs_trusted();
  if (s->kind == LS_FUNC) {
    push_func(L, s);
  } else if (s->kind == LS_TERM) {
    p->fn_cand = lua_type(L, 2) == LUA_TFUNCTION ? 2 : LPROC_NO_CAND;
    const uint8_t *fn = s->data + s->code_len;
    int ok = (trusted && lfun_push_spawn(L, fn, s->up_len)) ||
             (lterm_push_values_ex(L, fn, s->up_len, trusted) == 1 &&
              lua_type(L, -1) == LUA_TFUNCTION);
    if (p->fn_cand) p->fn_len = 0, p->fn_id = 0;   /* not decoded from bytecode: not known */
    p->fn_cand = 0;
    if (!ok) luaL_error(L, "spawn: malformed function");
  } else {
    push_module(L, s);
  }
  lua_replace(L, 1);
  lua_settop(L, 1);   /* the kept function, if not taken, is garbage now */
  lua_pushvalue(L, 1);
  if (s->kind != LS_TERM) {   /* only a spawned function is kept for the next spawn */
    lua_pushnil(L);
    lua_replace(L, 1);
  }
  const uint8_t *args = s->data + s->code_len + s->up_len;
  int n = s->args_len == sizeof no_args && memcmp(args, no_args, sizeof no_args) == 0
              ? 0
              : lterm_push_values_ex(L, args, s->args_len, trusted);
  p->start = NULL;
  free(s);
  lua_callk(L, n, 0, 0, main_k);
  return main_k(L, LUA_OK, 0);
}

/* ---- bytecode ---------------------------------------------------------------------------- */

typedef struct dumpbuf {
  char *p;
  size_t len, cap;
} dumpbuf;

static int dump_writer(lua_State *L, const void *p, size_t sz, void *ud) {
  (void)L;
  dumpbuf *d = ud;
  if (d->len + sz > d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 1024;
    while (cap < d->len + sz) cap *= 2;
    char *n = realloc(d->p, cap);
    if (!n) return 1;
    d->p = n;
    d->cap = cap;
  }
  memcpy(d->p + d->len, p, sz);
  d->len += sz;
  return 0;
}

char *lproc_dump_top(lua_State *L, size_t *len) {
  dumpbuf d = {NULL, 0, 0};
  if (lua_dump(L, dump_writer, &d, 0) != 0) {
    free(d.p);
    return NULL;
  }
  *len = d.len;
  return d.p;
}

lproc_start *lproc_start_new(int kind, const void *code, size_t code_len,
                             const lpvm_tbuf *up, const lpvm_tbuf *args) {
  lproc_start *s = malloc(sizeof *s + code_len + up->len + args->len);
  if (!s) return NULL;
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->code_len = code_len;
  s->up_len = up->len;
  s->args_len = args->len;
  memcpy(s->data, code, code_len);
  memcpy(s->data + code_len, up->data, up->len);
  memcpy(s->data + code_len + up->len, args->data, args->len);
  return s;
}

int lproc_find_key(lua_State *L, int t, int v) {
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (lua_rawequal(L, -1, v) && lua_type(L, -2) == LUA_TSTRING) {
      lua_pop(L, 1);
      return 1;
    }
    lua_pop(L, 1);
  }
  return 0;
}

/* ---- errors and exit reasons -------------------------------------------------------------- */

static void set_reason_atom(lproc *p, const char *atom) {
  lpvm_set_reason_atom(&p->task, atom);
}

/* ---- driving the main thread --------------------------------------------------------------- */

static int lproc_resume(lproc *p) {
  lua_State *L = p->L;
  int nres, nargs = p->nargs;
  lcode_safe_point(p);   /* new module versions, before any Lua of it runs again */
  p->nargs = 0;
  p->slices = 0;
  p->punish = 0;   /* a new slice: send charges start again */
  lua_State *prev = lproc_slice_enter(L);
  int st = lua_resume(L, NULL, nargs, &nres);
  lproc_slice_leave(prev);
  p->sched_yield = 0;
  if (p->heap_refused) {
    set_reason_atom(p, "max_heap");
    p->failed = 1;
    return LPVM_EXIT;
  }
  if (p->exiting) {
    if (p->exiting == LPROC_EXIT_SIGNAL) return LPVM_EXIT;   /* the signal's reason, no report */
    if (p->exit_reason) lpvm_set_reason(&p->task, p->exit_reason, p->exit_len);
    p->failed = 1;   /* its own exit(reason): a report unless the reason is normal */
    return LPVM_EXIT;
  }
  if (st == LUA_YIELD) {
    lua_pop(L, nres);
    return (p->wait == LP_RUN || p->wait == LP_MIGRATE) ? LPVM_IDLE : LPVM_WAIT;
  }
  if (st == LUA_OK) return LPVM_EXIT;   /* reason normal */
  return lproc_error(p);
}

/* The first run: make or adopt the state, then resume the body. */
static int lproc_first(lproc *p) {
  lproc_start *s = p->start;
  if (s->kind == LS_STATE) {
    p->L = s->L;
    atomic_store_explicit(&p->task.hint, (const void *)p->L, memory_order_relaxed);
    p->nargs = s->nargs;
    p->libs_exposed = 2;   /* its Lua code may have run before it was ours (llibs.c) */
    lua_setallocf(p->L, lproc_alloc, p);
    p->mem = lproc_state_bytes(p->L);
    p->start = NULL;
    free(s);
    return lproc_resume(p);
  }
  int fresh;
  p->L = lproc_newstate(p, &fresh);
  if (!p->L) {
    set_reason_atom(p, p->heap_refused ? "max_heap" : "enomem");
    return LPVM_EXIT;
  }
  atomic_store_explicit(&p->task.hint, (const void *)p->L, memory_order_relaxed);
  int kept = lua_gettop(p->L);   /* a recycled state's kept function (lproc_pool.c) */
  lua_pushcfunction(p->L, lproc_main);
  lua_pushboolean(p->L, fresh);
  if (kept) lua_rotate(p->L, 1, -1);   /* lproc_main, fresh, kept */
  p->nargs = 1 + kept;
  return lproc_resume(p);
}

/* ---- the task callbacks --------------------------------------------------------------------- */

/* On a cache line of its own: a hop's fields are the record's lines 1-4 (lproc_int.h). */
#define LPROC_REC_SIZE ((sizeof(lproc) + 63) & ~(size_t)63)

static lpvm_task *lproc_allocate(const lpvm_task_def *def, void *arg) {
  (void)def, (void)arg;
  lproc *p = aligned_alloc(64, LPROC_REC_SIZE);
  if (p) memset(p, 0, LPROC_REC_SIZE);
  return p ? &p->task : NULL;
}

static void lproc_free_rec(lpvm_task *t) { free(t); }

static int lproc_init(lpvm_task *t, void *arg) {
  lproc *p = (lproc *)t;
  lproc_start *s = arg;
  p->start = s;
  p->max_heap = s->max_heap;
  p->max_mailbox = s->max_mailbox;
  p->boot = (uint8_t)s->boot;
  s->adopted = 1;
  if (s->wait_marker) {
    p->wait = LP_START;
    return LPVM_WAIT;
  }
  return LPVM_IDLE;
}

static void free_start(lproc_start *s) {
  if (!s) return;
  if (s->kind == LS_STATE && s->L) lua_close(s->L);
  free(s);
}

static void lproc_terminate(lpvm_task *t, const uint8_t *reason, size_t len) {
  lproc *p = (lproc *)t;
  lproc_crash_report(p, reason, len);
  if (p->boot)
    atomic_store(&boot_ok, lpvm_term_is_atom(reason, len, "normal"));
  free_start(p->start);
  p->start = NULL;
  lmod_drop_owned(p);
  atomic_store_explicit(&p->task.hint, NULL, memory_order_relaxed);
  if (p->L) lproc_pool_release(p);
  free(p->exit_reason);
  p->exit_reason = NULL;
  free(p->aliases);
  p->aliases = NULL;
  p->nalias = p->calias = p->nalias_mon = 0;
}

/* Before the process runs (a slice, new mail, a timeout): a queue past max_mailbox,
** or heap and queue together past max_heap, end it, so a flooded process dies even
** if it never receives. Senders see nothing (sends stay asynchronous). */
static int over_limits(lproc *p) {
  if (p->max_mailbox && lpvm_queued_msgs(&p->task) > p->max_mailbox)
    set_reason_atom(p, "max_mailbox");
  else if (p->max_heap && p->mem + queue_cost(p) > p->max_heap)
    set_reason_atom(p, "max_heap");
  else
    return 0;
  p->failed = 1;
  return 1;
}

static int lproc_idle(lpvm_task *t) {
  lproc *p = (lproc *)t;
  if (over_limits(p)) return LPVM_EXIT;
  if (p->start) return lproc_first(p);
  if (p->wait == LP_MIGRATE) {
    if (lpvm_on_thread(t) != p->want_thread && ++p->tries <= 3) return LPVM_IDLE;
    p->wait = LP_RUN;
  }
  if (p->wait != LP_RUN) return LPVM_WAIT;
  return lproc_resume(p);
}

/* The start marker of spawn_monitor: the first message from the creator. */
static const uint8_t start_marker[] = {131, 119, 11, '$', 'l', 'p', 'v', 'm', '_',
                                       's', 't', 'a', 'r', 't'};

int lproc_send_marker(lproc *parent, lpvm_id child) {
  return lproc_release(&parent->task, child);
}

int lproc_release(lpvm_task *from, lpvm_id child) {
  return lpvm_send(from, child, start_marker, sizeof start_marker);
}

static int take_marker(lproc *p) {
  lpvm_id from = p->start->creator;
  for (lpvm_msg *m = lpvm_mbox_next(&p->task, NULL); m; m = lpvm_mbox_next(&p->task, m)) {
    if (lpvm_msg_from(m) == from && lpvm_msg_len(m) == sizeof start_marker &&
        memcmp(lpvm_msg_data(m), start_marker, sizeof start_marker) == 0) {
      lpvm_mbox_take(&p->task, m);
      lpvm_msg_free(m);
      return 1;
    }
  }
  return 0;
}

static int lproc_handle_event(lpvm_task *t) {
  lproc *p = (lproc *)t;
  if (over_limits(p)) return LPVM_EXIT;
  switch (p->wait) {
    case LP_RECV: case LP_INFO: return lproc_resume(p);
    case LP_START:
      if (!take_marker(p)) return LPVM_WAIT;
      p->wait = LP_RUN;
      return lproc_first(p);
    case LP_SLEEP:   /* messages wait for a receive; an interrupt ends the sleep */
      if (atomic_load(&interrupt_id) != p->task.id) return LPVM_WAIT;
      lpvm_cancel_timer(&p->task);
      p->wait = LP_RUN;
      return lproc_resume(p);
    default: return LPVM_WAIT;   /* halt: messages wait for a receive */
  }
}

static int lproc_handle_timeout(lpvm_task *t) {
  lproc *p = (lproc *)t;
  if (over_limits(p)) return LPVM_EXIT;
  switch (p->wait) {
    case LP_RECV:
      p->timed_out = 1;
      p->timer_set = 0;
      return lproc_resume(p);
    case LP_SLEEP:
      p->wait = LP_RUN;
      return lproc_resume(p);
    default: return LPVM_WAIT;
  }
}

static int lproc_handle_info(lpvm_task *t, lpvm_tbuf *map) {
  lproc *p = (lproc *)t;
  lpvm_put_atom(map, "memory");
  lpvm_put_int(map, (int64_t)(p->mem + sizeof(lproc)));
  lpvm_put_atom(map, "heap_limit");
  lpvm_put_int(map, (int64_t)p->max_heap);
  lpvm_put_atom(map, "mailbox_limit");
  lpvm_put_int(map, (int64_t)p->max_mailbox);
  lpvm_put_atom(map, "recycled");
  lpvm_put_atom(map, p->recycled == 1 ? "true" : "false");
  lpvm_put_atom(map, "stock");   /* its state was made ahead (lproc_maker.c) */
  lpvm_put_atom(map, p->recycled == LPROC_STOCK ? "true" : "false");
  return 5 + lcode_info(p, map);
}

const lpvm_task_def lproc_def = {
    .type = "lua",
    .prio = LPVM_PRIO_NORMAL,
    .flags = 0,
    .allocate = lproc_allocate,
    .free = lproc_free_rec,
    .init = lproc_init,
    .terminate = lproc_terminate,
    .idle = lproc_idle,
    .handle_event = lproc_handle_event,
    .handle_timeout = lproc_handle_timeout,
    .handle_info = lproc_handle_info,
};

/* ---- spawning --------------------------------------------------------------------------------- */

void lproc_not_a_process(lua_State *L) {
  luaL_error(L, "not inside an lpvm process");
  abort();   /* not reached */
}

/* s is the child's from here on if the spawn got as far as init, else freed here. */
int lproc_spawn(lproc *parent, lproc_start *s, const lpvm_spawn_opts *o, lpvm_id *id) {
  int rc = lpvm_spawn_task_opt(parent ? &parent->task : NULL, &lproc_def, s, o, id);
  if (rc != 0 && !s->adopted) free_start(s);
  return rc;
}

void lproc_teardown(void) {
  lproc_maker_teardown();
  lproc_pool_teardown(lproc_cfg.recycle);
  ltask_teardown();
  lproc_slice_teardown();
  lcode_teardown();
}

/* ---- the boot state ---------------------------------------------------------------------------- */

/* A state for the boot process, made before it exists (lboot.c): counted from the
** moment the process adopts it. */
lua_State *lproc_state_new(void) {
  lua_State *L = lua_newstate(lproc_alloc, NULL);
  if (L) lua_atpanic(L, lproc_panic);
  return L;
}

/* Spawn a state made by lproc_state_new whose stack holds a function and `nargs`
** arguments as the boot process. */
int lproc_spawn_boot(lua_State *L, int nargs, lpvm_id *id) {
  lproc_start *s = calloc(1, sizeof *s);
  if (!s) {
    lua_close(L);
    return LPVM_ENOMEM;
  }
  s->kind = LS_STATE;
  s->L = L;
  s->nargs = nargs;
  s->max_heap = lproc_cfg.max_heap;
  s->boot = 1;
  lpvm_spawn_opts o = LPVM_SPAWN_OPTS_INIT;
  o.thread = lproc_cfg.threads ? 1 : 0;
  return lproc_spawn(NULL, s, &o, id);
}
