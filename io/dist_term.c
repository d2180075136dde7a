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
**
** The same holds for a map with two equal keys, which Lua makes from two distinct
** tables of equal contents used as keys (`{[{}] = 1, [{}] = 2}`: both are `[]`):
** erl refuses that map as corrupted too. Scalar keys cannot collide (Lua keeps one
** key per number or string), so only keys that are containers or binaries are
** compared, sorted by their bytes.
**
** The other way, erl may send a term nested deeper than a Lua value can be (an
** iolist built as [Acc, X] a thousand times is 1,000 deep; lpvm's decoder stops at
** DIST_DEPTH, vm/lterm_int.h's LTERM_DEPTH). Delivered as it is, such a message
** would raise in every receive that looks at it, the receiver's own `receive()`
** included, so that process could never take another message. The connection
** therefore drops such a message (a line on stderr says so) and delivers such an
** exit or DOWN reason as a binary of its rendering (dist_ctl.c's local_sig).
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/dist_int.h"

#define WALK_DEPTH 1024   /* deeper than any encoder writes (LTERM_DEPTH) */

typedef struct span { const uint8_t *p; size_t n; } span;

static int span_cmp(const void *a, const void *b) {
  const span *x = a, *y = b;
  size_t n = x->n < y->n ? x->n : y->n;
  int c = memcmp(x->p, y->p, n);
  return c ? c : (x->n > y->n) - (x->n < y->n);
}

static int walk(lpvm_tread *r, int depth);

/* A map's n pairs: each walked; 0 when two keys that can collide are equal. */
static int walk_map(lpvm_tread *r, uint32_t n, int depth) {
  span *keys = NULL;
  size_t nk = 0, ck = 0;
  int v = 1;
  for (uint32_t i = 0; i < n && v == 1; i++) {
    int t = lpvm_get_type(r);
    const uint8_t *at = r->p;
    v = walk(r, depth + 1);
    if (v == 1 && (t == LPVM_T_TUPLE || t == LPVM_T_LIST || t == LPVM_T_NIL || t == LPVM_T_MAP ||
                   t == LPVM_T_BINARY || t == LPVM_T_STRING)) {
      if (nk == ck) {
        span *k = realloc(keys, (ck = ck ? ck * 2 : 8) * sizeof *keys);
        if (!k) { v = -1; break; }
        keys = k;
      }
      keys[nk++] = (span){at, (size_t)(r->p - at)};
    }
    if (v == 1) v = walk(r, depth + 1);
  }
  if (v == 1 && nk > 1) {
    qsort(keys, nk, sizeof *keys, span_cmp);
    for (size_t i = 1; i < nk && v == 1; i++)
      if (span_cmp(&keys[i - 1], &keys[i]) == 0) v = 0;
  }
  free(keys);
  return v;
}

/* 1: every float finite and no map with equal keys; 0: not so; -1: malformed or too
** deep (not ours to judge: the bytes go as they are). */
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
      return walk_map(r, n, depth);
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

int dist_term_ok(const uint8_t *term, size_t len) {
  /* only lpvm's encoder writes a non-finite float, always as NEW_FLOAT_EXT (the
  ** byte 70), and a map is MAP_EXT (116): neither byte, nothing to walk */
  if (!memchr(term, 70, len) && !memchr(term, 116, len)) return 1;
  lpvm_tread r;
  if (lpvm_tread_init(&r, term, len)) return 1;   /* not ours to judge */
  return walk(&r, 0) != 0;
}

/* A message or reason deeper than lpvm's decoder takes (lpvm_term_too_deep: the walker
** shared with a Lua receiver's check of C tasks' messages, vm/lterm_depth.c). */
int dist_term_too_deep(const uint8_t *term, size_t len) {
  return lpvm_term_too_deep(term, len, DIST_DEPTH);
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
