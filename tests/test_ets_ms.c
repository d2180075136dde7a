/*
** test_ets_ms.c -- match specifications through the ETS C API, in Erlang's own terms:
** what a body that fails at run time gives (tasks/ets_ms.c), and select in chunks
** (lpvm_ets_select_chunk, tasks/ets_select.c). The figures are erl's own answers.
*/
#include "lpvm/ets.h"
#include "testvm.h"

/* An ordered_set holding {1} and {a}. */
static lpvm_tab two_objects(void) {
  lpvm_ets_opts o = LPVM_ETS_OPTS_INIT;
  o.type = LPVM_ETS_ORDERED_SET;
  lpvm_tab t;
  cr_assert_eq(lpvm_ets_new(NULL, &o, &t), 0);
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_list(&b, 2);
  lpvm_put_tuple(&b, 1);
  lpvm_put_int(&b, 1);
  lpvm_put_tuple(&b, 1);
  lpvm_put_atom(&b, "a");
  lpvm_put_nil(&b);
  cr_assert_eq(lpvm_ets_insert(NULL, t, b.data, b.len), 0);
  lpvm_tbuf_free(&b);
  return t;
}

/* {'+', '$1', 1} */
static void plus1(lpvm_tbuf *b) {
  lpvm_put_tuple(b, 3);
  lpvm_put_atom(b, "+");
  lpvm_put_atom(b, "$1");
  lpvm_put_int(b, 1);
}

/* [{{'$1'}, Guards, [Body]}]: the clause's start; the caller writes the body and
** closes with close_ms. */
static void open_ms(lpvm_tbuf *b) {
  lpvm_tbuf_reset(b);
  lpvm_put_list(b, 1);
  lpvm_put_tuple(b, 3);
  lpvm_put_tuple(b, 1);
  lpvm_put_atom(b, "$1");
  lpvm_put_nil(b);         /* no guards */
  lpvm_put_list(b, 1);
}

static void close_ms(lpvm_tbuf *b) {
  lpvm_put_nil(b);
  lpvm_put_nil(b);
}

static void select_text(lpvm_tab t, const lpvm_tbuf *ms, int mode, char *text, size_t n,
                        int *rc) {
  lpvm_tbuf out;
  lpvm_tbuf_init(&out);
  *rc = lpvm_ets_select(NULL, t, ms->data, ms->len, mode, mode == LPVM_ETS_SELECT ? &out : NULL);
  if (mode == LPVM_ETS_SELECT) lpvm_term_format(out.data, out.len, text, n);
  lpvm_tbuf_free(&out);
}

Test(ets_ms, a_failed_call_in_a_body_is_EXIT) {
  vm_start_n(1, 1);
  lpvm_tab t = two_objects();
  lpvm_tbuf ms;
  lpvm_tbuf_init(&ms);
  char text[128];
  int rc;
  /* erl: ets:select(T, [{{'$1'}, [], [{'+', '$1', 1}]}]) -> [2,'EXIT'] */
  open_ms(&ms);
  plus1(&ms);
  close_ms(&ms);
  select_text(t, &ms, LPVM_ETS_SELECT, text, sizeof text, &rc);
  cr_assert_eq(rc, 2);
  cr_assert_str_eq(text, "[2,'EXIT']");
  /* [{{'$1', {'+', '$1', 1}}}] -> [{1,2},{a,'EXIT'}]: the failed call alone */
  open_ms(&ms);
  lpvm_put_tuple(&ms, 1);
  lpvm_put_tuple(&ms, 2);
  lpvm_put_atom(&ms, "$1");
  plus1(&ms);
  close_ms(&ms);
  select_text(t, &ms, LPVM_ETS_SELECT, text, sizeof text, &rc);
  cr_assert_str_eq(text, "[{1,2},{a,'EXIT'}]");
  /* [{abs, {'+', '$1', 1}}] -> [2,'EXIT']: a call on 'EXIT' fails in turn */
  open_ms(&ms);
  lpvm_put_tuple(&ms, 2);
  lpvm_put_atom(&ms, "abs");
  plus1(&ms);
  close_ms(&ms);
  select_text(t, &ms, LPVM_ETS_SELECT, text, sizeof text, &rc);
  cr_assert_str_eq(text, "[2,'EXIT']");
  /* [{'>', {'+', '$1', 1}, 0}] -> [true,true]: 'EXIT' compares as the atom */
  open_ms(&ms);
  lpvm_put_tuple(&ms, 3);
  lpvm_put_atom(&ms, ">");
  plus1(&ms);
  lpvm_put_int(&ms, 0);
  close_ms(&ms);
  select_text(t, &ms, LPVM_ETS_SELECT, text, sizeof text, &rc);
  cr_assert_str_eq(text, "[true,true]");
  /* select_count with [{'==', {'+', '$1', 1}, 'EXIT'}] -> 1 */
  open_ms(&ms);
  lpvm_put_tuple(&ms, 3);
  lpvm_put_atom(&ms, "==");
  plus1(&ms);
  lpvm_put_atom(&ms, "EXIT");
  close_ms(&ms);
  select_text(t, &ms, LPVM_ETS_SELECT_COUNT, text, sizeof text, &rc);
  cr_assert_eq(rc, 1);
  /* the same failure in a guard: the guard is false, the object skipped */
  lpvm_tbuf_reset(&ms);
  lpvm_put_list(&ms, 1);
  lpvm_put_tuple(&ms, 3);
  lpvm_put_tuple(&ms, 1);
  lpvm_put_atom(&ms, "$1");
  lpvm_put_list(&ms, 1);
  lpvm_put_tuple(&ms, 3);
  lpvm_put_atom(&ms, ">");
  plus1(&ms);
  lpvm_put_int(&ms, 0);
  lpvm_put_nil(&ms);
  lpvm_put_list(&ms, 1);
  lpvm_put_atom(&ms, "$1");
  close_ms(&ms);
  select_text(t, &ms, LPVM_ETS_SELECT, text, sizeof text, &rc);
  cr_assert_str_eq(text, "[1]");
  lpvm_tbuf_free(&ms);
  cr_assert_eq(lpvm_ets_delete(NULL, t), 0);
  vm_stop();
}

Test(ets_ms, select_in_chunks_from_c) {
  vm_start_n(1, 1);
  lpvm_ets_opts o = LPVM_ETS_OPTS_INIT;
  o.type = LPVM_ETS_ORDERED_SET;
  lpvm_tab t;
  cr_assert_eq(lpvm_ets_new(NULL, &o, &t), 0);
  lpvm_tbuf b, ms, out, next, after;
  lpvm_tbuf_init(&b);
  lpvm_tbuf_init(&ms);
  lpvm_tbuf_init(&out);
  lpvm_tbuf_init(&next);
  lpvm_tbuf_init(&after);
  for (int i = 1; i <= 5; i++) {
    lpvm_tbuf_reset(&b);
    lpvm_put_tuple(&b, 1);
    lpvm_put_int(&b, i);
    cr_assert_eq(lpvm_ets_insert(NULL, t, b.data, b.len), 0);
  }
  open_ms(&ms);
  lpvm_put_atom(&ms, "$1");
  close_ms(&ms);
  static const char *const want[] = {"[1,2]", "[3,4]", "[5]"};
  char text[64];
  int got = 0;
  const uint8_t *ap = NULL;
  size_t alen = 0;
  for (;;) {
    lpvm_tbuf_reset(&out);
    int n = lpvm_ets_select_chunk(NULL, t, ms.data, ms.len, 0, ap, alen, 2, &out, &next);
    cr_assert_geq(n, 0);
    if (n == 0) break;
    cr_assert_lt(got, 3);
    lpvm_term_format(out.data, out.len, text, sizeof text);
    cr_assert_str_eq(text, want[got]);
    got++;
    if (next.len == 0) break;   /* the end reached */
    lpvm_tbuf_reset(&after);
    after.len = 0;
    memcpy(lpvm_tbuf_room(&after, next.len), next.data, next.len);
    after.len = next.len;
    ap = after.data;
    alen = after.len;
  }
  cr_assert_eq(got, 3);
  /* backwards, all at once */
  lpvm_tbuf_reset(&out);
  cr_assert_eq(lpvm_ets_select_chunk(NULL, t, ms.data, ms.len, 1, NULL, 0, 100, &out, &next), 5);
  lpvm_term_format(out.data, out.len, text, sizeof text);
  cr_assert_str_eq(text, "[5,4,3,2,1]");
  cr_assert_eq(next.len, 0);
  cr_assert_eq(lpvm_ets_select_chunk(NULL, t, ms.data, ms.len, 0, NULL, 0, 0, &out, &next),
               LPVM_EINVAL);
  cr_assert_eq(lpvm_ets_delete(NULL, t), 0);
  lpvm_tbuf_reset(&out);
  cr_assert_eq(lpvm_ets_select_chunk(NULL, t, ms.data, ms.len, 0, NULL, 0, 2, &out, &next),
               LPVM_ETS_ENOTAB);
  lpvm_tbuf_free(&b);
  lpvm_tbuf_free(&ms);
  lpvm_tbuf_free(&out);
  lpvm_tbuf_free(&next);
  lpvm_tbuf_free(&after);
  vm_stop();
}

/* ---- chunks against writers ------------------------------------------------------- */

typedef struct churn {
  lpvm_tab tab;
  int64_t lo, hi;        /* the keys it inserts and deletes (about half present) */
  _Atomic int *stop;
} churn;

static void *churn_main(void *arg) {
  churn *c = arg;
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  for (int64_t k = c->lo; !atomic_load(c->stop); k = k + 1 < c->hi ? k + 1 : c->lo) {
    lpvm_tbuf_reset(&b);
    lpvm_put_tuple(&b, 2);
    lpvm_put_int(&b, k);
    lpvm_put_int(&b, 0);
    cr_assert_eq(lpvm_ets_insert(NULL, c->tab, b.data, b.len), 0);
    lpvm_tbuf_reset(&b);
    lpvm_put_int(&b, c->lo + (k - c->lo + (c->hi - c->lo) / 2) % (c->hi - c->lo));
    cr_assert_geq(lpvm_ets_delete_key(NULL, c->tab, b.data, b.len), 0);
  }
  lpvm_tbuf_free(&b);
  return NULL;
}

/* A walk by chunks of 7 while another thread inserts and deletes keys (a resize or
** many): every key present throughout is seen exactly once, and no key twice. */
static void chunks_against_writers(int type, int wc) {
  vm_start_n(2, 1);
  lpvm_ets_opts o = LPVM_ETS_OPTS_INIT;
  o.type = type;
  o.access = LPVM_ETS_PUBLIC;
  o.write_concurrency = wc;
  lpvm_tab t;
  cr_assert_eq(lpvm_ets_new(NULL, &o, &t), 0);
  enum { STABLE = 300 };
  lpvm_tbuf b, ms, out, next, after;
  lpvm_tbuf_init(&b);
  lpvm_tbuf_init(&ms);
  lpvm_tbuf_init(&out);
  lpvm_tbuf_init(&next);
  lpvm_tbuf_init(&after);
  for (int64_t k = 0; k < STABLE; k++) {
    lpvm_tbuf_reset(&b);
    lpvm_put_tuple(&b, 2);
    lpvm_put_int(&b, k);
    lpvm_put_int(&b, 1);
    cr_assert_eq(lpvm_ets_insert(NULL, t, b.data, b.len), 0);
  }
  /* [{{'$1', '_'}, [], ['$1']}] */
  lpvm_tbuf_reset(&ms);
  lpvm_put_list(&ms, 1);
  lpvm_put_tuple(&ms, 3);
  lpvm_put_tuple(&ms, 2); lpvm_put_atom(&ms, "$1"); lpvm_put_atom(&ms, "_");
  lpvm_put_nil(&ms);
  lpvm_put_list(&ms, 1); lpvm_put_atom(&ms, "$1"); lpvm_put_nil(&ms);
  lpvm_put_nil(&ms);
  _Atomic int stop = 0;
  churn c = {t, 100000, 100000 + 2000, &stop};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, churn_main, &c), 0);
  static unsigned char seen[100000 + 2000];
  int rounds = (int)test_scaled(200, 10);
  for (int r = 0; r < rounds; r++) {
    memset(seen, 0, sizeof seen);
    const uint8_t *ap = NULL;
    size_t alen = 0;
    for (;;) {
      lpvm_tbuf_reset(&out);
      int n = lpvm_ets_select_chunk(NULL, t, ms.data, ms.len, 0, ap, alen, 7, &out, &next);
      cr_assert_geq(n, 0);
      lpvm_tread rd;
      uint32_t len = 0;
      cr_assert_eq(lpvm_tread_init(&rd, out.data, out.len), 0);
      if (n > 0) cr_assert_eq(lpvm_get_list(&rd, &len), 0);
      cr_assert_eq((int)len, n);
      for (uint32_t i = 0; i < len; i++) {
        int64_t k;
        cr_assert_eq(lpvm_get_int(&rd, &k), 0);
        cr_assert(k >= 0 && k < (int64_t)sizeof seen);
        cr_assert_eq(seen[k], 0, "key %lld seen twice", (long long)k);
        seen[k] = 1;
      }
      if (n == 0 || next.len == 0) break;
      lpvm_tbuf_reset(&after);
      after.len = 0;
      memcpy(lpvm_tbuf_room(&after, next.len), next.data, next.len);
      after.len = next.len;
      ap = after.data;
      alen = after.len;
    }
    for (int k = 0; k < STABLE; k++) cr_assert_eq(seen[k], 1, "key %d missed", k);
  }
  atomic_store(&stop, 1);
  pthread_join(th, NULL);
  cr_assert_eq(lpvm_ets_delete(NULL, t), 0);
  lpvm_tbuf_free(&b);
  lpvm_tbuf_free(&ms);
  lpvm_tbuf_free(&out);
  lpvm_tbuf_free(&next);
  lpvm_tbuf_free(&after);
  vm_stop();
}

Test(ets_ms, stress_chunks_against_writers_set) { chunks_against_writers(LPVM_ETS_SET, 0); }
Test(ets_ms, stress_chunks_against_writers_set_wc) { chunks_against_writers(LPVM_ETS_SET, 1); }
Test(ets_ms, stress_chunks_against_writers_ordered_set) {
  chunks_against_writers(LPVM_ETS_ORDERED_SET, 0);
}
