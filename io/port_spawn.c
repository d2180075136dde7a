/*
** port_spawn.c -- a port running an OS program with its stdin and stdout on pipes.
**
** The child is started with posix_spawn (vfork-like: cheap even from a large VM,
** and it reports exec errors such as ENOENT to the caller). Its exit is watched
** through a pidfd (Linux 5.3) registered with the poller like any descriptor, so
** no thread waits for it and no SIGCHLD handler is needed; the port reaps it with
** waitpid when the pidfd is readable. The port lives until the child is reaped:
** closing the port kills the child (SIGKILL) and waits for that readiness; only a
** port killed outright (an untrappable exit, lpvm_stop) reaps on the spot.
**
** Messages come in this order: {data}..., {eof}, {exit_status}, {closed}. The exit
** status waits for the end of stdout, so the owner has all the output first.
*/
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/port_int.h"

extern char **environ;

static void close_pair(int p[2]) {
  if (p[0] >= 0) close(p[0]);
  if (p[1] >= 0) close(p[1]);
  p[0] = p[1] = -1;
}

static int make_pipes(int in[2], int out[2], int err[2], int want_err) {
  if (pipe2(in, O_CLOEXEC) != 0) return -1;
  if (pipe2(out, O_CLOEXEC) != 0) return -1;
  if (want_err && pipe2(err, O_CLOEXEC) != 0) return -1;
  return 0;
}

/* The child's descriptors 0, 1, 2 and signals: SIGPIPE ignored by the VM must not
** stay ignored in the program (a `yes | head` pipeline relies on it). */
static int spawn_child(const lpvm_spawn_port_opts *so, int in[2], int out[2],
                       int err[2], pid_t *pid) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  sigset_t def, none;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  switch (so->stderr_mode) {
    case LPVM_STDERR_TO_STDOUT: posix_spawn_file_actions_adddup2(&fa, out[1], 2); break;
    case LPVM_STDERR_PIPE: posix_spawn_file_actions_adddup2(&fa, err[1], 2); break;
    case LPVM_STDERR_NULL:
      posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
      break;
    default: break;
  }
  if (so->cwd) posix_spawn_file_actions_addchdir_np(&fa, so->cwd);
  sigemptyset(&def);
  sigaddset(&def, SIGPIPE);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&at, &def);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  char *const *env = so->env ? (char *const *)so->env : environ;
  int rc = posix_spawnp(pid, so->argv[0], &fa, &at, (char *const *)so->argv, env);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  return rc;
}

static int status_code(int st) {
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static int spawn_open(io_stream *s, io_open *o) {
  const lpvm_spawn_port_opts *so = o->arg;
  if (!so || !so->argv || !so->argv[0] || so->stderr_mode < 0 ||
      so->stderr_mode > LPVM_STDERR_NULL)
    return LPVM_EINVAL;
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  int want_err = so->stderr_mode == LPVM_STDERR_PIPE;
  int e = 0;
  pid_t pid = 0;
  if (make_pipes(in, out, err, want_err) != 0) e = errno;
  else e = spawn_child(so, in, out, err, &pid);
  int pidfd = -1;
  if (!e && (pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0) {
    e = errno;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
  }
  if (e) {
    close_pair(in), close_pair(out), close_pair(err);
    errno = e;
    return LPVM_ESYS;
  }
  close(in[0]), close(out[1]);
  if (want_err) close(err[1]);
  io_set_nonblock(in[1], 1);
  io_set_nonblock(out[0], 1);
  s->in.fd = out[0];
  s->out.fd = in[1];
  if (want_err) {
    io_set_nonblock(err[0], 1);
    s->efd.fd = err[0];
  }
  s->xfd.fd = pidfd;
  s->pid = pid;
  return 0;
}

/* Exit status after the end of stdout; then the port closes. */
static void report(io_stream *s) {
  if (s->status < 0 || s->status_sent || !s->eof_sent || s->closing) return;
  s->status_sent = 1;
  io_notify_int(s, "exit_status", s->status);
  s->closing = 1;
}

static void reap(io_stream *s, int block) {
  int st;
  pid_t r;
  do r = waitpid(s->pid, &st, block ? 0 : WNOHANG);
  while (r < 0 && errno == EINTR);
  if (r == s->pid) {
    s->status = status_code(st);
    io_close_fd(&s->xfd);
  } else if (r < 0) {  /* not ours any more (an embedder reaped it): say so */
    s->status = 255;
    io_close_fd(&s->xfd);
  }
}

static void read_stderr(io_stream *s) {
  uint8_t buf[16384];
  ssize_t n;
  do n = read(s->efd.fd, buf, sizeof buf);
  while (n < 0 && errno == EINTR);
  if (n > 0) {
    if (!s->owner_gone) io_send_term3(&s->task, s->owner, "stderr", s->task.id, buf, (size_t)n);
    io_watch(&s->efd, s->task.id, IO_IN);
  } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
    io_close_fd(&s->efd);
  } else {
    io_watch(&s->efd, s->task.id, IO_IN);
  }
}

static void spawn_ready(io_stream *s, int tag, uint32_t ev) {
  (void)ev;
  if (tag == TAG_ERR && s->efd.fd >= 0) {
    io_fired(&s->efd);
    read_stderr(s);
  } else if (tag == TAG_PID && s->xfd.fd >= 0) {
    io_fired(&s->xfd);
    reap(s, 0);
    if (s->status < 0) io_watch(&s->xfd, s->task.id, IO_IN);
    else report(s);
  }
}

static void spawn_setup(io_stream *s) {
  if (io_watch(&s->xfd, s->task.id, IO_IN) != 0) io_fail(s, errno);
  if (s->efd.fd >= 0 && io_watch(&s->efd, s->task.id, IO_IN) != 0) io_fail(s, errno);
}

/* Closing kills the program; the port waits for the pidfd to reap it, unless it
** is dying now. */
static void spawn_release(io_stream *s, int now) {
  io_close_fd(&s->efd);
  if (s->status < 0 && s->pid > 0) {
    kill(s->pid, SIGKILL);
    if (now) reap(s, 1);
    else if (io_watch(&s->xfd, s->task.id, IO_IN) != 0) reap(s, 1);
  }
  if (now) io_close_fd(&s->xfd);
}

static int spawn_done(io_stream *s) { return s->status >= 0; }

static int spawn_info(io_stream *s, lpvm_tbuf *b) {
  lpvm_put_atom(b, "os_pid");
  lpvm_put_int(b, s->pid);
  return 1;
}

const io_kind io_spawn_kind = {
    .type = "spawn",
    .setup = spawn_setup,
    .extra_ready = spawn_ready,
    .after_eof = report,
    .release = spawn_release,
    .done = spawn_done,
    .info = spawn_info,
};

int lpvm_port_spawn(lpvm_task *self, const lpvm_spawn_port_opts *so,
                    const lpvm_port_opts *po, lpvm_id *port) {
  io_open o = {&io_spawn_kind, self, po, spawn_open, so, 0};
  return io_stream_spawn(&o, port);
}
