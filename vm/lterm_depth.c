/*
** lterm_depth.c -- is a message nested deeper than a Lua value can be?
**
** lpvm's decoder stops at LTERM_DEPTH levels (vm/lterm_dec.c: "message nested too deep").
** A process's own sends can never be that deep (the encoder stops at the same depth),
** but a C task builds its terms itself (lpvm_put_list a thousand times is a
** thousand levels), and so do ports and the C API's lpvm_send. Left in a Lua process's
** mailbox, such a message raised in every receive that looked at it: a receive with a
** predicate could never pass it, so the process could never take a later message
** (erl's own messages that deep are dropped by the connection, io/dist_term.c). The
** receiver now looks at each message not made by a Lua encoder once, before Lua sees
** it (vm/lmod_msg.c's next_msg_drop), and drops one too deep with a line on stderr.
**
** Counted as the decoder counts (a top-level tuple's elements, the values, at 1), by
** the walker the distribution uses too (lpvm_term_too_deep, tasks/term_dec.c). A term
** shorter than 2 bytes a level cannot be that deep, so most messages cost one compare.
*/
#include "vm/lterm.h"
#include "vm/lterm_int.h"

_Static_assert(LTERM_DEEP_MIN == 2 * (LTERM_DEPTH + 1), "vm/lterm.h: LTERM_DEEP_MIN");

int lterm_too_deep(const uint8_t *term, size_t len) {
  return lpvm_term_too_deep(term, len, LTERM_DEPTH);
}
