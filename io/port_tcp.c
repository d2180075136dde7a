/*
** port_tcp.c -- TCP: connection ports (stream engine) and listener ports.
**
** A connect is non-blocking: the port exists at once, sends queue up, and the
** outcome arrives as {connected, Port} or {error, Port, Reason} + {closed, Port}.
** The timeout is the port's own task timer.
**
** A listener accepts only when asked ({accept, Pid}, served in order), so a
** server that stops asking stops accepting and the kernel's backlog pushes back.
** Accepting under EMFILE/ENFILE backs off on the task timer (10 ms doubling to
** 1 s) instead of spinning or dropping the connection: it stays in the backlog and
** is accepted once descriptors are free again.
*/
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "io/port_int.h"

/* ---- addresses and sockets ----------------------------------------------------------- */

static int parse_addr(const char *host, int port, struct sockaddr_storage *ss,
                      socklen_t *len) {
  if (port < 0 || port > 65535) return LPVM_EINVAL;
  if (!host) host = "127.0.0.1";
  memset(ss, 0, sizeof *ss);
  struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
  if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)port);
    *len = sizeof *a4;
    return 0;
  }
  if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons((uint16_t)port);
    *len = sizeof *a6;
    return 0;
  }
  return LPVM_EINVAL;
}

static int new_socket(int family) {
  return socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

static void nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* ---- connection ports ------------------------------------------------------------------- */

typedef struct conn_args {
  int fd;               /* accepted socket, or -1 to connect */
  const char *host;
  int port;
  uint64_t timeout_ms;
} conn_args;

static int conn_open(io_stream *s, io_open *o) {
  const conn_args *a = o->arg;
  s->one_fd = s->use_send = 1;
  if (a->fd >= 0) {
    s->in.fd = a->fd;
    return 0;
  }
  struct sockaddr_storage ss;
  socklen_t len;
  int rc = parse_addr(a->host, a->port, &ss, &len);
  if (rc) return rc;
  int fd = new_socket(ss.ss_family);
  if (fd < 0) return LPVM_ESYS;
  nodelay(fd);
  s->in.fd = fd;
  s->client = 1;
  s->connect_timeout = a->timeout_ms;
  if (connect(fd, (struct sockaddr *)&ss, len) == 0) return 0;
  if (errno == EINPROGRESS) s->connecting = 1;
  else s->connect_err = errno;  /* told as a message, as when it fails later */
  return 0;
}

static void tcp_setup(io_stream *s) {
  if (s->connect_err) io_fail(s, s->connect_err);
  else if (s->connecting && s->connect_timeout) lpvm_set_timer(&s->task, s->connect_timeout);
  else if (s->client && !s->connecting) io_notify(s, "connected");
}

void io_tcp_connect_ready(io_stream *s) {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(s->in.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err == EINPROGRESS || err == EALREADY) return;  /* not yet: arm again */
  if (err) {
    io_fail(s, err);
    return;
  }
  s->connecting = 0;
  lpvm_cancel_timer(&s->task);
  io_notify(s, "connected");
}

static void tcp_timeout(io_stream *s) {
  if (s->connecting) io_fail_atom(s, "timeout");
}

const io_kind io_tcp_kind = {.type = "tcp", .setup = tcp_setup, .timeout = tcp_timeout};

int lpvm_tcp_connect(lpvm_task *self, const char *host, int port, uint64_t timeout_ms,
                     const lpvm_port_opts *po, lpvm_id *port_id) {
  conn_args a = {-1, host, port, timeout_ms};
  io_open o = {&io_tcp_kind, self, po, conn_open, &a, 0};
  return io_stream_spawn(&o, port_id);
}

/* ---- listener ports --------------------------------------------------------------------------- */

#define BACKOFF_MIN_MS 10
#define BACKOFF_MAX_MS 1000

typedef struct io_listener {
  lpvm_task task;
  lpvm_id owner;
  int linked;                   /* to the owner at spawn (io_links_at_spawn) */
  io_fdw w;
  lpvm_port_opts po;            /* for the connections it accepts */
  lpvm_id *acc;                 /* acceptors waiting, a FIFO ring */
  size_t acc_head, acc_n, acc_cap;
  uint64_t backoff;             /* ms; 0 = not backing off */
} io_listener;

typedef struct listen_args {
  int fd;
  lpvm_id owner;
  const lpvm_port_opts *po;
  int linked;
} listen_args;

static void lsend(io_listener *l, lpvm_id to, const char *tag, lpvm_id conn,
                  const char *reason) {
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 3);
  lpvm_put_atom(&b, tag);
  lpvm_put_pid(&b, l->task.id);
  if (reason) lpvm_put_atom(&b, reason);
  else lpvm_put_pid(&b, conn);
  lpvm_msg *m = lpvm_tbuf_to_msg(&b);
  lpvm_tbuf_free(&b);
  if (m) lpvm_send_msg(&l->task, to, m);
}

static int push_acceptor(io_listener *l, lpvm_id who) {
  if (l->acc_n == l->acc_cap) {
    size_t cap = l->acc_cap ? l->acc_cap * 2 : 8;
    lpvm_id *a = malloc(cap * sizeof *a);
    if (!a) return -1;
    for (size_t i = 0; i < l->acc_n; i++) a[i] = l->acc[(l->acc_head + i) % l->acc_cap];
    free(l->acc);
    l->acc = a;
    l->acc_head = 0;
    l->acc_cap = cap;
  }
  l->acc[(l->acc_head + l->acc_n++) % l->acc_cap] = who;
  return 0;
}

static lpvm_id pop_acceptor(io_listener *l) {
  lpvm_id who = l->acc[l->acc_head];
  l->acc_head = (l->acc_head + 1) % l->acc_cap;
  l->acc_n--;
  return who;
}

static void hand_over(io_listener *l, int fd) {
  lpvm_id who = pop_acceptor(l);
  lpvm_port_opts po = l->po;
  po.owner = who;
  nodelay(fd);
  conn_args a = {fd, NULL, 0, 0};
  io_open o = {&io_tcp_kind, &l->task, &po, conn_open, &a, 0};
  lpvm_id conn;
  int rc = io_stream_spawn(&o, &conn);
  if (rc == 0) {
    lsend(l, who, "tcp_accept", conn, NULL);
  } else {
    close(fd);
    lsend(l, who, "error", 0, rc == LPVM_ELIMIT ? "system_limit" : "enomem");
  }
}

static int out_of_fds(int e) {
  return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
}

/* Accept while somebody asks. Returns LPVM_EXIT on a fatal error. */
static int try_accept(io_listener *l) {
  while (l->acc_n && !l->backoff) {
    int fd = accept4(l->w.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      hand_over(l, fd);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (io_watch(&l->w, l->task.id, IO_IN) != 0) break;
      return LPVM_WAIT;
    }
    if (out_of_fds(errno)) {
      l->backoff = BACKOFF_MIN_MS;
      lpvm_set_timer(&l->task, l->backoff);
      return LPVM_WAIT;
    }
    lpvm_set_reason_atom(&l->task, lpvm_errno_atom(errno));
    return LPVM_EXIT;
  }
  return LPVM_WAIT;
}

static int listener_timeout(lpvm_task *t) {
  io_listener *l = (io_listener *)t;
  uint64_t was = l->backoff;
  l->backoff = 0;
  int fd = l->acc_n ? accept4(l->w.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC) : -1;
  if (fd >= 0) {
    hand_over(l, fd);
  } else if (l->acc_n && out_of_fds(errno)) {
    l->backoff = was * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : was * 2;
    lpvm_set_timer(t, l->backoff);
    return LPVM_WAIT;
  }
  return try_accept(l);
}

static int atom_eq(const char *a, size_t n, const char *lit) {
  return strlen(lit) == n && memcmp(a, lit, n) == 0;
}

static int listener_exit_msg(io_listener *l, lpvm_tread *r) {
  int st = io_exit_signal(&l->task, r, l->owner);
  return st == IO_OWNER_DIED ? LPVM_EXIT : st;
}

static void listener_owner(io_listener *l, lpvm_msg *m, lpvm_id to) {
  if (lpvm_msg_from(m) != l->owner || to == l->owner || lpvm_id_is_port(to)) return;
  lpvm_unlink(&l->task, l->owner);
  io_drop_exit_from(&l->task, l->owner);
  l->owner = to;
  lpvm_link(&l->task, to);
}

static int listener_cmd(io_listener *l, lpvm_msg *m) {
  lpvm_tread r;
  uint32_t arity;
  const char *a;
  size_t n;
  lpvm_id who;
  if (io_ready_parse(m, &(int){0}, &(uint32_t){0})) {
    io_fired(&l->w);
    return LPVM_WAIT;
  }
  if (lpvm_tread_init(&r, lpvm_msg_data(m), lpvm_msg_len(m)) != 0) return LPVM_WAIT;
  if (lpvm_get_atom(&r, &a, &n) == 0) return atom_eq(a, n, "close") ? LPVM_EXIT : LPVM_WAIT;
  if (lpvm_get_tuple(&r, &arity) != 0 || lpvm_get_atom(&r, &a, &n) != 0) return LPVM_WAIT;
  if (arity == 3 && atom_eq(a, n, "EXIT")) return listener_exit_msg(l, &r);
  if (arity != 2 || lpvm_get_pid(&r, &who) != 0 || lpvm_id_is_port(who)) return LPVM_WAIT;
  if (atom_eq(a, n, "accept")) {
    if (push_acceptor(l, who) != 0) lsend(l, who, "error", 0, "enomem");
  } else if (atom_eq(a, n, "controlling_process")) {
    listener_owner(l, m, who);
  }
  return LPVM_WAIT;
}

static int listener_event(lpvm_task *t) {
  io_listener *l = (io_listener *)t;
  lpvm_msg *m;
  while ((m = lpvm_recv(t)) != NULL) {
    int st = listener_cmd(l, m);
    lpvm_msg_free(m);
    if (st == LPVM_EXIT) return st;
  }
  return try_accept(l);
}

static int listener_setup(lpvm_task *t) {
  io_listener *l = (io_listener *)t;
  if (!l->linked) lpvm_link(t, l->owner);
  return try_accept(l);
}

static void listener_terminate(lpvm_task *t, const uint8_t *reason, size_t len) {
  (void)reason;
  (void)len;
  io_listener *l = (io_listener *)t;
  io_close_fd(&l->w);
  free(l->acc);
  l->acc = NULL;
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 2);
  lpvm_put_atom(&b, "closed");
  lpvm_put_pid(&b, t->id);
  lpvm_msg *m = lpvm_tbuf_to_msg(&b);
  lpvm_tbuf_free(&b);
  if (m) lpvm_send_msg(t, l->owner, m);
}

static int listener_init(lpvm_task *t, void *arg) {
  const listen_args *a = arg;
  io_listener *l = (io_listener *)t;
  io_fdw_init(&l->w, a->fd, TAG_IN);
  l->owner = a->owner;
  l->linked = a->linked;
  if (a->po) l->po = *a->po;
  else l->po = (lpvm_port_opts)LPVM_PORT_OPTS_INIT;
  /* Trap exits from the start, not from setup: a port linked at its spawn whose
  ** owner ends normally before the port's first step would ignore that EXIT (signals
  ** are handled before setup) and outlive its owner. Not visible yet: no race. */
  lpvm_trap_exit(t, 1);
  return LPVM_SETUP;
}

static int listener_info(lpvm_task *t, lpvm_tbuf *b) {
  io_listener *l = (io_listener *)t;
  lpvm_put_atom(b, "owner"), lpvm_put_pid(b, l->owner);
  lpvm_put_atom(b, "kind"), lpvm_put_atom(b, "tcp_listen");
  lpvm_put_atom(b, "acceptors"), lpvm_put_int(b, (int64_t)l->acc_n);
  return 3;
}

static const lpvm_task_def listener_def = {
    .type = "tcp_listen",
    .prio = LPVM_PRIO_PORT,
    .flags = LPVM_TASK_PORT_TYPE,
    .size = sizeof(io_listener),
    .init = listener_init,
    .setup = listener_setup,
    .handle_event = listener_event,
    .handle_timeout = listener_timeout,
    .terminate = listener_terminate,
    .handle_info = listener_info,
};

static int listen_socket(const char *host, int port, const lpvm_tcp_listen_opts *lo,
                         int *bound) {
  struct sockaddr_storage ss;
  socklen_t len;
  int rc = parse_addr(host, port, &ss, &len);
  if (rc) return rc;
  int fd = new_socket(ss.ss_family);
  if (fd < 0) return LPVM_ESYS;
  int on = 1, v6 = lo->v6only != 0;
  if (lo->reuseaddr) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (ss.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6, sizeof v6);
  if (bind(fd, (struct sockaddr *)&ss, len) != 0 ||
      listen(fd, lo->backlog > 0 ? lo->backlog : 128) != 0 ||
      getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return LPVM_ESYS;
  }
  if (bound)
    *bound = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                           : ((struct sockaddr_in6 *)&ss)->sin6_port);
  return fd;
}

int lpvm_tcp_listen(lpvm_task *self, const char *host, int port,
                    const lpvm_tcp_listen_opts *lo, const lpvm_port_opts *po,
                    lpvm_id *listener, int *bound) {
  static const lpvm_tcp_listen_opts dflt = LPVM_TCP_LISTEN_OPTS_INIT;
  lpvm_id owner = po && po->owner ? po->owner : lpvm_self(self);
  if (!owner || lpvm_id_is_port(owner)) return LPVM_EINVAL;
  int rc = io_poller_ensure();
  if (rc) return rc;
  int fd = listen_socket(host, port, lo ? lo : &dflt, bound);
  if (fd < 0) return fd;
  listen_args a = {fd, owner, po, io_links_at_spawn(self, owner)};
  rc = io_port_spawn(self, &listener_def, &a, owner, listener);
  if (rc) close(fd);
  return rc;
}

int lpvm_tcp_accept(lpvm_task *self, lpvm_id listener, lpvm_id acceptor) {
  lpvm_id who = acceptor ? acceptor : lpvm_self(self);
  static const char *const listener_kind[] = {"tcp_listen", NULL};
  if (!who || io_kind_check(listener, listener_kind) || lpvm_id_is_port(who))
    return LPVM_EINVAL;
  return io_cmd_pid(self, listener, "accept", who);
}
