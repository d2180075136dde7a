/*
** lsys.c -- os.execute and io.popen for Lua processes, without system() and popen().
**
** glibc's system() sets SIGINT and SIGQUIT to "ignored" for the whole OS process
** while the command runs, so one Lua process inside os.execute made the VM deaf to
** Ctrl-C (and a signal arriving then is lost: setting "ignored" discards it). Its
** children also inherit the VM's ignored SIGPIPE. These versions start `/bin/sh -c
** command` with posix_spawn, the child's signals at their defaults and its mask
** empty, and touch no disposition of the VM.
**
** Every child started here is listed until it is reaped, so that a VM that stops
** while a process waits in os.execute (Ctrl-C, SIGTERM, lpvm.halt) does not leave it
** running as an orphan: lsys_stop_children() sends it and its descendants SIGTERM,
** then SIGKILL if they outlive a grace period; the waiting worker then returns and
** the VM can stop. The child stays in the VM's process group, so a command that
** uses the terminal (os.execute("less file")) works as under lua5.4, and Ctrl-C at
** the terminal reaches it too.
**
** Both block the worker that runs the calling process until the command ends (or,
** for io.popen, until the file is closed), as they block lua5.4: for a long-running
** program use lpvm.open_port, or run the caller on a thread (spawn{thread = true}).
*/
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vm/lproc_int.h"

extern char **environ;

/* ---- the children ------------------------------------------------------------------------ */

/* `stopping` closes the list: set by lsys_stop_children, under mu, before it signals
** the listed children, cleared by lsys_stopped once every task has ended. A command
** started by a process that was still running when the stop began (a Ctrl-C just as it
** called os.execute) is listed after the stop signalled the others, or never: the stop
** then waited for it to end on its own (a `sleep 29` held Ctrl-C for 29 s). Now
** kids_add refuses it while the list is closed, and start() kills it at once. */
static struct {
  pthread_mutex_t mu;
  pid_t *v;
  int n, cap;
  int stopping;   /* under mu */
} kids = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0};

/* 0, or ECANCELED (the VM is stopping), or ENOMEM. */
static int kids_add(pid_t pid) {
  pthread_mutex_lock(&kids.mu);
  if (kids.stopping) {
    pthread_mutex_unlock(&kids.mu);
    return ECANCELED;
  }
  if (kids.n == kids.cap) {
    int cap = kids.cap ? kids.cap * 2 : 8;
    pid_t *v = realloc(kids.v, (size_t)cap * sizeof *v);
    if (!v) {
      pthread_mutex_unlock(&kids.mu);
      return ENOMEM;
    }
    kids.v = v;
    kids.cap = cap;
  }
  kids.v[kids.n++] = pid;
  pthread_mutex_unlock(&kids.mu);
  return 0;
}

static void kids_remove(pid_t pid) {
  pthread_mutex_lock(&kids.mu);
  for (int i = 0; i < kids.n; i++)
    if (kids.v[i] == pid) {
      kids.v[i] = kids.v[--kids.n];
      break;
    }
  pthread_mutex_unlock(&kids.mu);
}

/* The processes of the system and their parents, from /proc (Linux). */
typedef struct ptable {
  pid_t *pid, *ppid;
  int n, cap;
} ptable;

static void ptable_read(ptable *t) {
  DIR *d = opendir("/proc");
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    char path[300], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "re");
    if (!f) continue;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *rp = strrchr(buf, ')');   /* the command name may hold spaces and ')' */
    int ppid;
    if (!rp || sscanf(rp + 1, " %*c %d", &ppid) != 1) continue;
    if (t->n == t->cap) {
      int cap = t->cap ? t->cap * 2 : 256;
      pid_t *a = realloc(t->pid, (size_t)cap * sizeof *a);
      if (!a) break;
      t->pid = a;
      pid_t *b = realloc(t->ppid, (size_t)cap * sizeof *b);
      if (!b) break;
      t->ppid = b;
      t->cap = cap;
    }
    t->pid[t->n] = (pid_t)atoi(e->d_name);
    t->ppid[t->n++] = (pid_t)ppid;
  }
  if (d) closedir(d);
}

/* Signal root and every descendant of it. `sh -c` does not always exec its command
** (Debian's dash forks it), and a descendant whose parent dies first would be
** reparented out of reach: so the whole tree is collected, then signalled. */
static void kill_tree(const ptable *t, pid_t root, int sig) {
  pid_t *tree = malloc(((size_t)t->n + 1) * sizeof *tree);
  if (!tree) {
    kill(root, sig);
    return;
  }
  int n = 0;
  tree[n++] = root;
  for (int i = 0; i < n; i++)   /* breadth first: each process's children join */
    for (int k = 0; k < t->n; k++)
      if (t->ppid[k] == tree[i] && t->pid[k] != root && n <= t->n) tree[n++] = t->pid[k];
  for (int i = 0; i < n; i++) kill(tree[i], sig);
  free(tree);
}

/* Signal every listed child (0: just count them) and its descendants. */
static int kids_signal(int sig) {
  ptable t = {NULL, NULL, 0, 0};
  pthread_mutex_lock(&kids.mu);
  int n = kids.n;
  if (sig != 0 && n > 0) ptable_read(&t);
  for (int i = 0; i < n && sig != 0; i++) kill_tree(&t, kids.v[i], sig);
  pthread_mutex_unlock(&kids.mu);
  free(t.pid);
  free(t.ppid);
  return n;
}

void lsys_stop_children(int grace_ms) {
  pthread_mutex_lock(&kids.mu);
  kids.stopping = 1;
  pthread_mutex_unlock(&kids.mu);
  if (kids_signal(SIGTERM) == 0) return;
  struct timespec tick = {0, 10 * 1000 * 1000};
  for (int waited = 0; waited < grace_ms; waited += 10) {
    nanosleep(&tick, NULL);
    if (kids_signal(0) == 0) return;   /* all reaped by their waiters */
  }
  kids_signal(SIGKILL);
}

void lsys_stopped(void) {
  pthread_mutex_lock(&kids.mu);
  kids.stopping = 0;
  pthread_mutex_unlock(&kids.mu);
}

/* A child that may not be listed: it and whatever it started already, at once. */
static void kill_now(pid_t pid) {
  ptable t = {NULL, NULL, 0, 0};
  ptable_read(&t);
  kill_tree(&t, pid, SIGKILL);
  free(t.pid);
  free(t.ppid);
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
}

/* ---- starting and reaping ------------------------------------------------------------------- */

/* Start `/bin/sh -c cmd` with child_fd (0 or 1; -1: none) on pipe end `fd`. */
static int start(const char *cmd, int child_fd, int fd, pid_t *pid) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  sigset_t def, none;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  if (child_fd >= 0) posix_spawn_file_actions_adddup2(&fa, fd, child_fd);
  sigemptyset(&def);
  sigaddset(&def, SIGINT);
  sigaddset(&def, SIGQUIT);
  sigaddset(&def, SIGTERM);
  sigaddset(&def, SIGPIPE);
  sigaddset(&def, SIGCHLD);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&at, &def);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  char *argv[] = {(char *)"sh", (char *)"-c", (char *)cmd, NULL};
  int rc = posix_spawn(pid, "/bin/sh", &fa, &at, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  if (rc == 0 && (rc = kids_add(*pid)) != 0) kill_now(*pid);   /* unlisted: an orphan */
  return rc;
}

static int reap(pid_t pid) {
  int st = 0;
  pid_t r;
  do r = waitpid(pid, &st, 0); while (r < 0 && errno == EINTR);
  int e = r < 0 ? errno : 0;
  kids_remove(pid);
  errno = e;   /* luaL_execresult reads errno: 0 unless the wait failed */
  return r < 0 ? -1 : st;
}

/* ---- os.execute ------------------------------------------------------------------------------ */

/* os.execute([command]) -> as lua5.4: true | nil, "exit" | "signal", code; with no
** command, whether a shell is available. */
static int os_execute(lua_State *L) {
  const char *cmd = luaL_optstring(L, 1, NULL);
  if (cmd) lmod_cstr(L, 1, 1, "command");   /* sh would run the part before a NUL */
  if (cmd == NULL) {
    lua_pushboolean(L, access("/bin/sh", X_OK) == 0);
    return 1;
  }
  fflush(NULL);   /* as system() users expect: our output before the command's */
  pid_t pid;
  int rc = start(cmd, -1, -1, &pid);
  if (rc != 0) {
    errno = rc;
    return luaL_fileresult(L, 0, NULL);
  }
  return luaL_execresult(L, reap(pid));
}

/* ---- io.popen -------------------------------------------------------------------------------- */

typedef struct pstream {
  luaL_Stream s;   /* first: the io library sees a luaL_Stream */
  pid_t pid;
} pstream;

static int popen_close(lua_State *L) {
  pstream *p = (pstream *)luaL_checkudata(L, 1, LUA_FILEHANDLE);
  fclose(p->s.f);
  return luaL_execresult(L, reap(p->pid));
}

/* io.popen(command [, "r" | "w"]) -> file | nil, message */
static int io_popen(lua_State *L) {
  const char *cmd = lmod_check_cstr(L, 1, "command");
  const char *mode = luaL_optstring(L, 2, "r");
  luaL_argcheck(L, (mode[0] == 'r' || mode[0] == 'w') && mode[1] == '\0', 2, "invalid mode");
  int reading = mode[0] == 'r';
  pstream *p = (pstream *)lua_newuserdatauv(L, sizeof *p, 0);
  p->s.closef = NULL;   /* a closed file until it is open */
  p->s.f = NULL;
  luaL_setmetatable(L, LUA_FILEHANDLE);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return luaL_fileresult(L, 0, cmd);
  fflush(NULL);
  int rc = start(cmd, reading ? 1 : 0, fds[reading ? 1 : 0], &p->pid);
  close(fds[reading ? 1 : 0]);
  if (rc != 0) {
    close(fds[reading ? 0 : 1]);
    errno = rc;
    return luaL_fileresult(L, 0, cmd);
  }
  p->s.f = fdopen(fds[reading ? 0 : 1], mode);
  if (p->s.f == NULL) {
    int e = errno;
    close(fds[reading ? 0 : 1]);
    reap(p->pid);
    errno = e;
    return luaL_fileresult(L, 0, cmd);
  }
  p->s.closef = popen_close;
  return 1;
}

/* Replace the two functions in the os and io tables (on top of the stack). */
void lsys_patch_os(lua_State *L) {
  lua_pushcfunction(L, os_execute);
  lua_setfield(L, -2, "execute");
}

void lsys_patch_io(lua_State *L) {
  lua_pushcfunction(L, io_popen);
  lua_setfield(L, -2, "popen");
}
