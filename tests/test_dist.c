/*
** test_dist.c -- the decoders of outside bytes in distribution: the handshake
** messages and the packets of a connection. Valid messages round-trip; truncated,
** random and mutated ones are refused (or harmlessly ignored), never crash, never
** read out of bounds (the ASan build runs this too). The protocol against a real
** erl is tests/lua/test_dist.lua.
*/
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/dist_conn.h"
#include "lpvm/lpvm.h"
#include "testutil.h"

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint32_t rnd(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (uint32_t)rng;
}

Test(handshake, round_trips) {
  uint8_t m[HS_MAX], dg[16];
  hs_name n;
  size_t len = hs_build_name(m, DF_OURS, 77, "alpha@host");
  cr_assert_eq(len, (size_t)(2 + 1 + 8 + 4 + 2 + 10));
  cr_assert_eq(hs_parse_name(m + 2, len - 2, &n), 0);
  cr_assert_eq(n.flags, DF_OURS);
  cr_assert_eq(n.creation, 77u);
  cr_assert(n.len == 10 && !memcmp(n.name, "alpha@host", 10));
  len = hs_build_challenge(m, DF_MANDATORY, 0xdeadbeef, 5, "b@h");
  cr_assert_eq(hs_parse_challenge(m + 2, len - 2, &n), 0);
  cr_assert_eq(n.challenge, 0xdeadbeefu);
  cr_assert_eq(n.creation, 5u);
  hs_digest("secret", 0xdeadbeef, dg);   /* MD5("secret" ++ "3735928559") */
  const uint8_t want[16] = {195, 147, 155, 49, 215, 169, 19, 216, 46, 42, 206, 9, 36,
                            124, 123, 65};
  cr_assert(memcmp(dg, want, 16) == 0);
  uint32_t chal;
  const uint8_t *d;
  len = hs_build_reply(m, 42, dg);
  cr_assert_eq(hs_parse_reply(m + 2, len - 2, &chal, &d), 0);
  cr_assert_eq(chal, 42u);
  cr_assert(memcmp(d, dg, 16) == 0);
  len = hs_build_ack(m, dg);
  cr_assert_eq(hs_parse_ack(m + 2, len - 2, &d), 0);
  const char *st;
  size_t sl;
  len = hs_build_status(m, "ok");
  cr_assert_eq(hs_parse_status(m + 2, len - 2, &st, &sl), 0);
  cr_assert(sl == 2 && !memcmp(st, "ok", 2));
}

Test(handshake, bad_messages_are_refused) {
  uint8_t m[HS_MAX];
  hs_name n;
  size_t len = hs_build_name(m, DF_OURS, 1, "a@b");
  for (size_t cut = 0; cut < len - 2; cut++)              /* every truncation */
    cr_assert_neq(hs_parse_name(m + 2, cut, &n), 0, "cut %zu", cut);
  m[2 + 1 + 8 + 4 + 1] = 200;                              /* name length too long */
  cr_assert_neq(hs_parse_name(m + 2, len - 2, &n), 0);
  len = hs_build_name(m, DF_OURS, 1, "nohost");            /* no @ */
  cr_assert_neq(hs_parse_name(m + 2, len - 2, &n), 0);
  uint32_t chal;
  const uint8_t *d;
  cr_assert_neq(hs_parse_reply((const uint8_t *)"r123", 4, &chal, &d), 0);
  cr_assert_neq(hs_parse_ack((const uint8_t *)"x", 1, &d), 0);
  /* random bytes: any answer, no crash, no read past the end (ASan) */
  for (int i = 0; i < 20000; i++) {
    size_t l = rnd() % 64;
    uint8_t *p = malloc(l ? l : 1);
    for (size_t k = 0; k < l; k++) p[k] = (uint8_t)rnd();
    if (l && i % 2) p[0] = "Nsra"[rnd() % 4];
    const char *s;
    size_t sl;
    (void)hs_parse_name(p, l, &n);
    (void)hs_parse_challenge(p, l, &n);
    (void)hs_parse_status(p, l, &s, &sl);
    (void)hs_parse_reply(p, l, &chal, &d);
    (void)hs_parse_ack(p, l, &d);
    free(p);
  }
}

/* ---- packets: a connection record not attached to a socket ----------------------- */

static dconn *fake_conn(void) {
  dconn *c = calloc(1, sizeof *c);
  c->up = 1;
  c->peer_flags = DF_OURS;
  c->peer_creation = 3;
  strcpy(c->peer, "peer@host");
  c->plen = 9;
  return c;
}

static void free_conn(dconn *c) {
  dconn_rel_free(c);
  free(c->wbuf);
  free(c);
}

/* 112, a control tuple and maybe a message, as the peer would send them. */
static size_t packet(uint8_t *out, const lpvm_tbuf *ctl, const lpvm_tbuf *msg) {
  out[0] = 112;
  memcpy(out + 1, ctl->data, ctl->len);
  size_t n = 1 + ctl->len;
  if (msg) {
    memcpy(out + n, msg->data, msg->len);
    n += msg->len;
  }
  return n;
}

static lpvm_id peer_pid(uint32_t n) {
  int idx = node_intern("peer@host", 9, 3);
  return node_remote_pid((uint32_t)idx, n, 0);
}

static size_t valid_packets(uint8_t pk[][512], size_t *lens) {
  lpvm_tbuf c, m;
  size_t k = 0;
  lpvm_id local = (UINT64_C(1) << 32) | 5, remote = peer_pid(40);
  lpvm_tbuf_init(&m);
  lpvm_put_tuple(&m, 2);
  lpvm_put_atom(&m, "hello");
  lpvm_put_binary(&m, "world", 5);
  /* SEND, SEND_SENDER, REG_SEND (net_kernel), LINK, UNLINK_ID, EXIT, EXIT2,
  ** MONITOR_P, DEMONITOR_P, MONITOR_P_EXIT, SPAWN_REQUEST, SPAWN_REPLY */
  for (int op = 0; op < 12; op++) {
    lpvm_tbuf_init(&c);
    int with_msg = 0;
    switch (op) {
      case 0: lpvm_put_tuple(&c, 3); lpvm_put_int(&c, 2); lpvm_put_atom(&c, "");
              lpvm_put_pid(&c, local); with_msg = 1; break;
      case 1: lpvm_put_tuple(&c, 3); lpvm_put_int(&c, 22); lpvm_put_pid(&c, remote);
              lpvm_put_pid(&c, local); with_msg = 1; break;
      case 2: lpvm_put_tuple(&c, 4); lpvm_put_int(&c, 6); lpvm_put_pid(&c, remote);
              lpvm_put_atom(&c, ""); lpvm_put_atom(&c, "net_kernel"); with_msg = 1; break;
      case 3: lpvm_put_tuple(&c, 3); lpvm_put_int(&c, 1); lpvm_put_pid(&c, remote);
              lpvm_put_pid(&c, local); break;
      case 4: lpvm_put_tuple(&c, 4); lpvm_put_int(&c, 35); lpvm_put_int(&c, 9);
              lpvm_put_pid(&c, remote); lpvm_put_pid(&c, local); break;
      case 5: lpvm_put_tuple(&c, 4); lpvm_put_int(&c, 3); lpvm_put_pid(&c, remote);
              lpvm_put_pid(&c, local); lpvm_put_atom(&c, "boom"); break;
      case 6: lpvm_put_tuple(&c, 4); lpvm_put_int(&c, 8); lpvm_put_pid(&c, remote);
              lpvm_put_pid(&c, local); lpvm_put_atom(&c, "kill"); break;
      case 7: lpvm_put_tuple(&c, 4); lpvm_put_int(&c, 19); lpvm_put_pid(&c, remote);
              lpvm_put_pid(&c, local); lpvm_put_ref(&c, 77); break;
      case 8: lpvm_put_tuple(&c, 4); lpvm_put_int(&c, 20); lpvm_put_pid(&c, remote);
              lpvm_put_pid(&c, local); lpvm_put_ref(&c, 77); break;
      case 9: lpvm_put_tuple(&c, 5); lpvm_put_int(&c, 21); lpvm_put_pid(&c, remote);
              lpvm_put_pid(&c, local); lpvm_put_ref(&c, 78); lpvm_put_atom(&c, "x"); break;
      case 10: lpvm_put_tuple(&c, 6); lpvm_put_int(&c, 29); lpvm_put_ref(&c, 5);
               lpvm_put_pid(&c, remote); lpvm_put_pid(&c, remote); lpvm_put_tuple(&c, 3);
               lpvm_put_atom(&c, "m"); lpvm_put_atom(&c, "f"); lpvm_put_int(&c, 0);
               lpvm_put_list(&c, 1); lpvm_put_atom(&c, "monitor"); lpvm_put_nil(&c);
               with_msg = 2; break;
      default: lpvm_put_tuple(&c, 5); lpvm_put_int(&c, 31); lpvm_put_ref(&c, 6);
               lpvm_put_pid(&c, local); lpvm_put_int(&c, 1); lpvm_put_pid(&c, remote); break;
    }
    lpvm_tbuf nil;
    lpvm_tbuf_init(&nil);
    lpvm_put_nil(&nil);
    lens[k] = packet(pk[k], &c, with_msg == 1 ? &m : with_msg == 2 ? &nil : NULL);
    k++;
    lpvm_tbuf_free(&c);
    lpvm_tbuf_free(&nil);
  }
  lpvm_tbuf_free(&m);
  return k;
}

Test(packets, valid_then_mutated) {
  cr_assert_eq(lpvm_start(NULL), 0);
  uint8_t pk[16][512];
  size_t lens[16];
  size_t n = valid_packets(pk, lens);
  dconn *c = fake_conn();
  for (size_t i = 0; i < n; i++)
    cr_assert_eq(dconn_in(c, pk[i], lens[i]), 0, "valid packet %zu refused", i);
  cr_assert_gt(c->wlen, 0, "net_kernel's is_auth-less call and EXIT noproc answer");
  /* every truncation of every packet, then random single-byte mutations */
  uint8_t buf[512];
  for (size_t i = 0; i < n; i++)
    for (size_t cut = 0; cut < lens[i]; cut++) {
      memcpy(buf, pk[i], cut);
      (void)dconn_in(c, buf, cut);
    }
  int refused = 0;
  for (int k = 0; k < (int)(40000 * LPVM_STRESS_SCALE) + 1000; k++) {
    size_t i = rnd() % n, l = lens[i];
    memcpy(buf, pk[i], l);
    for (int j = 0, m = 1 + (int)(rnd() % 4); j < m; j++) buf[rnd() % l] = (uint8_t)rnd();
    if (rnd() % 4 == 0) l = rnd() % l + 1;
    if (dconn_in(c, buf, l) != 0) refused++;
    if (c->wlen > (1u << 20)) c->wlen = c->wpos = 0;   /* answers: drop them */
  }
  cr_assert_gt(refused, 0);
  for (int k = 0; k < 20000; k++) {                     /* pure noise */
    size_t l = 1 + rnd() % 200;
    for (size_t j = 0; j < l; j++) buf[j] = (uint8_t)rnd();
    if (k % 2) buf[0] = 112, buf[1] = 131;
    (void)dconn_in(c, buf, l);
  }
  c->nlinks = c->nmo = 0;                               /* nothing to tell: no VM peers */
  free_conn(c);
  cr_assert_eq(lpvm_stop(), 0);
}

/* A message from the peer always names a sender of that node, even a SEND that has
** none: from 0 means "from outside any task" (interrupts, the shell), and the
** receiver's rule for remote code (lterm_push_msg) goes by the sender's node. */
static _Atomic lpvm_id seen_from[2];
static _Atomic int seen;

static int recorder_event(lpvm_task *t) {
  lpvm_msg *m;
  while ((m = lpvm_recv(t)) != NULL) {
    int k = atomic_load(&seen);
    if (k < 2) atomic_store(&seen_from[k], lpvm_msg_from(m));
    atomic_store(&seen, k + 1);
    lpvm_msg_free(m);
  }
  return LPVM_WAIT;
}

static const lpvm_task_def recorder_def = {.type = "recorder", .prio = 20,
                                           .handle_event = recorder_event};

Test(packets, a_message_from_the_peer_has_a_remote_sender) {
  cr_assert_eq(lpvm_start(NULL), 0);
  lpvm_id to;
  cr_assert_eq(lpvm_spawn_task(NULL, &recorder_def, NULL, 0, &to), 0);
  dconn *c = fake_conn();
  c->peer_idx = (uint32_t)node_intern("peer@host", 9, 3);
  lpvm_tbuf ctl, m;
  uint8_t pk[256];
  lpvm_tbuf_init(&m);
  lpvm_put_atom(&m, "hi");
  for (int k = 0; k < 2; k++) {   /* SEND {2, '', To}, then SEND_SENDER {22, From, To} */
    lpvm_tbuf_init(&ctl);
    lpvm_put_tuple(&ctl, 3);
    lpvm_put_int(&ctl, k == 0 ? 2 : 22);
    if (k == 0) lpvm_put_atom(&ctl, "");
    else lpvm_put_pid(&ctl, peer_pid(40));
    lpvm_put_pid(&ctl, to);
    cr_assert_eq(dconn_in(c, pk, packet(pk, &ctl, &m)), 0);
    lpvm_tbuf_free(&ctl);
  }
  lpvm_tbuf_free(&m);
  for (int i = 0; i < 5000 && atomic_load(&seen) < 2; i++) usleep(1000);
  cr_assert_eq(atomic_load(&seen), 2);
  cr_assert(lpvm_id_is_remote(atomic_load(&seen_from[0])), "SEND: a sender of the peer");
  cr_assert_eq(atomic_load(&seen_from[1]), peer_pid(40));
  free_conn(c);
  cr_assert_eq(lpvm_stop(), 0);
}
