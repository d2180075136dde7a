/*
** lterm_depth.c -- is a message nested deeper than a Lua value can be?
**
** lpvm's decoder stops at LTERM_DEPTH levels (vm/lterm.c: "message nested too deep").
** A process's own sends can never be that deep (the encoder stops at the same depth),
** but a C task builds its terms itself (lpvm_put_list a thousand times is a
** thousand levels), and so do ports and the C API's lpvm_send. Left in a Lua process's
** mailbox, such a message raised in every receive that looked at it: a receive with a
** predicate could never pass it, so the process could never take a later message
** (erl's own messages that deep are dropped by the connection, io/dist_term.c). The
** receiver now looks at each message not made by a Lua encoder once, before Lua sees
** it (vm/lmod_msg.c's next_msg_drop), and drops one too deep with a line on stderr.
**
** Counted as the decoder counts: a top-level tuple's elements (the values) at 1,
** anything else at 0, a tuple's, list's or map's elements one deeper, an improper
** list's tail not a level. A term shorter than 2 bytes a level cannot be that deep
** (a small tuple's tag and arity), so most messages cost one compare.
*/
#include "vm/lterm.h"
#include "vm/lterm_int.h"

_Static_assert(LTERM_DEEP_MIN == 2 * (LTERM_DEPTH + 1), "vm/lterm.h: LTERM_DEEP_MIN");

/* 1: some value sits deeper than LTERM_DEPTH; 0: not; -1: malformed (the decoder
** judges that). Stops at the first value too deep. */
static int walk(lpvm_tread *r, int depth) {
  uint32_t n;
  int list = 0;
  if (depth > LTERM_DEPTH) return 1;
  switch (lpvm_get_type(r)) {
    case LPVM_T_TUPLE:
      if (lpvm_get_tuple(r, &n)) return -1;
      break;
    case LPVM_T_MAP:
      if (lpvm_get_map(r, &n) || n > UINT32_MAX / 2) return -1;
      n *= 2;
      break;
    case LPVM_T_LIST:
      if (lpvm_get_list(r, &n)) return -1;
      list = 1;
      break;
    default:
      return lpvm_skip(r) ? -1 : 0;
  }
  for (uint32_t i = 0; i < n; i++) {
    int v = walk(r, depth + 1);
    if (v) return v;
  }
  return list && lpvm_skip(r) ? -1 : 0;
}

int lterm_too_deep(const uint8_t *term, size_t len) {
  if (len < LTERM_DEEP_MIN) return 0;
  lpvm_tread r;
  if (lpvm_tread_init(&r, term, len)) return 0;
  int top = lpvm_get_type(&r) == LPVM_T_TUPLE;   /* the values: one level down */
  if (!top) return walk(&r, 0) == 1;
  uint32_t n;
  if (lpvm_get_tuple(&r, &n)) return 0;
  for (uint32_t i = 0; i < n; i++) {
    int v = walk(&r, 1);
    if (v) return v == 1;
  }
  return 0;
}
