/*
** port_file.c -- regular files through a port on a private thread.
**
** epoll cannot watch a regular file (it is always "ready", and a read may still
** sleep on the disk), so a file port is a CANT_SCHEDULE task: it runs on its own
** thread and may block in read, write and lseek without stalling a worker. Each
** command is answered, in order, to the owner; a failed command answers
** {error, Port, Reason} and leaves the file open.
**
** The open runs in init, on the caller's worker, so it must never wait: a FIFO opened
** for reading waits for a writer, for ever. Every open is O_NONBLOCK; a regular file
** (or a directory or a block device, which never wait) is made blocking again. Any
** other descriptor (a FIFO, a character device) stays non-blocking, so no read or
** write can hold the port's thread for ever either (the port then could not take its
** owner's exit, and the VM could not stop): nothing to read answers EAGAIN (what has
** arrived, if anything has), a full pipe EAGAIN with the rest of the write unwritten.
*/
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/port_int.h"

#define FILE_MAX_READ (64u << 20)

typedef struct io_file {
  lpvm_task task;
  lpvm_id owner;
  int fd;
  int linked;           /* to the owner at spawn (io_links_at_spawn) */
} io_file;

typedef struct file_args {
  const char *path;
  int flags;
  lpvm_id owner;
  int linked;
} file_args;

static void reply(io_file *f, lpvm_tbuf *b) {
  lpvm_msg *m = lpvm_tbuf_to_msg(b);
  lpvm_tbuf_free(b);
  if (m) lpvm_send_msg(&f->task, f->owner, m);
}

static void reply_head(io_file *f, lpvm_tbuf *b, uint32_t arity, const char *tag) {
  lpvm_tbuf_init(b);
  lpvm_put_tuple(b, arity);
  lpvm_put_atom(b, tag);
  lpvm_put_pid(b, f->task.id);
  (void)f;
}

static void reply_error(io_file *f, int err) {
  lpvm_tbuf b;
  reply_head(f, &b, 3, "error");
  lpvm_put_atom(&b, lpvm_errno_atom(err));
  reply(f, &b);
}

static void do_read(io_file *f, int64_t n) {
  if (n < 0 || (uint64_t)n > FILE_MAX_READ) {
    reply_error(f, EINVAL);
    return;
  }
  uint8_t *buf = malloc(n ? (size_t)n : 1);
  if (!buf) {
    reply_error(f, ENOMEM);
    return;
  }
  size_t got = 0;
  while (got < (size_t)n) {  /* a short read before EOF is not the end */
    ssize_t r = read(f->fd, buf + got, (size_t)n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN && got > 0) break;   /* a FIFO: what has come */
    if (r < 0) {
      free(buf);
      reply_error(f, errno);
      return;
    }
    if (r == 0) break;
    got += (size_t)r;
  }
  lpvm_tbuf b;
  if (got == 0 && n > 0) {
    reply_head(f, &b, 2, "eof");
  } else {
    reply_head(f, &b, 3, "data");
    lpvm_put_binary(&b, buf, got);
  }
  free(buf);
  reply(f, &b);
}

static void do_write(io_file *f, const uint8_t *p, size_t len) {
  while (len) {
    ssize_t r = write(f->fd, p, len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      reply_error(f, errno);
      return;
    }
    p += r;
    len -= (size_t)r;
  }
  lpvm_tbuf b;
  reply_head(f, &b, 2, "ok");
  reply(f, &b);
}

static void do_seek(io_file *f, int64_t whence, int64_t off) {
  if (whence < 0 || whence > 2) {
    reply_error(f, EINVAL);
    return;
  }
  off_t pos = lseek(f->fd, (off_t)off, (int)whence);
  if (pos < 0) {
    reply_error(f, errno);
    return;
  }
  lpvm_tbuf b;
  reply_head(f, &b, 3, "position");
  lpvm_put_int(&b, (int64_t)pos);
  reply(f, &b);
}

static int atom_eq(const char *a, size_t n, const char *lit) {
  return strlen(lit) == n && memcmp(a, lit, n) == 0;
}

/* {'EXIT', From, Reason}: the owner's death closes the file. */
static int exit_msg(io_file *f, lpvm_tread *r) {
  int st = io_exit_signal(&f->task, r, f->owner);
  return st == IO_OWNER_DIED ? LPVM_EXIT : st;
}

static int file_cmd(io_file *f, lpvm_msg *m) {
  lpvm_tread r;
  uint32_t arity;
  const char *a;
  size_t n;
  int64_t x, y;
  if (lpvm_tread_init(&r, lpvm_msg_data(m), lpvm_msg_len(m)) != 0) return LPVM_WAIT;
  if (lpvm_get_atom(&r, &a, &n) == 0) return atom_eq(a, n, "close") ? LPVM_EXIT : LPVM_WAIT;
  if (lpvm_get_tuple(&r, &arity) != 0 || lpvm_get_atom(&r, &a, &n) != 0) return LPVM_WAIT;
  if (arity == 3 && atom_eq(a, n, "EXIT")) return exit_msg(f, &r);
  lpvm_id from = lpvm_msg_from(m);
  if (from && from != f->owner) {   /* the answer would go to the owner: the asker */
    lpvm_tbuf b;                    /* waited for ever; it hears {error, Port, not_owner} */
    reply_head(f, &b, 3, "error");
    lpvm_put_atom(&b, "not_owner");
    lpvm_msg *e = lpvm_tbuf_to_msg(&b);
    lpvm_tbuf_free(&b);
    if (e) lpvm_send_msg(&f->task, from, e);
    return LPVM_WAIT;
  }
  if (arity == 2 && atom_eq(a, n, "read") && lpvm_get_int(&r, &x) == 0) {
    do_read(f, x);
  } else if (arity == 2 && atom_eq(a, n, "write")) {
    const uint8_t *p;
    if (lpvm_get_binary(&r, &p, &n) == 0) do_write(f, p, n);
  } else if (arity == 3 && atom_eq(a, n, "seek") && lpvm_get_int(&r, &x) == 0 &&
             lpvm_get_int(&r, &y) == 0) {
    do_seek(f, x, y);
  }
  return LPVM_WAIT;
}

static int file_event(lpvm_task *t) {
  lpvm_msg *m;
  while ((m = lpvm_recv(t)) != NULL) {
    int st = file_cmd((io_file *)t, m);
    lpvm_msg_free(m);
    if (st == LPVM_EXIT) return st;
  }
  return LPVM_WAIT;
}

static int file_setup(lpvm_task *t) {
  if (!((io_file *)t)->linked) lpvm_link(t, ((io_file *)t)->owner);
  return LPVM_WAIT;
}

static void file_terminate(lpvm_task *t, const uint8_t *reason, size_t len) {
  (void)reason;
  (void)len;
  io_file *f = (io_file *)t;
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
  lpvm_tbuf b;
  reply_head(f, &b, 2, "closed");
  reply(f, &b);
}

static int file_init(lpvm_task *t, void *arg) {
  const file_args *a = arg;
  io_file *f = (io_file *)t;
  f->owner = a->owner;
  f->linked = a->linked;
  f->fd = open(a->path, a->flags | O_CLOEXEC | O_NONBLOCK, 0666);
  if (f->fd < 0) return LPVM_ESYS;
  struct stat st;
  if (fstat(f->fd, &st) == 0 &&
      (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || S_ISBLK(st.st_mode))) {
    int fl = fcntl(f->fd, F_GETFL);
    if (fl >= 0) (void)fcntl(f->fd, F_SETFL, fl & ~O_NONBLOCK);
  }
  /* Trap exits from the start, not from setup: a port linked at its spawn whose
  ** owner ends normally before the port's first step would ignore that EXIT (signals
  ** are handled before setup) and outlive its owner. Not visible yet: no race. */
  lpvm_trap_exit(t, 1);
  return LPVM_SETUP;
}

static const lpvm_task_def file_def = {
    .type = "file",
    .prio = LPVM_PRIO_PORT,
    .flags = LPVM_TASK_PORT_TYPE | LPVM_TASK_CANT_SCHEDULE,
    .size = sizeof(io_file),
    .init = file_init,
    .setup = file_setup,
    .handle_event = file_event,
    .terminate = file_terminate,
};

static int mode_flags(const char *mode) {
  if (!mode || !*mode) return -1;
  int plus = strchr(mode, '+') != NULL;
  switch (mode[0]) {
    case 'r': return plus ? O_RDWR : O_RDONLY;
    case 'w': return (plus ? O_RDWR : O_WRONLY) | O_CREAT | O_TRUNC;
    case 'a': return (plus ? O_RDWR : O_WRONLY) | O_CREAT | O_APPEND;
    default: return -1;
  }
}

int lpvm_file_open(lpvm_task *self, const char *path, const char *mode, lpvm_id owner,
                   lpvm_id *port) {
  file_args a = {path, mode_flags(mode), owner ? owner : lpvm_self(self), 0};
  if (!path || a.flags < 0 || !a.owner || lpvm_id_is_port(a.owner)) return LPVM_EINVAL;
  a.linked = io_links_at_spawn(self, a.owner);
  return io_port_spawn(self, &file_def, &a, a.owner, port);
}

static const char *const file_kind[] = {"file", NULL};

int lpvm_file_read(lpvm_task *self, lpvm_id port, size_t n) {
  if (io_kind_check(port, file_kind) || n > FILE_MAX_READ) return LPVM_EINVAL;
  return io_cmd_int(self, port, "read", (int64_t)n);
}

int lpvm_file_write(lpvm_task *self, lpvm_id port, const void *data, size_t len) {
  if (io_kind_check(port, file_kind) || (!data && len)) return LPVM_EINVAL;
  return io_cmd_bin(self, port, "write", data, len);
}

int lpvm_file_seek(lpvm_task *self, lpvm_id port, int64_t offset, int whence) {
  if (io_kind_check(port, file_kind) || whence < 0 || whence > 2) return LPVM_EINVAL;
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 3);
  lpvm_put_atom(&b, "seek");
  lpvm_put_int(&b, whence);
  lpvm_put_int(&b, offset);
  lpvm_msg *m = lpvm_tbuf_to_msg(&b);
  lpvm_tbuf_free(&b);
  return m ? lpvm_send_msg(self, port, m) : LPVM_ENOMEM;
}
