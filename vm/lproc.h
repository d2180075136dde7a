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

/* VM-wide settings for Lua processes, set before the boot process is spawned. */
typedef struct lproc_config {
  int threads;            /* 1: new processes start on private threads (--threads) */
  int reductions;         /* 0: CPU-time slices (default); N: yield every N VM instructions */
  size_t max_heap;        /* default per-process heap limit in bytes; 0 = none */
  int recycle;            /* states kept in the recycling pool; 0 = none */
} lproc_config;

void lproc_config_init(lproc_config *c);
/* Install the settings; call after lpvm_start() and before lproc_boot(). */
int lproc_setup(const lproc_config *c);
/* Free the state pool and module registry; call after lpvm_stop(). */
void lproc_teardown(void);

/* Spawn the boot process: run `script` (a file path; "-" = stdin) or, when
** `code` is not NULL, that chunk (lpvm -e). argv[0..argc) become the global `arg`
** table as the stand-alone `lua` makes it (arg[0] = script, arg[1..] = args).
** A file that cannot be read or does not compile is reported here, before any
** process runs: *errmsg (static or malloc'd: free with free()) gets a one-line
** message and the result is negative. */
int lproc_boot(const char *script, const char *code, int argc, char **argv,
               lpvm_id *id, char **errmsg);

/* After lpvm_wait(): 1 when the boot process ended with reason normal. */
int lproc_boot_ok(void);

/* Spawn the interactive shell process (lpvm with no script). */
int lproc_shell(lpvm_id *id);

#endif
