/*
** binary.c -- reference-counted binaries and the messages that share them
** (lpvm/binary.h has the contract, docs/binaries.md the user's view).
**
** Layout of a message with binaries (flags & LPVM_MSGF_BINS), one allocation:
**
**   lpvm_sig | term (len bytes) | pad to 8 | uint32 n, pad | lpvm_binref[n]
**
** The term's TAG_LPVM_BINREF i names entry i; entries are in the order the tags
** appear, each holding one reference. Who writes what: the sender builds the whole
** message before it is sent and nobody writes it after; the references are dropped
** by whoever frees the message (lpvm_msg_free), on whatever thread. The count is
** atomic: keep is relaxed (the keeper already holds a reference, so the buffer
** cannot go away meanwhile); drop is acq_rel, so the thread that frees the buffer
** sees every other thread's last use of it.
*/
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/task_int.h"
#include "tasks/term_int.h"

struct lpvm_bin {
  _Atomic size_t refs;
  size_t len;
  uint8_t data[];
};

/* Live binaries and their bytes, for leak checks (lpvm.binary_stats in Lua). */
static _Atomic size_t live_count, live_bytes;

lpvm_bin *lpvm_bin_new(const void *data, size_t len) {
  if (len > LPVM_BIN_MAX || (!data && len)) return NULL;
  lpvm_bin *b = malloc(sizeof *b + len);
  if (!b) return NULL;
  atomic_init(&b->refs, 1);
  b->len = len;
  if (len) memcpy(b->data, data, len);
  atomic_fetch_add_explicit(&live_count, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&live_bytes, len, memory_order_relaxed);
  return b;
}

void lpvm_bin_keep(lpvm_bin *b) { atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed); }

void lpvm_bin_drop(lpvm_bin *b) {
  if (!b || atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1) return;
  atomic_fetch_sub_explicit(&live_count, 1, memory_order_relaxed);
  atomic_fetch_sub_explicit(&live_bytes, b->len, memory_order_relaxed);
  free(b);
}

const uint8_t *lpvm_bin_data(const lpvm_bin *b) { return b->data; }
size_t lpvm_bin_len(const lpvm_bin *b) { return b->len; }

void lpvm_bin_stats(size_t *count, size_t *bytes) {
  if (count) *count = atomic_load_explicit(&live_count, memory_order_relaxed);
  if (bytes) *bytes = atomic_load_explicit(&live_bytes, memory_order_relaxed);
}

/* ---- the table after the term ---------------------------------------------------- */

typedef struct bin_table {
  uint32_t n, pad;
  lpvm_binref v[];
} bin_table;

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

static bin_table *table_of(const lpvm_msg *m) {
  return (bin_table *)((uint8_t *)(m + 1) + align8(m->len));
}

const lpvm_binref *lpvm_msg_bins(const lpvm_msg *m, uint32_t *n) {
  if (!(m->flags & LPVM_MSGF_BINS)) {
    *n = 0;
    return NULL;
  }
  bin_table *t = table_of(m);
  *n = t->n;
  return t->v;
}

/* lpvm_msg_free of a message with binaries: drop each reference once. */
void bin_msg_release(lpvm_msg *m) {
  bin_table *t = table_of(m);
  for (uint32_t i = 0; i < t->n; i++) lpvm_bin_drop(t->v[i].bin);
  t->n = 0;
}

void lpvm_msg_drop_bins(lpvm_msg *m) {
  if (!(m->flags & LPVM_MSGF_BINS)) return;
  bin_msg_release(m);
  m->flags &= (uint16_t)~LPVM_MSGF_BINS;
}

/* ---- building ---------------------------------------------------------------------------- */

void lpvm_put_bin(lpvm_tbuf *b, lpvm_binrefs *refs, lpvm_bin *bin, size_t off, size_t len) {
  if (b->err) return;
  if (!bin || off > bin->len || len > bin->len - off) {
    b->err = LPVM_EINVAL;
    b->cap = b->len;   /* as term_enc.c's tbuf_fail: later puts take the slow path */
    return;
  }
  if (refs->n == refs->cap) {
    uint32_t cap = refs->cap ? refs->cap * 2 : 8;
    lpvm_binref *v = cap > refs->cap ? realloc(refs->v, cap * sizeof *v) : NULL;
    if (!v) {
      b->err = LPVM_ENOMEM;
      b->cap = b->len;
      return;
    }
    refs->v = v;
    refs->cap = cap;
  }
  uint8_t tag[5] = {TAG_LPVM_BINREF, (uint8_t)(refs->n >> 24), (uint8_t)(refs->n >> 16),
                    (uint8_t)(refs->n >> 8), (uint8_t)refs->n};
  term_put_raw(b, tag, sizeof tag);
  if (b->err) return;
  refs->v[refs->n++] = (lpvm_binref){bin, (uint32_t)off, (uint32_t)len,
                                     (uint32_t)(b->len - sizeof tag), 0};
}

lpvm_msg *lpvm_msg_new_term(const uint8_t *term, size_t len, lpvm_binrefs *refs) {
  uint32_t n = refs ? refs->n : 0;
  if (refs) refs->n = 0;
  size_t extra = n ? align8(len) - len + sizeof(bin_table) + (size_t)n * sizeof(lpvm_binref) : 0;
  lpvm_msg *m = mbox_msg_alloc(len, extra);
  if (!m) return NULL;
  memcpy(lpvm_msg_data(m), term, len);
  if (n) {
    bin_table *t = table_of(m);
    t->n = n;
    t->pad = 0;
    memcpy(t->v, refs->v, (size_t)n * sizeof(lpvm_binref));
    for (uint32_t i = 0; i < n; i++) lpvm_bin_keep(t->v[i].bin);
    m->flags |= LPVM_MSGF_BINS;
  }
  return m;
}

/* A message that is one shared binary, as the encoder writes lpvm.send(pid, b) (the
** term [131, TAG_LPVM_BINREF, 0 0 0 0], a table of one entry at pos 1), made without
** it: the general encoder's set-up, its builder and the copy into a second block were
** ~1,000 instructions of a 100 KB binary's ~2,800 (docs/perf/bin.md). */
#define BIN_MSG_SIZE (sizeof(lpvm_msg) + 8 + sizeof(bin_table) + sizeof(lpvm_binref))

size_t lpvm_msg_bin_size(void) { return BIN_MSG_SIZE; }

lpvm_msg *lpvm_msg_new_bin(lpvm_bin *bin, size_t off, size_t len) {
  void *block = malloc(BIN_MSG_SIZE);
  lpvm_msg *m = block ? lpvm_msg_bin_init(block, bin, off, len) : NULL;
  if (!m) free(block);
  return m;
}

lpvm_msg *lpvm_msg_bin_init(void *block, lpvm_bin *bin, size_t off, size_t len) {
  if (!block || !bin || off > bin->len || len > bin->len - off) return NULL;
  lpvm_msg *m = lpvm_msg_init(block, 6);
  static const uint8_t term[6] = {TERM_VERSION, TAG_LPVM_BINREF, 0, 0, 0, 0};
  memcpy(lpvm_msg_data(m), term, sizeof term);
  bin_table *t = table_of(m);
  t->n = 1;
  t->pad = 0;
  t->v[0] = (lpvm_binref){bin, (uint32_t)off, (uint32_t)len, 1, 0};
  lpvm_bin_keep(bin);
  m->flags |= LPVM_MSGF_BINS;
  return m;
}

const lpvm_binref *lpvm_msg_lone_bin(const lpvm_msg *m) {
  static const uint8_t term[6] = {TERM_VERSION, TAG_LPVM_BINREF, 0, 0, 0, 0};
  if (!(m->flags & LPVM_MSGF_BINS) || m->len != sizeof term ||
      memcmp(m + 1, term, sizeof term) != 0)
    return NULL;
  bin_table *t = table_of(m);
  return t->n == 1 ? t->v : NULL;
}

lpvm_msg *lpvm_tbuf_to_msg_bins(lpvm_tbuf *b, lpvm_binrefs *refs) {
  if (refs->n == 0 || b->err || !b->data) {
    refs->n = 0;
    return lpvm_tbuf_to_msg(b);
  }
  lpvm_msg *m = lpvm_msg_new_term(b->data, b->len, refs);
  if (!m) b->err = LPVM_ENOMEM;
  lpvm_tbuf_free(b);
  return m;
}

void lpvm_binrefs_free(lpvm_binrefs *refs) {
  free(refs->v);
  memset(refs, 0, sizeof *refs);
}

/* ---- leaving the node ----------------------------------------------------------------- */

size_t lpvm_msg_flat_len(const lpvm_msg *m) {
  uint32_t n;
  const lpvm_binref *v = lpvm_msg_bins(m, &n);
  size_t len = m->len;
  for (uint32_t i = 0; i < n; i++) len += v[i].len;   /* the 5-byte header stays 5 */
  return len;
}

void lpvm_msg_flat_write(const lpvm_msg *m, uint8_t *out) {
  uint32_t n;
  const lpvm_binref *v = lpvm_msg_bins(m, &n);
  const uint8_t *term = (const uint8_t *)(m + 1);
  size_t at = 0;
  for (uint32_t i = 0; i < n; i++) {
    memcpy(out, term + at, v[i].pos - at);
    out += v[i].pos - at;
    uint32_t len = v[i].len;
    *out++ = TAG_BINARY;
    *out++ = (uint8_t)(len >> 24), *out++ = (uint8_t)(len >> 16);
    *out++ = (uint8_t)(len >> 8), *out++ = (uint8_t)len;
    memcpy(out, v[i].bin->data + v[i].off, len);
    out += len;
    at = v[i].pos + 5;
  }
  memcpy(out, term + at, m->len - at);
}

lpvm_msg *lpvm_msg_flatten(lpvm_msg *m) {
  if (!(m->flags & LPVM_MSGF_BINS)) return m;
  size_t len = lpvm_msg_flat_len(m);
  lpvm_msg *f = lpvm_msg_new(len);
  if (!f) return NULL;
  lpvm_msg_flat_write(m, lpvm_msg_data(f));
  f->from = m->from;
  f->ref = m->ref;
  f->kind = m->kind;
  lpvm_msg_free(m);
  return f;
}
