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
