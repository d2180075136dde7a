/*
** lpvm_lua.h -- embed lpvm's Lua processes in a C program.
**
** The VM itself (lpvm.h) runs C tasks; this adds Lua processes, each a lua_State of
** its own, as the `lpvm` binary runs them. A program:
**
**   lpvm_start(NULL);                           start the VM (lpvm.h)
**   lpvm_lua_setup(NULL);                       Lua processes with the defaults
**   lpvm_lua_boot("app.lua", NULL, 0, NULL, &boot, &err);   a boot script, or
**   lpvm_lua_spawn("worker", args, len, &pid);  a process running a module
**   lpvm_send(NULL, pid, term, len);            send it terms (task.h, term.h)
**   lpvm_wait();                                until every process ended or one
**                                               called lpvm.halt(code)
**   lpvm_lua_stop();                            stop everything
**
** Build: cc app.c $(pkg-config --cflags --libs lpvm). docs/embedding.md has a whole
** example. Every function returns 0 or a negative LPVM_E* code (lpvm.h).
*/
#ifndef LPVM_LUA_H
#define LPVM_LUA_H

#include <stddef.h>
#include <stdint.h>

#include "lpvm.h"
#include "task.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lpvm_lua_config {
  int threads;      /* 1: new processes start on private OS threads */
  int reductions;   /* VM instructions in a time slice; 0 = default (4000) */
  size_t max_heap;  /* default heap limit of a process in bytes; 0 = none */
  int recycle;      /* finished lua_States kept for reuse; 0 = none (config_init: 64) */
  int warnings;     /* 1: warn() prints from the start (lua -W) */
  int noenv;        /* 1: ignore LUA_PATH and LUA_CPATH (lua -E) */
  int no_remote_code;  /* 1: functions from other nodes arrive as plain data and
                       ** spawning one here is refused (lpvm --no-remote-code) */
} lpvm_lua_config;

LPVM_API void lpvm_lua_config_init(lpvm_lua_config *c);

/* After lpvm_start(), before any Lua process: install the settings (NULL: defaults). */
LPVM_API int lpvm_lua_setup(const lpvm_lua_config *c);

/* Spawn the boot process: run the file `script` ("-": stdin) or, when `code` is not
** NULL, that chunk; argv[0..argc) become the global `arg` (arg[0] = the script) and
** argv[1..argc) its `...`. A file that cannot be read or compiled is reported here:
** *errmsg (when errmsg is not NULL) gets a one-line message to free() and the
** result is negative. The script's folder goes on package.path of every process. */
LPVM_API int lpvm_lua_boot(const char *script, const char *code, int argc, char **argv,
                  lpvm_id *pid, char **errmsg);

/* Spawn a process running Lua module `module` (require'd in the new process, as
** lpvm.spawn("module", ...) does): the function it returns, or its main or start,
** is called with the values of `args`, an external term (term.h: a tuple gives its
** elements as the arguments; NULL or len 0: none). */
LPVM_API int lpvm_lua_spawn(const char *module, const uint8_t *args, size_t len, lpvm_id *pid);

/* After lpvm_wait(): 1 when the boot process ended with reason normal. */
LPVM_API int lpvm_lua_boot_ok(void);

/* Stop: end the commands processes still wait for (os.execute, io.popen), kill
** every task, join every thread (lpvm_stop), free the Lua side. lpvm_start() and
** lpvm_lua_setup() may then be called again. */
LPVM_API int lpvm_lua_stop(void);

#ifdef __cplusplus
}
#endif

#endif
