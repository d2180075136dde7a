/*
** test_term.c -- the term codec (tasks/term_*.c) against Erlang's external term format.
**
** The golden byte vectors below were produced once by a real erl (OTP 25, Debian 12)
** with term_to_binary(T, [{minor_version, 2}]), the default from OTP 26 on. Pids,
** ports and references were made in erl by binary_to_term of lpvm's form (node
** nonode@nohost, creation 1) and re-encoded by term_to_binary: erl writes them back
** byte for byte. tests/erl/term_check.sh repeats the comparison live when erl is
** installed.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/binary.h"
#include "lpvm/term.h"
#include "tasks/node.h"
#include "testutil.h"

/* ---- helpers --------------------------------------------------------------------- */

static const char *hex(const uint8_t *p, size_t n) {
  static char s[4096];
  size_t k = 0;
  for (size_t i = 0; i < n && k + 5 < sizeof s; i++)
    k += (size_t)snprintf(s + k, sizeof s - k, "%u,", p[i]);
  s[k] = '\0';
  return s;
}

static const char *fmt(const uint8_t *t, size_t n) {
  static char s[8192];
  lpvm_term_format(t, n, s, sizeof s);
  return s;
}

#define ASSERT_BYTES(b, g)                                                            \
  do {                                                                                \
    cr_assert_eq((b)->err, 0, "builder error %d", (b)->err);                          \
    cr_assert(((b)->len == sizeof(g) && memcmp((b)->data, (g), sizeof(g)) == 0),      \
              "encoded %s", hex((b)->data, (b)->len));                                \
  } while (0)

#define ASSERT_FMT(t, n, want)                                                        \
  cr_assert_str_eq(fmt((t), (n)), (want))

/* Read any term with the public getters and write it again with the putters: the
** result equals the input for everything lpvm itself emits. Recursion is fine in a
** test: the inputs here are shallow. STRING_EXT comes back as a list of integers. */
static int transcode(lpvm_tread *r, lpvm_tbuf *b) {
  const char *a;
  const uint8_t *p;
  size_t n;
  int64_t i;
  double d;
  lpvm_id id;
  uint64_t ref;
  uint32_t k;
  switch (lpvm_get_type(r)) {
    case LPVM_T_ATOM: if (lpvm_get_atom(r, &a, &n)) return -1; lpvm_put_atom_len(b, a, n); break;
    case LPVM_T_INT: if (lpvm_get_int(r, &i)) return -1; lpvm_put_int(b, i); break;
    case LPVM_T_FLOAT: if (lpvm_get_float(r, &d)) return -1; lpvm_put_float(b, d); break;
    case LPVM_T_BINARY: if (lpvm_get_binary(r, &p, &n)) return -1; lpvm_put_binary(b, p, n); break;
    case LPVM_T_PID: case LPVM_T_PORT:
      if (lpvm_get_pid(r, &id)) return -1;
      lpvm_put_pid(b, id);
      break;
    case LPVM_T_REF: if (lpvm_get_ref(r, &ref)) return -1; lpvm_put_ref(b, ref); break;
    case LPVM_T_NIL: if (lpvm_get_nil(r)) return -1; lpvm_put_nil(b); break;
    case LPVM_T_STRING:
      if (lpvm_get_string(r, &p, &n)) return -1;
      lpvm_put_list(b, (uint32_t)n);
      for (size_t j = 0; j < n; j++) lpvm_put_int(b, p[j]);
      lpvm_put_nil(b);
      break;
    case LPVM_T_TUPLE:
      if (lpvm_get_tuple(r, &k)) return -1;
      lpvm_put_tuple(b, k);
      for (uint32_t j = 0; j < k; j++) if (transcode(r, b)) return -1;
      break;
    case LPVM_T_LIST:
      if (lpvm_get_list(r, &k)) return -1;
      lpvm_put_list(b, k);
      for (uint64_t j = 0; j <= k; j++) if (transcode(r, b)) return -1;
      break;
    case LPVM_T_MAP:
      if (lpvm_get_map(r, &k)) return -1;
      lpvm_put_map(b, k);
      for (uint64_t j = 0; j < 2 * (uint64_t)k; j++) if (transcode(r, b)) return -1;
      break;
    default:
      return -1;
  }
  return 0;
}

/* Transcode a whole term; 0 if it read cleanly to the end and re-encoded. */
static int roundtrip(const uint8_t *t, size_t n, lpvm_tbuf *out) {
  lpvm_tread r;
  lpvm_tbuf_init(out);
  if (lpvm_tread_init(&r, t, n) || transcode(&r, out) || r.p != r.end) return -1;
  return out->err;
}

#define ASSERT_ROUNDTRIP(g)                                                           \
  do {                                                                                \
    lpvm_tbuf rt_;                                                                    \
    cr_assert_eq(roundtrip((g), sizeof(g), &rt_), 0, "decode %s", hex((g), sizeof(g))); \
    ASSERT_BYTES(&rt_, (g));                                                          \
    lpvm_tbuf_free(&rt_);                                                             \
  } while (0)

/* ---- golden vectors (erl, OTP 25, term_to_binary(T, [{minor_version, 2}])) ------- */

static const uint8_t g_atom_abc[] = {131,119,3,97,98,99};
static const uint8_t g_atom_empty[] = {131,119,0};
static const uint8_t g_atom_space[] = {131,119,11,104,101,108,108,111,32,119,111,114,108,100};
static const uint8_t g_atom_utf8[] = {131,119,2,195,169};   /* the atom é */
static const uint8_t g_int_0[] = {131,97,0};
static const uint8_t g_int_255[] = {131,97,255};
static const uint8_t g_int_256[] = {131,98,0,0,1,0};
static const uint8_t g_int_m1[] = {131,98,255,255,255,255};
static const uint8_t g_int32_min[] = {131,98,128,0,0,0};
static const uint8_t g_int32_max[] = {131,98,127,255,255,255};
static const uint8_t g_int32_max_p1[] = {131,110,4,0,0,0,0,128};
static const uint8_t g_int32_min_m1[] = {131,110,4,1,1,0,0,128};
static const uint8_t g_int64_min[] = {131,110,8,1,0,0,0,0,0,0,0,128};
static const uint8_t g_int64_max[] = {131,110,8,0,255,255,255,255,255,255,255,127};
static const uint8_t g_float_0[] = {131,70,0,0,0,0,0,0,0,0};
static const uint8_t g_float_m0[] = {131,70,128,0,0,0,0,0,0,0};
static const uint8_t g_float_1_5[] = {131,70,63,248,0,0,0,0,0,0};
static const uint8_t g_float_1e300[] = {131,70,126,55,228,60,136,0,117,156};
static const uint8_t g_float_0_1[] = {131,70,63,185,153,153,153,153,153,154};
static const uint8_t g_bin_empty[] = {131,109,0,0,0,0};
static const uint8_t g_bin_hi[] = {131,109,0,0,0,2,104,105};
static const uint8_t g_tuple_0[] = {131,104,0};
static const uint8_t g_tuple_a1[] = {131,104,2,119,1,97,97,1};
static const uint8_t g_nil[] = {131,106};
static const uint8_t g_list_ab[] = {131,108,0,0,0,2,119,1,97,119,1,98,106};
static const uint8_t g_list_improper[] = {131,108,0,0,0,1,119,1,97,119,1,98};
static const uint8_t g_map_0[] = {131,116,0,0,0,0};
static const uint8_t g_map_ab[] = {131,116,0,0,0,2,119,1,97,97,1,119,1,98,97,2};
/* <0.5.1> */
static const uint8_t g_pid[] = {131,88,119,13,110,111,110,111,100,101,64,110,111,104,111,115,
  116,0,0,0,5,0,0,0,1,0,0,0,1};
/* <0.4294967295.2147483647>: the widest slot and generation */
static const uint8_t g_pid_max[] = {131,88,119,13,110,111,110,111,100,101,64,110,111,104,111,
  115,116,255,255,255,255,63,255,255,255,0,0,0,1};
/* #Port<0.12884901895>: slot 7, generation 3 */
static const uint8_t g_port[] = {131,120,119,13,110,111,110,111,100,101,64,110,111,104,111,
  115,116,0,0,0,3,0,0,0,7,0,0,0,1};
/* #Ref<0.0.19088743.2309737967>: lpvm reference 0x0123456789abcdef */
static const uint8_t g_ref[] = {131,90,0,3,119,13,110,111,110,111,100,101,64,110,111,104,111,
  115,116,0,0,0,1,137,171,205,239,1,35,69,103,0,0,0,0};
/* {ok,[{a,<<"x">>},-7],#{k => [1.5]}} */
static const uint8_t g_nested[] = {131,104,3,119,2,111,107,108,0,0,0,2,104,2,119,1,97,109,0,
  0,0,1,120,98,255,255,255,249,106,116,0,0,0,1,119,1,107,108,0,0,0,1,70,63,248,0,0,0,0,0,
  0,106};

/* Forms lpvm only reads: erl's own output with older minor versions or defaults, and
** the pre-OTP-23 forms erl still accepts (checked with binary_to_term). */
static const uint8_t g_old_atom[] = {131,100,0,3,97,98,99};         /* OTP 25 default */
static const uint8_t g_old_small_atom[] = {131,115,3,97,98,99};
static const uint8_t g_old_float[] = {131,99,49,46,53,48,48,48,48,48,48,48,48,48,48,48,48,48,
  48,48,48,48,48,48,101,43,48,48,0,0,0,0,0};                        /* 1.5, minor_version 0 */
static const uint8_t g_old_pid[] = {131,103,100,0,13,110,111,110,111,100,101,64,110,111,104,
  111,115,116,0,0,0,5,0,0,0,1,1};                                  /* <0.5.1> */
static const uint8_t g_old_port[] = {131,102,100,0,13,110,111,110,111,100,101,64,110,111,104,
  111,115,116,0,0,0,9,1};                                          /* #Port<0.9> */
static const uint8_t g_new_port[] = {131,89,100,0,13,110,111,110,111,100,101,64,110,111,104,
  111,115,116,0,0,0,9,0,0,0,1};                                    /* #Port<0.9> */
static const uint8_t g_old_new_ref[] = {131,114,0,3,100,0,13,110,111,110,111,100,101,64,110,
  111,104,111,115,116,1,0,3,171,205,1,35,69,103,0,0,0,0};        /* #Ref<0.0.19088743.240589> */
static const uint8_t g_string_abc[] = {131,107,0,3,97,98,99};      /* "abc" */
static const uint8_t g_string_123[] = {131,107,0,3,1,2,3};          /* [1,2,3] */
static const uint8_t g_big_2_64[] = {131,110,9,0,0,0,0,0,0,0,0,0,1};
static const uint8_t g_big_m2_64[] = {131,110,9,1,0,0,0,0,0,0,0,0,1};
static const uint8_t g_erl_pid[] = {131,88,100,0,13,110,111,110,111,100,101,64,110,111,104,
  111,115,116,0,0,0,5,0,0,0,1,0,0,0,0};                            /* erl's own <0.5.1> */
static const uint8_t g_erl_ref[] = {131,90,0,3,100,0,13,110,111,110,111,100,101,64,110,111,
  104,111,115,116,0,0,0,0,0,0,0,3,0,0,0,2,0,0,0,1};                /* #Ref<0.1.2.3> */
static const uint8_t g_compressed[] = {131,80,0,0,0,126,120,156,203,97,96,96,144,75,97,96,76,
  28,8,156,5,0,216,29,24,41};                                      /* lists:duplicate(30, a) */
static const uint8_t g_export[] = {131,113,100,0,5,108,105,115,116,115,100,0,3,109,97,112,97,2};

/* ---- golden: integers, floats, atoms, binaries ----------------------------------- */

static const struct { int64_t v; const uint8_t *g; size_t n; } golden_ints[] = {
#define GI(v, g) { v, g, sizeof g }
  GI(0, g_int_0), GI(255, g_int_255), GI(256, g_int_256), GI(-1, g_int_m1),
  GI(INT32_MIN, g_int32_min), GI(INT32_MAX, g_int32_max),
  GI((int64_t)INT32_MAX + 1, g_int32_max_p1), GI((int64_t)INT32_MIN - 1, g_int32_min_m1),
  GI(INT64_MIN, g_int64_min), GI(INT64_MAX, g_int64_max),
#undef GI
};

Test(golden, integers) {
  for (size_t i = 0; i < sizeof golden_ints / sizeof *golden_ints; i++) {
    lpvm_tbuf b;
    lpvm_tread r;
    int64_t v;
    lpvm_tbuf_init(&b);
    lpvm_put_int(&b, golden_ints[i].v);
    cr_assert(b.len == golden_ints[i].n && !memcmp(b.data, golden_ints[i].g, b.len),
              "%lld encoded %s", (long long)golden_ints[i].v, hex(b.data, b.len));
    lpvm_tbuf_free(&b);
    cr_assert_eq(lpvm_tread_init(&r, golden_ints[i].g, golden_ints[i].n), 0);
    cr_assert_eq(lpvm_get_type(&r), LPVM_T_INT);
    cr_assert_eq(lpvm_get_int(&r, &v), 0);
    cr_assert_eq(v, golden_ints[i].v);
    cr_assert_eq(r.p, r.end);
  }
}

static const struct { double v; const uint8_t *g; } golden_floats[] = {
  { 0.0, g_float_0 }, { -0.0, g_float_m0 }, { 1.5, g_float_1_5 }, { 1e300, g_float_1e300 },
  { 0.1, g_float_0_1 },
};

Test(golden, floats) {
  for (size_t i = 0; i < sizeof golden_floats / sizeof *golden_floats; i++) {
    lpvm_tbuf b;
    lpvm_tread r;
    double v;
    lpvm_tbuf_init(&b);
    lpvm_put_float(&b, golden_floats[i].v);
    cr_assert(b.len == 10 && !memcmp(b.data, golden_floats[i].g, 10), "%g", golden_floats[i].v);
    lpvm_tbuf_free(&b);
    cr_assert_eq(lpvm_tread_init(&r, golden_floats[i].g, 10), 0);
    cr_assert_eq(lpvm_get_type(&r), LPVM_T_FLOAT);
    cr_assert_eq(lpvm_get_float(&r, &v), 0);
    cr_assert(memcmp(&v, &golden_floats[i].v, sizeof v) == 0, "%g", v);   /* -0.0 too */
  }
}

static void check_atom(const uint8_t *g, size_t n, const char *name) {
  lpvm_tbuf b;
  lpvm_tread r;
  const char *a;
  size_t len;
  lpvm_tbuf_init(&b);
  lpvm_put_atom(&b, name);
  cr_assert(b.len == n && !memcmp(b.data, g, n), "'%s' encoded %s", name, hex(b.data, b.len));
  lpvm_tbuf_free(&b);
  cr_assert_eq(lpvm_tread_init(&r, g, n), 0);
  cr_assert_eq(lpvm_get_type(&r), LPVM_T_ATOM);
  cr_assert_eq(lpvm_get_atom(&r, &a, &len), 0);
  cr_assert(len == strlen(name) && !memcmp(a, name, len));
  cr_assert_eq(lpvm_term_is_atom(g, n, name), 1);
}

Test(golden, atoms) {
  check_atom(g_atom_abc, sizeof g_atom_abc, "abc");
  check_atom(g_atom_empty, sizeof g_atom_empty, "");
  check_atom(g_atom_space, sizeof g_atom_space, "hello world");
  check_atom(g_atom_utf8, sizeof g_atom_utf8, "\xc3\xa9");
}

Test(golden, binaries) {
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_binary(&b, NULL, 0);
  ASSERT_BYTES(&b, g_bin_empty);
  lpvm_tbuf_free(&b);
  lpvm_tbuf_init(&b);
  lpvm_put_binary(&b, "hi", 2);
  ASSERT_BYTES(&b, g_bin_hi);
  lpvm_tbuf_free(&b);
  ASSERT_ROUNDTRIP(g_bin_empty);
  ASSERT_ROUNDTRIP(g_bin_hi);
}

/* ---- golden: pids, ports, references --------------------------------------------- */

static void check_id(const uint8_t *g, size_t n, lpvm_id id, int type) {
  lpvm_tbuf b;
  lpvm_tread r;
  lpvm_id got;
  lpvm_tbuf_init(&b);
  lpvm_put_pid(&b, id);
  cr_assert(b.len == n && !memcmp(b.data, g, n), "encoded %s", hex(b.data, b.len));
  lpvm_tbuf_free(&b);
  cr_assert_eq(lpvm_tread_init(&r, g, n), 0);
  cr_assert_eq(lpvm_get_type(&r), type);
  cr_assert_eq(lpvm_get_pid(&r, &got), 0);
  cr_assert_eq(got, id);
  cr_assert_eq(r.p, r.end);
}

Test(golden, pids_and_ports) {
  check_id(g_pid, sizeof g_pid, 5 | UINT64_C(1) << 32, LPVM_T_PID);
  check_id(g_pid_max, sizeof g_pid_max, UINT64_C(0x3fffffffffffffff), LPVM_T_PID);
  check_id(g_port, sizeof g_port, LPVM_ID_PORT_BIT | 7 | UINT64_C(3) << 32, LPVM_T_PORT);
}

/* lpvm_put_pid_at writes lpvm_put_pid's bytes for a local pid whose node atom fits 16
** bytes, and refuses (0, nothing written) every other id and a longer node name. */
static void pid_at_as_put_pid(lpvm_id id, int same) {
  uint8_t q[64];
  memset(q, 0xAA, sizeof q);
  size_t n = lpvm_put_pid_at(q, id);
  if (!same) {
    cr_assert_eq(n, 0, "id %llx taken", (unsigned long long)id);
    cr_assert_eq(q[0], 0xAA);
    return;
  }
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_pid(&b, id);
  cr_assert(n > 0 && n <= 29 && n == b.len - 1 && !memcmp(q, b.data + 1, n),
            "put_pid_at %s", hex(q, n));
  cr_assert_eq(q[n], 0xAA, "wrote past its bytes");
  lpvm_tbuf_free(&b);
}

Test(golden, pid_at) {
  const lpvm_id ids[] = {5 | UINT64_C(1) << 32, UINT64_C(0x3fffffffffffffff), 0, 123456};
  for (int named = 0; named < 3; named++) {
    if (named == 1) cr_assert_eq(node_set_self("ab@cd", 5, 9), 0);
    if (named == 2) cr_assert_eq(node_set_self("a_longer_name@host", 18, 9), 0);
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) pid_at_as_put_pid(ids[i], named < 2);
    pid_at_as_put_pid(LPVM_ID_PORT_BIT | 7 | UINT64_C(3) << 32, 0);
    pid_at_as_put_pid(LPVM_ID_REMOTE_BIT | 7, 0);
    pid_at_as_put_pid(LPVM_ID_REF_TAG | 7, 0);
  }
  uint8_t q[64];
  cr_assert_eq(node_set_self("ab@cd", 5, 9), 0);
  cr_assert_eq(lpvm_put_pid_at(q, 5), 1 + 7 + 12);
  cr_assert_eq(q[20 - 1], 9, "the creation");
  cr_assert_eq(node_set_self(NULL, 0, 0), 0);
  cr_assert_eq(lpvm_put_pid_at(q, 5), 1 + 15 + 12);
}

Test(golden, refs) {
  lpvm_tbuf b;
  lpvm_tread r;
  uint64_t ref;
  lpvm_tbuf_init(&b);
  lpvm_put_ref(&b, UINT64_C(0x0123456789abcdef));
  ASSERT_BYTES(&b, g_ref);
  lpvm_tbuf_free(&b);
  cr_assert_eq(lpvm_tread_init(&r, g_ref, sizeof g_ref), 0);
  cr_assert_eq(lpvm_get_type(&r), LPVM_T_REF);
  cr_assert_eq(lpvm_get_ref(&r, &ref), 0);
  cr_assert_eq(ref, UINT64_C(0x0123456789abcdef));
}

/* ---- golden: containers ---------------------------------------------------------- */

Test(golden, containers) {
  lpvm_tbuf b;
  lpvm_tbuf_init(&b); lpvm_put_tuple(&b, 0); ASSERT_BYTES(&b, g_tuple_0); lpvm_tbuf_free(&b);
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 2); lpvm_put_atom(&b, "a"); lpvm_put_int(&b, 1);
  ASSERT_BYTES(&b, g_tuple_a1);
  lpvm_tbuf_free(&b);
  lpvm_tbuf_init(&b); lpvm_put_list(&b, 0); lpvm_put_nil(&b); ASSERT_BYTES(&b, g_nil); lpvm_tbuf_free(&b);
  lpvm_tbuf_init(&b);
  lpvm_put_list(&b, 2); lpvm_put_atom(&b, "a"); lpvm_put_atom(&b, "b"); lpvm_put_nil(&b);
  ASSERT_BYTES(&b, g_list_ab);
  lpvm_tbuf_free(&b);
  lpvm_tbuf_init(&b);
  lpvm_put_list(&b, 1); lpvm_put_atom(&b, "a"); lpvm_put_atom(&b, "b");
  ASSERT_BYTES(&b, g_list_improper);
  lpvm_tbuf_free(&b);
  lpvm_tbuf_init(&b); lpvm_put_map(&b, 0); ASSERT_BYTES(&b, g_map_0); lpvm_tbuf_free(&b);
  lpvm_tbuf_init(&b);
  size_t mark = lpvm_put_map_open(&b);
  lpvm_put_atom(&b, "a"); lpvm_put_int(&b, 1);
  lpvm_put_atom(&b, "b"); lpvm_put_int(&b, 2);
  lpvm_patch_map(&b, mark, 2);
  ASSERT_BYTES(&b, g_map_ab);
  lpvm_tbuf_free(&b);
  /* {ok,[{a,<<"x">>},-7],#{k => [1.5]}} */
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 3); lpvm_put_atom(&b, "ok");
  lpvm_put_list(&b, 2);
  lpvm_put_tuple(&b, 2); lpvm_put_atom(&b, "a"); lpvm_put_binary(&b, "x", 1);
  lpvm_put_int(&b, -7); lpvm_put_nil(&b);
  lpvm_put_map(&b, 1); lpvm_put_atom(&b, "k");
  lpvm_put_list(&b, 1); lpvm_put_float(&b, 1.5); lpvm_put_nil(&b);
  ASSERT_BYTES(&b, g_nested);
  lpvm_tbuf_free(&b);
}

Test(golden, decode_back) {
  ASSERT_ROUNDTRIP(g_atom_abc); ASSERT_ROUNDTRIP(g_atom_utf8);
  ASSERT_ROUNDTRIP(g_int64_min); ASSERT_ROUNDTRIP(g_float_m0);
  ASSERT_ROUNDTRIP(g_tuple_0); ASSERT_ROUNDTRIP(g_tuple_a1); ASSERT_ROUNDTRIP(g_nil);
  ASSERT_ROUNDTRIP(g_list_ab); ASSERT_ROUNDTRIP(g_list_improper);
  ASSERT_ROUNDTRIP(g_map_0); ASSERT_ROUNDTRIP(g_map_ab);
  ASSERT_ROUNDTRIP(g_pid); ASSERT_ROUNDTRIP(g_pid_max); ASSERT_ROUNDTRIP(g_port);
  ASSERT_ROUNDTRIP(g_ref); ASSERT_ROUNDTRIP(g_nested);
}

Test(golden, large_tuple_and_long_atom) {
  lpvm_tbuf b;
  lpvm_tread r;
  uint32_t arity;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 256);
  for (int i = 1; i <= 256; i++) lpvm_put_int(&b, i);
  cr_assert_eq(b.data[1], 105);   /* LARGE_TUPLE_EXT, arity 256 */
  cr_assert_eq(b.data[2] << 24 | b.data[3] << 16 | b.data[4] << 8 | b.data[5], 256);
  cr_assert_eq(lpvm_tread_init(&r, b.data, b.len), 0);
  cr_assert_eq(lpvm_get_tuple(&r, &arity), 0);
  cr_assert_eq(arity, 256);
  lpvm_tbuf_free(&b);
  /* 200 x é: 200 characters in 400 bytes, so ATOM_UTF8_EXT with a 16-bit length */
  char name[401];
  for (int i = 0; i < 200; i++) { name[2 * i] = (char)0xc3; name[2 * i + 1] = (char)0xa9; }
  name[400] = '\0';
  lpvm_tbuf_init(&b);
  lpvm_put_atom(&b, name);
  cr_assert_eq(b.err, 0);
  cr_assert_eq(b.len, 4 + 400);
  cr_assert(b.data[1] == 118 && b.data[2] == 1 && b.data[3] == 144);
  cr_assert_eq(lpvm_term_is_atom(b.data, b.len, name), 1);
  lpvm_tbuf_free(&b);
}

/* ---- the old and alternative forms erl may send ---------------------------------- */

Test(decode, old_forms) {
  lpvm_tread r;
  size_t n;
  double d;
  lpvm_id id;
  uint64_t ref;
  const uint8_t *s;
  cr_assert_eq(lpvm_term_is_atom(g_old_atom, sizeof g_old_atom, "abc"), 1);
  cr_assert_eq(lpvm_term_is_atom(g_old_small_atom, sizeof g_old_small_atom, "abc"), 1);
  lpvm_tread_init(&r, g_old_float, sizeof g_old_float);
  cr_assert_eq(lpvm_get_type(&r), LPVM_T_FLOAT);
  cr_assert_eq(lpvm_get_float(&r, &d), 0);
  cr_assert(d == 1.5 && r.p == r.end);
  lpvm_tread_init(&r, g_old_pid, sizeof g_old_pid);
  cr_assert_eq(lpvm_get_pid(&r, &id), 0);
  cr_assert_eq(id, 5 | UINT64_C(1) << 32);
  lpvm_tread_init(&r, g_erl_pid, sizeof g_erl_pid);   /* creation 0: still ours */
  cr_assert_eq(lpvm_get_pid(&r, &id), 0);
  cr_assert_eq(id, 5 | UINT64_C(1) << 32);
  lpvm_tread_init(&r, g_old_port, sizeof g_old_port);
  cr_assert_eq(lpvm_get_type(&r), LPVM_T_PORT);
  cr_assert_eq(lpvm_get_pid(&r, &id), 0);
  cr_assert_eq(id, LPVM_ID_PORT_BIT | 9);
  lpvm_tread_init(&r, g_new_port, sizeof g_new_port);
  cr_assert_eq(lpvm_get_pid(&r, &id), 0);
  cr_assert_eq(id, LPVM_ID_PORT_BIT | 9);
  lpvm_tread_init(&r, g_old_new_ref, sizeof g_old_new_ref);
  cr_assert_eq(lpvm_get_ref(&r, &ref), 0);
  cr_assert_eq(ref, UINT64_C(0x012345670003abcd));
  lpvm_tread_init(&r, g_erl_ref, sizeof g_erl_ref);
  cr_assert_eq(lpvm_get_ref(&r, &ref), 0);   /* the two low words of erl's three */
  cr_assert_eq(ref, UINT64_C(0x0000000200000003));
  lpvm_tread_init(&r, g_string_abc, sizeof g_string_abc);
  cr_assert_eq(lpvm_get_type(&r), LPVM_T_STRING);
  cr_assert_eq(lpvm_get_list(&r, &(uint32_t){0}), LPVM_EBADTERM);
  cr_assert_eq(lpvm_get_string(&r, &s, &n), 0);
  cr_assert(n == 3 && !memcmp(s, "abc", 3));
}

Test(decode, bigints) {
  lpvm_tread r;
  int64_t v;
  lpvm_tread_init(&r, g_big_2_64, sizeof g_big_2_64);
  cr_assert_eq(lpvm_get_type(&r), LPVM_T_BIGINT);
  cr_assert_eq(lpvm_get_int(&r, &v), LPVM_EBADTERM);
  cr_assert_eq(lpvm_skip(&r), 0);
  cr_assert_eq(r.p, r.end);
  ASSERT_FMT(g_big_2_64, sizeof g_big_2_64, "18446744073709551616");
  ASSERT_FMT(g_big_m2_64, sizeof g_big_m2_64, "-18446744073709551616");
  /* 2^128 as LARGE_BIG_EXT; an unnormalised SMALL_BIG_EXT that fits */
  uint8_t big[7 + 17] = {131, 111, 0, 0, 0, 17, 0};
  big[7 + 16] = 1;
  ASSERT_FMT(big, sizeof big, "340282366920938463463374607431768211456");
  const uint8_t padded[] = {131, 110, 10, 1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  lpvm_tread_init(&r, padded, sizeof padded);
  cr_assert_eq(lpvm_get_type(&r), LPVM_T_INT);
  cr_assert_eq(lpvm_get_int(&r, &v), 0);
  cr_assert_eq(v, -5);
  const uint8_t too_big[] = {131, 110, 8, 0, 0, 0, 0, 0, 0, 0, 0, 128};   /* 2^63 */
  lpvm_tread_init(&r, too_big, sizeof too_big);
  cr_assert_eq(lpvm_get_type(&r), LPVM_T_BIGINT);
  cr_assert_eq(lpvm_get_int(&r, &v), LPVM_EBADTERM);
  ASSERT_FMT(too_big, sizeof too_big, "9223372036854775808");
}

Test(decode, other_kinds) {
  lpvm_tread r;
  lpvm_tread_init(&r, g_compressed, sizeof g_compressed);
  cr_assert_eq(lpvm_get_type(&r), LPVM_T_OTHER);
  cr_assert_eq(lpvm_skip(&r), LPVM_EBADTERM);
  cr_assert_eq(lpvm_term_check(g_compressed, sizeof g_compressed), LPVM_EBADTERM);
  lpvm_tread_init(&r, g_export, sizeof g_export);
  cr_assert_eq(lpvm_get_type(&r), LPVM_T_OTHER);
  cr_assert_eq(lpvm_term_check(g_export, sizeof g_export), 0);
  ASSERT_FMT(g_export, sizeof g_export, "fun lists:map/2");
}

Test(decode, funs_bitstrings_old_refs) {
  /* {Fun, Bits}: a NEW_FUN_EXT is skipped by its size, a bitstring by its length */
  const uint8_t t[] = {131, 104, 2, 112, 0, 0, 0, 6, 0xaa, 0xbb, 77, 0, 0, 0, 2, 3, 255, 224};
  lpvm_tread r;
  uint64_t ref;
  cr_assert_eq(lpvm_term_check(t, sizeof t), 0);
  ASSERT_FMT(t, sizeof t, "{#Fun<>,<<255,7:3>>}");
  const uint8_t bad_fun[] = {131, 112, 0, 0, 0, 3};   /* a size smaller than itself */
  cr_assert_eq(lpvm_term_check(bad_fun, sizeof bad_fun), LPVM_EBADTERM);
  /* REFERENCE_EXT, the one-word form: erl shows #Ref<0.240589> */
  const uint8_t old_ref[] = {131, 101, 100, 0, 13, 'n', 'o', 'n', 'o', 'd', 'e', '@', 'n', 'o',
                             'h', 'o', 's', 't', 0, 3, 0xab, 0xcd, 1};
  lpvm_tread_init(&r, old_ref, sizeof old_ref);
  cr_assert_eq(lpvm_get_type(&r), LPVM_T_REF);
  cr_assert_eq(lpvm_get_ref(&r, &ref), 0);
  cr_assert_eq(ref, 0x3abcd);
  ASSERT_FMT(old_ref, sizeof old_ref, "#Ref<0.240589>");
}

Test(decode, foreign_node_is_remote) {
  /* a pid of node a@b: a remote id that encodes back to the same bytes */
  const uint8_t p[] = {131, 88, 119, 3, 'a', '@', 'b', 0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0, 9};
  lpvm_tread r;
  lpvm_id id;
  lpvm_tread_init(&r, p, sizeof p);
  cr_assert_eq(lpvm_get_type(&r), LPVM_T_PID);
  cr_assert_eq(lpvm_get_pid(&r, &id), 0);
  cr_assert(lpvm_id_is_remote(id));
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_pid(&b, id);
  cr_assert(b.len == sizeof p && !memcmp(b.data, p, sizeof p), "%s", hex(b.data, b.len));
  lpvm_tbuf_free(&b);
  cr_assert_eq(lpvm_term_check(p, sizeof p), 0);
  ASSERT_FMT(p, sizeof p, "<a@b.5.1>");
  /* ... but an ID or Serial wider than 24 bits has no remote id */
  uint8_t w[sizeof p];
  memcpy(w, p, sizeof p);
  w[11] = 1;   /* Serial 2^24 + 1 */
  lpvm_tread_init(&r, w, sizeof w);
  cr_assert_eq(lpvm_get_pid(&r, &id), LPVM_EBADTERM);
  /* a local serial with bit 31 set has no lpvm_id either */
  uint8_t q[sizeof g_pid];
  memcpy(q, g_pid, sizeof q);
  q[21] = 0x80;
  lpvm_tread_init(&r, q, sizeof q);
  cr_assert_eq(lpvm_get_pid(&r, &id), LPVM_EBADTERM);
}

Test(decode, failed_get_consumes_nothing) {
  lpvm_tread r;
  const char *a;
  size_t n;
  lpvm_tread_init(&r, g_tuple_a1, sizeof g_tuple_a1);
  const uint8_t *p0 = r.p;
  cr_assert_eq(lpvm_get_atom(&r, &a, &n), LPVM_EBADTERM);
  cr_assert_eq(lpvm_get_int(&r, &(int64_t){0}), LPVM_EBADTERM);
  cr_assert_eq(lpvm_get_nil(&r), LPVM_EBADTERM);
  cr_assert_eq(lpvm_get_map(&r, &(uint32_t){0}), LPVM_EBADTERM);
  cr_assert_eq(lpvm_get_pid(&r, &(lpvm_id){0}), LPVM_EBADTERM);
  cr_assert_eq(r.p, p0);
  cr_assert_eq(lpvm_tread_init(&r, (const uint8_t *)"\x82\x61\x01", 3), LPVM_EBADTERM);
  cr_assert_eq(lpvm_get_type(&r), LPVM_EBADTERM);
  cr_assert_eq(lpvm_tread_init(&r, NULL, 0), LPVM_EBADTERM);
}

Test(decode, implausible_counts) {
  /* A tuple, list or map may not claim more elements than bytes remain. */
  const uint8_t t[] = {131, 105, 0xff, 0xff, 0xff, 0xff, 106, 106};
  const uint8_t l[] = {131, 108, 0, 0, 0, 2, 106, 106};   /* needs 3 terms after */
  const uint8_t m[] = {131, 116, 0, 0, 0, 1, 106};
  lpvm_tread r;
  uint32_t n;
  lpvm_tread_init(&r, t, sizeof t);
  cr_assert_eq(lpvm_get_tuple(&r, &n), LPVM_EBADTERM);
  cr_assert_eq(lpvm_skip(&r), LPVM_EBADTERM);
  lpvm_tread_init(&r, l, sizeof l);
  cr_assert_eq(lpvm_get_list(&r, &n), LPVM_EBADTERM);
  lpvm_tread_init(&r, m, sizeof m);
  cr_assert_eq(lpvm_get_map(&r, &n), LPVM_EBADTERM);
}

/* A reader that sizes a table by every count it reads (as the Lua decoder does): the
** counts it is given add up to at most the input's length. */
static uint64_t claimed_by_reader(const uint8_t *t, size_t len) {
  lpvm_tread r;
  uint64_t sum = 0, todo = 1;
  uint32_t n;
  if (lpvm_tread_init(&r, t, len)) return 0;
  while (todo > 0) {
    todo--;
    int ty = lpvm_get_type(&r);
    if (ty == LPVM_T_TUPLE && lpvm_get_tuple(&r, &n) == 0) sum += n, todo += n;
    else if (ty == LPVM_T_LIST && lpvm_get_list(&r, &n) == 0) sum += n, todo += n + 1;
    else if (ty == LPVM_T_MAP && lpvm_get_map(&r, &n) == 0) sum += 2 * (uint64_t)n, todo += 2 * (uint64_t)n;
    else if (ty < 0 || lpvm_skip(&r) != 0) break;
  }
  return sum;
}

Test(decode, nested_headers_cannot_claim_the_same_bytes_twice) {
  /* issue 10, item 7: 199 nested LARGE_TUPLE headers in 64 KB, each claiming every
  ** byte after it, made the Lua decoder allocate 197 MB (4 MB of input: 12.7 GB) */
  size_t len = 65536, depth = 199;
  uint8_t *t = calloc(1, len);
  t[0] = 131;
  size_t at = 1;
  for (size_t i = 0; i < depth; i++, at += 5) {
    uint32_t claim = (uint32_t)(len - at - 5);
    t[at] = 105;
    t[at + 1] = (uint8_t)(claim >> 24), t[at + 2] = (uint8_t)(claim >> 16);
    t[at + 3] = (uint8_t)(claim >> 8), t[at + 4] = (uint8_t)claim;
  }
  for (; at < len; at++) t[at] = 106;   /* NIL fillers: one byte per element */
  uint64_t sum = claimed_by_reader(t, len);
  cr_assert(sum <= len, "the reader was promised %llu elements by %zu bytes",
            (unsigned long long)sum, len);
  lpvm_tread r;
  uint32_t n;
  lpvm_tread_init(&r, t, len);
  cr_assert_eq(lpvm_get_tuple(&r, &n), 0, "the outer header alone is plausible");
  cr_assert_eq(lpvm_get_tuple(&r, &n), LPVM_EBADTERM, "the next one overclaims");
  cr_assert_eq(lpvm_term_check(t, len), LPVM_EBADTERM);
  /* a real nested term of the same shape still reads, counts and all */
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  for (size_t i = 0; i < depth; i++) lpvm_put_tuple(&b, 2), lpvm_put_nil(&b);
  lpvm_put_nil(&b);
  cr_assert_eq(lpvm_term_check(b.data, b.len), 0);
  cr_assert_eq(claimed_by_reader(b.data, b.len), 2 * depth);
  lpvm_tbuf_free(&b);
  free(t);
}

Test(decode, a_string_cannot_take_the_bytes_its_containers_owe) {
  /* make fuzz found it: #{3 => #{"x" * 120 => ...}, ...} claiming 51 pairs in 199
  ** bytes; the string took 123 of the bytes the 100 terms still owed needed */
  uint8_t t[199];
  const uint8_t head[] = {131, 116, 0, 0, 0, 51, 97, 3, 116, 0, 0, 0, 1, 107, 0, 120};
  memcpy(t, head, sizeof head);
  memset(t + sizeof head, 'x', sizeof t - sizeof head);
  lpvm_tread r;
  uint32_t n;
  const uint8_t *s;
  size_t len;
  int64_t i;
  lpvm_tread_init(&r, t, sizeof t);
  cr_assert_eq(lpvm_get_map(&r, &n), 0);
  cr_assert_eq(lpvm_get_int(&r, &i), 0);
  cr_assert_eq(lpvm_get_map(&r, &n), 0);
  const uint8_t *at = r.p;
  cr_assert_eq(lpvm_get_string(&r, &s, &len), LPVM_EBADTERM);
  cr_assert(r.p == at, "a failed get consumes nothing");
  cr_assert_eq(lpvm_term_check(t, sizeof t), LPVM_EBADTERM);
  /* the same string with nothing owed after it reads */
  const uint8_t two[] = {131, 104, 2, 107, 0, 3, 'x', 'y', 'z', 107, 0, 3, 'x', 'y', 'z'};
  lpvm_tread_init(&r, two, sizeof two);
  cr_assert_eq(lpvm_get_tuple(&r, &n), 0);
  cr_assert_eq(lpvm_get_string(&r, &s, &len), 0);
  cr_assert_eq(lpvm_get_string(&r, &s, &len), 0);
  cr_assert(len == 3 && r.p == r.end);
  /* a remote pid pays its owed term: {<a@b.5.1>, "xyz"} reads to the end */
  const uint8_t rp[] = {131, 104, 2, 88, 119, 3, 'a', '@', 'b', 0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0, 9,
                        107, 0, 3, 'x', 'y', 'z'};
  lpvm_id id;
  lpvm_tread_init(&r, rp, sizeof rp);
  cr_assert_eq(lpvm_get_tuple(&r, &n), 0);
  cr_assert_eq(lpvm_get_pid(&r, &id), 0);
  cr_assert_eq(lpvm_get_string(&r, &s, &len), 0);
  cr_assert(r.p == r.end);
}

/* ---- round trips ----------------------------------------------------------------- */

Test(roundtrip, integers) {
  static const int64_t v[] = {
    0, 1, 127, 128, 255, 256, 65535, 65536, -1, -128, -255, -256, INT32_MIN, INT32_MAX,
    (int64_t)INT32_MAX + 1, (int64_t)INT32_MIN - 1, INT64_C(1) << 40, -(INT64_C(1) << 40),
    INT64_MAX, INT64_MIN, INT64_MIN + 1, INT64_MAX - 1, (int64_t)UINT32_MAX };
  for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
    lpvm_tbuf b;
    lpvm_tread r;
    int64_t got;
    lpvm_tbuf_init(&b);
    lpvm_put_int(&b, v[i]);
    cr_assert_eq(lpvm_term_check(b.data, b.len), 0);
    lpvm_tread_init(&r, b.data, b.len);
    cr_assert_eq(lpvm_get_int(&r, &got), 0);
    cr_assert_eq(got, v[i]);
    lpvm_tbuf_free(&b);
  }
}

/* NaN and infinities go through unchanged between lpvm tasks (a Lua math.huge must
** survive a message), but Erlang has no such floats: erl's binary_to_term refuses them. */
Test(roundtrip, floats) {
  static const double v[] = { 0.0, -0.0, 1e300, -1e-300, 5e-324, 0.1, 1.7976931348623157e308,
                              NAN, INFINITY, -INFINITY };
  for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
    lpvm_tbuf b;
    lpvm_tread r;
    double got;
    lpvm_tbuf_init(&b);
    lpvm_put_float(&b, v[i]);
    lpvm_tread_init(&r, b.data, b.len);
    cr_assert_eq(lpvm_get_float(&r, &got), 0);
    cr_assert(memcmp(&got, &v[i], sizeof got) == 0, "%g", v[i]);
    lpvm_tbuf_free(&b);
  }
}

Test(roundtrip, megabyte_binary) {
  size_t n = 1 << 20;
  uint8_t *data = malloc(n);
  for (size_t i = 0; i < n; i++) data[i] = (uint8_t)(i * 131u + 7u);
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 2);
  lpvm_put_binary(&b, data, n);
  lpvm_put_binary(&b, "", 0);
  cr_assert_eq(b.err, 0);
  lpvm_tread r;
  const uint8_t *p;
  size_t len;
  uint32_t arity;
  lpvm_tread_init(&r, b.data, b.len);
  cr_assert_eq(lpvm_get_tuple(&r, &arity), 0);
  cr_assert_eq(lpvm_get_binary(&r, &p, &len), 0);
  cr_assert(len == n && memcmp(p, data, n) == 0);
  cr_assert_eq(lpvm_get_binary(&r, &p, &len), 0);
  cr_assert_eq(len, 0);
  cr_assert_eq(r.p, r.end);
  lpvm_tbuf_free(&b);
  free(data);
}

Test(roundtrip, nested_and_ids) {
  lpvm_tbuf b, out;
  lpvm_tbuf_init(&b);
  lpvm_put_map(&b, 3);
  lpvm_put_atom(&b, "list");
  lpvm_put_list(&b, 3);
  lpvm_put_tuple(&b, 0);
  lpvm_put_list(&b, 1); lpvm_put_map(&b, 0); lpvm_put_nil(&b);
  lpvm_put_pid(&b, 42 | UINT64_C(9) << 32);
  lpvm_put_nil(&b);
  lpvm_put_int(&b, INT64_MIN);
  lpvm_put_ref(&b, UINT64_MAX);
  lpvm_put_pid(&b, LPVM_ID_PORT_BIT | 3);
  lpvm_put_tuple(&b, 300);
  for (int i = 0; i < 300; i++) lpvm_put_float(&b, i / 7.0);
  cr_assert_eq(roundtrip(b.data, b.len, &out), 0);
  cr_assert(out.len == b.len && !memcmp(out.data, b.data, b.len));
  lpvm_tbuf_free(&out);
  lpvm_tbuf_free(&b);
}

/* ---- the builder ----------------------------------------------------------------- */

Test(builder, growth_and_message) {
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  uint32_t n = 100000;
  lpvm_put_list(&b, n);
  for (uint32_t i = 0; i < n; i++) lpvm_put_int(&b, (int64_t)i * 1000003);
  lpvm_put_nil(&b);
  cr_assert_eq(lpvm_term_check(b.data, b.len), 0);
  size_t len = b.len;
  uint8_t *copy = malloc(len);
  memcpy(copy, b.data, len);
  lpvm_msg *m = lpvm_tbuf_to_msg(&b);
  cr_assert_not_null(m);
  cr_assert_eq(lpvm_msg_len(m), len);
  cr_assert(memcmp(lpvm_msg_data(m), copy, len) == 0);
  cr_assert_null(b.data);
  lpvm_msg_free(m);
  /* an emptied builder starts a new term on its next put */
  lpvm_put_atom(&b, "ok");
  cr_assert_eq(lpvm_term_is_atom(b.data, b.len, "ok"), 1);
  lpvm_tbuf_free(&b);
  free(copy);
}

/* A long put into a block mostly empty (a message block sized for the last message, a
** fresh builder) takes a block of its size and copies only what was written; puts of
** every size after it, and a second long one, keep every byte. */
Test(builder, long_puts_keep_every_byte) {
  size_t big = 300000;
  uint8_t *s = malloc(big);
  cr_assert_not_null(s);
  for (size_t i = 0; i < big; i++) s[i] = (uint8_t)(i * 7 + (i >> 9));   /* zeros too */
  static const size_t hints[] = { 0, 64, 65536 };
  for (size_t h = 0; h < sizeof hints / sizeof *hints; h++) {
    lpvm_tbuf b;
    lpvm_msg_build(&b, hints[h]);
    lpvm_put_list(&b, 2005);
    lpvm_put_int(&b, 1);
    lpvm_put_binary(&b, s, 100000);           /* past twice the block: sized to it */
    for (int i = 0; i < 2000; i++) lpvm_put_int(&b, i);   /* fills the spare, then grows */
    lpvm_put_binary(&b, s + 1, big - 1);      /* a second long one */
    lpvm_put_binary(&b, s, 0);
    lpvm_put_binary(&b, s + 5, 17);
    lpvm_put_nil(&b);
    cr_assert_eq(b.err, 0);
    lpvm_msg *m = lpvm_msg_built(&b, NULL);
    cr_assert_not_null(m);
    const uint8_t *d = lpvm_msg_data(m);
    size_t len = lpvm_msg_len(m);
    cr_assert_eq(lpvm_term_check(d, len), 0, "hint %zu", hints[h]);
    /* the list: 131, 'l', 4 count bytes, 'a' 1, 'm' and the first binary */
    cr_assert_eq(d[6], 97);
    cr_assert_eq(d[8], 109);
    cr_assert(!memcmp(d + 13, s, 100000), "hint %zu: the first long put", hints[h]);
    const uint8_t *p = d + 13 + 100000;
    for (int i = 0; i < 2000; p += i < 256 ? 2 : 5, i++) cr_assert(*p == (i < 256 ? 97 : 98));
    cr_assert_eq(*p, 109);
    cr_assert(!memcmp(p + 5, s + 1, big - 1), "hint %zu: the second long put", hints[h]);
    p += 5 + big - 1;
    cr_assert(p[0] == 109 && p[4] == 0 && p[5] == 109 && p[9] == 17 && !memcmp(p + 10, s + 5, 17));
    cr_assert_eq((size_t)(p + 10 + 17 + 1 - d), len);
    lpvm_msg_free(m);
  }
  free(s);
}

Test(builder, reset_reuses_the_buffer) {
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_atom(&b, "first");
  uint8_t *data = b.data;
  lpvm_tbuf_reset(&b);
  lpvm_put_tuple(&b, 1); lpvm_put_int(&b, 2);
  cr_assert_eq(b.data, data);
  ASSERT_FMT(b.data, b.len, "{2}");
  lpvm_put_atom(&b, NULL);                   /* an error, then a reset clears it */
  cr_assert_eq(b.err, LPVM_EINVAL);
  lpvm_tbuf_reset(&b);
  cr_assert_eq(b.err, 0);
  lpvm_put_list(&b, 300);
  for (int i = 0; i < 300; i++) lpvm_put_binary(&b, "0123456789", 10);
  lpvm_put_nil(&b);
  cr_assert_eq(lpvm_term_check(b.data, b.len), 0);
  static uint8_t big[100000];
  lpvm_tbuf_reset(&b);
  lpvm_put_binary(&b, big, sizeof big);      /* grows past 64 KiB: reset lets it go */
  lpvm_tbuf_reset(&b);
  cr_assert(b.cap <= 65536 && b.len == 1 && b.err == 0);
  lpvm_put_atom(&b, "ok");
  cr_assert_eq(lpvm_term_is_atom(b.data, b.len, "ok"), 1);
  lpvm_tbuf_free(&b);
  lpvm_tbuf_reset(&b);                       /* a freed builder starts over too */
  lpvm_put_nil(&b);
  ASSERT_FMT(b.data, b.len, "[]");
  lpvm_tbuf_free(&b);
}

Test(builder, zeroed_builder_works) {
  lpvm_tbuf b = {0};
  lpvm_put_tuple(&b, 1);
  lpvm_put_int(&b, 7);
  ASSERT_FMT(b.data, b.len, "{7}");
  lpvm_tbuf_free(&b);
}

Test(builder, errors_are_sticky) {
  lpvm_tbuf b;
  char longname[300];
  memset(longname, 'a', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 2);
  lpvm_put_atom(&b, longname);              /* 299 characters: too long for an atom */
  cr_assert_eq(b.err, LPVM_EINVAL);
  size_t len = b.len;
  lpvm_put_int(&b, 1);
  lpvm_put_binary(&b, "abc", 3);
  cr_assert_eq(b.len, len);
  cr_assert_null(lpvm_tbuf_to_msg(&b));
  cr_assert_eq(b.err, LPVM_EINVAL);
  lpvm_tbuf_free(&b);

  lpvm_tbuf_init(&b);
  lpvm_put_atom_len(&b, "\xc3(", 2);        /* not UTF-8 */
  cr_assert_eq(b.err, LPVM_EINVAL);
  lpvm_tbuf_free(&b);
  lpvm_tbuf_init(&b);
  lpvm_put_atom_len(&b, "\xed\xa0\x80", 3); /* a surrogate */
  cr_assert_eq(b.err, LPVM_EINVAL);
  lpvm_tbuf_free(&b);
  lpvm_tbuf_init(&b);
  lpvm_put_atom(&b, NULL);
  cr_assert_eq(b.err, LPVM_EINVAL);
  lpvm_tbuf_free(&b);

  lpvm_tbuf_init(&b);
  lpvm_put_term(&b, g_compressed, sizeof g_compressed);
  cr_assert_eq(b.err, LPVM_EBADTERM);
  lpvm_tbuf_free(&b);
  lpvm_tbuf_init(&b);
  lpvm_patch_map(&b, 0, 1);                 /* mark 0 is the version byte, not a map */
  cr_assert_eq(b.err, LPVM_EINVAL);
  lpvm_tbuf_free(&b);
}

Test(builder, atom_limits) {
  char name[256];
  memset(name, 'x', 255);
  name[255] = '\0';
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_atom(&b, name);                  /* 255 characters: the longest atom */
  cr_assert_eq(b.err, 0);
  cr_assert_eq(lpvm_term_is_atom(b.data, b.len, name), 1);
  lpvm_tbuf_free(&b);
}

Test(builder, splice_term) {
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 3);
  lpvm_put_atom(&b, "ok");
  lpvm_put_list(&b, 1);
  lpvm_put_term(&b, g_tuple_a1, sizeof g_tuple_a1);
  lpvm_put_nil(&b);
  lpvm_put_term(&b, g_nested, sizeof g_nested);
  cr_assert_eq(b.err, 0);
  ASSERT_FMT(b.data, b.len, "{ok,[{a,1}],{ok,[{a,<<\"x\">>},-7],#{k => [1.5]}}}");
  lpvm_tbuf_free(&b);
}

/* ---- rendering ------------------------------------------------------------------- */

static const char *fmt_one(void (*build)(lpvm_tbuf *)) {
  static char s[1024];
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  build(&b);
  lpvm_term_format(b.data, b.len, s, sizeof s);
  lpvm_tbuf_free(&b);
  return s;
}

static void b_atoms(lpvm_tbuf *b) {
  lpvm_put_list(b, 8);
  lpvm_put_atom(b, "ok"); lpvm_put_atom(b, "Ok"); lpvm_put_atom(b, "a@b_C1");
  lpvm_put_atom(b, "end"); lpvm_put_atom(b, "it's"); lpvm_put_atom(b, "");
  lpvm_put_atom(b, "a\nb"); lpvm_put_atom(b, "_x");
  lpvm_put_nil(b);
}

static void b_floats(lpvm_tbuf *b) {
  static const double v[] = { 1.0, 100.0, 1000.0, 123456.0, 0.1, 0.0001, 0.00001, 1e300,
                              5e-324, 9007199254740992.0, 1234567890123456.0, -2.5, 1.23e-4 };
  size_t n = sizeof v / sizeof *v;
  lpvm_put_tuple(b, (uint32_t)n);
  for (size_t i = 0; i < n; i++) lpvm_put_float(b, v[i]);
}

static void b_binaries(lpvm_tbuf *b) {
  lpvm_put_tuple(b, 4);
  lpvm_put_binary(b, "", 0);
  lpvm_put_binary(b, "say \"hi\"\n", 9);
  lpvm_put_binary(b, "\x01\x02\xff", 3);
  lpvm_put_binary(b, "a\\b", 3);
}

static void b_ids(lpvm_tbuf *b) {
  lpvm_put_tuple(b, 3);
  lpvm_put_pid(b, 5 | UINT64_C(1) << 32);
  lpvm_put_pid(b, LPVM_ID_PORT_BIT | 7);
  lpvm_put_ref(b, 5);
}

static void b_nonfinite(lpvm_tbuf *b) {
  lpvm_put_list(b, 3);
  lpvm_put_float(b, NAN); lpvm_put_float(b, INFINITY); lpvm_put_float(b, -INFINITY);
  lpvm_put_nil(b);
}

Test(format, erlang_syntax) {
  ASSERT_FMT(g_nested, sizeof g_nested, "{ok,[{a,<<\"x\">>},-7],#{k => [1.5]}}");
  ASSERT_FMT(g_list_improper, sizeof g_list_improper, "[a|b]");
  ASSERT_FMT(g_map_ab, sizeof g_map_ab, "#{a => 1,b => 2}");
  ASSERT_FMT(g_map_0, sizeof g_map_0, "#{}");
  ASSERT_FMT(g_tuple_0, sizeof g_tuple_0, "{}");
  ASSERT_FMT(g_nil, sizeof g_nil, "[]");
  ASSERT_FMT(g_pid_max, sizeof g_pid_max, "<0.4294967295.1073741823>");
  ASSERT_FMT(g_port, sizeof g_port, "#Port<0.12884901895>");
  ASSERT_FMT(g_ref, sizeof g_ref, "#Ref<0.0.19088743.2309737967>");
  ASSERT_FMT(g_erl_ref, sizeof g_erl_ref, "#Ref<0.1.2.3>");
  ASSERT_FMT(g_string_abc, sizeof g_string_abc, "\"abc\"");
  ASSERT_FMT(g_string_123, sizeof g_string_123, "[1,2,3]");
  ASSERT_FMT(g_old_atom, sizeof g_old_atom, "abc");
  ASSERT_FMT(g_old_float, sizeof g_old_float, "1.5");
  ASSERT_FMT(g_atom_utf8, sizeof g_atom_utf8, "'\xc3\xa9'");
  ASSERT_FMT(g_int64_min, sizeof g_int64_min, "-9223372036854775808");
  cr_assert_str_eq(fmt_one(b_atoms), "[ok,'Ok',a@b_C1,'end','it\\'s','','a\\nb','_x']");
  /* the notation erl's io_lib picks, observed in erl */
  cr_assert_str_eq(fmt_one(b_floats), "{1.0,100.0,1.0e3,123456.0,0.1,0.0001,1.0e-5,1.0e300,"
                   "5.0e-324,9.007199254740992e15,1234567890123456.0,-2.5,1.23e-4}");
  cr_assert_str_eq(fmt_one(b_binaries), "{<<>>,<<\"say \\\"hi\\\"\\n\">>,<<1,2,255>>,<<\"a\\\\b\">>}");
  cr_assert_str_eq(fmt_one(b_ids), "{<0.5.1>,#Port<0.7>,#Ref<0.0.0.5>}");
  cr_assert_str_eq(fmt_one(b_nonfinite), "[nan,inf,-inf]");
}

Test(format, truncation) {
  char s[16];
  const char *full = "{ok,[{a,<<\"x\">>},-7],#{k => [1.5]}}";
  size_t n = lpvm_term_format(g_nested, sizeof g_nested, s, sizeof s);
  cr_assert_eq(n, strlen(full));
  cr_assert_str_eq(s, "{ok,[{a,<<\"x\">>");
  cr_assert_eq(lpvm_term_format(g_nested, sizeof g_nested, NULL, 0), strlen(full));
  s[0] = 'z';
  cr_assert_eq(lpvm_term_format(g_nested, sizeof g_nested, s, 1), strlen(full));
  cr_assert_eq(s[0], '\0');
  /* '\xc3\xa9' cut after the quote and one byte of the é: the é goes entirely */
  char u[3];
  lpvm_term_format(g_atom_utf8, sizeof g_atom_utf8, u, sizeof u);
  cr_assert_str_eq(u, "'");
  ASSERT_FMT(g_compressed, sizeof g_compressed, "<bad>");
  ASSERT_FMT(g_tuple_a1, sizeof g_tuple_a1 - 1, "{a,<bad>");
}

/* ---- hostile input --------------------------------------------------------------- */

/* Every valid term the tests know, plus one with everything in it. */
static const struct { const uint8_t *t; size_t n; } valid[] = {
#define V(g) { g, sizeof g }
  V(g_atom_abc), V(g_atom_empty), V(g_atom_utf8), V(g_int_256), V(g_int64_min), V(g_float_1e300),
  V(g_bin_hi), V(g_tuple_a1), V(g_nil), V(g_list_ab), V(g_list_improper), V(g_map_ab),
  V(g_pid), V(g_port), V(g_ref), V(g_nested), V(g_old_atom), V(g_old_small_atom),
  V(g_old_float), V(g_old_pid), V(g_old_port), V(g_new_port), V(g_old_new_ref),
  V(g_string_abc), V(g_big_2_64), V(g_erl_pid), V(g_erl_ref), V(g_export),
#undef V
};

static void build_everything(lpvm_tbuf *b) {
  lpvm_tbuf_init(b);
  lpvm_put_tuple(b, (uint32_t)(sizeof valid / sizeof *valid) + 1);
  for (size_t i = 0; i < sizeof valid / sizeof *valid; i++)
    lpvm_put_term(b, valid[i].t, valid[i].n);
  lpvm_put_map(b, 1);
  lpvm_put_binary(b, "key", 3);
  lpvm_put_list(b, 2); lpvm_put_int(b, -300); lpvm_put_float(b, 2.5); lpvm_put_nil(b);
}

/* Run every reader over t, in a buffer of exactly n bytes so ASan sees any overread. */
static int poke(const uint8_t *t, size_t n) {
  uint8_t *copy = malloc(n ? n : 1);
  memcpy(copy, t, n);
  lpvm_tread r;
  lpvm_tbuf out;
  char s[64];
  int check = lpvm_term_check(copy, n);
  if (lpvm_tread_init(&r, copy, n) == 0) (void)lpvm_skip(&r);
  lpvm_term_format(copy, n, s, sizeof s);
  int rt = roundtrip(copy, n, &out);
  lpvm_tbuf_free(&out);
  (void)lpvm_term_is_atom(copy, n, "ok");
  free(copy);
  return check == 0 ? 0 : rt == 0 ? 1 : 2;   /* 1: transcoded yet not well-formed */
}

Test(hostile, every_prefix_is_bad) {
  lpvm_tbuf all;
  build_everything(&all);
  cr_assert_eq(all.err, 0);
  cr_assert_eq(lpvm_term_check(all.data, all.len), 0);
  for (size_t i = 0; i < sizeof valid / sizeof *valid + 1; i++) {
    const uint8_t *t = i < sizeof valid / sizeof *valid ? valid[i].t : all.data;
    size_t n = i < sizeof valid / sizeof *valid ? valid[i].n : all.len;
    cr_assert_eq(lpvm_term_check(t, n), 0, "valid %zu", i);
    for (size_t k = 0; k < n; k++) {
      cr_assert_eq(poke(t, k), 2, "term %zu prefix %zu", i, k);
      char s[32];
      lpvm_term_format(t, k, s, sizeof s);
    }
  }
  lpvm_tbuf_free(&all);
}

Test(hostile, deep_nesting) {
  size_t depth = 100000;
  lpvm_tbuf b;
  lpvm_tread r;
  /* [[[...[]...]]] 100,000 deep, LIST_EXT each with a NIL tail */
  lpvm_tbuf_init(&b);
  for (size_t i = 0; i < depth; i++) lpvm_put_list(&b, 1);
  for (size_t i = 0; i <= depth; i++) lpvm_put_nil(&b);
  cr_assert_eq(lpvm_tread_init(&r, b.data, b.len), 0);
  cr_assert_eq(lpvm_skip(&r), 0);
  cr_assert_eq(r.p, r.end);
  cr_assert_eq(lpvm_term_check(b.data, b.len), 0);
  char s[512];
  size_t n = lpvm_term_format(b.data, b.len, s, sizeof s);
  cr_assert(n > 64 && strncmp(s, "[[[[", 4) == 0);
  cr_assert_not_null(strstr(s, "..."));
  lpvm_tbuf_free(&b);
  /* {{{...{}...}}} and #{k => #{k => ...}} */
  lpvm_tbuf_init(&b);
  for (size_t i = 0; i < depth; i++) lpvm_put_tuple(&b, 1);
  lpvm_put_tuple(&b, 0);
  cr_assert_eq(lpvm_term_check(b.data, b.len), 0);
  lpvm_tbuf_free(&b);
  lpvm_tbuf_init(&b);
  for (size_t i = 0; i < depth; i++) { lpvm_put_map(&b, 1); lpvm_put_atom(&b, "k"); }
  lpvm_put_nil(&b);
  cr_assert_eq(lpvm_term_check(b.data, b.len), 0);
  lpvm_term_format(b.data, b.len, s, sizeof s);
  lpvm_tbuf_free(&b);
  /* the same depth cut short: every level claims more than what is left */
  lpvm_tbuf_init(&b);
  for (size_t i = 0; i < depth; i++) lpvm_put_tuple(&b, 255);
  cr_assert_eq(lpvm_term_check(b.data, b.len), LPVM_EBADTERM);
  lpvm_tbuf_free(&b);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rng(void) {   /* xorshift64*: deterministic, so failures replay */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545f4914f6cdd1du;
}

static const uint8_t tags[] = { 70, 77, 80, 88, 89, 90, 97, 98, 99, 100, 101, 102, 103, 104,
                                105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116,
                                118, 119, 120 };

Test(hostile, random_garbage) {
  size_t iters = test_scaled(200000, 20000);
  uint8_t buf[64];
  for (size_t it = 0; it < iters; it++) {
    size_t n = 1 + rng() % sizeof buf;
    buf[0] = 131;
    for (size_t i = 1; i < n; i++) {
      uint64_t x = rng();
      switch (x % 4) {   /* tags, small counts and lengths, and noise */
        case 0: buf[i] = tags[(x >> 8) % sizeof tags]; break;
        case 1: buf[i] = (uint8_t)((x >> 8) % 4); break;
        case 2: buf[i] = 0; break;
        default: buf[i] = (uint8_t)(x >> 8); break;
      }
    }
    poke(buf, n);
  }
}

Test(hostile, mutated_terms) {
  lpvm_tbuf all;
  build_everything(&all);
  uint8_t *t = malloc(all.len);
  size_t iters = test_scaled(20000, 2000);
  for (size_t it = 0; it < iters; it++) {
    memcpy(t, all.data, all.len);
    int flips = 1 + (int)(rng() % 3);
    for (int f = 0; f < flips; f++) t[1 + rng() % (all.len - 1)] = (uint8_t)rng();
    poke(t, all.len);
    poke(t, 1 + rng() % all.len);
  }
  free(t);
  lpvm_tbuf_free(&all);
}

/* lpvm_term_too_deep counts as the Lua decoder: the term at 0, a container's elements
** one deeper, an improper list's tail not a level. */
static void nest_lists(lpvm_tbuf *b, int levels, int tuple_top) {
  lpvm_tbuf_init(b);
  if (tuple_top) lpvm_put_tuple(b, 1);
  for (int i = 0; i < levels; i++) lpvm_put_list(b, 1);
  lpvm_put_int(b, 7);
  for (int i = 0; i < levels; i++) lpvm_put_nil(b);
}

Test(term, too_deep_counts_as_the_decoder) {
  lpvm_tbuf b;
  nest_lists(&b, 200, 0);   /* the integer at 200 */
  cr_assert_eq(lpvm_term_too_deep(b.data, b.len, 200), 0);
  cr_assert_eq(lpvm_term_too_deep(b.data, b.len, 199), 1);
  lpvm_tbuf_free(&b);
  nest_lists(&b, 200, 1);   /* inside a tuple: at 201 */
  cr_assert_eq(lpvm_term_too_deep(b.data, b.len, 200), 1);
  cr_assert_eq(lpvm_term_too_deep(b.data, b.len, 201), 0);
  cr_assert_eq(lpvm_term_too_deep(b.data, b.len - 1, 300), 0, "malformed: not judged");
  cr_assert_eq(lpvm_term_too_deep(b.data, b.len, -1), 1);
  lpvm_tbuf_free(&b);
  nest_lists(&b, 3, 0);     /* short: one compare */
  cr_assert_eq(lpvm_term_too_deep(b.data, b.len, 200), 0);
  cr_assert_eq(lpvm_term_too_deep(b.data, b.len, 2), 1);
  lpvm_tbuf_free(&b);
}
