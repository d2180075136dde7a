/*
** ets_int.h -- what the ETS files share: the table record, its objects and locks.
**
** Files: ets.c (the registry of tables, owners, heirs, names, the exit hook),
** ets_hash.c (set, bag, duplicate_bag storage), ets_tree.c (ordered_set storage),
** ets_ops.c (the object operations of ets.h), ets_ms.c (match specifications),
** ets_mem.c (the objects' memory).
**
** Locking (docs/architecture.md, "ETS"):
**   table lock   a rwlock per table (ets_lock.h's reader-group lock on read_concurrency
**                tables). Readers share it; a writer takes it exclusively,
**                except on a write_concurrency hash table, where single-key writers
**                share it too and exclude each other per stripe. Whole-table work
**                (resize, delete_all, select_delete, the table's deletion) takes it
**                exclusively. Both kinds prefer writers, so a stream of readers
**                cannot starve them.
**   stripes      write_concurrency hash tables: 64 stripe locks (ets_lock.h; their
**                readers counted per reader group when read_concurrency is set
**                too, so readers write no shared line), stripe = the top 6 bits
**                of the key's hash, and the bucket = the top k bits (k >= 6), so a
**                bucket belongs to one stripe whatever the table's size.
**   registry     one rwlock over the slots' ids, names and owners (ets.c); taken
**                before a table lock, never after one.
** A slot (ets_tab) is never freed while the VM runs, so a caller holding a stale
** table id may always lock the slot and then sees that its id changed.
*/
#ifndef LPVM_ETS_INT_H
#define LPVM_ETS_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "lpvm/ets.h"
#include "tasks/ets_lock.h"
#include "tasks/task_int.h"
#include "tasks/term_int.h"

/* One object: the tuple's external term, with its key located inside. */
typedef struct ets_obj {
  struct ets_obj *link[2];  /* hash: link[0] = next in the bucket; tree: children */
  uint64_t hash;            /* hash: the key's term_hash; tree: subtree height */
  uint32_t len;             /* bytes of data[] (131 first) */
  uint32_t key_off, key_len;
  uint8_t data[];
} ets_obj;

static inline const uint8_t *obj_key(const ets_obj *o) { return o->data + o->key_off; }
static inline const uint8_t *obj_key_end(const ets_obj *o) {
  return o->data + o->key_off + o->key_len;
}
/* Bytes an object costs (the allocator's own overhead left out). */
static inline size_t obj_size(const ets_obj *o) { return sizeof *o + o->len; }

#define ETS_NSTRIPES 64
#define ETS_STRIPE_BITS 6

typedef struct ets_stripe {
  ets_slock lock;           /* write_concurrency tables only (ets_lock.h) */
  _Atomic size_t count;     /* objects under this stripe */
  _Atomic size_t mem;       /* their bytes */
  char pad[128 - 3 * sizeof(size_t)];   /* the lock takes a word, with count's alignment */
} ets_stripe;
_Static_assert(sizeof(ets_stripe) == 128, "a stripe fills two cache lines of its own");

typedef struct ets_tab {
  /* Made once with the slot (rlock: for its first read_concurrency table) and never
  ** destroyed while the VM runs. A table uses rlock if rc, else lock, which prefers
  ** writers; rc is set before the table's id is published, rlock before rc. */
  pthread_rwlock_t lock;
  ets_rwl *rlock;
  _Atomic int rc;
  /* Written under the registry lock AND the table lock held exclusively: either lock
  ** suffices to read them. */
  _Atomic lpvm_tab tid;     /* 0: a free slot */
  _Atomic lpvm_id owner;
  uint32_t gen;             /* the slot's generation (registry lock) */
  uint32_t name_next;       /* named tables: next slot + 1 in the name's chain */
  lpvm_id heir;
  uint8_t *heir_data;       /* a whole term, or NULL = undefined */
  size_t heir_len;
  char name[256];
  int named;
  /* Fixed while the table lives. */
  int type, access, wc;
  uint32_t keypos;
  /* Storage, under the locks above. */
  ets_obj **buckets;        /* hash: 2^bits chains, sorted by (hash, key) */
  unsigned bits;
  ets_stripe *stripes;      /* wc_stripes, or &one */
  _Atomic unsigned nstripes;   /* ETS_NSTRIPES, or 1; read before the lock as a hint */
  ets_stripe one;
  ets_stripe *wc_stripes;   /* made for the slot's first write_concurrency table, kept */
  /* read_concurrency + write_concurrency: the stripes' readers counted per reader
  ** group (ets_lock.h), else NULL. Fixed while the table lives; slot_sg is made for
  ** the slot's first such table and kept. */
  ets_sgroup *sg;
  ets_sgroup *slot_sg;
  /* 1 while a read_concurrency + write_concurrency hash table lives in the slot, so
  ** its single-key operations may enter by the key's stripe alone (ets_fast_enter).
  ** Written with the table lock held exclusively (after rlock, slot_sg and wc_stripes
  ** exist, which is what its release publishes); read before any lock, as a hint. */
  _Atomic int fastkey;
  ets_obj *root;            /* ordered_set: an AVL tree in term order */
  /* ordered_set: counts changes of the tree's shape (a node put, replaced or removed,
  ** the tree detached), which only holders of the table lock alone make; read under
  ** the lock shared by the walk's hint (ets_tree.c). */
  uint64_t tree_version;
} ets_tab;

static inline int tab_is_hash(const ets_tab *t) { return t->type != LPVM_ETS_ORDERED_SET; }
static inline int tab_is_bag(const ets_tab *t) {
  return t->type == LPVM_ETS_BAG || t->type == LPVM_ETS_DUPLICATE_BAG;
}

size_t ets_size(const ets_tab *t);
size_t ets_mem(const ets_tab *t);
/* A stripe's counts change only under its write lock (or the table's, held alone), so
** its one writer adds with a plain load and store, not a locked read-modify-write;
** readers (info, the resize test) load them as they are. */
static inline void ets_count(ets_tab *t, ets_stripe *s, long dn, long dmem) {
  (void)t;
  if (dn)
    atomic_store_explicit(&s->count,
                          atomic_load_explicit(&s->count, memory_order_relaxed) + (size_t)dn,
                          memory_order_relaxed);
  if (dmem)
    atomic_store_explicit(&s->mem,
                          atomic_load_explicit(&s->mem, memory_order_relaxed) + (size_t)dmem,
                          memory_order_relaxed);
}

_Static_assert(ETS_NSTRIPES == ETS_SG_STRIPES, "a group counts every stripe");

/* A key's stripe lock, taken under the table lock (write_concurrency tables only):
** readers count themselves in their group's line when the table has groups (t->sg),
** else in the stripe's word; writers set the word's bit and wait out either kind. */
static inline void ets_stripe_rdlock(ets_tab *t, ets_stripe *s) {
  if (t->sg) ets_sg_rdlock(t->sg, &s->lock, (unsigned)(s - t->stripes));
  else ets_slock_rdlock(&s->lock);
}
static inline void ets_stripe_rdunlock(ets_tab *t, ets_stripe *s) {
  if (t->sg) ets_sg_rdunlock(t->sg, (unsigned)(s - t->stripes));
  else ets_slock_unlock(&s->lock);
}
static inline void ets_stripe_wrlock(ets_tab *t, ets_stripe *s) {
  if (t->sg) ets_sg_wrlock(t->sg, &s->lock, (unsigned)(s - t->stripes));
  else ets_slock_wrlock(&s->lock);
}
static inline void ets_stripe_wrunlock(ets_tab *t, ets_stripe *s) {
  (void)t;
  ets_slock_unlock(&s->lock);
}

/* ets.c: the slots, in chunks made once and never freed while the VM runs. A table id
** is ETS_TID_BIT | generation << 32 | slot. */
#define ETS_CHUNK_SLOTS 256
#define ETS_MAX_CHUNKS 4096   /* a million tables */
#define ETS_TID_BIT (UINT64_C(1) << 63)
extern ets_tab *_Atomic ets_chunks[ETS_MAX_CHUNKS];

static inline ets_tab *ets_slot_at(uint32_t slot) {
  if (slot >= (uint32_t)ETS_MAX_CHUNKS * ETS_CHUNK_SLOTS) return NULL;
  ets_tab *c = atomic_load_explicit(&ets_chunks[slot / ETS_CHUNK_SLOTS], memory_order_acquire);
  return c ? &c[slot % ETS_CHUNK_SLOTS] : NULL;
}

/* The table lock of either kind (above). The kind is read before locking: a caller
** holding a stale id may lock the wrong kind, and then sees that the id (or the kind)
** changed. Under the registry lock, or holding the table lock, the kind is fixed. */
static inline int ets_tab_kind(ets_tab *t) {
  return atomic_load_explicit(&t->rc, memory_order_acquire);
}

void ets_fast_drain(ets_tab *t);   /* ets_store.c: wait out stripe-only entrants */

static inline void ets_kind_lock(ets_tab *t, int kind, int excl) {
  if (kind && !excl) ets_rwl_rdlock(t->rlock);
  else if (kind) {
    ets_rwl_wrlock(t->rlock);   /* (fastkey is stable under it) */
    if (atomic_load_explicit(&t->fastkey, memory_order_relaxed)) ets_fast_drain(t);
  } else if (excl) pthread_rwlock_wrlock(&t->lock);
  else pthread_rwlock_rdlock(&t->lock);
}

static inline void ets_kind_unlock(ets_tab *t, int kind) {
  if (kind) ets_rwl_unlock(t->rlock);
  else pthread_rwlock_unlock(&t->lock);
}

/* Find a live table and lock it. wr: 0 read, 1 single-key write (shared on
** write_concurrency tables), 2 exclusive. write: 1 check write access, 0 read
** access, -1 none (info). On success the table lock is held; ets_leave releases it.
** Inline: every operation enters once, and the call cost a tenth of a lookup's own
** work. */
static inline __attribute__((always_inline)) int ets_enter(lpvm_task *self, lpvm_tab tid,
                                                           int wr, int write,
                                                           ets_tab **out) {
  if (!(tid & ETS_TID_BIT)) return LPVM_ETS_ENOTAB;
  ets_tab *t = ets_slot_at((uint32_t)tid);
  if (!t) return LPVM_ETS_ENOTAB;
  int kind = ets_tab_kind(t);
  int shared = wr == 0 || (wr == 1 && t->nstripes > 1);
  /* t->nstripes is read before the lock only as a hint: re-checked below. */
  ets_kind_lock(t, kind, !shared);
  if (atomic_load_explicit(&t->tid, memory_order_relaxed) != tid || kind != ets_tab_kind(t)) {
    ets_kind_unlock(t, kind);
    return LPVM_ETS_ENOTAB;
  }
  if (wr == 1 && shared && t->nstripes == 1) {   /* the hint was stale: go exclusive */
    ets_kind_unlock(t, kind);
    ets_kind_lock(t, kind, 1);
    if (atomic_load_explicit(&t->tid, memory_order_relaxed) != tid || kind != ets_tab_kind(t)) {
      ets_kind_unlock(t, kind);
      return LPVM_ETS_ENOTAB;
    }
  }
  lpvm_id me = self ? self->id : 0;
  lpvm_id owner = atomic_load_explicit(&t->owner, memory_order_relaxed);
  if (write >= 0 && me != owner && (t->access == LPVM_ETS_PRIVATE ||
                      (write && t->access == LPVM_ETS_PROTECTED))) {
    ets_kind_unlock(t, kind);
    return LPVM_ETS_EACCESS;
  }
  *out = t;
  return 0;
}

static inline void ets_leave(ets_tab *t) { ets_kind_unlock(t, ets_tab_kind(t)); }

/* Single-key operations on read_concurrency + write_concurrency hash tables (fastkey)
** enter by the key's stripe alone, without the table lock: a reader adds itself to
** its group's counter for the stripe (ets_lock.h) and reads the stripe's word, a
** writer claims the word's writer bit (from 0: no other writer) and waits out the
** stripe's group readers, and either then reads the table lock's state (seq_cst
** throughout). Whoever takes the table lock exclusively sets that state first and
** then waits for every stripe's counters and bit (ets_fast_drain): a Dekker pair, so
** an entrant either sees the whole-table writer and steps back, or is waited for.
** Two atomic operations a lookup and one an insert or counter step, against four and
** three through ets_enter plus the stripe, and no shared line written by readers.
** The id is checked after entering (a stale id touched only a counter or a bit of
** the slot's, which outlive every table in it, and undoes that). Anything unusual (a
** stale id, another kind of table, a writer at the stripe or the table, an access
** the caller lacks) steps back and returns 0: the caller takes ets_enter's way, which
** waits, re-checks and reports. 1: entered; ets_fast_leave(t, wr, *st) leaves. */
static inline __attribute__((always_inline)) int ets_fast_enter(lpvm_task *self,
                                                                lpvm_tab tid, int wr,
                                                                uint64_t h, ets_tab **out,
                                                                ets_stripe **st) {
  if (!(tid & ETS_TID_BIT)) return 0;
  ets_tab *t = ets_slot_at((uint32_t)tid);
  if (!t || !atomic_load_explicit(&t->fastkey, memory_order_acquire)) return 0;
  unsigned s = (unsigned)(h >> (64 - ETS_STRIPE_BITS));
  ets_stripe *sp = &t->wc_stripes[s];
  _Atomic uint32_t *c = NULL;
  if (wr) {
    uint32_t v = 0;
    if (!atomic_compare_exchange_strong_explicit(&sp->lock.w, &v, ETS_SLOCK_W,
                                                 memory_order_seq_cst, memory_order_relaxed))
      return 0;
  } else {
    c = ets_sg_counter(t->slot_sg, s);
    atomic_fetch_add_explicit(c, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&sp->lock.w, memory_order_seq_cst) & ETS_SLOCK_W) goto back;
  }
  if (atomic_load_explicit(&t->rlock->state, memory_order_seq_cst) != ETS_RWL_FREE ||
      atomic_load_explicit(&t->tid, memory_order_relaxed) != tid ||
      !atomic_load_explicit(&t->fastkey, memory_order_relaxed))
    goto back;
  /* the table is the caller's and lives: its fields are fixed until we leave */
  if (t->access != LPVM_ETS_PUBLIC &&   /* (public: no owner to compare) */
      (self ? self->id : 0) != atomic_load_explicit(&t->owner, memory_order_relaxed) &&
      (t->access == LPVM_ETS_PRIVATE || (wr && t->access == LPVM_ETS_PROTECTED)))
    goto back;
  if (wr) {   /* the stripe's readers already inside (the usual case: none) */
    uint32_t any = 0;
#pragma GCC unroll 8
    for (int g = 0; g < ETS_RGROUPS; g++)
      any |= atomic_load_explicit(&t->slot_sg[g].readers[s], memory_order_seq_cst);
    if (any) ets_sg_wait_readers(t->slot_sg, s);
  }
  *out = t;
  *st = sp;
  return 1;
back:
  if (wr) atomic_store_explicit(&sp->lock.w, 0, memory_order_release);
  else atomic_fetch_sub_explicit(c, 1, memory_order_release);
  return 0;
}

static inline void ets_fast_leave(ets_tab *t, int wr, ets_stripe *st) {
  if (wr) atomic_store_explicit(&st->lock.w, 0, memory_order_release);
  else ets_sg_rdunlock(t->slot_sg, (unsigned)(st - t->wc_stripes));
}
/* Terms nest at most this deep in a table (the Lua codec's own limit), because
** comparing them recurses; ets_too_deep checks a term in [p, end). */
#define ETS_MAX_DEPTH 200
int ets_too_deep(const uint8_t *p, const uint8_t *end);
/* Build an object from exactly one tuple term (no version byte) in [p, end). In two
** steps when the caller may not need a new object (insert over an object of the same
** size): ets_obj_locate checks the tuple and finds its key, ets_obj_make allocates
** (NULL: no memory), ets_obj_fill writes the bytes over an existing object of the
** same length and key (its links and hash, or tree height, are kept). */
typedef struct ets_loc {
  uint32_t len, key_off, key_len;   /* as ets_obj's */
  uint64_t hash;                    /* term_hash of the key (hash tables), else 1 */
} ets_loc;
int ets_obj_locate(const ets_tab *t, const uint8_t *p, const uint8_t *end, ets_loc *l);
ets_obj *ets_obj_make(const uint8_t *p, const ets_loc *l);
static inline void ets_obj_fill(ets_obj *o, const uint8_t *p, const ets_loc *l) {
  o->len = l->len;
  o->data[0] = TERM_VERSION;
  memcpy(o->data + 1, p, l->len - 1);
  o->key_off = l->key_off;
  o->key_len = l->key_len;
}
int ets_obj_new(const ets_tab *t, const uint8_t *p, const uint8_t *end, ets_obj **out);
/* ets_mem.c: the objects' memory (an arena of their own in huge pages, with jemalloc),
** freed with free(); ets_mem_init once before the first table. */
void ets_mem_init(void);
void *ets_mem_alloc(size_t size);
/* One scalar of the kinds Lua's fast path writes (integers, floats, binaries) at p:
** its end, or NULL (anything else, or cut short). */
static inline const uint8_t *ets_flat_scalar(const uint8_t *p, const uint8_t *end) {
  size_t left = (size_t)(end - p), n;
  if (p > end || left < 2) return NULL;
  switch (p[0]) {
    case TAG_SMALL_INT: n = 2; break;
    case TAG_INT: n = 5; break;
    case TAG_NEW_FLOAT: n = 9; break;
    case TAG_BINARY:
      if (left < 5) return NULL;
      n = 5 + (size_t)term_be32(p + 1);
      break;
    default: return NULL;
  }
  return left >= n ? p + n : NULL;
}
/* lpvm_term_check (LPVM_EBADTERM or 0), without its general walk for the shapes most
** calls carry: one integer, float or binary, or a small tuple of them. */
int ets_term_check(const uint8_t *term, size_t len);
/* The same; when the term is a tuple of such values with at least one, *first_end is
** where its first element ends (else NULL), so an insert need not look for its key
** again: ets_obj_locate_flat takes it (or, for any other term or keypos, walks as
** ets_obj_locate). */
int ets_term_check_any(const uint8_t *term, size_t len);   /* the rest, out of line */
/* The term is such a tuple (checked): 1, and *first_end as above; else 0. */
static inline int ets_flat_tuple(const uint8_t *term, size_t len, const uint8_t **first_end) {
  *first_end = NULL;
  if (term && len >= 3 && term[0] == TERM_VERSION && term[1] == TAG_SMALL_TUPLE) {
    const uint8_t *p = term + 3, *end = term + len;
    unsigned n = term[2];
    const uint8_t *first = n > 0 ? (p = ets_flat_scalar(p, end)) : NULL;
    for (; n > 1 && p; n--) p = ets_flat_scalar(p, end);   /* the other n - 1 */
    if (p == end) {
      *first_end = first;
      return 1;
    }
  }
  return 0;
}
static inline int ets_term_check_flat(const uint8_t *term, size_t len,
                                      const uint8_t **first_end) {
  return ets_flat_tuple(term, len, first_end) ? 0 : ets_term_check_any(term, len);
}
/* A flat tuple (no version byte) in [p, end) whose first element ends at first_end,
** located with that element as its key, hashed when for a hash table (the caller
** knows the length fits 32 bits). */
static inline void ets_loc_first(const uint8_t *p, const uint8_t *end,
                                 const uint8_t *first_end, int hashed, ets_loc *l) {
  l->len = (uint32_t)((size_t)(end - p) + 1);
  l->key_off = 3;
  l->key_len = (uint32_t)(first_end - (p + 2));
  l->hash = hashed ? term_hash(p + 2, first_end) : 1;
}
static inline int ets_obj_locate_flat(const ets_tab *t, const uint8_t *p,
                                      const uint8_t *end, const uint8_t *first_end,
                                      ets_loc *l) {
  size_t len = (size_t)(end - p) + 1;
  if (!first_end || t->keypos != 1 || len > UINT32_MAX) return ets_obj_locate(t, p, end, l);
  ets_loc_first(p, end, first_end, tab_is_hash(t), l);
  return 0;
}
/* Free every object of a detached storage. */
void ets_free_objs(int type, ets_obj **buckets, unsigned bits, ets_obj *root);

/* ets_hash.c (set, bag, duplicate_bag) and ets_tree.c (ordered_set). Keys are terms
** without a version byte; `h` is term_hash(key) for hash tables. The caller holds the
** table lock, and for the single-key functions the key's stripe (ets_stripe_of) when
** the table has stripes; the walking functions lock stripes themselves. Objects
** returned are valid only under those locks. Counts are kept by these functions. */
typedef struct ets_key {
  const uint8_t *p, *end;
  uint64_t h;
} ets_key;

/* A whole key term (version byte first): checked, located and hashed, or an error.
** One integer, float or binary (most keys) is checked by its tag and length alone,
** inline; any other term goes to ets_key_parse_any. */
int ets_key_parse_any(const uint8_t *key, size_t klen, ets_key *k);
static inline int ets_key_parse(const uint8_t *key, size_t klen, ets_key *k) {
  if (key && klen >= 3 && key[0] == TERM_VERSION &&
      ets_flat_scalar(key + 1, key + klen) == key + klen) {
    k->p = key + 1;
    k->end = key + klen;
    k->h = term_hash(k->p, k->end);
    return 0;
  }
  return ets_key_parse_any(key, klen, k);
}

int ets_store_init(ets_tab *t);                     /* empty storage */
void ets_store_detach(ets_tab *t, ets_obj ***buckets, unsigned *bits, ets_obj **root);
static inline ets_stripe *ets_stripe_of(ets_tab *t, uint64_t h) {
  return t->nstripes > 1 ? &t->stripes[h >> (64 - ETS_STRIPE_BITS)] : t->stripes;
}
/* The first object with key k (a bag's objects with one key follow each other
** through ets_same_next, NULL after the last). */
static inline ets_obj *ets_find(ets_tab *t, const ets_key *k);
ets_obj *ets_bag_next(ets_obj *o);
static inline ets_obj *ets_same_next(ets_tab *t, ets_obj *o) {
  return tab_is_bag(t) ? ets_bag_next(o) : NULL;   /* a set's key has one object */
}
/* Insert o. set, ordered_set: replaces (*old = the replaced object); bag: refuses an
** identical object (*old = o); duplicate_bag: appends. *old = NULL otherwise. */
void ets_put(ets_tab *t, ets_obj *o, ets_obj **old);
/* ets_select.c: select_replace's second half, the table held alone: hits[i] becomes the
** tuple at rb->data + off[i] .. off[i + 1]; all or nothing (LPVM_EINVAL when one is not
** a tuple with its object's key). The replaced objects are chained on *gone (link[0]). */
int ets_replace_hits(ets_tab *t, ets_obj **hits, const size_t *off, size_t n,
                     const lpvm_tbuf *rb, ets_obj **gone);
/* Unlink every object with key k; returns them chained through link[0]. */
ets_obj *ets_remove_key(ets_tab *t, const ets_key *k);
/* Unlink o (found with ets_find/ets_same_next). */
void ets_remove_obj(ets_tab *t, ets_obj *o);
/* Walk order. Append the key of the first (last) object, or of the first after
** (before) k, which need not be present, to out: 1, or 0 when there is none.
** last/before on hash tables are first/after, as in ETS. */
int ets_first_key(ets_tab *t, lpvm_tbuf *out);
int ets_last_key(ets_tab *t, lpvm_tbuf *out);
int ets_after_key(ets_tab *t, const ets_key *k, lpvm_tbuf *out);
int ets_before_key(ets_tab *t, const ets_key *k, lpvm_tbuf *out);
/* A result list whose length is known only at its end (ets_ops.c): open appends a
** LIST header and returns its place, close patches in n (n == 0: NIL alone) and
** appends the tail. */
size_t ets_list_open(lpvm_tbuf *out);
void ets_list_close(lpvm_tbuf *out, size_t mark, uint32_t n);
/* Every object in walk order; fn returns nonzero to stop (returned). fn must not
** change the table (select_delete collects first, then removes). */
int ets_walk(ets_tab *t, int (*fn)(ets_tab *t, ets_obj *o, void *ud), void *ud);
/* Hash tables: does the stripe's count say the buckets should grow or shrink?
** ets_resize (table lock exclusive) does it. */
int ets_wants_resize(ets_tab *t, const ets_stripe *s);
void ets_resize(ets_tab *t);
/* Whole objects equal (=:=)? */
int ets_obj_equal(const ets_obj *a, const ets_obj *b);

/* The storages (the ets_ functions above dispatch on the table type). */
int hash_init(ets_tab *t);
/* Inline: every single-key operation looks its key up once, and the call cost ~10
** instructions of a lookup's ~280 in ETS. */
static inline size_t ets_bucket_of(const ets_tab *t, uint64_t h) {
  return (size_t)(h >> (64 - t->bits));
}
/* n bytes at a and b the same? A short key (an integer's 2 or 5 bytes) by two
** overlapping loads of 4 or 2 bytes, inline: memcmp's call and its dispatch cost ~20
** instructions of an insert or a lookup, a loop over the bytes ~15. */
static inline int ets_same_bytes(const uint8_t *a, const uint8_t *b, size_t n) {
  uint32_t x0, x1, y0, y1;
  uint16_t u0, u1, w0, w1;
  if (n > 8) return memcmp(a, b, n) == 0;
  if (n >= 4) {
    memcpy(&x0, a, 4), memcpy(&x1, a + n - 4, 4);
    memcpy(&y0, b, 4), memcpy(&y1, b + n - 4, 4);
    return ((x0 ^ y0) | (x1 ^ y1)) == 0;
  }
  if (n >= 2) {
    memcpy(&u0, a, 2), memcpy(&u1, a + n - 2, 2);
    memcpy(&w0, b, 2), memcpy(&w1, b + n - 2, 2);
    return ((u0 ^ w0) | (u1 ^ w1)) == 0;
  }
  return n == 0 || a[0] == b[0];
}
/* (h, key) against an object, in the table's order. */
static inline int ets_ord(uint64_t h, const uint8_t *k, const uint8_t *kend,
                          const ets_obj *o) {
  if (h != o->hash) return h < o->hash ? -1 : 1;
  size_t n = (size_t)(kend - k);   /* the usual equal key: the same bytes */
  if (n == o->key_len && ets_same_bytes(k, obj_key(o), n)) return 0;
  return term_cmp(k, kend, obj_key(o), obj_key_end(o), 1);
}
static inline __attribute__((always_inline)) ets_obj *hash_find(ets_tab *t,
                                                               const ets_key *k) {
  for (ets_obj *o = t->buckets[ets_bucket_of(t, k->h)]; o; o = o->link[0]) {
    int c = ets_ord(k->h, k->p, k->end, o);
    if (c == 0) return o;
    if (c < 0) break;
  }
  return NULL;
}
void hash_put(ets_tab *t, ets_obj *o, ets_obj **old);
ets_obj *hash_remove_key(ets_tab *t, const ets_key *k);
void hash_remove_obj(ets_tab *t, ets_obj *o);
int hash_first_key(ets_tab *t, lpvm_tbuf *out);
int hash_after_key(ets_tab *t, const ets_key *k, lpvm_tbuf *out);
int hash_walk(ets_tab *t, int (*fn)(ets_tab *t, ets_obj *o, void *ud), void *ud);
void hash_free(ets_obj **buckets, unsigned bits);

ets_obj *tree_find(ets_tab *t, const ets_key *k);
static inline ets_obj *ets_find(ets_tab *t, const ets_key *k) {
  return tab_is_hash(t) ? hash_find(t, k) : tree_find(t, k);
}
void tree_put(ets_tab *t, ets_obj *o, ets_obj **old);
ets_obj *tree_remove_key(ets_tab *t, const ets_key *k);
int tree_first_key(ets_tab *t, lpvm_tbuf *out);
int tree_last_key(ets_tab *t, lpvm_tbuf *out);
int tree_after_key(ets_tab *t, const ets_key *k, lpvm_tbuf *out);
int tree_before_key(ets_tab *t, const ets_key *k, lpvm_tbuf *out);
int tree_walk(ets_tab *t, int (*fn)(ets_tab *t, ets_obj *o, void *ud), void *ud);
void tree_free(ets_obj *root);

/* ets_ms.c: a compiled match specification, pointing into the caller's term (which
** must outlive it). */
typedef struct ets_clause {
  const uint8_t *head, *guards, *body;   /* guards/body: the lists' first elements */
  uint32_t nguards, nbody;
  int nvars;                             /* highest variable index + 1 */
} ets_clause;

#define ETS_MS_CLAUSES 4
#define ETS_MS_VARS 32

typedef struct ets_ms {
  const uint8_t *end;
  ets_clause *cl;           /* cl_in or malloc'd */
  uint32_t ncl;
  int maxvars;
  const uint8_t **bp, **be; /* bindings: extent, NULL = unbound (b_in or malloc'd) */
  const ets_obj *obj;       /* the object being matched */
  int in_body;              /* evaluating a body: a failed call is 'EXIT' (ets_ms.c) */
  lpvm_tbuf arena;          /* values guards and bodies compute */
  ets_clause cl_in[ETS_MS_CLAUSES];
  const uint8_t *b_in[ETS_MS_VARS];
} ets_ms;

int ets_ms_compile(const uint8_t *ms, size_t len, ets_ms *m);
void ets_ms_free(ets_ms *m);
/* Run it on one object: 1 and the body's result appended to out (if out), 0 no
** match. *is_true: the result is the atom true (select_count/select_delete). */
int ets_ms_run(ets_ms *m, const ets_obj *o, lpvm_tbuf *out, int *is_true);
/* The pattern's key when it is fully bound (no variables): a lookup instead of a
** scan. 0 and the key's extent, or -1. */
int ets_ms_bound_key(const ets_ms *m, uint32_t keypos, const uint8_t **p,
                     const uint8_t **end);

#endif
