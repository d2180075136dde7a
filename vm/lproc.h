/*
** lproc.h -- Lua processes: the task type that runs a lua_State, seen from the
** `lpvm` binary (vm/main.c) and from the shell.
*/
#ifndef LPVM_LPROC_H
#define LPVM_LPROC_H

#include <stddef.h>
#include <stdint.h>

#include "lpvm/task.h"

/* Instructions a slice counts as (info's reductions) and, with --reductions, the
** instructions between preemptions. */
#define LPROC_DEFAULT_REDUCTIONS 4000

/* Finished states kept for new processes unless set otherwise (--recycle, recycle()):
** a recycled state starts a process in a third of the instructions of a new one. */
#define LPROC_DEFAULT_RECYCLE 64

/* VM-wide settings for Lua processes, set before the boot process is spawned. */
typedef struct lproc_config {
  int threads;            /* 1: new processes start on private threads (--threads) */
  int reductions;         /* 0: CPU-time slices (default); N: yield every N VM instructions */
  size_t max_heap;        /* default per-process heap limit in bytes; 0 = none */
  int recycle;            /* states kept in the recycling pool; 0 = none (default 64) */
  int warnings;           /* 1: warn() prints from the start (lua -W) */
  int noenv;              /* 1: package ignores LUA_PATH/LUA_CPATH (lua -E) */
  const char *log_level;  /* the log's level ("error", ...; see llog.h); NULL = notice */
  int no_remote_code;     /* 1: functions from other nodes are data, their spawns refused */
} lproc_config;

void lproc_config_init(lproc_config *c);
/* 1 if `name` is a log level lproc_config.log_level accepts (--log-level). */
int lproc_log_level_ok(const char *name);
/* Install the settings; call after lpvm_start() and before lproc_boot(). */
int lproc_setup(const lproc_config *c);
/* Free the state pool and module registry; call after lpvm_stop(). */
void lproc_teardown(void);

/* The boot process, as the stand-alone lua runs its command line: the steps in
** order (LUA_INIT, each -e and -l, the script), then optionally the shell in the
** same process (lua -i). Every chunk is compiled before the process is spawned: a
** file that cannot be read or does not compile is reported here, before anything
** runs; *errmsg (malloc'd: free with free()) gets a one-line message and the result
** is negative. */
enum { LPROC_STEP_CODE, LPROC_STEP_FILE, LPROC_STEP_LIB };
typedef struct lproc_step {
  int kind;
  const char *text;   /* CODE: the chunk; FILE: a path, "-" = stdin; LIB: module name */
  const char *name;   /* CODE: chunk name ("=(command line)"); LIB: the global */
} lproc_step;

typedef struct lproc_boot_spec {
  const lproc_step *steps;
  int nsteps;
  int script;         /* index of the step that gets the arguments as `...`, -1 = none */
  int argc;           /* the command line for the global `arg` table: */
  char **argv;        /*   arg[i - arg0] = argv[i] (lua: arg[0] the script, */
  int arg0;           /*   negative indices the interpreter and its options) */
  int shell;          /* 1: then the interactive shell, in the same process */
} lproc_boot_spec;

int lproc_boot_spec_run(const lproc_boot_spec *b, lpvm_id *id, char **errmsg);

/* The simple form: run `script` (a path, "-" = stdin) or, when `code` is not NULL,
** that chunk, with arg[0..argc) = argv and `...` = argv[1..argc). */
int lproc_boot(const char *script, const char *code, int argc, char **argv,
               lpvm_id *id, char **errmsg);

/* Between lpvm_wait() and lpvm_stop(): end the commands that processes still wait
** for in os.execute or io.popen (SIGTERM, then SIGKILL after grace_ms), so that
** none is left running as an orphan and no worker stays blocked in its wait. */
void lsys_stop_children(int grace_ms);
/* After lpvm_stop(): os.execute and io.popen may start commands again (an embedder's
** next lpvm_lua_start). Until then a command is refused: nil, "Operation canceled". */
void lsys_stopped(void);

/* Interrupt process `id` as Ctrl-C interrupts lua5.4: its running code, or the
** receive or sleep it waits in, raises "interrupted!" (the shell's Ctrl-C). */
int lproc_interrupt(lpvm_id id);

/* A SIGINT for the shell, if there is one (1; else 0): it drops the line being
** edited or interrupts the evaluation (vm/shell.c). */
int lproc_shell_sigint(void);

/* After lpvm_wait(): 1 when the boot process ended with reason normal. */
int lproc_boot_ok(void);

/* Lua processes answer a peer's spawn requests (lmod_dist.c): before distribution
** starts (lpvm.net_start and --sname do it). */
void lmod_dist_install(void);

#endif
