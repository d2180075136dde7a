/*
** dist_conn.c -- one connection to another node: a task on the poller.
**
** States (the handshake of version 6, then framed packets):
**
**   initiator: LOOKUP -> CONNECTING -> STATUS -> CHALLENGE -> ACK -> UP
**   acceptor:  NAME -> REPLY -> UP
**   simultaneous connect: STATUS ("nok") -> NOK, then REPLY on the peer's socket
**
** LOOKUP asks the peer host's EPMD for the port (dist_epmd.c, bounded), then the
** connect is non-blocking. Every handshake state has HS_TIMEOUT_MS; UP has ticks:
** an empty packet goes out when nothing was sent for a tick interval, and the peer
** is declared gone when nothing came in for four (erl's net_ticktime rule).
**
** The mailbox holds readiness from the poller, SIG_DIST signals (local signals for
** remote ids, wrapped by dist.c's router: kind, target, data) and a disconnect
** command. Outgoing signals wait in `held` until UP. Incoming packets are checked
** whole (a control tuple and maybe one message, both well-formed terms) before
** anything is delivered: a malformed packet closes the connection.
**
** The connection remembers every link and monitor that crosses it (dist_rel.c), so
** that when it goes, each local process linked to or monitoring a process over
** there gets exactly one EXIT or DOWN with reason noconnection.
**
** Two nodes that connect to each other at the same moment (Erlang's rule, decided in
** dist.c's dist_conn_accept): the attempt of the node with the greater name goes on;
** the other node's acceptor answers "ok_simultaneous" and the attempt it started
** takes the accepted socket over (DW_ADOPT) and ends the handshake as the acceptor,
** so that the node keeps one connection task and the signals already queued in it.
** An attempt answered "nok" waits (NOK) for that socket. Nothing queued is lost.
*/
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "io/dist_conn.h"
#include "io/port_int.h"
#include "tasks/sig.h"

#define HS_TIMEOUT_MS 10000
/* Bytes waiting for the socket above which the connection stops taking signals to
** send: they wait in its mailbox, whose length punishes their senders (lmod_send),
** until the peer reads again (the port engine's high-water mark). */
#define OUT_HWM (1u << 20)
#define READ_CHUNK 65536
/* A packet this long or longer that is not all in the read buffer yet is read
** straight into a message of its size: a message in it is delivered in place
** (dist_ctl.c), so a long message is in memory once, not in rbuf and a copy. */
#define BIG_PACKET (1u << 20)

enum { ST_LOOKUP, ST_CONNECTING, ST_STATUS, ST_CHALLENGE, ST_ACK, ST_NAME, ST_REPLY,
       ST_NOK, ST_UP };

/* DW_ADOPT's payload (after the wrap header): an accepted socket for the node's
** pending connection, with what the peer's send_name said. */
typedef struct dconn_adopt {
  int fd;
  uint32_t creation;
  uint64_t flags;
} dconn_adopt;

typedef struct dconn_arg {
  int fd;
  const char *name;
  size_t len;
} dconn_arg;

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* ---- output -------------------------------------------------------------------------- */

static int out_room(dconn *c, size_t n) {
  if (c->wpos > 0 && c->wpos == c->wlen) c->wpos = c->wlen = 0;
  if (c->wlen + n <= c->wcap) return 0;
  if (c->wpos > 0) {                      /* slide the unsent part to the front */
    memmove(c->wbuf, c->wbuf + c->wpos, c->wlen - c->wpos);
    c->wlen -= c->wpos;
    c->wpos = 0;
    if (c->wlen + n <= c->wcap) return 0;
  }
  size_t cap = c->wcap ? c->wcap : 4096;
  while (cap < c->wlen + n) cap *= 2;
  uint8_t *b = realloc(c->wbuf, cap);
  if (!b) return LPVM_ENOMEM;
  c->wbuf = b;
  c->wcap = cap;
  return 0;
}

static void out_raw(dconn *c, const void *p, size_t n) {
  if (out_room(c, n)) { c->failed = 1; return; }
  memcpy(c->wbuf + c->wlen, p, n);
  c->wlen += n;
}

/* One packet: length, 112 (pass-through: no atom cache), control, message. */
void dconn_packet(dconn *c, const lpvm_tbuf *ctl, const uint8_t *msg, size_t mlen) {
  if (ctl->err) return;
  size_t n = 1 + ctl->len + mlen;
  uint8_t hdr[5] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8),
                    (uint8_t)n, 112};
  out_raw(c, hdr, 5);
  out_raw(c, ctl->data, ctl->len);
  if (mlen) out_raw(c, msg, mlen);
  c->last_out = lpvm_now_ms();
}

/* Write what is queued; 0, or -1 when the socket failed. */
static int flush(dconn *c) {
  if (c->w.fd < 0) return 0;   /* between sockets (NOK) */
  while (c->wpos < c->wlen) {
    ssize_t w = send(c->w.fd, c->wbuf + c->wpos, c->wlen - c->wpos, MSG_NOSIGNAL);
    if (w > 0) { c->wpos += (size_t)w; continue; }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return -1;
  }
  c->wpos = c->wlen = 0;
  return 0;
}

/* ---- closing --------------------------------------------------------------------------- */

static int fail(dconn *c, const char *why) {
  if (why && !c->quiet) {
    if (c->plen) dist_log("connection to %s closed: %s", c->peer, why);
    else dist_log("incoming connection closed: %s", why);
  }
  lpvm_set_reason_atom(&c->task, c->up ? "noconnection" : "normal");
  return LPVM_EXIT;
}

/* ---- handshake --------------------------------------------------------------------------- */

static void hs_send(dconn *c, const uint8_t *m, size_t n) {
  out_raw(c, m, n);
  c->last_out = lpvm_now_ms();
}

static int missing_flags(dconn *c, uint64_t flags) {
  uint64_t miss = DF_MANDATORY & ~flags;
  if (!miss) return 0;
  dist_log("%s lacks capabilities lpvm needs (flags 0x%llx missing)", c->peer,
           (unsigned long long)miss);
  return 1;
}

static void set_peer(dconn *c, const char *name, size_t len) {
  memcpy(c->peer, name, len);
  c->peer[len] = 0;
  c->plen = len;
}

static int go_up(dconn *c) {
  c->st = ST_UP;
  c->up = 1;
  c->peer_idx = (uint32_t)node_intern(c->peer, c->plen, c->peer_creation);
  dist_conn_up(c->task.id, c->peer, c->plen, c->peer_creation);
  lpvm_set_timer(&c->task, dist_conf()->tick_ms);
  c->last_in = lpvm_now_ms();
  for (size_t i = 0; i < c->nheld; i++) {   /* what waited for the connection */
    dconn_out(c, c->held[i]);
    lpvm_msg_free(c->held[i]);
  }
  c->nheld = 0;
  return LPVM_WAIT;
}

/* The acceptor's answer to send_name: status, our challenge. */
static int accept_named(dconn *c, const char *status) {
  uint8_t out[HS_MAX];
  c->my_chal = hs_challenge();
  hs_send(c, out, hs_build_status(out, status));
  hs_send(c, out, hs_build_challenge(out, DF_OURS, c->my_chal, node_self()->creation,
                                     dist_conf()->name));
  c->st = ST_REPLY;
  return LPVM_WAIT;
}

/* The acceptor knows its peer: ask dist.c whether a connection of ours to that node
** is in its handshake already (dist_conn_accept). */
static int accept_or_hand_over(dconn *c) {
  lpvm_msg *ad = lpvm_msg_new(sizeof(dist_wrap) + sizeof(dconn_adopt));
  if (!ad) return fail(c, "out of memory");
  dist_wrap h = {DW_ADOPT, 0, 0};
  dconn_adopt a = {c->w.fd, c->peer_creation, c->peer_flags};
  memcpy(lpvm_msg_data(ad), &h, sizeof h);
  memcpy(lpvm_msg_data(ad) + sizeof h, &a, sizeof a);
  ad->kind = SIG_DIST;
  ad->from = c->task.id;
  ad->ref = 0;
  io_unwatch(&c->w);   /* before the socket may change hands; arm() adds it again */
  switch (dist_conn_accept(c->task.id, c->peer, c->plen, ad)) {
    case DACC_ADOPTED:
      c->w.fd = -1;     /* the node's own connection has it now */
      c->quiet = 1;
      return LPVM_EXIT;
    case DACC_NOK: {    /* our attempt goes on; the peer's ends */
      uint8_t out[HS_MAX];
      lpvm_msg_free(ad);
      hs_send(c, out, hs_build_status(out, "nok"));
      c->quiet = 1;
      return LPVM_EXIT;
    }
    default:
      lpvm_msg_free(ad);
      return accept_named(c, "ok");
  }
}

/* DW_ADOPT: our attempt lost the simultaneous connect; go on as the acceptor of the
** peer's socket. Already up (a peer that broke the rule): that socket is closed. */
static int adopt(dconn *c, lpvm_msg *m) {
  dconn_adopt a;
  memcpy(&a, lpvm_msg_data(m) + sizeof(dist_wrap), sizeof a);
  if (c->up || c->st == ST_REPLY) {
    close(a.fd);
    return LPVM_WAIT;
  }
  int tag = (c->w.tag + 1) & 3;     /* a readiness message of the old socket is stale */
  io_close_fd(&c->w);
  io_fdw_init(&c->w, a.fd, tag);
  c->rlen = 0;
  c->wpos = c->wlen = 0;
  c->initiator = 0;
  c->peer_flags = a.flags;
  c->peer_creation = a.creation;
  lpvm_set_timer(&c->task, HS_TIMEOUT_MS);
  return accept_named(c, "ok_simultaneous");
}

/* One handshake message (its body, without the 2-byte length). */
static int hs_step(dconn *c, const uint8_t *p, size_t n) {
  const dist_self *me = dist_conf();
  uint8_t out[HS_MAX], dg[16];
  hs_name nm;
  switch (c->st) {
    case ST_NAME: {                    /* acceptor: who is calling? */
      if (hs_parse_name(p, n, &nm)) return fail(c, "bad handshake (send_name)");
      set_peer(c, nm.name, nm.len);
      if (missing_flags(c, nm.flags)) {
        hs_send(c, out, hs_build_status(out, "not_allowed"));
        c->quiet = 1;
        return LPVM_EXIT;
      }
      c->peer_flags = nm.flags;
      c->peer_creation = nm.creation;
      return accept_or_hand_over(c);
    }
    case ST_REPLY: {                   /* acceptor: does it know the cookie? */
      uint32_t chal;
      const uint8_t *their;
      if (hs_parse_reply(p, n, &chal, &their)) return fail(c, "bad handshake (reply)");
      hs_digest(me->cookie, c->my_chal, dg);
      if (memcmp(dg, their, 16) != 0) {
        dist_log("connection attempt from node %s refused: wrong cookie", c->peer);
        c->quiet = 1;
        return LPVM_EXIT;
      }
      hs_digest(me->cookie, chal, dg);
      hs_send(c, out, hs_build_ack(out, dg));
      return go_up(c);
    }
    case ST_STATUS: {                  /* initiator: may we go on? */
      const char *st;
      size_t len;
      if (hs_parse_status(p, n, &st, &len)) return fail(c, "bad handshake (status)");
      if ((len == 2 && !memcmp(st, "ok", 2)) ||
          (len == 15 && !memcmp(st, "ok_simultaneous", 15))) {
        c->st = ST_CHALLENGE;
        return LPVM_WAIT;
      }
      if (len == 3 && !memcmp(st, "nok", 3)) {   /* the peer's attempt wins: wait */
        io_close_fd(&c->w);
        c->wpos = c->wlen = 0;
        c->st = ST_NOK;
        lpvm_set_timer(&c->task, HS_TIMEOUT_MS);
        return LPVM_WAIT;
      }
      if (len == 5 && !memcmp(st, "alive", 5)) {   /* it has a connection we lost */
        hs_send(c, out, hs_build_status(out, "true"));
        c->st = ST_CHALLENGE;
        return LPVM_WAIT;
      }
      char why[64];
      snprintf(why, sizeof why, "the peer refused us with status \"%.*s\"",
               (int)(len > 40 ? 40 : len), st);
      return fail(c, why);
    }
    case ST_CHALLENGE: {
      if (hs_parse_challenge(p, n, &nm)) return fail(c, "bad handshake (challenge)");
      if (nm.len != c->plen || memcmp(nm.name, c->peer, nm.len) != 0)
        return fail(c, "the peer answered with another node name");
      if (missing_flags(c, nm.flags)) { c->quiet = 1; return LPVM_EXIT; }
      c->peer_flags = nm.flags;
      c->peer_creation = nm.creation;
      c->my_chal = hs_challenge();
      hs_digest(me->cookie, nm.challenge, dg);
      hs_send(c, out, hs_build_reply(out, c->my_chal, dg));
      c->st = ST_ACK;
      return LPVM_WAIT;
    }
    case ST_ACK: {
      const uint8_t *their;
      if (hs_parse_ack(p, n, &their)) return fail(c, "bad handshake (ack)");
      hs_digest(me->cookie, c->my_chal, dg);
      if (memcmp(dg, their, 16) != 0)
        return fail(c, "the peer does not know our cookie (bad challenge ack)");
      return go_up(c);
    }
    default:
      return fail(c, "unexpected handshake data");
  }
}

/* ---- input ---------------------------------------------------------------------------- */

/* One whole packet; `donor`, if not NULL, is the message whose payload holds it. */
static int packet_in(dconn *c, const uint8_t *p, size_t n, lpvm_msg *donor) {
  c->donor = donor;
  int rc = n > 0 && dconn_in(c, p, n) ? fail(c, "malformed packet") : LPVM_WAIT;
  if (c->donor) lpvm_msg_free(c->donor);   /* not taken */
  c->donor = NULL;
  return rc;
}

/* A packet longer than max_message: skipped (read and dropped), the connection
** stays; erl has no such limit, so this happens only with the option set. */
static void skip_packet(dconn *c, size_t n, size_t have) {
  dist_log("a packet of %zu bytes from node %s was dropped: longer than max_message "
           "(%zu bytes)", n, c->peer, dist_conf()->max_message);
  c->skip = n - have;
}

/* Cut what was read into messages: 2-byte framed in the handshake, 4-byte once UP. */
static int consume(dconn *c) {
  size_t pos = 0;
  int rc = LPVM_WAIT;
  while (rc == LPVM_WAIT && c->w.fd >= 0) {
    size_t left = c->rlen - pos, hl = c->st == ST_UP ? 4 : 2, n;
    if (left < hl) break;
    const uint8_t *p = c->rbuf + pos;
    n = hl == 4 ? (size_t)be32(p) : (size_t)(p[0] << 8 | p[1]);
    if (hl == 2 && n > HS_MAX) { rc = fail(c, "handshake message too long"); break; }
    c->last_in = lpvm_now_ms();
    if (hl == 4 && n > dist_conf()->max_message) {
      size_t have = left - hl < n ? left - hl : n;
      skip_packet(c, n, have);
      pos += hl + have;
      continue;
    }
    if (hl == 4 && n >= BIG_PACKET && left - hl < n) {   /* the rest goes to `big` */
      if (!(c->big = lpvm_msg_new(n))) { rc = fail(c, "out of memory"); break; }
      memcpy(lpvm_msg_data(c->big), p + hl, left - hl);
      c->big_len = n;
      c->big_have = left - hl;
      pos = c->rlen;
      break;
    }
    if (left - hl < n) break;
    pos += hl + n;
    if (hl == 2) rc = hs_step(c, p + 2, n);
    else rc = packet_in(c, p + 4, n, NULL);
  }
  memmove(c->rbuf, c->rbuf + pos, c->rlen - pos);
  c->rlen -= pos;
  if (c->rcap > 4 * READ_CHUNK && c->rlen <= READ_CHUNK) {   /* after a long packet */
    uint8_t *b = realloc(c->rbuf, 2 * READ_CHUNK);
    if (b) c->rbuf = b, c->rcap = 2 * READ_CHUNK;
  }
  return rc;
}

/* Where the next bytes go: a long packet's message, the bytes of a skipped packet
** (into rbuf, then dropped), or rbuf. */
static int read_into(dconn *c, uint8_t **at, size_t *room) {
  if (c->big) {
    *at = lpvm_msg_data(c->big) + c->big_have;
    *room = c->big_len - c->big_have;
    return 0;
  }
  if (c->rcap - c->rlen < READ_CHUNK) {
    size_t cap = c->rcap ? c->rcap * 2 : 2 * READ_CHUNK;
    uint8_t *b = realloc(c->rbuf, cap);
    if (!b) return LPVM_ENOMEM;
    c->rbuf = b;
    c->rcap = cap;
  }
  *at = c->rbuf + c->rlen;
  *room = c->rcap - c->rlen;
  if (c->skip && *room > c->skip) *room = (size_t)c->skip;
  return 0;
}

/* r bytes arrived where read_into said. */
static int got(dconn *c, size_t r) {
  c->last_in = lpvm_now_ms();
  if (c->big) {
    c->big_have += r;
    if (c->big_have < c->big_len) return LPVM_WAIT;
    lpvm_msg *m = c->big;
    c->big = NULL;
    return packet_in(c, lpvm_msg_data(m), c->big_len, m);
  }
  if (c->skip) {
    c->skip -= r;
    return LPVM_WAIT;
  }
  c->rlen += r;
  return consume(c);
}

static int read_some(dconn *c) {
  uint8_t *at;
  size_t room;
  if (read_into(c, &at, &room)) return fail(c, "out of memory");
  ssize_t r = recv(c->w.fd, at, room, 0);
  if (r == 0) {
    if (!c->plen) c->quiet = 1;   /* gone before its name: a lost simultaneous attempt */
    if (c->st == ST_ACK)
      return fail(c, "closed by the peer during the handshake (wrong cookie?)");
    return fail(c, c->up ? "closed by the peer" : "closed by the peer during the handshake");
  }
  if (r < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return LPVM_WAIT;
    return fail(c, strerror(errno));
  }
  return got(c, (size_t)r);
}

/* ---- connecting ---------------------------------------------------------------------- */

static int start_connect(dconn *c) {
  char alive[NODE_NAME_MAX + 1];
  const char *at = strchr(c->peer, '@');
  size_t alen = (size_t)(at - c->peer);
  memcpy(alive, c->peer, alen);
  alive[alen] = 0;
  int port;
  int rc = epmd_port_please(at + 1, alive, &port);
  if (rc) {
    if (!c->quiet_lookup)
      dist_log("cannot reach %s: %s", c->peer,
               rc == LPVM_ENOPROC ? "not registered with its host's epmd" : lpvm_strerror(rc));
    c->quiet = 1;
    return LPVM_EXIT;
  }
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_socktype = SOCK_STREAM;
  char ps[8];
  snprintf(ps, sizeof ps, "%d", port);
  if (getaddrinfo(at + 1, ps, &hints, &res) != 0 || !res)
    return fail(c, "cannot resolve the host");
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int cr = fd < 0 ? -1 : connect(fd, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  if (fd < 0 || (cr < 0 && errno != EINPROGRESS)) {
    if (fd >= 0) close(fd);
    return fail(c, "connect failed");
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  io_fdw_init(&c->w, fd, 0);
  c->st = ST_CONNECTING;
  return LPVM_WAIT;
}

static void send_name(dconn *c) {
  uint8_t out[HS_MAX];
  hs_send(c, out, hs_build_name(out, DF_OURS, node_self()->creation, dist_conf()->name));
  c->st = ST_STATUS;
}

static int connected(dconn *c) {
  int err = 0;
  socklen_t el = sizeof err;
  if (getsockopt(c->w.fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err)
    return fail(c, err ? strerror(err) : "connect failed");
  send_name(c);
  return LPVM_WAIT;
}

/* ---- the task ---------------------------------------------------------------------------- */

static int c_init(lpvm_task *t, void *arg) {
  dconn *c = (dconn *)t;
  const dconn_arg *a = arg;
  io_fdw_init(&c->w, a->fd, 0);
  c->initiator = a->fd < 0;
  c->st = c->initiator ? ST_LOOKUP : ST_NAME;
  if (a->name) set_peer(c, a->name, a->len);
  return LPVM_SETUP;
}

static int arm(dconn *c, int rc) {
  if (rc != LPVM_WAIT || c->w.fd < 0) return rc;
  if (c->failed) return fail(c, "out of memory");
  if (flush(c) < 0) return fail(c, c->up ? "write failed" : "write failed in handshake");
  uint32_t ev = c->st == ST_CONNECTING ? IO_OUT : IO_IN;
  if (c->wpos < c->wlen) ev |= IO_OUT;
  io_watch(&c->w, c->task.id, ev);
  return LPVM_WAIT;
}

static int c_setup(lpvm_task *t) {
  dconn *c = (dconn *)t;
  io_poller_ensure();
  lpvm_set_timer(t, HS_TIMEOUT_MS);
  c->last_in = c->last_out = lpvm_now_ms();
  int rc = c->initiator ? start_connect(c) : LPVM_WAIT;
  return arm(c, rc);
}

static void hold(dconn *c, lpvm_msg *m) {
  if (c->nheld == c->cheld) {
    size_t n = c->cheld ? c->cheld * 2 : 16;
    lpvm_msg **h = realloc(c->held, n * sizeof *h);
    if (!h) { dconn_refuse(c, m); lpvm_msg_free(m); return; }
    c->held = h;
    c->cheld = n;
  }
  c->held[c->nheld++] = m;
}

/* The next message to handle: the oldest, or while the output is above OUT_HWM the
** oldest that is not a signal to send (readiness, a disconnect). */
static lpvm_msg *next_msg(dconn *c) {
  lpvm_task *t = &c->task;
  if (!c->up || c->wlen - c->wpos <= OUT_HWM) return lpvm_recv(t);
  lpvm_msg *m = lpvm_mbox_next(t, NULL);
  while (m && m->kind == SIG_DIST) m = lpvm_mbox_next(t, m);
  if (m) lpvm_mbox_take(t, m);
  return m;
}

static int c_event(lpvm_task *t) {
  dconn *c = (dconn *)t;
  lpvm_msg *m;
  int rc = LPVM_WAIT;
  while (rc == LPVM_WAIT && (m = next_msg(c)) != NULL) {
    int tag;
    uint32_t ev;
    if (m->kind == SIG_DIST && ((const dist_wrap *)lpvm_msg_data(m))->kind == DW_ADOPT) {
      rc = adopt(c, m);
      lpvm_msg_free(m);
      continue;
    }
    if (m->kind == SIG_DIST) {
      if (c->up) { dconn_out(c, m); lpvm_msg_free(m); }
      else hold(c, m);
      continue;
    }
    if (io_ready_parse(m, &tag, &ev)) {
      if (c->w.fd < 0 || tag != c->w.tag) { lpvm_msg_free(m); continue; }   /* stale */
      io_fired(&c->w);
      if (c->st == ST_CONNECTING) rc = connected(c);
      else if (ev & (IO_IN | IO_ERR)) rc = read_some(c);
      if (rc == LPVM_WAIT && (ev & IO_OUT) && flush(c) < 0) rc = fail(c, "write failed");
    } else if (lpvm_term_is_atom(lpvm_msg_data(m), lpvm_msg_len(m), "disconnect")) {
      c->quiet = 1;
      rc = fail(c, NULL);
    }
    lpvm_msg_free(m);
  }
  return arm(c, rc);
}

static int c_timeout(lpvm_task *t) {
  dconn *c = (dconn *)t;
  uint64_t now = lpvm_now_ms(), tick = dist_conf()->tick_ms;
  if (c->st == ST_NOK)
    return fail(c, "the peer answered \"nok\" (it connects to us itself) and did not");
  if (!c->up) return fail(c, "handshake timed out");
  if (now - c->last_in >= 4 * tick) return fail(c, "net tick timeout");
  if (now - c->last_out >= tick) {
    static const uint8_t zero[4];
    out_raw(c, zero, 4);
    c->last_out = now;
  }
  lpvm_set_timer(t, tick);
  return arm(c, LPVM_WAIT);
}

static void c_terminate(lpvm_task *t, const uint8_t *reason, size_t len) {
  (void)reason, (void)len;
  dconn *c = (dconn *)t;
  lpvm_msg *m;
  /* out of the map first: no socket is handed to us (DW_ADOPT) after the drain */
  if (c->plen) dist_conn_gone(t->id, c->peer, c->plen, c->up);
  for (size_t i = 0; i < c->nheld; i++) {
    dconn_refuse(c, c->held[i]);
    lpvm_msg_free(c->held[i]);
  }
  c->nheld = 0;
  while ((m = lpvm_recv(t)) != NULL) {
    if (m->kind == SIG_DIST && ((const dist_wrap *)lpvm_msg_data(m))->kind == DW_ADOPT) {
      dconn_adopt a;
      memcpy(&a, lpvm_msg_data(m) + sizeof(dist_wrap), sizeof a);
      close(a.fd);
    } else if (m->kind == SIG_DIST) {
      dconn_refuse(c, m);
    }
    lpvm_msg_free(m);
  }
  (void)flush(c);   /* a refusal status, best effort */
  io_close_fd(&c->w);
  dconn_rel_lost(c);

}

static void c_free(lpvm_task *t) {
  dconn *c = (dconn *)t;
  free(c->rbuf);
  free(c->wbuf);
  if (c->big) lpvm_msg_free(c->big);
  free(c->held);
  dconn_rel_free(c);
  free(c);
}

static int c_info(lpvm_task *t, lpvm_tbuf *map) {
  dconn *c = (dconn *)t;
  lpvm_put_atom(map, "node");
  lpvm_put_atom(map, c->plen ? c->peer : "undefined");
  lpvm_put_atom(map, "up");
  lpvm_put_atom(map, c->up ? "true" : "false");
  return 2;
}

static const lpvm_task_def dconn_def = {
  .type = "dist_connection",
  .prio = LPVM_PRIO_PORT,
  .size = sizeof(dconn),
  .free = c_free,
  .init = c_init,
  .setup = c_setup,
  .handle_event = c_event,
  .handle_timeout = c_timeout,
  .terminate = c_terminate,
  .handle_info = c_info,
};

int dconn_spawn(int fd, const char *name, size_t len, lpvm_id *id) {
  dconn_arg a = {fd, name, len};
  return lpvm_spawn_task(NULL, &dconn_def, &a, 0, id);
}
