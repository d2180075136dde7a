/*
** ets_update.c -- update_counter and update_element: read, change and replace one
** object under its key's lock, so concurrent updates of one counter never lose a
** step (the new object is built while the lock is held; the replaced one is freed
** after it is released).
*/
#include <stdlib.h>
#include <string.h>

#include "tasks/ets_int.h"

typedef struct slice {
  const uint8_t *p, *end;
} slice;

/* A tuple's elements (no version byte at p). Up to `cap` in `stack`, else malloc'd. */
static int elements(const uint8_t *p, const uint8_t *end, slice *stack, uint32_t cap,
                    slice **out, uint32_t *arity) {
  if (end - p >= 2 && p[0] == TAG_SMALL_TUPLE && p[1] <= cap) {   /* scalars: no walk */
    const uint8_t *q = p + 2;
    uint32_t i = 0, n = p[1];
    for (; i < n && q; i++) {
      stack[i].p = q;
      stack[i].end = q = ets_flat_scalar(q, end);
    }
    if (q == end) {
      *arity = n;
      *out = stack;
      return 0;
    }
  }
  lpvm_tread r = {p, end, 0};
  if (lpvm_get_tuple(&r, arity)) return LPVM_ETS_EOBJECT;
  slice *s = *arity <= cap ? stack : malloc(*arity * sizeof *s);
  if (!s) return LPVM_ENOMEM;
  for (uint32_t i = 0; i < *arity; i++) {
    s[i].p = r.p;
    if (lpvm_skip(&r)) { if (s != stack) free(s); return LPVM_EBADTERM; }
    s[i].end = r.p;
  }
  *out = s;
  return 0;
}

/* Build the object: the elements, with vals[i] (a term, or an integer when the term
** is NULL) at position pos[i]. */
typedef struct change {
  uint32_t pos;
  const uint8_t *term;      /* no version byte; NULL: the integer */
  size_t len;
  int64_t i;
} change;

static int rebuild(ets_tab *t, const slice *el, uint32_t arity, const change *ch, int n,
                   ets_obj **out) {
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, arity);
  for (uint32_t k = 1; k <= arity; k++) {
    const change *c = NULL;
    for (int j = n - 1; j >= 0 && !c; j--)   /* the last change of a position wins */
      if (ch[j].pos == k) c = &ch[j];
    if (!c) term_put_raw(&b, el[k - 1].p, (size_t)(el[k - 1].end - el[k - 1].p));
    else if (c->term) term_put_raw(&b, c->term, c->len);
    else lpvm_put_int(&b, c->i);
  }
  int rc = b.err ? b.err : ets_obj_new(t, b.data + 1, b.data + b.len, out);
  lpvm_tbuf_free(&b);
  return rc;
}

/* Common entry: the key's object (or NULL) under the write lock; *fast: by the stripe
** alone (ets_fast_enter), which leave_set must be told. */
static int enter_set(lpvm_task *self, lpvm_tab tab, const uint8_t *key, size_t klen,
                     ets_key *k, ets_tab **t, int *fast) {
  int rc = ets_key_parse(key, klen, k);
  ets_stripe *st;
  *fast = 0;
  if (rc == 0 && ets_fast_enter(self, tab, 1, k->h, t, &st)) {
    if (!tab_is_bag(*t)) return *fast = 1, 0;
    ets_fast_leave(*t, 1, st);   /* ETYPE, reported the usual way */
  }
  if (rc == 0) rc = ets_enter(self, tab, 1, 1, t);
  if (rc) return rc;
  if (tab_is_bag(*t)) { ets_leave(*t); return LPVM_ETS_ETYPE; }
  if ((*t)->nstripes > 1) ets_stripe_wrlock(*t, ets_stripe_of(*t, k->h));
  return 0;
}

static void leave_set(ets_tab *t, const ets_key *k, int fast) {
  if (fast) ets_fast_leave(t, 1, ets_stripe_of(t, k->h));
  else {
    if (t->nstripes > 1) ets_stripe_wrunlock(t, ets_stripe_of(t, k->h));
    ets_leave(t);
  }
}

/* Counters in place: when every change is an integer whose encoding is as long as
** the element it replaces (a counter that stays within 0..255, or within 32 bits),
** write it over the old bytes. The key is never changed, so the object's hash and
** place stay valid, and the key's write lock keeps every reader out meanwhile. */
static int patch_in_place(const slice *el, const change *ch, int n) {
  uint8_t tmp[64][16];   /* each new value's encoding: 11 bytes at most, never grows */
  size_t len[64];
  for (int i = 0; i < n; i++) {
    if (ch[i].term) return 0;
    lpvm_tbuf b = {tmp[i], 0, sizeof tmp[i], 0};
    lpvm_put_int(&b, ch[i].i);
    len[i] = b.len;
    if (b.len != (size_t)(el[ch[i].pos - 1].end - el[ch[i].pos - 1].p)) return 0;
  }
  for (int i = 0; i < n; i++) memcpy((uint8_t *)el[ch[i].pos - 1].p, tmp[i], len[i]);
  return 1;
}

/* Unless rc says otherwise, build the changed object and put it in the old one's
** place (or patch the stored object itself, `live`, when it can); then leave the
** table and free what is left over. */
static int commit(ets_tab *t, const ets_key *k, int fast, int rc, slice *el,
                  const slice *stack, uint32_t arity, const change *ch, int n, int live) {
  ets_obj *fresh = NULL, *old = NULL;
  if (rc == 0 && live && patch_in_place(el, ch, n)) rc = 1;
  if (rc == 0) rc = rebuild(t, el, arity, ch, n, &fresh);
  if (rc == 1) rc = 0;
  else if (rc == 0) {
    ets_put(t, fresh, &old);
    fresh = NULL;
  }
  leave_set(t, k, fast);
  if (el != stack) free(el);
  if (fresh) free(fresh);   /* (usually neither: a counter changed in place) */
  if (old) free(old);
  return rc;
}

/* The default object with the key put at keypos (ETS ignores Default's own key). */
static int default_obj(ets_tab *t, const ets_key *k, const uint8_t *dflt, size_t dlen,
                       ets_obj **out) {
  slice stack[16], *el;
  uint32_t arity;
  int rc = elements(dflt + 1, dflt + dlen, stack, 16, &el, &arity);
  if (rc) return rc;
  if (arity < t->keypos) rc = LPVM_ETS_EOBJECT;
  else {
    change c = {t->keypos, k->p, (size_t)(k->end - k->p), 0};
    rc = rebuild(t, el, arity, &c, 1, out);
  }
  if (el != stack) free(el);
  return rc;
}

/* The usual call, one step on a stored object of scalars whose counter keeps the size
** of its encoding: read, add and write back where it is, as patch_in_place would,
** without slicing the whole tuple (the key's write lock held). 1 and *out; 0 when the
** general path must decide, errors included. */
static int counter_fast(const ets_tab *t, ets_obj *o, const lpvm_ets_incr *s, int64_t *out) {
  uint32_t pos = s->pos ? s->pos : t->keypos + 1;
  uint8_t *p = o->data + 1;
  const uint8_t *end = o->data + o->len;
  if (p[0] != TAG_SMALL_TUPLE || pos > p[1] || pos == t->keypos) return 0;
  p += 2;
  for (uint32_t i = 1; i < pos; i++)
    if (!(p = (uint8_t *)ets_flat_scalar(p, end))) return 0;
  int64_t cur, v;
  if (end - p >= 2 && p[0] == TAG_SMALL_INT) cur = p[1];
  else if (end - p >= 5 && p[0] == TAG_INT) cur = (int32_t)term_be32(p + 1);
  else return 0;
  if (__builtin_add_overflow(cur, s->incr, &v)) return 0;
  if (s->has_threshold &&
      ((s->incr >= 0 && v > s->threshold) || (s->incr < 0 && v < s->threshold)))
    v = s->setvalue;
  if (p[0] == TAG_SMALL_INT) {   /* lpvm_put_int's encodings: 0..255 small, else INT */
    if (v < 0 || v > 255) return 0;
    p[1] = (uint8_t)v;
  } else {
    if (v >= 0 && v <= 255) return 0;
    if (v < INT32_MIN || v > INT32_MAX) return 0;
    uint32_t u = (uint32_t)v;
    p[1] = (uint8_t)(u >> 24); p[2] = (uint8_t)(u >> 16);
    p[3] = (uint8_t)(u >> 8); p[4] = (uint8_t)u;
  }
  *out = v;
  return 1;
}

int lpvm_ets_update_counter(lpvm_task *self, lpvm_tab tab, const uint8_t *key,
                            size_t klen, const lpvm_ets_incr *steps, int n,
                            const uint8_t *dflt, size_t dlen, int64_t *results) {
  if ((!steps && n) || n < 0 || n > 64 || (!results && n)) return LPVM_EINVAL;
  if (dflt && lpvm_term_check(dflt, dlen)) return LPVM_EBADTERM;
  ets_key k;
  ets_tab *t;
  int fast, rc = enter_set(self, tab, key, klen, &k, &t, &fast);
  if (rc) return rc;
  ets_obj *o = ets_find(t, &k), *made = NULL;
  if (o && n == 1 && counter_fast(t, o, steps, results)) {
    leave_set(t, &k, fast);
    return 0;
  }
  if (!o && !dflt) rc = LPVM_ETS_ENOKEY;
  else if (!o) rc = default_obj(t, &k, dflt, dlen, &made);
  const ets_obj *base = o ? o : made;
  slice stack[16], *el = stack;
  uint32_t arity = 0;
  change ch[64];
  if (rc == 0) rc = elements(base->data + 1, base->data + base->len, stack, 16, &el, &arity);
  for (int i = 0; i < n && rc == 0; i++) {
    const lpvm_ets_incr *s = &steps[i];
    int64_t cur = 0, v;
    uint32_t pos = s->pos ? s->pos : t->keypos + 1;   /* 0: the element after the key */
    if (pos > arity || pos == t->keypos) { rc = LPVM_ETS_EPOS; break; }
    int j = i - 1;
    while (j >= 0 && ch[j].pos != pos) j--;
    if (j >= 0) cur = ch[j].i;   /* an earlier step changed it */
    else {
      lpvm_tread r = {el[pos - 1].p, el[pos - 1].end, 0};
      if (lpvm_get_int(&r, &cur)) { rc = LPVM_ETS_EVALUE; break; }
    }
    if (__builtin_add_overflow(cur, s->incr, &v)) {
      /* past 64 bits the sum is past any threshold too (Erlang's bignum sum is):
      ** with one, the step sets setvalue; without, the sum cannot be stored */
      if (!s->has_threshold) { rc = LPVM_ETS_EVALUE; break; }
      v = s->setvalue;
    } else if (s->has_threshold &&
        ((s->incr >= 0 && v > s->threshold) || (s->incr < 0 && v < s->threshold)))
      v = s->setvalue;
    ch[i] = (change){pos, NULL, 0, v};
    results[i] = v;
  }
  rc = commit(t, &k, fast, rc, el, stack, arity, ch, n, o != NULL);
  if (made) free(made);
  return rc;
}

int lpvm_ets_update_element(lpvm_task *self, lpvm_tab tab, const uint8_t *key,
                            size_t klen, const uint32_t *pos, int n,
                            const uint8_t *vals, size_t vlen) {
  lpvm_tread r;
  uint32_t count;
  if ((!pos && n) || n < 0 || n > 64) return LPVM_EINVAL;
  if (!vals || lpvm_term_check(vals, vlen) || lpvm_tread_init(&r, vals, vlen) ||
      (n ? lpvm_get_list(&r, &count) || count != (uint32_t)n : lpvm_get_nil(&r)))
    return LPVM_EBADTERM;
  change ch[64];
  for (int i = 0; i < n; i++) {
    const uint8_t *p = r.p;
    lpvm_skip(&r);
    ch[i] = (change){pos[i], p, (size_t)(r.p - p), 0};
  }
  ets_key k;
  ets_tab *t;
  int fast, rc = enter_set(self, tab, key, klen, &k, &t, &fast);
  if (rc) return rc;
  ets_obj *o = ets_find(t, &k);
  if (!o) {
    leave_set(t, &k, fast);
    return 0;
  }
  slice stack[16], *el = stack;
  uint32_t arity = 0;
  rc = elements(o->data + 1, o->data + o->len, stack, 16, &el, &arity);
  for (int i = 0; rc == 0 && i < n; i++)
    if (ch[i].pos < 1 || ch[i].pos > arity || ch[i].pos == t->keypos) rc = LPVM_ETS_EPOS;
  rc = commit(t, &k, fast, rc, el, stack, arity, ch, n, 0);
  return rc ? rc : 1;
}
