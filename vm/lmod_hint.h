/*
** lmod_hint.h -- the lines a waiting process notes for its waker: the check each
** blocking receive makes, inline; the noting itself, out of line (lmod_hint.c).
**
** A process that waits notes for its waker the lines its next step will read first
** and that the hint (its lua_State, tasks/signal.c) does not cover: the call frames
** (receive's and its Lua caller's), the caller's stack slots from its function to
** the call's arguments, closure, prototype, next instructions, and the lines of the
** table lookups those instructions make (`l.send`, then `l.receive` round the loop:
** the table, the key string whose hash picks the node, the node, the constant). With
** thousands of processes taking turns each of them is a cache miss when the process
** runs again, one after the other (a frame leads to the function, the function to its
** prototype, that to its constants; a table to its nodes): asked for together by the
** sender as it makes the process runnable, they arrive meanwhile, in parallel. Read
** while they are warm, through the mirror (vm/lraw.h): the frames are those of this
** yield, the values what Lua keeps in them (every slot of the caller's frame is below
** the stack's top, so the collector keeps what it holds alive). Stored as spans of up
** to 8 lines (lpvm/task.h); a line further than 2 GiB from the hint, or a caller that
** is not a Lua function, notes nothing there.
*/
#ifndef LPVM_LMOD_HINT_H
#define LPVM_LMOD_HINT_H

#include <stdatomic.h>
#include <stdint.h>

#include "lpvm/lpvm.h"
#include "vm/lproc_int.h"
#include "vm/lraw.h"

/* A span of n lines (1-8) from the one holding a (8-byte aligned), as a distance from
** h: a multiple of 8 (a plus h's own low 3 bits, in a's line) with n - 1 in its low 3
** bits; 0 when it does not fit. */
static inline int32_t lmod_hint_span(const char *h, uintptr_t a, int n) {
  intptr_t d = (intptr_t)(a + ((uintptr_t)h & 7)) - (intptr_t)h;
  return d == (int32_t)d && d ? (int32_t)d | (n - 1) : 0;
}

/* Note the lines for the frame and next instruction keyed by at and pc (hints[0] and
** [1], set here too). */
void lmod_note_hints_slow(lproc *p, lua_State *L, int32_t at, int32_t pc);

static inline void lmod_note_hints(lproc *p, lua_State *L) {
  if (!lpvm_is_big() || !lraw_calls_ok()) return;   /* a small VM's lines stay cached */
  const char *h = (const char *)p->L;
  const lraw_ci *ci = (const lraw_ci *)(const void *)((const lraw_state *)(void *)L)->ci;
  const lraw_ci *up = ci->previous;
  int lua = up && up->func->tt == LRAW_VLCL;
  /* hints[0] and [1]: this frame's CallInfo and the caller's next instruction, the
  ** key of what the rest was noted for */
  uintptr_t c = (uintptr_t)ci;
  int32_t at = lmod_hint_span(h, c & ~(uintptr_t)7, (int)(((c + 63) >> 6) - (c >> 6)) + 1);
  int32_t pc = lua ? lmod_hint_span(h, (uintptr_t)up->savedpc & ~(uintptr_t)7, 1) : 0;
  /* A loop's receive waits in the same frame at the same instruction every time: the
  ** function, its prototype, the frame's slots and the lookups noted last time are
  ** these. */
  if (atomic_load_explicit(&p->task.more.hints[0], memory_order_relaxed) == at &&
      atomic_load_explicit(&p->task.more.hints[1], memory_order_relaxed) == pc && at)
    return;
  lmod_note_hints_slow(p, L, at, pc);
}

#endif
