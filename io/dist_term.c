/*
** dist_term.c -- what Erlang's term format cannot carry to another node.
**
** Inside the node a Lua float travels as its IEEE bits, NaN and the infinities
** included (a `math.huge` survives a message). Erlang has no such floats: erl's
** decoder calls a term holding one corrupted and closes the whole connection, so
** one careless send would cut every link and monitor between the two nodes
** (noconnection for all). The router therefore looks at what leaves the node,
** in the sender's thread: a message holding a non-finite float is not sent (a
** line on stderr says so; a send never fails, as Erlang's); an exit or DOWN
** reason holding one leaves as a binary of its rendering (`{error,inf}`), so the
** link or monitor still fires with a reason that says what it was.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/dist_int.h"

#define WALK_DEPTH 1024   /* deeper than any encoder writes (LTERM_DEPTH) */

/* 1: every float finite; 0: one is not; -1: malformed or too deep. */
static int walk(lpvm_tread *r, int depth) {
  uint32_t n;
  double d;
  if (depth > WALK_DEPTH) return -1;
  switch (lpvm_get_type(r)) {
    case LPVM_T_FLOAT:
      if (lpvm_get_float(r, &d)) return -1;
      return isfinite(d) ? 1 : 0;
    case LPVM_T_TUPLE:
      if (lpvm_get_tuple(r, &n)) return -1;
      break;
    case LPVM_T_MAP:
      if (lpvm_get_map(r, &n)) return -1;
      if (n > UINT32_MAX / 2) return -1;
      n *= 2;
      break;
    case LPVM_T_LIST:
      if (lpvm_get_list(r, &n)) return -1;
      if (n == UINT32_MAX) return -1;
      n += 1;   /* the tail */
      break;
    default:
      return lpvm_skip(r) ? -1 : 1;
  }
  for (uint32_t i = 0; i < n; i++) {
    int v = walk(r, depth + 1);
    if (v != 1) return v;
  }
  return 1;
}

int dist_term_finite(const uint8_t *term, size_t len) {
  /* only lpvm's encoder writes a non-finite float, always as NEW_FLOAT_EXT (the
  ** byte 70): no such byte, nothing to walk */
  if (!memchr(term, 70, len)) return 1;
  lpvm_tread r;
  if (lpvm_tread_init(&r, term, len)) return 1;   /* not ours to judge */
  return walk(&r, 0) != 0;
}

uint8_t *dist_term_rendered(const uint8_t *term, size_t len, size_t *out_len) {
  char small[256];
  size_t n = lpvm_term_format(term, len, small, sizeof small);
  char *text = small;
  if (n >= sizeof small) {
    if (!(text = malloc(n + 1))) return NULL;
    (void)lpvm_term_format(term, len, text, n + 1);
  }
  uint8_t *t = n <= UINT32_MAX - 6 ? malloc(n + 6) : NULL;
  if (t) {
    t[0] = 131;
    t[1] = 109;   /* BINARY_EXT: 4-byte big-endian length, the bytes */
    t[2] = (uint8_t)(n >> 24); t[3] = (uint8_t)(n >> 16);
    t[4] = (uint8_t)(n >> 8); t[5] = (uint8_t)n;
    memcpy(t + 6, text, n);
    *out_len = n + 6;
  }
  if (text != small) free(text);
  return t;
}
