/*
** term_cmp.c -- Erlang's term order and a hash, read straight off encoded terms.
**
** ETS needs both without decoding: an ordered_set keeps its keys in Erlang's term
** order (number < atom < reference < fun < port < pid < tuple < map < [] < list <
** binary), and set/bag tables hash keys. Equal terms may be written differently (5 as
** SMALL_INTEGER or as a short SMALL_BIG from erl, "ab" as STRING_EXT or as a LIST of
** small integers, [1,2] as one LIST or as nested conses, a map's pairs in any order),
** so both functions look at values, never at bytes: two terms that compare equal
** hash equal.
**
** Two equalities, as in Erlang: `exact` is =:= (1 and 1.0 differ: set and bag
** tables), otherwise == (1 == 1.0: ordered_set). In the exact order an integer sorts
** just before the float of the same value, so the order stays total.
**
** Terms are assumed well formed (callers check them once, with lpvm_term_check);
** recursion follows the nesting, which the Lua codec bounds (200) and ETS checks.
*/
#include <stdlib.h>
#include <string.h>

#include "tasks/term_int.h"

enum {   /* Erlang's order of types */
  C_NUM = 1, C_ATOM, C_REF, C_FUN, C_PORT, C_PID, C_TUPLE, C_MAP, C_NIL, C_LIST, C_BIN
};

static int cls_of(const uint8_t *p) {
  switch (p[0]) {
    case TAG_SMALL_INT: case TAG_INT: case TAG_SMALL_BIG: case TAG_LARGE_BIG:
    case TAG_NEW_FLOAT: case TAG_FLOAT: return C_NUM;
    case TAG_ATOM: case TAG_SMALL_ATOM: case TAG_ATOM_UTF8: case TAG_SMALL_ATOM_UTF8:
      return C_ATOM;
    case TAG_NEWER_REF: case TAG_NEW_REF: case TAG_REF: return C_REF;
    case TAG_NEW_FUN: case TAG_EXPORT: return C_FUN;
    case TAG_V4_PORT: case TAG_NEW_PORT: case TAG_PORT: return C_PORT;
    case TAG_NEW_PID: case TAG_PID: return C_PID;
    case TAG_SMALL_TUPLE: case TAG_LARGE_TUPLE: return C_TUPLE;
    case TAG_MAP: return C_MAP;
    case TAG_NIL: return C_NIL;
    case TAG_STRING: return term_be16(p + 1) ? C_LIST : C_NIL;
    case TAG_LIST: return C_LIST;
    default: return C_BIN;   /* BINARY, BIT_BINARY */
  }
}

/* Past one whole term (well formed, so the bound is only a formality). */
static const uint8_t *skip(const uint8_t *p, const uint8_t *end) {
  lpvm_tread r = {p, end, 0};
  return lpvm_skip(&r) == 0 ? r.p : end;
}

/* ---- numbers ----------------------------------------------------------------------- */

typedef struct num {
  int kind;            /* 0 integer (fits 64 bits), 1 big, 2 float */
  int64_t i;
  double d;
  term_big big;
} num;

static const uint8_t *num_at(const uint8_t *p, const uint8_t *end, num *n) {
  const uint8_t *next = p;
  lpvm_tread r = {p, end, 0};
  if (lpvm_get_int(&r, &n->i) == 0) { n->kind = 0; return r.p; }
  if (lpvm_get_float(&r, &n->d) == 0) { n->kind = 2; return r.p; }
  term_big_at(p, end, &n->big, &next);
  n->kind = 1;
  return next;
}

static double big_double(const term_big *b) {
  double d = 0;
  for (size_t i = b->n; i-- > 0;) d = d * 256.0 + b->digits[i];
  return b->neg ? -d : d;
}

/* An integer against a double, exactly (no rounding of the integer). */
static int cmp_int_double(int64_t i, double d) {
  if (d != d) return -1;                              /* NaN: after every number */
  if (d >= 9223372036854775808.0) return -1;
  if (d < -9223372036854775808.0) return 1;
  int64_t t = (int64_t)d;                             /* truncates toward zero */
  if (i != t) return i < t ? -1 : 1;
  double frac = d - (double)t;
  return frac > 0 ? -1 : frac < 0 ? 1 : 0;
}

/* Bigs here never fit 64 bits, so a big is beyond every 64-bit integer. */
static int cmp_big(const term_big *a, const term_big *b) {
  if (a->neg != b->neg) return a->neg ? -1 : 1;
  int s = a->neg ? -1 : 1;
  if (a->n != b->n) return a->n < b->n ? -s : s;
  for (size_t i = a->n; i-- > 0;)
    if (a->digits[i] != b->digits[i]) return a->digits[i] < b->digits[i] ? -s : s;
  return 0;
}

/* Two doubles in a total order: a NaN (Lua has them, Erlang not) after every number
** and equal to any NaN, as cmp_int_double places it. With < and > alone a NaN was
** equal to every float, and an ordered_set holding one lost objects and kept 1 and 1.0
** as two keys. */
static int cmp_double(double a, double b) {
  if (a != a || b != b) return (a != a) - (b != b);
  return a < b ? -1 : a > b;
}

static int cmp_num(const num *a, const num *b, int exact) {
  int c;
  if (a->kind == 0 && b->kind == 0) return a->i < b->i ? -1 : a->i > b->i;
  if (a->kind == 2 && b->kind == 2) return cmp_double(a->d, b->d);
  if (a->kind == 1 && b->kind == 1) return cmp_big(&a->big, &b->big);
  if (a->kind == 1 && b->kind == 0) return a->big.neg ? -1 : 1;
  if (a->kind == 0 && b->kind == 1) return b->big.neg ? 1 : -1;
  if (a->kind == 2) {
    c = b->kind == 0 ? -cmp_int_double(b->i, a->d) : cmp_double(a->d, big_double(&b->big));
  } else {
    c = a->kind == 0 ? cmp_int_double(a->i, b->d) : cmp_double(big_double(&a->big), b->d);
  }
  if (c == 0 && exact) c = a->kind == 2 ? 1 : -1;   /* 1 before 1.0 */
  return c;
}

/* ---- lists: a cursor over elements that reads STRING_EXT bytes as small integers
** and follows a tail that is itself a list, so every encoding of a list walks alike. */

typedef struct lcur {
  const uint8_t *p, *end;  /* next element, or the tail when left == 0 */
  uint32_t left;
  int str;                 /* p points into a STRING_EXT's bytes */
  uint8_t tmp[2];          /* a string byte as a SMALL_INTEGER term */
} lcur;

static void lcur_enter(lcur *c, const uint8_t *p) {
  c->str = 0;
  c->left = 0;
  c->p = p;
  if (p[0] == TAG_LIST) { c->left = term_be32(p + 1); c->p = p + 5; }
  else if (p[0] == TAG_STRING) { c->left = term_be16(p + 1); c->p = p + 3; c->str = 1; }
}

/* The next element, or NULL at the end (then c->p is the final tail, or NULL when
** a STRING_EXT ended, which means []). */
static const uint8_t *lcur_next(lcur *c) {
  while (c->left == 0) {
    if (c->str) { c->p = NULL; return NULL; }
    if (c->p[0] != TAG_LIST && c->p[0] != TAG_STRING) return NULL;
    lcur_enter(c, c->p);
  }
  c->left--;
  if (c->str) {
    c->tmp[0] = TAG_SMALL_INT;
    c->tmp[1] = *c->p++;
    return c->tmp;
  }
  const uint8_t *e = c->p;
  c->p = skip(e, c->end);
  return e;
}

static const uint8_t nil_term[1] = {TAG_NIL};

/* ---- comparison ------------------------------------------------------------------- */

static int cmp_at(const uint8_t *a, const uint8_t *aend, const uint8_t *b,
                  const uint8_t *bend, int exact);

static int cmp_bytes(const uint8_t *a, size_t an, const uint8_t *b, size_t bn) {
  int c = memcmp(a, b, an < bn ? an : bn);
  if (c) return c < 0 ? -1 : 1;
  return an < bn ? -1 : an > bn;
}

typedef struct kv { const uint8_t *k, *v, *end; } kv;

static int kv_cmp(const void *x, const void *y) {
  const kv *a = x, *b = y;
  return cmp_at(a->k, a->end, b->k, b->end, 1);
}

/* Maps: size, then the keys in (exact) term order, then the values in that order. */
static int cmp_map(const uint8_t *a, const uint8_t *aend, const uint8_t *b,
                   const uint8_t *bend, int exact) {
  uint32_t n = term_be32(a + 1), m = term_be32(b + 1);
  if (n != m) return n < m ? -1 : 1;
  kv stack[16], *ka = stack, *kb = stack + 8;
  if (n > 8 && !(ka = malloc(2 * (size_t)n * sizeof *ka))) return 0;
  if (n > 8) kb = ka + n;
  const uint8_t *p = a + 5, *q = b + 5;
  for (uint32_t i = 0; i < n; i++) {
    ka[i].k = p; ka[i].v = p = skip(p, aend); p = skip(p, aend); ka[i].end = aend;
    kb[i].k = q; kb[i].v = q = skip(q, bend); q = skip(q, bend); kb[i].end = bend;
  }
  qsort(ka, n, sizeof *ka, kv_cmp);
  qsort(kb, n, sizeof *kb, kv_cmp);
  int c = 0;
  for (uint32_t i = 0; i < n && !c; i++) c = cmp_at(ka[i].k, aend, kb[i].k, bend, exact);
  for (uint32_t i = 0; i < n && !c; i++) c = cmp_at(ka[i].v, aend, kb[i].v, bend, exact);
  if (ka != stack) free(ka);
  return c;
}

static int cmp_list(const uint8_t *a, const uint8_t *aend, const uint8_t *b,
                    const uint8_t *bend, int exact) {
  lcur x = {.end = aend}, y = {.end = bend};
  lcur_enter(&x, a);
  lcur_enter(&y, b);
  for (;;) {
    const uint8_t *ea = lcur_next(&x), *eb = lcur_next(&y);
    if (!ea || !eb) {
      if (ea || eb) {   /* one ran out: its tail against the rest of the other, a list */
        const uint8_t *t = ea ? y.p : x.p;
        int ct = t ? cls_of(t) : C_NIL, s = ea ? 1 : -1;
        return ct == C_NIL || ct < C_LIST ? s : -s;
      }
      return cmp_at(x.p ? x.p : nil_term, aend, y.p ? y.p : nil_term, bend, exact);
    }
    int c = cmp_at(ea, aend, eb, bend, exact);
    if (c) return c;
  }
}

static int cmp_ident(const uint8_t *a, const uint8_t *aend, const uint8_t *b,
                     const uint8_t *bend) {
  term_ident x, y;
  const uint8_t *n;
  term_ident_at(a, aend, &x, &n);
  term_ident_at(b, bend, &y, &n);
  int c = cmp_bytes((const uint8_t *)x.node, x.node_len, (const uint8_t *)y.node,
                    y.node_len);
  if (c) return c;
  if (x.id != y.id) return x.id < y.id ? -1 : 1;
  return x.creation < y.creation ? -1 : x.creation > y.creation;
}

static int cmp_at(const uint8_t *a, const uint8_t *aend, const uint8_t *b,
                  const uint8_t *bend, int exact) {
  int ca = cls_of(a), cb = cls_of(b);
  if (ca != cb) return ca < cb ? -1 : 1;
  switch (ca) {
    case C_NUM: {
      num x, y;
      num_at(a, aend, &x);
      num_at(b, bend, &y);
      return cmp_num(&x, &y, exact);
    }
    case C_ATOM: {
      const char *x, *y;
      size_t xn, yn;
      const uint8_t *n;
      term_atom_at(a, aend, &x, &xn, NULL, &n);
      term_atom_at(b, bend, &y, &yn, NULL, &n);
      return cmp_bytes((const uint8_t *)x, xn, (const uint8_t *)y, yn);
    }
    case C_REF: case C_PORT: case C_PID:
      return cmp_ident(a, aend, b, bend);
    case C_TUPLE: {
      lpvm_tread x = {a, aend, 0}, y = {b, bend, 0};
      uint32_t n, m;
      lpvm_get_tuple(&x, &n);
      lpvm_get_tuple(&y, &m);
      if (n != m) return n < m ? -1 : 1;
      for (uint32_t i = 0; i < n; i++) {
        int c = cmp_at(x.p, aend, y.p, bend, exact);
        if (c) return c;
        x.p = skip(x.p, aend);
        y.p = skip(y.p, bend);
      }
      return 0;
    }
    case C_MAP: return cmp_map(a, aend, b, bend, exact);
    case C_NIL: return 0;
    case C_LIST: return cmp_list(a, aend, b, bend, exact);
    default: {   /* binaries by content; bit strings and funs by their bytes */
      if (a[0] == TAG_BINARY && b[0] == TAG_BINARY)
        return cmp_bytes(a + 5, term_be32(a + 1), b + 5, term_be32(b + 1));
      const uint8_t *ea = skip(a, aend), *eb = skip(b, bend);
      return cmp_bytes(a, (size_t)(ea - a), b, (size_t)(eb - b));
    }
  }
}

int term_cmp(const uint8_t *a, const uint8_t *aend, const uint8_t *b,
             const uint8_t *bend, int exact) {
  return cmp_at(a, aend, b, bend, exact);
}

/* ---- hashing (consistent with the exact equality) ------------------------------------ */

_Static_assert(C_NUM == TERM_HASH_NUM, "term_hash inline hashes numbers as hash_at");

static uint64_t hash_bytes(uint64_t h, const uint8_t *p, size_t n) {
  uint64_t x = 1469598103934665603ull;   /* FNV-1a, then mixed in */
  for (size_t i = 0; i < n; i++) x = (x ^ p[i]) * 1099511628211ull;
  return term_mix(h, x ^ n);
}

static uint64_t hash_at(const uint8_t *p, const uint8_t *end) {
  int c = cls_of(p);
  uint64_t h = (uint64_t)c;
  switch (c) {
    case C_NUM: {
      num n;
      num_at(p, end, &n);
      if (n.kind == 0) return term_mix(h, (uint64_t)n.i);
      if (n.kind == 1) return hash_bytes(h + (uint64_t)n.big.neg, n.big.digits, n.big.n);
      if (n.d == 0) n.d = 0;   /* -0.0 == 0.0 */
      uint64_t bits;
      memcpy(&bits, &n.d, sizeof bits);
      if (n.d != n.d) bits = 0x7ff8000000000000ull;   /* every NaN is one key (cmp_double) */
      return term_mix(h + 7, bits);
    }
    case C_ATOM: {
      const char *s;
      size_t n;
      const uint8_t *next;
      term_atom_at(p, end, &s, &n, NULL, &next);
      return hash_bytes(h, (const uint8_t *)s, n);
    }
    case C_REF: case C_PORT: case C_PID: {
      term_ident id;
      const uint8_t *next;
      term_ident_at(p, end, &id, &next);
      return term_mix(h, id.id);
    }
    case C_TUPLE: {
      lpvm_tread r = {p, end, 0};
      uint32_t n;
      lpvm_get_tuple(&r, &n);
      h = term_mix(h, n);
      for (uint32_t i = 0; i < n; i++) {
        h = term_mix(h, hash_at(r.p, end));
        r.p = skip(r.p, end);
      }
      return h;
    }
    case C_MAP: {   /* order-free: a sum over the pairs */
      uint32_t n = term_be32(p + 1);
      uint64_t sum = 0;
      const uint8_t *q = p + 5;
      for (uint32_t i = 0; i < n; i++) {
        uint64_t hk = hash_at(q, end);
        q = skip(q, end);
        sum += term_mix(hk, hash_at(q, end));
        q = skip(q, end);
      }
      return term_mix(h + n, sum);
    }
    case C_NIL: return term_mix(h, 0);
    case C_LIST: {
      lcur cur = {.end = end};
      lcur_enter(&cur, p);
      const uint8_t *e;
      while ((e = lcur_next(&cur)) != NULL) h = term_mix(h, hash_at(e, end));
      return term_mix(h, hash_at(cur.p ? cur.p : nil_term, end));
    }
    default: {
      if (p[0] == TAG_BINARY) return hash_bytes(h, p + 5, term_be32(p + 1));
      const uint8_t *e = skip(p, end);
      return hash_bytes(h + 1, p, (size_t)(e - p));
    }
  }
}

uint64_t term_hash_at(const uint8_t *p, const uint8_t *end) { return hash_at(p, end); }

/* Nesting depth of a well-formed term (containers count one level each). */
int term_depth(const uint8_t *p, const uint8_t *end, int limit) {
  if (limit <= 0) return 1;
  int c = cls_of(p), deepest = 0;
  uint32_t n;
  if (c == C_TUPLE || c == C_MAP) {
    lpvm_tread r = {p, end, 0};
    if (c == C_TUPLE) lpvm_get_tuple(&r, &n);
    else { lpvm_get_map(&r, &n); n *= 2; }
    for (uint32_t i = 0; i < n && deepest < limit; i++) {
      int d = term_depth(r.p, end, limit - 1);
      if (d > deepest) deepest = d;
      r.p = skip(r.p, end);
    }
    return deepest + 1;
  }
  if (c == C_LIST && p[0] == TAG_LIST) {
    lpvm_tread r = {p, end, 0};
    lpvm_get_list(&r, &n);
    for (uint32_t i = 0; i <= n && deepest < limit; i++) {   /* elements and tail */
      int d = term_depth(r.p, end, limit - 1);
      if (d > deepest) deepest = d;
      r.p = skip(r.p, end);
    }
    return deepest + 1;
  }
  return 1;
}
