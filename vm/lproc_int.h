/*
** lproc_int.h -- what the vm/ files share: the Lua process record and the helpers
** the `lpvm` module, the codec and the lazy libraries call each other through.
** Not public: embedders use vm/lproc.h.
*/
#ifndef LPVM_LPROC_INT_H
#define LPVM_LPROC_INT_H

#include <lua.h>
#include <stddef.h>
#include <stdint.h>

#include "lpvm/task.h"
#include "lpvm/term.h"
#include "vm/lproc.h"
#include "vm/lproc_small.h"
#include "vm/lraw.h"

/* What a process waits for while its main thread is suspended. */
enum {
  LP_RUN = 0,     /* runnable: preempted by the count hook, or about to start */
  LP_RECV,        /* receive: a message or the receive timeout */
  LP_SLEEP,       /* sleep: the timer only */
  LP_INFO,        /* info(): the {info, Ref, Map} reply or the DOWN of its monitor */
  LP_MIGRATE,     /* migrate(): until the task runs in the wanted mode */
  LP_START,       /* spawn_monitor: waiting for the creator's start marker */
  LP_HALT         /* halt(): wait for the VM to stop */
};

/* How a process starts (the spawn argument, owned by the process until it runs). */
/* LS_FUNC: bytecode + upvalue tuple (luaproc's newproc); LS_TERM: the function as a
** term in the upvalue part (spawn, lfun.c); LS_MODULE: a module name. */
enum { LS_FUNC = 1, LS_MODULE, LS_STATE, LS_TERM };

typedef struct lproc_start {
  int kind;
  lua_State *L;           /* LS_STATE: a ready state, function and args on its stack */
  int nargs;              /* LS_STATE */
  size_t max_heap;        /* 0 = none */
  uint32_t max_mailbox;   /* messages queued at most; 0 = none */
  lpvm_id creator;        /* LP_START: whose marker to wait for */
  int wait_marker;        /* 1: wait for the creator's start marker (spawn_monitor) */
  int adopted;            /* init ran: the process owns this now */
  int boot;               /* the boot process */
  int remote;             /* a peer's spawn request: functions in it load only while
                          ** remote code is trusted (lterm_remote_funs_trusted) */
  size_t code_len;        /* LS_FUNC: bytecode; LS_MODULE: module name */
  size_t up_len;          /* LS_FUNC: term of the upvalues (a tuple); LS_TERM: the function */
  size_t args_len;        /* term of the arguments (a tuple) */
  uint64_t code_id;       /* LS_TERM from lfun_put_spawn: its bytecode's number (lfun.c),
                          ** 0: none */
  uint8_t data[];         /* code, upvalues, args */
} lproc_start;

#define LPROC_EXIT_SIGNAL 2   /* lproc.exiting: ended by a signal mid-step (lproc_slice.c) */

typedef struct lproc {
  lpvm_task task;           /* first: the record the runtime knows */
  /* Hot: a message hop's fields, right after the task's hot part (lpvm/task.h): with
  ** the record on a cache line (lproc_allocate) both fill its lines 1-4 (bytes
  ** 64-319, checked below); the rest is read rarely. */
  lua_State *L;             /* the process's state; its main thread is the body */
  lpvm_msg *scan;           /* receive: last message looked at and left (save ptr) */
  lpvm_msg *cur;            /* receive: the message the predicate is judging */
  lpvm_msg *owned;          /* a taken message being decoded (freed if that fails) */
  /* The ref-receive optimisation: when a reference is made here (make_ref, alias,
  ** monitor) the mailbox's last message is noted; no message up to it can hold the
  ** new reference, so receive_ref of that reference starts after it. A take since
  ** (mq_gen moved) may have freed the noted message: the mark is then ignored. */
  lpvm_msg *mark_msg;       /* NULL: the mailbox was empty */
  uint64_t code_gen;        /* lcode.c: the code generation this process is at */
  size_t max_heap;          /* bytes the state and its queue may hold (0 = none) */
  uint32_t mark_gen;
  uint32_t max_mailbox;     /* messages queued at most (0 = none) */
  int ncur;                 /* values of `cur` on the stack */
  int nargs;                /* values for the next resume */
  uint32_t punish;          /* send: reductions charged for receivers' queues */
  uint16_t slices;          /* count-hook calls since the last yield */
  uint8_t wait;             /* LP_* */
  uint8_t timer_set;        /* receive: a timer runs for this receive */
  uint8_t timed_out;
  uint8_t polled;           /* receive with a timeout: pending signals drained once */
  uint8_t in_pred;          /* receive: the predicate runs */
  uint8_t in_eval;          /* leval.c: an lpvm.eval request runs */
  uint8_t heap_refused;     /* the allocator refused: max_heap */
  uint8_t exiting;          /* exit(reason) was called (1), or an exit signal ended
                            ** it where it could not yield (LPROC_EXIT_SIGNAL) */
  uint8_t sched_yield;      /* a coroutine yielded for the scheduler (see llibs.c) */
  /* Cold. */
  size_t mem;               /* bytes the state holds (Lua's count) */
  lproc_start *start;       /* until the first run */
  uint64_t want_ref, mon_ref;  /* info(): request and monitor references */
  uint64_t recv_ref;        /* receive_ref: the reference waited for */
  uint64_t mark_ref;        /* the reference of mark_msg */
  /* Active aliases: a message sent with send_alias carries its alias in the
  ** message's ref field and is dropped unseen unless the alias is still active (or
  ** came before the DOWN that ended it: LPVM_MSGF_ADMIT). nalias_mon counts those
  ** made by monitor(pid, "alias"), which the monitor's DOWN ends (lmod_msg.c). */
  struct lproc_alias { uint64_t ref; uint32_t mon; } *aliases;
  uint32_t nalias, calias;
  uint8_t *exit_reason;     /* exit(reason): the term, set before unwinding; after an
                            ** error with __tostring, the crash report's text (failed
                            ** 2, lproc_exit.c); written by the worker running p */
  uint32_t exit_len;
  uint32_t nalias_mon;      /* see aliases above */
  lua_State *helper;        /* lcode.c: coroutine that runs module updates */
  uint8_t want_thread;      /* migrate(): wanted mode */
  uint8_t tries;            /* migrate(): steps waited */
  uint8_t pid_mt;           /* the light userdata metatable (pids, references) is installed */
  uint8_t closing;          /* terminate: the state is being closed */
  uint8_t boot;             /* the boot process (lproc_boot_ok, crash log) */
  uint8_t failed;           /* it ended by itself: error, exit(reason), max_heap */
  uint8_t clean_watch;      /* clean_cf: its collection runs (the allocator watches; 2: all) */
  uint8_t clean_new;        /* an object was made while clean_watch was set */
  uint8_t recycled;         /* its state came from the pool (1, info's `recycled`) or
                            ** the maker's stock (LPROC_STOCK, info's `stock`) */
  /* The spawned function kept in a recycled state (lproc_pool.c): fn_cand is the
  ** stack index, in lproc_main's frame, of the previous owner's function, which the
  ** decoder (lfun.c) takes instead of loading bytecode that dumps the same; fn_kept
  ** says the finished main thread left the process's function for the pool. Both
  ** written by the worker running the process. */
  uint8_t fn_cand;          /* LPROC_NO_CAND: none, but note fn_len */
  uint8_t fn_kept;
  uint16_t fn_len;          /* bytecode length of the function: the kept one's until
                            ** the decoder sees this process's (0: not known) */
  uint8_t libs_exposed;     /* llibs.c: Lua code may hold the lazy globals' metatable or the
                            ** string stand-in (getmetatable, debug, package): 1; 2 an
                            ** adopted state's (they may still be one table); written by
                            ** the worker running p */
  uint8_t blk_bump;         /* lproc_block.c: new objects are bumped from blk (made by p's
                            ** lua_newstate, none has failed to fit yet); set with blk
                            ** NULL: the next object is a new state's first, and makes it */
  char *blk;                /* lproc_block.c: the block of p->L's first objects (moves with
                            ** the state through the pool); written by the worker running p */
  uint64_t fn_id;           /* the kept function's bytecode number (lfun.c's dump cache)
                            ** until the decoder sees this process's, as fn_len (0: none);
                            ** here, not beside fn_len: the record stays in 448 bytes */
  void *strc;               /* lterm_plain.c: the short strings its messages bring again
                            ** (a userdata of its state, anchored in the registry; 1: one
                            ** string decoded, none made yet); written by the worker
                            ** running p */
} lproc;

/* The hop's lines: the task's hot part starts on line 1 and lproc's ends within
** line 4 (a field added to either hot part must push a cold one out). */
_Static_assert(offsetof(lpvm_task, rq_next) == 64, "lpvm_task: hot part off line 1");
_Static_assert(offsetof(lproc, mem) <= 320, "lproc: hot part past line 4");
/* mem100k: a record past 448 bytes takes 512 with its line rounding (lproc_allocate). */
_Static_assert(sizeof(lproc) <= 448, "lproc: record past 448 bytes (+64 B a process)");

#define LPROC_NO_CAND 255

extern lproc_config lproc_cfg;
extern const lpvm_task_def lproc_def;

/* The process that owns L (its allocator's user data): read in place (vm/lraw.h) when
** the mirror is trusted, as lproc_check does (every receive's continuation starts
** here: lua_getallocf's call was 24 instructions a wake). */
static inline lproc *lproc_of(lua_State *L) {
  if (lraw_ok()) return (lproc *)((const lraw_state *)(const void *)L)->l_G->ud;
  void *ud;
  (void)lua_getallocf(L, &ud);
  return (lproc *)ud;
}

/* lproc.c */
_Noreturn void lproc_not_a_process(lua_State *L);

/* The process that owns L; raises if L is not a process's. Inline: every lpvm call
** starts with it (twice a message hop), so the allocator's user data is read in place
** (vm/lraw.h) when the mirror is trusted, lua_getallocf's call otherwise. */
static inline lproc *lproc_check(lua_State *L) {
  lproc *p = lraw_ok() ? (lproc *)((const lraw_state *)(const void *)L)->l_G->ud
                       : lproc_of(L);
  if (!p || !p->L) lproc_not_a_process(L);
  return p;
}

int lproc_spawn(lproc *parent, lproc_start *s, const lpvm_spawn_opts *o, lpvm_id *id);
/* lazy libraries, hook, module preload; kept: llibs_install's (0 for a new state).
** With LLIBS_IN_PLACE it must neither allocate nor raise: lproc_pool.c's bare cleaning
** calls it outside a protected call. */
void lproc_state_init(lua_State *L, int kept);
/* The collector's mode and parameters a process starts with (and a recycled state is
** given back): generational, minor multiplier LPROC_GC_MINOR, major LPROC_GC_MAJOR. */
#define LPROC_GC_MINOR 50
#define LPROC_GC_MAJOR 100
void lproc_gc_default(lua_State *L);
void *lproc_alloc(void *ud, void *ptr, size_t osize, size_t nsize);   /* ud: the owner */
void *lproc_alloc_closing(void *ud, void *ptr, size_t osize, size_t nsize);   /* lua_close */

/* lproc_alloc's most common case, inline for a maker of many objects (vm/lraw_new.c's
** lists, when the state's allocator is lproc_alloc): p if it is an owner with no heap
** limit, no cleaning watch and no block being bumped, whose new blocks then come from
** the thread's lists (lproc_small_pop; the caller adds their bytes to p->mem); NULL
** otherwise, and lproc_alloc decides as for any block. One test for several blocks. */
static inline lproc *lproc_alloc_direct(lproc *p) {
  return p && !p->max_heap && !p->clean_watch && !p->blk_bump ? p : NULL;
}
size_t lproc_state_bytes(lua_State *L);  /* by Lua's own count */

/* lproc_block.c: a new state's first objects carved from one block of LPROC_BLOCK
** bytes (an idle process's whole heap fits: docs/performance.md). The bump and the
** free are here, inline in the allocator (lproc_alloc); the rest is in lproc_block.c. */
#define LPROC_BLOCK 7168
typedef struct lproc_blk_head {   /* 16 bytes: the global state after it is aligned */
  uint32_t top;                   /* offset of the first unused byte */
  uint32_t unused[3];
} lproc_blk_head;
#define LPROC_BLK_HEAD sizeof(lproc_blk_head)
#define LPROC_BLK_ALIGN(n) (((n) + 7) & ~(size_t)7)   /* Lua's largest alignment */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define LPROC_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define LPROC_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define LPROC_POISON(p, n) ((void)(p), (void)(n))
#define LPROC_UNPOISON(p, n) ((void)(p), (void)(n))
#endif
void *lproc_block_first(lproc *p, size_t nsize);   /* make the block, or NULL */
void lproc_block_drop(lproc *p);                    /* free the block */
void *lproc_block_realloc(lproc *p, void *ptr, size_t osize, size_t nsize);
void lproc_block_close(lua_State *L, char *blk);     /* close an owner-less state */
void lproc_block_to_line(lproc *p);   /* the next object bumped starts a cache line */

/* ptr (not NULL) is one of the block's objects. Without a block this is false too:
** no heap object lies below address LPROC_BLOCK. */
static inline int lproc_block_owns(const lproc *p, const void *ptr) {
  return (uintptr_t)ptr - (uintptr_t)p->blk < LPROC_BLOCK;
}

/* A new object from the block (p->blk_bump): NULL, and no more bumps, if it does not
** fit. */
static inline void *lproc_block_alloc(lproc *p, size_t nsize) {
  if (!p->blk) return lproc_block_first(p, nsize);
  lproc_blk_head *h = (lproc_blk_head *)p->blk;
  size_t need = LPROC_BLK_ALIGN(nsize);
  if (need > LPROC_BLOCK - h->top) {   /* the block is used up, near enough */
    p->blk_bump = 0;
    return NULL;
  }
  char *q = p->blk + h->top;
  h->top += (uint32_t)need;
  LPROC_UNPOISON(q, nsize);
  return q;
}

/* A block object freed: its space stays unused, unless it was the last one bumped;
** the global state (the block's first object, the last lua_close frees) drops it. */
static inline void lproc_block_free(lproc *p, void *ptr, size_t osize) {
  char *b = p->blk, *q = ptr;
  if (q == b + LPROC_BLK_HEAD) {
    lproc_block_drop(p);
    return;
  }
  lproc_blk_head *h = (lproc_blk_head *)b;
  if (q + LPROC_BLK_ALIGN(osize) == b + h->top) h->top = (uint32_t)(q - b);
  LPROC_POISON(q, LPROC_BLK_ALIGN(osize));
}

/* lfun.c: spawn's encoding of a function whose only upvalue is the globals (or none):
** 1 if done (as lterm_put would), 0 to leave it to lterm_put */
int lfun_put_spawn(lua_State *L, int f, lpvm_tbuf *b, uint64_t *code_id);
/* A spawn's arguments when there are none: the empty tuple lterm_put_values writes. */
extern const uint8_t lproc_no_args[3];
/* Push the function of a term lfun_put_spawn wrote (1), else 0 and nothing (lfun.c). */
int lfun_push_spawn(lua_State *L, const uint8_t *term, size_t len);

/* lproc_pool.c: recycled states */
int lproc_recycle_set(int n);            /* returns the old bound */
int lproc_recycle_get(void);             /* the bound */
void lproc_pool_setup(int bound);
void lproc_pool_teardown(int bound);     /* closes every pooled state; bound for the next VM */
/* a cleaned state, or NULL; its kept function's bytecode length and number */
lua_State *lproc_pool_take(uint16_t *fn_len, uint64_t *fn_id, char **blk);
void lproc_pool_fresh(lua_State *L);     /* the first new state's bytes: the pool's yardstick */
void lproc_pool_release(lproc *p);       /* p's finished state: cleaned and pooled, or closed */
/* lproc_maker.c: new states made ahead by a thread of their own. take: a stock state
** (initialised as lproc_main initialises a new one), its block and whether bumps go on,
** or NULL (the stock is empty: the maker starts after LPROC_MAKER_AFTER such misses). */
#define LPROC_STOCK 2
lua_State *lproc_maker_take(char **blk, uint8_t *bump, uint16_t *fn_len, uint64_t *fn_id);
/* a spawn loaded bytecode numbered id (lfun.c): the maker loads it into the states it
** makes next, kept as a recycled state keeps its function (best effort, never waits) */
void lproc_maker_hint(lua_State *L, const void *code, size_t len);
/* the chunk name of a spawned function's bytecode (lfun.c, and the maker's loads) */
#define LPROC_SPAWN_CHUNK "=message"
int lproc_maker_stock(void);             /* states in the stock now (lpvm.stock) */
void lproc_maker_setup(void);            /* lproc_setup: the bound (LPVM_STOCK) */
void lproc_maker_teardown(void);         /* lproc_teardown: the thread ends, the stock closed */
lua_State *lproc_state_make(lproc *p);   /* lproc.c: lua_newstate with p as the owner */
/* Push the function at fn_cand instead of loading `code` if it dumps to the same
** bytes and its upvalues are distinct (returns 1), else 0; fn_cand is cleared. */
int lproc_pool_reuse_fn(lua_State *L, const void *code, size_t len);
int lproc_send_marker(lproc *parent, lpvm_id child);   /* spawn_monitor's go */
lua_State *lproc_state_new(void);        /* a state for the boot process, owner-less */
int lproc_take_interrupt(lproc *p);      /* 1 once if lproc_interrupt named p */
int lproc_is_interrupt_msg(lpvm_msg *m); /* the wake-up of an interrupt: drop it */
/* Spawn L (function and nargs arguments on its stack) as the boot process; L is the
** process's from here on, or closed on failure. */
int lproc_spawn_boot(lua_State *L, int nargs, lpvm_id *id);

/* shell.c: the terminal reader of the shell. lproc_shell_reader starts it and gives
** 1 when stdin is a terminal, 0 when not (< 0: failure); lproc_shell_watch tells it
** which process is the shell (it ends with it). */
int lproc_shell_reader(lpvm_id *reader);
void lproc_shell_watch(lpvm_id reader, lpvm_id shell);
/* lboot.c: a new shell process after the one in use ended (down: its DOWN message's
** term), run by the reader; LPVM_ENOMEM / LPVM_EINVAL / lproc_spawn_boot's errors. */
int lproc_shell_respawn(int tty, const uint8_t *down, size_t len, lpvm_id *id);
/* shell.c: 1 if id is the shell's process and its REPL runs (the reader will start a
** new one when it ends: no crash report for it). Any thread. */
int lproc_shell_in_use(lpvm_id id);

/* lsys.c: os.execute and io.popen that leave the VM's signals alone */
void lsys_patch_os(lua_State *L);        /* on the os table on top of the stack */
void lsys_patch_io(lua_State *L);        /* on the io table on top of the stack */

/* lproc_slice.c: time slices. enter/leave bracket every lua_resume of a process's
** threads (the main one and coroutines), so a tick knows which Lua thread runs. */
extern _Thread_local lua_State *volatile lproc_slice_running;
void lproc_slice_setup(int reductions);  /* 0: time slices, N: every N instructions */
void lproc_slice_init(lua_State *L);     /* a new or recycled state */
lua_State *lproc_slice_enter(lua_State *L);   /* returns what ran before */
void lproc_slice_leave(lua_State *prev);
void lproc_slice_teardown(void);         /* stop the ticker (after lpvm_stop) */
void lproc_slice_end(lua_State *L);      /* yield at the next instruction (exit, max_heap) */
void lproc_slice_closing(lua_State *L);  /* count instructions while finalizers run */

/* ldl.c: every dlopen/dlclose of the VM under one (recursive) lock */
void ldl_lock(void);
void ldl_unlock(void);
void ldl_wrap_package(lua_State *L);     /* loadlib, the C searchers, CLIBS' __gc */

/* llibs.c */
/* Lazy globals and string metatable; kept: llibs_take's two values' index, or 0, or
** LLIBS_IN_PLACE (llibs_in_place said both are where they were: the warnings only). */
#define LLIBS_IN_PLACE (-1)
void llibs_install(lua_State *L, int kept);
int llibs_take(lua_State *L);            /* the cleaning: push what may be kept */
int llibs_in_place(lua_State *L);        /* the cleaning's shortcut (vm/lraw.h) */
void llibs_set_script_dir(const char *dir); /* the boot script's folder, NULL = none */

/* lmod.c: the module table, and pids and references as Lua values. */
int lmod_open(lua_State *L);             /* luaopen_lpvm */
void lmod_push_pid(lua_State *L, lpvm_id id);
lpvm_id lmod_check_pid(lua_State *L, int arg);
lpvm_id lmod_to_pid(lua_State *L, int idx);       /* 0 if not a pid */
void lmod_push_ref(lua_State *L, uint64_t ref);   /* below 2^62: a light userdata */
uint64_t lmod_to_ref(lua_State *L, int idx);      /* 0 if not a reference */
uint64_t lmod_check_ref(lua_State *L, int arg);
void lmod_push_ref_mt(lua_State *L);   /* the metatable of references that do not fit */
/* A light userdata's 64 bits: a reference tagged with LPVM_ID_REF_TAG, else a pid or a
** port id. The codecs put one as the term it stands for. */
static inline int lmod_light_is_ref(uint64_t v) {
  return (v & LPVM_ID_REF_TAG) == LPVM_ID_REF_TAG;
}
static inline void lmod_put_light(lpvm_tbuf *b, uint64_t v) {
  if (lmod_light_is_ref(v)) lpvm_put_ref(b, v & ~LPVM_ID_REF_TAG);
  else lpvm_put_pid(b, (lpvm_id)v);
}
/* The process's target: a pid, or a registered name (0 if not registered). */
lpvm_id lmod_check_dest(lua_State *L, int arg, int *is_name);
int lmod_fail(lua_State *L, int err);    /* push nil, reason; return 2 */
/* Raise "unknown <what> 'k'" (argument t) if table t has a key not in `known`. */
void lmod_check_keys(lua_State *L, int t, const char *const known[], const char *what);
/* Push registry[key], first making it a table with weak `mode` ("k", "v", "kv"). */
/* The metatable registry[key] (made on first use): __name, __tostring, __eq. */
void lmod_metatable(lua_State *L, const void *key, const char *name, lua_CFunction tostr,
                    lua_CFunction eq);
void lmod_weak_table(lua_State *L, const void *key, const char *mode);
int64_t lmod_check_ms(lua_State *L, int arg); /* timeout in ms; math.huge = -1 (for ever) */

/* lmod_str.c: Lua strings that reach C (NUL bytes raise) and bad values quoted
** (cut to LMOD_QUOTE_MAX bytes) in error messages. */
#define LMOD_QUOTE_MAX 48
const char *lmod_cstr(lua_State *L, int idx, int arg, const char *what);
const char *lmod_check_cstr(lua_State *L, int arg, const char *what);
const char *lmod_opt_cstr(lua_State *L, int arg, const char *dflt, const char *what);
int lmod_streq(lua_State *L, int idx, const char *lit);
const char *lmod_push_quoted(lua_State *L, int idx);
int lmod_check_option(lua_State *L, int arg, const char *def, const char *const list[]);
const char *lmod_check_name(lua_State *L, int arg);

/* lmod_proc.c / lmod_msg.c: the functions of the module, by name. */
typedef struct lmod_fn {
  const char *name;
  lua_CFunction fn;
} lmod_fn;
extern const lmod_fn lmod_proc_fns[];
extern const lmod_fn lmod_msg_fns[];
extern const lmod_fn lmod_time_fns[];   /* lmod_time.c */
extern const lmod_fn lmod_dist_fns[];   /* lmod_dist.c: distribution */
/* spawn({node = N, ...}, "mod", ...) on another node (stack: opts, mod, args...) */
int lmod_dist_spawn(lua_State *L, int link);
extern const lmod_fn lmod_port_fns[];   /* lmod_port.c: ports (docs/lua-ports.md) */
extern const lmod_fn lmod_log_fns[];    /* lmod_log.c: log, log_level, format */
extern const lmod_fn lmod_call_fns[];   /* lmod_call.c: caller, handle_call */
extern const lmod_fn lmod_bin_fns[];    /* lmod_bin.c: binary, is_binary, binary_stats */
/* lmod_bin.c: the shared binary at idx (its buffer, and the range shown), or NULL. */
struct lpvm_bin *lbin_to(lua_State *L, int idx, size_t *off, size_t *len);
/* lbin_to of a value read in place (a vm/lraw.h lraw_tvalue, the mirror trusted):
** lterm_plain_msg.c's writer meets binaries in tables' slots, not on the stack. */
struct lpvm_bin *lbin_raw(const void *tv, size_t *off, size_t *len);
/* Its bytes, or NULL if idx is no binary. */
const char *lbin_bytes(lua_State *L, int idx, size_t *len);
/* Push a binary showing [off, off + len) of bin; it takes a reference of its own. */
void lbin_push(lua_State *L, struct lpvm_bin *bin, size_t off, size_t len);
/* The same for a binary that arrived in a message (a whole one: interned per state). */
void lbin_push_received(lua_State *L, struct lpvm_bin *bin, size_t off, size_t len);
int luaproc_open(lua_State *L);          /* luaproc.c: require "luaproc" */
int lmod_ets_open(lua_State *L);         /* lmod_ets.c: require "ets" (docs/ets.md) */
/* lproc_exit.c: the process failed with the error object on top of its stack: set
** its exit reason (a binary "message\nstack traceback:..." for a string or number, the
** value itself if it can travel) and mark it failed; returns LPVM_EXIT. */
int lproc_error(lproc *p);
/* lproc_exit.c: OTP's crash report for a process that failed by itself (and for the
** boot process, whatever ended it), unless the VM is stopping. */
void lproc_crash_report(lproc *p, const uint8_t *reason, size_t len);
/* lproc.c: the bytecode of the Lua function on top of L's stack (left there), in a
** malloc'd buffer; NULL if it cannot be dumped. */
char *lproc_dump_top(lua_State *L, size_t *len);
/* lproc.c: search table t for the value at index v; on a hit push its string key and
** return 1 (used to send module functions by name). */
int lproc_find_key(lua_State *L, int t, int v);
/* lproc.c: push module `name` in this process (spawn's and newproc's by-name
** upvalues): a global (the lazy libraries, lpvm), _G, or else require'd; a require
** that fails raises, or with nil_on_error pushes nil (as luaproc would have). */
void lproc_push_module(lua_State *L, const char *name, int nil_on_error);
/* lproc.c: a start record holding code, upvalue term and argument term; NULL when
** out of memory. The other fields start zeroed. */
lproc_start *lproc_start_new(int kind, const void *code, size_t code_len,
                             const lpvm_tbuf *up, const lpvm_tbuf *args);
/* The start marker a held-back child (wait_marker) waits for, sent by `from`, which
** must be the child's creator. */
int lproc_release(lpvm_task *from, lpvm_id child);

/* lcode.c: the code server (docs/code.md) */
/* package.searchers[2] and preloads of the package table at index `package` */
void lcode_install(lua_State *L, int package);
int lcode_require(lua_State *L, const char *name);   /* llibs.c: require without package */
void lcode_safe_point(lproc *p);        /* before a resume: apply new module versions */
int lcode_info(lproc *p, lpvm_tbuf *map);   /* info: old_code => [module, ...] */
void lcode_teardown(void);

/* leval.c: lpvm.eval's requests, run by the target at its safe points */
int leval_is_request(const lpvm_msg *m);
void leval_take(lua_State *L, lproc *p, lpvm_msg *m);   /* unlink m, run it, answer */
void leval_poll(lua_State *L, lproc *p);                /* the hook: run queued requests */
int leval_open(lua_State *L);                           /* require "lpvm.evalserver" */

/* lmod_send.c */
int lmod_send(lua_State *L);             /* send(dest, ...) */
int lmod_send_alias(lua_State *L);       /* send_alias(pid, alias, ...) */
/* Encode the values from `first` to the top as one message; raises, naming fname,
** on a value that cannot travel. */
lpvm_msg *lmod_build_msg(lua_State *L, int first, const char *fname);

/* lmod_msg.c */
int lmod_receive(lua_State *L);          /* receive(pred, ms): ports wait with it */
void lmod_drop_owned(lproc *p);          /* free a message a failed decode left */
void lmod_mark(lproc *p, uint64_t ref);  /* note the mailbox's end for `ref` */
int lmod_alias_add(lproc *p, uint64_t ref, int mon);   /* 0, or LPVM_ENOMEM; mon: the
                                                       ** monitor ref's DOWN ends it */
int lmod_alias_del(lproc *p, uint64_t ref);   /* 1 if it was active */
/* End the alias ref (1 if it was active) as at arrival, and with flush drop its DOWN
** and its queued messages (lmod_msg.c) */
int lmod_ref_end(lproc *p, uint64_t ref, int flush);
/* What lmod_call.c's wait shares with receive_ref: */
void lmod_check_wait(lua_State *L, lproc *p, const char *fname);  /* raise if it cannot wait */
void lmod_recv_finish(lproc *p);              /* a receive is over: timer, scan */
void lmod_ref_wait_begin(lproc *p, uint64_t ref);   /* start waiting for ref */
lpvm_msg *lmod_ref_next(lproc *p);            /* the next message for recv_ref, or NULL */
/* The next message after the scan a receive may look at, or NULL (none yet, or the
** time is up); raises on an interrupt, serves lpvm.eval requests on the way. */
lpvm_msg *lmod_recv_next(lua_State *L, lproc *p);
void lmod_mbox_take(lproc *p, lpvm_msg *m);   /* unlink m keeping the mark */
/* Wait (stack [2]: the timeout or nil) with continuation k, `again` rescanning;
** -1 when the time is up (nothing pushed). */
int lmod_recv_wait(lua_State *L, lproc *p, lua_KFunction k, int (*again)(lua_State *, lproc *));
int lmod_call(lua_State *L);                  /* lmod_call.c: lpvm.call */

/* ltask.c */
const lpvm_task_def *ltask_find(const char *type);
int ltask_load(const char *path, char *err, size_t errsz);
void ltask_teardown(void);

#endif
