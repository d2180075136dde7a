/*
** runtime.c -- the VM's lifecycle: start, wait, halt, stop; counts and statistics.
**
** The one place that knows every subsystem, so that none of them has to know
** another's start and stop: rt -> {io, tasks, sched, timers}, and nothing in the
** core includes rt/. Each subsystem offers the runtime a narrow header (io/io.h,
** tasks/tasks.h, sched/sched.h, timers/timer.h).
*/
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "io/io.h"
#include "lpvm/lpvm.h"
#include "sched/sched.h"
#include "tasks/tasks.h"
#include "timers/timer.h"

#define DEFAULT_MAX_TASKS (8u << 20)
#define DEFAULT_SPIN 2000
#define STOP_REPORT_ROUNDS 200   /* sweeps of 50 ms: 10 s */

/* The I/O poll, as the scheduler's idle workers wait in it (sched.h, io.h). */
static const sched_poll io_poll = {io_poll_wait, io_poll_deliver, io_poll_wake,
                                   io_poll_watching};

static struct {
  int running;
  int halted, halt_code;
  pthread_mutex_t mu;
  pthread_cond_t cv;
} R = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

const char *lpvm_strerror(int err) {
  switch (err) {
    case LPVM_OK: return "ok";
    case LPVM_ENOPROC: return "no such task";
    case LPVM_EINVAL: return "invalid argument";
    case LPVM_ENOMEM: return "out of memory";
    case LPVM_ELIMIT: return "process table full";
    case LPVM_EEXIST: return "name already registered";
    case LPVM_ECANTSCHED: return "task type cannot run on worker threads";
    case LPVM_EPRIO: return "priority change not allowed for this task type";
    case LPVM_ESTATE: return "VM not running (or already running)";
    case LPVM_EBADTERM: return "malformed external term";
    case LPVM_ETIMEDOUT: return "timed out";
    case LPVM_ESYS: return "system call failed";
    case LPVM_EBUSY: return "port busy";
    case LPVM_EPERM: return "refused by this node's policy";
    default: return "unknown error";
  }
}

void lpvm_config_init(lpvm_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->worker_cache = 1;
  cfg->spin = -1;
}

static int online_cpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > SCHED_MAX_WORKERS ? SCHED_MAX_WORKERS : (int)n;
}

/* tasks/ calls it when the last live task dies: wake lpvm_wait and lpvm_stop. */
static void all_dead(void) {
  pthread_mutex_lock(&R.mu);
  pthread_cond_broadcast(&R.cv);
  pthread_mutex_unlock(&R.mu);
}

int lpvm_start(const lpvm_config *cfg) {
  lpvm_config c;
  if (cfg) c = *cfg;
  else lpvm_config_init(&c);
  if (R.running) return LPVM_ESTATE;
  if (c.workers < 0 || c.workers > SCHED_MAX_WORKERS) return LPVM_EINVAL;
  int rc = tasks_init(c.max_tasks ? c.max_tasks : DEFAULT_MAX_TASKS, all_dead);
  if (rc) return rc;
  if ((rc = timer_service_start(NULL)) != 0) goto fail_timer;
  R.halted = 0;
  R.halt_code = 0;
  if ((rc = io_poll_open()) != 0) goto fail_poll;
  if ((rc = sched_start(c.workers ? c.workers : online_cpus(), c.worker_cache != 0,
                        c.spin >= 0 ? c.spin : DEFAULT_SPIN, &io_poll)) != 0)
    goto fail_sched;
  R.running = 1;
  return 0;
fail_sched:
  io_poll_close();
fail_poll:
  timer_service_stop();
fail_timer:
  tasks_fini();
  return rc;
}

int lpvm_wait(void) {
  pthread_mutex_lock(&R.mu);
  while (!R.halted && tasks_live() > 0) pthread_cond_wait(&R.cv, &R.mu);
  int code = R.halted ? R.halt_code : 0;
  pthread_mutex_unlock(&R.mu);
  return code;
}

void lpvm_halt(int code) {
  pthread_mutex_lock(&R.mu);
  if (!R.halted) {
    R.halted = 1;
    R.halt_code = code;
  }
  pthread_cond_broadcast(&R.cv);
  pthread_mutex_unlock(&R.mu);
}

int lpvm_halted(void) {
  pthread_mutex_lock(&R.mu);
  int h = R.halted;
  pthread_mutex_unlock(&R.mu);
  return h;
}

int lpvm_stop(void) {
  if (!R.running) return LPVM_ESTATE;
  io_dist_stop();
  /* Kill until none is left: a task may spawn another while we sweep. A task that
  ** outlives STOP_REPORT_ROUNDS sweeps is named on stderr, once: a stop that does not
  ** end says what it waits for. */
  for (int round = 0; tasks_live() > 0; round++) {
    if (round == STOP_REPORT_ROUNDS) {
      fprintf(stderr, "lpvm: stopping the VM: %" PRIu64 " tasks still alive after %d s of kills:\n",
              tasks_live(), STOP_REPORT_ROUNDS / 20);
      tasks_dump(stderr);
    }
    tasks_kill_all();
    pthread_mutex_lock(&R.mu);
    if (tasks_live() > 0) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += 50 * 1000000;
      if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
      pthread_cond_timedwait(&R.cv, &R.mu, &ts);
    }
    pthread_mutex_unlock(&R.mu);
  }
  thread_join_all();
  /* The timer thread may still be inside a wake-up (touching a worker's queue)
  ** for a task that has since died: stop it before the workers go away. */
  timer_service_stop();
  task_timer_shutdown();
  sched_stop();
  io_poll_close();  /* the workers that waited in it have ended */
  tasks_fini();
  R.running = 0;
  return 0;
}

size_t lpvm_task_count(void) { return (size_t)tasks_live(); }

uint64_t lpvm_now_ms(void) { return timer_now_ms(); }

int lpvm_stats(lpvm_vmstats *out) {
  if (!out) return LPVM_EINVAL;
  memset(out, 0, sizeof *out);
  if (R.running) sched_fill_stats(out);
  out->tasks_spawned = tasks_spawned();
  out->tasks_exited = tasks_exited();
  out->tasks_live = tasks_live();
  out->threads_live = thread_live();
  return 0;
}
