/*
** term_fmt.c -- lpvm_term_format: a term in Erlang syntax, for logs and errors.
**
** The output is what erl prints ({a,1,<<"x">>}, [1|t], #{k => v}, <0.5.1>,
** #Ref<0.0.1.2>, 1.0e300), so logs read like erl's own. Like
** snprintf, it writes what fits and returns the full length. Nesting is walked with a
** fixed stack of frames: deeper than FMT_DEPTH prints "..." instead of recursing.
*/
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/term_int.h"

#define FMT_DEPTH 64
#define BIG_MAX_BYTES 512    /* bigger integers print as #Bigint<N bytes> */

/* ---- output ---------------------------------------------------------------------- */

typedef struct fmt_out {
  char *buf;
  size_t cap;   /* bytes of buf that may hold text; the NUL goes in last */
  size_t n;     /* length so far, including what did not fit */
} fmt_out;

static void emit(fmt_out *o, const char *s, size_t len) {
  if (o->n < o->cap) {
    size_t k = o->cap - o->n < len ? o->cap - o->n : len;
    memcpy(o->buf + o->n, s, k);
  }
  o->n += len;
}

static void emits(fmt_out *o, const char *s) { emit(o, s, strlen(s)); }

static void emitf_u64(fmt_out *o, uint64_t v) {
  char t[24];
  emit(o, t, (size_t)snprintf(t, sizeof t, "%" PRIu64, v));
}

static void emitf_i64(fmt_out *o, int64_t v) {
  char t[24];
  emit(o, t, (size_t)snprintf(t, sizeof t, "%" PRId64, v));
}

/* ---- atoms and strings ----------------------------------------------------------- */

static const char *const reserved[] = {
  "after", "and", "andalso", "band", "begin", "bnot", "bor", "bsl", "bsr", "bxor",
  "case", "catch", "cond", "div", "else", "end", "fun", "if", "let", "maybe", "not",
  "of", "or", "orelse", "receive", "rem", "try", "when", "xor", NULL
};

static int is_lower(int c) { return c >= 'a' && c <= 'z'; }
static int is_alnum(int c) {
  return is_lower(c) || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '@';
}

/* An atom may go unquoted if it looks like a lowercase identifier and is no keyword. */
static int atom_bare(const uint8_t *s, size_t len) {
  if (len == 0 || !is_lower(s[0])) return 0;
  for (size_t i = 1; i < len; i++)
    if (!is_alnum(s[i])) return 0;
  for (const char *const *w = reserved; *w; w++)
    if (strlen(*w) == len && memcmp(*w, s, len) == 0) return 0;
  return 1;
}

/* Erlang's one-letter escapes; other control codes print in octal. */
static char escape_letter(unsigned c) {
  switch (c) {
    case '\n': return 'n'; case '\t': return 't'; case '\r': return 'r';
    case '\b': return 'b'; case '\v': return 'v'; case '\f': return 'f';
    case 0x1B: return 'e'; case 0x7F: return 'd';
    default: return 0;
  }
}

/* One byte of quoted text. Bytes >= 0x80 are UTF-8 and copied, unless the source is
** a Latin-1 atom, whose characters are re-encoded as UTF-8. */
static void emit_char(fmt_out *o, unsigned c, char quote, int latin1) {
  char t[8];
  if (c == (unsigned char)quote || c == '\\') { t[0] = '\\'; t[1] = (char)c; emit(o, t, 2); }
  else if (escape_letter(c)) { t[0] = '\\'; t[1] = escape_letter(c); emit(o, t, 2); }
  else if (c < 0x20) emit(o, t, (size_t)snprintf(t, sizeof t, "\\%03o", c));
  else if (c >= 0x80 && latin1) {
    t[0] = (char)(0xC0 | c >> 6); t[1] = (char)(0x80 | (c & 0x3F)); emit(o, t, 2);
  } else { t[0] = (char)c; emit(o, t, 1); }
}

static void emit_quoted(fmt_out *o, const uint8_t *s, size_t len, char quote,
                        int latin1) {
  emit(o, &quote, 1);
  for (size_t i = 0; i < len; i++) emit_char(o, s[i], quote, latin1);
  emit(o, &quote, 1);
}

static void emit_atom(fmt_out *o, const char *name, size_t len, int latin1) {
  const uint8_t *s = (const uint8_t *)name;
  if (atom_bare(s, len)) emit(o, name, len);
  else emit_quoted(o, s, len, '\'', latin1);
}

/* Text worth showing as a string, as Erlang decides for Latin-1: printable ASCII
** and the whitespace and escapes above (but not DEL). Bytes >= 0x80 show as numbers. */
static int printable(const uint8_t *s, size_t len) {
  if (len == 0) return 0;
  for (size_t i = 0; i < len; i++)
    if ((s[i] < 0x20 || s[i] > 0x7E) && (s[i] == 0x7F || !escape_letter(s[i]))) return 0;
  return 1;
}

static void emit_bytes(fmt_out *o, const uint8_t *s, size_t len) {
  char t[8];
  for (size_t i = 0; i < len; i++) {
    if (i) emit(o, ",", 1);
    emit(o, t, (size_t)snprintf(t, sizeof t, "%u", s[i]));
  }
}

static void emit_binary(fmt_out *o, const uint8_t *s, size_t len) {
  emits(o, "<<");
  if (printable(s, len)) emit_quoted(o, s, len, '"', 0);
  else emit_bytes(o, s, len);
  emits(o, ">>");
}

static void emit_string(fmt_out *o, const uint8_t *s, size_t len) {
  if (printable(s, len)) { emit_quoted(o, s, len, '"', 0); return; }
  emit(o, "[", 1);
  emit_bytes(o, s, len);
  emit(o, "]", 1);
}

/* ---- numbers --------------------------------------------------------------------- */

/* Decimal digits of a magnitude stored as little-endian bytes, by repeated division
** by 10^9 of base-2^32 words. */
static void emit_big(fmt_out *o, const term_big *big) {
  uint32_t w[BIG_MAX_BYTES / 4];
  uint32_t chunk[BIG_MAX_BYTES / 4 * 10 / 9 + 2];
  size_t nw = (big->n + 3) / 4, nc = 0;
  char t[16];
  if (big->n > BIG_MAX_BYTES) {
    emits(o, "#Bigint<");
    emitf_u64(o, big->n);
    emits(o, " bytes>");
    return;
  }
  memset(w, 0, sizeof w);
  for (size_t i = 0; i < big->n; i++) w[i / 4] |= (uint32_t)big->digits[i] << (8 * (i % 4));
  while (nw > 0) {
    uint64_t rem = 0;
    for (size_t i = nw; i-- > 0;) {
      uint64_t cur = rem << 32 | w[i];
      w[i] = (uint32_t)(cur / 1000000000u);
      rem = cur % 1000000000u;
    }
    chunk[nc++] = (uint32_t)rem;
    while (nw > 0 && w[nw - 1] == 0) nw--;
  }
  if (big->neg && nc > 0) emit(o, "-", 1);
  if (nc == 0) chunk[nc++] = 0;
  emit(o, t, (size_t)snprintf(t, sizeof t, "%" PRIu32, chunk[nc - 1]));
  for (size_t i = nc - 1; i-- > 0;)
    emit(o, t, (size_t)snprintf(t, sizeof t, "%09" PRIu32, chunk[i]));
}

/* Shortest digits that read back as v: digits in d (NUL-ended), returns the decimal
** exponent of the first digit. */
static int shortest_digits(double v, char d[20]) {
  char e[40];
  int exp10 = 0, n = 0;
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(e, sizeof e, "%.*e", prec - 1, v);
    if (strtod(e, NULL) == v) break;
  }
  /* e is "[-]D[.DDD]e[+-]XX"; any decimal point character is skipped */
  const char *s = e + (e[0] == '-');
  for (; *s && *s != 'e'; s++)
    if (*s >= '0' && *s <= '9') d[n++] = *s;
  if (*s == 'e') exp10 = atoi(s + 1);
  while (n > 1 && d[n - 1] == '0') n--;
  d[n] = '\0';
  return exp10;
}

static void emit_zeros(fmt_out *o, int n) {
  for (; n > 0; n--) emit(o, "0", 1);
}

/* Erlang's choice of notation: the shorter of fixed (123.5, 0.001) and scientific
** (1.0e3); fixed on a tie; scientific from 2^53 up, where fixed notation would
** suggest an exactness that floats no longer have. */
static void emit_float(fmt_out *o, double v) {
  char d[20], e[16];
  if (isnan(v)) { emits(o, "nan"); return; }
  if (isinf(v)) { emits(o, v < 0 ? "-inf" : "inf"); return; }
  if (v == 0) { emits(o, signbit(v) ? "-0.0" : "0.0"); return; }
  int exp10 = shortest_digits(v, d), len = (int)strlen(d), place = exp10 + 1;
  int ne = snprintf(e, sizeof e, "e%d", exp10);
  int nsci = 2 + (len > 1 ? len - 1 : 1) + ne;
  int nfix = place <= 0 ? 2 - place + len : place >= len ? place + 2 : len + 1;
  if (v < 0) emit(o, "-", 1);
  if (fabs(v) >= 9007199254740992.0 || nsci < nfix) {
    emit(o, d, 1);
    emit(o, ".", 1);
    if (len > 1) emit(o, d + 1, (size_t)len - 1);
    else emit(o, "0", 1);
    emit(o, e, (size_t)ne);
  } else if (place <= 0) {
    emit(o, "0.", 2);
    emit_zeros(o, -place);
    emit(o, d, (size_t)len);
  } else if (place >= len) {
    emit(o, d, (size_t)len);
    emit_zeros(o, place - len);
    emit(o, ".0", 2);
  } else {
    emit(o, d, (size_t)place);
    emit(o, ".", 1);
    emit(o, d + place, (size_t)(len - place));
  }
}

/* ---- pids, ports, references ----------------------------------------------------- */

/* lpvm's own node prints as 0, as Erlang prints local ids; any other node by name. */
static void emit_node(fmt_out *o, const term_ident *id) {
  if (term_node_is_local(id->node, id->node_len)) emit(o, "0", 1);
  else emit_atom(o, id->node, id->node_len, 0);
}

static void emit_ident(fmt_out *o, const term_ident *id) {
  if (id->type == LPVM_T_PID) {
    emit(o, "<", 1);
    emit_node(o, id);
    emit(o, ".", 1);
    emitf_u64(o, (uint32_t)id->id);
    emit(o, ".", 1);
    emitf_u64(o, id->id >> 32);
    emit(o, ">", 1);
  } else if (id->type == LPVM_T_PORT) {
    emits(o, "#Port<");
    emit_node(o, id);
    emit(o, ".", 1);
    emitf_u64(o, id->id);
    emit(o, ">", 1);
  } else {   /* Erlang prints the words of a reference highest first */
    emits(o, "#Ref<");
    emit_node(o, id);
    for (uint32_t i = id->nwords; i-- > 0;) {
      emit(o, ".", 1);
      emitf_u64(o, term_be32(id->words + 4 * (size_t)i));
    }
    emit(o, ">", 1);
  }
}

/* ---- one term -------------------------------------------------------------------- */

/* fun M:F/A, the one kind of fun that is plain data. */
static int emit_export(lpvm_tread *r, fmt_out *o) {
  lpvm_tread t = { r->p + 1, r->end, 0 };
  const char *m, *f;
  size_t ml, fl;
  int64_t a;
  if (lpvm_get_atom(&t, &m, &ml) || lpvm_get_atom(&t, &f, &fl) || lpvm_get_int(&t, &a))
    return LPVM_EBADTERM;
  emits(o, "fun ");
  emit_atom(o, m, ml, 0);
  emit(o, ":", 1);
  emit_atom(o, f, fl, 0);
  emit(o, "/", 1);
  emitf_i64(o, a);
  return term_took(r, t.p);
}

/* A bitstring (BIT_BINARY_EXT: len:32, bits used in the last byte:8, bytes), as
** Erlang prints it: <<1,2,5:3>>. With all 8 bits used it is a binary. */
static int emit_bits(lpvm_tread *r, fmt_out *o) {
  const uint8_t *p = r->p;
  size_t left = term_left(p, r->end), n;
  if (left < 6) return LPVM_EBADTERM;
  n = term_be32(p + 1);
  unsigned bits = p[5];
  if (n == 0 || bits < 1 || bits > 8 || left - 6 < n) return LPVM_EBADTERM;
  if (bits == 8) {
    emit_binary(o, p + 6, n);
  } else {
    emits(o, "<<");
    emit_bytes(o, p + 6, n - 1);
    if (n > 1) emit(o, ",", 1);
    emitf_u64(o, p[6 + n - 1] >> (8 - bits));
    emit(o, ":", 1);
    emitf_u64(o, bits);
    emits(o, ">>");
  }
  return term_took(r, p + 6 + n);
}

/* Anything but a tuple, list or map. */
static int emit_scalar(lpvm_tread *r, fmt_out *o, int type) {
  const uint8_t *next = r->p, *s;
  const char *name;
  size_t len;
  int latin1;
  int64_t i;
  double d;
  term_big big;
  term_ident id;
  int err = 0;
  switch (type) {
    case LPVM_T_ATOM:
      if ((err = term_atom_at(r->p, r->end, &name, &len, &latin1, &next)) == 0)
        emit_atom(o, name, len, latin1);
      break;
    case LPVM_T_INT:
      if ((err = lpvm_get_int(r, &i)) == 0) emitf_i64(o, i);
      return err;
    case LPVM_T_BIGINT:
      if ((err = term_big_at(r->p, r->end, &big, &next)) == 0) emit_big(o, &big);
      break;
    case LPVM_T_FLOAT:
      if ((err = lpvm_get_float(r, &d)) == 0) emit_float(o, d);
      return err;
    case LPVM_T_BINARY:
      if ((err = lpvm_get_binary(r, &s, &len)) == 0) emit_binary(o, s, len);
      return err;
    case LPVM_T_STRING:
      if ((err = lpvm_get_string(r, &s, &len)) == 0) emit_string(o, s, len);
      return err;
    case LPVM_T_PID: case LPVM_T_PORT: case LPVM_T_REF:
      if ((err = term_ident_at(r->p, r->end, &id, &next)) == 0) emit_ident(o, &id);
      break;
    case LPVM_T_NIL:
      if ((err = lpvm_get_nil(r)) == 0) emits(o, "[]");
      return err;
    default: {   /* funs and the unknown: named, not shown */
      int tag = r->p[0];
      if (tag == TAG_EXPORT) return emit_export(r, o);
      if (tag == TAG_BIT_BINARY) return emit_bits(r, o);
      if ((err = lpvm_skip(r)) == 0) emits(o, tag == TAG_NEW_FUN ? "#Fun<>" : "#Term<>");
      return err;
    }
  }
  if (err == 0) term_took(r, next);
  return err;
}

/* ---- the walk -------------------------------------------------------------------- */

enum { FR_TUPLE, FR_LIST, FR_MAP };

typedef struct fmt_frame {
  uint64_t left;    /* elements still to print; a list's tail counts as one */
  uint8_t kind;
  uint8_t first;
} fmt_frame;

static const char *const closer[] = { "}", "]", "}" };

/* Open a tuple, list or map: print its opener and push a frame (none when empty). */
static int open_container(lpvm_tread *r, fmt_out *o, int type, fmt_frame *f, int *pushed) {
  uint32_t n;
  *pushed = 0;
  if (type == LPVM_T_TUPLE) {
    if (lpvm_get_tuple(r, &n)) return LPVM_EBADTERM;
    emits(o, n ? "{" : "{}");
    *f = (fmt_frame){ n, FR_TUPLE, 1 };
  } else if (type == LPVM_T_LIST) {
    if (lpvm_get_list(r, &n)) return LPVM_EBADTERM;
    emits(o, "[");
    *f = (fmt_frame){ (uint64_t)n + 1, FR_LIST, 1 };
  } else {
    if (lpvm_get_map(r, &n)) return LPVM_EBADTERM;
    emits(o, n ? "#{" : "#{}");
    *f = (fmt_frame){ 2 * (uint64_t)n, FR_MAP, 1 };
  }
  *pushed = f->left > 0;
  return 0;
}

/* Close finished containers and print the separator before the next element.
** Returns the new depth; 0 means the whole term is printed. */
static int next_element(lpvm_tread *r, fmt_out *o, fmt_frame *st, int depth) {
  while (depth > 0) {
    fmt_frame *f = &st[depth - 1];
    if (f->kind == FR_LIST && f->left == 1) {   /* the tail: [] closes, else |Tail */
      f->left = 0;
      if (r->p < r->end && r->p[0] == TAG_NIL) { term_took(r, r->p + 1); continue; }
      emits(o, "|");
      return depth;
    }
    if (f->left == 0) {
      emits(o, closer[f->kind]);
      depth--;
      continue;
    }
    if (!f->first) emits(o, f->kind == FR_MAP && (f->left & 1) ? " => " : ",");
    f->first = 0;
    f->left--;
    return depth;
  }
  return 0;
}

static int fmt_term(lpvm_tread *r, fmt_out *o) {
  fmt_frame st[FMT_DEPTH];
  int depth = 0, pushed;
  do {
    int type = lpvm_get_type(r);
    if (type < 0) return type;
    if (type == LPVM_T_TUPLE || type == LPVM_T_LIST || type == LPVM_T_MAP) {
      if (depth == FMT_DEPTH) {
        if (lpvm_skip(r)) return LPVM_EBADTERM;
        emits(o, "...");
      } else {
        if (open_container(r, o, type, &st[depth], &pushed)) return LPVM_EBADTERM;
        depth += pushed;
      }
    } else if (emit_scalar(r, o, type)) {
      return LPVM_EBADTERM;
    }
    depth = next_element(r, o, st, depth);
  } while (depth > 0);
  return 0;
}

/* Cut at cap-1 bytes, but never inside a UTF-8 sequence (atoms may hold any). */
static size_t cut_utf8(const char *buf, size_t len) {
  size_t k = len;
  while (k > 0 && len - k < 3 && ((unsigned char)buf[k] & 0xC0) == 0x80) k--;
  return ((unsigned char)buf[k] & 0xC0) == 0x80 ? len : k;
}

size_t lpvm_term_format(const uint8_t *term, size_t len, char *out, size_t cap) {
  fmt_out o = { out, out ? cap : 0, 0 };
  lpvm_tread r;
  if (lpvm_tread_init(&r, term, len) || fmt_term(&r, &o)) emits(&o, "<bad>");
  if (o.cap == 0) return o.n;
  size_t end = o.n < o.cap ? o.n : cut_utf8(out, o.cap - 1);
  out[end] = '\0';
  return o.n;
}
