/*
** lproc_slice.c -- time slices for Lua processes: when a process must give up its
** thread, and how it learns so.
**
** Lua can only be interrupted from inside: a hook that runs between two VM
** instructions and yields. Keeping a count hook set all the time (the simple way)
** makes Lua trap on *every* instruction (luaG_traceexec counts down), about a tenth
** of a message hop. So by default the hook is off, and it is armed only when a slice
** is over, the way lua.c arms it on Ctrl-C:
**
**   tick mode (default)   A ticker thread wakes every LPROC_SLICE_US. Each OS thread
**                         that runs Lua (a worker, a private thread) has a slot with
**                         a counter of the resumes it made; a thread still inside
**                         the same resume as one tick ago has used its slice, and the
**                         ticker sends it LPROC_SLICE_SIG. The handler, on that
**                         thread, arms a count-1 hook on the Lua thread running there
**                         (lua_sethook may be called from a signal handler of the
**                         thread that runs L); the hook yields and disarms. When no
**                         thread has run Lua for two ticks the ticker sleeps until one
**                         does, so an idle VM is never woken.
**   count mode            --reductions N (and ThreadSanitizer builds, whose signals
**                         wait for the next intercepted call): the hook fires every
**                         N/4 instructions and yields every fourth call, or at once
**                         when a higher-priority task waits (lpvm_should_yield).
**
** In both modes the hook yields at once when the process must end (exit(), an
** allocation refused by max_heap): those set a flag and call lproc_slice_end. Where
** it cannot yield (inside a C boundary) it takes the process's signals, so that a
** kill ends a loop there too (see lproc_hook). The
** shell's Ctrl-C (lproc_interrupt) is raised by the hook too: a running process
** meets it at its next tick.
**
** State diagram of a slot's `armed`: 0 --ticker signals--> 1 --hook runs or the
** thread starts a new resume--> 0, and 1 --LPROC_STALE ticks in the same resume--> 0
** (the ticker signals again: an arm that was lost must not let a loop keep its worker
** for good). So a thread stuck in a long C call or a blocking system call is signalled
** every LPROC_STALE ticks, not at every one.
**
** Who writes what: `running` (thread-local) and a slot's `on`/`seq` are written by the
** slot's thread; `armed` by the ticker (0 -> 1) and the slot's thread (1 -> 0); `seen`
** and the slot list under tk.mu; `sleeping` by the ticker. The signal handler writes
** only the Lua thread's hook fields, as lua.c's does, `skip`, and an entry of `own`
** (the process's own hook it replaced: thread-local, see "the process's own hook").
*/
#include <errno.h>
#include <lauxlib.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>

#include "vm/lproc_int.h"

#define LPROC_SLICES 4           /* count mode: hook calls per slice */
#define LPROC_SLICE_US 1000      /* tick mode: the length of a slice */
#define LPROC_RETRY 1000         /* instructions before trying again where Lua can't yield */
#define LPROC_SLICE_SIG (SIGRTMIN + 6)
#define LPROC_STALE 20           /* tick mode: ticks armed in one resume before a new signal */

#if defined(__SANITIZE_THREAD__)
#define LPROC_CAN_TICK 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LPROC_CAN_TICK 0
#endif
#endif
#ifndef LPROC_CAN_TICK
#define LPROC_CAN_TICK 1
#endif

/* ThreadSanitizer and Lua's throws. Debian's liblua is built with _FORTIFY_SOURCE, so
** luaD_throw (an error, and every yield: the hook's, a punished send's, a blocking
** receive's) leaves through __longjmp_chk, which gcc 12's libtsan does not intercept
** (it does longjmp, _setjmp). TSan then never unwinds its shadow stack: each throw
** leaves the instrumented frames below it there for good, the shadow stack grows by a
** frame or two per yield, and since TSan records the whole stack at every malloc and
** new atomic, a flood of punished sends cost ~100 KB and half a millisecond each.
** Defined here (the executable's and liblpvm's symbol wins over libc's), it becomes
** the longjmp that TSan intercepts and unwinds. ASan intercepts __longjmp_chk itself.
** It lives in this file, which every program links, because a file of its own would be
** an archive member nothing references, and the linker would leave it out. */
#if !LPROC_CAN_TICK
#include <setjmp.h>
/* by its symbol: a _FORTIFY_SOURCE build of this file would turn longjmp into us */
__attribute__((noreturn)) void lproc_tsan_longjmp(jmp_buf env, int val) __asm__("longjmp");
__attribute__((visibility("default"), noreturn)) void __longjmp_chk(jmp_buf env, int val);
void __longjmp_chk(jmp_buf env, int val) { lproc_tsan_longjmp(env, val); }
#endif

typedef struct slot {
  struct slot *next;            /* under tk.mu */
  pthread_t th;
  _Atomic int on;               /* the thread is inside a resume */
  _Atomic uint32_t seq;         /* resumes started */
  _Atomic int armed;            /* signalled, hook not yet run */
  uint32_t seen;                /* ticker: seq at the last tick */
  uint32_t stale;               /* ticker: ticks it stayed armed in the same resume */
} slot;

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  slot *slots;
  pthread_t th;
  int started, stop;
  _Atomic int sleeping;
  int barrier;                  /* membarrier works: the ticker may sleep for good */
} tk = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0, 0, 0, 0};

static int tick_mode;           /* set by lproc_slice_setup before any process runs */

_Thread_local lua_State *volatile lproc_slice_running;
static _Thread_local slot *me;
static _Thread_local int skip;
static _Thread_local int joined;      /* thread_join was tried */
static pthread_key_t slot_key;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int tick_ok;             /* the handler and key are installed */

static void lproc_hook(lua_State *L, lua_Debug *ar);

/* ---- the process's own hook ------------------------------------------------------------- */

/* Lua has one hook slot per thread. A process that set a hook of its own
** (debug.sethook: a profiler, a coverage tool) would lose it at the end of its first
** slice, when the arm below takes the slot; so the arm keeps what it replaces and the
** disarm puts it back: when the hook yields, or when the resume ends before it ran
** (lproc_slice_leave). Each entry lives within one resume on one thread, so it is
** thread-local, written by that thread and its signal handler only; a few entries,
** because a coroutine armed inside a resume has its own hook. The handler writes an
** entry before it arms and the thread frees one only after it stopped naming that Lua
** thread as running, so neither undoes the other. Full (coroutines nested deeper
** than LPROC_OWN, each with a hook of its own, armed at once): that hook is dropped,
** as before. In count mode the process's hook replaces lpvm's for good (no slices
** end for it), as docs/lua-processes.md says. */
#define LPROC_OWN 4

typedef struct own_hook {
  lua_State *L;   /* NULL: free */
  lua_Hook f;
  int mask, count;
} own_hook;

static _Thread_local own_hook own[LPROC_OWN];
/* Entries in use: lproc_slice_leave looks at the entries only when some are (a resume's
** end is on every message hop). An atomic add, as the handler may land in the thread's. */
static _Thread_local _Atomic int own_n;

static void own_free(own_hook *o) {
  o->L = NULL;
  atomic_fetch_sub_explicit(&own_n, 1, memory_order_relaxed);
}

static own_hook *own_find(lua_State *L) {
  for (int i = 0; i < LPROC_OWN; i++)
    if (own[i].L == L) return &own[i];
  return NULL;
}

/* Before L's hook is taken: keep it if it is the process's own (not ours, not none). */
static void own_save(lua_State *L) {
  lua_Hook h = lua_gethook(L);
  if (h == lproc_hook) return;   /* armed already: what it replaced is kept, or none */
  own_hook *o = own_find(L);
  if (!h) {
    if (o) own_free(o);          /* a kept one the process has since cleared */
    return;
  }
  int fresh = !o;
  if (!o) o = own_find(NULL);
  if (!o) return;
  o->f = h;
  o->mask = lua_gethookmask(L);
  o->count = lua_gethookcount(L);
  atomic_signal_fence(memory_order_seq_cst);
  o->L = L;
  if (fresh) atomic_fetch_add_explicit(&own_n, 1, memory_order_relaxed);
}

/* L's hook goes back to what the arm replaced (none, or the process's own). */
static void own_restore(lua_State *L) {
  own_hook *o = own_find(L);
  if (!o) {
    lua_sethook(L, NULL, 0, 0);
    return;
  }
  own_hook keep = *o;
  own_free(o);   /* free first: a tick landing after the hook is back keeps it again */
  atomic_signal_fence(memory_order_seq_cst);
  lua_sethook(L, keep.f, keep.mask, keep.count);
}

/* L's state starts anew or closes: nothing kept for it may come back. */
static void own_forget(lua_State *L) {
  own_hook *o = own_find(L);
  if (o) own_free(o);
}

/* ---- the hook ---------------------------------------------------------------------------- */

static void arm(lua_State *L, int count) {
  lua_sethook(L, lproc_hook, LUA_MASKCOUNT, count);
}

/* Arming from the signal handler. A count hook alone could be lost: the handler may
** land inside luaG_traceexec just after it read the old, empty mask and before it
** clears the running function's trap flag, and a loop that only calls C functions (a
** send in `while true`) would then never trap again: the slice would never end, and
** `armed` keeps the ticker from trying twice. So the handler also asks for the call
** hook, which Lua checks at every call whatever the trap flags say, as lua.c's Ctrl-C
** does; the call hook, which may not yield, re-arms the count hook from the thread. */
static void arm_async(lua_State *L) {
  own_save(L);
  lua_sethook(L, lproc_hook, LUA_MASKCOUNT | LUA_MASKCALL, 1);
}

static int counting(void) { return !tick_mode || !me; }

static void lproc_hook(lua_State *L, lua_Debug *ar) {
  if (ar->event == LUA_HOOKCALL) {   /* arm_async's: yield at the next instruction */
    arm(L, 1);
    return;
  }
  lproc *p = lproc_of(L);
  if (!p) {                      /* not a process's state: nothing to cut */
    if (!counting()) own_restore(L);
    return;
  }
  if (p->closing) {   /* __close at exit, __tostring: bounded (a __gc runs hookless) */
    if (++p->slices > 2000) luaL_error(L, "finalizer ran too long at process exit");
    return;
  }
  if (lproc_take_interrupt(p)) luaL_error(L, "interrupted!");   /* the shell's Ctrl-C */
  int must = p->exiting || p->heap_refused;
  if (counting()) {
    p->task.reductions += (uint64_t)lproc_cfg.reductions / LPROC_SLICES;
    if (++p->slices < LPROC_SLICES && !lpvm_should_yield(&p->task) && !must) return;
  } else {
    p->task.reductions += (uint64_t)lproc_cfg.reductions;
  }
  if (!lua_isyieldable(L)) {   /* inside a C boundary: try again a little later */
    if (!counting()) arm(L, LPROC_RETRY);
    /* An exit signal must not wait for a C boundary that may never return (a
    ** table.sort comparator, a metamethod called from C, a chunk run by require,
    ** looping): its signals are taken here, and once one has ended the process
    ** (a kill, or any exit it does not trap) each hook raises until the process is
    ** back where it can yield, and the yield ends the step (lproc_resume). A pcall
    ** on the way catches one raise, not the next. */
    if (p->exiting == LPROC_EXIT_SIGNAL || lpvm_fetch_signals(&p->task) == 1) {
      p->exiting = LPROC_EXIT_SIGNAL;
      /* every instruction from here: a pcall that catches this may go back to code
      ** that can yield for a few instructions only (a loop of pcall(table.sort, ...)),
      ** which a count of a slice's length would never meet */
      arm(L, 1);
      luaL_error(L, "process ended by an exit signal");
    }
    return;
  }
  leval_poll(L, p);   /* lpvm.eval requests for a busy process (leval.c) */
  p->slices = 0;
  if (!counting()) {
    own_restore(L);
    atomic_store_explicit(&me->armed, 0, memory_order_relaxed);
  }
  if (L != p->L) p->sched_yield = 1; /* a coroutine: llibs.c passes it up */
  lua_yield(L, 0);
}

/* ---- the signal -------------------------------------------------------------------------- */

static int64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Arming walks the Lua thread's whole call chain (lua_sethook marks every frame), so
** in a very deep recursion it is slow: a signal then skips as many later ones as keep
** that walk under a tenth of the thread's time. */
static void on_tick(int sig) {
  (void)sig;
  int e = errno;
  lua_State *L = lproc_slice_running;
  if (L && skip > 0) {
    skip--;
    if (me) atomic_store_explicit(&me->armed, 0, memory_order_relaxed);
  } else if (L) {
    int64_t t0 = cpu_ns();
    arm_async(L);
    int64_t n = (cpu_ns() - t0) * 10 / (LPROC_SLICE_US * 1000);
    skip = n > 1000 ? 1000 : (int)n;
  }
  errno = e;
}

/* ---- the ticker -------------------------------------------------------------------------- */

static void sleep_us(long us) {
  struct timespec ts = {0, us * 1000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static void *ticker(void *arg) {
  (void)arg;
  int idle = 0;
  pthread_mutex_lock(&tk.mu);
  while (!tk.stop) {
    int busy = 0;
    for (slot *s = tk.slots; s; s = s->next) {
      if (!atomic_load_explicit(&s->on, memory_order_relaxed)) continue;
      busy = 1;
      uint32_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
      int armed = atomic_load_explicit(&s->armed, memory_order_relaxed);
      /* Armed for LPROC_STALE ticks and still in the same resume: the arm was lost
      ** somewhere (a path that clears the hook, found or not yet); signal again. */
      if (q == s->seen && armed && ++s->stale >= LPROC_STALE) armed = 0;
      if (q == s->seen && !armed) {
        s->stale = 0;
        atomic_store_explicit(&s->armed, 1, memory_order_relaxed);
        pthread_kill(s->th, LPROC_SLICE_SIG);
      }
      if (q != s->seen) s->stale = 0;
      s->seen = q;
    }
    idle = busy ? 0 : idle + 1;
    if (idle >= 2 && tk.barrier) {
      /* Sleep for good unless a thread is on. A thread sets `on` and then reads
      ** `sleeping` with plain loads; membarrier makes every thread's earlier stores
      ** visible before we look, so one of us sees the other. */
      atomic_store(&tk.sleeping, 1);
      syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
      int any = 0;
      for (slot *s = tk.slots; s; s = s->next) any |= atomic_load(&s->on);
      if (!any && !tk.stop && atomic_load(&tk.sleeping)) pthread_cond_wait(&tk.cv, &tk.mu);
      atomic_store(&tk.sleeping, 0);
      idle = 0;
      continue;
    }
    pthread_mutex_unlock(&tk.mu);
    sleep_us(LPROC_SLICE_US);
    pthread_mutex_lock(&tk.mu);
  }
  pthread_mutex_unlock(&tk.mu);
  return NULL;
}

static void wake_ticker(void) {
  pthread_mutex_lock(&tk.mu);
  pthread_cond_signal(&tk.cv);
  pthread_mutex_unlock(&tk.mu);
}

/* A thread that ran Lua ends: its slot leaves the list. */
static void slot_free(void *v) {
  slot *s = v;
  pthread_mutex_lock(&tk.mu);
  for (slot **pp = &tk.slots; *pp; pp = &(*pp)->next)
    if (*pp == s) {
      *pp = s->next;
      break;
    }
  pthread_mutex_unlock(&tk.mu);
  free(s);
}

static void init_once(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_tick;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  tick_ok = pthread_key_create(&slot_key, slot_free) == 0 &&
            sigaction(LPROC_SLICE_SIG, &sa, NULL) == 0;
  tk.barrier = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

/* First Lua run on this OS thread in tick mode: a slot, and the ticker if it is not
** running yet. A thread that cannot have a slot counts instructions instead. */
static void thread_join(void) {
  pthread_once(&once, init_once);
  if (!tick_ok) return;
  slot *s = calloc(1, sizeof *s);
  if (!s) return;
  s->th = pthread_self();
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, LPROC_SLICE_SIG);
  if (pthread_setspecific(slot_key, s) != 0 || pthread_sigmask(SIG_UNBLOCK, &set, NULL) != 0) {
    free(s);
    return;
  }
  pthread_mutex_lock(&tk.mu);
  if (!tk.started && !tk.stop) {
    /* the ticker blocks the signal: it only sends it */
    sigset_t old;
    pthread_sigmask(SIG_BLOCK, &set, &old);
    tk.started = pthread_create(&tk.th, NULL, ticker, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  }
  int ok = tk.started;
  if (ok) {
    s->next = tk.slots;
    tk.slots = s;
  }
  pthread_mutex_unlock(&tk.mu);
  if (!ok) {
    pthread_setspecific(slot_key, NULL);
    free(s);
    return;
  }
  me = s;
}

/* ---- the interface ----------------------------------------------------------------------- */

void lproc_slice_setup(int reductions) {
  tick_mode = LPROC_CAN_TICK && reductions == 0;
}

void lproc_slice_teardown(void) {
  pthread_mutex_lock(&tk.mu);
  int started = tk.started;
  tk.stop = 1;
  pthread_cond_signal(&tk.cv);
  pthread_mutex_unlock(&tk.mu);
  if (started) pthread_join(tk.th, NULL);
  pthread_mutex_lock(&tk.mu);
  tk.started = 0;
  tk.stop = 0;
  pthread_mutex_unlock(&tk.mu);
}

/* A fresh state is initialised inside its first resume (lproc_main), which may take
** longer than a slice: the ticker's signal may already have armed the hook that the
** clearing below removes. `armed` is set before the signal is sent, so a look after
** the clearing sees it, and the slice still ends (before: a process so started in a
** loop that never waits ran for good, and nothing else ran on its worker). */
void lproc_slice_init(lua_State *L) {
  int count = lproc_cfg.reductions / LPROC_SLICES;
  if (!tick_mode) {
    arm(L, count > 0 ? count : 1);
    return;
  }
  own_forget(L);
  lua_sethook(L, NULL, 0, 0);   /* a recycled state may hold its closing hook */
  if (me && L == lproc_slice_running && atomic_load(&me->armed)) arm(L, 1);
}

/* A thread's first resume: join the ticks (or count, when it cannot). Out of line:
** its locals made every resume's entry save and restore six registers. */
static __attribute__((noinline, cold)) void slice_join(lua_State *L) {
  joined = 1;
  thread_join();
  if (!me && !lua_gethook(L)) {   /* no ticks for this thread: count */
    int count = lproc_cfg.reductions / LPROC_SLICES;
    arm(L, count > 0 ? count : 1);
  }
}

static __attribute__((noinline)) void slice_wake_ticker(void) {
  if (atomic_exchange(&tk.sleeping, 0)) wake_ticker();
}

lua_State *lproc_slice_enter(lua_State *L) {
  lua_State *prev = lproc_slice_running;
  if (tick_mode) {
    if (!joined) slice_join(L);
    slot *s = me;
    if (s && !prev) {   /* a process's resume (a coroutine's is part of it) */
      /* The state the handler arms first, `armed` second. The other way, a tick
      ** decided on the last resume's seq could set `armed` after our 0 and its signal
      ** land before the state was named: nothing armed, the ticker waiting on
      ** `armed` (a producer in a loop of sends kept its worker; LPROC_STALE is the
      ** net under such paths). */
      lproc_slice_running = L;
      atomic_signal_fence(memory_order_seq_cst);
      atomic_store_explicit(&s->seq, atomic_load_explicit(&s->seq, memory_order_relaxed) + 1,
                            memory_order_relaxed);
      atomic_store_explicit(&s->armed, 0, memory_order_relaxed);
      atomic_store_explicit(&s->on, 1, memory_order_relaxed);
      if (atomic_load_explicit(&tk.sleeping, memory_order_relaxed)) slice_wake_ticker();
    }
  }
  lproc_slice_running = L;
  return prev;
}

/* Out of line (rare): its calls made every resume's end save three registers. */
static __attribute__((noinline)) void slice_own_back(lua_State *L) {
  own_hook *o = own_find(L);
  if (o && lua_gethook(L) == lproc_hook) own_restore(L);
  else if (o) own_free(o);   /* the process set another hook since: it stays */
}

void lproc_slice_leave(lua_State *prev) {
  lua_State *L = lproc_slice_running;
  lproc_slice_running = prev;
  /* armed, and the resume ended before the hook ran (a receive, a return): the
  ** process's own hook goes back now; with none kept, ours stays to cut the next
  ** resume short, as it always did. Nothing kept (the usual case): one load. */
  atomic_signal_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&own_n, memory_order_relaxed) && L && tick_mode) slice_own_back(L);
  slot *s = me;
  if (!prev && s) atomic_store_explicit(&s->on, 0, memory_order_relaxed);
}

void lproc_slice_end(lua_State *L) { arm_async(L); }

void lproc_slice_closing(lua_State *L) {
  own_forget(L);
  arm(L, 1000);
}
