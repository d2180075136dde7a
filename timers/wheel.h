/*
** wheel.h -- a hierarchical hashed timing wheel (Varghese and Lauck 1987).
**
** Pure and single-threaded: no clock, no lock, no allocation. Time is a number of
** milliseconds given by the caller, so a test can drive days of time in one call.
**
** Five levels of 256 slots. A node lives on the level of the highest bit in which
** its deadline differs from the wheel's current time (bits 0-7: level 0, bits 8-15:
** level 1, ... bits 32-39: level 4), in the slot named by its deadline's digit of
** that level. So level 0 holds exact milliseconds, every node of a lower level is
** due before every node of a higher one, and a node moves down (cascades) exactly
** when the time reaches the start of its slot. The levels reach the next 2^40 ms
** boundary (34 years away, more than 30 days away except in the 30 days before such
** a boundary); deadlines past it wait on an overflow list that is re-placed each
** time the time crosses one.
**
** Nodes are intrusive and doubly linked: add and delete are O(1); advancing costs
** O(fired + cascaded) plus a few bitmap probes per occupied slot it passes, however
** far the time jumps.
*/
#ifndef LPVM_TIMER_WHEEL_H
#define LPVM_TIMER_WHEEL_H

#include <stddef.h>
#include <stdint.h>

#define TIMER_WHEEL_BITS   8
#define TIMER_WHEEL_SLOTS  (1u << TIMER_WHEEL_BITS)
#define TIMER_WHEEL_LEVELS 5
#define TIMER_WHEEL_WORDS  (TIMER_WHEEL_SLOTS / 64)

/* Embed one in whatever record needs a deadline. `deadline` is the wheel's: read
** it, but set it only through timer_wheel_add. A node is either in one wheel or
** unlinked (next == prev == itself). */
typedef struct timer_wheel_node {
  struct timer_wheel_node *next, *prev;
  uint64_t deadline;
} timer_wheel_node;

typedef struct timer_wheel_list {
  timer_wheel_node *head, *tail;
} timer_wheel_list;

typedef struct timer_wheel_level {
  uint64_t occupied[TIMER_WHEEL_WORDS];   /* bit i: slot i is non-empty */
  size_t count;
  timer_wheel_list slot[TIMER_WHEEL_SLOTS];
  /* Earliest deadline in each slot (levels >= 1): UINT64_MAX when empty, 0 when
  ** unknown because its earliest node was deleted (found again on demand). */
  uint64_t min[TIMER_WHEEL_SLOTS];
} timer_wheel_level;

typedef struct timer_wheel {
  uint64_t now;           /* every deadline <= now has fired */
  size_t count;
  timer_wheel_level level[TIMER_WHEEL_LEVELS];
  timer_wheel_list overflow;
  size_t overflow_count;
  uint64_t overflow_min;  /* same convention as level min[] */
} timer_wheel;

/* Called for each due node, already unlinked: the callback may free it, add it
** again, or add and delete other nodes. */
typedef void (*timer_wheel_fire_fn)(timer_wheel_node *n, void *ud);

/* The wheel starts at time `now`. It holds no memory of its own: drop it with
** timer_wheel_drain (or just forget it once it is empty). */
void timer_wheel_init(timer_wheel *w, uint64_t now);

/* Mark a node unlinked, so timer_wheel_del on it is harmless. */
void timer_wheel_node_init(timer_wheel_node *n);

/* Add an unlinked node. A deadline already past counts as `now`: the node fires at
** the next advance. Nodes with equal deadlines fire in the order they were added. */
void timer_wheel_add(timer_wheel *w, timer_wheel_node *n, uint64_t deadline);

/* Remove a node: 0, or LPVM_EINVAL if it was not linked (fired or deleted). */
int timer_wheel_del(timer_wheel *w, timer_wheel_node *n);

/* Move the time to `now` (never backwards) and fire every node whose deadline is
** <= now, in deadline order; ties in the order they were added. Returns the number
** fired. */
size_t timer_wheel_advance(timer_wheel *w, uint64_t now, timer_wheel_fire_fn fn,
                           void *ud);

/* Earliest deadline in the wheel, or UINT64_MAX when empty. O(1) in the common
** case; after the earliest node of a higher-level slot was deleted it rescans that
** one slot once. */
uint64_t timer_wheel_next(timer_wheel *w);

/* Unlink every node, calling fn on each (in no particular order); fn must not add
** to this wheel. The wheel is then empty, its time unchanged. */
void timer_wheel_drain(timer_wheel *w, timer_wheel_fire_fn fn, void *ud);

static inline size_t timer_wheel_count(const timer_wheel *w) { return w->count; }
static inline uint64_t timer_wheel_now(const timer_wheel *w) { return w->now; }

#endif
