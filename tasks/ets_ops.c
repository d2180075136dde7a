/*
** ets_ops.c -- the object operations of ets.h: insert, lookup, delete, counters,
** element updates and walking.
**
** The shape of every call: check and prepare outside any lock (parse the term, build
** the new objects, hash the key), lock as little as the table allows (ets_enter, plus
** the key's stripe on write_concurrency tables), copy bytes in or out, unlock, and
** only then free what was replaced. Nothing allocated by the caller's language runs
** under a lock, so an error there can never leave a table locked.
*/
#include <stdlib.h>
#include <string.h>

#include "tasks/ets_int.h"

/* ---- keys, locks and lists --------------------------------------------------------- */

/* Enter the table for a single-key operation: wr 0 read, 1 write; *st is the key's
** stripe when the table has stripes (locked), else NULL; *fast: entered by the stripe
** alone (ets_fast_enter, read_concurrency + write_concurrency tables), else through
** the table lock. Inline wherever used (a lookup's whole lock work is these two; as
** calls they cost it ~40 instructions). */
static inline __attribute__((always_inline)) int key_enter(lpvm_task *self, lpvm_tab tab,
                                                           int wr, const ets_key *k,
                                                           ets_tab **out,
                                                           ets_stripe **st, int *fast) {
  if ((*fast = ets_fast_enter(self, tab, wr, k->h, out, st))) return 0;
  int rc = ets_enter(self, tab, wr, wr, out);
  *st = NULL;
  if (rc == 0 && (*out)->nstripes > 1) {
    ets_stripe *s = *st = ets_stripe_of(*out, k->h);
    if (wr) ets_stripe_wrlock(*out, s);
    else ets_stripe_rdlock(*out, s);
  }
  return rc;
}

static inline __attribute__((always_inline)) void key_leave(ets_tab *t, int wr,
                                                            ets_stripe *st, int fast) {
  if (fast) {
    ets_fast_leave(t, wr, st);
    return;
  }
  if (st) {
    if (wr) ets_stripe_wrunlock(t, st);
    else ets_stripe_rdunlock(t, st);
  }
  ets_leave(t);
}

/* After a write: grow or shrink the buckets if the key's stripe says so (the test
** inline: most writes do not). */
static void resize_now(lpvm_task *self, lpvm_tab tab) {
  ets_tab *t;
  if (ets_enter(self, tab, 2, -1, &t)) return;
  ets_stripe all = {.count = ets_size(t)};
  if (tab_is_hash(t) && ets_wants_resize(t, &all)) ets_resize(t);
  ets_leave(t);
}

static inline void maybe_resize(lpvm_task *self, lpvm_tab tab, int wants) {
  if (wants) resize_now(self, tab);
}

static int wants_resize(ets_tab *t, uint64_t h) {
  if (!tab_is_hash(t)) return 0;
  ets_stripe *s = ets_stripe_of(t, h);
  if (t->nstripes == 1) return ets_wants_resize(t, s);
  ets_stripe est = {.count = atomic_load_explicit(&s->count, memory_order_relaxed)};
  return ets_wants_resize(t, &est);
}

static void free_chain(ets_obj *o) {
  for (ets_obj *nx; o; o = nx) {
    nx = o->link[0];
    free(o);
  }
}

/* A list whose length is known only at its end: a LIST header to patch. */
size_t ets_list_open(lpvm_tbuf *out) {
  size_t mark = out->len;
  lpvm_put_list(out, 1);
  return mark;
}

void ets_list_close(lpvm_tbuf *out, size_t mark, uint32_t n) {
  if (out->err) return;
  if (n == 0) out->len = mark;   /* [] is NIL alone */
  else {
    uint8_t *q = out->data + mark + 1;
    q[0] = (uint8_t)(n >> 24); q[1] = (uint8_t)(n >> 16);
    q[2] = (uint8_t)(n >> 8); q[3] = (uint8_t)n;
  }
  lpvm_put_nil(out);
}

static void put_obj(lpvm_tbuf *out, const ets_obj *o) {
  term_put_raw(out, o->data + 1, o->len - 1);
}

static int out_rc(lpvm_tbuf *out, int rc) { return out && out->err ? out->err : rc; }

/* ---- insert -------------------------------------------------------------------------- */

/* The objects of a term: one tuple, or a list of tuples; in `stack` when they fit,
** else in a malloc'd array (free_objs knows which). */
#define OBJS_STACK 8

/* How many objects a checked term holds (-1: neither a tuple nor a list). */
static long count_objs(const uint8_t *term, size_t len) {
  lpvm_tread r;
  uint32_t n;
  if (lpvm_tread_init(&r, term, len)) return -1;
  switch (lpvm_get_type(&r)) {
    case LPVM_T_NIL: return 0;
    case LPVM_T_TUPLE: return 1;
    case LPVM_T_LIST: return lpvm_get_list(&r, &n) ? -1 : (long)n;
    default: return -1;
  }
}

/* With the table entered (its keypos and type are fixed while it lives). */
static int build_objs(ets_tab *t, const uint8_t *term, size_t len, ets_obj **stack,
                      ets_obj ***objs, uint32_t *n) {
  lpvm_tread r;
  uint32_t count = 1;
  *objs = stack;
  *n = 0;
  lpvm_tread_init(&r, term, len);
  int type = lpvm_get_type(&r);
  if (type == LPVM_T_NIL) return 0;
  if (type == LPVM_T_LIST) lpvm_get_list(&r, &count);
  ets_obj **v = count <= OBJS_STACK ? stack : malloc(count * sizeof *v);
  if (!v) return LPVM_ENOMEM;
  int rc = 0;
  uint32_t i = 0;
  if (type == LPVM_T_TUPLE) {   /* one tuple: the checked term ends where it does */
    rc = ets_obj_new(t, r.p, r.end, &v[0]);
    i = rc == 0;
  }
  for (; i < count && type != LPVM_T_TUPLE; i++) {
    const uint8_t *p = r.p;
    if (lpvm_skip(&r)) { rc = LPVM_EBADTERM; break; }
    if ((rc = ets_obj_new(t, p, r.p, &v[i])) != 0) break;
  }
  if (rc == 0 && type == LPVM_T_LIST && lpvm_get_nil(&r)) rc = LPVM_ETS_EOBJECT;
  *objs = v;
  *n = rc ? i : count;
  return rc;
}

/* Free the objects left in the array (NULL entries: taken by the table), and it. */
static void free_objs(ets_obj **v, uint32_t n, ets_obj **stack) {
  for (uint32_t i = 0; i < n; i++) free(v[i]);
  if (v != stack) free(v);
}

/* One tuple (no version byte) at p, located (l), into a set or ordered_set, with the
** table entered for a single-key write and the key's stripe (st, or NULL) locked: by
** the stripe alone when fast (ets_fast_enter); o is what ets_find gave for its key,
** under those locks. An object of the same size under the key is overwritten where
** it is (the key's write lock keeps every reader out): no allocation, nothing to
** free, and no change to the table's shape or counts. Else a new object replaces it. */
static int insert_found(lpvm_task *self, lpvm_tab tab, ets_tab *t, const uint8_t *p,
                        const ets_loc *l, ets_stripe *st, int fast, ets_obj *o) {
  ets_obj *old = NULL;
  int wants = 0, rc = 0;
  if (o && o->len == l->len) {
    ets_obj_fill(o, p, l);
  } else if ((o = ets_obj_make(p, l)) != NULL) {
    ets_put(t, o, &old);
    wants = wants_resize(t, l->hash);
  } else {
    rc = LPVM_ENOMEM;
  }
  key_leave(t, 1, st, fast);
  maybe_resize(self, tab, wants);
  if (old) free(old);
  return rc;
}

static int insert_one(lpvm_task *self, lpvm_tab tab, ets_tab *t, const uint8_t *p,
                      const ets_loc *l, ets_stripe *st, int fast) {
  ets_key k = {p + l->key_off - 1, p + l->key_off - 1 + l->key_len, l->hash};
  return insert_found(self, tab, t, p, l, st, fast, ets_find(t, &k));
}

/* The objects are built once the table is entered, so the table's shape is read
** under its lock with no extra lock round trip; only then is the key's stripe known
** (write_concurrency). One object: a single-key write; several: the table alone.
** (A flat tuple was first offered to a read_concurrency + write_concurrency set by
** its stripe alone: lpvm_ets_insert.) */
static int do_insert(lpvm_task *self, lpvm_tab tab, const uint8_t *term, size_t len,
                     int only_new) {
  ets_tab *t;
  ets_obj *stack[OBJS_STACK], **objs = stack;
  uint32_t n = 0;
  const uint8_t *first_end;
  if (ets_term_check_flat(term, len, &first_end)) return LPVM_EBADTERM;
  ets_stripe *st;
  ets_loc l;
  /* (a checked term has a tag after its version byte) */
  long count = term[1] == TAG_SMALL_TUPLE ? 1 : count_objs(term, len);
  if (count < 0) return LPVM_ETS_EOBJECT;
  int rc = count == 1 ? ets_enter(self, tab, 1, 1, &t)   /* each inline, its own way */
                      : ets_enter(self, tab, 2, 1, &t);
  if (rc) return rc;
  if (count == 1 && !only_new && !tab_is_bag(t)) {
    if ((rc = ets_obj_locate_flat(t, term + 1, term + len, first_end, &l)) != 0) {
      ets_leave(t);
      return rc;
    }
    st = t->nstripes > 1 ? ets_stripe_of(t, l.hash) : NULL;
    if (st) ets_stripe_wrlock(t, st);
    return insert_one(self, tab, t, term + 1, &l, st, 0);
  }
  rc = build_objs(t, term, len, stack, &objs, &n);
  if (rc) {
    ets_leave(t);
    free_objs(objs, n, stack);
    return rc;
  }
  st = n == 1 && t->nstripes > 1 ? ets_stripe_of(t, objs[0]->hash) : NULL;
  if (st) ets_stripe_wrlock(t, st);
  int fresh = 1, wants = 0;
  if (only_new)
    for (uint32_t i = 0; i < n && fresh; i++) {
      ets_key k = {obj_key(objs[i]), obj_key_end(objs[i]), objs[i]->hash};
      if (ets_find(t, &k)) fresh = 0;
    }
  if (fresh)
    for (uint32_t i = 0; i < n; i++) {
      ets_obj *old;
      ets_put(t, objs[i], &old);
      wants |= wants_resize(t, objs[i]->hash);
      objs[i] = old;   /* what to free: a replaced object, or one a bag refused */
    }
  if (st) ets_stripe_wrunlock(t, st);
  ets_leave(t);
  maybe_resize(self, tab, wants);
  free_objs(objs, n, stack);   /* replaced objects, refused ones */
  return only_new ? fresh : 0;
}

/* The usual insert from Lua (one flat tuple into a read_concurrency +
** write_concurrency set, over an object of the same size) all in one frame: the check,
** the key's hash, the stripe, the find and the copy inline, with no call but memcpy
** (and memcmp for a key over 8 bytes): as calls through do_insert and insert_one,
** their frames cost ~45 instructions of an insert's ~500 in C. Anything else goes do_insert's way, which
** checks the term (a flat tuple again: a few tens of instructions, off this path). */
int lpvm_ets_insert(lpvm_task *self, lpvm_tab tab, const uint8_t *term, size_t len) {
  const uint8_t *first_end;
  ets_tab *t;
  ets_stripe *st;
  ets_loc l;
  if (len <= UINT32_MAX && ets_flat_tuple(term, len, &first_end) && first_end) {
    ets_loc_first(term + 1, term + len, first_end, 1, &l);
    if (ets_fast_enter(self, tab, 1, l.hash, &t, &st)) {   /* a hash table's */
      if (t->keypos == 1 && t->type == LPVM_ETS_SET) {
        ets_key k = {term + 3, first_end, l.hash};
        ets_obj *o = hash_find(t, &k);
        if (o && o->len == l.len) {
          ets_obj_fill(o, term + 1, &l);
          ets_fast_leave(t, 1, st);
          return 0;
        }
        return insert_found(self, tab, t, term + 1, &l, st, 1, o);
      }
      ets_fast_leave(t, 1, st);
    }
  }
  return do_insert(self, tab, term, len, 0);
}

/* A tuple of integers (lpvm_ets_insert_ints). Up to INTS_FAST of them within 32 bits
** (SMALL_INTEGER_EXT or INTEGER_EXT, as lpvm_put_int writes them) are written by the
** table itself, with no term to check: the key's hash is its value's (term_hash gives
** an integer the same hash in every encoding), and on a read_concurrency +
** write_concurrency set an object of the same size under the key is rewritten from
** the integers where it is (lpvm_ets_insert's fast path, minus the term's check and
** copy). Anything else is encoded and inserted as a term. */
#define INTS_FAST 16

static inline size_t int_size(int64_t x) { return x >= 0 && x <= 255 ? 2 : 5; }

/* x (within 32 bits) at q: its bytes. */
static inline size_t int_put(uint8_t *q, int64_t x) {
  if (x >= 0 && x <= 255) {
    q[0] = TAG_SMALL_INT, q[1] = (uint8_t)x;
    return 2;
  }
  uint32_t be = __builtin_bswap32((uint32_t)x);   /* big-endian */
  q[0] = TAG_INT;
  memcpy(q + 1, &be, 4);
  return 5;
}

/* The tuple's bytes without the version byte (its size checked by the caller). */
static inline void ints_put(uint8_t *q, const int64_t *v, size_t n) {
  q[0] = TAG_SMALL_TUPLE;
  q[1] = (uint8_t)n;
  q += 2;
  for (size_t i = 0; i < n; i++) q += int_put(q, v[i]);
}

static int insert_ints_term(lpvm_task *self, lpvm_tab tab, const int64_t *v, size_t n) {
  if (n > UINT32_MAX) return LPVM_ETS_EOBJECT;
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, (uint32_t)n);
  for (size_t i = 0; i < n; i++) lpvm_put_int(&b, v[i]);
  int rc = b.err ? b.err : lpvm_ets_insert(self, tab, b.data, b.len);
  lpvm_tbuf_free(&b);
  return rc;
}

/* With n in 1..INTS_FAST; always inline, so that {Key, Value} (n 2) gets its own
** copy with the loops unrolled (~25 instructions less). */
static inline __attribute__((always_inline)) int insert_ints(lpvm_task *self, lpvm_tab tab,
                                                             const int64_t *v, size_t n) {
  uint32_t len = 3;   /* version, SMALL_TUPLE_EXT, arity */
  for (size_t i = 0; i < n; i++) {
    if ((uint64_t)v[i] + UINT64_C(0x80000000) > UINT32_MAX)   /* outside 32 bits */
      return insert_ints_term(self, tab, v, n);
    len += (uint32_t)int_size(v[i]);
  }
  uint8_t buf[3 + 5 * INTS_FAST], key[5];
  ets_loc l = {len, 3, (uint32_t)int_put(key, v[0]), term_mix(TERM_HASH_NUM, (uint64_t)v[0])};
  ets_tab *t;
  ets_stripe *st;
  if (ets_fast_enter(self, tab, 1, l.hash, &t, &st)) {   /* a hash table's */
    if (t->keypos == 1 && t->type == LPVM_ETS_SET) {
      ets_key k = {key, key + l.key_len, l.hash};
      ets_obj *o = hash_find(t, &k);
      if (o && o->len == len) {   /* as ets_obj_fill, from the integers */
        o->data[0] = TERM_VERSION;
        ints_put(o->data + 1, v, n);
        o->key_off = l.key_off;
        o->key_len = l.key_len;
        ets_fast_leave(t, 1, st);
        return 0;
      }
      ints_put(buf + 1, v, n);
      return insert_found(self, tab, t, buf + 1, &l, st, 1, o);
    }
    ets_fast_leave(t, 1, st);
  }
  buf[0] = TERM_VERSION;
  ints_put(buf + 1, v, n);
  return do_insert(self, tab, buf, len, 0);
}

int lpvm_ets_insert_ints(lpvm_task *self, lpvm_tab tab, const int64_t *v, size_t n) {
  if (__builtin_expect(!v, 0)) return n ? LPVM_EINVAL : insert_ints_term(self, tab, v, 0);
  if (n == 2) return insert_ints(self, tab, v, 2);
  if (n == 0 || n > INTS_FAST) return insert_ints_term(self, tab, v, n);
  return insert_ints(self, tab, v, n);
}

int lpvm_ets_insert_new(lpvm_task *self, lpvm_tab tab, const uint8_t *term, size_t len) {
  return do_insert(self, tab, term, len, 1);
}

/* ---- lookups ------------------------------------------------------------------------- */

int lpvm_ets_lookup(lpvm_task *self, lpvm_tab tab, const uint8_t *key, size_t klen,
                    lpvm_tbuf *out) {
  if (!out) return LPVM_EINVAL;
  ets_key k;
  ets_tab *t;
  ets_stripe *st;
  int fast;
  int rc = ets_key_parse(key, klen, &k);
  if (rc || (rc = key_enter(self, tab, 0, &k, &t, &st, &fast))) return rc;
  uint32_t n = 0;
  ets_obj *first = ets_find(t, &k);
  for (ets_obj *o = first; o; o = ets_same_next(t, o)) n++;
  lpvm_put_list(out, n);
  for (ets_obj *o = first; o; o = ets_same_next(t, o)) put_obj(out, o);
  key_leave(t, 0, st, fast);
  lpvm_put_nil(out);
  return out_rc(out, (int)n);
}

int lpvm_ets_lookup_into(lpvm_task *self, lpvm_tab tab, const uint8_t *key,
                         size_t klen, uint8_t *buf, size_t cap, size_t *len) {
  ets_key k;
  ets_tab *t;
  ets_stripe *st;
  int fast;
  if (!len || (!buf && cap)) return LPVM_EINVAL;
  *len = 0;
  int rc = ets_key_parse(key, klen, &k);
  if (rc || (rc = key_enter(self, tab, 0, &k, &t, &st, &fast))) return rc;
  size_t used = 0;
  int n = 0;
  for (ets_obj *o = ets_find(t, &k); o; o = ets_same_next(t, o), n++) {
    size_t m = o->len - 1;
    if (m > cap - used) { n = LPVM_ETS_ESPACE; break; }
    memcpy(buf + used, o->data + 1, m);
    used += m;
  }
  key_leave(t, 0, st, fast);
  *len = used;
  return n;
}

/* lpvm_ets_lookup_ints: the object's integers decoded under the key's lock, straight
** into the caller's array (no bytes copied out for the caller to parse again). One
** object (a bag's key with more: ESPACE) whose tuple is at most cap integers in the
** encodings int_put writes (SMALL_INTEGER_EXT, INTEGER_EXT); anything else is ESPACE,
** and the caller asks lpvm_ets_lookup_into. So is a key outside 32 bits: any object
** it has holds it (as its key, or one equal to it in an ordered_set), and obj_ints
** would refuse that object. */
static inline __attribute__((always_inline)) int obj_ints_n(const uint8_t *p,
                                                             const uint8_t *end,
                                                             int64_t *v, unsigned m) {
  for (unsigned i = 0; i < m; i++) {
    if (end - p >= 2 && p[0] == TAG_SMALL_INT) {
      v[i] = p[1];
      p += 2;
    } else if (end - p >= 5 && p[0] == TAG_INT) {
      v[i] = (int32_t)term_be32(p + 1);
      p += 5;
    } else {
      return LPVM_ETS_ESPACE;
    }
  }
  return p == end ? (int)m : LPVM_ETS_ESPACE;
}

/* With {Key, Value} (2) unrolled, as insert_ints. */
static inline int obj_ints(const ets_obj *o, int64_t *v, size_t cap) {
  const uint8_t *p = o->data + 1, *end = o->data + o->len;
  if (end - p < 2 || p[0] != TAG_SMALL_TUPLE || p[1] == 0 || p[1] > cap)
    return LPVM_ETS_ESPACE;
  if (p[1] == 2) return obj_ints_n(p + 2, end, v, 2);
  return obj_ints_n(p + 2, end, v, p[1]);
}

static inline __attribute__((always_inline)) int lookup_ints_at(lpvm_task *self,
                                                                lpvm_tab tab,
                                                                const ets_key *k,
                                                                int64_t *v, size_t cap) {
  ets_tab *t;
  ets_stripe *st;
  int fast;
  int rc = key_enter(self, tab, 0, k, &t, &st, &fast);
  if (rc) return rc;
  /* ets_find, with a hash table's find inline (GCC keeps ets_find out of line here) */
  ets_obj *o = tab_is_hash(t) ? hash_find(t, k) : tree_find(t, k);
  if (o) rc = ets_same_next(t, o) ? LPVM_ETS_ESPACE : obj_ints(o, v, cap);
  key_leave(t, 0, st, fast);
  return rc;
}

int lpvm_ets_lookup_ints(lpvm_task *self, lpvm_tab tab, int64_t key, int64_t *v,
                         size_t cap) {
  if (!v && cap) return LPVM_EINVAL;
  /* A key outside 32 bits: its object, if any, holds it, which obj_ints refuses. */
  if ((uint64_t)key + UINT64_C(0x80000000) > UINT32_MAX) return LPVM_ETS_ESPACE;
  uint8_t kb[5];   /* the key's term without its version byte, hashed from its value */
  ets_key k = {kb, kb + int_put(kb, key), term_mix(TERM_HASH_NUM, (uint64_t)key)};
  return lookup_ints_at(self, tab, &k, v, cap);
}

int lpvm_ets_member(lpvm_task *self, lpvm_tab tab, const uint8_t *key, size_t klen) {
  ets_key k;
  ets_tab *t;
  ets_stripe *st;
  int fast;
  int rc = ets_key_parse(key, klen, &k);
  if (rc || (rc = key_enter(self, tab, 0, &k, &t, &st, &fast))) return rc;
  int found = ets_find(t, &k) != NULL;
  key_leave(t, 0, st, fast);
  return found;
}

/* Element pos (1-based) of an object's tuple: its extent, or EPOS. */
static int element_at(const ets_obj *o, uint32_t pos, const uint8_t **p,
                      const uint8_t **end) {
  lpvm_tread r = {o->data + 1, o->data + o->len, 0};
  uint32_t arity;
  lpvm_get_tuple(&r, &arity);
  if (pos < 1 || pos > arity) return LPVM_ETS_EPOS;
  for (uint32_t i = 1; i < pos; i++) lpvm_skip(&r);
  *p = r.p;
  lpvm_skip(&r);
  *end = r.p;
  return 0;
}

int lpvm_ets_lookup_element(lpvm_task *self, lpvm_tab tab, const uint8_t *key,
                            size_t klen, uint32_t pos, lpvm_tbuf *out) {
  if (!out) return LPVM_EINVAL;
  ets_key k;
  ets_tab *t;
  ets_stripe *st;
  int fast;
  const uint8_t *p, *end;
  int rc = ets_key_parse(key, klen, &k);
  if (rc || (rc = key_enter(self, tab, 0, &k, &t, &st, &fast))) return rc;
  ets_obj *first = ets_find(t, &k);
  uint32_t n = 0;
  rc = first ? 0 : LPVM_ETS_ENOKEY;
  for (ets_obj *o = first; o && rc == 0; o = ets_same_next(t, o), n++)
    rc = element_at(o, pos, &p, &end);
  if (rc == 0) {
    if (tab_is_bag(t)) lpvm_put_list(out, n);
    for (ets_obj *o = first; o; o = ets_same_next(t, o)) {
      element_at(o, pos, &p, &end);
      term_put_raw(out, p, (size_t)(end - p));
    }
    if (tab_is_bag(t)) lpvm_put_nil(out);
  }
  key_leave(t, 0, st, fast);
  return out_rc(out, rc);
}

/* ---- deletes ------------------------------------------------------------------------- */

/* take (out: the objects) and delete_key (out NULL). */
static int remove_key(lpvm_task *self, lpvm_tab tab, const uint8_t *key, size_t klen,
                      lpvm_tbuf *out) {
  ets_key k;
  ets_tab *t;
  ets_stripe *st;
  int fast;
  int rc = ets_key_parse(key, klen, &k);
  if (rc || (rc = key_enter(self, tab, 1, &k, &t, &st, &fast))) return rc;
  ets_obj *gone = ets_remove_key(t, &k);
  int wants = wants_resize(t, k.h);
  key_leave(t, 1, st, fast);
  uint32_t n = 0;
  for (ets_obj *o = gone; o; o = o->link[0]) n++;
  if (out) {
    lpvm_put_list(out, n);
    for (ets_obj *o = gone; o; o = o->link[0]) put_obj(out, o);
    lpvm_put_nil(out);
  }
  free_chain(gone);
  maybe_resize(self, tab, wants);
  return out_rc(out, out ? (int)n : 0);
}

int lpvm_ets_take(lpvm_task *self, lpvm_tab tab, const uint8_t *key, size_t klen,
                  lpvm_tbuf *out) {
  if (!out) return LPVM_EINVAL;
  return remove_key(self, tab, key, klen, out);
}

int lpvm_ets_delete_key(lpvm_task *self, lpvm_tab tab, const uint8_t *key, size_t klen) {
  return remove_key(self, tab, key, klen, NULL);
}

int lpvm_ets_delete_object(lpvm_task *self, lpvm_tab tab, const uint8_t *obj,
                           size_t len) {
  ets_tab *t;
  ets_obj *stack[OBJS_STACK], **objs = stack, *gone = NULL;
  uint32_t n = 0;
  if (ets_term_check(obj, len)) return LPVM_EBADTERM;
  if (lpvm_get_type(&(lpvm_tread){obj + 1, obj + len, 0}) != LPVM_T_TUPLE)
    return LPVM_ETS_EOBJECT;
  int rc = ets_enter(self, tab, 1, 1, &t);
  if (rc) return rc;
  rc = build_objs(t, obj, len, stack, &objs, &n);
  if (rc) {
    ets_leave(t);
    free_objs(objs, n, stack);
    return rc;
  }
  ets_obj *probe = objs[0];
  ets_key k = {obj_key(probe), obj_key_end(probe), probe->hash};
  ets_stripe *st = t->nstripes > 1 ? ets_stripe_of(t, k.h) : NULL;
  if (st) ets_stripe_wrlock(t, st);
  ets_obj *o = ets_find(t, &k);
  while (o) {   /* every identical object (a duplicate_bag may hold several) */
    ets_obj *nx = ets_same_next(t, o);
    if (ets_obj_equal(o, probe)) {
      ets_remove_obj(t, o);
      o->link[0] = gone;
      gone = o;
    }
    o = nx;
  }
  key_leave(t, 1, st, 0);
  free_objs(objs, n, stack);
  free_chain(gone);
  return 0;
}

int lpvm_ets_delete_all(lpvm_task *self, lpvm_tab tab) {
  ets_tab *t;
  int rc = ets_enter(self, tab, 2, 1, &t);
  if (rc) return rc;
  ets_obj **b, *root;
  unsigned bits;
  int type = t->type;
  ets_store_detach(t, &b, &bits, &root);
  rc = ets_store_init(t);
  if (rc) {   /* no memory for fresh buckets: keep the objects, report it */
    t->buckets = b, t->bits = bits, t->root = root;
  } else {
    for (unsigned i = 0; i < t->nstripes; i++) {
      atomic_store_explicit(&t->stripes[i].count, 0, memory_order_relaxed);
      atomic_store_explicit(&t->stripes[i].mem, 0, memory_order_relaxed);
    }
  }
  ets_leave(t);
  if (rc == 0) ets_free_objs(type, b, bits, root);
  return rc;
}

/* ---- walking ------------------------------------------------------------------------- */

static int walk_key(lpvm_task *self, lpvm_tab tab, const uint8_t *key, size_t klen,
                    int which, lpvm_tbuf *out) {
  if (!out) return LPVM_EINVAL;
  ets_key k = {0};
  ets_tab *t;
  int rc = key ? ets_key_parse(key, klen, &k) : 0;
  if (rc || (rc = ets_enter(self, tab, 0, 0, &t))) return rc;
  switch (which) {
    case 0: rc = ets_first_key(t, out); break;
    case 1: rc = ets_last_key(t, out); break;
    case 2: rc = ets_after_key(t, &k, out); break;
    default: rc = ets_before_key(t, &k, out); break;
  }
  ets_leave(t);
  return out_rc(out, rc);
}

int lpvm_ets_first(lpvm_task *self, lpvm_tab tab, lpvm_tbuf *out) {
  return walk_key(self, tab, NULL, 0, 0, out);
}

int lpvm_ets_last(lpvm_task *self, lpvm_tab tab, lpvm_tbuf *out) {
  return walk_key(self, tab, NULL, 0, 1, out);
}

int lpvm_ets_next(lpvm_task *self, lpvm_tab tab, const uint8_t *key, size_t klen,
                  lpvm_tbuf *out) {
  if (!key) return LPVM_EINVAL;
  return walk_key(self, tab, key, klen, 2, out);
}

int lpvm_ets_prev(lpvm_task *self, lpvm_tab tab, const uint8_t *key, size_t klen,
                  lpvm_tbuf *out) {
  if (!key) return LPVM_EINVAL;
  return walk_key(self, tab, key, klen, 3, out);
}

typedef struct list_ud {
  lpvm_tbuf *out;
  uint32_t n;
} list_ud;

static int add_obj(ets_tab *t, ets_obj *o, void *ud) {
  (void)t;
  list_ud *l = ud;
  put_obj(l->out, o);
  l->n++;
  return l->out->err != 0;
}

int lpvm_ets_tab2list(lpvm_task *self, lpvm_tab tab, lpvm_tbuf *out) {
  if (!out) return LPVM_EINVAL;
  ets_tab *t;
  int rc = ets_enter(self, tab, 0, 0, &t);
  if (rc) return rc;
  size_t mark = ets_list_open(out);
  list_ud l = {out, 0};
  ets_walk(t, add_obj, &l);
  ets_leave(t);
  ets_list_close(out, mark, l.n);
  return out_rc(out, (int)l.n);
}

/* ---- select ------------------------------------------------------------------------------- */

typedef struct sel_ud {
  ets_ms *ms;
  int mode;
  lpvm_tbuf *out;
  uint32_t n;
  ets_obj **hits;   /* select_delete, select_replace: the objects to change after */
  size_t nhits, cap;
  int err;
  lpvm_tbuf *rb;    /* select_replace: the new objects, back to back */
  size_t *off;      /* where hit i's new object starts in rb (its end: off[i + 1]) */
} sel_ud;

static int sel_one(ets_tab *t, ets_obj *o, void *ud) {
  (void)t;
  sel_ud *s = ud;
  int is_true = 0;
  int rep = s->mode == LPVM_ETS_SELECT_REPLACE;
  lpvm_tbuf *out = s->mode == LPVM_ETS_SELECT ? s->out : rep ? s->rb : NULL;
  int m = ets_ms_run(s->ms, o, out, &is_true);
  if (m <= 0) return 0;
  if (s->mode == LPVM_ETS_SELECT) { s->n++; return s->out->err != 0; }
  if (!is_true && !rep) return 0;
  s->n++;
  if (s->mode == LPVM_ETS_SELECT_DELETE || rep) {
    if (s->nhits + 1 >= s->cap) {
      size_t cap = s->cap ? 2 * s->cap : 64;
      ets_obj **h = realloc(s->hits, cap * sizeof *h);
      if (h) s->hits = h;
      size_t *f = h && rep ? realloc(s->off, cap * sizeof *f) : NULL;
      if (f) s->off = f;
      if (!h || (rep && !f)) { s->err = LPVM_ENOMEM; return 1; }
      s->cap = cap;
    }
    if (rep) s->off[s->nhits + 1] = s->rb->len;
    s->hits[s->nhits++] = o;
  }
  return rep && s->rb->err ? (s->err = s->rb->err, 1) : 0;
}

int lpvm_ets_select(lpvm_task *self, lpvm_tab tab, const uint8_t *msterm, size_t len,
                    int mode, lpvm_tbuf *out) {
  ets_ms msbuf, *ms = &msbuf;
  ets_tab *t;
  if (mode < LPVM_ETS_SELECT || mode > LPVM_ETS_SELECT_REPLACE) return LPVM_EINVAL;
  if (mode == LPVM_ETS_SELECT && !out) return LPVM_EINVAL;
  int rc = ets_ms_compile(msterm, len, ms);
  if (rc) return rc;
  int rep = mode == LPVM_ETS_SELECT_REPLACE, del = mode == LPVM_ETS_SELECT_DELETE || rep;
  if ((rc = ets_enter(self, tab, del ? 2 : 0, del, &t)) != 0) {
    ets_ms_free(ms);
    return rc;
  }
  lpvm_tbuf rb;
  if (rep) lpvm_tbuf_init(&rb);
  sel_ud s = {ms, mode, out, 0, NULL, 0, 0, 0, rep ? &rb : NULL, NULL};
  if (rep && t->type == LPVM_ETS_BAG) s.err = LPVM_ETS_ETYPE;   /* as ETS's */
  else if (rep && rb.err) s.err = rb.err;
  size_t mark = mode == LPVM_ETS_SELECT ? ets_list_open(out) : 0;
  const uint8_t *kp, *kend;
  if (s.err) {
    /* nothing to walk */
  } else if (ets_ms_bound_key(ms, t->keypos, &kp, &kend) == 0) {   /* one key: no scan */
    ets_key k = {kp, kend, term_hash(kp, kend)};
    ets_stripe *st = ets_stripe_of(t, k.h);
    if (t->nstripes > 1) ets_stripe_rdlock(t, st);
    for (ets_obj *o = ets_find(t, &k), *nx; o; o = nx) {
      nx = ets_same_next(t, o);
      if (sel_one(t, o, &s)) break;
    }
    if (t->nstripes > 1) ets_stripe_rdunlock(t, st);
  } else if (!s.err) {
    ets_walk(t, sel_one, &s);
  }
  ets_obj *gone = NULL;
  if (rep && !s.err && s.nhits) {
    s.off[0] = 1;   /* after rb's version byte */
    s.err = ets_replace_hits(t, s.hits, s.off, s.nhits, &rb, &gone);
    s.nhits = 0;
  }
  for (size_t i = 0; i < s.nhits && !s.err && !rep; i++) {
    ets_remove_obj(t, s.hits[i]);
    s.hits[i]->link[0] = gone;
    gone = s.hits[i];
  }
  int wants = del && tab_is_hash(t) && ets_wants_resize(t, &(ets_stripe){.count = ets_size(t)});
  if (wants) ets_resize(t);
  ets_leave(t);
  free(s.hits);
  free(s.off);
  if (rep) lpvm_tbuf_free(&rb);
  free_chain(gone);
  ets_ms_free(ms);
  if (mode == LPVM_ETS_SELECT) ets_list_close(out, mark, s.n);
  if (s.err) return s.err;
  return out_rc(mode == LPVM_ETS_SELECT ? out : NULL, (int)s.n);
}
