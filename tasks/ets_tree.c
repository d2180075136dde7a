/*
** ets_tree.c -- ordered_set: an AVL tree of objects in Erlang's term order (keys
** compared with ==, so 1 and 1.0 are the same key, as in ETS).
**
** The object is the node: link[0] and link[1] are the children and `hash` holds the
** subtree height. Everything runs under the table lock (readers shared, writers
** exclusive), so the tree needs no synchronisation of its own; ETS uses a contention
** adapting tree here instead (docs/architecture.md says why lpvm does not).
** Heights stay below 1.44 log2(n) + 2, so the recursion of insert/remove is shallow.
*/
#include <stdlib.h>
#include <string.h>

#include "tasks/ets_int.h"

#define H(o) ((o) ? (int)(o)->hash : 0)

/* A 32-bit integer term (SMALL_INTEGER_EXT or INTEGER_EXT) filling [p, end)? */
static inline int int32_key(const uint8_t *p, const uint8_t *end, int64_t *v) {
  if (end - p == 2 && p[0] == TAG_SMALL_INT) { *v = p[1]; return 1; }
  if (end - p == 5 && p[0] == TAG_INT) { *v = (int32_t)term_be32(p + 1); return 1; }
  return 0;
}

/* Term order (==). The walk compares a key with ~log2(n) others per step, so the
** common keys, two integers or two binaries, are compared here, the rest by
** term_cmp (binaries: bytewise, a prefix first, as Erlang orders them). */
static inline int kcmp(const ets_key *k, const ets_obj *o) {
  const uint8_t *a = k->p, *b = obj_key(o), *bend = obj_key_end(o);
  int64_t x, y;
  if (int32_key(a, k->end, &x) && int32_key(b, bend, &y)) return (x > y) - (x < y);
  if (a[0] == TAG_BINARY && b[0] == TAG_BINARY && k->end - a >= 5 && bend - b >= 5) {
    size_t la = term_be32(a + 1), lb = term_be32(b + 1);
    if (la == (size_t)(k->end - a) - 5 && lb == (size_t)(bend - b) - 5) {
      int c = memcmp(a + 5, b + 5, la < lb ? la : lb);
      return c ? (c > 0) - (c < 0) : (la > lb) - (la < lb);
    }
  }
  return term_cmp(a, k->end, b, bend, 0);
}

/* kcmp for a key already read as the 32-bit integer x (the walk's common case: the key
** is parsed once, not once per level). */
static inline int kcmp_int(int64_t x, const ets_key *k, const ets_obj *o) {
  int64_t y;
  if (int32_key(obj_key(o), obj_key_end(o), &y)) return (x > y) - (x < y);
  return kcmp(k, o);
}

static void fix(ets_obj *o) {
  int l = H(o->link[0]), r = H(o->link[1]);
  o->hash = (uint64_t)(1 + (l > r ? l : r));
}

static ets_obj *rot(ets_obj *o, int dir) {   /* dir 0: rotate left */
  ets_obj *x = o->link[!dir];
  o->link[!dir] = x->link[dir];
  x->link[dir] = o;
  fix(o);
  fix(x);
  return x;
}

static ets_obj *balance(ets_obj *o) {
  fix(o);
  int bf = H(o->link[0]) - H(o->link[1]);
  if (bf > 1) {
    if (H(o->link[0]->link[0]) < H(o->link[0]->link[1])) o->link[0] = rot(o->link[0], 0);
    return rot(o, 1);
  }
  if (bf < -1) {
    if (H(o->link[1]->link[1]) < H(o->link[1]->link[0])) o->link[1] = rot(o->link[1], 1);
    return rot(o, 0);
  }
  return o;
}

ets_obj *tree_find(ets_tab *t, const ets_key *k) {
  ets_obj *o = t->root;
  int64_t x;
  int is_int = int32_key(k->p, k->end, &x);
  while (o) {
    int c = is_int ? kcmp_int(x, k, o) : kcmp(k, o);
    if (c == 0) return o;
    o = o->link[c > 0];
  }
  return NULL;
}

static ets_obj *ins(ets_obj *o, ets_obj *n, ets_obj **old) {
  if (!o) {
    n->link[0] = n->link[1] = NULL;
    n->hash = 1;
    return n;
  }
  ets_key k = {obj_key(n), obj_key_end(n), 0};
  int c = kcmp(&k, o);
  if (c == 0) {   /* replace: n takes o's place and shape */
    n->link[0] = o->link[0];
    n->link[1] = o->link[1];
    n->hash = o->hash;
    *old = o;
    return n;
  }
  o->link[c > 0] = ins(o->link[c > 0], n, old);
  return balance(o);
}

void tree_put(ets_tab *t, ets_obj *o, ets_obj **old) {
  *old = NULL;
  t->tree_version++;
  t->root = ins(t->root, o, old);
  long dmem = (long)obj_size(o) - (*old ? (long)obj_size(*old) : 0);
  ets_count(t, t->stripes, *old ? 0 : 1, dmem);
}

/* Unlink the smallest node of a subtree into *min. */
static ets_obj *take_min(ets_obj *o, ets_obj **min) {
  if (!o->link[0]) {
    *min = o;
    return o->link[1];
  }
  o->link[0] = take_min(o->link[0], min);
  return balance(o);
}

static ets_obj *del(ets_obj *o, const ets_key *k, ets_obj **gone) {
  if (!o) return NULL;
  int c = kcmp(k, o);
  if (c != 0) {
    o->link[c > 0] = del(o->link[c > 0], k, gone);
    return balance(o);
  }
  *gone = o;
  if (!o->link[0]) return o->link[1];
  if (!o->link[1]) return o->link[0];
  ets_obj *m;
  ets_obj *r = take_min(o->link[1], &m);
  m->link[0] = o->link[0];
  m->link[1] = r;
  return balance(m);
}

ets_obj *tree_remove_key(ets_tab *t, const ets_key *k) {
  ets_obj *gone = NULL;
  t->tree_version++;
  t->root = del(t->root, k, &gone);
  if (gone) {
    gone->link[0] = gone->link[1] = NULL;
    ets_count(t, t->stripes, -1, -(long)obj_size(gone));
  }
  return gone;
}

/* ---- the walk's hint ------------------------------------------------------------------ */

/* A walk (first, then next again and again) asks for the key beside the one it was
** just given, ~log2(n) comparisons from the root each time (~400 instructions of a
** step at 1,000 objects). So each thread keeps the path from the root to the node it
** last returned, with the table, its id, root and shape version (tree_version): when
** the next call names that node's very key bytes on the same tree, unchanged, the
** neighbour is found from the path (the extreme of the subtree on that side, or the
** nearest ancestor on it) and the path moves there. The tree is read under the table
** lock, shared, and its shape changes only under it alone, so an unchanged version
** means every node on the path is still there, linked as it was. Anything else (the
** key not the last one returned, a write since, another table or thread) searches
** from the root and records the new path. */
#define HINT_DEPTH 96   /* an AVL tree of 2^40 objects is < 60 deep */

typedef struct walk_hint {
  const ets_tab *t;
  lpvm_tab tid;
  uint64_t version;
  const ets_obj *root;
  int n;   /* path[0] is the root, path[n - 1] the node last returned; 0: no hint */
  const ets_obj *path[HINT_DEPTH];
} walk_hint;

static _Thread_local walk_hint hint;

static void hint_keep(ets_tab *t, int n) {
  hint.t = t;
  hint.tid = atomic_load_explicit(&t->tid, memory_order_relaxed);
  hint.version = t->tree_version;
  hint.root = t->root;
  hint.n = n;
}

/* Is the hint's last node k's very bytes, on t as it was? */
static inline int hint_at(const ets_tab *t, const ets_key *k) {
  if (!hint.n || hint.t != t || hint.version != t->tree_version || hint.root != t->root ||
      hint.tid != atomic_load_explicit(&t->tid, memory_order_relaxed))
    return 0;
  const ets_obj *last = hint.path[hint.n - 1];
  size_t len = (size_t)(k->end - k->p);
  return len == last->key_len && memcmp(k->p, obj_key(last), len) == 0;
}

/* From the hint's last node, its neighbour after (dir 1) or before (dir 0), the path
** moved to it: 1, and *out; 0, none (the path dropped); -1, the path would grow past
** HINT_DEPTH (search from the root). */
static int hint_step(int dir, const ets_obj **out) {
  const ets_obj *o = hint.path[hint.n - 1];
  if (o->link[dir]) {   /* the extreme of that subtree, towards us */
    for (o = o->link[dir]; ; o = o->link[!dir]) {
      if (hint.n == HINT_DEPTH) return hint.n = 0, -1;
      hint.path[hint.n++] = o;
      if (!o->link[!dir]) break;
    }
    *out = o;
    return 1;
  }
  while (hint.n > 1) {   /* the nearest ancestor we lie on the other side of */
    const ets_obj *child = hint.path[--hint.n];
    const ets_obj *parent = hint.path[hint.n - 1];
    if (parent->link[!dir] == child) {
      *out = parent;
      return 1;
    }
  }
  hint.n = 0;
  return 0;
}

static int put_end(ets_tab *t, int dir, lpvm_tbuf *out) {
  ets_obj *o = t->root;
  int n = 0;
  if (!o) return 0;
  for (;; o = o->link[dir]) {
    if (n < HINT_DEPTH) hint.path[n] = o;
    n++;
    if (!o->link[dir]) break;
  }
  if (n <= HINT_DEPTH) hint_keep(t, n);
  else hint.n = 0;
  term_put_raw(out, obj_key(o), o->key_len);
  return 1;
}

int tree_first_key(ets_tab *t, lpvm_tbuf *out) { return put_end(t, 0, out); }
int tree_last_key(ets_tab *t, lpvm_tbuf *out) { return put_end(t, 1, out); }

/* The nearest key strictly after (dir 1) or before (dir 0) k. */
static int neighbour(ets_tab *t, const ets_key *k, int dir, lpvm_tbuf *out) {
  const ets_obj *best = NULL;
  if (hint_at(t, k)) {
    int r = hint_step(dir, &best);
    if (r == 0) return 0;
    if (r > 0) {
      term_put_raw(out, obj_key(best), best->key_len);
      return 1;
    }
  }
  ets_obj *o = t->root;
  int n = 0, at = 0;   /* the nodes passed, kept in the hint's path; best's place */
  int64_t x;
  int is_int = int32_key(k->p, k->end, &x);
  while (o) {
    if (n < HINT_DEPTH) hint.path[n] = o;
    n++;
    int c = is_int ? kcmp_int(x, k, o) : kcmp(k, o);
    if (dir ? c < 0 : c > 0) {
      best = o;
      at = n;
      o = o->link[!dir];
    } else {
      o = o->link[dir];
    }
  }
  if (!best || at > HINT_DEPTH) hint.n = 0;
  else hint_keep(t, at);   /* the path to best: a prefix of the nodes passed */
  if (!best) return 0;
  term_put_raw(out, obj_key(best), best->key_len);
  return 1;
}

int tree_after_key(ets_tab *t, const ets_key *k, lpvm_tbuf *out) {
  return neighbour(t, k, 1, out);
}

int tree_before_key(ets_tab *t, const ets_key *k, lpvm_tbuf *out) {
  return neighbour(t, k, 0, out);
}

/* In order with an explicit stack (an AVL tree of 2^40 objects is < 60 deep). */
int tree_walk(ets_tab *t, int (*fn)(ets_tab *t, ets_obj *o, void *ud), void *ud) {
  ets_obj *stack[96];
  int sp = 0;
  ets_obj *o = t->root;
  for (;;) {
    while (o) { stack[sp++] = o; o = o->link[0]; }
    if (sp == 0) return 0;
    o = stack[--sp];
    int r = fn(t, o, ud);
    if (r) return r;
    o = o->link[1];
  }
}

void tree_free(ets_obj *root) {
  while (root) {   /* rotate left children up: linear and stackless */
    if (root->link[0]) {
      ets_obj *l = root->link[0];
      root->link[0] = l->link[1];
      l->link[1] = root;
      root = l;
    } else {
      ets_obj *r = root->link[1];
      free(root);
      root = r;
    }
  }
}
