/*
** fuzz_dist.c -- fuzz target: what a distribution connection reads from a peer (io/):
** the handshake messages (dist_hs.c) and the packets of an established connection
** (dist_ctl.c), control tuples and messages, with the links and monitors they create.
** The first input byte picks the decoder; the rest is the message. A packet is fed
** to one long-lived connection record, so relations pile up as with a real peer.
** Beyond "no crash, no sanitizer report": a handshake message that parses has its
** name inside the input, and a connection's answers stay well-formed packets.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/dist_conn.h"
#include "lpvm/lpvm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static dconn *conn;

static void setup(void) {
  if (conn) return;
  lpvm_start(NULL);              /* local signals need the process table */
  conn = calloc(1, sizeof *conn);
  conn->up = 1;
  conn->peer_flags = DF_OURS;
  conn->peer_creation = 3;
  strcpy(conn->peer, "peer@host");
  conn->plen = 9;
}

/* The answers queued must be whole packets: 4-byte length, 112, a control term. */
static void check_output(dconn *c) {
  size_t p = c->wpos;
  while (p < c->wlen) {
    if (c->wlen - p < 4) abort();
    size_t n = (size_t)c->wbuf[p] << 24 | (size_t)c->wbuf[p + 1] << 16 |
               (size_t)c->wbuf[p + 2] << 8 | c->wbuf[p + 3];
    if (n > c->wlen - p - 4 || (n > 0 && c->wbuf[p + 4] != 112)) abort();
    p += 4 + n;
  }
  c->wpos = c->wlen = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  setup();
  const uint8_t *p = data + 1;
  size_t n = size - 1;
  hs_name nm;
  const char *st;
  size_t sl;
  uint32_t chal;
  const uint8_t *d;
  switch (data[0] % 6) {
    case 0:
    case 1:
      if ((data[0] % 6 == 0 ? hs_parse_name(p, n, &nm) : hs_parse_challenge(p, n, &nm)) == 0 &&
          ((const uint8_t *)nm.name < p || (const uint8_t *)nm.name + nm.len > p + n))
        abort();
      break;
    case 2: (void)hs_parse_status(p, n, &st, &sl); break;
    case 3: (void)hs_parse_reply(p, n, &chal, &d); break;
    case 4: (void)hs_parse_ack(p, n, &d); break;
    default:
      (void)dconn_in(conn, p, n);
      check_output(conn);
      if (conn->nlinks > 4096) conn->nlinks = 0;   /* bounded memory over a long run */
      if (conn->nmo > 4096) conn->nmo = 0;
      break;
  }
  return 0;
}
