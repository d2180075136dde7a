/*
** term_dec.c -- the term reader: lpvm_tread and the lpvm_get_* functions.
**
** Input comes from other tasks and, some day, other nodes, so nothing here trusts a
** length: every read is checked against r->end, a get that fails consumes nothing,
** and element counts are checked against the bytes left (each element takes at least
** one byte, and every element an enclosing container still owes is counted too:
** r->owed), so a reader may size a table by a count before reading the elements and
** the tables of nested headers add up to no more than the input holds.
** lpvm_skip walks nested terms with a counter, never with C recursion.
*/
#include <stdlib.h>
#include <string.h>

#include "lpvm/binary.h"
#include "tasks/node.h"
#include "tasks/term_int.h"

#define BAD LPVM_EBADTERM

/* ---- shared parsers (also used by term_fmt.c) ------------------------------------ */

int term_atom_at(const uint8_t *p, const uint8_t *end, const char **name,
                 size_t *len, int *latin1, const uint8_t **next) {
  size_t left = term_left(p, end), hdr, n;
  if (left < 2) return BAD;
  switch (p[0]) {
    case TAG_ATOM: case TAG_ATOM_UTF8:
      if (left < 3) return BAD;
      hdr = 3; n = term_be16(p + 1);
      break;
    case TAG_SMALL_ATOM: case TAG_SMALL_ATOM_UTF8:
      hdr = 2; n = p[1];
      break;
    default:
      return BAD;
  }
  if (left - hdr < n) return BAD;
  *name = (const char *)p + hdr;
  *len = n;
  if (latin1) *latin1 = (p[0] == TAG_ATOM || p[0] == TAG_SMALL_ATOM);
  *next = p + hdr + n;
  return 0;
}

int term_node_is_local(const char *node, size_t len) {
  return node_is_self(node, len, UINT32_MAX);
}

/* The fields after the node atom of each pid, port and reference form:
** [0] id bytes, [1] serial bytes, [2] creation bytes. References are separate. */
static int ident_layout(int tag, int *type, unsigned sz[3]) {
  switch (tag) {
    case TAG_NEW_PID: *type = LPVM_T_PID;  sz[0] = 4; sz[1] = 4; sz[2] = 4; return 0;
    case TAG_PID:     *type = LPVM_T_PID;  sz[0] = 4; sz[1] = 4; sz[2] = 1; return 0;
    case TAG_V4_PORT: *type = LPVM_T_PORT; sz[0] = 8; sz[1] = 0; sz[2] = 4; return 0;
    case TAG_NEW_PORT:*type = LPVM_T_PORT; sz[0] = 4; sz[1] = 0; sz[2] = 4; return 0;
    case TAG_PORT:    *type = LPVM_T_PORT; sz[0] = 4; sz[1] = 0; sz[2] = 1; return 0;
    default: return BAD;
  }
}

static uint64_t be_n(const uint8_t *p, unsigned n) {
  return n == 8 ? term_be64(p) : n == 4 ? term_be32(p) : n == 1 ? p[0] : 0;
}

/* References: NEWER_REFERENCE_EXT and NEW_REFERENCE_EXT carry a word count before the
** node, the old REFERENCE_EXT one word after it. */
static int ref_at(const uint8_t *p, const uint8_t *end, term_ident *id,
                  const uint8_t **next) {
  const int tag = p[0];
  const uint8_t *q;
  uint32_t nw = 1;
  if (tag != TAG_REF) {    /* skip the word count: the node atom comes next */
    if (term_left(p, end) < 3) return BAD;
    nw = term_be16(p + 1);
    p += 2;
  }
  if (nw == 0) return BAD;
  if (term_atom_at(p + 1, end, &id->node, &id->node_len, NULL, &q)) return BAD;
  if (tag == TAG_REF) {    /* node, id:32, creation:8 */
    if (term_left(q, end) < 5) return BAD;
    id->creation = q[4];
    id->words = q;
    *next = q + 5;
  } else {                 /* node, creation:32 or :8, nw words */
    size_t crsz = tag == TAG_NEWER_REF ? 4 : 1;
    if (term_left(q, end) < crsz || term_left(q + crsz, end) / 4 < nw) return BAD;
    id->creation = (uint32_t)be_n(q, (unsigned)crsz);
    id->words = q + crsz;
    *next = q + crsz + 4 * (size_t)nw;
  }
  id->type = LPVM_T_REF;
  id->nwords = nw;
  id->id = term_be32(id->words);
  if (nw >= 2) id->id |= (uint64_t)term_be32(id->words + 4) << 32;
  return 0;
}

int term_ident_at(const uint8_t *p, const uint8_t *end, term_ident *id,
                  const uint8_t **next) {
  unsigned sz[3];
  const uint8_t *q;
  if (p >= end) return BAD;
  if (p[0] == TAG_NEWER_REF || p[0] == TAG_NEW_REF || p[0] == TAG_REF)
    return ref_at(p, end, id, next);
  if (ident_layout(p[0], &id->type, sz)) return BAD;
  if (term_atom_at(p + 1, end, &id->node, &id->node_len, NULL, &q)) return BAD;
  if (term_left(q, end) < sz[0] + sz[1] + sz[2]) return BAD;
  id->id = be_n(q, sz[0]) | be_n(q + sz[0], sz[1]) << 32;
  id->creation = (uint32_t)be_n(q + sz[0] + sz[1], sz[2]);
  id->words = NULL;
  id->nwords = 0;
  *next = q + sz[0] + sz[1] + sz[2];
  return 0;
}

int term_big_at(const uint8_t *p, const uint8_t *end, term_big *big,
                const uint8_t **next) {
  size_t left = term_left(p, end), hdr, n;
  if (left < 3) return BAD;
  if (p[0] == TAG_SMALL_BIG) {
    hdr = 3; n = p[1];
  } else if (p[0] == TAG_LARGE_BIG) {
    if (left < 6) return BAD;
    hdr = 6; n = term_be32(p + 1);
  } else {
    return BAD;
  }
  if (left - hdr < n) return BAD;
  big->digits = p + hdr;
  big->neg = p[hdr - 1] != 0;
  *next = p + hdr + n;
  while (n > 0 && big->digits[n - 1] == 0) n--;   /* tolerate unnormalised bigs */
  big->n = n;
  return 0;
}

/* A big integer as int64, if it fits. */
static int big_to_int(const term_big *big, int64_t *v) {
  uint64_t m = 0;
  if (big->n > 8) return BAD;
  for (size_t i = big->n; i-- > 0;) m = m << 8 | big->digits[i];
  if (!big->neg) {
    if (m > (uint64_t)INT64_MAX) return BAD;
    *v = (int64_t)m;
  } else {
    if (m > (uint64_t)INT64_MAX + 1) return BAD;
    *v = m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m;
  }
  return 0;
}

/* ---- the reader ------------------------------------------------------------------ */


int lpvm_tread_init(lpvm_tread *r, const uint8_t *term, size_t len) {
  if (term == NULL || len < 1 || term[0] != TERM_VERSION) {
    r->p = r->end = NULL;   /* every get now fails */
    r->owed = 0;
    return BAD;
  }
  r->p = term + 1;
  r->end = term + len;
  r->owed = 0;
  return 0;
}

int lpvm_get_type(const lpvm_tread *r) {
  const uint8_t *p = r->p, *next;
  term_big big;
  int64_t v;
  if (p == NULL || p >= r->end) return BAD;
  switch (p[0]) {
    case TAG_SMALL_INT: case TAG_INT: return LPVM_T_INT;
    case TAG_SMALL_BIG: case TAG_LARGE_BIG:
      if (term_big_at(p, r->end, &big, &next) == 0 && big_to_int(&big, &v) == 0)
        return LPVM_T_INT;
      return LPVM_T_BIGINT;
    case TAG_NEW_FLOAT: case TAG_FLOAT: return LPVM_T_FLOAT;
    case TAG_ATOM: case TAG_SMALL_ATOM: case TAG_ATOM_UTF8: case TAG_SMALL_ATOM_UTF8:
      return LPVM_T_ATOM;
    case TAG_BINARY: return LPVM_T_BINARY;
    case TAG_NEW_PID: case TAG_PID: return LPVM_T_PID;
    case TAG_V4_PORT: case TAG_NEW_PORT: case TAG_PORT: return LPVM_T_PORT;
    case TAG_NEWER_REF: case TAG_NEW_REF: case TAG_REF: return LPVM_T_REF;
    case TAG_SMALL_TUPLE: case TAG_LARGE_TUPLE: return LPVM_T_TUPLE;
    case TAG_NIL: return LPVM_T_NIL;
    case TAG_LIST: return LPVM_T_LIST;
    case TAG_STRING: return LPVM_T_STRING;
    case TAG_MAP: return LPVM_T_MAP;
    default: return LPVM_T_OTHER;
  }
}

int lpvm_get_atom(lpvm_tread *r, const char **name, size_t *len) {
  const uint8_t *next;
  if (r->p == NULL || term_atom_at(r->p, r->end, name, len, NULL, &next)) return BAD;
  return term_took(r, next);
}

int lpvm_get_int(lpvm_tread *r, int64_t *v) {
  const uint8_t *p = r->p, *next;
  size_t left = p ? term_left(p, r->end) : 0;
  term_big big;
  if (left < 2) return BAD;
  switch (p[0]) {
    case TAG_SMALL_INT:
      *v = p[1];
      return term_took(r, p + 2);
    case TAG_INT:
      if (left < 5) return BAD;
      *v = (int32_t)term_be32(p + 1);
      return term_took(r, p + 5);
    case TAG_SMALL_BIG: case TAG_LARGE_BIG:
      if (term_big_at(p, r->end, &big, &next) || big_to_int(&big, v)) return BAD;
      return term_took(r, next);
    default:
      return BAD;
  }
}

/* FLOAT_EXT: 31 bytes of "%.20e" text padded with NULs. strtod follows the C locale
** unless the embedding program changed LC_NUMERIC; only very old nodes send this. */
static int old_float(const uint8_t *p, double *v) {
  char text[32], *endp;
  memcpy(text, p, 31);
  text[31] = '\0';
  double d = strtod(text, &endp);
  if (endp == text) return BAD;
  *v = d;
  return 0;
}

int lpvm_get_float(lpvm_tread *r, double *v) {
  const uint8_t *p = r->p;
  size_t left = p ? term_left(p, r->end) : 0;
  if (left >= 9 && p[0] == TAG_NEW_FLOAT) {
    uint64_t bits = term_be64(p + 1);
    memcpy(v, &bits, sizeof *v);
    return term_took(r, p + 9);
  }
  if (left >= 32 && p[0] == TAG_FLOAT && old_float(p + 1, v) == 0) return term_took(r, p + 32);
  return BAD;
}

/* A length-prefixed byte run: tag, len of lsz bytes, bytes. A reader sizes a string
** (or a list, for STRING_EXT) by len, so like a header the run must leave a byte for
** each term the enclosing containers still owe after it: else a map that claims 51
** pairs and holds one long string had a decoder size both by the same bytes. */
static int bytes_at(lpvm_tread *r, int tag, size_t lsz, const uint8_t **data,
                    size_t *len) {
  const uint8_t *p = r->p;
  size_t left = p ? term_left(p, r->end) : 0, n;
  if (left < 1 + lsz || p[0] != tag) return BAD;
  n = lsz == 4 ? term_be32(p + 1) : term_be16(p + 1);
  if (left - 1 - lsz < n) return BAD;
  if (r->owed > 1 && r->owed - 1 > left - 1 - lsz - n) return BAD;
  *data = p + 1 + lsz;
  *len = n;
  return term_took(r, p + 1 + lsz + n);
}

int lpvm_get_binary(lpvm_tread *r, const uint8_t **p, size_t *len) {
  return bytes_at(r, TAG_BINARY, 4, p, len);
}

int lpvm_get_binref(lpvm_tread *r, const lpvm_binref *bins, uint32_t nbins,
                    lpvm_binref *out) {
  const uint8_t *p = r->p;
  if (!p || term_left(p, r->end) < 5 || p[0] != TAG_LPVM_BINREF) return BAD;
  uint32_t i = term_be32(p + 1);
  if (i >= nbins || (r->owed > 1 && r->owed - 1 > term_left(p + 5, r->end))) return BAD;
  *out = bins[i];
  return term_took(r, p + 5);
}

int lpvm_get_bytes(lpvm_tread *r, const lpvm_binref *bins, uint32_t nbins,
                   const uint8_t **data, size_t *len) {
  lpvm_binref b;
  if (lpvm_get_binref(r, bins, nbins, &b) != 0) return lpvm_get_binary(r, data, len);
  *data = lpvm_bin_data(b.bin) + b.off;   /* the shared bytes: no copy */
  *len = b.len;
  return 0;
}

int lpvm_get_string(lpvm_tread *r, const uint8_t **p, size_t *len) {
  return bytes_at(r, TAG_STRING, 2, p, len);
}

/* Ids of lpvm's own node map to local ids; the creation is not checked, so a pid
** that a local erl made (creation 0) reads the same as one lpvm made. A pid of
** another node becomes a remote id (tasks/node.h); remote ports do not read. */
int lpvm_get_pid(lpvm_tread *r, lpvm_id *id) {
  term_ident ident;
  const uint8_t *next;
  if (r->p == NULL || term_ident_at(r->p, r->end, &ident, &next)) return BAD;
  if (ident.type == LPVM_T_REF) return BAD;
  if (!term_node_is_local(ident.node, ident.node_len)) {
    if (ident.type != LPVM_T_PID) return BAD;
    int idx = node_intern(ident.node, ident.node_len, ident.creation);
    lpvm_id rid = idx > 0 ? node_remote_pid((uint32_t)idx, (uint32_t)ident.id,
                                            (uint32_t)(ident.id >> 32)) : 0;
    if (!rid) return BAD;
    *id = rid;
    return term_took(r, next);   /* it pays its owed term like any other */
  }
  if (ident.id & (LPVM_ID_PORT_BIT | LPVM_ID_REMOTE_BIT))
    return BAD;   /* serial or port id too wide */
  *id = ident.type == LPVM_T_PORT ? ident.id | LPVM_ID_PORT_BIT : ident.id;
  return term_took(r, next);
}

int lpvm_get_ref(lpvm_tread *r, uint64_t *ref) {
  term_ident ident;
  const uint8_t *next;
  if (r->p == NULL || term_ident_at(r->p, r->end, &ident, &next)) return BAD;
  if (ident.type != LPVM_T_REF || !term_node_is_local(ident.node, ident.node_len))
    return BAD;
  *ref = ident.id;
  return term_took(r, next);
}

/* Container headers: the count of elements that follow (a list's tail included,
** a map's keys and values counted apart), checked against the bytes left. */
static int header_at(const uint8_t *p, const uint8_t *end, uint32_t *count,
                     uint64_t *elems, const uint8_t **next) {
  size_t left = term_left(p, end), hdr = 5;
  uint32_t n;
  uint64_t e;
  if (left < 2) return BAD;
  switch (p[0]) {
    case TAG_SMALL_TUPLE: hdr = 2; n = p[1]; e = n; break;
    case TAG_LARGE_TUPLE: if (left < 5) return BAD; n = term_be32(p + 1); e = n; break;
    case TAG_LIST: if (left < 5) return BAD; n = term_be32(p + 1); e = (uint64_t)n + 1; break;
    case TAG_MAP: if (left < 5) return BAD; n = term_be32(p + 1); e = 2 * (uint64_t)n; break;
    default: return BAD;
  }
  if (e > left - hdr) return BAD;
  *count = n;
  *elems = e;
  *next = p + hdr;
  return 0;
}

static int get_header(lpvm_tread *r, int tag, int tag2, uint32_t *n) {
  const uint8_t *next;
  uint64_t elems;
  if (r->p == NULL || r->p >= r->end || (r->p[0] != tag && r->p[0] != tag2)) return BAD;
  if (header_at(r->p, r->end, n, &elems, &next)) return BAD;
  /* this header pays one of the terms owed, its elements are owed from now on: all
  ** of them together must still fit in what is left */
  uint64_t owed = (r->owed ? r->owed - 1 : 0) + elems;
  if (owed > term_left(next, r->end)) return BAD;
  r->p = next;
  r->owed = owed;
  return 0;
}

int lpvm_get_tuple(lpvm_tread *r, uint32_t *arity) {
  return get_header(r, TAG_SMALL_TUPLE, TAG_LARGE_TUPLE, arity);
}

int lpvm_get_list(lpvm_tread *r, uint32_t *n) {
  return get_header(r, TAG_LIST, TAG_LIST, n);
}

int lpvm_get_map(lpvm_tread *r, uint32_t *pairs) {
  return get_header(r, TAG_MAP, TAG_MAP, pairs);
}

int lpvm_get_nil(lpvm_tread *r) {
  if (r->p == NULL || r->p >= r->end || r->p[0] != TAG_NIL) return BAD;
  return term_took(r, r->p + 1);
}

/* ---- skipping -------------------------------------------------------------------- */

/* Step over one term's own bytes; *more is how many subterms follow it. Compressed
** terms (zlib, no compressed length) and distribution-only tags cannot be skipped. */
static int skip_one(const uint8_t *p, const uint8_t *end, const uint8_t **next,
                    uint64_t *more) {
  size_t left = term_left(p, end), n = 0;
  const char *s;
  term_ident id;
  term_big big;
  uint32_t count;
  *more = 0;
  switch (p[0]) {
    case TAG_SMALL_INT: n = 2; break;
    case TAG_INT: n = 5; break;
    case TAG_NEW_FLOAT: n = 9; break;
    case TAG_FLOAT: n = 32; break;
    case TAG_NIL: n = 1; break;
    case TAG_ATOM: case TAG_SMALL_ATOM: case TAG_ATOM_UTF8: case TAG_SMALL_ATOM_UTF8:
      return term_atom_at(p, end, &s, &n, NULL, next);
    case TAG_SMALL_BIG: case TAG_LARGE_BIG:
      return term_big_at(p, end, &big, next);
    case TAG_NEW_PID: case TAG_PID: case TAG_V4_PORT: case TAG_NEW_PORT: case TAG_PORT:
    case TAG_NEWER_REF: case TAG_NEW_REF: case TAG_REF:
      return term_ident_at(p, end, &id, next);
    case TAG_SMALL_TUPLE: case TAG_LARGE_TUPLE: case TAG_LIST: case TAG_MAP:
      return header_at(p, end, &count, more, next);
    case TAG_BINARY:
      if (left < 5) return BAD;
      n = 5 + (size_t)term_be32(p + 1);
      break;
    case TAG_BIT_BINARY:   /* len:32, bits-in-last-byte:8, bytes */
      if (left < 6) return BAD;
      n = 6 + (size_t)term_be32(p + 1);
      break;
    case TAG_STRING:
      if (left < 3) return BAD;
      n = 3 + (size_t)term_be16(p + 1);
      break;
    case TAG_EXPORT:       /* module atom, function atom, arity */
      n = 1; *more = 3;
      break;
    case TAG_NEW_FUN:      /* size:32 counts itself and everything after the tag */
      if (left < 5 || term_be32(p + 1) < 4) return BAD;
      n = 1 + (size_t)term_be32(p + 1);
      break;
    default:
      return BAD;
  }
  if (left < n || n < 1) return BAD;
  *next = p + n;
  return 0;
}

int lpvm_skip(lpvm_tread *r) {
  const uint8_t *p = r->p, *end = r->end;
  uint64_t todo = 1, more;
  if (p == NULL) return BAD;
  while (todo > 0) {
    if (p >= end || skip_one(p, end, &p, &more)) return BAD;
    todo = todo - 1 + more;
    if (todo > term_left(p, end)) return BAD;   /* each pending term needs a byte */
  }
  return term_took(r, p);
}

/* ---- whole terms ----------------------------------------------------------------- */

int lpvm_term_check(const uint8_t *term, size_t len) {
  lpvm_tread r;
  if (lpvm_tread_init(&r, term, len) || lpvm_skip(&r) || r.p != r.end) return BAD;
  return 0;
}

int lpvm_term_is_atom(const uint8_t *term, size_t len, const char *atom) {
  lpvm_tread r;
  const char *name;
  size_t n;
  if (atom == NULL || lpvm_tread_init(&r, term, len) || lpvm_get_atom(&r, &name, &n))
    return 0;
  return r.p == r.end && n == strlen(atom) && memcmp(name, atom, n) == 0;
}

/* ---- depth ------------------------------------------------------------------------------- */

/* 1: some value sits deeper than `limit`; 0: not; -1: malformed. Stops at the first
** value too deep (the recursion is bounded by `limit`). The distribution's check of
** erl's messages (io/dist_term.c) and a Lua receiver's of a C task's
** (vm/lterm_depth.c) are this walker. */
static int depth_walk(lpvm_tread *r, int depth, int limit) {
  uint32_t n;
  int list = 0;
  if (depth > limit) return 1;
  switch (lpvm_get_type(r)) {
    case LPVM_T_TUPLE:
      if (lpvm_get_tuple(r, &n)) return -1;
      break;
    case LPVM_T_MAP:
      if (lpvm_get_map(r, &n) || n > UINT32_MAX / 2) return -1;
      n *= 2;
      break;
    case LPVM_T_LIST:
      if (lpvm_get_list(r, &n)) return -1;
      list = 1;
      break;
    default:
      return lpvm_skip(r) ? -1 : 0;
  }
  for (uint32_t i = 0; i < n; i++) {
    int v = depth_walk(r, depth + 1, limit);
    if (v) return v;
  }
  return list && lpvm_skip(r) ? -1 : 0;
}

int lpvm_term_too_deep(const uint8_t *term, size_t len, int limit) {
  if (limit < 0) return 1;
  if (len < 2 * ((size_t)limit + 1)) return 0;
  lpvm_tread r;
  if (lpvm_tread_init(&r, term, len)) return 0;
  return depth_walk(&r, 0, limit) == 1;
}
