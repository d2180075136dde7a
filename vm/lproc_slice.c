/*
** lproc_slice.c -- time slices for Lua processes: when a process must give up its
** thread, and how it learns so.
**
** Lua can only be interrupted from inside: a hook that runs between two VM
** instructions and yields. Keeping a count hook set all the time (the simple way)
** makes Lua trap on *every* instruction (luaG_traceexec decrements the count), about
** a tenth of a message hop. So by default the hook is off, and it is armed only when
** a slice is over, the way lua.c arms it on Ctrl-C:
**
**   tick mode (default)   Each OS thread that runs Lua (a worker, a private thread)
**                         gets a POSIX timer on its own CPU-time clock that sends
**                         it LPROC_SLICE_SIG every LPROC_SLICE_US of CPU it burns
**                         (the kernel checks CPU timers at its tick, so in practice
**                         every 1-4 ms). The handler arms a count-1 hook on the Lua
**                         thread this OS thread runs now (lua_sethook may be called
**                         from a signal handler of the thread that runs L); the hook
**                         yields and disarms. An idle thread burns no CPU, so its
**                         clock stands still and it is never woken.
**   count mode            --reductions N (and ThreadSanitizer builds, where signals
**                         wait for the next intercepted call, and any thread whose
**                         timer cannot be made): the hook fires every N/4
**                         instructions and yields every fourth call, as before.
**
** In both modes the hook yields at once when the process must end (exit(), an
** allocation refused by max_heap): those set a flag and call lproc_slice_end.
** A higher-priority task made runnable on this worker is noticed at the next tick.
**
** Who writes what: `running`, `timer_state` and `skip` are thread-local, written by their
** own thread and read by its signal handler only. The handler writes nothing but the
** Lua thread's hook fields, as lua.c's does.
*/
#include <errno.h>
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stdint.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "vm/lproc_int.h"

#define LPROC_SLICES 4           /* count mode: hook calls per slice */
#define LPROC_SLICE_US 1000      /* tick mode: CPU time per slice (rounded up by the kernel) */
#define LPROC_RETRY 1000         /* instructions before trying again where Lua can't yield */
#define LPROC_SLICE_SIG (SIGRTMIN + 6)

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

static int tick_mode;            /* set by lproc_slice_setup before any process runs */

_Thread_local lua_State *volatile lproc_slice_running;
static _Thread_local int timer_state;   /* 0 not tried, 1 ticking, -1 count mode here */
static pthread_key_t timer_key;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int handler_ok;

static void lproc_hook(lua_State *L, lua_Debug *ar);

/* ---- the hook ---------------------------------------------------------------------------- */

static void arm(lua_State *L, int count) {
  lua_sethook(L, lproc_hook, LUA_MASKCOUNT, count);
}

static int counting(void) { return !tick_mode || timer_state < 0; }

static void lproc_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lproc *p = lproc_of(L);
  if (!p) {                      /* not a process's state: nothing to cut */
    if (!counting()) lua_sethook(L, NULL, 0, 0);
    return;
  }
  if (p->closing) {   /* finalizers at close: bounded, then an error (a warning) */
    if (++p->slices > 2000) luaL_error(L, "finalizer ran too long at process exit");
    return;
  }
  int must = p->exiting || p->heap_refused;
  if (counting()) {
    p->task.reductions += (uint64_t)lproc_cfg.reductions / LPROC_SLICES;
    if (++p->slices < LPROC_SLICES && !lpvm_should_yield(&p->task) && !must) return;
  } else {
    p->task.reductions += (uint64_t)lproc_cfg.reductions;
  }
  if (!lua_isyieldable(L)) {   /* inside a C boundary: try again a little later */
    if (!counting()) arm(L, LPROC_RETRY);
    return;
  }
  p->slices = 0;
  if (!counting()) lua_sethook(L, NULL, 0, 0);
  if (L != p->L) p->sched_yield = 1; /* a coroutine: llibs.c passes it up */
  lua_yield(L, 0);
}

/* ---- ticks ------------------------------------------------------------------------------- */

/* Arming walks the Lua thread's whole call chain (lua_sethook marks every frame), so
** a very deep recursion makes it slow: a tick then skips as many later ticks as keep
** that walk under a tenth of the thread's time. */
static _Thread_local int skip;

static int64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void on_tick(int sig) {
  (void)sig;
  int e = errno;
  lua_State *L = lproc_slice_running;
  if (L && skip > 0) {
    skip--;
  } else if (L) {
    int64_t t0 = cpu_ns();
    arm(L, 1);
    int64_t n = (cpu_ns() - t0) * 10 / (LPROC_SLICE_US * 1000);
    skip = n > 1000 ? 1000 : (int)n;
  }
  errno = e;
}

static void timer_free(void *v) {
  timer_t *t = v;
  timer_delete(*t);
  free(t);
}

static void init_once(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_tick;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  handler_ok = pthread_key_create(&timer_key, timer_free) == 0 &&
               sigaction(LPROC_SLICE_SIG, &sa, NULL) == 0;
}

/* First Lua run on this OS thread in tick mode: make its CPU-time timer. A thread
** that cannot have one counts instructions instead. */
void lproc_slice_thread(void) {
  timer_state = -1;
  pthread_once(&once, init_once);
  if (!handler_ok) return;
  timer_t *t = malloc(sizeof *t);
  if (!t) return;
  struct sigevent ev;
  memset(&ev, 0, sizeof ev);
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = LPROC_SLICE_SIG;
  ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
  if (timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, t) != 0) {
    free(t);
    return;
  }
  struct itimerspec it = {{0, LPROC_SLICE_US * 1000L}, {0, LPROC_SLICE_US * 1000L}};
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, LPROC_SLICE_SIG);
  if (timer_settime(*t, 0, &it, NULL) != 0 || pthread_setspecific(timer_key, t) != 0 ||
      pthread_sigmask(SIG_UNBLOCK, &s, NULL) != 0) {
    timer_delete(*t);
    free(t);
    return;
  }
  timer_state = 1;
}

/* ---- the interface ----------------------------------------------------------------------- */

void lproc_slice_setup(int reductions) {
  tick_mode = LPROC_CAN_TICK && reductions == 0;
}

int lproc_slice_ticks(void) { return tick_mode; }

void lproc_slice_init(lua_State *L) {
  int count = lproc_cfg.reductions / LPROC_SLICES;
  if (!tick_mode) arm(L, count > 0 ? count : 1);
  else lua_sethook(L, NULL, 0, 0);   /* a recycled state may hold its closing hook */
}

lua_State *lproc_slice_enter(lua_State *L) {
  lua_State *prev = lproc_slice_running;
  if (tick_mode && timer_state <= 0) {
    if (timer_state == 0) lproc_slice_thread();
    if (timer_state < 0 && !lua_gethook(L)) {   /* this thread counts */
      int count = lproc_cfg.reductions / LPROC_SLICES;
      arm(L, count > 0 ? count : 1);
    }
  }
  lproc_slice_running = L;
  return prev;
}

void lproc_slice_end(lua_State *L) { arm(L, 1); }

void lproc_slice_closing(lua_State *L) { arm(L, 1000); }
