/*
** test_timer_wheel.c -- the pure timing wheel, driven by a clock we own.
**
** Every fired node records the wheel's time when it fired: a node must fire exactly
** at its deadline (never early, never late) however the time was advanced.
*/
#include <criterion/criterion.h>
#include <stdlib.h>

#include "lpvm/lpvm.h"
#include "testutil.h"
#include "timers/wheel.h"

#define MINUTE (UINT64_C(60) * 1000)
#define HOUR   (60 * MINUTE)
#define DAY    (24 * HOUR)

typedef struct tnode {
  timer_wheel_node n;      /* first */
  uint64_t deadline;       /* effective deadline expected */
  uint64_t seq;            /* add order */
  uint64_t fired_at;
  int fired;
  int live;
} tnode;

typedef struct log {
  timer_wheel *w;
  tnode **order;
  size_t len, cap;
} log_t;

static void on_fire(timer_wheel_node *n, void *ud) {
  log_t *lg = ud;
  tnode *t = (tnode *)n;
  t->fired++;
  t->live = 0;
  t->fired_at = timer_wheel_now(lg->w);
  if (lg->len == lg->cap) {
    lg->cap = lg->cap ? 2 * lg->cap : 64;
    lg->order = realloc(lg->order, lg->cap * sizeof *lg->order);
    cr_assert_not_null(lg->order);
  }
  lg->order[lg->len++] = t;
}

static uint64_t rng_state = 88172645463325252u;
static uint64_t rnd(void) {  /* xorshift64: deterministic, seedable */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static uint64_t seq_counter;

static void add(timer_wheel *w, tnode *t, uint64_t deadline) {
  timer_wheel_add(w, &t->n, deadline);
  t->deadline = deadline < timer_wheel_now(w) ? timer_wheel_now(w) : deadline;
  t->seq = seq_counter++;
  t->live = 1;
  t->fired = 0;
}

/* Each fired node fired once, at its deadline, and the log is sorted by
** (deadline, add order). */
static void check_log(const log_t *lg) {
  for (size_t i = 0; i < lg->len; i++) {
    const tnode *t = lg->order[i];
    cr_assert_eq(t->fired, 1);
    cr_assert_eq(t->fired_at, t->deadline, "fired at %llu, deadline %llu",
                 (unsigned long long)t->fired_at, (unsigned long long)t->deadline);
    if (i > 0) {
      const tnode *p = lg->order[i - 1];
      cr_assert(p->deadline < t->deadline ||
                    (p->deadline == t->deadline && p->seq < t->seq),
                "out of order at %zu", i);
    }
  }
}

static void shuffle(tnode **v, size_t n) {
  for (size_t i = n; i > 1; i--) {
    size_t j = rnd() % i;
    tnode *x = v[i - 1];
    v[i - 1] = v[j];
    v[j] = x;
  }
}

static timer_wheel *new_wheel(uint64_t now) {
  timer_wheel *w = malloc(sizeof *w);
  cr_assert_not_null(w);
  timer_wheel_init(w, now);
  return w;
}

Test(timer_wheel, empty) {
  timer_wheel *w = new_wheel(5);
  log_t lg = {.w = w};
  cr_assert_eq(timer_wheel_next(w), UINT64_MAX);
  cr_assert_eq(timer_wheel_advance(w, 1000, on_fire, &lg), 0);
  cr_assert_eq(timer_wheel_now(w), 1000);
  cr_assert_eq(timer_wheel_advance(w, 10, on_fire, &lg), 0);
  cr_assert_eq(timer_wheel_now(w), 1000, "time never goes backwards");
  cr_assert_eq(timer_wheel_advance(w, UINT64_C(1) << 50, on_fire, &lg), 0);
  cr_assert_eq(timer_wheel_count(w), 0);
  free(w);
}

/* Deadlines on every level and the overflow, added shuffled, fired by one jump. */
Test(timer_wheel, order_across_levels) {
  static const uint64_t rel[] = {
      0, 1, 2, 255, 256, 257, 1000, 65535, 65536, 65537, 1u << 20, 1u << 24,
      (1u << 24) + 1, 1u << 30, UINT64_C(1) << 32, (UINT64_C(1) << 32) + 7,
      UINT64_C(1) << 39, UINT64_C(1) << 40, (UINT64_C(1) << 40) + 1,
      UINT64_C(1) << 45, 3 * DAY, 30 * DAY, 31 * DAY, 365 * DAY};
  enum { NREL = sizeof rel / sizeof rel[0], COPIES = 3 };
  const uint64_t start = 123456789;
  timer_wheel *w = new_wheel(start);
  log_t lg = {.w = w};
  tnode nodes[NREL * COPIES];
  tnode *v[NREL * COPIES];
  for (size_t i = 0; i < NREL * COPIES; i++) v[i] = &nodes[i];
  shuffle(v, NREL * COPIES);
  for (size_t i = 0; i < NREL * COPIES; i++)
    add(w, v[i], start + rel[(size_t)(v[i] - nodes) % NREL]);
  cr_assert_eq(timer_wheel_count(w), NREL * COPIES);
  cr_assert_eq(timer_wheel_next(w), start);
  timer_wheel_advance(w, start + (UINT64_C(1) << 46), on_fire, &lg);
  cr_assert_eq(lg.len, NREL * COPIES);
  cr_assert_eq(timer_wheel_count(w), 0);
  check_log(&lg);
  free(lg.order);
  free(w);
}

/* One millisecond at a time: exactly the right node fires at each step. */
Test(timer_wheel, step_by_step) {
  enum { N = 3000 };
  const uint64_t start = 1000003;
  timer_wheel *w = new_wheel(start);
  log_t lg = {.w = w};
  static tnode nodes[N];
  for (size_t i = 0; i < N; i++) add(w, &nodes[N - 1 - i], start + 1 + (N - 1 - i));
  for (size_t i = 0; i < N; i++) {
    cr_assert_eq(timer_wheel_next(w), start + 1 + i);
    cr_assert_eq(timer_wheel_advance(w, start + 1 + i, on_fire, &lg), 1);
    cr_assert_eq(lg.order[lg.len - 1], &nodes[i]);
  }
  check_log(&lg);
  free(lg.order);
  free(w);
}

/* Equal deadlines fire in start order, even when early starters sat on higher
** levels and later ones were placed straight onto lower levels. */
Test(timer_wheel, ties_keep_start_order_across_cascades) {
  const uint64_t start = 77;
  static const uint64_t deadline_rel[] = {300, 70000, 20000000, 5000000000u};
  for (size_t k = 0; k < sizeof deadline_rel / sizeof deadline_rel[0]; k++) {
    uint64_t d = start + deadline_rel[k];
    timer_wheel *w = new_wheel(start);
    log_t lg = {.w = w};
    enum { N = 40 };
    tnode nodes[N];
    for (size_t i = 0; i < N; i++) {
      add(w, &nodes[i], d);
      /* move the time toward d by uneven steps between adds */
      uint64_t now = timer_wheel_now(w);
      uint64_t step = (d - now) / 3 + (rnd() % 7);
      if (now + step < d) timer_wheel_advance(w, now + step, on_fire, &lg);
    }
    cr_assert_eq(lg.len, 0);
    timer_wheel_advance(w, d, on_fire, &lg);
    cr_assert_eq(lg.len, N);
    for (size_t i = 0; i < N; i++) cr_assert_eq(lg.order[i], &nodes[i]);
    free(lg.order);
    free(w);
  }
}

/* Minutes, hours, 30 days, more than 30 days, past the levels: each one fires
** exactly at its deadline, whether the time jumps or crawls. */
Test(timer_wheel, long_timers_cascade) {
  static const uint64_t dur[] = {MINUTE,        HOUR,           DAY,
                                 30 * DAY,      31 * DAY,       UINT64_C(1) << 32,
                                 60 * DAY,      3650 * DAY,     40 * 365 * DAY,
                                 UINT64_C(1) << 50};
  for (int mode = 0; mode < 3; mode++) {
    for (size_t k = 0; k < sizeof dur / sizeof dur[0]; k++) {
      const uint64_t start = 1000000007u + 13 * k;
      uint64_t d = start + dur[k];
      timer_wheel *w = new_wheel(start);
      log_t lg = {.w = w};
      tnode t;
      add(w, &t, d);
      cr_assert_eq(timer_wheel_next(w), d);
      if (mode == 1) {  /* random steps up to d - 1 */
        while (timer_wheel_now(w) < d - 1) {
          uint64_t left = d - 1 - timer_wheel_now(w);
          uint64_t step = 1 + rnd() % (left < 1000 ? left : left / 8);
          timer_wheel_advance(w, timer_wheel_now(w) + step, on_fire, &lg);
          cr_assert_eq(timer_wheel_next(w), d);
        }
      } else if (mode == 2) {  /* across every level boundary just before d */
        for (int b = 8; b <= 56; b += 8) {
          uint64_t edge = d & ~((UINT64_C(1) << b) - 1);
          if (edge > timer_wheel_now(w) && edge < d)
            timer_wheel_advance(w, edge, on_fire, &lg);
        }
      }
      timer_wheel_advance(w, d - 1, on_fire, &lg);
      cr_assert_eq(lg.len, 0, "fired early (k=%zu mode=%d)", k, mode);
      cr_assert_eq(timer_wheel_next(w), d);
      timer_wheel_advance(w, d, on_fire, &lg);
      cr_assert_eq(lg.len, 1, "did not fire (k=%zu mode=%d)", k, mode);
      check_log(&lg);
      free(lg.order);
      free(w);
    }
  }
}

/* Just before a 2^40 ms boundary even a one-hour timer is beyond the levels. */
Test(timer_wheel, overflow_boundary) {
  const uint64_t start = (UINT64_C(1) << 40) - 10;
  timer_wheel *w = new_wheel(start);
  log_t lg = {.w = w};
  tnode a, b, c;
  add(w, &a, start + HOUR);
  add(w, &b, start + 5);
  add(w, &c, (UINT64_C(1) << 41) + 5);
  cr_assert_eq(timer_wheel_next(w), start + 5);
  timer_wheel_advance(w, start + 20, on_fire, &lg);
  cr_assert_eq(lg.len, 1);
  cr_assert_eq(timer_wheel_next(w), start + HOUR);
  timer_wheel_advance(w, UINT64_C(1) << 42, on_fire, &lg);
  cr_assert_eq(lg.len, 3);
  check_log(&lg);
  free(lg.order);
  free(w);
}

static uint64_t brute_min(tnode *v, size_t n) {
  uint64_t m = UINT64_MAX;
  for (size_t i = 0; i < n; i++)
    if (v[i].live && v[i].deadline < m) m = v[i].deadline;
  return m;
}

/* Delete from every level and the overflow; next() stays exact throughout. */
Test(timer_wheel, delete_from_every_level) {
  static const uint64_t rel[] = {0, 3, 200, 300, 60000, 70000, 1u << 20, 1u << 25,
                                 UINT64_C(1) << 33, UINT64_C(1) << 39,
                                 UINT64_C(1) << 41, UINT64_C(1) << 60};
  enum { NREL = sizeof rel / sizeof rel[0], COPIES = 4, N = NREL * COPIES };
  const uint64_t start = 999;
  timer_wheel *w = new_wheel(start);
  log_t lg = {.w = w};
  tnode nodes[N];
  for (size_t i = 0; i < N; i++) add(w, &nodes[i], start + rel[i % NREL] + i / NREL);
  tnode *v[N];
  for (size_t i = 0; i < N; i++) v[i] = &nodes[i];
  shuffle(v, N);
  for (size_t i = 0; i < N; i++) {
    cr_assert_eq(timer_wheel_next(w), brute_min(nodes, N));
    cr_assert_eq(timer_wheel_del(w, &v[i]->n), 0);
    v[i]->live = 0;
    cr_assert_eq(timer_wheel_count(w), N - 1 - i);
  }
  cr_assert_eq(timer_wheel_next(w), UINT64_MAX);
  cr_assert_eq(timer_wheel_del(w, &nodes[0].n), LPVM_EINVAL, "double delete");
  timer_wheel_node fresh;
  timer_wheel_node_init(&fresh);
  cr_assert_eq(timer_wheel_del(w, &fresh), LPVM_EINVAL);
  cr_assert_eq(timer_wheel_del(w, NULL), LPVM_EINVAL);
  timer_wheel_advance(w, UINT64_C(1) << 62, on_fire, &lg);
  cr_assert_eq(lg.len, 0);
  free(w);
}

/* next() after deleting the earliest node of a crowded higher-level slot. */
Test(timer_wheel, next_exact_after_deleting_min) {
  enum { N = 500 };
  const uint64_t start = 0;
  timer_wheel *w = new_wheel(start);
  static tnode nodes[N];
  for (size_t i = 0; i < N; i++) add(w, &nodes[i], 70000 + rnd() % 256);  /* one slot */
  for (size_t i = 0; i < N; i++) {
    uint64_t m = brute_min(nodes, N);
    cr_assert_eq(timer_wheel_next(w), m);
    for (size_t j = 0; j < N; j++)
      if (nodes[j].live && nodes[j].deadline == m) {
        timer_wheel_del(w, &nodes[j].n);
        nodes[j].live = 0;
        break;
      }
  }
  cr_assert_eq(timer_wheel_next(w), UINT64_MAX);
  free(w);
}

Test(timer_wheel, past_deadline_fires_at_next_advance) {
  timer_wheel *w = new_wheel(0);
  log_t lg = {.w = w};
  timer_wheel_advance(w, 1000, on_fire, &lg);
  tnode a, b;
  add(w, &a, 5);
  add(w, &b, 1000);
  cr_assert_eq(a.n.deadline, 1000);
  cr_assert_eq(timer_wheel_next(w), 1000);
  cr_assert_eq(timer_wheel_advance(w, 1000, on_fire, &lg), 2);
  check_log(&lg);
  free(lg.order);
  free(w);
}

/* Callbacks may re-add their node, add due nodes, and delete nodes not yet fired. */
typedef struct cbctx {
  log_t lg;
  tnode *victim;
  tnode *extra;
  int rearms;
} cbctx;

static void on_fire_mutating(timer_wheel_node *n, void *ud) {
  cbctx *c = ud;
  tnode *t = (tnode *)n;
  on_fire(n, &c->lg);
  if (t->seq == 0 && c->rearms < 10) {  /* periodic node */
    c->rearms++;
    timer_wheel_add(c->lg.w, n, timer_wheel_now(c->lg.w) + 10);
    t->deadline = timer_wheel_now(c->lg.w) + 10;
    t->fired = 0;
    t->live = 1;
  }
  if (c->victim && c->victim->live) {
    cr_assert_eq(timer_wheel_del(c->lg.w, &c->victim->n), 0);
    c->victim->live = 0;
    c->victim = NULL;
  }
  if (c->extra) {  /* due now: must fire in this same advance */
    tnode *e = c->extra;
    c->extra = NULL;
    timer_wheel_add(c->lg.w, &e->n, 0);
    e->deadline = timer_wheel_now(c->lg.w);
    e->seq = seq_counter++;
  }
}

Test(timer_wheel, callbacks_modify_wheel) {
  seq_counter = 0;
  timer_wheel *w = new_wheel(0);
  cbctx c = {.lg = {.w = w}};
  tnode periodic = {0}, victim = {0}, extra = {0};
  add(w, &periodic, 10);  /* seq 0 */
  add(w, &victim, 10);    /* same tick, after periodic: deleted before it fires */
  c.victim = &victim;
  c.extra = &extra;
  timer_wheel_advance(w, 1000, on_fire_mutating, &c);
  cr_assert_eq(victim.fired, 0);
  cr_assert_eq(extra.fired, 1);
  cr_assert_eq(extra.fired_at, 10);
  cr_assert_eq(c.rearms, 10);
  cr_assert_eq(c.lg.len, 12);  /* periodic 11 times + extra */
  cr_assert_eq(timer_wheel_count(w), 0);
  free(c.lg.order);
  free(w);
}

/* Random adds, deletes and advances against a brute-force model. */
static int cmp_node(const void *x, const void *y) {
  const tnode *a = *(tnode *const *)x, *b = *(tnode *const *)y;
  if (a->deadline != b->deadline) return a->deadline < b->deadline ? -1 : 1;
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

Test(timer_wheel, random_against_model) {
  enum { N = 600 };
  size_t ops = test_scaled(30000, 3000);
  static tnode nodes[N];
  static tnode *expect[N];
  rng_state = 12345;
  for (size_t i = 0; i < N; i++) timer_wheel_node_init(&nodes[i].n);
  uint64_t start = (UINT64_C(1) << 40) - 5000000;  /* crosses a 2^40 boundary */
  timer_wheel *w = new_wheel(start);
  log_t lg = {.w = w};
  static const uint64_t scale[] = {10, 300, 70000, 20000000, UINT64_C(1) << 34};
  for (size_t op = 0; op < ops; op++) {
    tnode *t = &nodes[rnd() % N];
    uint64_t r = rnd() % 10;
    if (r < 5) {
      if (t->live) continue;
      uint64_t now = timer_wheel_now(w);
      uint64_t rel = rnd() % scale[rnd() % 5];
      add(w, t, rnd() % 16 == 0 && now > 3 ? now - 3 : now + rel);
    } else if (r < 7) {
      if (!t->live) {
        cr_assert_eq(timer_wheel_del(w, &t->n), LPVM_EINVAL);
        continue;
      }
      cr_assert_eq(timer_wheel_del(w, &t->n), 0);
      t->live = 0;
    } else {
      uint64_t to = timer_wheel_now(w) + rnd() % scale[rnd() % 5];
      size_t ne = 0;
      for (size_t i = 0; i < N; i++)
        if (nodes[i].live && nodes[i].deadline <= to) expect[ne++] = &nodes[i];
      qsort(expect, ne, sizeof *expect, cmp_node);
      lg.len = 0;
      cr_assert_eq(timer_wheel_advance(w, to, on_fire, &lg), ne);
      for (size_t i = 0; i < ne; i++) cr_assert_eq(lg.order[i], expect[i], "op %zu", op);
      check_log(&lg);
    }
    cr_assert_eq(timer_wheel_next(w), brute_min(nodes, N), "op %zu", op);
  }
  free(lg.order);
  free(w);
}

/* A million pending timers (fewer under sanitizers), half deleted, the rest fired
** in order while the time advances by uneven jumps over three days. */
Test(timer_wheel, million_pending) {
  size_t n = test_scaled(1000000, 20000);
  tnode *nodes = calloc(n, sizeof *nodes);
  cr_assert_not_null(nodes);
  rng_state = 999;
  const uint64_t start = 5000;
  timer_wheel *w = new_wheel(start);
  log_t lg = {.w = w};
  uint64_t min = UINT64_MAX;
  for (size_t i = 0; i < n; i++) {
    uint64_t d = start + 1 + rnd() % (3 * DAY);
    add(w, &nodes[i], d);
    if (d < min) min = d;
  }
  cr_assert_eq(timer_wheel_count(w), n);
  cr_assert_eq(timer_wheel_next(w), min);
  size_t deleted = 0;
  for (size_t i = 0; i < n; i += 2) {
    cr_assert_eq(timer_wheel_del(w, &nodes[i].n), 0);
    nodes[i].live = 0;
    deleted++;
  }
  uint64_t end = start + 3 * DAY + 1;
  while (timer_wheel_now(w) < end) {
    uint64_t next = timer_wheel_next(w);
    cr_assert_geq(next, timer_wheel_now(w));
    uint64_t step = 1 + rnd() % (2 * HOUR);
    timer_wheel_advance(w, timer_wheel_now(w) + step, on_fire, &lg);
  }
  cr_assert_eq(lg.len, n - deleted);
  cr_assert_eq(timer_wheel_count(w), 0);
  check_log(&lg);
  for (size_t i = 0; i < n; i++) cr_assert_eq(nodes[i].fired, i % 2);
  free(lg.order);
  free(nodes);
  free(w);
}

static void count_drained(timer_wheel_node *n, void *ud) {
  (void)n;
  (*(size_t *)ud)++;
}

Test(timer_wheel, drain_unlinks_everything) {
  timer_wheel *w = new_wheel(42);
  enum { N = 100 };
  tnode nodes[N];
  for (size_t i = 0; i < N; i++) add(w, &nodes[i], 42 + (UINT64_C(1) << (i % 60)));
  size_t drained = 0;
  timer_wheel_drain(w, count_drained, &drained);
  cr_assert_eq(drained, N);
  cr_assert_eq(timer_wheel_count(w), 0);
  cr_assert_eq(timer_wheel_next(w), UINT64_MAX);
  cr_assert_eq(timer_wheel_now(w), 42);
  for (size_t i = 0; i < N; i++) cr_assert_eq(timer_wheel_del(w, &nodes[i].n), LPVM_EINVAL);
  free(w);
}
