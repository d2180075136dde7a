/*
** term_enc.c -- the term builder: lpvm_tbuf and the lpvm_put_* functions.
**
** Every message passes through here, so a put is a bounds check and a few stores: the
** buffer starts big enough for ordinary messages (one allocation) and doubles when it
** must grow. The first error is kept in b->err and every later put does nothing, so a
** sender checks once, at lpvm_tbuf_to_msg.
*/
#include <stdlib.h>
#include <string.h>

#include "tasks/node.h"
#include "tasks/term_int.h"

#define TBUF_INITIAL 256     /* covers nearly every message in one allocation */
#define TBUF_KEEP_MAX 65536  /* lpvm_tbuf_reset releases a buffer grown past this */
#define ATOM_MAX_CHARS 255   /* Erlang's limit, counted in characters */


static inline uint8_t *wr16(uint8_t *q, uint32_t v) {
  q[0] = (uint8_t)(v >> 8); q[1] = (uint8_t)v;
  return q + 2;
}

static inline uint8_t *wr32(uint8_t *q, uint32_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  v = __builtin_bswap32(v);   /* one store */
  memcpy(q, &v, 4);
#else
  q[0] = (uint8_t)(v >> 24); q[1] = (uint8_t)(v >> 16);
  q[2] = (uint8_t)(v >> 8); q[3] = (uint8_t)v;
#endif
  return q + 4;
}

static inline uint8_t *wr64(uint8_t *q, uint64_t v) {
  return wr32(wr32(q, (uint32_t)(v >> 32)), (uint32_t)v);
}

/* Record the first error. Setting cap to len makes every later room() take the slow
** path, which sees the error: the fast path needs no error test of its own. */
static void tbuf_fail(lpvm_tbuf *b, int err) {
  if (b->err == 0) b->err = err;
  b->cap = b->len;
}

/* The slow path of room(). A builder with no buffer (zeroed, or emptied by
** lpvm_tbuf_to_msg) starts a fresh term, version byte first. */
static uint8_t *tbuf_grow(lpvm_tbuf *b, size_t n) {
  if (b->err) return NULL;
  int fresh = (b->data == NULL);
  if (fresh) b->len = 0;
  size_t need = b->len + n + (size_t)fresh;
  if (need < n) { tbuf_fail(b, LPVM_ENOMEM); return NULL; }
  size_t old = b->cap, cap = old ? old : TBUF_INITIAL;
  if (need / 2 > cap && need <= SIZE_MAX - need / 8) {
    cap = need + need / 8;   /* one put past twice the buffer (a long string): its size */
  } else {
    while (cap < need) {
      if (cap > SIZE_MAX / 2) { cap = need; break; }
      cap *= 2;
    }
  }
  uint8_t *d;
  if (!fresh && b->len < old / 2) {
    /* mostly empty (a block sized for the last message, then a long string): realloc
    ** would copy the whole old block when it moves; copy only what is written */
    d = malloc(cap);
    if (d) {
      memcpy(d, b->data, b->len);
      free(b->data);
    }
  } else {
    d = realloc(b->data, cap);
  }
  if (d == NULL) { tbuf_fail(b, LPVM_ENOMEM); return NULL; }
  b->data = d;
  b->cap = cap;
  if (fresh) d[b->len++] = TERM_VERSION;
  return d + b->len;
}

/* Where the next n bytes go, or NULL after an error. */
static inline uint8_t *room(lpvm_tbuf *b, size_t n) {
  if (b->cap - b->len >= n) return b->data + b->len;
  return tbuf_grow(b, n);
}

uint8_t *lpvm_tbuf_room(lpvm_tbuf *b, size_t n) { return room(b, n); }

void lpvm_tbuf_init(lpvm_tbuf *b) {
  b->data = malloc(TBUF_INITIAL);
  b->len = 0;
  b->cap = 0;
  b->err = 0;
  if (b->data == NULL) { tbuf_fail(b, LPVM_ENOMEM); return; }
  b->cap = TBUF_INITIAL;
  b->data[b->len++] = TERM_VERSION;
}

void lpvm_tbuf_free(lpvm_tbuf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

/* After an error cap may be below the real allocation (see tbuf_fail), never above
** it, and never below 1 while there is a buffer: reusing it is safe. */
void lpvm_tbuf_reset(lpvm_tbuf *b) {
  if (b->data == NULL || b->cap > TBUF_KEEP_MAX) {
    lpvm_tbuf_free(b);
    lpvm_tbuf_init(b);
    return;
  }
  b->err = 0;
  b->data[0] = TERM_VERSION;
  b->len = 1;
}

lpvm_msg *lpvm_tbuf_to_msg(lpvm_tbuf *b) {
  lpvm_msg *m = NULL;
  if (b->err == 0 && b->data != NULL) {
    m = lpvm_msg_new(b->len);
    if (m != NULL) memcpy(lpvm_msg_data(m), b->data, b->len);
    else b->err = LPVM_ENOMEM;
  }
  lpvm_tbuf_free(b);   /* emptied either way; b->err stays for the caller to read */
  return m;
}

/* ---- atoms ----------------------------------------------------------------------- */

/* Characters in a UTF-8 string, or -1 if it is not valid UTF-8 (Erlang refuses such
** atoms). Overlong forms, surrogates and code points past U+10FFFF are invalid. */
static long utf8_chars(const uint8_t *s, size_t len) {
  long chars = 0;
  size_t i = 0;
  while (i < len) {
    unsigned c = s[i];
    size_t k;
    unsigned lo = 0x80, hi = 0xBF;   /* range of the second byte */
    if (c < 0x80) { i++; chars++; continue; }
    if (c < 0xC2) return -1;
    else if (c < 0xE0) k = 1;
    else if (c < 0xF0) { k = 2; if (c == 0xE0) lo = 0xA0; else if (c == 0xED) hi = 0x9F; }
    else if (c < 0xF5) { k = 3; if (c == 0xF0) lo = 0x90; else if (c == 0xF4) hi = 0x8F; }
    else return -1;
    if (len - i <= k) return -1;
    if (s[i + 1] < lo || s[i + 1] > hi) return -1;
    for (size_t j = 2; j <= k; j++)
      if ((s[i + j] & 0xC0) != 0x80) return -1;
    i += k + 1;
    chars++;
  }
  return chars;
}

void lpvm_put_atom_len(lpvm_tbuf *b, const char *name, size_t len) {
  if (len <= 8 && name) {   /* nil, true, false, ok...: copied and checked ASCII at once */
    uint8_t *q = room(b, 2 + len);
    if (q == NULL) return;
    unsigned high = 0;
    for (size_t i = 0; i < len; i++) high |= q[2 + i] = (uint8_t)name[i];
    if (high < 0x80) {
      q[0] = TAG_SMALL_ATOM_UTF8;
      q[1] = (uint8_t)len;
      b->len += 2 + len;
      return;
    }
  }
  if (name == NULL && len > 0) { tbuf_fail(b, LPVM_EINVAL); return; }
  long chars = utf8_chars((const uint8_t *)name, len);
  if (chars < 0 || chars > ATOM_MAX_CHARS) { tbuf_fail(b, LPVM_EINVAL); return; }
  uint8_t *q = room(b, 3 + len);
  if (q == NULL) return;
  uint8_t *q0 = q;
  if (len < 256) {
    *q++ = TAG_SMALL_ATOM_UTF8;
    *q++ = (uint8_t)len;
  } else {
    *q++ = TAG_ATOM_UTF8;
    q = wr16(q, (uint32_t)len);
  }
  if (len) memcpy(q, name, len);
  b->len += (size_t)(q - q0) + len;
}

void lpvm_put_atom(lpvm_tbuf *b, const char *name) {
  if (name == NULL) { tbuf_fail(b, LPVM_EINVAL); return; }
  lpvm_put_atom_len(b, name, strlen(name));
}

/* ---- numbers and binaries -------------------------------------------------------- */

void lpvm_put_int(lpvm_tbuf *b, int64_t v) {
  uint8_t *q = room(b, 11);   /* the largest form: SMALL_BIG_EXT with 8 digits */
  if (q == NULL) return;
  if (v >= 0 && v <= 255) {
    q[0] = TAG_SMALL_INT;
    q[1] = (uint8_t)v;
    b->len += 2;
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    q[0] = TAG_INT;
    wr32(q + 1, (uint32_t)v);
    b->len += 5;
  } else {   /* beyond 32 bits: a little-endian magnitude and a sign byte */
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    uint8_t n = 0;
    q[0] = TAG_SMALL_BIG;
    q[2] = v < 0;
    for (; mag != 0; mag >>= 8) q[3 + n++] = (uint8_t)mag;
    q[1] = n;
    b->len += 3 + (size_t)n;
  }
}

void lpvm_put_float(lpvm_tbuf *b, double v) {
  uint8_t *q = room(b, 9);
  if (q == NULL) return;
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  q[0] = TAG_NEW_FLOAT;
  wr64(q + 1, bits);
  b->len += 9;
}

void lpvm_put_binary(lpvm_tbuf *b, const void *p, size_t len) {
  if ((p == NULL && len > 0) || len > UINT32_MAX) { tbuf_fail(b, LPVM_EINVAL); return; }
  uint8_t *q = room(b, 5 + len);
  if (q == NULL) return;
  q[0] = TAG_BINARY;
  wr32(q + 1, (uint32_t)len);
  if (len) memcpy(q + 5, p, len);
  b->len += 5 + len;
}

/* ---- pids, ports, references ----------------------------------------------------- */

/* A local id carries this node's name and creation (nonode@nohost/1 until
** distribution starts); a remote pid its own node's, from the node table. */
void lpvm_put_pid(lpvm_tbuf *b, lpvm_id id) {
  const node_desc *d = node_self();
  uint32_t num = (uint32_t)id, serial = (uint32_t)(id >> 32);
  if (node_id_is_remote(id)) {
    d = node_get(node_id_index(id));
    if (!d) { tbuf_fail(b, LPVM_EINVAL); return; }
    num = node_id_num(id);
    serial = node_id_serial(id);
  }
  size_t alen = 2 + (size_t)d->len;
  /* a node atom of up to 16 bytes (nonode@nohost's 15) copied as 16, no memcpy call;
  ** the words after it overwrite the rest */
  uint8_t *q = room(b, 1 + (alen < 16 ? 16 : alen) + 12);
  if (q == NULL) return;
  uint8_t *q0 = q;
  *q++ = lpvm_id_is_port(id) ? TAG_V4_PORT : TAG_NEW_PID;
  if (alen <= 16) memcpy(q, d->atom, 16);
  else memcpy(q, d->atom, alen);
  q += alen;
  if (lpvm_id_is_port(id)) {
    q = wr64(q, id & ~LPVM_ID_PORT_BIT);
  } else {
    q = wr32(q, num);
    q = wr32(q, serial);
  }
  q = wr32(q, d->creation);
  b->len += (size_t)(q - q0);
}

/* lpvm_put_pid's bytes for the common pid, written where the caller has room: a
** message's first pid (vm/lterm_plain_msg.c) went through a builder made for it, the
** light value's dispatch and lpvm_put_pid's room check, ~115 instructions a message
** with a pid; this is ~35. */
size_t lpvm_put_pid_at(uint8_t *q, lpvm_id id) {
  if (id & (LPVM_ID_PORT_BIT | LPVM_ID_REMOTE_BIT)) return 0;   /* a port, another node's */
  const node_desc *d = node_self();
  size_t alen = 2 + (size_t)d->len;
  if (alen > 16) return 0;
  q[0] = TAG_NEW_PID;
  memcpy(q + 1, d->atom, 16);   /* the words after it overwrite the rest */
  uint8_t *e = wr32(wr32(wr32(q + 1 + alen, (uint32_t)id), (uint32_t)(id >> 32)), d->creation);
  return (size_t)(e - q);
}

void lpvm_put_ref(lpvm_tbuf *b, uint64_t ref) {
  const node_desc *d = node_self();
  size_t alen = 2 + (size_t)d->len;
  uint8_t *q = room(b, 3 + alen + 4 + 12);
  if (q == NULL) return;
  uint8_t *q0 = q;
  *q++ = TAG_NEWER_REF;
  q = wr16(q, 3);
  memcpy(q, d->atom, alen);
  q += alen;
  q = wr32(q, d->creation);
  q = wr32(q, (uint32_t)ref);
  q = wr32(q, (uint32_t)(ref >> 32));
  q = wr32(q, 0);
  b->len += (size_t)(q - q0);
}

/* ---- containers ------------------------------------------------------------------ */

void lpvm_put_tuple(lpvm_tbuf *b, uint32_t arity) {
  uint8_t *q = room(b, 5);
  if (q == NULL) return;
  if (arity < 256) {
    q[0] = TAG_SMALL_TUPLE;
    q[1] = (uint8_t)arity;
    b->len += 2;
  } else {
    q[0] = TAG_LARGE_TUPLE;
    wr32(q + 1, arity);
    b->len += 5;
  }
}

/* An empty list writes nothing: the tail that follows is the whole term, so
** put_list(0) + put_nil gives [] exactly as Erlang writes it. */
void lpvm_put_list(lpvm_tbuf *b, uint32_t n) {
  if (n == 0) return;
  uint8_t *q = room(b, 5);
  if (q == NULL) return;
  q[0] = TAG_LIST;
  wr32(q + 1, n);
  b->len += 5;
}

void lpvm_put_nil(lpvm_tbuf *b) {
  uint8_t *q = room(b, 1);
  if (q == NULL) return;
  q[0] = TAG_NIL;
  b->len += 1;
}

void lpvm_put_map(lpvm_tbuf *b, uint32_t pairs) {
  uint8_t *q = room(b, 5);
  if (q == NULL) return;
  q[0] = TAG_MAP;
  wr32(q + 1, pairs);
  b->len += 5;
}

size_t lpvm_put_map_open(lpvm_tbuf *b) {
  uint8_t *q = room(b, 5);
  if (q == NULL) return 0;
  size_t mark = b->len;
  q[0] = TAG_MAP;
  wr32(q + 1, 0);
  b->len += 5;
  return mark;
}

void lpvm_patch_map(lpvm_tbuf *b, size_t mark, uint32_t pairs) {
  if (b->err) return;
  if (b->data == NULL || mark > b->len || b->len - mark < 5 || b->data[mark] != TAG_MAP) {
    tbuf_fail(b, LPVM_EINVAL);
    return;
  }
  wr32(b->data + mark + 1, pairs);
}

/* The spliced term is checked whole: one bad reason must not corrupt a message. */
void lpvm_put_term(lpvm_tbuf *b, const uint8_t *term, size_t len) {
  if (lpvm_term_check(term, len) != 0) { tbuf_fail(b, LPVM_EBADTERM); return; }
  uint8_t *q = room(b, len - 1);
  if (q == NULL) return;
  memcpy(q, term + 1, len - 1);
  b->len += len - 1;
}

/* Raw bytes of a term written elsewhere (no checks: the caller knows them well formed;
** ETS copies its stored objects out this way). */
void term_put_raw(lpvm_tbuf *b, const void *p, size_t n) {
  uint8_t *q = room(b, n);
  if (q == NULL) return;
  if (n) memcpy(q, p, n);
  b->len += n;
}
