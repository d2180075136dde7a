/*
** port_fd.c -- a port over descriptors the VM already has (stdin, stdout, ...).
**
** The descriptors are dup'ed so closing the port leaves the originals open. They
** must be non-blocking for the poller's model, and O_NONBLOCK lives in the open
** file description shared with every dup (and with a terminal's other users), so
** the port sets it and puts the original flags back when it closes. A regular
** file (epoll refuses it) is read and written as if always ready.
*/
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/port_int.h"

typedef struct fd_args {
  int in_fd, out_fd;
} fd_args;

static int is_socket(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
}

static int dup_nb(int fd, int *flags) {
  if (fd < 0) return -1;
  int d = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (d < 0) return -1;
  *flags = fcntl(d, F_GETFL);
  io_set_nonblock(d, 1);
  return d;
}

static int fd_open(io_stream *s, io_open *o) {
  const fd_args *a = o->arg;
  if (a->in_fd < 0 && a->out_fd < 0) return LPVM_EINVAL;
  /* a descriptor that is not open: the OS's answer, EBADF (errno set) */
  if ((a->in_fd >= 0 && fcntl(a->in_fd, F_GETFD) < 0) ||
      (a->out_fd >= 0 && fcntl(a->out_fd, F_GETFD) < 0))
    return LPVM_ESYS;
  if (a->in_fd == a->out_fd) {
    if ((s->in.fd = dup_nb(a->in_fd, &s->in_flags)) < 0) return LPVM_ESYS;
    s->one_fd = 1;
    s->use_send = (uint8_t)is_socket(s->in.fd);
  } else {
    s->in.fd = dup_nb(a->in_fd, &s->in_flags);
    s->out.fd = dup_nb(a->out_fd, &s->out_flags);
    if ((a->in_fd >= 0 && s->in.fd < 0) || (a->out_fd >= 0 && s->out.fd < 0)) {
      int e = errno;
      if (s->in.fd >= 0) fcntl(s->in.fd, F_SETFL, s->in_flags), close(s->in.fd);
      if (s->out.fd >= 0) fcntl(s->out.fd, F_SETFL, s->out_flags), close(s->out.fd);
      s->in.fd = s->out.fd = -1;
      errno = e;
      return LPVM_ESYS;
    }
  }
  s->restore_flags = 1;
  if (s->in.fd < 0) s->eof = s->eof_sent = 1;  /* write-only: nothing to read */
  return 0;
}

static void fd_release(io_stream *s, int now) {
  (void)now;
  if (!s->restore_flags) return;
  s->restore_flags = 0;
  if (s->in.fd >= 0) fcntl(s->in.fd, F_SETFL, s->in_flags);
  if (s->out.fd >= 0) fcntl(s->out.fd, F_SETFL, s->out_flags);
}

const io_kind io_fd_kind = {.type = "fd", .release = fd_release};

int lpvm_port_fd(lpvm_task *self, int in_fd, int out_fd, const lpvm_port_opts *po,
                 lpvm_id *port) {
  fd_args a = {in_fd, out_fd};
  io_open o = {&io_fd_kind, self, po, fd_open, &a, 0};
  return io_stream_spawn(&o, port);
}
