/*
** lpvm.h -- start, stop and embed an lpvm virtual machine.
**
** One VM per OS process. A C program starts it, spawns tasks (task.h), waits for
** them to finish and stops it. Every function returns 0 (or a count) on success and
** a negative LPVM_E* code on a caller's mistake; none of them aborts.
*/
#ifndef LPVM_H
#define LPVM_H

#include <stddef.h>
#include <stdint.h>

/* LPVM_API marks the public C API. The core is built with -fvisibility=hidden, so
** these are the only symbols it exports: a C task module that lpvm dlopens (see
** taskmod.h), or a program linking lpvm, sees the API and nothing of the inside. */
#if defined(__GNUC__) || defined(__clang__)
#define LPVM_API __attribute__((visibility("default")))
#else
#define LPVM_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define LPVM_VERSION "0.1.0"

/* Error codes: always negative. */
#define LPVM_OK          0
#define LPVM_ENOPROC    (-1)   /* no such task (dead id, unknown name) */
#define LPVM_EINVAL     (-2)   /* bad argument */
#define LPVM_ENOMEM     (-3)   /* out of memory */
#define LPVM_ELIMIT     (-4)   /* process table full */
#define LPVM_EEXIST     (-5)   /* name taken, or task already has a name */
#define LPVM_ECANTSCHED (-6)   /* a CANT_SCHEDULE task may not run on workers */
#define LPVM_EPRIO      (-7)   /* priority change forbidden by CANT_*_PRIO */
#define LPVM_ESTATE     (-8)   /* VM not running, or already running */
#define LPVM_EBADTERM   (-9)   /* malformed external term */
#define LPVM_ETIMEDOUT  (-10)  /* a wait ran out of time */
#define LPVM_ESYS       (-11)  /* an OS call failed (errno is set) */
#define LPVM_EBUSY      (-12)  /* a port's write queue is full: retry on {ready, Port} */
#define LPVM_EPERM      (-13)  /* refused by this node's policy (remote code: --no-remote-code) */

LPVM_API const char *lpvm_strerror(int err);

typedef struct lpvm_config {
  int workers;          /* worker threads; 0 = one per online CPU */
  int worker_cache;     /* 1 = thesis 5.2.8 worker cache on (default), 0 = off */
  uint32_t max_tasks;   /* process table capacity; 0 = default (8M) */
  int spin;             /* idle spin rounds before a worker sleeps; <0 = default */
} lpvm_config;

LPVM_API void lpvm_config_init(lpvm_config *cfg);

/* Move the calling thread's allocations to an arena of their own whose fresh memory
** comes in huge pages, as the workers' do in a big VM (sched/memory.c): for a helper
** thread of the VM that makes much of the processes' memory (the state maker). Does
** nothing without jemalloc. */
LPVM_API void lpvm_aux_arena(void);

/* Give the calling thread its allocator state now, while memory is to be had: jemalloc
** sets a thread up (its arena, made if need be) at its first allocation and crashes
** when it cannot (jemalloc issue 2289), so a VM thread whose first malloc came after
** memory ran out (under ulimit -v) took the VM down. Every VM thread calls this first;
** a thread an embedding program starts to call into the VM may too. Does nothing
** without jemalloc. */
LPVM_API void lpvm_thread_arena(void);

/* Start the VM: workers and timer thread. cfg may be NULL for the defaults. */
LPVM_API int lpvm_start(const lpvm_config *cfg);

/* Block until no task is left, or lpvm_halt() was called. Returns the halt code
** (0 when the last task ended). */
LPVM_API int lpvm_wait(void);

/* Ask lpvm_wait() to return `code` now. Safe from any thread and from tasks. */
LPVM_API void lpvm_halt(int code);
/* 1 once lpvm_halt() was called: the VM is stopping (tasks are being killed). */
LPVM_API int lpvm_halted(void);

/* Kill every remaining task (reason `killed`), wait for them to terminate, join
** every thread and free everything. lpvm_start() may then be called again. */
LPVM_API int lpvm_stop(void);

/* Number of live tasks. */
LPVM_API size_t lpvm_task_count(void);
/* 1 once this VM has held 4,096 live tasks at one time: too many for a core's caches,
** so that what a task's step touches is worth asking for ahead (vm/lmod_msg.c). */
LPVM_API int lpvm_is_big(void);

/* Monotonic milliseconds since an arbitrary origin (the timer wheel's clock). */
LPVM_API uint64_t lpvm_now_ms(void);

/* Scheduler statistics. */
typedef struct lpvm_worker_stats {
  uint64_t runs;          /* task steps run */
  uint64_t switches;      /* steps that ran a different task than the previous step */
  uint64_t steals;        /* tasks taken from another worker's queue or cache */
  uint64_t cache_hits;    /* steps that ran a task from the worker cache */
  uint64_t sleeps;        /* times the worker went to sleep */
  uint32_t queue_len;     /* tasks in its run queue now */
  uint32_t resting;       /* 1: asleep now until given work or kicked (no watch
                          ** timeout): every worker of an idle VM rests */
} lpvm_worker_stats;

typedef struct lpvm_vmstats {
  int workers;
  lpvm_worker_stats worker[64];   /* the first `workers` entries are valid */
  uint64_t tasks_spawned;
  uint64_t tasks_exited;
  uint64_t tasks_live;
  uint64_t threads_live;          /* private threads running a task */
} lpvm_vmstats;

LPVM_API int lpvm_stats(lpvm_vmstats *out);

#ifdef __cplusplus
}
#endif

#endif
