/*
** lproc_maker.c -- new Lua states made ahead, off the workers: a VM thread beside the
** workers and the timer thread (BEAM too runs aux threads beside its schedulers).
**
** Why: a spawn that finds no recycled state (create100k: 100,000 processes that all
** stay alive) spends most of its worker time making the state: lua_newstate (~21,000
** instructions: 49 fixed strings interned, the registry) and the lazy globals and
** string stand-in (llibs_install, ~8,700), and the first touches of the new block's
** pages (docs/performance.md, "Creating processes"). None of it depends on the owner,
** so this thread makes them ahead, each exactly as vm/lproc.c makes one on the spot
** (lproc_state_make: lpvm's allocator, the first objects in a block of their own,
** vm/lproc_block.c; then lproc_state_init), and keeps a small stock; a spawn with no
** recycled state to take (lproc_pool.c) takes one from it (lproc_maker_take).
**
** The maker runs at SCHED_IDLE priority: made ahead by an idle core (one worker on a
** two-core machine), while a worker on every core goes first and its spawns make their
** own states as before; a take never waits for the maker's lock (trylock).
**
** The bytecode spawned last (lproc_maker_hint: a spawn that had to load it says so) is
** loaded into each state made, at index 1 of its main thread's empty stack, as the
** pool keeps a recycled state's function: a spawn of the same bytecode (the same
** number, lproc_start.code_id) takes it there instead of loading it on the worker
** (lproc_pool_reuse_fn); any other leaves it as garbage. That moves ~6,000 instructions
** a create (create100k's body) from the worker to this thread; it saves none.
**
** Rules: the maker never runs a process's code (nothing but lua_newstate,
** lproc_state_init and the hint's load runs in its states); it works only while the stock is below its
** low mark (half the bound) and then fills it to the bound, and otherwise waits on a
** condition variable (no CPU while idle); a spawn that finds the stock empty makes its
** own state as before, never waits. The thread starts once LPROC_MAKER_AFTER spawns
** have made their own, so a VM that never spawns many processes never has it. A stock state is a new state: its
** process sees what it would see in one made on the spot (tests/lua/test_recycle.lua),
** its bytes are counted from the moment a process takes it, and a process with a
** heap limit (max_heap) makes its own, so the limit sees every allocation as before.
**
** Threads and the allocator: a stock state's objects beyond its block come from the
** maker thread's lists (lproc_small.h) or malloc, and go to the freeing thread's lists
** or free() later: both hold only malloc'd blocks, so a block made on one thread and
** freed on another is fine (jemalloc returns it to its arena). Between the maker and
** its process a state is touched by nobody (mk.mu orders the hand-over).
**
** On by default since its states lie in huge pages (LPROC_MAKER_DEFAULT 32; LPVM_STOCK=0
** turns it off). It was off before: measured quietly (docs/performance.md, "States made
** ahead"), the stock took create100k with one worker from 2.4 to 1.5 s, but a ring of
** 10,000 stock processes hopped 40-80% slower (500 -> 700-900 ns) with the same
** instructions and the same simulated cache misses per hop (cg_hop.sh): where the
** states lay in memory, not what ran, cost it. The maker's blocks came from jemalloc's
** default arena, in 4 KiB pages; the workers' arenas give a big VM huge pages
** (sched/memory.c), and the maker now takes an arena of that kind (lpvm_aux_arena).
** Alternated at load 10-13 ("Huge pages"), a ring of stock states hops as fast as one
** of spot-made states (10k and 100k: 0.99-1.00 of main's hop), and 15% slower with the
** maker left in the default arena. Taken newest first the stock was worst; it is taken
** oldest first (a ring buffer, v[head] on).
**
** The bound: LPVM_STOCK in the environment (0: no maker; default
** LPROC_MAKER_DEFAULT), read when the VM starts (lproc_setup). A stock state is its
** block (LPROC_BLOCK, 7,168 bytes: a new state's ~5,500 bytes of objects all fit):
** 32 states are 229 KB. Every stock state is closed when the VM stops (lproc_teardown).
*/
#include <lauxlib.h>
#include <lua.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lpvm/lpvm.h"
#include "vm/lproc_int.h"

#define LPROC_MAKER_DEFAULT 32  /* LPVM_STOCK=0 turns it off: see "On by default" above */
#define LPROC_MAKER_MAX 1024
/* The maker starts once spawns have made this many states of their own: a VM that
** starts few processes (most programs) never has it, nor its stock. */
#define LPROC_MAKER_AFTER 32
/* Its states in huge pages, as the workers' are in a big VM: in jemalloc's default
** arena (4 KiB pages, scattered frames) a ring of stock states hopped 15% slower
** (docs/performance.md, "Huge pages"). The maker moves to an arena of the workers' kind
** (lpvm_aux_arena) at the task count at which the workers move to theirs (MEM_BIG_VM,
** tasks/task_sched.h): a smaller VM keeps the few MB of a new arena out of its RSS. */
#define LPROC_MAKER_BIG 4096

/* A state in stock: its block and whether its next objects are still bumped from it;
** the function it holds at index 1 (loaded from the hint), its bytecode's length and
** number (0, 0: none). */
typedef struct made {
  lua_State *L;
  char *blk;
  uint64_t fn_id;
  uint16_t fn_len;
  uint8_t bump;
} made;

/* The bytecode spawned last that a process had to load (lproc_maker_hint): the maker
** loads it into the states it makes, so that a spawn of the same bytecode (the same
** number) takes it as a recycled state's kept function (lproc_pool_reuse_fn) instead
** of loading it on the worker. refs: the slot and a maker's load in progress (mu). */
typedef struct hint {
  int refs;
  uint64_t id;
  size_t len;
  char code[];
} hint;
#define LPROC_HINT_MAX 65535   /* bytes of bytecode (fn_len's range) */

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;   /* the maker waits here: stock at or above low, or a failure */
  made *v;             /* the stock (mu); v[0..n) */
  int n;               /* states in stock (mu) */
  int head;            /* the oldest: v[head], then on round (mu) */
  int cap, low;        /* the bound and the low mark (mu; lproc_maker_setup) */
  int waiting;         /* the maker waits on cv (mu) */
  int stop;            /* the VM stops: the maker ends (mu) */
  int started;         /* the thread was started (mu) */
  pthread_t th;        /* written by the thread that starts it, under mu */
  _Atomic int avail;   /* n, for the look without the lock (writers hold mu) */
  _Atomic int on;      /* misses start the maker: cap > 0, not started, not stopping */
  _Atomic int misses;  /* spawns that made their own state while `on` */
  _Atomic int failed;  /* the maker could not make a state: a miss wakes it again */
  hint *hint;          /* the bytecode to load (mu), or NULL */
  _Atomic uint64_t hint_id;   /* hint's number, for the look without the lock (mu) */
  _Atomic int live;    /* the thread runs: hints are taken (mu) */
} mk = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* ---- making one ----------------------------------------------------------------------- */

/* The first touch of a fresh page costs 10-15 us on the VMs lpvm is measured on
** (sched/memory.c); populating pages in one call, under 1 us each. The maker's blocks
** come from its own thread's arena, one after another, mostly at rising addresses: when
** a new block lies outside the window populated last, the LPROC_MAKER_AHEAD bytes from
** its page on are populated (best effort: a range that is not all mapped fails, and
** MADV_POPULATE_WRITE changes no byte). At most one window is resident ahead of use. */
#define LPROC_MAKER_AHEAD ((uintptr_t)64 << 10)
static uintptr_t ahead_lo, ahead_hi;   /* the window populated last (the maker thread) */

static void populate_ahead(const char *blk) {
#ifdef MADV_POPULATE_WRITE
  uintptr_t b = (uintptr_t)blk, pg = (uintptr_t)sysconf(_SC_PAGESIZE);
  if (b >= ahead_lo && b + LPROC_BLOCK <= ahead_hi) return;
  if (pg == 0 || (pg & (pg - 1))) return;
  ahead_lo = b & ~(pg - 1);
  ahead_hi = ahead_lo + LPROC_MAKER_AHEAD;
  (void)madvise((void *)ahead_lo, LPROC_MAKER_AHEAD, MADV_POPULATE_WRITE);
#else
  (void)blk;
#endif
}

static int init_cf(lua_State *L) {
  lproc_state_init(L, 0);   /* may raise (memory): protected */
  lproc_pool_fresh(L);
  return 0;
}

/* (hint): the hint's bytecode loaded as lfun_push_spawn loads it (may raise: memory) */
static int load_cf(lua_State *L) {
  const hint *h = lua_touserdata(L, 1);
  if (luaL_loadbufferx(L, h->code, h->len, LPROC_SPAWN_CHUNK, "b") != LUA_OK)
    lua_error(L);
  return 1;
}

static void hint_unref(hint *h) {
  if (h && --h->refs == 0) free(h);
}

/* The hint's function at index 1 of a new state's empty stack (made m): what a spawn's
** first run would load, so nothing the process can see differs (the main thread's base
** frame is below every level Lua code reaches); a spawn of other code leaves it as
** garbage, as a recycled state's kept function. Nothing if there is no hint or the
** load fails. */
static void load_hint(lua_State *L, made *m) {
  pthread_mutex_lock(&mk.mu);
  hint *h = mk.hint;
  if (h) h->refs++;
  pthread_mutex_unlock(&mk.mu);
  if (!h) return;
  lua_pushcfunction(L, load_cf);
  lua_pushlightuserdata(L, h);
  if (lua_pcall(L, 1, 1, 0) == LUA_OK) {
    m->fn_id = h->id;
    m->fn_len = (uint16_t)h->len;
  } else {
    lua_settop(L, 0);
  }
  pthread_mutex_lock(&mk.mu);
  hint_unref(h);
  pthread_mutex_unlock(&mk.mu);
}

/* A new state as lproc.c makes one on the spot, then initialised as its first run
** would (lproc_main); owner is a stand-in for the allocator, which keeps the block. */
static int make_one(made *m) {
  lproc owner;
  memset(&owner, 0, sizeof owner);
  lua_State *L = lproc_state_make(&owner);
  if (!L) return 0;
  if (owner.blk) populate_ahead(owner.blk);
  lua_pushcfunction(L, init_cf);
  if (lua_pcall(L, 0, 0, 0) != LUA_OK) {
    lproc_block_close(L, owner.blk);
    return 0;
  }
  lua_settop(L, 0);
  m->fn_id = 0;
  m->fn_len = 0;
  load_hint(L, m);
  lua_setallocf(L, lproc_alloc, NULL);   /* nobody's until taken */
  m->L = L;
  m->blk = owner.blk;
  m->bump = owner.blk_bump;
  return 1;
}

/* ---- the thread ----------------------------------------------------------------------- */

static void *maker_main(void *arg) {
  (void)arg;
#ifdef SCHED_IDLE
  /* Made ahead by an idle core: with a worker on every core the workers go first, and
  ** spawns make their own states as before (best effort: a failure keeps the policy). */
  struct sched_param sp = {0};
  (void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
#endif
  int aux = 0;   /* moved to the huge-page arena */
  pthread_mutex_lock(&mk.mu);
  while (!mk.stop) {
    if (mk.n >= mk.low) {
      mk.waiting = 1;
      pthread_cond_wait(&mk.cv, &mk.mu);
      mk.waiting = 0;
      continue;
    }
    while (!mk.stop && mk.n < mk.cap) {   /* below the low mark: fill to the bound */
      pthread_mutex_unlock(&mk.mu);
      if (!aux && lpvm_task_count() >= LPROC_MAKER_BIG) {
        lpvm_aux_arena();
        aux = 1;
      }
      made m;
      int ok = make_one(&m);
      pthread_mutex_lock(&mk.mu);
      if (!ok) {   /* out of memory: again after the next take or miss (or the stop) */
        atomic_store_explicit(&mk.failed, 1, memory_order_relaxed);
        mk.waiting = 1;
        pthread_cond_wait(&mk.cv, &mk.mu);
        mk.waiting = 0;
        break;
      }
      mk.v[(mk.head + mk.n++) % mk.cap] = m;   /* oldest first out: see the FIFO note */
      atomic_store_explicit(&mk.avail, mk.n, memory_order_relaxed);
    }
  }
  pthread_mutex_unlock(&mk.mu);
  return NULL;
}

/* Under mu: start the thread, with every signal blocked (the slice ticks, SIGINT and
** SIGCHLD are for the workers and the main thread). */
static void start_locked(void) {
  atomic_store_explicit(&mk.on, 0, memory_order_relaxed);   /* one try */
  if (mk.started || mk.stop || mk.cap <= 0) return;
  if (!mk.v && !(mk.v = malloc((size_t)mk.cap * sizeof *mk.v))) return;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  mk.started = pthread_create(&mk.th, NULL, maker_main, NULL) == 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);   /* no thread: every spawn makes its own */
  atomic_store_explicit(&mk.live, mk.started, memory_order_relaxed);
}

/* ---- the interface -------------------------------------------------------------------- */

/* A spawn loaded code (len bytes) that it did not find kept: with the maker running,
** its next states hold it (load_hint). Only bytecode numbered by its spawner's dump
** cache (lproc_start.code_id: a local spawn, trusted) of at most LPROC_HINT_MAX bytes;
** a look without the lock when it is the hint already; never waits for the lock (the
** maker runs at idle priority). */
void lproc_maker_hint(lua_State *L, const void *code, size_t len) {
  if (!atomic_load_explicit(&mk.live, memory_order_relaxed) || len > LPROC_HINT_MAX) return;
  void *ud;
  if (lua_getallocf(L, &ud) != lproc_alloc || !ud) return;
  const lproc *p = ud;
  uint64_t id = p->start ? p->start->code_id : 0;
  if (!id || atomic_load_explicit(&mk.hint_id, memory_order_relaxed) == id) return;
  hint *h = malloc(sizeof *h + len);
  if (!h) return;
  h->refs = 1;
  h->id = id;
  h->len = len;
  memcpy(h->code, code, len);
  if (pthread_mutex_trylock(&mk.mu) != 0) {
    free(h);
    return;
  }
  hint *old = NULL;
  if (mk.started && !mk.stop) {
    old = mk.hint;
    mk.hint = h;
    atomic_store_explicit(&mk.hint_id, id, memory_order_relaxed);
    h = NULL;
  }
  hint_unref(old);
  pthread_mutex_unlock(&mk.mu);
  free(h);
}

lua_State *lproc_maker_take(char **blk, uint8_t *bump, uint16_t *fn_len, uint64_t *fn_id) {
  if (atomic_load_explicit(&mk.avail, memory_order_relaxed) == 0) {
    if (atomic_load_explicit(&mk.on, memory_order_relaxed)) {
      if (atomic_fetch_add_explicit(&mk.misses, 1, memory_order_relaxed) + 1 < LPROC_MAKER_AFTER)
        return NULL;
      pthread_mutex_lock(&mk.mu);
      start_locked();
      pthread_mutex_unlock(&mk.mu);
    } else if (atomic_load_explicit(&mk.failed, memory_order_relaxed) &&
               pthread_mutex_trylock(&mk.mu) == 0) {
      atomic_store_explicit(&mk.failed, 0, memory_order_relaxed);
      if (mk.waiting) pthread_cond_signal(&mk.cv);
      pthread_mutex_unlock(&mk.mu);
    }
    return NULL;
  }
  made m = {NULL, NULL, 0, 0, 0};
  /* The maker runs at idle priority and might be preempted holding mu: never wait */
  if (pthread_mutex_trylock(&mk.mu) != 0) return NULL;
  if (mk.n > 0) {
    m = mk.v[mk.head];
    mk.head = (mk.head + 1) % mk.cap;
    mk.n--;
    atomic_store_explicit(&mk.avail, mk.n, memory_order_relaxed);
    if (mk.n < mk.low && mk.waiting) pthread_cond_signal(&mk.cv);
  }
  pthread_mutex_unlock(&mk.mu);
  if (m.L) {
    *blk = m.blk;
    *bump = m.bump;
    *fn_len = m.fn_len;
    *fn_id = m.fn_id;
  }
  return m.L;
}

/* States in the stock now (lpvm.stock): a look without the lock, for a program or a
** test that must wait until the maker, at idle priority, has made one. */
int lproc_maker_stock(void) { return atomic_load_explicit(&mk.avail, memory_order_relaxed); }

/* The VM starts (lproc_setup): the bound from LPVM_STOCK. The thread starts later. */
void lproc_maker_setup(void) {
  const char *e = getenv("LPVM_STOCK");
  int cap = LPROC_MAKER_DEFAULT;
  if (e && *e) {
    char *end;
    long v = strtol(e, &end, 10);
    if (*end == '\0' && v >= 0) cap = v > LPROC_MAKER_MAX ? LPROC_MAKER_MAX : (int)v;
  }
  pthread_mutex_lock(&mk.mu);
  if (!mk.started && !mk.v) {   /* a second setup without a teardown keeps the bound */
    mk.cap = cap;
    mk.low = (cap + 1) / 2;
  }
  mk.stop = 0;
  atomic_store(&mk.failed, 0);
  atomic_store(&mk.misses, 0);
  atomic_store(&mk.on, mk.cap > 0 && !mk.started);
  pthread_mutex_unlock(&mk.mu);
}

/* The VM has stopped (lproc_teardown): the thread ends, the stock is closed. */
void lproc_maker_teardown(void) {
  pthread_mutex_lock(&mk.mu);
  atomic_store(&mk.on, 0);
  mk.stop = 1;
  int started = mk.started;
  pthread_cond_signal(&mk.cv);
  pthread_mutex_unlock(&mk.mu);
  if (started) pthread_join(mk.th, NULL);
  pthread_mutex_lock(&mk.mu);
  while (mk.n > 0) {
    made m = mk.v[mk.head];
    mk.head = (mk.head + 1) % mk.cap;
    mk.n--;
    lproc_block_close(m.L, m.blk);
  }
  atomic_store(&mk.avail, 0);
  atomic_store(&mk.live, 0);
  hint_unref(mk.hint);
  mk.hint = NULL;
  atomic_store(&mk.hint_id, 0);
  free(mk.v);
  mk.v = NULL;
  mk.started = 0;
  mk.cap = mk.low = mk.head = 0;
  pthread_mutex_unlock(&mk.mu);
}
