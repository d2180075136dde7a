/*
** ptab.c -- the process table: ids, lock-free lookup, and safe reclamation.
**
** A slot is a 64-bit word plus the task pointer. The word packs the generation
** (bits 32..61: bit 62 of an id marks a remote pid), a LIVE bit (31) and a count of pins (bits 0..30). While a task is
** live the table itself holds one pin. A lookup pins the task with one CAS that
** also checks the generation, so it can never pin a dead task or a newer task in the
** same slot; whoever drops the last pin of a closed slot reaps the task (answers its
** leftover signals and frees it). The slot array is never freed while the VM runs,
** so touching a stale slot is always safe: this is what lets senders look ids up
** without a lock and without an epoch scheme.
**
** Free slots are reused oldest first, so a freed slot waits for every other free
** slot before its next generation is handed out. The ring of free slot numbers is
** as long as the table, and its window slides forward by one entry per spawn: each
** page the head leaves behind is given back (MADV_DONTNEED), or spawn/exit churn
** would keep 4 bytes per spawn resident until the ring wrapped (32 MB at the default
** 8M slots; the soak run of docs/reliability.md found it).
*/
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tasks/task_int.h"

#define W_REFS    UINT64_C(0x7fffffff)
#define W_LIVE    (UINT64_C(1) << 31)
#define W_GEN(w)  (((w) >> 32) & UINT64_C(0x3fffffff))

/* Reuse a slot only once this many are free: a dead id's slot rests a while. */
#define REUSE_AFTER 1024

typedef struct slot {
  _Atomic uint64_t word;
  _Atomic(lpvm_task *) task;   /* when free: unused */
} slot;

static struct {
  slot *slots;
  uint32_t *freeq;             /* ring of free slot numbers, oldest first */
  uint32_t cap, hwm;           /* slots [1, hwm) have been handed out once */
  uint32_t fhead, fcount;
  uint32_t fpage;              /* ring entries per memory page */
  size_t bytes, fbytes;
  pthread_mutex_t mu;
} P;

static void *map_zeroed(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

int ptab_init(uint32_t cap) {
  if (cap < 16 || cap > UINT32_C(0x7fffffff)) return LPVM_EINVAL;
  P.bytes = (size_t)cap * sizeof(slot);
  P.fbytes = (size_t)cap * sizeof(uint32_t);
  P.slots = map_zeroed(P.bytes);   /* pages are touched only as slots are used */
  P.freeq = map_zeroed(P.fbytes);
  if (!P.slots || !P.freeq) {
    ptab_fini();
    return LPVM_ENOMEM;
  }
  P.cap = cap;
  P.hwm = 1;                       /* slot 0 is never used: id 0 means none */
  P.fhead = P.fcount = 0;
  long page = sysconf(_SC_PAGESIZE);
  P.fpage = (uint32_t)((page > 0 ? (size_t)page : 4096) / sizeof(uint32_t));
  pthread_mutex_init(&P.mu, NULL);
  return 0;
}

void ptab_fini(void) {
  if (P.slots) munmap(P.slots, P.bytes);
  if (P.freeq) munmap(P.freeq, P.fbytes);
  if (P.cap) pthread_mutex_destroy(&P.mu);
  memset(&P, 0, sizeof P);
}

static void free_slot(uint32_t n) {
  pthread_mutex_lock(&P.mu);
  P.freeq[(P.fhead + P.fcount) % P.cap] = n;
  P.fcount++;
  pthread_mutex_unlock(&P.mu);
}

/* The head just moved onto a new page: the page before it holds no free entry (unless
** the window spans nearly the whole ring), so its memory can go back to the kernel;
** a later write there gets a fresh zero page. Called with P.mu held. */
static void freeq_release_behind(void) {
  if (P.fhead % P.fpage != 0 || (uint64_t)P.fcount + 2u * P.fpage > P.cap) return;
  uint32_t start = (P.fhead ? P.fhead : P.cap) - P.fpage;
  if (start % P.fpage != 0) return;   /* a ring that is not a whole number of pages */
  madvise(P.freeq + start, (size_t)P.fpage * sizeof(uint32_t), MADV_DONTNEED);
}

int ptab_alloc(lpvm_task *t, int port, lpvm_id *id) {
  uint32_t n;
  if (!P.cap) return LPVM_ESTATE;   /* no VM (before lpvm_start, after lpvm_stop) */
  pthread_mutex_lock(&P.mu);
  if (P.fcount > REUSE_AFTER || (P.hwm >= P.cap && P.fcount > 0)) {
    n = P.freeq[P.fhead];
    P.fhead = (P.fhead + 1) % P.cap;
    P.fcount--;
    freeq_release_behind();
  } else if (P.hwm < P.cap) {
    n = P.hwm++;
  } else {
    pthread_mutex_unlock(&P.mu);
    return LPVM_ELIMIT;
  }
  pthread_mutex_unlock(&P.mu);
  slot *s = &P.slots[n];
  uint64_t gen = W_GEN(atomic_load_explicit(&s->word, memory_order_relaxed));
  atomic_store_explicit(&s->task, t, memory_order_relaxed);
  *id = ((lpvm_id)gen << 32) | n | (port ? LPVM_ID_PORT_BIT : 0);
  t->id = *id;
  return 0;
}

void ptab_publish(lpvm_task *t) {
  slot *s = &P.slots[lpvm_id_slot(t->id)];
  /* the table's own pin + LIVE; release makes the whole record visible */
  atomic_store_explicit(&s->word, ((uint64_t)lpvm_id_gen(t->id) << 32) | W_LIVE | 1,
                        memory_order_release);
}

static void retire(uint32_t n, uint64_t gen) {
  slot *s = &P.slots[n];
  atomic_store_explicit(&s->task, NULL, memory_order_relaxed);
  atomic_store_explicit(&s->word, ((gen + 1) & UINT64_C(0x3fffffff)) << 32,
                        memory_order_release);
  free_slot(n);
}

void ptab_unreserve(lpvm_id id) {
  retire(lpvm_id_slot(id), lpvm_id_gen(id));
}

lpvm_task *ptab_pin(lpvm_id id) {
  uint32_t n = lpvm_id_slot(id);
  if (n == 0 || n >= P.cap) return NULL;
  slot *s = &P.slots[n];
  uint64_t gen = lpvm_id_gen(id);
  uint64_t w = atomic_load_explicit(&s->word, memory_order_acquire);
  do {
    if (W_GEN(w) != gen || !(w & W_LIVE)) return NULL;
  } while (!atomic_compare_exchange_weak_explicit(&s->word, &w, w + 1,
                                                  memory_order_acquire,
                                                  memory_order_acquire));
  return atomic_load_explicit(&s->task, memory_order_relaxed);
}

/* The last pin of a closed slot is gone: nobody can push signals any more. */
static void reap(lpvm_task *t) {
  lpvm_id id = t->id;
  sig_drain_dead(t);
  if (t->def->free) t->def->free(t);
  else free(t);
  retire(lpvm_id_slot(id), lpvm_id_gen(id));
}

void ptab_unpin(lpvm_task *t) {
  slot *s = &P.slots[lpvm_id_slot(t->id)];
  uint64_t w = atomic_fetch_sub_explicit(&s->word, 1, memory_order_acq_rel) - 1;
  if ((w & W_REFS) == 0 && !(w & W_LIVE)) reap(t);
}

void ptab_close(lpvm_task *t) {
  slot *s = &P.slots[lpvm_id_slot(t->id)];
  uint64_t w = atomic_fetch_sub_explicit(&s->word, W_LIVE + 1, memory_order_acq_rel);
  w -= W_LIVE + 1;
  if ((w & W_REFS) == 0) reap(t);
}

void ptab_foreach(void (*fn)(lpvm_task *t, void *ud), void *ud) {
  pthread_mutex_lock(&P.mu);
  uint32_t hwm = P.hwm;
  pthread_mutex_unlock(&P.mu);
  for (uint32_t n = 1; n < hwm; n++) {
    uint64_t w = atomic_load_explicit(&P.slots[n].word, memory_order_acquire);
    if (!(w & W_LIVE)) continue;
    lpvm_task *t = ptab_pin((W_GEN(w) << 32) | n);
    if (!t) continue;
    fn(t, ud);
    ptab_unpin(t);
  }
}

struct foreach_ids {
  void (*fn)(lpvm_id id, void *ud);
  void *ud;
};

static void call_with_id(lpvm_task *t, void *ud) {
  struct foreach_ids *f = ud;
  f->fn(t->id, f->ud);
}

int lpvm_is_alive(lpvm_id id) {
  lpvm_task *t = ptab_pin(id);
  if (!t) return 0;
  int alive = ts_status(atomic_load_explicit(&t->sched_word, memory_order_acquire)) != TS_DEAD;
  ptab_unpin(t);
  return alive;
}

void lpvm_foreach_task(void (*fn)(lpvm_id id, void *ud), void *ud) {
  if (!fn || !P.slots) return;
  struct foreach_ids f = {fn, ud};
  ptab_foreach(call_with_id, &f);
}
