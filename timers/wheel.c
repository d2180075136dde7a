/*
** wheel.c -- hierarchical hashed timing wheel; see wheel.h for the layout.
**
** The one invariant everything rests on: a pending node sits on level
** level_of(now, deadline), in slot digit(deadline, level). Adding places a node by
** that rule; advancing keeps it true by cascading a higher slot exactly when the
** time reaches its first millisecond, and by jumping the time only over stretches
** in which no slot starts. Because the invariant determines where a node is, a
** node needs no back pointer to its slot: 24 bytes are enough.
*/
#include "timers/wheel.h"

#include <string.h>

#include "lpvm/lpvm.h"

/* Every level-0..4 placement agrees with `now` on the bits above this span. */
#define SPAN_BITS (TIMER_WHEEL_BITS * TIMER_WHEEL_LEVELS)
#define SPAN_MASK ((UINT64_C(1) << SPAN_BITS) - 1)
#define OVERFLOW  (-1)

/* ---- where a node lives ---- */

static int level_of(uint64_t now, uint64_t deadline) {
  uint64_t x = now ^ deadline;
  if (x < TIMER_WHEEL_SLOTS) return 0;
  int level = (63 - __builtin_clzll(x)) / TIMER_WHEEL_BITS;
  return level < TIMER_WHEEL_LEVELS ? level : OVERFLOW;
}

static unsigned digit(uint64_t t, int level) {
  return (unsigned)(t >> (level * TIMER_WHEEL_BITS)) & (TIMER_WHEEL_SLOTS - 1);
}

/* First occupied slot >= from, or -1. */
static int first_set(const uint64_t *occupied, unsigned from) {
  for (unsigned w = from / 64; w < TIMER_WHEEL_WORDS; w++) {
    uint64_t bits = occupied[w];
    if (w == from / 64) bits &= ~UINT64_C(0) << (from % 64);
    if (bits) return (int)(w * 64 + (unsigned)__builtin_ctzll(bits));
  }
  return -1;
}

/* ---- lists ---- */

static void list_append(timer_wheel_list *l, timer_wheel_node *n) {
  n->next = NULL;
  n->prev = l->tail;
  if (l->tail) l->tail->next = n;
  else l->head = n;
  l->tail = n;
}

static void list_unlink(timer_wheel_list *l, timer_wheel_node *n) {
  if (n->prev) n->prev->next = n->next;
  else l->head = n->next;
  if (n->next) n->next->prev = n->prev;
  else l->tail = n->prev;
  timer_wheel_node_init(n);
}

static uint64_t list_min(const timer_wheel_list *l) {
  uint64_t m = UINT64_MAX;
  for (const timer_wheel_node *n = l->head; n; n = n->next)
    if (n->deadline < m) m = n->deadline;
  return m;
}

/* A slot's cached minimum: lower it on add; forget it (0) when the minimum leaves. */
static void min_add(uint64_t *m, uint64_t d) {
  if (*m != 0 && d < *m) *m = d;
}

static void min_remove(uint64_t *m, const timer_wheel_list *l, uint64_t d) {
  if (l->head == NULL) *m = UINT64_MAX;
  else if (d == *m) *m = 0;
}

/* ---- placing and removing ---- */

static void place(timer_wheel *w, timer_wheel_node *n) {
  int level = level_of(w->now, n->deadline);
  if (level == OVERFLOW) {
    list_append(&w->overflow, n);
    w->overflow_count++;
    min_add(&w->overflow_min, n->deadline);
    return;
  }
  timer_wheel_level *L = &w->level[level];
  unsigned i = digit(n->deadline, level);
  list_append(&L->slot[i], n);
  L->occupied[i / 64] |= UINT64_C(1) << (i % 64);
  L->count++;
  min_add(&L->min[i], n->deadline);
}

static void unplace(timer_wheel *w, timer_wheel_node *n) {
  uint64_t d = n->deadline;
  int level = level_of(w->now, d);
  if (level == OVERFLOW) {
    list_unlink(&w->overflow, n);
    w->overflow_count--;
    min_remove(&w->overflow_min, &w->overflow, d);
    return;
  }
  timer_wheel_level *L = &w->level[level];
  unsigned i = digit(d, level);
  list_unlink(&L->slot[i], n);
  L->count--;
  if (L->slot[i].head == NULL) L->occupied[i / 64] &= ~(UINT64_C(1) << (i % 64));
  min_remove(&L->min[i], &L->slot[i], d);
}

/* Re-place every node of a detached list, keeping their order (ties stay FIFO). */
static void replace_all(timer_wheel *w, timer_wheel_node *n) {
  while (n) {
    timer_wheel_node *next = n->next;
    place(w, n);
    n = next;
  }
}

static void cascade_slot(timer_wheel *w, int level, unsigned i) {
  timer_wheel_level *L = &w->level[level];
  timer_wheel_node *n = L->slot[i].head;
  if (n == NULL) return;
  L->slot[i].head = L->slot[i].tail = NULL;
  L->occupied[i / 64] &= ~(UINT64_C(1) << (i % 64));
  L->min[i] = UINT64_MAX;
  for (timer_wheel_node *m = n; m; m = m->next) L->count--;
  replace_all(w, n);
}

/* The time has just become w->now: move down every slot that starts now. Placing
** relative to the new time never targets a slot being cascaded, so order is free. */
static void cascade(timer_wheel *w) {
  uint64_t t = w->now;
  if (w->overflow_count && (t & SPAN_MASK) == 0) {
    timer_wheel_node *n = w->overflow.head;
    w->overflow.head = w->overflow.tail = NULL;
    w->overflow_count = 0;
    w->overflow_min = UINT64_MAX;
    replace_all(w, n);
  }
  for (int level = TIMER_WHEEL_LEVELS - 1; level >= 1; level--) {
    uint64_t below = (UINT64_C(1) << (level * TIMER_WHEEL_BITS)) - 1;
    if ((t & below) == 0) cascade_slot(w, level, digit(t, level));
  }
}

/* The next time in (now, target] at which a slot fires or cascades, else target.
** Lower levels always come first, so the lowest non-empty level decides. */
static uint64_t next_event(const timer_wheel *w, uint64_t target) {
  uint64_t now = w->now;
  for (int level = 0; level < TIMER_WHEEL_LEVELS; level++) {
    const timer_wheel_level *L = &w->level[level];
    if (L->count == 0) continue;
    int i = first_set(L->occupied, digit(now, level) + 1);
    if (i < 0) break;  /* cannot happen while the invariant holds */
    unsigned shift = (unsigned)level * TIMER_WHEEL_BITS;
    uint64_t block = now & ~((UINT64_C(1) << (shift + TIMER_WHEEL_BITS)) - 1);
    uint64_t t = block | ((uint64_t)i << shift);
    return t < target ? t : target;
  }
  if (w->overflow_count && (now | SPAN_MASK) != UINT64_MAX) {
    uint64_t t = (now | SPAN_MASK) + 1;
    return t < target ? t : target;
  }
  return target;
}

/* Fire the level-0 slot of the current millisecond, including nodes the callbacks
** add to it while it runs. */
static size_t fire_due(timer_wheel *w, timer_wheel_fire_fn fn, void *ud) {
  timer_wheel_level *L = &w->level[0];
  unsigned i = digit(w->now, 0);
  size_t fired = 0;
  timer_wheel_node *n;
  while ((n = L->slot[i].head) != NULL) {
    unplace(w, n);
    w->count--;
    fired++;
    fn(n, ud);
  }
  return fired;
}

/* ---- public ---- */

void timer_wheel_init(timer_wheel *w, uint64_t now) {
  memset(w, 0, sizeof *w);
  w->now = now;
  for (int level = 0; level < TIMER_WHEEL_LEVELS; level++)
    for (unsigned i = 0; i < TIMER_WHEEL_SLOTS; i++) w->level[level].min[i] = UINT64_MAX;
  w->overflow_min = UINT64_MAX;
}

void timer_wheel_node_init(timer_wheel_node *n) {
  n->next = n->prev = n;
}

void timer_wheel_add(timer_wheel *w, timer_wheel_node *n, uint64_t deadline) {
  n->deadline = deadline < w->now ? w->now : deadline;
  place(w, n);
  w->count++;
}

int timer_wheel_del(timer_wheel *w, timer_wheel_node *n) {
  if (n == NULL || n->next == n) return LPVM_EINVAL;
  unplace(w, n);
  w->count--;
  return 0;
}

size_t timer_wheel_advance(timer_wheel *w, uint64_t now, timer_wheel_fire_fn fn,
                           void *ud) {
  size_t fired = 0;
  if (now < w->now) now = w->now;
  for (;;) {
    fired += fire_due(w, fn, ud);
    if (w->now >= now) return fired;
    w->now = next_event(w, now);
    cascade(w);
  }
}

uint64_t timer_wheel_next(timer_wheel *w) {
  if (w->count == 0) return UINT64_MAX;
  for (int level = 0; level < TIMER_WHEEL_LEVELS; level++) {
    timer_wheel_level *L = &w->level[level];
    if (L->count == 0) continue;
    int i = first_set(L->occupied, digit(w->now, level));
    if (i < 0) break;
    /* A level-0 slot holds one exact millisecond. */
    if (level == 0) return (w->now & ~(uint64_t)(TIMER_WHEEL_SLOTS - 1)) | (uint64_t)i;
    if (L->min[i] == 0) L->min[i] = list_min(&L->slot[i]);
    return L->min[i];
  }
  if (w->overflow_min == 0) w->overflow_min = list_min(&w->overflow);
  return w->overflow_min;
}

static void drain_list(timer_wheel_list *l, timer_wheel_fire_fn fn, void *ud) {
  timer_wheel_node *n = l->head;
  l->head = l->tail = NULL;
  while (n) {
    timer_wheel_node *next = n->next;
    timer_wheel_node_init(n);
    fn(n, ud);
    n = next;
  }
}

void timer_wheel_drain(timer_wheel *w, timer_wheel_fire_fn fn, void *ud) {
  uint64_t now = w->now;
  for (int level = 0; level < TIMER_WHEEL_LEVELS; level++) {
    timer_wheel_level *L = &w->level[level];
    if (L->count == 0) continue;
    for (unsigned i = 0; i < TIMER_WHEEL_SLOTS; i++) drain_list(&L->slot[i], fn, ud);
  }
  drain_list(&w->overflow, fn, ud);
  /* Callbacks saw unlinked nodes only; start the (now empty) wheel afresh. */
  timer_wheel_init(w, now);
}
