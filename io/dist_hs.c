/*
** dist_hs.c -- the handshake messages of Erlang's distribution protocol (version 6).
**
** Each message is a 2-byte big-endian length and a tag byte:
**   'N' send_name   flags:64 creation:32 nlen:16 name
**   's' status      "ok" | "ok_simultaneous" | "nok" | "not_allowed" | "alive"
**   'N' challenge   flags:64 challenge:32 creation:32 nlen:16 name
**   'r' reply       challenge:32 digest:128
**   'a' ack         digest:128
** The parsers take bytes from the network: every length is checked, nothing is
** trusted, and a bad message is LPVM_EBADTERM (the connection then closes).
*/
#include <nettle/md5.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "io/dist_int.h"

static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static uint32_t be32(const uint8_t *p) { return be16(p) << 16 | be16(p + 2); }
static uint64_t be64(const uint8_t *p) { return (uint64_t)be32(p) << 32 | be32(p + 4); }

static uint8_t *put16(uint8_t *q, uint32_t v) {
  q[0] = (uint8_t)(v >> 8); q[1] = (uint8_t)v;
  return q + 2;
}

static uint8_t *put32(uint8_t *q, uint32_t v) {
  q[0] = (uint8_t)(v >> 24); q[1] = (uint8_t)(v >> 16); q[2] = (uint8_t)(v >> 8);
  q[3] = (uint8_t)v;
  return q + 4;
}

static uint8_t *put64(uint8_t *q, uint64_t v) {
  return put32(put32(q, (uint32_t)(v >> 32)), (uint32_t)v);
}

/* 'N' flags:64 [challenge:32] creation:32 nlen:16 name */
static int parse_n(const uint8_t *p, size_t n, int chal, hs_name *o) {
  size_t fixed = 1 + 8 + (chal ? 4 : 0) + 4 + 2;
  if (n < fixed || p[0] != 'N') return LPVM_EBADTERM;
  o->flags = be64(p + 1);
  p += 9;
  o->challenge = 0;
  if (chal) { o->challenge = be32(p); p += 4; }
  o->creation = be32(p);
  size_t len = be16(p + 4);
  if (len == 0 || len > NODE_NAME_MAX || len != n - fixed) return LPVM_EBADTERM;
  o->name = (const char *)p + 6;
  o->len = len;
  if (!memchr(o->name, '@', len) || memchr(o->name, 0, len)) return LPVM_EBADTERM;
  return 0;
}

int hs_parse_name(const uint8_t *p, size_t n, hs_name *out) {
  return parse_n(p, n, 0, out);
}

int hs_parse_challenge(const uint8_t *p, size_t n, hs_name *out) {
  return parse_n(p, n, 1, out);
}

int hs_parse_status(const uint8_t *p, size_t n, const char **st, size_t *len) {
  if (n < 2 || p[0] != 's') return LPVM_EBADTERM;
  *st = (const char *)p + 1;
  *len = n - 1;
  return 0;
}

int hs_parse_reply(const uint8_t *p, size_t n, uint32_t *chal, const uint8_t **digest) {
  if (n != 21 || p[0] != 'r') return LPVM_EBADTERM;
  *chal = be32(p + 1);
  *digest = p + 5;
  return 0;
}

int hs_parse_ack(const uint8_t *p, size_t n, const uint8_t **digest) {
  if (n != 17 || p[0] != 'a') return LPVM_EBADTERM;
  *digest = p + 1;
  return 0;
}

static size_t finish(uint8_t *out, uint8_t *end) {
  size_t body = (size_t)(end - out) - 2;
  put16(out, (uint32_t)body);
  return body + 2;
}

size_t hs_build_name(uint8_t *out, uint64_t flags, uint32_t creation, const char *name) {
  size_t len = strlen(name);
  uint8_t *q = out + 2;
  *q++ = 'N';
  q = put64(q, flags);
  q = put32(q, creation);
  q = put16(q, (uint32_t)len);
  memcpy(q, name, len);
  return finish(out, q + len);
}

size_t hs_build_status(uint8_t *out, const char *status) {
  size_t len = strlen(status);
  out[2] = 's';
  memcpy(out + 3, status, len);
  return finish(out, out + 3 + len);
}

size_t hs_build_challenge(uint8_t *out, uint64_t flags, uint32_t chal, uint32_t creation,
                          const char *name) {
  size_t len = strlen(name);
  uint8_t *q = out + 2;
  *q++ = 'N';
  q = put64(q, flags);
  q = put32(q, chal);
  q = put32(q, creation);
  q = put16(q, (uint32_t)len);
  memcpy(q, name, len);
  return finish(out, q + len);
}

size_t hs_build_reply(uint8_t *out, uint32_t chal, const uint8_t digest[16]) {
  uint8_t *q = out + 2;
  *q++ = 'r';
  q = put32(q, chal);
  memcpy(q, digest, 16);
  return finish(out, q + 16);
}

size_t hs_build_ack(uint8_t *out, const uint8_t digest[16]) {
  out[2] = 'a';
  memcpy(out + 3, digest, 16);
  return finish(out, out + 19);
}

void hs_digest(const char *cookie, uint32_t chal, uint8_t out[16]) {
  char text[16];
  int n = snprintf(text, sizeof text, "%u", chal);
  struct md5_ctx c;
  md5_init(&c);
  md5_update(&c, strlen(cookie), (const uint8_t *)cookie);
  md5_update(&c, (size_t)n, (const uint8_t *)text);
  md5_digest(&c, 16, out);
}

uint32_t hs_challenge(void) {
  uint32_t v = 0;
  if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) {
    /* no entropy source: still unpredictable enough for a loopback test, never 0 */
    v = (uint32_t)(uintptr_t)&v ^ (uint32_t)lpvm_now_ms() * 2654435761u;
  }
  return v;
}
