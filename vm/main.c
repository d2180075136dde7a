/*
** main.c -- the `lpvm` binary: run a Lua script as the boot process, or the shell.
**
**   lpvm [options] [script.lua | - | -e code] [args...]
**
** Start the VM, spawn the boot process (or the shell), wait until every process has
** ended or one called lpvm.halt(code), stop the VM. The exit status is the halt code;
** otherwise 0 when the boot process ended normally and 1 when it did not.
**
** SIGINT and SIGTERM stop the VM cleanly: the handler only writes the signal number
** to a pipe (the one thing a handler may safely do), and a small thread reading that
** pipe calls lpvm_halt(). A second signal while the VM is still stopping ends the OS
** process at once, for a process stuck in a blocking C call.
*/
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lua.h>

#include "lpvm/lpvm.h"
#include "vm/lproc.h"

static const char *progname = "lpvm";

static void usage(FILE *f) {
  fprintf(f,
          "usage: %s [options] [script.lua | - | -e code] [args...]\n"
          "Runs script.lua as the first Lua process of an Erlang-style VM; with no\n"
          "script, starts an interactive shell.\n"
          "  -e code            run `code` as the boot process\n"
          "  -                  read the script from stdin\n"
          "  --workers N        worker threads (default: one per CPU)\n"
          "  --threads          new processes start on private threads\n"
          "  --reductions N     VM instructions between preemption checks\n"
          "  --no-worker-cache  turn the scheduler's worker cache off\n"
          "  --max-heap BYTES   default heap limit per process (suffix k, m or g)\n"
          "  --recycle N        keep up to N finished Lua states for reuse\n"
          "  --help             this text\n"
          "  --version          print the version\n",
          progname);
}

static int fail(const char *fmt, const char *what) {
  fprintf(stderr, "%s: ", progname);
  fprintf(stderr, fmt, what);
  fputc('\n', stderr);
  return 1;
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

/* ---- signals ------------------------------------------------------------------ */

static int sig_pipe[2] = {-1, -1};
static volatile sig_atomic_t sig_seen;

static void on_signal(int sig) {
  int saved = errno;
  if (sig_seen) _exit(128 + sig);  /* second signal: the VM did not stop in time */
  sig_seen = sig;
  unsigned char b = (unsigned char)sig;
  ssize_t n = write(sig_pipe[1], &b, 1);
  (void)n;
  errno = saved;
}

/* Reads signal numbers from the pipe; a 0 byte (from main) means "VM done". */
static void *signal_thread(void *arg) {
  (void)arg;
  for (;;) {
    unsigned char b;
    ssize_t n = read(sig_pipe[0], &b, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || b == 0) return NULL;
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

/* ---- main --------------------------------------------------------------------- */

int main(int argc, char **argv) {
  lpvm_config vcfg;
  lproc_config pcfg;
  lpvm_config_init(&vcfg);
  lproc_config_init(&pcfg);
  const char *code = NULL, *script = NULL;
  int i = 1;

  for (; i < argc; i++) {
    const char *a = argv[i];
    unsigned long long v;
    if (strcmp(a, "--") == 0) { i++; break; }
    if (a[0] != '-' || strcmp(a, "-") == 0) break;  /* the script */
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(a, "--version") == 0 || strcmp(a, "-v") == 0) {
      printf("lpvm %s (%s)\n", LPVM_VERSION, LUA_RELEASE);
      return 0;
    } else if (strcmp(a, "-e") == 0) {
      if (++i >= argc) return fail("%s needs an argument", a);
      code = argv[i];
      i++;
      break;  /* the rest are arguments of the chunk */
    } else if (strcmp(a, "--threads") == 0) {
      pcfg.threads = 1;
    } else if (strcmp(a, "--no-worker-cache") == 0) {
      vcfg.worker_cache = 0;
    } else if (strcmp(a, "--workers") == 0) {
      if (parse_size(i + 1 < argc ? argv[++i] : NULL, 0, 64, &v) != 0 || v == 0)
        return fail("--workers needs a number from 1 to 64", NULL);
      vcfg.workers = (int)v;
    } else if (strcmp(a, "--reductions") == 0) {
      if (parse_size(i + 1 < argc ? argv[++i] : NULL, 0, INT_MAX, &v) != 0 || v == 0)
        return fail("--reductions needs a positive number", NULL);
      pcfg.reductions = (int)v;
    } else if (strcmp(a, "--max-heap") == 0) {
      if (parse_size(i + 1 < argc ? argv[++i] : NULL, 1, SIZE_MAX, &v) != 0)
        return fail("--max-heap needs a size in bytes (suffix k, m or g allowed)", NULL);
      pcfg.max_heap = (size_t)v;
    } else if (strcmp(a, "--recycle") == 0) {
      if (parse_size(i + 1 < argc ? argv[++i] : NULL, 0, INT_MAX, &v) != 0)
        return fail("--recycle needs a number", NULL);
      pcfg.recycle = (int)v;
    } else {
      fprintf(stderr, "%s: unknown option '%s' (try --help)\n", progname, a);
      return 1;
    }
  }
  if (code == NULL && i < argc) script = argv[i];
  /* argv[first..] becomes `arg`: arg[0] is the script (with -e: the program, as
  ** lua does), then its arguments */
  int first = code ? i - 1 : i;
  if (code) argv[first] = argv[0];

  int rc = lpvm_start(&vcfg);
  if (rc < 0) return fail("cannot start the VM: %s", lpvm_strerror(rc));
  rc = lproc_setup(&pcfg);
  if (rc < 0) {
    lpvm_stop();
    return fail("cannot set up Lua processes: %s", lpvm_strerror(rc));
  }

  pthread_t sig_th;
  int have_sig = signals_start(&sig_th) == 0;

  lpvm_id boot = 0;
  int shell = 0;
  char *err = NULL;
  if (code || script) {
    rc = lproc_boot(script, code, argc - first, argv + first, &boot, &err);
  } else {
    shell = 1;
    rc = lproc_shell(&boot);   /* reports its own errors */
  }

  int status;
  if (rc < 0) {
    if (err) {
      /* one line: the first line of the message, which may carry our prefix */
      size_t n = strcspn(err, "\n");
      int prefixed = strncmp(err, "lpvm: ", 6) == 0;
      fprintf(stderr, "%s%.*s\n", prefixed ? "" : "lpvm: ", (int)n, err);
      free(err);
    } else if (!shell) {
      fprintf(stderr, "%s: %s\n", progname, lpvm_strerror(rc));
    }
    status = 1;
    lpvm_halt(1);
  }
  int halt_code = lpvm_wait();
  if (rc >= 0) {
    /* lpvm_wait() gives 0 both for halt(0) and for "every process ended": tasks
    ** still alive mean it was a halt. */
    if (halt_code != 0) status = halt_code;
    else if (shell || lpvm_task_count() > 0) status = 0;
    else status = lproc_boot_ok() ? 0 : 1;
  }
  fflush(stdout);
  lpvm_stop();
  if (have_sig) signals_stop(sig_th);
  lproc_teardown();
  return status;
}
