/*
** ets_select.c -- select/3 and select/1 of ETS (and so match/3, match_object/3 and
** select_reverse): a match specification run over the table one chunk at a time.
**
** Why a chunk resumes by key: a chunk walks the table key by key in its walk order
** (term order for an ordered_set, reversed for select_reverse; (hash, key) for the
** hash types, which no insert, delete or resize changes: ets_hash.c) and stops once it
** has `limit` results. What it hands back to continue is the last key it visited, and
** "the first key after k" needs no k in the table. So a continuation stays valid
** whatever happens to the table between chunks, with no fixing: every object present
** from the first chunk to the last is seen exactly once, objects inserted or deleted
** meanwhile may or may not be. ETS promises that only for a fixed table, or by key for
** an ordered_set. A bag's objects with one key are taken together (they follow each
** other and the continuation is a key), so a chunk may hold more than `limit`.
**
** Each key costs one step of the walk (ets_after_key) and one lookup (ets_find): more
** than the straight walk of select/2 (ets_ops.c), which select without a limit keeps.
*/
#include <stdlib.h>
#include <string.h>

#include "tasks/ets_int.h"

/* Run the specification on every object with the key in kb (a key term, version byte
** first); results appended to out. How many. */
static uint32_t run_key(ets_tab *t, ets_ms *ms, const lpvm_tbuf *kb, lpvm_tbuf *out) {
  ets_key k;
  if (ets_key_parse(kb->data, kb->len, &k)) return 0;   /* (a key the table holds) */
  ets_stripe *st = t->nstripes > 1 ? ets_stripe_of(t, k.h) : NULL;
  if (st) ets_stripe_rdlock(t, st);
  uint32_t n = 0;
  for (ets_obj *o = ets_find(t, &k); o; o = ets_same_next(t, o)) {
    int is_true = 0;
    if (ets_ms_run(ms, o, out, &is_true) > 0) n++;
  }
  if (st) ets_stripe_rdunlock(t, st);
  return n;
}

/* The key after (before, rev) the key term [p, p + len), or the first (last) when p is
** NULL, into nx (reset): 1, or 0 at the end. */
static int step(ets_tab *t, int rev, const uint8_t *p, size_t len, lpvm_tbuf *nx) {
  lpvm_tbuf_reset(nx);
  if (!p) return rev ? ets_last_key(t, nx) : ets_first_key(t, nx);
  ets_key k;
  if (ets_key_parse(p, len, &k)) return 0;
  return rev ? ets_before_key(t, &k, nx) : ets_after_key(t, &k, nx);
}

int lpvm_ets_select_chunk(lpvm_task *self, lpvm_tab tab, const uint8_t *msterm,
                          size_t len, int reverse, const uint8_t *after, size_t alen,
                          size_t limit, lpvm_tbuf *out, lpvm_tbuf *next) {
  if (!out || !next || limit == 0) return LPVM_EINVAL;
  ets_key ak;
  int rc = after ? ets_key_parse(after, alen, &ak) : 0;
  if (rc) return rc;
  ets_ms msbuf, *ms = &msbuf;
  if ((rc = ets_ms_compile(msterm, len, ms)) != 0) return rc;
  lpvm_tbuf kb[2];
  lpvm_tbuf_init(&kb[0]);
  lpvm_tbuf_init(&kb[1]);
  ets_tab *t;
  if ((rc = ets_enter(self, tab, 0, 0, &t)) != 0) goto done;
  size_t mark = ets_list_open(out);
  uint32_t n = 0;
  int cur = 0, more;
  const uint8_t *kp, *kend;
  if (ets_ms_bound_key(ms, t->keypos, &kp, &kend) == 0) {   /* one key: no walk */
    more = 0;
    if (!after) {
      lpvm_tbuf_reset(&kb[0]);
      term_put_raw(&kb[0], kp, (size_t)(kend - kp));
      n = run_key(t, ms, &kb[0], out);
    }
  } else {
    more = step(t, reverse, after, alen, &kb[0]);
    while (more && !out->err && !kb[cur].err) {
      n += run_key(t, ms, &kb[cur], out);
      if (n >= limit) break;
      more = step(t, reverse, kb[cur].data, kb[cur].len, &kb[!cur]);
      cur = !cur;
    }
  }
  ets_leave(t);
  rc = out->err ? out->err : kb[cur].err ? kb[cur].err : 0;
  if (rc) goto done;
  ets_list_close(out, mark, n);
  lpvm_tbuf_reset(next);
  if (more) {   /* stopped at the limit: continue after this key */
    term_put_raw(next, kb[cur].data + 1, kb[cur].len - 1);
  } else {
    next->len = 0;   /* the end: nothing to continue after */
  }
  rc = out->err ? out->err : next->err ? next->err : (int)n;
done:
  lpvm_tbuf_free(&kb[0]);
  lpvm_tbuf_free(&kb[1]);
  ets_ms_free(ms);
  return rc;
}

/* A hash table's object replaced where it is in its bucket (a duplicate_bag keeps the
** order of its key's objects, as ETS does): nw has old's key, so old's hash. */
static void hash_swap(ets_tab *t, ets_obj *old, ets_obj *nw) {
  ets_obj **pp = &t->buckets[ets_bucket_of(t, old->hash)];
  while (*pp && *pp != old) pp = &(*pp)->link[0];
  if (!*pp) return;
  nw->link[0] = old->link[0];
  *pp = nw;
  old->link[0] = NULL;
  ets_count(t, ets_stripe_of(t, old->hash), 0, (long)obj_size(nw) - (long)obj_size(old));
}

/* select_replace: build every new object first, each checked to be a tuple whose key
** is its old object's (=:= in a set, == in an ordered_set, as the table compares
** keys), and only then put them, so that a bad one leaves the table as it was (ETS
** refuses such a specification before it runs: badarg). */
int ets_replace_hits(ets_tab *t, ets_obj **hits, const size_t *off, size_t n,
                     const lpvm_tbuf *rb, ets_obj **gone) {
  ets_obj **made = calloc(n, sizeof *made);
  if (!made) return LPVM_ENOMEM;
  int rc = 0, exact = t->type != LPVM_ETS_ORDERED_SET;
  for (size_t i = 0; i < n && rc == 0; i++) {
    const uint8_t *p = rb->data + off[i], *end = rb->data + off[i + 1];
    if (p >= end || (p[0] != TAG_SMALL_TUPLE && p[0] != TAG_LARGE_TUPLE) ||
        ets_too_deep(p, end)) {
      rc = LPVM_EINVAL;
    } else if ((rc = ets_obj_new(t, p, end, &made[i])) != 0) {
      if (rc != LPVM_ENOMEM) rc = LPVM_EINVAL;   /* shorter than keypos */
    } else if (term_cmp(obj_key(made[i]), obj_key_end(made[i]), obj_key(hits[i]),
                        obj_key_end(hits[i]), exact) != 0) {
      rc = LPVM_EINVAL;   /* the key changed */
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (rc) { free(made[i]); continue; }
    ets_obj *old = hits[i];
    if (tab_is_hash(t)) hash_swap(t, old, made[i]);
    else ets_put(t, made[i], &old);   /* the tree's node of that key */
    if (old) { old->link[0] = *gone; *gone = old; }
  }
  free(made);
  return rc;
}

int lpvm_ets_test_ms(const uint8_t *obj, size_t olen, const uint8_t *ms, size_t len,
                     lpvm_tbuf *out) {
  if (!obj || !out) return LPVM_EINVAL;
  if (lpvm_term_check(obj, olen) || ets_too_deep(obj + 1, obj + olen)) return LPVM_EBADTERM;
  if (obj[1] != TAG_SMALL_TUPLE && obj[1] != TAG_LARGE_TUPLE) return LPVM_ETS_EOBJECT;
  ets_ms m;
  int rc = ets_ms_compile(ms, len, &m);
  if (rc) return rc;
  ets_obj *o = malloc(sizeof *o + olen);   /* an object of no table: only its bytes */
  if (!o) { ets_ms_free(&m); return LPVM_ENOMEM; }
  memset(o, 0, sizeof *o);
  o->len = (uint32_t)olen;
  memcpy(o->data, obj, olen);
  int is_true;
  rc = ets_ms_run(&m, o, out, &is_true);
  free(o);
  ets_ms_free(&m);
  return out->err ? out->err : rc;
}

