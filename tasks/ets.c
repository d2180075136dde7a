/*
** ets.c -- the ETS registry: table slots and ids, names, owners and heirs, and the
** hook that deletes (or bequeaths) a dead task's tables.
**
** A table id is bit 63 | generation << 32 | slot. Slots come in chunks that are never
** freed while the VM runs, so any thread holding any id may lock the slot it names
** and then compare the id stored there: a deleted or reused table simply no longer
** matches (ETS_ENOTAB). Creating, deleting, renaming and changing owners take the
** registry lock exclusively (rare); ordinary operations never touch it, except to
** resolve a name.
**
** Owners: a task that gets a table (ets_new, give_away, heir) has its ets_owner flag
** set, and task_die calls ets_task_exit, which scans the slots only for such tasks.
** The flag and the dying task's DEAD status form a Dekker pair (store, fence, load on
** both sides), so a table handed to a task at the moment it dies is never lost:
** either the giver sees the task dead and deletes the table itself, or the dying
** task sees the flag and finds the table under the registry lock.
*/
#include <stdlib.h>
#include <string.h>

#include "tasks/ets_int.h"

#define NAME_BUCKETS 1024

static struct {
  pthread_rwlock_t lock;               /* the registry lock */
  uint32_t used;                       /* slots handed out so far */
  uint32_t *free;                      /* freed slots, reused first */
  size_t nfree, capfree;
  uint32_t names[NAME_BUCKETS];        /* slot + 1 of the first named table, 0 none */
  size_t live;
  int up;
} E;

static uint32_t name_hash(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
  return h & (NAME_BUCKETS - 1);
}

ets_tab *_Atomic ets_chunks[ETS_MAX_CHUNKS];

static lpvm_tab tid_of(uint32_t slot, uint32_t gen) {
  return ETS_TID_BIT | (uint64_t)(gen & 0x7fffffffu) << 32 | slot;
}

int ets_init(void) {
  ets_mem_init();
  memset(&E, 0, sizeof E);
  pthread_rwlock_init(&E.lock, NULL);
  E.up = 1;
  return 0;
}

void ets_fini(void) {
  if (!E.up) return;
  for (uint32_t i = 0; i < ETS_MAX_CHUNKS; i++) {
    ets_tab *c = atomic_load(&ets_chunks[i]);
    if (!c) continue;
    for (uint32_t j = 0; j < ETS_CHUNK_SLOTS; j++) {
      ets_tab *t = &c[j];
      if (atomic_load(&t->tid)) {
        ets_obj **b;
        unsigned bits;
        ets_obj *root;
        ets_store_detach(t, &b, &bits, &root);
        ets_free_objs(t->type, b, bits, root);
        free(t->heir_data);
      }
      pthread_rwlock_destroy(&t->lock);
      ets_rwl_free(t->rlock);
      free(t->wc_stripes);
      free(t->slot_sg);
    }
    free(c);
    atomic_store(&ets_chunks[i], NULL);
  }
  free(E.free);
  pthread_rwlock_destroy(&E.lock);
  memset(&E, 0, sizeof E);
}

/* A new chunk: every slot's locks made before anyone can see it. */
static int chunk_add(uint32_t ci) {
  ets_tab *c = calloc(ETS_CHUNK_SLOTS, sizeof *c);
  if (!c) return LPVM_ENOMEM;
  pthread_rwlockattr_t wpref;
  pthread_rwlockattr_init(&wpref);
  pthread_rwlockattr_setkind_np(&wpref, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  for (uint32_t j = 0; j < ETS_CHUNK_SLOTS; j++) {
    pthread_rwlock_init(&c[j].lock, &wpref);
    ets_slock_init(&c[j].one.lock);
  }
  pthread_rwlockattr_destroy(&wpref);
  atomic_store_explicit(&ets_chunks[ci], c, memory_order_release);
  return 0;
}

/* Registry lock held exclusively. */
static int slot_alloc(uint32_t *slot) {
  if (E.nfree) { *slot = E.free[--E.nfree]; return 0; }
  if (E.used >= (uint32_t)ETS_MAX_CHUNKS * ETS_CHUNK_SLOTS) return LPVM_ETS_ELIMIT;
  if (E.used % ETS_CHUNK_SLOTS == 0) {
    int rc = chunk_add(E.used / ETS_CHUNK_SLOTS);
    if (rc) return rc;
  }
  *slot = E.used++;
  return 0;
}

static int slot_release(uint32_t slot) {
  if (E.nfree == E.capfree) {
    size_t cap = E.capfree ? 2 * E.capfree : 64;
    uint32_t *f = realloc(E.free, cap * sizeof *f);
    if (!f) return LPVM_ENOMEM;   /* the slot is simply not reused */
    E.free = f;
    E.capfree = cap;
  }
  E.free[E.nfree++] = slot;
  return 0;
}

/* ---- names (registry lock held) -------------------------------------------------------- */

static uint32_t *name_link(const char *name, uint32_t *slot_out) {
  uint32_t *pl = &E.names[name_hash(name)];
  while (*pl) {
    ets_tab *t = ets_slot_at(*pl - 1);
    if (strcmp(t->name, name) == 0) { if (slot_out) *slot_out = *pl - 1; return pl; }
    pl = &t->name_next;
  }
  return NULL;
}

/* Bumped by every change of the names (registry lock held), so that a cache of
** name -> id (vm/lets.c) knows when to forget what it holds. */
static _Atomic uint64_t names_epoch;

uint64_t lpvm_ets_names_epoch(void) {
  return atomic_load_explicit(&names_epoch, memory_order_acquire);
}

static void name_add(ets_tab *t, uint32_t slot) {
  uint32_t *head = &E.names[name_hash(t->name)];
  atomic_fetch_add_explicit(&names_epoch, 1, memory_order_release);
  t->name_next = *head;
  *head = slot + 1;
}

static void name_del(ets_tab *t) {
  uint32_t *pl = name_link(t->name, NULL);
  atomic_fetch_add_explicit(&names_epoch, 1, memory_order_release);
  if (pl) *pl = t->name_next;
  t->name_next = 0;
}

lpvm_tab lpvm_ets_whereis(const char *name) {
  lpvm_tab tid = 0;
  uint32_t slot;
  if (!name || !E.up) return 0;
  pthread_rwlock_rdlock(&E.lock);
  if (name_link(name, &slot)) tid = atomic_load_explicit(&ets_slot_at(slot)->tid,
                                                         memory_order_relaxed);
  pthread_rwlock_unlock(&E.lock);
  return tid;
}

/* ---- objects ----------------------------------------------------------------------------- */

/* Every container takes at least 2 bytes, so a short term cannot nest deeper than
** its length allows: only long ones are walked. */
int ets_too_deep(const uint8_t *p, const uint8_t *end) {
  if ((size_t)(end - p) <= 2 * ETS_MAX_DEPTH) return 0;
  return term_depth(p, end, ETS_MAX_DEPTH + 1) > ETS_MAX_DEPTH;
}

int ets_term_check_any(const uint8_t *term, size_t len) {
  if (term && len >= 3 && term[0] == TERM_VERSION && term[1] != TAG_SMALL_TUPLE &&
      ets_flat_scalar(term + 1, term + len) == term + len)
    return 0;
  return !term || lpvm_term_check(term, len) ? LPVM_EBADTERM : 0;
}

int ets_term_check(const uint8_t *term, size_t len) {
  const uint8_t *first_end;
  return ets_term_check_flat(term, len, &first_end);
}

int ets_key_parse_any(const uint8_t *key, size_t klen, ets_key *k) {
  if (ets_term_check(key, klen)) return LPVM_EBADTERM;
  k->p = key + 1;
  k->end = key + klen;
  if (ets_too_deep(k->p, k->end)) return LPVM_EINVAL;
  k->h = term_hash(k->p, k->end);
  return 0;
}

int ets_obj_locate(const ets_tab *t, const uint8_t *p, const uint8_t *end, ets_loc *l) {
  size_t len = (size_t)(end - p) + 1;
  const uint8_t *kend;
  /* {Key, ...} with a scalar key first: no walk (the term is checked already) */
  if (t->keypos == 1 && len >= 5 && len <= 2 * ETS_MAX_DEPTH && p[0] == TAG_SMALL_TUPLE &&
      p[1] >= 1 && (kend = ets_flat_scalar(p + 2, end)) != NULL) {
    l->len = (uint32_t)len;
    l->key_off = 3;
    l->key_len = (uint32_t)(kend - (p + 2));
    l->hash = tab_is_hash(t) ? term_hash(p + 2, kend) : 1;
    return 0;
  }
  lpvm_tread r = {p, end, 0};
  uint32_t arity;
  if (lpvm_get_tuple(&r, &arity) || arity < t->keypos) return LPVM_ETS_EOBJECT;
  if (ets_too_deep(p, end)) return LPVM_EINVAL;
  if (len > UINT32_MAX) return LPVM_EINVAL;
  for (uint32_t i = 1; i < t->keypos; i++) lpvm_skip(&r);
  const uint8_t *key = r.p;
  lpvm_skip(&r);
  l->len = (uint32_t)len;
  l->key_off = (uint32_t)(key - p) + 1;
  l->key_len = (uint32_t)(r.p - key);
  l->hash = tab_is_hash(t) ? term_hash(key, r.p) : 1;
  return 0;
}

/* An object of up to 64 bytes (a {key, value} of integers is 53) takes a 64-byte
** block, which jemalloc's 64-byte class places on a cache line of its own: in its
** 48- and 56-byte classes half or three quarters of the blocks straddle two lines,
** so a find in a big table could miss on two lines for one object, and two workers
** writing neighbouring objects (made one after the other, as a table's fill makes
** them) wrote one line. */
#define OBJ_LINE 64

ets_obj *ets_obj_make(const uint8_t *p, const ets_loc *l) {
  size_t size = sizeof(ets_obj) + l->len;
  ets_obj *o = ets_mem_alloc(size <= OBJ_LINE ? OBJ_LINE : size);
  if (!o) return NULL;
  o->link[0] = o->link[1] = NULL;
  o->hash = l->hash;
  ets_obj_fill(o, p, l);
  return o;
}

int ets_obj_new(const ets_tab *t, const uint8_t *p, const uint8_t *end, ets_obj **out) {
  ets_loc l;
  int rc = ets_obj_locate(t, p, end, &l);
  if (rc) return rc;
  return (*out = ets_obj_make(p, &l)) ? 0 : LPVM_ENOMEM;
}

size_t ets_size(const ets_tab *t) {
  size_t n = 0;
  for (unsigned i = 0; i < t->nstripes; i++)
    n += atomic_load_explicit(&t->stripes[i].count, memory_order_relaxed);
  return n;
}

size_t ets_mem(const ets_tab *t) {
  size_t n = sizeof *t + (t->buckets ? ((size_t)1 << t->bits) * sizeof(ets_obj *) : 0);
  if (t->nstripes > 1) n += ETS_NSTRIPES * sizeof(ets_stripe);
  if (t->sg) n += ETS_RGROUPS * sizeof(ets_sgroup);
  for (unsigned i = 0; i < t->nstripes; i++)
    n += atomic_load_explicit(&t->stripes[i].mem, memory_order_relaxed);
  return n;
}

/* ---- creating and deleting -------------------------------------------------------------- */

static int copy_term(const uint8_t *data, size_t len, uint8_t **out) {
  *out = NULL;
  if (!data) return 0;
  if (lpvm_term_check(data, len)) return LPVM_EBADTERM;
  if (!(*out = malloc(len))) return LPVM_ENOMEM;
  memcpy(*out, data, len);
  return 0;
}

/* The flag half of the Dekker pair (see the top): 1 if `to` is alive and will look
** for its tables when it dies. */
static int mark_owner(lpvm_id to) {
  if (!to) return 1;   /* "outside any task": lives until deleted or lpvm_stop */
  lpvm_task *x = ptab_pin(to);
  if (!x) return 0;
  atomic_store(&x->ets_owner, 1);
  atomic_thread_fence(memory_order_seq_cst);
  int alive = ts_status(atomic_load(&x->sched_word)) != TS_DEAD;
  ptab_unpin(x);
  return alive;
}

/* Fill a fresh slot (registry lock held exclusively). */
static int tab_setup(ets_tab *t, uint32_t slot, const lpvm_ets_opts *o, const char *name,
                     lpvm_id owner, uint8_t *heir_data) {
  int wc = o->write_concurrency && o->type != LPVM_ETS_ORDERED_SET;
  if (wc && !t->wc_stripes) {
    ets_stripe *s = calloc(ETS_NSTRIPES, sizeof *s);
    if (!s) return LPVM_ENOMEM;
    for (int k = 0; k < ETS_NSTRIPES; k++) ets_slock_init(&s[k].lock);
    t->wc_stripes = s;
  }
  int rc_kind = o->read_concurrency ? 1 : 0;
  if (rc_kind && !t->rlock && !(t->rlock = ets_rwl_new())) return LPVM_ENOMEM;
  if (rc_kind && wc && !t->slot_sg && !(t->slot_sg = ets_sg_new())) return LPVM_ENOMEM;
  ets_kind_lock(t, rc_kind, 1);
  atomic_store_explicit(&t->rc, rc_kind, memory_order_release);
  t->type = o->type;
  t->access = o->access;
  t->keypos = o->keypos ? o->keypos : 1;
  t->wc = wc;
  t->nstripes = wc ? ETS_NSTRIPES : 1;
  t->stripes = wc ? t->wc_stripes : &t->one;
  t->sg = rc_kind && wc ? t->slot_sg : NULL;
  for (unsigned k = 0; k < t->nstripes; k++) {
    atomic_store_explicit(&t->stripes[k].count, 0, memory_order_relaxed);
    atomic_store_explicit(&t->stripes[k].mem, 0, memory_order_relaxed);
  }
  int rc = ets_store_init(t);
  if (rc == 0) {
    t->gen++;
    strcpy(t->name, name);
    t->named = o->named != 0;
    t->heir = o->heir;
    t->heir_data = heir_data;
    t->heir_len = o->heir_data_len;
    atomic_store_explicit(&t->owner, owner, memory_order_relaxed);
    atomic_store_explicit(&t->fastkey, rc_kind && wc && tab_is_hash(t), memory_order_release);
    atomic_store_explicit(&t->tid, tid_of(slot, t->gen), memory_order_relaxed);
    if (t->named) name_add(t, slot);
  }
  ets_kind_unlock(t, rc_kind);
  return rc;
}

int lpvm_ets_new(lpvm_task *self, const lpvm_ets_opts *o, lpvm_tab *tab) {
  static const lpvm_ets_opts dflt = LPVM_ETS_OPTS_INIT;
  if (!o) o = &dflt;
  if (!tab) return LPVM_EINVAL;
  if (!E.up) return LPVM_ESTATE;
  if (o->type < LPVM_ETS_SET || o->type > LPVM_ETS_DUPLICATE_BAG ||
      o->access < LPVM_ETS_PROTECTED || o->access > LPVM_ETS_PRIVATE ||
      lpvm_id_is_port(o->heir))   /* an heir is a process: a port gets no messages */
    return LPVM_EINVAL;
  const char *name = o->name ? o->name : "";
  if (strlen(name) >= sizeof ((ets_tab *)0)->name) return LPVM_EINVAL;
  if (o->heir_data && lpvm_term_check(o->heir_data, o->heir_data_len)) return LPVM_EBADTERM;
  lpvm_ets_opts oo = *o;   /* an heir not alive now is none, as ETS's */
  if (oo.heir && !mark_owner(oo.heir)) {
    oo.heir = 0;
    oo.heir_data = NULL;
    oo.heir_data_len = 0;
  }
  o = &oo;
  uint8_t *hd;
  int rc = copy_term(o->heir_data, o->heir_data_len, &hd);
  if (rc) return rc;
  lpvm_id me = self ? self->id : 0;
  if (me) atomic_store(&self->ets_owner, 1);   /* its own flag: no race with itself */
  pthread_rwlock_wrlock(&E.lock);
  uint32_t slot;
  if (o->named && name_link(name, NULL)) rc = LPVM_EEXIST;
  else rc = slot_alloc(&slot);
  if (rc == 0) {
    ets_tab *t = ets_slot_at(slot);
    rc = tab_setup(t, slot, o, name, me, hd);
    if (rc) slot_release(slot);
    else {
      *tab = atomic_load_explicit(&t->tid, memory_order_relaxed);
      E.live++;
    }
  }
  pthread_rwlock_unlock(&E.lock);
  if (rc) free(hd);
  return rc;
}

/* Unpublish a table (registry lock held exclusively); its storage goes to *dead for
** freeing once the locks are released. */
typedef struct dead_store {
  int type;
  ets_obj **b;
  unsigned bits;
  ets_obj *root;
  uint8_t *heir_data;
} dead_store;

static void tab_kill(ets_tab *t, dead_store *d) {
  int kind = ets_tab_kind(t);
  ets_kind_lock(t, kind, 1);
  uint32_t slot = (uint32_t)atomic_load_explicit(&t->tid, memory_order_relaxed);
  if (t->named) name_del(t);
  t->named = 0;
  atomic_store_explicit(&t->tid, 0, memory_order_relaxed);
  atomic_store_explicit(&t->owner, 0, memory_order_relaxed);
  atomic_store_explicit(&t->fastkey, 0, memory_order_relaxed);
  d->type = t->type;
  ets_store_detach(t, &d->b, &d->bits, &d->root);
  d->heir_data = t->heir_data;
  t->heir_data = NULL;
  for (unsigned k = 0; k < t->nstripes; k++) {
    atomic_store_explicit(&t->stripes[k].count, 0, memory_order_relaxed);
    atomic_store_explicit(&t->stripes[k].mem, 0, memory_order_relaxed);
  }
  ets_kind_unlock(t, kind);
  slot_release(slot);
  E.live--;
}

static void dead_free(dead_store *d) {
  ets_free_objs(d->type, d->b, d->bits, d->root);
  free(d->heir_data);
}

/* The live table behind tid, registry lock held; NULL if none. */
static ets_tab *reg_find(lpvm_tab tid) {
  if (!(tid & ETS_TID_BIT)) return NULL;
  ets_tab *t = ets_slot_at((uint32_t)tid);
  return t && atomic_load_explicit(&t->tid, memory_order_relaxed) == tid ? t : NULL;
}

/* A table the caller may delete or rename (public, or its own); registry lock held. */
static ets_tab *reg_find_writable(lpvm_task *self, lpvm_tab tab, int *rc) {
  ets_tab *t = reg_find(tab);
  *rc = 0;
  if (!t) *rc = LPVM_ETS_ENOTAB;
  else if (t->access != LPVM_ETS_PUBLIC &&
           atomic_load_explicit(&t->owner, memory_order_relaxed) != (self ? self->id : 0))
    *rc = LPVM_ETS_EACCESS;
  return *rc ? NULL : t;
}

int lpvm_ets_delete(lpvm_task *self, lpvm_tab tab) {
  dead_store d;
  int rc;
  pthread_rwlock_wrlock(&E.lock);
  ets_tab *t = reg_find_writable(self, tab, &rc);
  if (t) tab_kill(t, &d);
  pthread_rwlock_unlock(&E.lock);
  if (rc == 0) dead_free(&d);
  return rc;
}

/* ---- owners and heirs -------------------------------------------------------------------- */

/* {'ETS-TRANSFER', Tab, From, Data} to the new owner. */
/* {'ETS-TRANSFER', Tab, From, Data}: Tab as new gave it, the name of a named table
** (an atom, as ETS's; a Lua process reads it as the name string), else the reference.
** Registry lock held. */
static void send_transfer(lpvm_task *from, lpvm_id to, const ets_tab *t,
                          const uint8_t *data, size_t len) {
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 4);
  lpvm_put_atom(&b, "ETS-TRANSFER");
  if (t->named) lpvm_put_atom(&b, t->name);
  else lpvm_put_ref(&b, atomic_load_explicit(&t->tid, memory_order_relaxed));
  lpvm_put_pid(&b, from ? from->id : 0);
  if (data) lpvm_put_term(&b, data, len);
  else lpvm_put_atom(&b, "undefined");
  if (b.err == 0) lpvm_send(from, to, b.data, b.len);
  lpvm_tbuf_free(&b);
}

/* Registry lock held exclusively. */
static void set_owner(ets_tab *t, lpvm_id to) {
  int kind = ets_tab_kind(t);
  ets_kind_lock(t, kind, 1);
  atomic_store_explicit(&t->owner, to, memory_order_relaxed);
  ets_kind_unlock(t, kind);
}

int lpvm_ets_give_away(lpvm_task *self, lpvm_tab tab, lpvm_id to, const uint8_t *data,
                       size_t len) {
  lpvm_id me = self ? self->id : 0;
  if (data && lpvm_term_check(data, len)) return LPVM_EBADTERM;
  int rc = 0;
  pthread_rwlock_wrlock(&E.lock);
  ets_tab *t = reg_find(tab);
  if (!t) rc = LPVM_ETS_ENOTAB;
  else if (atomic_load_explicit(&t->owner, memory_order_relaxed) != me)
    rc = LPVM_ETS_EOWNER;
  else if (to == me || !to || lpvm_id_is_port(to) || !mark_owner(to)) rc = LPVM_ENOPROC;
  else {
    set_owner(t, to);
    send_transfer(self, to, t, data, len);
  }
  pthread_rwlock_unlock(&E.lock);
  return rc;
}

int lpvm_ets_set_heir(lpvm_task *self, lpvm_tab tab, lpvm_id heir, const uint8_t *data,
                      size_t len) {
  lpvm_id me = self ? self->id : 0;
  if (lpvm_id_is_port(heir)) return LPVM_EINVAL;
  if (data && lpvm_term_check(data, len)) return LPVM_EBADTERM;
  if (heir && !mark_owner(heir)) {   /* not alive now: none, as ETS's */
    heir = 0;
    data = NULL;
    len = 0;
  }
  uint8_t *copy;
  int rc = copy_term(data, len, &copy);
  if (rc) return rc;
  pthread_rwlock_wrlock(&E.lock);
  ets_tab *t = reg_find(tab);
  if (!t) rc = LPVM_ETS_ENOTAB;
  else if (atomic_load_explicit(&t->owner, memory_order_relaxed) != me)
    rc = LPVM_ETS_EOWNER;
  else {
    int kind = ets_tab_kind(t);
    ets_kind_lock(t, kind, 1);
    uint8_t *old = t->heir_data;
    t->heir = heir;
    t->heir_data = copy;
    t->heir_len = len;
    copy = old;
    ets_kind_unlock(t, kind);
  }
  pthread_rwlock_unlock(&E.lock);
  free(copy);
  return rc;
}

int lpvm_ets_rename(lpvm_task *self, lpvm_tab tab, const char *name) {
  if (!name || strlen(name) >= sizeof ((ets_tab *)0)->name) return LPVM_EINVAL;
  int rc;
  pthread_rwlock_wrlock(&E.lock);
  ets_tab *t = reg_find_writable(self, tab, &rc);
  if (t && t->named && name_link(name, NULL)) {   /* its own name too, as ETS */
    rc = LPVM_EEXIST;
  } else if (t) {
    int kind = ets_tab_kind(t);
    ets_kind_lock(t, kind, 1);
    if (t->named) name_del(t);
    strcpy(t->name, name);
    if (t->named) name_add(t, (uint32_t)tab);
    ets_kind_unlock(t, kind);
  }
  pthread_rwlock_unlock(&E.lock);
  return rc;
}

/* The task is dying: its tables go to their heirs (alive, not itself) or away. */
void ets_task_exit(lpvm_task *task) {
  atomic_thread_fence(memory_order_seq_cst);   /* the DEAD half of the Dekker pair */
  if (!atomic_load(&task->ets_owner) || !E.up) return;
  enum { BATCH = 16 };
  dead_store dead[BATCH];
  int again;
  do {   /* in batches: the storage of killed tables is freed outside the lock */
    int nd = 0;
    again = 0;
    pthread_rwlock_wrlock(&E.lock);
    for (uint32_t s = 0; s < E.used; s++) {
      ets_tab *t = ets_slot_at(s);
      if (!atomic_load_explicit(&t->tid, memory_order_relaxed) ||
          atomic_load_explicit(&t->owner, memory_order_relaxed) != task->id)
        continue;
      lpvm_id heir = t->heir;
      if (heir && heir != task->id && mark_owner(heir)) {
        set_owner(t, heir);
        send_transfer(task, heir, t, t->heir_data, t->heir_len);
        continue;
      }
      if (nd == BATCH) { again = 1; break; }
      tab_kill(t, &dead[nd++]);
    }
    pthread_rwlock_unlock(&E.lock);
    for (int i = 0; i < nd; i++) dead_free(&dead[i]);
  } while (again);
}

/* ---- information ------------------------------------------------------------------------- */

int lpvm_ets_info(lpvm_tab tab, lpvm_ets_tabinfo *info) {
  ets_tab *t;
  if (!info) return LPVM_EINVAL;
  int rc = ets_enter(NULL, tab, 0, -1, &t);   /* info is open to anyone, as in ETS */
  if (rc) return rc;
  info->type = t->type;
  info->access = t->access;
  info->named = t->named;
  info->read_concurrency = atomic_load_explicit(&t->rc, memory_order_relaxed);
  info->write_concurrency = t->wc;
  info->keypos = t->keypos;
  info->owner = atomic_load_explicit(&t->owner, memory_order_relaxed);
  info->heir = t->heir;
  info->size = ets_size(t);
  info->memory = ets_mem(t);
  strcpy(info->name, t->name);
  ets_leave(t);
  return 0;
}

size_t lpvm_ets_all(lpvm_tab *out, size_t cap) {
  size_t n = 0;
  if (!E.up) return 0;
  pthread_rwlock_rdlock(&E.lock);
  for (uint32_t s = 0; s < E.used; s++) {
    lpvm_tab tid = atomic_load_explicit(&ets_slot_at(s)->tid, memory_order_relaxed);
    if (!tid) continue;
    if (n < cap && out) out[n] = tid;
    n++;
  }
  pthread_rwlock_unlock(&E.lock);
  return n;
}

const char *lpvm_ets_strerror(int err) {
  switch (err) {
    case LPVM_ETS_ENOTAB: return "no such table";
    case LPVM_ETS_EACCESS: return "no access: the table is protected or private";
    case LPVM_ETS_EOBJECT: return "not a tuple with the key position";
    case LPVM_ETS_ENOKEY: return "no object with this key";
    case LPVM_ETS_EPOS: return "position out of range, or the key's";
    case LPVM_ETS_EVALUE: return "element is not an integer, or the sum leaves 64 bits";
    case LPVM_ETS_ETYPE: return "not for this table type";
    case LPVM_ETS_EOWNER: return "not the table's owner";
    case LPVM_ETS_ELIMIT: return "too many tables";
    case LPVM_ETS_EMATCH: return "bad match specification";
    case LPVM_ETS_ESPACE: return "the objects do not fit the buffer";
    case LPVM_EEXIST: return "a named table of that name exists";
    case LPVM_EBADTERM: return "malformed term";
    case LPVM_ENOMEM: return "out of memory";
    case LPVM_ENOPROC: return "not a live process other than the owner";
    case LPVM_EINVAL: return "bad argument";
    default: return "error";
  }
}
