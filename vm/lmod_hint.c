/*
** lmod_hint.c -- what a process that waits in receive notes for the sender that will
** wake it: the lines its next step reads first, as spans (lmod_hint.h says which and
** why; tasks/signal.c's task_claim asks for them).
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vm/lmod_hint.h"

#define HINT_LINES 24   /* lines gathered, merged into LPVM_TASK_HINTS spans */

typedef struct {
  uintptr_t line[HINT_LINES];
  int n;
} hint_set;

static void hint_add(hint_set *s, const void *a, size_t len) {
  uintptr_t l = (uintptr_t)a & ~(uintptr_t)63, e = ((uintptr_t)a + len - 1) & ~(uintptr_t)63;
  for (; l <= e && s->n < HINT_LINES; l += 64) {
    int j = 0;
    while (j < s->n && s->line[j] != l) j++;
    if (j == s->n) s->line[s->n++] = l;
  }
}

/* Lua 5.4's opcodes (lopcodes.h, the same through 5.4.0-5.4.6) that the scan reads. A
** Lua numbering them otherwise only makes it note useless lines: every read below is
** bounded by the prototype's sizes and checks the tags it follows. */
enum { HOP_GETFIELD = 14, HOP_JMP = 56, HOP_FORLOOP = 73 };

/* R[B][K[C]] (GETFIELD) with a table and a short string: the table's header, the
** string (its hash picks the node), the nodes luaH_getshortstr walks, the constant. */
static void hint_lookup(hint_set *s, const lraw_ci *up, const lraw_proto_head *pr,
                        uint32_t i) {
  unsigned b = (i >> 16) & 0xff, c = i >> 24;
  if (b >= pr->maxstacksize || (int)c >= pr->sizek) return;
  const lraw_tvalue *tv = up->func + 1 + b, *kv = pr->k + c;
  if (tv->tt != LRAW_VTABLE || kv->tt != LRAW_VSHRSTR) return;
  const lraw_table *t = tv->v.gc;
  const lraw_string *key = kv->v.gc;
  hint_add(s, t, sizeof *t);
  hint_add(s, key, sizeof *key);
  hint_add(s, kv, sizeof *kv);
  if (!t->lastfree) return;   /* no hash part */
  const lraw_node *n = (const lraw_node *)t->node + (key->hash & ((1u << t->lsizenode) - 1));
  for (int j = 0; j < 3; j++) {
    hint_add(s, n, sizeof *n);
    if ((n->key_tt == LRAW_VSHRSTR && n->key.gc == key) || !n->next) return;
    n += n->next;
  }
}

/* The instructions from pc on, as the resume runs them: up to two field lookups,
** following one loop's jump back (a for loop's FORLOOP, a while loop's JMP). */
static void hint_code(hint_set *s, const lraw_ci *up, const lraw_proto_head *pr) {
  const uint32_t *code = pr->code;
  ptrdiff_t at = (const uint32_t *)up->savedpc - code;
  int found = 0, jumped = 0;
  for (int steps = 0; steps < 16 && at >= 0 && at < pr->sizecode; steps++) {
    uint32_t i = code[at];
    hint_add(s, code + at, 4);
    switch (i & 0x7f) {
      case HOP_GETFIELD:
        hint_lookup(s, up, pr, i);
        if (++found == 2) return;
        break;
      case HOP_FORLOOP:
        if (jumped++) return;
        at -= (ptrdiff_t)(i >> 15);
        break;
      case HOP_JMP:
        if (jumped++) return;
        at += (ptrdiff_t)(i >> 7) - ((1 << 24) - 1);
        break;
      default: break;
    }
    at++;
  }
}

static int hint_cmp(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return (x > y) - (x < y);
}

static inline void hint_put(lproc *p, int i, int32_t d) {
  atomic_store_explicit(&p->task.more.hints[i], d, memory_order_relaxed);
}

/* The lines, by address, merged into spans (a gap of one line is fetched too), the
** spans with the earliest-gathered lines kept when there are more than fit: the
** order the resume reads them in. */
static void hint_store(lproc *p, const char *h, hint_set *s, int first) {
  uintptr_t byaddr[HINT_LINES];
  memcpy(byaddr, s->line, (size_t)s->n * sizeof *byaddr);
  qsort(byaddr, (size_t)s->n, sizeof *byaddr, hint_cmp);
  struct { uintptr_t at; int n, pri; } span[HINT_LINES];
  int ns = 0;
  for (int i = 0; i < s->n; i++) {
    uintptr_t l = byaddr[i];
    int pr = 0;   /* the order it was gathered in (lines are unique) */
    while (s->line[pr] != l) pr++;
    if (ns && l <= span[ns - 1].at + (uintptr_t)span[ns - 1].n * 64 + 64 &&
        l < span[ns - 1].at + 8 * 64) {
      int len = (int)((l - span[ns - 1].at) / 64) + 1;
      if (len > span[ns - 1].n) span[ns - 1].n = len;
      if (pr < span[ns - 1].pri) span[ns - 1].pri = pr;
    } else {
      span[ns].at = l, span[ns].n = 1, span[ns].pri = pr;
      ns++;
    }
  }
  int slot = first;
  for (int want = 0; want < HINT_LINES && slot < LPVM_TASK_HINTS; want++)
    for (int j = 0; j < ns && slot < LPVM_TASK_HINTS; j++)
      if (span[j].pri == want) hint_put(p, slot++, lmod_hint_span(h, span[j].at, span[j].n));
  while (slot < LPVM_TASK_HINTS) hint_put(p, slot++, 0);
}

void lmod_note_hints_slow(lproc *p, lua_State *L, int32_t at, int32_t pc) {
  const char *h = (const char *)p->L;   /* the hint */
  const lraw_ci *ci = (const lraw_ci *)(const void *)((const lraw_state *)(void *)L)->ci;
  const lraw_ci *up = ci->previous;
  hint_put(p, 0, at);
  hint_put(p, 1, pc);
  hint_set s;   /* hints[0] and [1] have the CallInfo (64 bytes in 5.4) and pc */
  s.n = 0;
  if (up && up->func->tt == LRAW_VLCL) {
    const lraw_lclosure *cl = up->func->v.gc;
    const lraw_proto_head *pr = cl->proto;
    /* the caller's slots from its function to the call's first arguments, at most 8
    ** lines (a frame further apart is the caller's business) */
    const char *lo = (const char *)up->func, *hi = (const char *)(ci->func + 4);
    if (hi > lo && hi - lo <= 8 * 64) hint_add(&s, lo, (size_t)(hi - lo));
    else hint_add(&s, ci->func + 1, sizeof(lraw_tvalue));
    hint_add(&s, up, 64);
    hint_add(&s, cl, sizeof *cl);
    hint_add(&s, pr, sizeof *pr);
    hint_code(&s, up, pr);
  } else {
    hint_add(&s, ci->func + 1, sizeof(lraw_tvalue));   /* where the message's values go */
  }
  hint_store(p, h, &s, 2);
}
