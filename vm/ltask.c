/*
** ltask.c -- the registry of C task types that Lua can spawn by name, and loading
** more of them from shared libraries (include/lpvm/taskmod.h).
*/
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/taskmod.h"
#include "vm/lproc_int.h"

static struct {
  pthread_mutex_t mu;
  const lpvm_task_def **defs;
  size_t n, cap;
  void **libs;
  size_t nlibs, caplibs;
} R = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, NULL, 0, 0};

static int grow(void **v, size_t *cap, size_t elem) {
  size_t n = *cap ? *cap * 2 : 8;
  void *p = realloc(*v, n * elem);
  if (!p) return LPVM_ENOMEM;
  *v = p;
  *cap = n;
  return 0;
}

static const lpvm_task_def *find_locked(const char *type) {
  for (size_t i = 0; i < R.n; i++)
    if (strcmp(R.defs[i]->type, type) == 0) return R.defs[i];
  return NULL;
}

int lpvm_task_type_register(const lpvm_task_def *def) {
  if (!def || !def->type || !*def->type) return LPVM_EINVAL;
  int rc = 0;
  pthread_mutex_lock(&R.mu);
  if (find_locked(def->type)) rc = LPVM_EEXIST;
  else if (R.n == R.cap) rc = grow((void **)&R.defs, &R.cap, sizeof *R.defs);
  if (rc == 0) R.defs[R.n++] = def;
  pthread_mutex_unlock(&R.mu);
  return rc;
}

const lpvm_task_def *ltask_find(const char *type) {
  pthread_mutex_lock(&R.mu);
  const lpvm_task_def *d = find_locked(type);
  pthread_mutex_unlock(&R.mu);
  return d;
}

typedef struct loading {
  lpvm_task_registry reg;
  int added;
} loading;

static int reg_add(lpvm_task_registry *reg, const lpvm_task_def *def) {
  int rc = lpvm_task_type_register(def);
  if (rc == 0) ((loading *)reg)->added++;
  return rc;
}

static int load_locked(const char *path, char *err, size_t errsz);

/* Returns the number of types the library registered, or -1 with err set. */
int ltask_load(const char *path, char *err, size_t errsz) {
  /* glibc's dlopen copies the name onto the caller's stack while it searches the
  ** library path: a name of megabytes overflows a worker's stack. No file name is
  ** longer than PATH_MAX anyway. */
  size_t len = strlen(path);
  if (len >= PATH_MAX) {
    snprintf(err, errsz, "file name too long (%zu bytes; PATH_MAX is %d)", len, PATH_MAX);
    return -1;
  }
  ldl_lock();   /* ldl.c: every dlopen/dlclose of the VM under one lock */
  int rc = load_locked(path, err, errsz);
  ldl_unlock();
  return rc;
}

static int load_locked(const char *path, char *err, size_t errsz) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(err, errsz, "%s", dlerror());
    return -1;
  }
  lpvm_register_tasks_fn entry;
  *(void **)&entry = dlsym(h, LPVM_TASKMOD_ENTRY);
  if (!entry) {
    snprintf(err, errsz, "%s: no %s entry point", path, LPVM_TASKMOD_ENTRY);
    dlclose(h);
    return -1;
  }
  loading l = {{LPVM_TASKMOD_VERSION, reg_add, NULL}, 0};
  int rc = entry(&l.reg);
  if (rc < 0) {   /* types it added stay: their code must too */
    snprintf(err, errsz, "%s: %s refused: %s", path, LPVM_TASKMOD_ENTRY, lpvm_strerror(rc));
    if (l.added == 0) dlclose(h);
    else goto keep;
    return -1;
  }
keep:
  pthread_mutex_lock(&R.mu);
  if (R.nlibs < R.caplibs || grow((void **)&R.libs, &R.caplibs, sizeof *R.libs) == 0)
    R.libs[R.nlibs++] = h;
  pthread_mutex_unlock(&R.mu);
  return rc < 0 ? -1 : l.added;
}

void ltask_teardown(void) {
  ldl_lock();   /* lock order: ldl's, then R.mu (ltask_load registers under ldl's) */
  pthread_mutex_lock(&R.mu);
  free(R.defs);
  R.defs = NULL;
  R.n = R.cap = 0;
  for (size_t i = 0; i < R.nlibs; i++) dlclose(R.libs[i]);
  free(R.libs);
  R.libs = NULL;
  R.nlibs = R.caplibs = 0;
  pthread_mutex_unlock(&R.mu);
  ldl_unlock();
}
