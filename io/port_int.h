/*
** port_int.h -- what the io/ files share: the stream port record and its engine.
**
** spawn, fd and tcp connection ports are one engine (port.c) over one or two
** descriptors: a read side cut into messages by the `packet` option and released
** by the `active` option, and an ordered write queue. A kind (io_kind) adds its own
** descriptors (a pidfd, a stderr pipe) and what happens at the end.
*/
#ifndef LPVM_IO_PORT_INT_H
#define LPVM_IO_PORT_INT_H

#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>

#include "io/poller.h"
#include "lpvm/port.h"
#include "lpvm/term.h"

#define IO_DEFAULT_HWM       (1u << 20)
#define IO_DEFAULT_MAXPACKET (16u << 20)
#define IO_READ_CHUNK        65536

/* Tags of the descriptors of a port (see poller.h). */
enum { TAG_IN = 0, TAG_OUT = 1, TAG_ERR = 2, TAG_PID = 3 };

typedef struct io_stream io_stream;

typedef struct io_kind {
  const char *type;
  /* the port is visible: watch the kind's own descriptors, start timers */
  void (*setup)(io_stream *s);
  /* the port's timer fired (tcp: connect timeout) */
  void (*timeout)(io_stream *s);
  /* readiness of a kind's own descriptor (TAG_ERR, TAG_PID) */
  void (*extra_ready)(io_stream *s, int tag, uint32_t ev);
  /* {eof} was delivered */
  void (*after_eof)(io_stream *s);
  /* the stream's descriptors are closed: release the rest. now = the port is
  ** dying and may not wait (kill and reap a child at once). */
  void (*release)(io_stream *s, int now);
  /* after release(s, 0): may the port exit? NULL = yes */
  int (*done)(io_stream *s);
  /* extra `key, value` info pairs */
  int (*info)(io_stream *s, lpvm_tbuf *map);
} io_kind;

/* A queued write: the command message itself holds the bytes (no copy). */
typedef struct io_wq {
  struct io_wq *next;
  lpvm_msg *m;
  const uint8_t *p;
  size_t len, off;        /* off counts the header first, then the payload */
  uint8_t hdr[4], hlen;
} io_wq;

struct io_stream {
  lpvm_task task;               /* first: the runtime's record */
  const io_kind *kind;
  lpvm_id owner;
  io_fdw in, out;               /* one_fd: `in` serves both ways, out.fd = -1 */
  uint8_t one_fd, use_send;     /* a socket: one descriptor, send(MSG_NOSIGNAL) */
  uint8_t active, packet;
  uint8_t recv_pending, eof, eof_sent, connecting;
  uint8_t wshut_req, wshut, closing, fds_closed, owner_gone, failed;
  size_t recv_n;
  size_t max_packet;
  uint8_t *rbuf;                /* read buffer: [rpos, rlen) not delivered yet */
  size_t rpos, rlen, rcap;
  io_wq *wq_head, *wq_tail;
  size_t queued;                /* bytes in the write queue */
  _Atomic size_t queued_pub;    /* the same, for senders checking LPVM_EBUSY */
  _Atomic uint8_t gone;         /* set by terminate (the port's own step) before it says
                                ** "closed"; read by senders: ENOPROC from then on */
  size_t hwm;
  lpvm_id *waiters;             /* senders refused with LPVM_EBUSY */
  size_t nwait, capwait;
  /* kinds' own state */
  pid_t pid;
  int status;                   /* exit status, -1 until reaped */
  uint8_t status_sent, restore_flags;
  int in_flags, out_flags;      /* fd ports: original file status flags */
  io_fdw xfd, efd;              /* spawn: pidfd, stderr pipe */
  int connect_err;              /* tcp: connect failed before setup */
  uint8_t client;               /* tcp: made by connect (say {connected}) */
  uint8_t linked;               /* linked to its owner at spawn (io_links_at_spawn) */
  uint64_t connect_timeout;
};

/* port.c: the stream engine. A kind opens its descriptors in `open`, called from
** the port's init (in the caller's thread, so errors return at once); `open` must
** undo its own work when it fails. */
typedef struct io_open {
  const io_kind *kind;
  lpvm_task *self;
  const lpvm_port_opts *po;
  int (*open)(io_stream *s, struct io_open *o);
  const void *arg;            /* the kind's own arguments */
  int linked;                 /* io_stream_spawn: linked to the owner at spawn */
} io_open;
int io_stream_spawn(io_open *o, lpvm_id *id);
/* Every port links to its owner. A port its owner opens itself is linked at spawn
** (lpvm_spawn_task's link: both sides before the port is visible), so the owner's
** unlink (port_close's kill after the linger time) always finds the link and no
** exit signal of the kill can reach it; a port opened for another owner links in
** its setup (asynchronously). io_links_at_spawn says which; io_port_spawn spawns. */
static inline int io_links_at_spawn(const lpvm_task *self, lpvm_id owner) {
  return self && owner == lpvm_self(self);
}
int io_port_spawn(lpvm_task *self, const lpvm_task_def *def, void *arg, lpvm_id owner,
                  lpvm_id *id);
/* 0 if `port` is one of `kinds` (lpvm_port_kind names, NULL-ended) or has ended (a
** command to it is answered by nobody, as to any ended port); LPVM_EINVAL if it is
** another kind or not a port. */
int io_kind_check(lpvm_id port, const char *const kinds[]);
/* The stream port behind a pinned task, or NULL if it is not one. */
io_stream *io_stream_of(lpvm_task *t);
/* Send {Tag, Port} / {Tag, Port, Int} / {Tag, Port, Atom} to the owner. */
void io_notify(io_stream *s, const char *tag);
void io_notify_int(io_stream *s, const char *tag, int64_t v);
void io_notify_atom(io_stream *s, const char *tag, const char *atom);
/* Deliver {error, Port, Reason} and close at once. */
void io_fail(io_stream *s, int err);
void io_fail_atom(io_stream *s, const char *reason);
/* Close the stream's descriptors now (what is queued is dropped). */
void io_close_fds(io_stream *s);
void io_send_term3(lpvm_task *self, lpvm_id to, const char *tag, lpvm_id port,
                   const void *bin, size_t len);

/* helpers shared by the kinds */
#define IO_OWNER_DIED (-100)
int io_exit_signal(lpvm_task *t, lpvm_tread *r, lpvm_id owner);
/* After unlinking a former owner (controlling_process): drop its {'EXIT', From, _}
** already queued as a message. */
void io_drop_exit_from(lpvm_task *t, lpvm_id from);
int io_set_nonblock(int fd, int on);
void io_close_fd(io_fdw *w);
/* Build and send a command {Tag, Arg...} with the right shape (port.c). */
int io_cmd_atom(lpvm_task *self, lpvm_id port, const char *atom);
int io_cmd_int(lpvm_task *self, lpvm_id port, const char *tag, int64_t v);
int io_cmd_pid(lpvm_task *self, lpvm_id port, const char *tag, lpvm_id id);
int io_cmd_bin(lpvm_task *self, lpvm_id port, const char *tag, const void *p, size_t len);

/* port_tcp.c: a connecting socket became ready */
void io_tcp_connect_ready(io_stream *s);

/* port_spawn.c, port_fd.c, port_tcp.c */
extern const io_kind io_spawn_kind, io_fd_kind, io_tcp_kind;

#endif
