/*
** ets_ms.c -- Erlang match specifications, run on encoded objects.
**
** A match specification is the term [{Head, Guards, Body}, ...]. The first clause
** whose Head matches the object and whose Guards are all true gives the result: its
** Body's last expression. Understood (docs/ets.md has the table):
**   Head     '_' matches anything; '$N' binds (or, bound, must be =:=); tuples, lists
**            and maps match element by element (a map pattern: these keys at least);
**            anything else must be =:= the object's part.
**   Guards   comparisons ('<' '>' '=<' '>=' '==' '/=' '=:=' '=/='), 'andalso' 'orelse'
**            'and' 'or' 'xor' 'not', type tests (is_integer is_float is_number
**            is_atom is_binary is_list is_tuple is_map is_pid is_port is_reference
**            is_boolean is_function is_record/3), arithmetic ('+' '-' '*' '/' 'div'
**            'rem' abs float round trunc 'band' 'bor' 'bxor' 'bnot' 'bsl' 'bsr'),
**            element/2, hd/1, tl/1, length/1, size/1, tuple_size/1, byte_size/1,
**            bit_size/1, binary_part/3, map_size/1, map_get/2, is_map_key/2,
**            {const, X}: OTP 25's list but self() and node().
**   Body     '$_' (the object), '$$' (the head's variables in order), '$N', {{...}}
**            (a tuple built from expressions), [...] (a list), literals, guard
**            expressions.
** A call that is not one of these (or has another argument count) and a variable the
** head does not bind are refused when compiled (erl: badarg); a guard that fails to
** evaluate (arithmetic on an atom) is false, as in Erlang, and a call that fails in a
** body is the atom 'EXIT' there (erl: {'+', '$1', 1} on an atom gives 'EXIT', and
** {{'$1', {'+', '$1', 1}}} gives {a, 'EXIT'}; a call taking 'EXIT' may then fail in
** turn, or compare it as the atom it is). Values live in the object, in the specification or in a small
** per-run arena (computed numbers and built terms); the object is only read.
*/
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/ets_int.h"

#define MAX_VAR 1000
#define MAX_DEPTH 64
enum { V_ANY = -2, V_NONE = -1, V_OBJ = -3, V_ALL = -4 };

/* A value: an extent in the object or specification, or in the arena by offset
** (the arena may move while it grows). */
typedef struct val {
  const uint8_t *p;         /* NULL: in the arena */
  size_t off, len;
} val;

static const uint8_t atom_true[] = {TAG_SMALL_ATOM_UTF8, 4, 't', 'r', 'u', 'e'};
static const uint8_t atom_false[] = {TAG_SMALL_ATOM_UTF8, 5, 'f', 'a', 'l', 's', 'e'};
static const uint8_t atom_exit[] = {TAG_SMALL_ATOM_UTF8, 4, 'E', 'X', 'I', 'T'};

/* eval's failures: SOFT, a call that fails on its arguments (arithmetic on an atom,
** element/2 past the end), which is 'EXIT' in a body; HARD, no memory or too deep,
** which drops the object. */
enum { SOFT = -1, HARD = -2 };

static const uint8_t *skip(const uint8_t *p, const uint8_t *end) {
  lpvm_tread r = {p, end, 0};
  return lpvm_skip(&r) == 0 ? r.p : end;
}

static int is_atom(const uint8_t *p, const uint8_t *end, const char **s, size_t *n) {
  const uint8_t *next;
  return p < end && term_atom_at(p, end, s, n, NULL, &next) == 0;
}

static int atom_is(const char *s, size_t n, const char *lit) {
  return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* '_' -> V_ANY, '$N' -> N, '$_' -> V_OBJ, '$$' -> V_ALL, else V_NONE. */
static int var_of(const uint8_t *p, const uint8_t *end) {
  const char *s;
  size_t n;
  if (!is_atom(p, end, &s, &n) || n == 0) return V_NONE;
  if (n == 1 && s[0] == '_') return V_ANY;
  if (s[0] != '$' || n < 2) return V_NONE;
  if (n == 2 && s[1] == '_') return V_OBJ;
  if (n == 2 && s[1] == '$') return V_ALL;
  int v = 0;
  for (size_t i = 1; i < n; i++) {
    if (s[i] < '0' || s[i] > '9' || v > MAX_VAR) return V_NONE;
    v = v * 10 + (s[i] - '0');
  }
  return v <= MAX_VAR ? v : V_NONE;
}

/* Highest variable in a pattern + 1 (0: none); -1 if it has '_' or variables at all
** is asked through *any. */
static int scan_vars(const uint8_t *p, const uint8_t *end, int *any, int depth) {
  int v = var_of(p, end), hi = 0;
  if (v >= 0) { *any = 1; return v + 1; }
  if (v == V_ANY) { *any = 1; return 0; }
  if (depth > MAX_DEPTH) { *any = 1; return 0; }
  lpvm_tread r = {p, end, 0};
  uint32_t n = 0;
  int t = lpvm_get_type(&r);
  if (t == LPVM_T_TUPLE) lpvm_get_tuple(&r, &n);
  else if (t == LPVM_T_LIST) { lpvm_get_list(&r, &n); n++; }
  else if (t == LPVM_T_MAP) { lpvm_get_map(&r, &n); n *= 2; }
  for (uint32_t i = 0; i < n; i++) {
    int h = scan_vars(r.p, end, any, depth + 1);
    if (h > hi) hi = h;
    r.p = skip(r.p, end);
  }
  return hi;
}

void ets_ms_free(ets_ms *m) {
  if (m->cl != m->cl_in) free(m->cl);
  if (m->bp != m->b_in) free(m->bp);
  lpvm_tbuf_free(&m->arena);
}

/* The tuple or list header at *p (a fresh reader each time: the walk below moves by
** hand between headers): its count, and *p moved to its first element. */
static int header(const uint8_t **p, const uint8_t *end, int tuple, uint32_t *n) {
  lpvm_tread r = {*p, end, 0};
  int rc = tuple ? lpvm_get_tuple(&r, n) : lpvm_get_list(&r, n);
  if (rc == 0) *p = r.p;
  return rc;
}

/* Past a list of n elements and its tail, from its first element. */
static const uint8_t *skip_list(const uint8_t *p, const uint8_t *end, uint32_t n) {
  for (uint32_t i = 0; i <= n; i++) p = skip(p, end);
  return p;
}

/* ---- checking guards and bodies once, when compiled ------------------------------------ */

/* Does the head bind '$v' (map keys are literal there, not bindings)? */
static int head_binds(const uint8_t *p, const uint8_t *end, int v, int depth) {
  int w = var_of(p, end);
  if (w >= 0) return w == v;
  if (w != V_NONE || depth > MAX_DEPTH) return 0;
  lpvm_tread r = {p, end, 0};
  uint32_t n = 0;
  int t = lpvm_get_type(&r), map = t == LPVM_T_MAP;
  if (t == LPVM_T_TUPLE) lpvm_get_tuple(&r, &n);
  else if (t == LPVM_T_LIST) { lpvm_get_list(&r, &n); n++; }
  else if (map) { lpvm_get_map(&r, &n); n *= 2; }
  for (uint32_t i = 0; i < n; i++) {
    if ((!map || i % 2 == 1) && head_binds(r.p, end, v, depth + 1)) return 1;
    r.p = skip(r.p, end);
  }
  return 0;
}

/* The calls eval_tuple knows, by their argument count. */
static int known_call(const char *f, size_t fn, uint32_t nargs) {
  static const char *const one[] = {
      "not", "is_integer", "is_float", "is_number", "is_atom", "is_binary", "is_list",
      "is_tuple", "is_map", "is_pid", "is_port", "is_reference", "is_boolean",
      "is_function", "tuple_size", "byte_size", "bit_size", "size", "hd", "tl", "length",
      "map_size", "float", "round", "trunc", "bnot", "-", "+", "abs", NULL};
  static const char *const two[] = {
      "andalso", "orelse", "<", ">", "=<", ">=", "==", "=:=", "/=", "=/=", "and", "or",
      "xor", "element", "map_get", "is_map_key", "+", "-", "*", "/", "div", "rem", "band",
      "bor", "bxor", "bsl", "bsr", NULL};
  static const char *const three[] = {"binary_part", "is_record", NULL};
  const char *const *names = nargs == 1 ? one : nargs == 2 ? two : nargs == 3 ? three : NULL;
  for (; names && *names; names++)
    if (atom_is(f, fn, *names)) return 1;
  return 0;
}

/* A guard or body expression as Erlang checks it when a specification is made: every
** call is a known function with its argument count, every '$N' is bound by the head.
** Unchecked, a misspelt call ("<=" for "=<") or an unbound variable made the guard
** false on every object: a select that silently found nothing (erl: badarg). */
static int check_expr(const uint8_t *e, const uint8_t *end, const uint8_t *head, int depth) {
  if (depth > MAX_DEPTH) return -1;
  int v = var_of(e, end);
  if (v >= 0) return head_binds(head, end, v, 0) ? 0 : -1;
  lpvm_tread r = {e, end, 0};
  uint32_t n;
  const char *f;
  size_t fn;
  switch (lpvm_get_type(&r)) {
    case LPVM_T_TUPLE:
      lpvm_get_tuple(&r, &n);
      if (n == 1 && lpvm_get_type(&r) == LPVM_T_TUPLE) {   /* {{E1, ..., En}} */
        lpvm_get_tuple(&r, &n);
      } else {
        if (n < 1 || !is_atom(r.p, end, &f, &fn)) return -1;
        r.p = skip(r.p, end);
        if (atom_is(f, fn, "const")) return n == 2 ? 0 : -1;
        if (!known_call(f, fn, --n)) return -1;
      }
      break;
    case LPVM_T_LIST:
      lpvm_get_list(&r, &n);
      n++;   /* the elements, then the tail */
      break;
    default:
      return 0;   /* a literal */
  }
  for (uint32_t i = 0; i < n; i++) {
    if (check_expr(r.p, end, head, depth + 1)) return -1;
    r.p = skip(r.p, end);
  }
  return 0;
}

static int check_exprs(const uint8_t *p, const uint8_t *end, uint32_t n, const uint8_t *head) {
  for (uint32_t i = 0; i < n; i++) {
    if (check_expr(p, end, head, 0)) return -1;
    p = skip(p, end);
  }
  return 0;
}

/* Small specifications (the usual one clause, a few variables) need no allocation:
** the clauses and bindings fit in the record, the arena grows on first use. */
int ets_ms_compile(const uint8_t *term, size_t len, ets_ms *m) {
  memset(m, 0, offsetof(ets_ms, cl_in));
  m->cl = m->cl_in;
  m->bp = m->b_in;
  if (!term || lpvm_term_check(term, len)) return LPVM_EBADTERM;
  if (ets_too_deep(term + 1, term + len)) return LPVM_ETS_EMATCH;
  m->end = term + len;
  const uint8_t *p = term + 1;
  uint32_t n;
  int rc = LPVM_ETS_EMATCH;
  if (p[0] == TAG_NIL) { rc = 0; goto done; }   /* [] selects nothing */
  if (header(&p, m->end, 0, &n) || n == 0) goto done;
  if (n > ETS_MS_CLAUSES && !(m->cl = calloc(n, sizeof *m->cl))) {
    m->cl = m->cl_in;
    rc = LPVM_ENOMEM;
    goto done;
  }
  m->ncl = n;
  for (uint32_t i = 0; i < n; i++) {
    ets_clause *c = &m->cl[i];
    uint32_t ar;
    int any = 0;
    if (header(&p, m->end, 1, &ar) || ar != 3) goto done;
    c->head = p;
    c->nvars = scan_vars(c->head, m->end, &any, 0);
    if (c->nvars > m->maxvars) m->maxvars = c->nvars;
    p = skip(p, m->end);
    if (p[0] == TAG_NIL) {
      c->nguards = 0;
      p++;
    } else {
      if (header(&p, m->end, 0, &c->nguards)) goto done;
      c->guards = p;
      p = skip_list(p, m->end, c->nguards);
      if (check_exprs(c->guards, m->end, c->nguards, c->head)) goto done;
    }
    if (header(&p, m->end, 0, &c->nbody) || c->nbody == 0) goto done;
    c->body = p;
    p = skip_list(p, m->end, c->nbody);
    if (check_exprs(c->body, m->end, c->nbody, c->head)) goto done;
  }
  rc = 0;
done:
  if (rc == 0 && m->maxvars > ETS_MS_VARS / 2) {
    const uint8_t **b = calloc(2 * (size_t)m->maxvars, sizeof *b);
    if (!b) rc = LPVM_ENOMEM;
    else m->bp = b;
  }
  m->be = m->bp + (m->bp == m->b_in ? ETS_MS_VARS / 2 : m->maxvars);
  if (rc) ets_ms_free(m);
  return rc;
}

int ets_ms_bound_key(const ets_ms *m, uint32_t keypos, const uint8_t **p,
                     const uint8_t **end) {
  if (m->ncl != 1) return -1;
  lpvm_tread r = {m->cl[0].head, m->end, 0};
  uint32_t ar;
  int any = 0;
  if (lpvm_get_tuple(&r, &ar) || ar < keypos) return -1;
  for (uint32_t i = 1; i < keypos; i++) r.p = skip(r.p, m->end);
  scan_vars(r.p, m->end, &any, 0);
  if (any) return -1;
  *p = r.p;
  *end = skip(r.p, m->end);
  return 0;
}

/* ---- matching the head ----------------------------------------------------------------- */

/* Match the pattern at pat against the object's term at o: the end of o's term, or
** NULL if it does not match. Each object term is walked once. */
static const uint8_t *pmatch(ets_ms *m, const uint8_t *pat, const uint8_t *o,
                             const uint8_t *oend, int depth) {
  const uint8_t *pend = m->end;
  if (pat[0] == TAG_SMALL_INT && o[0] == TAG_SMALL_INT)   /* the common literal */
    return pat[1] == o[1] ? o + 2 : NULL;
  int v = var_of(pat, pend);
  if (v == V_ANY) return skip(o, oend);
  if (v >= 0) {
    const uint8_t *oe = skip(o, oend);
    if (m->bp[v]) return term_cmp(m->bp[v], m->be[v], o, oe, 1) == 0 ? oe : NULL;
    m->bp[v] = o;
    m->be[v] = oe;
    return oe;
  }
  if (depth > MAX_DEPTH) return NULL;
  lpvm_tread rp = {pat, pend, 0}, ro = {o, oend, 0};
  uint32_t n, k;
  switch (lpvm_get_type(&rp)) {
    case LPVM_T_TUPLE:
      if (lpvm_get_tuple(&rp, &n) || lpvm_get_tuple(&ro, &k) || n != k) return NULL;
      for (uint32_t i = 0; i < n && ro.p; i++) {
        ro.p = pmatch(m, rp.p, ro.p, oend, depth + 1);
        rp.p = skip(rp.p, pend);
      }
      return ro.p;
    case LPVM_T_LIST:
      if (lpvm_get_type(&ro) != LPVM_T_LIST) break;   /* a STRING_EXT: compare */
      lpvm_get_list(&rp, &n);
      lpvm_get_list(&ro, &k);
      if (n != k) return NULL;
      for (uint32_t i = 0; i <= n && ro.p; i++) {   /* the elements, then the tail */
        ro.p = pmatch(m, rp.p, ro.p, oend, depth + 1);
        rp.p = skip(rp.p, pend);
      }
      return ro.p;
    case LPVM_T_MAP: {
      if (lpvm_get_map(&rp, &n) || lpvm_get_map(&ro, &k)) return NULL;
      const uint8_t *pairs = ro.p;
      for (uint32_t i = 0; i < n; i++) {
        const uint8_t *pk = rp.p, *pv = skip(pk, pend);
        rp.p = skip(pv, pend);
        const uint8_t *q = pairs, *hit = NULL;
        for (uint32_t j = 0; j < k && !hit; j++) {
          const uint8_t *qv = skip(q, oend);
          if (term_cmp(pk, pv, q, qv, 1) == 0) hit = qv;
          q = skip(qv, oend);
        }
        if (!hit || !pmatch(m, pv, hit, oend, depth + 1)) return NULL;
      }
      return skip(o, oend);
    }
    default:
      break;
  }
  const uint8_t *oe = skip(o, oend);
  size_t pn = (size_t)(skip(pat, pend) - pat);
  if (pn == (size_t)(oe - o) && memcmp(pat, o, pn) == 0) return oe;   /* the same bytes */
  return term_cmp(pat, pat + pn, o, oe, 1) == 0 ? oe : NULL;
}

/* ---- guard and body expressions ------------------------------------------------------- */

static const uint8_t *vptr(ets_ms *m, const val *v) {
  return v->p ? v->p : m->arena.data + v->off;
}

static val lit(const uint8_t *p, size_t len) { return (val){p, 0, len}; }

static val vbool(int b) {
  return b ? lit(atom_true, sizeof atom_true) : lit(atom_false, sizeof atom_false);
}

static int v_is_true(ets_ms *m, const val *v) {
  return v->len == sizeof atom_true && memcmp(vptr(m, v), atom_true, v->len) == 0;
}

static int v_is_false(ets_ms *m, const val *v) {
  return v->len == sizeof atom_false && memcmp(vptr(m, v), atom_false, v->len) == 0;
}

static int v_type(ets_ms *m, const val *v) {
  return lpvm_get_type(&(lpvm_tread){vptr(m, v), vptr(m, v) + v->len, 0});
}

/* Where the next value built in the arena starts (the arena is made on first use). */
static size_t arena_start(ets_ms *m) {
  if (!m->arena.data) lpvm_tbuf_init(&m->arena);
  return m->arena.len;
}

/* Build in the arena from `start`: the value of what was appended. */
static int arena_val(ets_ms *m, size_t start, val *out) {
  if (m->arena.err) return HARD;
  *out = (val){NULL, start, m->arena.len - start};
  return 0;
}

static int eval(ets_ms *m, const uint8_t *e, val *out, int depth);

/* Append v to the arena. A value in the arena itself is read after the room is made:
** a copy from where it was before the arena grew would read freed memory. */
static void put_val(ets_ms *m, const val *v) {
  if (!v->p && !lpvm_tbuf_room(&m->arena, v->len)) return;   /* arena.err is set */
  term_put_raw(&m->arena, vptr(m, v), v->len);
}

static int cmp_vals(ets_ms *m, const val *a, const val *b, int exact) {
  const uint8_t *pa = vptr(m, a), *pb = vptr(m, b);
  return term_cmp(pa, pa + a->len, pb, pb + b->len, exact);
}

/* Numbers: 0 integer in *i, 1 float in *d, -1 not a number (or beyond 64 bits). */
static int num_of(ets_ms *m, const val *v, int64_t *i, double *d) {
  lpvm_tread r = {vptr(m, v), vptr(m, v) + v->len, 0};
  if (lpvm_get_int(&r, i) == 0) { *d = (double)*i; return 0; }
  if (lpvm_get_float(&r, d) == 0) return 1;
  return -1;
}

static int arith(ets_ms *m, const char *op, size_t opn, const val *a, const val *b,
                 val *out) {
  int64_t x, y, z = 0;
  double fx, fy, fz = 0;
  int ka = num_of(m, a, &x, &fx), kb = b ? num_of(m, b, &y, &fy) : 0;
  if (ka < 0 || kb < 0) return -1;
  size_t start = arena_start(m);
  int isf = ka == 1 || kb == 1;
  if (!b) {   /* unary: '-' and abs */
    if (atom_is(op, opn, "-")) { if (isf) fz = -fx; else if (__builtin_sub_overflow(0, x, &z)) return -1; }
    else if (atom_is(op, opn, "+")) { fz = fx; z = x; }
    else if (atom_is(op, opn, "abs")) { if (isf) fz = fabs(fx); else if (x == INT64_MIN) return -1; else z = x < 0 ? -x : x; }
    else if (atom_is(op, opn, "bnot") && !isf) z = ~x;
    else if (atom_is(op, opn, "float")) { isf = 1; fz = fx; }
    else if ((atom_is(op, opn, "round") || atom_is(op, opn, "trunc")) && isf) {
      double r = op[0] == 'r' ? round(fx) : trunc(fx);
      if (!(r >= -0x1p63 && r < 0x1p63)) return -1;   /* a bignum in Erlang */
      isf = 0;
      z = (int64_t)r;
    } else if (atom_is(op, opn, "round") || atom_is(op, opn, "trunc")) z = x;
    else return -1;
  } else if (atom_is(op, opn, "/")) {
    if (fy == 0) return -1;
    isf = 1;
    fz = fx / fy;
  } else if (atom_is(op, opn, "div") || atom_is(op, opn, "rem")) {
    if (isf || y == 0 || (x == INT64_MIN && y == -1)) return -1;
    z = op[0] == 'd' ? x / y : x % y;
  } else if (opn >= 3 && op[0] == 'b') {   /* band bor bxor bsl bsr: integers */
    if (isf) return -1;
    if (atom_is(op, opn, "band")) z = x & y;
    else if (atom_is(op, opn, "bor")) z = x | y;
    else if (atom_is(op, opn, "bxor")) z = x ^ y;
    else if (atom_is(op, opn, "bsl") || atom_is(op, opn, "bsr")) {
      if (op[2] == 'r') y = y == INT64_MIN ? INT64_MAX : -y;   /* bsr N is bsl -N */
      if (y <= -64) z = x < 0 ? -1 : 0;
      else if (y < 0) z = x >> -y;   /* arithmetic, as Erlang's */
      else if (x == 0) z = 0;
      else if (y >= 63) return -1;   /* past 64 bits: a bignum in Erlang */
      else {
        z = (int64_t)((uint64_t)x << y);
        if ((z >> y) != x) return -1;
      }
    } else return -1;
  } else if (isf) {
    if (atom_is(op, opn, "+")) fz = fx + fy;
    else if (atom_is(op, opn, "-")) fz = fx - fy;
    else if (atom_is(op, opn, "*")) fz = fx * fy;
    else return -1;
  } else {
    int ovf;
    if (atom_is(op, opn, "+")) ovf = __builtin_add_overflow(x, y, &z);
    else if (atom_is(op, opn, "-")) ovf = __builtin_sub_overflow(x, y, &z);
    else if (atom_is(op, opn, "*")) ovf = __builtin_mul_overflow(x, y, &z);
    else return -1;
    if (ovf) return -1;
  }
  if (isf) lpvm_put_float(&m->arena, fz);
  else lpvm_put_int(&m->arena, z);
  return arena_val(m, start, out);
}

static int type_test(ets_ms *m, const char *f, size_t fn, const val *a, val *out) {
  int t = v_type(m, a), r;
  if (atom_is(f, fn, "is_integer")) r = t == LPVM_T_INT || t == LPVM_T_BIGINT;
  else if (atom_is(f, fn, "is_float")) r = t == LPVM_T_FLOAT;
  else if (atom_is(f, fn, "is_number")) r = t == LPVM_T_INT || t == LPVM_T_BIGINT || t == LPVM_T_FLOAT;
  else if (atom_is(f, fn, "is_atom")) r = t == LPVM_T_ATOM;
  else if (atom_is(f, fn, "is_binary")) r = t == LPVM_T_BINARY;
  else if (atom_is(f, fn, "is_list")) r = t == LPVM_T_LIST || t == LPVM_T_NIL || t == LPVM_T_STRING;
  else if (atom_is(f, fn, "is_tuple")) r = t == LPVM_T_TUPLE;
  else if (atom_is(f, fn, "is_map")) r = t == LPVM_T_MAP;
  else if (atom_is(f, fn, "is_pid")) r = t == LPVM_T_PID;
  else if (atom_is(f, fn, "is_port")) r = t == LPVM_T_PORT;
  else if (atom_is(f, fn, "is_function")) {
    const uint8_t *p = vptr(m, a);
    r = a->len > 0 && (p[0] == TAG_NEW_FUN || p[0] == TAG_EXPORT);
  }
  else if (atom_is(f, fn, "is_reference")) r = t == LPVM_T_REF;
  else if (atom_is(f, fn, "is_boolean")) r = v_is_true(m, a) || v_is_false(m, a);
  else return -1;
  *out = vbool(r);
  return 0;
}

static int compare(const char *f, size_t fn, int c, val *out) {
  int r;
  if (atom_is(f, fn, "<")) r = c < 0;
  else if (atom_is(f, fn, ">")) r = c > 0;
  else if (atom_is(f, fn, "=<")) r = c <= 0;
  else if (atom_is(f, fn, ">=")) r = c >= 0;
  else if (atom_is(f, fn, "==") || atom_is(f, fn, "=:=")) r = c == 0;
  else if (atom_is(f, fn, "/=") || atom_is(f, fn, "=/=")) r = c != 0;
  else return -1;
  *out = vbool(r);
  return 0;
}

/* The part p..q of the value v (in the object, the specification or the arena). */
static val part_of(ets_ms *m, const val *v, const uint8_t *p, const uint8_t *q) {
  if (v->p) return lit(p, (size_t)(q - p));
  return (val){NULL, v->off + (size_t)(p - vptr(m, v)), (size_t)(q - p)};
}

/* hd(L), tl(L), length(L) of a list, a STRING_EXT one included. */
static int list_bif(ets_ms *m, const char *f, size_t fn, const val *a, val *out) {
  lpvm_tread r = {vptr(m, a), vptr(m, a) + a->len, 0};
  uint32_t n;
  int t = lpvm_get_type(&r);
  if (t == LPVM_T_NIL) {
    if (!atom_is(f, fn, "length")) return -1;   /* hd([]), tl([]): badarg */
    *out = lit((const uint8_t *)"\x61\x00", 2);
    return 0;
  }
  size_t start = arena_start(m);
  if (t == LPVM_T_STRING) {
    const uint8_t *p;
    size_t len;
    if (lpvm_get_string(&r, &p, &len) || len == 0) return -1;
    size_t at = (size_t)(p - vptr(m, a));   /* the arena may move below */
    if (atom_is(f, fn, "hd")) lpvm_put_int(&m->arena, p[0]);
    else if (atom_is(f, fn, "length")) lpvm_put_int(&m->arena, (int64_t)len);
    else if (len == 1) lpvm_put_nil(&m->arena);
    else {
      lpvm_put_list(&m->arena, (uint32_t)len - 1);
      for (size_t i = 1; i < len; i++) lpvm_put_int(&m->arena, vptr(m, a)[at + i]);
      lpvm_put_nil(&m->arena);
    }
    return arena_val(m, start, out);
  }
  if (t != LPVM_T_LIST || lpvm_get_list(&r, &n) || n == 0) return -1;
  const uint8_t *first = r.p;
  if (lpvm_skip(&r)) return -1;
  if (atom_is(f, fn, "hd")) { *out = part_of(m, a, first, r.p); return 0; }
  const uint8_t *second = r.p;
  for (uint32_t i = 1; i < n; i++)
    if (lpvm_skip(&r)) return -1;
  const uint8_t *tail = r.p;
  if (lpvm_skip(&r)) return -1;
  if (atom_is(f, fn, "length")) {   /* of a proper list only */
    if (tail[0] != TAG_NIL) return -1;
    lpvm_put_int(&m->arena, n);
    return arena_val(m, start, out);
  }
  if (n == 1) { *out = part_of(m, a, tail, r.p); return 0; }   /* tl([X | T]) is T */
  val rest = part_of(m, a, second, r.p);   /* the elements after the first, the tail */
  lpvm_put_list(&m->arena, n - 1);
  put_val(m, &rest);
  return arena_val(m, start, out);
}

/* map_get(K, M) and is_map_key(K, M): the pair whose key is =:= K. */
static int map_bif(ets_ms *m, const char *f, size_t fn, const val *k, const val *mv,
                   val *out) {
  lpvm_tread r = {vptr(m, mv), vptr(m, mv) + mv->len, 0};
  uint32_t n;
  if (lpvm_get_map(&r, &n)) return -1;
  const uint8_t *kp = vptr(m, k);
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *q = r.p;
    if (lpvm_skip(&r)) return -1;
    const uint8_t *v = r.p;
    if (lpvm_skip(&r)) return -1;
    if (term_cmp(kp, kp + k->len, q, v, 1) == 0) {
      if (atom_is(f, fn, "is_map_key")) *out = vbool(1);
      else *out = part_of(m, mv, v, r.p);
      return 0;
    }
  }
  if (atom_is(f, fn, "is_map_key")) { *out = vbool(0); return 0; }
  return -1;   /* map_get of a missing key: badarg */
}

/* element(N, T), tuple_size(T), byte_size(B), bit_size(B), size(T or B), map_size(M),
** hd/tl/length(L), map_get(K, M), is_map_key(K, M). */
static int builtin(ets_ms *m, const char *f, size_t fn, const val *a, const val *b,
                   val *out) {
  lpvm_tread r = {vptr(m, b ? b : a), vptr(m, b ? b : a) + (b ? b : a)->len, 0};
  uint32_t ar;
  if (atom_is(f, fn, "element") && b) {
    int64_t i;
    double d;
    if (num_of(m, a, &i, &d) != 0 || lpvm_get_tuple(&r, &ar) || i < 1 || i > ar) return -1;
    for (int64_t k = 1; k < i; k++) lpvm_skip(&r);
    const uint8_t *p = r.p;
    lpvm_skip(&r);
    *out = part_of(m, b, p, r.p);
    return 0;
  }
  if (b) {
    if (atom_is(f, fn, "map_get") || atom_is(f, fn, "is_map_key")) return map_bif(m, f, fn, a, b, out);
    return -1;
  }
  if (atom_is(f, fn, "hd") || atom_is(f, fn, "tl") || atom_is(f, fn, "length"))
    return list_bif(m, f, fn, a, out);
  size_t start = arena_start(m);
  int t = lpvm_get_type(&r);
  int64_t v;
  if ((atom_is(f, fn, "tuple_size") || atom_is(f, fn, "size")) && t == LPVM_T_TUPLE) {
    if (lpvm_get_tuple(&r, &ar)) return -1;
    v = ar;
  } else if ((atom_is(f, fn, "byte_size") || atom_is(f, fn, "size") ||
              atom_is(f, fn, "bit_size")) && t == LPVM_T_BINARY) {
    const uint8_t *p;
    size_t n;
    if (lpvm_get_binary(&r, &p, &n)) return -1;
    v = (int64_t)n * (f[0] == 'b' && f[1] == 'i' ? 8 : 1);
  } else if (atom_is(f, fn, "map_size") && t == LPVM_T_MAP) {
    if (lpvm_get_map(&r, &ar)) return -1;
    v = ar;
  } else {
    return -1;
  }
  lpvm_put_int(&m->arena, v);
  return arena_val(m, start, out);
}

/* binary_part(B, Start, Len) and is_record(T, Tag, Size): the calls of three. */
static int builtin3(ets_ms *m, const char *f, size_t fn, const val *a, const val *b,
                    const val *c, val *out) {
  int64_t x, y;
  double d;
  lpvm_tread r = {vptr(m, a), vptr(m, a) + a->len, 0};
  if (atom_is(f, fn, "is_record")) {
    uint32_t ar;
    if (v_type(m, b) != LPVM_T_ATOM || num_of(m, c, &y, &d) != 0) return -1;
    int ok = lpvm_get_type(&r) == LPVM_T_TUPLE && lpvm_get_tuple(&r, &ar) == 0 && ar == y &&
             ar > 0;
    if (ok) {
      const uint8_t *p = r.p;
      ok = lpvm_skip(&r) == 0 && term_cmp(p, r.p, vptr(m, b), vptr(m, b) + b->len, 1) == 0;
    }
    *out = vbool(ok);
    return 0;
  }
  if (!atom_is(f, fn, "binary_part")) return -1;
  const uint8_t *p;
  size_t n;
  if (lpvm_get_binary(&r, &p, &n) || num_of(m, b, &x, &d) != 0 || num_of(m, c, &y, &d) != 0)
    return -1;
  if (y < 0) { x += y; y = -y; }   /* a negative length counts back from Start */
  if (x < 0 || (uint64_t)x > n || (uint64_t)y > n - (uint64_t)x) return -1;
  size_t at = (size_t)(p - vptr(m, a)) + (size_t)x;
  size_t start = arena_start(m);
  if (!lpvm_tbuf_room(&m->arena, 5 + (size_t)y)) return HARD;   /* no move in the put */
  lpvm_put_binary(&m->arena, vptr(m, a) + at, (size_t)y);
  return arena_val(m, start, out);
}

/* {F, A...}: a call; {{...}}: a tuple built from expressions. */
static int eval_tuple(ets_ms *m, const uint8_t *e, val *out, int depth) {
  lpvm_tread r = {e, m->end, 0};
  uint32_t ar;
  const char *f;
  size_t fn;
  lpvm_get_tuple(&r, &ar);
  if (ar == 1 && lpvm_get_type(&r) == LPVM_T_TUPLE) {   /* {{E1, ..., En}} */
    uint32_t n;
    lpvm_get_tuple(&r, &n);
    val *vs = n ? malloc(n * sizeof *vs) : NULL;
    if (n && !vs) return HARD;
    int rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
      rc = eval(m, r.p, &vs[i], depth + 1);
      r.p = skip(r.p, m->end);
    }
    size_t start = arena_start(m);
    if (rc == 0) {
      lpvm_put_tuple(&m->arena, n);
      for (uint32_t i = 0; i < n; i++) put_val(m, &vs[i]);
      rc = arena_val(m, start, out);
    }
    free(vs);
    return rc;
  }
  if (ar < 1 || !is_atom(r.p, m->end, &f, &fn)) return -1;
  r.p = skip(r.p, m->end);
  if (atom_is(f, fn, "const") && ar == 2) {
    *out = lit(r.p, (size_t)(skip(r.p, m->end) - r.p));
    return 0;
  }
  val a, b;
  int lazy = atom_is(f, fn, "andalso") || atom_is(f, fn, "orelse");
  if (ar == 4) {   /* binary_part/3, is_record/3 */
    val c;
    int rc;
    if ((rc = eval(m, r.p, &a, depth + 1)) != 0) return rc;
    r.p = skip(r.p, m->end);
    if ((rc = eval(m, r.p, &b, depth + 1)) != 0) return rc;
    r.p = skip(r.p, m->end);
    if ((rc = eval(m, r.p, &c, depth + 1)) != 0) return rc;
    return builtin3(m, f, fn, &a, &b, &c, out);
  }
  if (ar < 2 || ar > 3) return SOFT;
  int rc = eval(m, r.p, &a, depth + 1);
  if (rc) return rc;
  r.p = skip(r.p, m->end);
  if (lazy && ar == 3) {   /* the second operand only when needed */
    int stop = f[0] == 'a' ? v_is_false(m, &a) : v_is_true(m, &a);
    if (stop) { *out = a; return 0; }
    if (!v_is_true(m, &a) && !v_is_false(m, &a)) return -1;
    if ((rc = eval(m, r.p, &b, depth + 1)) != 0) return rc;
    if (!v_is_true(m, &b) && !v_is_false(m, &b)) return -1;
    *out = b;
    return 0;
  }
  if (ar == 2) {
    if (atom_is(f, fn, "not")) {
      if (!v_is_true(m, &a) && !v_is_false(m, &a)) return -1;
      *out = vbool(v_is_false(m, &a));
      return 0;
    }
    if (type_test(m, f, fn, &a, out) == 0) return 0;
    if (builtin(m, f, fn, &a, NULL, out) == 0) return 0;
    return arith(m, f, fn, &a, NULL, out);
  }
  if ((rc = eval(m, r.p, &b, depth + 1)) != 0) return rc;
  int exact = atom_is(f, fn, "=:=") || atom_is(f, fn, "=/=");
  if (compare(f, fn, cmp_vals(m, &a, &b, exact), out) == 0) return 0;
  if (atom_is(f, fn, "and") || atom_is(f, fn, "or") || atom_is(f, fn, "xor")) {
    int x = v_is_true(m, &a), y = v_is_true(m, &b);
    if ((!x && !v_is_false(m, &a)) || (!y && !v_is_false(m, &b))) return -1;
    *out = vbool(f[0] == 'a' ? x && y : f[0] == 'o' ? x || y : x != y);
    return 0;
  }
  if (builtin(m, f, fn, &a, &b, out) == 0) return 0;
  return arith(m, f, fn, &a, &b, out);
}

static int eval(ets_ms *m, const uint8_t *e, val *out, int depth) {
  if (depth > MAX_DEPTH) return HARD;
  int v = var_of(e, m->end);
  if (v >= 0) {
    if (v >= m->maxvars || !m->bp[v]) return -1;
    *out = lit(m->bp[v], (size_t)(m->be[v] - m->bp[v]));
    return 0;
  }
  if (v == V_OBJ) { *out = lit(m->obj->data + 1, m->obj->len - 1); return 0; }
  if (v == V_ALL) {
    size_t start = arena_start(m);
    uint32_t n = 0;
    for (int i = 0; i < m->maxvars; i++) n += m->bp[i] != NULL;
    lpvm_put_list(&m->arena, n);
    for (int i = 0; i < m->maxvars; i++)
      if (m->bp[i]) term_put_raw(&m->arena, m->bp[i], (size_t)(m->be[i] - m->bp[i]));
    lpvm_put_nil(&m->arena);
    return arena_val(m, start, out);
  }
  lpvm_tread r = {e, m->end, 0};
  int t = lpvm_get_type(&r);
  if (t == LPVM_T_TUPLE) {
    int rc = eval_tuple(m, e, out, depth);
    if (rc == SOFT && m->in_body) {   /* Erlang: a failed call in a body is 'EXIT' */
      *out = lit(atom_exit, sizeof atom_exit);
      return 0;
    }
    return rc;
  }
  if (t == LPVM_T_LIST) {   /* a list built from expressions */
    uint32_t n;
    lpvm_get_list(&r, &n);
    val *vs = malloc(((size_t)n + 1) * sizeof *vs);
    if (!vs) return HARD;
    int rc = 0;
    for (uint32_t i = 0; i <= n && rc == 0; i++) {
      rc = eval(m, r.p, &vs[i], depth + 1);
      r.p = skip(r.p, m->end);
    }
    size_t start = arena_start(m);
    if (rc == 0) {
      lpvm_put_list(&m->arena, n);
      for (uint32_t i = 0; i <= n; i++) put_val(m, &vs[i]);
      rc = arena_val(m, start, out);
    }
    free(vs);
    return rc;
  }
  *out = lit(e, (size_t)(skip(e, m->end) - e));   /* a literal */
  return 0;
}

int ets_ms_run(ets_ms *m, const ets_obj *o, lpvm_tbuf *out, int *is_true) {
  m->obj = o;
  for (uint32_t c = 0; c < m->ncl; c++) {
    ets_clause *cl = &m->cl[c];
    if (m->maxvars) memset(m->bp, 0, (size_t)m->maxvars * sizeof *m->bp);
    if (!pmatch(m, cl->head, o->data + 1, o->data + o->len, 0)) continue;
    if (m->arena.data) lpvm_tbuf_reset(&m->arena);   /* else the first put makes it */
    const uint8_t *g = cl->guards;
    int ok = 1;
    m->in_body = 0;
    for (uint32_t i = 0; i < cl->nguards && ok; i++) {
      val v;
      ok = eval(m, g, &v, 0) == 0 && v_is_true(m, &v);
      g = skip(g, m->end);
    }
    if (!ok) continue;
    const uint8_t *b = cl->body;
    for (uint32_t i = 1; i < cl->nbody; i++) b = skip(b, m->end);   /* the last */
    if (out && var_of(b, m->end) == V_ALL) {   /* match/2's '$$': straight to out */
      uint32_t n = 0;
      for (int i = 0; i < m->maxvars; i++) n += m->bp[i] != NULL;
      lpvm_put_list(out, n);
      for (int i = 0; i < m->maxvars; i++)
        if (m->bp[i]) term_put_raw(out, m->bp[i], (size_t)(m->be[i] - m->bp[i]));
      lpvm_put_nil(out);
      *is_true = 0;
      return 1;
    }
    val v;
    m->in_body = 1;
    int rc = eval(m, b, &v, 0);
    m->in_body = 0;
    if (rc) return 0;   /* no memory, or nested too deep: no result */
    *is_true = v_is_true(m, &v);
    if (out) term_put_raw(out, vptr(m, &v), v.len);
    return 1;
  }
  return 0;
}
