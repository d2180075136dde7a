/*
** taskmod.h -- C task types for Lua processes: lpvm.spawn_task and lpvm.load_tasks.
**
** A Lua process starts a task of a registered C type with
**     pid = lpvm.spawn_task("type", arg)
** The type's `init(t, arg)` then receives a `const lpvm_task_arg *` whose term is
** `arg` encoded as an external term (term.h; nil when absent). The pointer is valid
** only during init: copy what you need.
**
** Types are registered either by the embedding program (lpvm_task_type_register,
** before or after lpvm_start) or by a shared library loaded from Lua with
**     n = lpvm.load_tasks("/path/libmytasks.so")
** which dlopens it and calls its one entry point:
**
**     int lpvm_register_tasks(lpvm_task_registry *reg) {
**       return reg->add(reg, &my_def);   // once per type; 0 on success
**     }
**
** The entry point returns 0 (or a negative LPVM_E* to refuse loading). The library
** stays loaded until the VM's Lua side is torn down (lproc_teardown), so its
** definitions may be static data. The library calls the lpvm C API (task.h,
** term.h) from the lpvm executable, which exports it.
*/
#ifndef LPVM_TASKMOD_H
#define LPVM_TASKMOD_H

#include <stddef.h>
#include <stdint.h>

#include "task.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LPVM_TASKMOD_VERSION 1
#define LPVM_TASKMOD_ENTRY "lpvm_register_tasks"

/* The argument of a task spawned from Lua. */
typedef struct lpvm_task_arg {
  const uint8_t *term;   /* external term (version byte first) */
  size_t len;
} lpvm_task_arg;

typedef struct lpvm_task_registry lpvm_task_registry;
struct lpvm_task_registry {
  int version;   /* LPVM_TASKMOD_VERSION */
  /* Register a type by its def->type name; LPVM_EEXIST if the name is taken. */
  int (*add)(lpvm_task_registry *reg, const lpvm_task_def *def);
  void *priv;    /* lpvm's own */
};

typedef int (*lpvm_register_tasks_fn)(lpvm_task_registry *reg);
/* The entry point a task library defines; declared here so that it is exported
** even from a library built with -fvisibility=hidden. */
LPVM_API int lpvm_register_tasks(lpvm_task_registry *reg);

/* Register a type from the embedding program (provided by lpvm's Lua layer). */
LPVM_API int lpvm_task_type_register(const lpvm_task_def *def);

#ifdef __cplusplus
}
#endif

#endif
