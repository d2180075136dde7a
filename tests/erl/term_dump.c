/*
** term_dump.c -- lpvm's half of the Erlang cross-check (tests/erl/term_check.sh).
**
**   term_dump encode   print one line "NAME HEX" per term lpvm encodes below; the
**                      Erlang side knows, by NAME, which term each must decode to.
**   term_dump decode   read "NAME HEX" lines (terms erl encoded) and print, per line,
**                      "NAME<TAB>RENDERING<TAB>HEX2": lpvm_term_format's rendering and
**                      the term re-encoded through the reader and the builder, or "-"
**                      where lpvm cannot rebuild it (big integers, funs, foreign ids).
**
** Renderings never hold a raw tab or newline: lpvm_term_format escapes them.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/term.h"

/* ---- encode ---------------------------------------------------------------------- */

static void e_atom_abc(lpvm_tbuf *b) { lpvm_put_atom(b, "abc"); }
static void e_atom_empty(lpvm_tbuf *b) { lpvm_put_atom(b, ""); }
static void e_atom_quote(lpvm_tbuf *b) { lpvm_put_atom(b, "it's"); }
static void e_atom_utf8(lpvm_tbuf *b) { lpvm_put_atom(b, "\xc3\xa9t\xc3\xa9"); }
static void e_atom_255(lpvm_tbuf *b) {
  char s[255];
  memset(s, 'x', sizeof s);
  lpvm_put_atom_len(b, s, sizeof s);
}
static void e_atom_long_utf8(lpvm_tbuf *b) {   /* 200 characters, 400 bytes: ATOM_UTF8_EXT */
  char s[400];
  for (int i = 0; i < 200; i++) { s[2 * i] = (char)0xc3; s[2 * i + 1] = (char)0xa9; }
  lpvm_put_atom_len(b, s, sizeof s);
}

static void e_ints(lpvm_tbuf *b) {
  static const int64_t v[] = { 0, 255, 256, -1, INT32_MIN, INT32_MAX, (int64_t)INT32_MAX + 1,
                               (int64_t)INT32_MIN - 1, INT64_MIN, INT64_MAX, INT64_C(1) << 40,
                               -(INT64_C(1) << 40), INT64_MIN + 1 };
  size_t n = sizeof v / sizeof *v;
  lpvm_put_list(b, (uint32_t)n);
  for (size_t i = 0; i < n; i++) lpvm_put_int(b, v[i]);
  lpvm_put_nil(b);
}
static void e_int64_min(lpvm_tbuf *b) { lpvm_put_int(b, INT64_MIN); }
static void e_int_2_31(lpvm_tbuf *b) { lpvm_put_int(b, (int64_t)INT32_MAX + 1); }

static void e_floats(lpvm_tbuf *b) {
  static const double v[] = { 0.0, -0.0, 1.5, 1e300, 0.1, 5e-324, -2.5e-10,
                              1.7976931348623157e308 };
  size_t n = sizeof v / sizeof *v;
  lpvm_put_tuple(b, (uint32_t)n);
  for (size_t i = 0; i < n; i++) lpvm_put_float(b, v[i]);
}
static void e_float_nan(lpvm_tbuf *b) { lpvm_put_float(b, NAN); }
static void e_float_inf(lpvm_tbuf *b) { lpvm_put_float(b, INFINITY); }

static void e_bin_empty(lpvm_tbuf *b) { lpvm_put_binary(b, NULL, 0); }
static void e_bin_hi(lpvm_tbuf *b) { lpvm_put_binary(b, "hi", 2); }
static void e_bin_100k(lpvm_tbuf *b) {   /* byte i is i*7 mod 256 */
  size_t n = 100000;
  uint8_t *p = malloc(n);
  if (p == NULL) return;
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 7);
  lpvm_put_binary(b, p, n);
  free(p);
}

static void e_tuple_0(lpvm_tbuf *b) { lpvm_put_tuple(b, 0); }
static void e_tuple_300(lpvm_tbuf *b) {
  lpvm_put_tuple(b, 300);
  for (int i = 1; i <= 300; i++) lpvm_put_int(b, i);
}
static void e_nil(lpvm_tbuf *b) { lpvm_put_list(b, 0); lpvm_put_nil(b); }
static void e_list_ab(lpvm_tbuf *b) {
  lpvm_put_list(b, 2); lpvm_put_atom(b, "a"); lpvm_put_atom(b, "b"); lpvm_put_nil(b);
}
static void e_list_improper(lpvm_tbuf *b) {
  lpvm_put_list(b, 1); lpvm_put_atom(b, "a"); lpvm_put_atom(b, "b");
}
static void e_list_123(lpvm_tbuf *b) {   /* erl writes this one as STRING_EXT */
  lpvm_put_list(b, 3);
  for (int i = 1; i <= 3; i++) lpvm_put_int(b, i);
  lpvm_put_nil(b);
}
static void e_map_0(lpvm_tbuf *b) { lpvm_put_map(b, 0); }
static void e_map_ab(lpvm_tbuf *b) {
  lpvm_put_map(b, 2);
  lpvm_put_atom(b, "a"); lpvm_put_int(b, 1);
  lpvm_put_atom(b, "b"); lpvm_put_int(b, 2);
}
static void e_map_patched(lpvm_tbuf *b) {   /* keys out of Erlang's order on purpose */
  size_t mark = lpvm_put_map_open(b);
  lpvm_put_binary(b, "k", 1); lpvm_put_tuple(b, 0);
  lpvm_put_int(b, 7); lpvm_put_list(b, 1); lpvm_put_float(b, 1.5); lpvm_put_nil(b);
  lpvm_put_atom(b, "z"); lpvm_put_map(b, 0);
  lpvm_patch_map(b, mark, 3);
}

static void e_pid(lpvm_tbuf *b) { lpvm_put_pid(b, 5 | UINT64_C(1) << 32); }
static void e_pid_max(lpvm_tbuf *b) { lpvm_put_pid(b, UINT64_C(0x3fffffffffffffff)); }
static void e_port(lpvm_tbuf *b) { lpvm_put_pid(b, LPVM_ID_PORT_BIT | 7 | UINT64_C(3) << 32); }
static void e_port_small(lpvm_tbuf *b) { lpvm_put_pid(b, LPVM_ID_PORT_BIT | 9); }
static void e_ref(lpvm_tbuf *b) { lpvm_put_ref(b, UINT64_C(0x0123456789abcdef)); }
static void e_ref_max(lpvm_tbuf *b) { lpvm_put_ref(b, UINT64_MAX); }

static void e_nested(lpvm_tbuf *b) {   /* {ok,[{a,<<"x">>},-7],#{k => [1.5]}} */
  lpvm_put_tuple(b, 3); lpvm_put_atom(b, "ok");
  lpvm_put_list(b, 2);
  lpvm_put_tuple(b, 2); lpvm_put_atom(b, "a"); lpvm_put_binary(b, "x", 1);
  lpvm_put_int(b, -7); lpvm_put_nil(b);
  lpvm_put_map(b, 1); lpvm_put_atom(b, "k");
  lpvm_put_list(b, 1); lpvm_put_float(b, 1.5); lpvm_put_nil(b);
}
static void e_exit_msg(lpvm_tbuf *b) {   /* {'EXIT', Pid, {badarg, Ref}} with a splice */
  static const uint8_t reason[] = { 131, 104, 2, 119, 6, 'b', 'a', 'd', 'a', 'r', 'g', 106 };
  lpvm_put_tuple(b, 3);
  lpvm_put_atom(b, "EXIT");
  lpvm_put_pid(b, 17 | UINT64_C(2) << 32);
  lpvm_put_term(b, reason, sizeof reason);
}

static const struct { const char *name; void (*build)(lpvm_tbuf *); } cases[] = {
#define C(n) { #n, e_##n }
  C(atom_abc), C(atom_empty), C(atom_quote), C(atom_utf8), C(atom_255), C(atom_long_utf8),
  C(ints), C(int64_min), C(int_2_31), C(floats), C(float_nan), C(float_inf),
  C(bin_empty), C(bin_hi), C(bin_100k), C(tuple_0), C(tuple_300), C(nil), C(list_ab),
  C(list_improper), C(list_123), C(map_0), C(map_ab), C(map_patched), C(pid), C(pid_max),
  C(port), C(port_small), C(ref), C(ref_max), C(nested), C(exit_msg),
#undef C
};

static void print_hex(const uint8_t *p, size_t n) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    putchar(digits[p[i] >> 4]);
    putchar(digits[p[i] & 15]);
  }
}

static int encode_all(void) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    lpvm_tbuf b;
    lpvm_tbuf_init(&b);
    cases[i].build(&b);
    if (b.err) {
      fprintf(stderr, "term_dump: %s: builder error %d\n", cases[i].name, b.err);
      return 1;
    }
    printf("%s ", cases[i].name);
    print_hex(b.data, b.len);
    putchar('\n');
    lpvm_tbuf_free(&b);
  }
  return 0;
}

/* ---- decode ---------------------------------------------------------------------- */

/* Rebuild a term from what the getters return; -1 where lpvm has no value for it. */
static int transcode(lpvm_tread *r, lpvm_tbuf *b) {
  const char *a;
  const uint8_t *p;
  size_t n;
  int64_t i;
  double d;
  lpvm_id id;
  uint64_t ref;
  uint32_t k;
  uint64_t elems;
  switch (lpvm_get_type(r)) {
    case LPVM_T_ATOM: if (lpvm_get_atom(r, &a, &n)) return -1; lpvm_put_atom_len(b, a, n); return 0;
    case LPVM_T_INT: if (lpvm_get_int(r, &i)) return -1; lpvm_put_int(b, i); return 0;
    case LPVM_T_FLOAT: if (lpvm_get_float(r, &d)) return -1; lpvm_put_float(b, d); return 0;
    case LPVM_T_BINARY:
      if (lpvm_get_binary(r, &p, &n)) return -1;
      lpvm_put_binary(b, p, n);
      return 0;
    case LPVM_T_PID: case LPVM_T_PORT:
      if (lpvm_get_pid(r, &id)) return -1;
      lpvm_put_pid(b, id);
      return 0;
    case LPVM_T_REF: if (lpvm_get_ref(r, &ref)) return -1; lpvm_put_ref(b, ref); return 0;
    case LPVM_T_NIL: if (lpvm_get_nil(r)) return -1; lpvm_put_nil(b); return 0;
    case LPVM_T_STRING:
      if (lpvm_get_string(r, &p, &n)) return -1;
      lpvm_put_list(b, (uint32_t)n);
      for (size_t j = 0; j < n; j++) lpvm_put_int(b, p[j]);
      lpvm_put_nil(b);
      return 0;
    case LPVM_T_TUPLE:
      if (lpvm_get_tuple(r, &k)) return -1;
      lpvm_put_tuple(b, k);
      elems = k;
      break;
    case LPVM_T_LIST:
      if (lpvm_get_list(r, &k)) return -1;
      lpvm_put_list(b, k);
      elems = (uint64_t)k + 1;
      break;
    case LPVM_T_MAP:
      if (lpvm_get_map(r, &k)) return -1;
      lpvm_put_map(b, k);
      elems = 2 * (uint64_t)k;
      break;
    default:
      return -1;
  }
  for (uint64_t j = 0; j < elems; j++)
    if (transcode(r, b)) return -1;
  return 0;
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Decode hex in place; returns the byte count or -1. */
static long unhex(char *s, uint8_t *out) {
  size_t n = 0;
  for (; s[0] && s[0] != '\n'; s += 2) {
    int hi = hexval(s[0]), lo = s[1] ? hexval(s[1]) : -1;
    if (hi < 0 || lo < 0) return -1;
    out[n++] = (uint8_t)(hi << 4 | lo);
  }
  return (long)n;
}

static void decode_line(char *line) {
  char *sp = strchr(line, ' ');
  if (sp == NULL) return;
  *sp = '\0';
  uint8_t *t = malloc(strlen(sp + 1) / 2 + 1);
  long n = t ? unhex(sp + 1, t) : -1;
  if (n < 0) { printf("%s\t<bad hex>\t-\n", line); free(t); return; }
  size_t len = lpvm_term_format(t, (size_t)n, NULL, 0);
  char *text = malloc(len + 1);
  if (text == NULL) { free(t); return; }
  lpvm_term_format(t, (size_t)n, text, len + 1);
  printf("%s\t%s\t", line, text);
  lpvm_tread r;
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  if (lpvm_tread_init(&r, t, (size_t)n) == 0 && transcode(&r, &b) == 0 && r.p == r.end &&
      b.err == 0)
    print_hex(b.data, b.len);
  else
    putchar('-');
  putchar('\n');
  lpvm_tbuf_free(&b);
  free(text);
  free(t);
}

static int decode_all(void) {
  char *line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, stdin) > 0) decode_line(line);
  free(line);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "encode") == 0) return encode_all();
  if (argc == 2 && strcmp(argv[1], "decode") == 0) return decode_all();
  fprintf(stderr, "usage: term_dump encode | term_dump decode < lines\n");
  return 2;
}
