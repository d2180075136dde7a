/*
** port.c -- the stream port engine: spawn, fd and tcp connection ports.
**
** One port task owns one or two non-blocking descriptors. Its mailbox receives two
** kinds of message: readiness from the poller ({'$io', Tag, Events}) and commands
** from tasks. Each step handles them, delivers what the read buffer holds as far as
** `active` allows (pump), writes what the queue holds (flush), and arms the
** descriptors for what it still wants: IN only while the owner wants data, OUT only
** while the queue is not empty. Reading one chunk per readiness is enough: the
** registrations are one-shot and level-triggered, so re-arming with data left
** fires again at once.
**
** Writes are tried at once when a command arrives (no poller round trip); only
** EAGAIN arms OUT. The queue keeps the command messages themselves and writes from
** them with writev, so a send costs one copy (into the message) in total.
*/
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "io/port_int.h"
#include "lpvm/binary.h"

/* ---- messages to the owner ------------------------------------------------------- */

static void send_owner(io_stream *s, lpvm_tbuf *b) {
  lpvm_msg *m = lpvm_tbuf_to_msg(b);
  lpvm_tbuf_free(b);
  if (!m) return;
  if (s->owner_gone) lpvm_msg_free(m);
  else lpvm_send_msg(&s->task, s->owner, m);  /* a dead owner: its EXIT is coming */
}

static void head(lpvm_tbuf *b, uint32_t arity, const char *tag, lpvm_id port) {
  lpvm_tbuf_init(b);
  lpvm_put_tuple(b, arity);
  lpvm_put_atom(b, tag);
  lpvm_put_pid(b, port);
}

void io_notify(io_stream *s, const char *tag) {
  lpvm_tbuf b;
  head(&b, 2, tag, s->task.id);
  send_owner(s, &b);
}

void io_notify_int(io_stream *s, const char *tag, int64_t v) {
  lpvm_tbuf b;
  head(&b, 3, tag, s->task.id);
  lpvm_put_int(&b, v);
  send_owner(s, &b);
}

void io_notify_atom(io_stream *s, const char *tag, const char *atom) {
  lpvm_tbuf b;
  head(&b, 3, tag, s->task.id);
  lpvm_put_atom(&b, atom);
  send_owner(s, &b);
}

void io_send_term3(lpvm_task *self, lpvm_id to, const char *tag, lpvm_id port,
                   const void *bin, size_t len) {
  lpvm_tbuf b;
  head(&b, 3, tag, port);
  lpvm_put_binary(&b, bin, len);
  lpvm_msg *m = lpvm_tbuf_to_msg(&b);
  lpvm_tbuf_free(&b);
  if (m) lpvm_send_msg(self, to, m);
}

static void notify_data(io_stream *s, const uint8_t *p, size_t len) {
  if (!s->owner_gone) io_send_term3(&s->task, s->owner, "data", s->task.id, p, len);
}

/* ---- descriptors ------------------------------------------------------------------ */

int io_set_nonblock(int fd, int on) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0) return -1;
  int nfl = on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
  return nfl == fl ? 0 : fcntl(fd, F_SETFL, nfl);
}

void io_close_fd(io_fdw *w) {
  if (w->fd < 0) return;
  io_unwatch(w);
  close(w->fd);
  w->fd = -1;
}

static void wq_free_all(io_stream *s) {
  io_wq *w = s->wq_head;
  while (w) {
    io_wq *next = w->next;
    lpvm_msg_free(w->m);
    free(w);
    w = next;
  }
  s->wq_head = s->wq_tail = NULL;
  s->queued = 0;
  atomic_store_explicit(&s->queued_pub, 0, memory_order_relaxed);
}

void io_close_fds(io_stream *s) {
  if (s->fds_closed) return;
  if (s->kind->release) s->kind->release(s, 0);
  io_close_fd(&s->in);
  io_close_fd(&s->out);
  wq_free_all(s);
  s->fds_closed = 1;
  s->closing = 1;
}

void io_fail_atom(io_stream *s, const char *reason) {
  if (s->failed) return;
  s->failed = 1;
  io_notify_atom(s, "error", reason);
  io_close_fds(s);
}

void io_fail(io_stream *s, int err) { io_fail_atom(s, lpvm_errno_atom(err)); }

/* ---- reading: the buffer, framing and delivery -------------------------------------- */

static int wants_data(const io_stream *s) {
  return s->active != LPVM_ACTIVE_FALSE || s->recv_pending;
}

static int want_read(const io_stream *s) {
  return s->in.fd >= 0 && !s->eof && !s->closing && !s->connecting && wants_data(s) &&
         s->rlen - s->rpos < s->max_packet + 4;
}

static int rbuf_reserve(io_stream *s, size_t want) {
  if (s->rpos) {
    memmove(s->rbuf, s->rbuf + s->rpos, s->rlen - s->rpos);
    s->rlen -= s->rpos;
    s->rpos = 0;
  }
  if (s->rcap - s->rlen >= want) return 0;
  size_t cap = s->rcap ? s->rcap : IO_READ_CHUNK;
  while (cap - s->rlen < want) cap *= 2;
  uint8_t *p = realloc(s->rbuf, cap);
  if (!p) return -1;
  s->rbuf = p;
  s->rcap = cap;
  return 0;
}

static void do_read(io_stream *s) {
  if (rbuf_reserve(s, IO_READ_CHUNK) != 0) {
    io_fail(s, ENOMEM);
    return;
  }
  ssize_t n;
  do n = read(s->in.fd, s->rbuf + s->rlen, s->rcap - s->rlen);
  while (n < 0 && errno == EINTR);
  if (n > 0) s->rlen += (size_t)n;
  else if (n == 0) s->eof = 1;
  else if (errno != EAGAIN && errno != EWOULDBLOCK) io_fail(s, errno);
}

/* The next message in the buffer: 1 with *skip header bytes and *len payload
** bytes, 0 if it is not complete yet, -1 if it is longer than max_packet. */
static int next_packet(const io_stream *s, size_t *skip, size_t *len) {
  const uint8_t *p = s->rbuf + s->rpos;
  size_t avail = s->rlen - s->rpos;
  *skip = 0;
  if (avail == 0) return 0;
  if (s->packet == LPVM_PACKET_RAW) {
    size_t want = s->recv_pending ? s->recv_n : 0;
    if (avail < want) return 0;
    *len = want ? want : avail;
    return 1;
  }
  if (s->packet == LPVM_PACKET_LINE) {
    size_t lim = avail < s->max_packet ? avail : s->max_packet;
    const uint8_t *nl = memchr(p, '\n', lim);
    if (nl) *len = (size_t)(nl - p) + 1;
    else if (avail >= s->max_packet) *len = s->max_packet;  /* too long: in pieces */
    else return 0;
    return 1;
  }
  size_t h = s->packet, n = 0;
  if (avail < h) return 0;
  for (size_t i = 0; i < h; i++) n = n << 8 | p[i];
  if (n > s->max_packet) return -1;
  if (avail - h < n) return 0;
  *skip = h;
  *len = n;
  return 1;
}

static void delivered(io_stream *s) {
  if (s->recv_pending) s->recv_pending = 0;
  else if (s->active == LPVM_ACTIVE_ONCE) s->active = LPVM_ACTIVE_FALSE;
}

/* At EOF: what is left of a line or raw data is delivered, an incomplete packet
** is dropped, then {eof}. */
static void pump_eof(io_stream *s) {
  size_t left = s->rlen - s->rpos;
  if (left && s->packet != LPVM_PACKET_RAW && s->packet != LPVM_PACKET_LINE) left = 0;
  if (left) {
    notify_data(s, s->rbuf + s->rpos, left);
    s->rpos = s->rlen = 0;
    delivered(s);
    return;
  }
  s->rpos = s->rlen = 0;
  s->eof_sent = 1;
  delivered(s);
  io_notify(s, "eof");
  if (s->kind->after_eof) s->kind->after_eof(s);
}

static void pump(io_stream *s) {
  size_t skip, len;
  while (!s->failed && wants_data(s)) {
    int r = next_packet(s, &skip, &len);
    if (r < 0) {
      io_fail(s, EMSGSIZE);
      return;
    }
    if (r == 0) break;
    notify_data(s, s->rbuf + s->rpos + skip, len);
    s->rpos += skip + len;
    delivered(s);
  }
  if (s->rpos == s->rlen) s->rpos = s->rlen = 0;
  while (!s->failed && s->eof && !s->eof_sent && wants_data(s)) pump_eof(s);
}

/* ---- writing: the queue ------------------------------------------------------------------ */

static void publish_queued(io_stream *s) {
  atomic_store_explicit(&s->queued_pub, s->queued, memory_order_relaxed);
}

static void wake_waiters(io_stream *s) {
  if (!s->nwait || s->queued > s->hwm / 2) return;
  for (size_t i = 0; i < s->nwait; i++) {
    lpvm_tbuf b;
    head(&b, 2, "ready", s->task.id);
    lpvm_msg *m = lpvm_tbuf_to_msg(&b);
    lpvm_tbuf_free(&b);
    if (m) lpvm_send_msg(&s->task, s->waiters[i], m);
  }
  s->nwait = 0;
}

static void add_waiter(io_stream *s, lpvm_id who) {
  for (size_t i = 0; i < s->nwait; i++)
    if (s->waiters[i] == who) return;
  if (s->nwait == s->capwait) {
    size_t cap = s->capwait ? s->capwait * 2 : 4;
    lpvm_id *w = realloc(s->waiters, cap * sizeof *w);
    if (!w) return;  /* out of memory: that sender is not told; it may retry */
    s->waiters = w;
    s->capwait = cap;
  }
  s->waiters[s->nwait++] = who;
  wake_waiters(s);   /* drained meanwhile: answer at once */
}

static void do_shutdown(io_stream *s) {
  s->wshut = 1;
  if (s->one_fd) {
    if (s->in.fd >= 0) shutdown(s->in.fd, SHUT_WR);
  } else {
    if (s->restore_flags && s->out.fd >= 0) fcntl(s->out.fd, F_SETFL, s->out_flags);
    io_close_fd(&s->out);
  }
}

/* EPIPE on a write-only descriptor: the program closed its input (it exited, most
** likely). What is queued can never be written: drop it and shut the write side,
** but keep reading, so its output, {eof} and {exit_status} still come (as from an
** Erlang port); sends from now on are dropped as to a closed port. */
static void reader_gone(io_stream *s) {
  wq_free_all(s);
  s->wshut_req = 1;
  do_shutdown(s);
}

static int wfd(const io_stream *s) { return s->one_fd ? s->in.fd : s->out.fd; }

static int fill_iov(io_stream *s, struct iovec *iov, int max) {
  int n = 0;
  for (io_wq *w = s->wq_head; w && n < max - 1; w = w->next) {
    size_t off = w->off;
    if (off < w->hlen) {
      iov[n++] = (struct iovec){w->hdr + off, w->hlen - off};
      off = w->hlen;
    }
    if (w->len > off - w->hlen)
      iov[n++] = (struct iovec){(void *)(w->p + (off - w->hlen)), w->len - (off - w->hlen)};
  }
  return n;
}

static void advance(io_stream *s, size_t r) {
  s->queued -= r;
  while (r) {
    io_wq *w = s->wq_head;
    size_t left = w->hlen + w->len - w->off;
    if (r < left) {
      w->off += r;
      break;
    }
    r -= left;
    s->wq_head = w->next;
    if (!s->wq_head) s->wq_tail = NULL;
    lpvm_msg_free(w->m);
    free(w);
  }
  publish_queued(s);
}

static void flush(io_stream *s) {
  while (s->wq_head && !s->failed && !s->connecting) {
    struct iovec iov[64];
    int n = fill_iov(s, iov, 64);
    ssize_t r;
    if (s->use_send) {
      struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
      r = sendmsg(wfd(s), &mh, MSG_NOSIGNAL);
    } else {
      r = writev(wfd(s), iov, n);
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EPIPE && !s->one_fd) {
        reader_gone(s);
        break;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK) io_fail(s, errno);
      return;
    }
    advance(s, (size_t)r);
  }
  if (!s->wq_head && s->wshut_req && !s->wshut && !s->fds_closed) do_shutdown(s);
  wake_waiters(s);
}

/* Queue the binary of a {command, Binary} message m (kept until written). */
static void enqueue(io_stream *s, lpvm_msg *m, const uint8_t *p, size_t len) {
  if (s->closing || s->wshut_req || wfd(s) < 0) {
    lpvm_msg_free(m);  /* nowhere to write: as a write to a closed port */
    return;
  }
  io_wq *w = calloc(1, sizeof *w);
  if (!w) {
    lpvm_msg_free(m);
    io_fail(s, ENOMEM);
    return;
  }
  if (s->packet >= 1 && s->packet <= 4) {
    if (s->packet < 4 && len >> (8 * s->packet)) {
      free(w);
      lpvm_msg_free(m);
      io_fail(s, EMSGSIZE);
      return;
    }
    w->hlen = (uint8_t)s->packet;
    for (int i = 0; i < s->packet; i++) w->hdr[i] = (uint8_t)(len >> (8 * (s->packet - 1 - i)));
  }
  w->m = m;
  w->p = p;
  w->len = len;
  if (s->wq_tail) s->wq_tail->next = w;
  else s->wq_head = w;
  s->wq_tail = w;
  s->queued += w->hlen + len;
  publish_queued(s);
  if (w == s->wq_head) flush(s);  /* an empty queue: write now */
}

/* ---- arming ----------------------------------------------------------------------------- */

static void arm(io_stream *s) {
  if (s->fds_closed) return;
  uint32_t rd = want_read(s) ? IO_IN : 0;
  uint32_t wr = (s->wq_head || s->connecting) ? IO_OUT : 0;
  int rc;
  if (s->one_fd) {
    rc = io_watch(&s->in, s->task.id, rd | wr);
  } else {
    rc = io_watch(&s->in, s->task.id, rd);
    if (rc == 0) rc = io_watch(&s->out, s->task.id, wr);
  }
  if (rc) io_fail(s, rc == LPVM_ESYS ? errno : ENOMEM);
}

/* ---- commands ------------------------------------------------------------------------------ */

static int atom_is(const char *a, size_t n, const char *lit) {
  return strlen(lit) == n && memcmp(a, lit, n) == 0;
}

static void set_active(io_stream *s, lpvm_tread *r) {
  const char *a;
  size_t n;
  if (lpvm_get_atom(r, &a, &n) != 0) return;
  if (atom_is(a, n, "true")) s->active = LPVM_ACTIVE_TRUE;
  else if (atom_is(a, n, "false")) s->active = LPVM_ACTIVE_FALSE;
  else if (atom_is(a, n, "once")) s->active = LPVM_ACTIVE_ONCE;
}

static void set_packet(io_stream *s, lpvm_tread *r) {
  int64_t v;
  const char *a;
  size_t n;
  if (lpvm_get_int(r, &v) == 0) {
    if (v == 0 || v == 1 || v == 2 || v == 4) s->packet = (uint8_t)v;
  } else if (lpvm_get_atom(r, &a, &n) == 0) {
    if (atom_is(a, n, "raw")) s->packet = LPVM_PACKET_RAW;
    else if (atom_is(a, n, "line")) s->packet = LPVM_PACKET_LINE;
  }
}

static void set_owner(io_stream *s, lpvm_msg *m, lpvm_tread *r) {
  lpvm_id to;
  if (lpvm_get_pid(r, &to) != 0 || lpvm_id_is_port(to)) return;
  if (lpvm_msg_from(m) != s->owner) {
    if (lpvm_msg_from(m))
      io_send_term3(&s->task, lpvm_msg_from(m), "error", s->task.id, "not_owner", 9);
    return;
  }
  if (to == s->owner) return;
  lpvm_unlink(&s->task, s->owner);
  io_drop_exit_from(&s->task, s->owner);
  s->owner = to;
  lpvm_link(&s->task, to);  /* a dead new owner answers noproc: the port closes */
}

/* Offer data to a reader who just asked: what is buffered first, then one read. */
static void read_now(io_stream *s) {
  pump(s);
  if (want_read(s)) {
    do_read(s);
    pump(s);
  }
}

/* {Tag, Arg}. Returns 1 if m was kept (queued for writing). */
static int on_tuple2(io_stream *s, lpvm_msg *m, lpvm_tread *r) {
  const char *a;
  size_t n;
  if (lpvm_get_atom(r, &a, &n) != 0) return 0;
  if (atom_is(a, n, "command")) {
    const uint8_t *p;
    size_t len;
    uint32_t nb;
    const lpvm_binref *bins = lpvm_msg_bins(m, &nb);
    /* a shared binary is written from its own bytes: m keeps the reference until
    ** they are written */
    if (lpvm_get_bytes(r, bins, nb, &p, &len) != 0) return 0;
    enqueue(s, m, p, len);
    return 1;
  }
  if (atom_is(a, n, "recv")) {
    int64_t v;
    if (lpvm_get_int(r, &v) != 0 || v < 0) return 0;
    lpvm_id from = lpvm_msg_from(m);
    if (from && from != s->owner) {   /* the answer would go to the owner: the asker */
      lpvm_tbuf b;                    /* waited for ever; it hears {error, Port, not_owner} */
      head(&b, 3, "error", s->task.id);
      lpvm_put_atom(&b, "not_owner");
      lpvm_msg *e = lpvm_tbuf_to_msg(&b);
      lpvm_tbuf_free(&b);
      if (e) lpvm_send_msg(&s->task, from, e);
      return 0;
    }
    if ((size_t)v > s->max_packet || (v && s->packet != LPVM_PACKET_RAW)) {
      io_notify_atom(s, "error", "einval");
      return 0;
    }
    s->recv_pending = 1;
    s->recv_n = (size_t)v;
    read_now(s);
    /* Nothing more can come (the end was delivered, or the port has no input side,
    ** fd_port(nil, fd)): {eof} again at once. The request waited for ever. */
    if (s->recv_pending && (s->eof_sent || s->in.fd < 0) && !s->fds_closed) {
      s->recv_pending = 0;
      io_notify(s, "eof");
    }
  } else if (atom_is(a, n, "active")) {
    set_active(s, r);
    read_now(s);
  } else if (atom_is(a, n, "packet")) {
    set_packet(s, r);
  } else if (atom_is(a, n, "controlling_process")) {
    set_owner(s, m, r);
  }
  return 0;
}

/* The rest of {'EXIT', From, Reason} after its 'EXIT': IO_OWNER_DIED if From is
** the owner; otherwise LPVM_EXIT with t's reason set if Reason is abnormal (a
** linked task died), else LPVM_WAIT. */
int io_exit_signal(lpvm_task *t, lpvm_tread *r, lpvm_id owner) {
  lpvm_id from;
  if (lpvm_get_pid(r, &from) != 0) return LPVM_WAIT;
  if (from == owner) return IO_OWNER_DIED;
  size_t len = (size_t)(r->end - r->p);  /* the reason, without a version byte */
  uint8_t *full = malloc(len + 1);
  if (!full) return LPVM_WAIT;
  full[0] = 131;
  memcpy(full + 1, r->p, len);
  int normal = lpvm_term_is_atom(full, len + 1, "normal");
  if (!normal) lpvm_set_reason(t, full, len + 1);
  free(full);
  return normal ? LPVM_WAIT : LPVM_EXIT;
}

/* A former owner's EXIT may have come before the port took the hand-over (it sent
** controlling_process, then died): trapped, it waits behind the hand-over as a
** message, and acting on it would end the port with the old owner's reason and take
** the new owner along. Once unlinked, the old link has no effect: the EXITs that come
** later the unlink drops (tasks/links.c), this drops the one already queued. */
void io_drop_exit_from(lpvm_task *t, lpvm_id from) {
  lpvm_msg *prev = NULL, *m;
  while ((m = lpvm_mbox_next(t, prev)) != NULL) {
    lpvm_tread r;
    uint32_t arity;
    const char *a;
    size_t n;
    lpvm_id id;
    if (lpvm_tread_init(&r, lpvm_msg_data(m), lpvm_msg_len(m)) == 0 &&
        lpvm_get_tuple(&r, &arity) == 0 && arity == 3 && lpvm_get_atom(&r, &a, &n) == 0 &&
        atom_is(a, n, "EXIT") && lpvm_get_pid(&r, &id) == 0 && id == from) {
      lpvm_mbox_take(t, m);
      lpvm_msg_free(m);
      return;   /* one death, one EXIT */
    }
    prev = m;
  }
}

static int on_exit_msg(io_stream *s, lpvm_tread *r) {
  int st = io_exit_signal(&s->task, r, s->owner);
  if (st != IO_OWNER_DIED) return st;
  s->owner_gone = 1;
  io_close_fds(s);
  return LPVM_WAIT;
}

/* One command message. Returns LPVM_EXIT to die now, else LPVM_WAIT; *kept
** tells whether m now belongs to the write queue. */
static int on_command(io_stream *s, lpvm_msg *m, int *kept) {
  lpvm_tread r;
  uint32_t arity;
  const char *a;
  size_t n;
  *kept = 0;
  if (lpvm_tread_init(&r, lpvm_msg_data(m), lpvm_msg_len(m)) != 0) return LPVM_WAIT;
  if (lpvm_get_atom(&r, &a, &n) == 0) {
    if (atom_is(a, n, "close")) s->closing = 1;
    else if (atom_is(a, n, "close_now")) io_close_fds(s);   /* the queue dropped */
    else if (atom_is(a, n, "shutdown")) {
      s->wshut_req = 1;
      flush(s);
    } else if (atom_is(a, n, "ready_req") && lpvm_msg_from(m)) {
      add_waiter(s, lpvm_msg_from(m));
    } else if (atom_is(a, n, "recv_cancel") && lpvm_msg_from(m) == s->owner) {
      /* A recv whose asker stopped waiting (its timeout): withdrawn, and the owner
      ** hears {recv_cancelled, Port}, unless its answer has gone already (then that
      ** answer is the asker's, and nothing more comes). Either way exactly one
      ** message answers the request, so a later recv asks afresh, for its own n. */
      if (s->recv_pending) {
        s->recv_pending = 0;
        io_notify(s, "recv_cancelled");
      }
    }
    return LPVM_WAIT;
  }
  if (lpvm_get_tuple(&r, &arity) != 0) return LPVM_WAIT;
  if (arity == 2) {
    *kept = on_tuple2(s, m, &r);
    return LPVM_WAIT;
  }
  if (arity == 3 && lpvm_get_atom(&r, &a, &n) == 0 && atom_is(a, n, "EXIT"))
    return on_exit_msg(s, &r);
  return LPVM_WAIT;
}

static void on_ready(io_stream *s, int tag, uint32_t ev) {
  if (s->fds_closed && tag != TAG_PID && tag != TAG_ERR) return;
  if (tag == TAG_IN) {
    io_fired(&s->in);
    if (s->connecting) {
      io_tcp_connect_ready(s);
      return;
    }
    if (want_read(s)) do_read(s);
    if (s->one_fd && s->wq_head) flush(s);
  } else if (tag == TAG_OUT) {
    io_fired(&s->out);
    flush(s);
  } else if (s->kind->extra_ready) {
    s->kind->extra_ready(s, tag, ev);
  }
}

/* ---- the task ----------------------------------------------------------------------------- */

/* What every step ends with: deliver, close when asked and flushed, re-arm. */
static int finish_step(io_stream *s) {
  pump(s);
  if (s->closing && !s->fds_closed && (!s->wq_head || s->connecting)) io_close_fds(s);
  if (s->fds_closed) return (!s->kind->done || s->kind->done(s)) ? LPVM_EXIT : LPVM_WAIT;
  arm(s);
  return s->fds_closed && (!s->kind->done || s->kind->done(s)) ? LPVM_EXIT : LPVM_WAIT;
}

static int stream_event(lpvm_task *t) {
  io_stream *s = (io_stream *)t;
  lpvm_msg *m;
  while ((m = lpvm_recv(t)) != NULL) {
    int tag, kept = 0, st = LPVM_WAIT;
    uint32_t ev;
    if (io_ready_parse(m, &tag, &ev)) on_ready(s, tag, ev);
    else st = on_command(s, m, &kept);
    if (!kept) lpvm_msg_free(m);
    if (st == LPVM_EXIT) return st;
  }
  return finish_step(s);
}

static int stream_timeout(lpvm_task *t) {
  io_stream *s = (io_stream *)t;
  if (s->kind->timeout) s->kind->timeout(s);
  return finish_step(s);
}

static int stream_setup(lpvm_task *t) {
  io_stream *s = (io_stream *)t;
  if (!s->linked) lpvm_link(t, s->owner);  /* a dead owner answers noproc: it closes */
  if (s->kind->setup) s->kind->setup(s);
  return finish_step(s);
}

static void stream_terminate(lpvm_task *t, const uint8_t *reason, size_t len) {
  (void)reason;
  (void)len;
  io_stream *s = (io_stream *)t;
  io_close_fds(s);
  if (s->kind->release) s->kind->release(s, 1);
  free(s->rbuf);
  free(s->waiters);
  s->rbuf = NULL;
  s->waiters = NULL;
  /* whoever reads "closed" and sends again gets ENOPROC, not a command dropped by a
  ** port that is still in the table until it has finished dying */
  atomic_store_explicit(&s->gone, 1, memory_order_release);
  io_notify(s, "closed");
}

static int stream_info(lpvm_task *t, lpvm_tbuf *b) {
  io_stream *s = (io_stream *)t;
  lpvm_put_atom(b, "owner"), lpvm_put_pid(b, s->owner);
  lpvm_put_atom(b, "kind"), lpvm_put_atom(b, s->kind->type);
  lpvm_put_atom(b, "queued"), lpvm_put_int(b, (int64_t)s->queued);
  lpvm_put_atom(b, "active"), lpvm_put_int(b, s->active);
  lpvm_put_atom(b, "packet"), lpvm_put_int(b, s->packet);
  int n = 5;
  if (s->kind->info) n += s->kind->info(s, b);
  return n;
}

static int check_opts(const lpvm_port_opts *po) {
  if (po->active < LPVM_ACTIVE_FALSE || po->active > LPVM_ACTIVE_ONCE) return LPVM_EINVAL;
  switch (po->packet) {
    case 0: case 1: case 2: case 4: case LPVM_PACKET_LINE: return 0;
    default: return LPVM_EINVAL;
  }
}

static int stream_init(lpvm_task *t, void *arg) {
  io_open *o = arg;
  io_stream *s = (io_stream *)t;
  static const lpvm_port_opts dflt = LPVM_PORT_OPTS_INIT;
  const lpvm_port_opts *po = o->po ? o->po : &dflt;
  int rc = check_opts(po);
  if (rc) return rc;
  s->kind = o->kind;
  s->owner = po->owner ? po->owner : lpvm_self(o->self);
  if (!s->owner || lpvm_id_is_port(s->owner)) return LPVM_EINVAL;
  s->linked = (uint8_t)o->linked;
  s->active = (uint8_t)po->active;
  s->packet = (uint8_t)po->packet;
  s->hwm = po->high_water ? po->high_water : IO_DEFAULT_HWM;
  s->max_packet = po->max_packet ? po->max_packet : IO_DEFAULT_MAXPACKET;
  s->status = -1;
  io_fdw_init(&s->in, -1, TAG_IN);
  io_fdw_init(&s->out, -1, TAG_OUT);
  io_fdw_init(&s->efd, -1, TAG_ERR);
  io_fdw_init(&s->xfd, -1, TAG_PID);
  if ((rc = io_poller_ensure()) != 0) return rc;
  if ((rc = o->open(s, o)) != 0) return rc;
  /* Trap exits from the start, not from setup: a port linked at its spawn whose
  ** owner ends normally before the port's first step would ignore that EXIT (signals
  ** are handled before setup) and outlive its owner. Not visible yet: no race. */
  lpvm_trap_exit(t, 1);
  return LPVM_SETUP;
}

static lpvm_task *stream_alloc(const lpvm_task_def *def, void *arg) {
  (void)def;
  (void)arg;
  return calloc(1, sizeof(io_stream));
}

const lpvm_task_def io_stream_def = {
    .type = "port",
    .prio = LPVM_PRIO_PORT,
    .flags = LPVM_TASK_PORT_TYPE,
    .allocate = stream_alloc,
    .init = stream_init,
    .setup = stream_setup,
    .handle_event = stream_event,
    .handle_timeout = stream_timeout,
    .terminate = stream_terminate,
    .handle_info = stream_info,
};

int io_port_spawn(lpvm_task *self, const lpvm_task_def *def, void *arg, lpvm_id owner,
                  lpvm_id *id) {
  int link = io_links_at_spawn(self, owner);
  return lpvm_spawn_task(link ? self : NULL, def, arg, link, id);
}

int io_stream_spawn(io_open *o, lpvm_id *id) {
  lpvm_id owner = o->po && o->po->owner ? o->po->owner : lpvm_self(o->self);
  o->linked = io_links_at_spawn(o->self, owner);
  return io_port_spawn(o->self, &io_stream_def, o, owner, id);
}

io_stream *io_stream_of(lpvm_task *t) {
  return t && t->def == &io_stream_def ? (io_stream *)t : NULL;
}
