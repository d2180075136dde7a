/*
** ets_hash.c -- set, bag and duplicate_bag: a chained hash table kept in one global
** order.
**
** Every object sits in bucket (hash >> (64 - bits)), the TOP bits of its key's hash,
** and each chain is sorted by (hash, key in term order). So the whole table is sorted
** by (hash, key) across buckets, and doubling or halving the buckets keeps that
** order (bucket b splits into 2b and 2b+1). The walk order therefore never changes:
** next(K) is "the first key after (hash(K), K)", found whether or not K is still in
** the table, and a walk with first/next visits every object present throughout once,
** which ETS only promises under safe_fixtable.
**
** Stripes (write_concurrency) are the top 6 bits of the hash, so with at least 64
** buckets every bucket lies in one stripe, and a stripe's buckets are contiguous.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tasks/ets_int.h"

#define MIN_BITS ETS_STRIPE_BITS   /* 64 buckets at least: one stripe per bucket */

/* The bucket array. From 2 MiB on (2^18 buckets, a table of ~250,000 objects) it is
** mapped 2 MiB-aligned and given MADV_HUGEPAGE: a lookup in a big table reads one
** bucket at random, and with 4 KiB pages that read is a TLB miss too, whose page walk
** (nested, on a virtual machine) costs more than the miss itself; a huge page covers
** 512 times the buckets. A fresh mapping reads as zeros, as calloc's. Smaller arrays
** (and any mapping refused) come from calloc; the size says which. */
#define HUGE_PAGE ((size_t)2 << 20)

static int buckets_mapped(unsigned bits) {
  return ((size_t)1 << bits) * sizeof(ets_obj *) >= HUGE_PAGE;
}

static ets_obj **buckets_new(unsigned bits) {
  size_t size = ((size_t)1 << bits) * sizeof(ets_obj *);
  if (!buckets_mapped(bits)) return calloc((size_t)1 << bits, sizeof(ets_obj *));
  /* map a huge page more and trim both ends to the aligned middle */
  uint8_t *p = mmap(NULL, size + HUGE_PAGE, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  size_t lead = (size_t)(-(uintptr_t)p & (HUGE_PAGE - 1));
  if (lead) munmap(p, lead);
  if (HUGE_PAGE - lead) munmap(p + lead + size, HUGE_PAGE - lead);
  madvise(p + lead, size, MADV_HUGEPAGE);   /* best effort: small pages without it */
  return (ets_obj **)(void *)(p + lead);
}

static void buckets_free(ets_obj **b, unsigned bits) {
  if (!b) return;
  if (buckets_mapped(bits)) munmap(b, ((size_t)1 << bits) * sizeof(ets_obj *));
  else free(b);
}

int hash_init(ets_tab *t) {
  t->bits = MIN_BITS;
  t->buckets = buckets_new(t->bits);
  return t->buckets ? 0 : LPVM_ENOMEM;
}

int ets_obj_equal(const ets_obj *a, const ets_obj *b) {
  if (a->len == b->len && memcmp(a->data, b->data, a->len) == 0) return 1;
  return term_cmp(a->data + 1, a->data + a->len, b->data + 1, b->data + b->len, 1) == 0;
}

void hash_put(ets_tab *t, ets_obj *o, ets_obj **old) {
  const uint8_t *k = obj_key(o), *kend = obj_key_end(o);
  ets_obj **pp = &t->buckets[ets_bucket_of(t, o->hash)];
  int c = 1;
  *old = NULL;
  while (*pp && (c = ets_ord(o->hash, k, kend, *pp)) > 0) pp = &(*pp)->link[0];
  ets_stripe *s = ets_stripe_of(t, o->hash);
  if (*pp && c == 0) {
    if (t->type == LPVM_ETS_SET) {   /* replace in place */
      *old = *pp;
      o->link[0] = (*pp)->link[0];
      *pp = o;
      ets_count(t, s, 0, (long)obj_size(o) - (long)obj_size(*old));
      return;
    }
    /* bag: after the key's last object, unless an identical one is there */
    for (; *pp && ets_ord(o->hash, k, kend, *pp) == 0; pp = &(*pp)->link[0])
      if (t->type == LPVM_ETS_BAG && ets_obj_equal(*pp, o)) { *old = o; return; }
  }
  o->link[0] = *pp;
  *pp = o;
  ets_count(t, s, 1, (long)obj_size(o));
}

ets_obj *hash_remove_key(ets_tab *t, const ets_key *k) {
  ets_obj **pp = &t->buckets[ets_bucket_of(t, k->h)];
  int c = 1;
  while (*pp && (c = ets_ord(k->h, k->p, k->end, *pp)) > 0) pp = &(*pp)->link[0];
  if (!*pp || c != 0) return NULL;
  ets_obj *first = *pp, *last = first;
  long n = 1, mem = (long)obj_size(first);
  while (last->link[0] && ets_ord(k->h, k->p, k->end, last->link[0]) == 0) {
    last = last->link[0];
    n++;
    mem += (long)obj_size(last);
  }
  *pp = last->link[0];
  last->link[0] = NULL;
  ets_count(t, ets_stripe_of(t, k->h), -n, -mem);
  return first;
}

void hash_remove_obj(ets_tab *t, ets_obj *o) {
  ets_obj **pp = &t->buckets[ets_bucket_of(t, o->hash)];
  while (*pp && *pp != o) pp = &(*pp)->link[0];
  if (!*pp) return;
  *pp = o->link[0];
  o->link[0] = NULL;
  ets_count(t, ets_stripe_of(t, o->hash), -1, -(long)obj_size(o));
}

/* Buckets [lo, hi) of one stripe, read-locked when the table has stripes. */
static void stripe_range(const ets_tab *t, unsigned s, size_t *lo, size_t *hi) {
  if (t->nstripes == 1) { *lo = 0; *hi = (size_t)1 << t->bits; return; }
  unsigned shift = t->bits - ETS_STRIPE_BITS;
  *lo = (size_t)s << shift;
  *hi = (size_t)(s + 1) << shift;
}

static void slock(ets_tab *t, unsigned s) {
  if (t->nstripes > 1) ets_stripe_rdlock(t, &t->stripes[s]);
}

static void sunlock(ets_tab *t, unsigned s) {
  if (t->nstripes > 1) ets_stripe_rdunlock(t, &t->stripes[s]);
}

static void put_key(lpvm_tbuf *out, const ets_obj *o) {
  term_put_raw(out, obj_key(o), o->key_len);
}

/* The first key in buckets from `from` on (within and after its stripe). */
static int first_from(ets_tab *t, size_t from, lpvm_tbuf *out) {
  size_t nb = (size_t)1 << t->bits;
  unsigned s0 = t->nstripes > 1 ? (unsigned)(from >> (t->bits - ETS_STRIPE_BITS)) : 0;
  for (unsigned s = s0; s < t->nstripes && from < nb; s++) {
    size_t lo, hi;
    stripe_range(t, s, &lo, &hi);
    if (from > lo) lo = from;
    slock(t, s);
    for (size_t b = lo; b < hi; b++)
      if (t->buckets[b]) {
        put_key(out, t->buckets[b]);
        sunlock(t, s);
        return 1;
      }
    sunlock(t, s);
  }
  return 0;
}

int hash_first_key(ets_tab *t, lpvm_tbuf *out) { return first_from(t, 0, out); }

int hash_after_key(ets_tab *t, const ets_key *k, lpvm_tbuf *out) {
  size_t b = ets_bucket_of(t, k->h);
  unsigned s = t->nstripes > 1 ? (unsigned)(k->h >> (64 - ETS_STRIPE_BITS)) : 0;
  slock(t, s);
  for (ets_obj *o = t->buckets[b]; o; o = o->link[0])
    if (ets_ord(k->h, k->p, k->end, o) < 0) {
      put_key(out, o);
      sunlock(t, s);
      return 1;
    }
  sunlock(t, s);
  return first_from(t, b + 1, out);
}

int hash_walk(ets_tab *t, int (*fn)(ets_tab *t, ets_obj *o, void *ud), void *ud) {
  for (unsigned s = 0; s < t->nstripes; s++) {
    size_t lo, hi;
    stripe_range(t, s, &lo, &hi);
    slock(t, s);
    for (size_t b = lo; b < hi; b++)
      for (ets_obj *o = t->buckets[b], *nx; o; o = nx) {
        nx = o->link[0];
        int r = fn(t, o, ud);
        if (r) { sunlock(t, s); return r; }
      }
    sunlock(t, s);
  }
  return 0;
}

/* The load (objects per bucket) is kept at or under a half: a find in a big table
** misses on the bucket and then on each object of the chain up to its own, one
** dependent miss after the other, so the objects ahead of it are the cost that the
** load sets (half the load on average). Past a half the buckets grow to the power of
** two at or above 4 objects' worth (a load of 1/8 to 1/4; from a half, exactly a
** quarter), and under 1/32 they shrink the same way. The count is estimated from one
** stripe (its share times the stripes), so each threshold stands twice its margin
** from where a resize leaves the load: a stripe must hold twice its share (or a
** quarter of it) to ask again for the size it already has. A million objects have
** 2^21 buckets, 16 MiB (the rule before, a load of up to 2, left them 2^19: a lookup
** then met ~0.7 more objects on its way, each a dependent miss). */
int ets_wants_resize(ets_tab *t, const ets_stripe *s) {
  if (!tab_is_hash(t)) return 0;
  size_t n = atomic_load_explicit(&s->count, memory_order_relaxed) * t->nstripes;
  size_t nb = (size_t)1 << t->bits;
  return 2 * n > nb || (t->bits > MIN_BITS && 32 * n < nb);
}

/* Relink in global order: new buckets fill in ascending order too, so one tail
** pointer is enough and every chain stays sorted. */
void ets_resize(ets_tab *t) {
  size_t n = ets_size(t);
  unsigned bits = MIN_BITS;
  while (bits < 40 && ((size_t)1 << bits) < 4 * n) bits++;
  if (bits == t->bits) return;
  ets_obj **nbk = buckets_new(bits);
  if (!nbk) return;   /* keep the old buckets: slower, still correct */
  size_t onb = (size_t)1 << t->bits, cur = (size_t)-1;
  ets_obj **tail = NULL;
  for (size_t b = 0; b < onb; b++)
    for (ets_obj *o = t->buckets[b], *nx; o; o = nx) {
      nx = o->link[0];
      size_t nbix = (size_t)(o->hash >> (64 - bits));
      if (nbix != cur) { cur = nbix; tail = &nbk[nbix]; }
      o->link[0] = NULL;
      *tail = o;
      tail = &o->link[0];
    }
  buckets_free(t->buckets, t->bits);
  t->buckets = nbk;
  t->bits = bits;
}

void hash_free(ets_obj **buckets, unsigned bits) {
  if (!buckets) return;
  for (size_t b = 0; b < ((size_t)1 << bits); b++)
    for (ets_obj *o = buckets[b], *nx; o; o = nx) {
      nx = o->link[0];
      free(o);
    }
  buckets_free(buckets, bits);
}
