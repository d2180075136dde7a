/*
** lproc_small.c -- the slow paths of the per-thread free lists of small blocks
** (lproc_small.h says why they exist and why per thread): a block the lists cannot
** give, a block they cannot take, and the lists of a thread that ends.
**
** A thread's lists are set up by its first free of a small block: a thread-specific
** key whose destructor frees every block in them when the thread ends (workers at VM
** stop, private threads, the embedder's threads). The main thread's lists are not
** freed at exit, as jemalloc's own thread cache is not: bounded, and the process ends.
*/
#include <pthread.h>

#include "vm/lproc_small.h"

_Thread_local lproc_small lproc_small_tl;

#if LPROC_SMALL_LISTS
static pthread_key_t small_key;
static pthread_once_t small_once = PTHREAD_ONCE_INIT;
static int small_key_ok;

/* The thread ends: its lists go back to malloc, and its later frees go to free(). */
static void small_drop(void *arg) {
  lproc_small *k = arg;
  for (int c = 0; c < LPROC_SMALL_NCLASS; c++) {
    while (k->head[c]) {
      void *q = k->head[c];
      k->head[c] = *(void **)q;
      free(q);
    }
    k->room[c] = 0;
  }
  k->state = 2;
}

static void small_key_make(void) {
  small_key_ok = pthread_key_create(&small_key, small_drop) == 0;
}

/* The thread's first free of a small block: its lists start taking blocks. Without a
** key (none left) they never do: every block then goes to free(). */
static int small_setup(lproc_small *k) {
  pthread_once(&small_once, small_key_make);
  k->state = 2;
  if (!small_key_ok || pthread_setspecific(small_key, k) != 0) return 0;
  for (int c = 0; c < LPROC_SMALL_NCLASS; c++) {
    int n = LPROC_SMALL_BYTES / (8 * (c + 1));
    k->room[c] = (uint16_t)(n < LPROC_SMALL_ROOM ? n : LPROC_SMALL_ROOM);
  }
  k->state = 1;
  return 1;
}
#endif

void *lproc_small_miss(size_t nsize) { return malloc(lproc_small_size(nsize)); }

void lproc_small_spill(void *ptr, size_t osize) {
#if LPROC_SMALL_LISTS
  lproc_small *k = &lproc_small_tl;
  if (k->state == 0 && osize - 1 < LPROC_SMALL_MAX && small_setup(k)) {
    lproc_small_free(ptr, osize);
    return;
  }
#else
  (void)osize;
#endif
  free(ptr);
}
