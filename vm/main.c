/*
** main.c -- the `lpvm` binary: the command line of lua5.4, on an Erlang-style VM.
**
**   lpvm [options] [script [args]]
**
** As lua5.4: LUA_INIT_5_4 (or LUA_INIT), then each -e and -l in the order given,
** then the script with its arguments (each compiled when its turn comes: vm/lboot.c),
** then with -i the shell; no script on a terminal is the shell, on a pipe stdin is
** the script. All of it runs in the boot
** process (vm/lboot.c). Start the VM, spawn the boot process, wait until every
** process has ended or one called lpvm.halt(code), stop the VM. The exit status is
** the halt code; otherwise 0 when the boot process ended normally and 1 when not.
**
** Options are a table (`options` below): a new one is one line there and a setter.
** Long options take their value as `--opt value` or `--opt=value`; -e and -l as the
** next word or glued (`-eprint(1)`), as lua does.
**
** SIGINT and SIGTERM stop the VM cleanly: the handler only writes the signal number
** to a pipe (the one thing a handler may safely do), and a small thread reading that
** pipe calls lpvm_halt(). A second signal while the VM is still stopping ends the OS
** process at once, for a process stuck in a blocking C call. With the shell, SIGINT
** is the shell's Ctrl-C instead (vm/shell.c). Nothing a Lua process calls changes
** this: os.execute and io.popen are lpvm's own (vm/lsys.c), not system()/popen().
*/
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lua.h>

#include "lpvm/dist.h"
#include "lpvm/lpvm.h"
#include "lpvm/lpvm_lua.h"
#include "vm/lproc.h"

static const char *progname = "lpvm";

/* ---- options ------------------------------------------------------------------ */

typedef struct cli {
  lpvm_config vcfg;
  lproc_config pcfg;
  lproc_step *steps;      /* -e and -l in order (LUA_INIT and the script added later) */
  int nsteps;
  int interactive, version, noenv, help;
  int sched_stats;        /* --sched-stats: the workers' counters on stderr at the end */
  lpvm_dist_opts dist;    /* --sname/--name/--cookie/--listen: distribution */
  const char *remsh;      /* --remsh node: the shell evaluates on that node */
} cli;

/* A setter returns 0, or -1 with the error printed. */
typedef int (*opt_set)(cli *c, const char *val);

typedef struct option {
  const char *name;       /* "-e", "--workers" */
  const char *arg;        /* the value's name in --help; NULL: a flag */
  opt_set set;
  const char *help;
} option;

static int bad(const char *opt, const char *what) {
  fprintf(stderr, "%s: %s %s\n", progname, opt, what);
  return -1;
}

/* A non-negative decimal number with an optional k/m/g suffix (when `suffix`). */
static int parse_size(const char *s, int suffix, unsigned long long max,
                      unsigned long long *out) {
  char *end;
  if (s == NULL || *s < '0' || *s > '9') return -1;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0) return -1;
  if (suffix && *end != '\0' && end[1] == '\0') {
    unsigned long long mul = 0;
    switch (*end) {
      case 'k': case 'K': mul = 1ull << 10; break;
      case 'm': case 'M': mul = 1ull << 20; break;
      case 'g': case 'G': mul = 1ull << 30; break;
      default: return -1;
    }
    if (v > max / mul) return -1;
    v *= mul;
    end++;
  }
  if (*end != '\0' || v > max) return -1;
  *out = v;
  return 0;
}

static int o_exec(cli *c, const char *v) {
  c->steps[c->nsteps++] = (lproc_step){LPROC_STEP_CODE, v, "=(command line)"};
  return 0;
}

/* -l mod: global mod (up to a '-', as lua 5.4: -l mod-v2 sets mod); -l g=mod: global g. */
static int o_lib(cli *c, const char *v) {
  const char *eq = strchr(v, '=');
  char *g = strdup(v);
  if (!g) return bad("-l", "out of memory");
  if (eq) g[eq - v] = 0;
  else g[strcspn(g, "-")] = 0;
  c->steps[c->nsteps++] = (lproc_step){LPROC_STEP_LIB, eq ? eq + 1 : v, g};
  return 0;
}

static int o_interactive(cli *c, const char *v) { (void)v; c->interactive = 1; return 0; }
static int o_version(cli *c, const char *v) { (void)v; c->version = 1; return 0; }
static int o_noenv(cli *c, const char *v) { (void)v; c->noenv = c->pcfg.noenv = 1; return 0; }
static int o_warn(cli *c, const char *v) { (void)v; c->pcfg.warnings = 1; return 0; }
static int o_help(cli *c, const char *v) { (void)v; c->help = 1; return 0; }
static int o_threads(cli *c, const char *v) { (void)v; c->pcfg.threads = 1; return 0; }
static int o_nocache(cli *c, const char *v) { (void)v; c->vcfg.worker_cache = 0; return 0; }
static int o_schedstats(cli *c, const char *v) { (void)v; c->sched_stats = 1; return 0; }

static int o_workers(cli *c, const char *v) {
  unsigned long long n;
  if (parse_size(v, 0, 64, &n) != 0 || n == 0) return bad("--workers", "needs a number from 1 to 64");
  c->vcfg.workers = (int)n;
  return 0;
}

static int o_reductions(cli *c, const char *v) {
  unsigned long long n;
  if (parse_size(v, 0, INT_MAX, &n) != 0 || n == 0) return bad("--reductions", "needs a positive number");
  c->pcfg.reductions = (int)n;
  return 0;
}

static int o_maxheap(cli *c, const char *v) {
  unsigned long long n;
  if (parse_size(v, 1, SIZE_MAX, &n) != 0)
    return bad("--max-heap", "needs a size in bytes (suffix k, m or g allowed)");
  c->pcfg.max_heap = (size_t)n;
  return 0;
}

static int o_recycle(cli *c, const char *v) {
  unsigned long long n;
  if (parse_size(v, 0, INT_MAX, &n) != 0) return bad("--recycle", "needs a number");
  c->pcfg.recycle = (int)n;
  return 0;
}

static int o_loglevel(cli *c, const char *v) {
  if (!lproc_log_level_ok(v))
    return bad("--log-level", "needs a level: emergency, alert, critical, error, warning, "
                              "notice, info, debug, none or all");
  c->pcfg.log_level = v;
  return 0;
}

static int o_sname(cli *c, const char *v) {
  if (!*v || strchr(v, '@')) return bad("--sname", "needs a name without @host");
  c->dist.name = v;
  c->dist.longnames = 0;
  return 0;
}

static int o_name(cli *c, const char *v) {
  if (!*v) return bad("--name", "needs a name (name@host or name)");
  c->dist.name = v;
  c->dist.longnames = 1;
  return 0;
}

static int o_remsh(cli *c, const char *v) {
  if (!strchr(v, '@') || strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                   "0123456789_-.@") != strlen(v))
    return bad("--remsh", "needs a node name (name@host)");
  c->remsh = v;
  return 0;
}

static int o_noremote(cli *c, const char *v) { (void)v; c->pcfg.no_remote_code = 1; return 0; }
static int o_cookie(cli *c, const char *v) { c->dist.cookie = v; return 0; }
static int o_listen(cli *c, const char *v) { c->dist.listen = v; return 0; }

/* --sched-stats: what the scheduler did (docs/performance.md reads steals and sleeps
** to show whether a chain stayed on one worker). */
static void print_sched_stats(void) {
  lpvm_vmstats st;
  if (lpvm_stats(&st) != 0) return;
  for (int i = 0; i < st.workers; i++) {
    const lpvm_worker_stats *w = &st.worker[i];
    fprintf(stderr, "worker %d: steps %llu, switches %llu, cache hits %llu, steals %llu, "
            "sleeps %llu\n", i, (unsigned long long)w->runs,
            (unsigned long long)w->switches, (unsigned long long)w->cache_hits,
            (unsigned long long)w->steals, (unsigned long long)w->sleeps);
  }
}

static const option options[] = {
    {"-e", "code", o_exec, "run code (each -e and -l in the order given)"},
    {"-l", "mod", o_lib, "require mod into the global mod; -l g=mod: into g"},
    {"-i", NULL, o_interactive, "the shell after the script (in the same process)"},
    {"-v", NULL, o_version, "print the version (then run what else is asked)"},
    {"-E", NULL, o_noenv, "ignore LUA_INIT, LUA_PATH and LUA_CPATH"},
    {"-W", NULL, o_warn, "turn warnings on"},
    {"--workers", "N", o_workers, "worker threads (default: one per CPU)"},
    {"--threads", NULL, o_threads, "new processes start on private threads"},
    {"--reductions", "N", o_reductions, "slices of N VM instructions (default: 1 ms slices)"},
    {"--no-worker-cache", NULL, o_nocache, "turn the scheduler's worker cache off"},
    {"--sched-stats", NULL, o_schedstats, "print each worker's steps, steals, sleeps at the end"},
    {"--max-heap", "BYTES", o_maxheap, "default heap limit per process (suffix k, m or g)"},
    {"--recycle", "N", o_recycle, "keep up to N finished Lua states for reuse (64)"},
    {"--log-level", "LEVEL", o_loglevel, "the log's level (default notice; none, all)"},
    {"--sname", "NAME", o_sname, "a distributed node NAME@shorthost (see distribution.md)"},
    {"--name", "NAME", o_name, "a distributed node with a long name (NAME@host.domain)"},
    {"--remsh", "NODE", o_remsh, "the shell, attached to the running node NODE"},
    {"--cookie", "C", o_cookie, "the cookie (default: ~/.erlang.cookie, as erl)"},
    {"--listen", "ADDR", o_listen, "IPv4 address the node listens on (default: all)"},
    {"--no-remote-code", NULL, o_noremote, "functions from other nodes are plain data"},
    {"--version", NULL, o_version, "print the version"},
    {"--help", NULL, o_help, "this text"},
    {"-h", NULL, o_help, NULL},
    {NULL, NULL, NULL, NULL}};

static void usage(FILE *f) {
  fprintf(f,
          "usage: %s [options] [script [args]]\n"
          "Runs script as the first Lua process of an Erlang-style VM; with no script,\n"
          "the shell on a terminal, stdin as the script on a pipe.\n",
          progname);
  for (const option *o = options; o->name; o++) {
    if (!o->help) continue;
    char left[40];
    snprintf(left, sizeof left, "%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
    fprintf(f, "  %-20s %s\n", left, o->help);
  }
  fprintf(f,
          "  --                   stop handling options\n"
          "  -                    stop handling options and run stdin\n"
          "Long options also take --opt=value. Environment: LUA_INIT_5_4 or LUA_INIT\n"
          "(code, or @file, run first), LUA_PATH, LUA_CPATH, LPVM_LIBDIR. See lpvm(1).\n");
}

/* Parse argv into c; returns the index of the script (argc: none), or -1. */
static int parse(cli *c, int argc, char **argv) {
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-' || a[1] == '\0') return i;     /* the script, or - (stdin) */
    if (strcmp(a, "--") == 0) return i + 1;
    const option *o;
    const char *val = NULL;
    for (o = options; o->name; o++) {
      size_t n = strlen(o->name);
      if (strncmp(a, o->name, n) != 0) continue;
      if (a[n] == '\0') break;
      if (o->arg && o->name[1] == '-' && a[n] == '=') { val = a + n + 1; break; }
      if (o->arg && o->name[1] != '-') { val = a + n; break; }   /* -eCODE */
    }
    if (!o->name) {
      const char *eq = strchr(a, '=');
      fprintf(stderr, "%s: unrecognized option '%.*s' (try --help)\n", progname,
              (int)(eq && a[1] == '-' ? eq - a : (int)strlen(a)), a);
      return -1;
    }
    if (o->arg && !val) {
      if (++i >= argc) {
        fprintf(stderr, "%s: '%s' needs an argument (%s)\n", progname, o->name, o->arg);
        return -1;
      }
      val = argv[i];
    }
    if (o->set(c, val) != 0) return -1;
  }
  return argc;
}

/* LUA_INIT_5_4, else LUA_INIT: "@file" runs the file, anything else is code. */
static void add_init(cli *c) {
  const char *name = "LUA_INIT_5_4";
  const char *v = getenv(name);
  if (!v) v = getenv(name = "LUA_INIT");
  if (!v) return;
  memmove(c->steps + 1, c->steps, (size_t)c->nsteps * sizeof *c->steps);
  if (v[0] == '@') c->steps[0] = (lproc_step){LPROC_STEP_FILE, v + 1, NULL};
  else c->steps[0] = (lproc_step){LPROC_STEP_CODE, v, name[8] ? "=LUA_INIT_5_4" : "=LUA_INIT"};
  c->nsteps++;
}

/* ---- signals ------------------------------------------------------------------ */

/* SIGINT and SIGTERM are blocked in every thread but main (main blocks them before
** the VM's threads start, which inherit the mask, and unblocks them once the handler
** is in place; commands are spawned with an empty mask). The kernel then hands them to
** main, waiting in lpvm_wait's pthread_cond_wait. Under ThreadSanitizer, which runs a
** handler only when its thread is in a blocking call it intercepts (cond_wait is one,
** read is not), a signal that landed on another thread, say a private thread in a raw
** futex wait (sched/thread.c), waited there: SIGTERM beside os.execute took until the
** command ended (cli_test, 2 runs in 6). */
static sigset_t stop_sigs;
static int sig_pipe[2] = {-1, -1};
static volatile sig_atomic_t sig_seen;
static volatile sig_atomic_t sig_shell;   /* SIGINT goes to the shell (lproc_shell_sigint) */

static void on_signal(int sig) {
  int saved = errno;
  if (sig_seen) _exit(128 + sig);  /* second signal: the VM did not stop in time */
  if (!(sig == SIGINT && sig_shell)) sig_seen = sig;
  unsigned char b = (unsigned char)sig;
  ssize_t n = write(sig_pipe[1], &b, 1);
  (void)n;
  errno = saved;
}

/* Reads signal numbers from the pipe; a 0 byte (from main) means "VM done". */
static void *signal_thread(void *arg) {
  (void)arg;
  lpvm_thread_arena();   /* before memory may run out (lpvm.h) */
  for (;;) {
    unsigned char b;
    ssize_t n = read(sig_pipe[0], &b, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || b == 0) return NULL;
    if (b == SIGINT && sig_shell && lproc_shell_sigint()) continue;
    lpvm_halt(128 + b);
  }
}

static int signals_start(pthread_t *th) {
  if (pipe(sig_pipe) != 0) return -1;
  if (pthread_create(th, NULL, signal_thread, NULL) != 0) return -1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  return 0;
}

static void signals_stop(pthread_t th) {
  unsigned char z = 0;
  ssize_t n;
  do n = write(sig_pipe[1], &z, 1); while (n < 0 && errno == EINTR);
  pthread_join(th, NULL);
}

/* ---- a stop with a way out --------------------------------------------------------- */

/* Stopping kills every task and joins every thread; a task or thread that never ends
** would keep the OS process alive after the program asked to end (lpvm.halt ends at
** once in Erlang). A watchdog gives the stop STOP_LIMIT_S seconds, then says what is
** left (lpvm_stop has named the live tasks after 10 s) and ends the OS process with
** the status the program asked for. */
#define STOP_LIMIT_S 30

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, status;
} watch = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

static void *stop_watchdog(void *arg) {
  (void)arg;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += STOP_LIMIT_S;
  pthread_mutex_lock(&watch.mu);
  int rc = 0;
  while (!watch.done && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&watch.cv, &watch.mu, &until);
  int done = watch.done, status = watch.status;
  pthread_mutex_unlock(&watch.mu);
  if (done) return NULL;
  lpvm_vmstats st;
  lpvm_stats(&st);
  fprintf(stderr, "%s: the VM did not stop within %d s (%zu tasks, %llu threads still alive);"
          " exiting with status %d\n", progname, STOP_LIMIT_S, lpvm_task_count(),
          (unsigned long long)st.threads_live, status);
  fflush(stdout);
  _exit(status);
}

/* lpvm_lua_stop() under the watchdog; `status` is the exit status if it must act. */
static void stop_vm(int status) {
  pthread_t th;
  watch.status = status;
  sigset_t old;   /* the watchdog takes no stop signal: main's handler has them */
  pthread_sigmask(SIG_BLOCK, &stop_sigs, &old);
  int have = pthread_create(&th, NULL, stop_watchdog, NULL) == 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  lpvm_lua_stop();   /* os.execute commands ended, tasks killed, threads joined */
  if (!have) return;
  pthread_mutex_lock(&watch.mu);
  watch.done = 1;
  pthread_cond_signal(&watch.cv);
  pthread_mutex_unlock(&watch.mu);
  pthread_join(th, NULL);
}

/* ---- main --------------------------------------------------------------------- */

/* What parse allocated (every return of main frees it: ASan's leak check runs on
** --help and --version too). */
static void cli_free(cli *c) {
  for (int i = 0; i < c->nsteps; i++)
    if (c->steps[i].kind == LPROC_STEP_LIB) free((char *)c->steps[i].name);
  free(c->steps);
}

static int cli_done(cli *c, int status) {
  cli_free(c);
  return status;
}

int main(int argc, char **argv) {
  cli c;
  memset(&c, 0, sizeof c);
  lpvm_config_init(&c.vcfg);
  lproc_config_init(&c.pcfg);
  c.steps = calloc((size_t)argc + 2, sizeof *c.steps);
  if (!c.steps) return 1;
  int script = parse(&c, argc, argv);
  if (script < 0) return cli_done(&c, 1);
  if (c.help) {
    usage(stdout);
    return cli_done(&c, 0);
  }
  int has_e = c.nsteps > 0;   /* -e or -l */
  if (c.version || c.interactive) printf("lpvm %s (%s)\n", LPVM_VERSION, LUA_RELEASE);
  if (script == argc && c.version && !has_e && !c.interactive) return cli_done(&c, 0);
  /* no script: the shell on a terminal, stdin as the script on a pipe (as lua) */
  int shell = c.interactive;
  static char dash[] = "-";
  char **av = argv;
  static char remsh_name[64], remsh_code[400];
  if (c.remsh) {   /* this VM: a hidden node of its own, running only the shell */
    shell = 1;
    if (!c.dist.name) {
      snprintf(remsh_name, sizeof remsh_name, "remsh%ld", (long)getpid());
      c.dist.name = remsh_name;
    }
    snprintf(remsh_code, sizeof remsh_code, "require('lpvm_shell').remote = '%s'", c.remsh);
    c.steps[c.nsteps++] = (lproc_step){LPROC_STEP_CODE, remsh_code, "=(--remsh)"};
  } else if (script == argc && !has_e && !c.interactive && !c.version) {
    if (isatty(STDIN_FILENO)) {
      shell = 1;
    } else {
      av = malloc(((size_t)argc + 2) * sizeof *av);   /* argv with "-" appended */
      if (!av) return cli_done(&c, 1);
      memcpy(av, argv, (size_t)argc * sizeof *av);
      av[argc] = dash;
      av[argc + 1] = NULL;
      argc++;
    }
  }
  if (!c.noenv) add_init(&c);
  int script_step = -1;
  if (script < argc) {
    script_step = c.nsteps;
    c.steps[c.nsteps++] = (lproc_step){LPROC_STEP_FILE, av[script], NULL};
  }
  lproc_boot_spec spec = {c.steps, c.nsteps, script_step, argc, av,
                          script < argc ? script : 0, shell};

  sigemptyset(&stop_sigs);
  sigaddset(&stop_sigs, SIGINT);
  sigaddset(&stop_sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_sigs, NULL);
  int rc = lpvm_start(&c.vcfg);
  if (rc < 0) {
    fprintf(stderr, "%s: cannot start the VM: %s\n", progname, lpvm_strerror(rc));
    if (av != argv) free(av);
    return cli_done(&c, 1);
  }
  rc = lproc_setup(&c.pcfg);
  if (rc < 0) {
    lpvm_stop();
    fprintf(stderr, "%s: cannot set up Lua processes: %s\n", progname, lpvm_strerror(rc));
    if (av != argv) free(av);
    return cli_done(&c, 1);
  }

  if (c.dist.name) {
    c.dist.hidden = 1;
    lmod_dist_install();
    rc = lpvm_dist_start(&c.dist);
    if (rc < 0) {
      lpvm_stop();
      lproc_teardown();
      fprintf(stderr, "%s: cannot start distribution as %s: %s\n", progname, c.dist.name,
              lpvm_strerror(rc));
      return 1;
    }
  }

  pthread_t sig_th;
  sig_shell = shell;
  int have_sig = signals_start(&sig_th) == 0;
  pthread_sigmask(SIG_UNBLOCK, &stop_sigs, NULL);

  lpvm_id boot = 0;
  char *err = NULL;
  rc = lproc_boot_spec_run(&spec, &boot, &err);
  int status = 0;
  if (rc < 0) {
    /* one line: the message, which may carry our prefix */
    if (err) fprintf(stderr, "%s%s\n", strncmp(err, "lpvm: ", 6) == 0 ? "" : "lpvm: ", err);
    else fprintf(stderr, "%s: %s\n", progname, lpvm_strerror(rc));
    free(err);
    status = 1;
    lpvm_halt(1);
  }
  int halt_code = lpvm_wait();
  if (c.sched_stats) print_sched_stats();
  if (rc >= 0) {
    /* lpvm_wait() gives 0 both for halt(0) and for "every process ended": tasks
    ** still alive mean it was a halt. */
    if (halt_code != 0) status = halt_code;
    else if (lpvm_task_count() > 0) status = 0;
    else status = lproc_boot_ok() ? 0 : 1;
  }
  fflush(stdout);
  stop_vm(status);
  if (have_sig) signals_stop(sig_th);
  if (av != argv) free(av);
  return cli_done(&c, status);
}
