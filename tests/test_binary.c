/*
** test_binary.c -- shared binaries in messages (tasks/binary.c, lpvm/binary.h): the
** reference table, readers, the flat form that leaves the node, and the counts
** under threads (TSan runs this file too).
*/
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/binary.h"
#include "lpvm/term.h"
#include "testutil.h"

static size_t live(void) {
  size_t n;
  lpvm_bin_stats(&n, NULL);
  return n;
}

/* {Bin, Sub, ok, Bin} with the binaries shared; *plain gets the same term with the
** bytes in it (what erl's term_to_binary writes). */
static lpvm_msg *build(lpvm_bin *bin, lpvm_tbuf *plain) {
  lpvm_tbuf b;
  lpvm_binrefs refs = {0};
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 4);
  lpvm_put_bin(&b, &refs, bin, 0, lpvm_bin_len(bin));
  lpvm_put_bin(&b, &refs, bin, 2, 3);
  lpvm_put_atom(&b, "ok");
  lpvm_put_bin(&b, &refs, bin, 0, lpvm_bin_len(bin));
  cr_assert_eq(b.err, 0);
  lpvm_msg *m = lpvm_tbuf_to_msg_bins(&b, &refs);
  lpvm_binrefs_free(&refs);
  lpvm_tbuf_init(plain);
  const uint8_t *d = lpvm_bin_data(bin);
  lpvm_put_tuple(plain, 4);
  lpvm_put_binary(plain, d, lpvm_bin_len(bin));
  lpvm_put_binary(plain, d + 2, 3);
  lpvm_put_atom(plain, "ok");
  lpvm_put_binary(plain, d, lpvm_bin_len(bin));
  return m;
}

Test(binary, a_message_holds_a_reference_per_occurrence) {
  size_t base = live();
  lpvm_bin *bin = lpvm_bin_new("hello, world", 12);
  cr_assert_not_null(bin);
  cr_assert_eq(live(), base + 1);
  lpvm_tbuf plain;
  lpvm_msg *m = build(bin, &plain);
  cr_assert_not_null(m);
  uint32_t n;
  const lpvm_binref *v = lpvm_msg_bins(m, &n);
  cr_assert_eq(n, 3);
  cr_assert_eq(v[1].off, 2);
  cr_assert_eq(v[1].len, 3);
  /* the term holds 5 bytes per binary, not the bytes */
  cr_assert_eq(lpvm_msg_len(m), plain.len - 12 - 3 - 12);
  lpvm_bin_drop(bin);           /* the message's references keep it */
  cr_assert_eq(live(), base + 1);
  cr_assert_eq(memcmp(lpvm_bin_data(v[0].bin), "hello", 5), 0);
  lpvm_msg_free(m);
  cr_assert_eq(live(), base, "the last reference went with the message");
  lpvm_tbuf_free(&plain);
}

Test(binary, readers_get_the_shared_bytes_or_refuse_the_tag) {
  lpvm_bin *bin = lpvm_bin_new("abcdefgh", 8);
  lpvm_tbuf plain;
  lpvm_msg *m = build(bin, &plain);
  uint32_t n, arity;
  const lpvm_binref *v = lpvm_msg_bins(m, &n);
  lpvm_tread r;
  cr_assert_eq(lpvm_tread_init(&r, lpvm_msg_data(m), lpvm_msg_len(m)), 0);
  cr_assert_eq(lpvm_get_tuple(&r, &arity), 0);
  cr_assert_eq(arity, 4);
  cr_assert_eq(lpvm_get_type(&r), LPVM_T_OTHER, "plain readers do not know the tag");
  const uint8_t *p;
  size_t len;
  cr_assert_neq(lpvm_get_binary(&r, &p, &len), 0);
  lpvm_tread probe = r;
  cr_assert_neq(lpvm_skip(&probe), 0, "nor can they skip it");
  cr_assert_neq(lpvm_get_binref(&r, v, 0, &(lpvm_binref){0}), 0, "an empty table refuses");
  cr_assert_eq(lpvm_get_bytes(&r, v, n, &p, &len), 0);
  cr_assert_eq(p, lpvm_bin_data(bin), "no copy");
  cr_assert_eq(len, 8);
  lpvm_binref br;
  cr_assert_eq(lpvm_get_binref(&r, v, n, &br), 0);
  cr_assert_eq(br.bin, bin);
  cr_assert_eq(br.off, 2);
  cr_assert_eq(br.len, 3);
  const char *a;
  cr_assert_eq(lpvm_get_atom(&r, &a, &len), 0);
  cr_assert_eq(lpvm_get_bytes(&r, v, n, &p, &len), 0);
  cr_assert_eq(r.p, r.end);
  cr_assert_neq(lpvm_term_check(lpvm_msg_data(m), lpvm_msg_len(m)), 0);
  lpvm_msg_free(m);
  lpvm_bin_drop(bin);
  lpvm_tbuf_free(&plain);
}

Test(binary, an_index_past_the_table_is_refused) {
  lpvm_bin *bin = lpvm_bin_new("x", 1);
  lpvm_tbuf b;
  lpvm_binrefs refs = {0};
  lpvm_tbuf_init(&b);
  lpvm_put_bin(&b, &refs, bin, 0, 1);
  b.data[b.len - 1] = 1;   /* index 1 of a table of 1 */
  lpvm_msg *m = lpvm_tbuf_to_msg_bins(&b, &refs);
  uint32_t n;
  const lpvm_binref *v = lpvm_msg_bins(m, &n);
  lpvm_tread r;
  lpvm_tread_init(&r, lpvm_msg_data(m), lpvm_msg_len(m));
  lpvm_binref br;
  cr_assert_neq(lpvm_get_binref(&r, v, n, &br), 0);
  lpvm_msg_free(m);
  /* a range outside the binary is an error that sticks */
  lpvm_tbuf_init(&b);
  lpvm_put_bin(&b, &refs, bin, 1, 1);
  cr_assert_eq(b.err, LPVM_EINVAL);
  lpvm_put_atom(&b, "after");
  cr_assert_null(lpvm_tbuf_to_msg_bins(&b, &refs));
  lpvm_binrefs_free(&refs);
  lpvm_bin_drop(bin);
}

Test(binary, the_flat_form_is_what_erlang_writes) {
  size_t base = live();
  lpvm_bin *bin = lpvm_bin_new("0123456789", 10);
  lpvm_tbuf plain;
  lpvm_msg *m = build(bin, &plain);
  m->from = 42;
  cr_assert_eq(lpvm_msg_flat_len(m), plain.len);
  uint8_t *out = malloc(plain.len);
  lpvm_msg_flat_write(m, out);
  cr_assert_eq(memcmp(out, plain.data, plain.len), 0);
  free(out);
  lpvm_msg *f = lpvm_msg_flatten(m);   /* frees m */
  cr_assert_not_null(f);
  uint32_t n;
  cr_assert_null(lpvm_msg_bins(f, &n));
  cr_assert_eq(n, 0);
  cr_assert_eq(lpvm_msg_from(f), 42);
  cr_assert_eq(lpvm_msg_len(f), plain.len);
  cr_assert_eq(memcmp(lpvm_msg_data(f), plain.data, plain.len), 0);
  cr_assert_eq(lpvm_term_check(lpvm_msg_data(f), lpvm_msg_len(f)), 0);
  cr_assert_eq(lpvm_msg_flatten(f), f, "nothing to flatten: the same message");
  lpvm_msg_free(f);
  lpvm_bin_drop(bin);
  cr_assert_eq(live(), base);
  lpvm_tbuf_free(&plain);
}

Test(binary, bad_input_to_the_constructor) {
  cr_assert_null(lpvm_bin_new(NULL, 3));
  lpvm_bin *e = lpvm_bin_new(NULL, 0);
  cr_assert_not_null(e);
  cr_assert_eq(lpvm_bin_len(e), 0);
  lpvm_bin_drop(e);
  lpvm_bin_drop(NULL);
}

/* Threads build and free messages over the same binaries, keep and drop them: the
** counts must come back to the start, with no race TSan can see. */
#define THREADS 4
static lpvm_bin *shared_bins[8];

static void *churn(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  int rounds = (int)test_scaled(20000, 500);
  lpvm_msg *held[16] = {0};
  for (int i = 0; i < rounds; i++) {
    seed = seed * 1103515245u + 12345u;
    lpvm_bin *bin = shared_bins[(seed >> 16) % 8];
    lpvm_tbuf b;
    lpvm_binrefs refs = {0};
    lpvm_tbuf_init(&b);
    lpvm_put_list(&b, 2);
    lpvm_put_bin(&b, &refs, bin, 0, lpvm_bin_len(bin));
    lpvm_put_bin(&b, &refs, bin, 1, 1);
    lpvm_put_nil(&b);
    lpvm_msg *m = lpvm_tbuf_to_msg_bins(&b, &refs);
    lpvm_binrefs_free(&refs);
    cr_assert_not_null(m);
    int slot = (int)((seed >> 8) % 16);
    lpvm_msg_free(held[slot]);   /* another message released at a random time */
    held[slot] = m;
    if (i % 7 == 0) {
      lpvm_bin_keep(bin);
      lpvm_bin_drop(bin);
    }
  }
  for (int i = 0; i < 16; i++) lpvm_msg_free(held[i]);
  return NULL;
}

Test(binary, threads_share_and_release_binaries) {
  size_t base = live();
  for (int i = 0; i < 8; i++) {
    char data[64];
    memset(data, 'a' + i, sizeof data);
    shared_bins[i] = lpvm_bin_new(data, 8 + (size_t)i * 7);
  }
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++)
    pthread_create(&th[i], NULL, churn, (void *)(uintptr_t)(i + 1));
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  cr_assert_eq(live(), base + 8);
  for (int i = 0; i < 8; i++) lpvm_bin_drop(shared_bins[i]);
  cr_assert_eq(live(), base);
}

/* lpvm_msg_new_bin (lpvm.send(pid, b)'s message) is byte for byte what the builder
** makes of the binary alone, holds one reference, flattens to the binary's bytes;
** lpvm_msg_lone_bin finds it there and only there. */
Test(binary, a_lone_binary_message_is_the_builders) {
  size_t base = live();
  lpvm_bin *bin = lpvm_bin_new("abcdefgh", 8);
  lpvm_tbuf b;
  lpvm_binrefs refs = {0};
  lpvm_tbuf_init(&b);
  lpvm_put_bin(&b, &refs, bin, 2, 5);
  lpvm_msg *built = lpvm_tbuf_to_msg_bins(&b, &refs);
  lpvm_binrefs_free(&refs);
  lpvm_msg *m = lpvm_msg_new_bin(bin, 2, 5);
  cr_assert(built && m);
  cr_assert_eq(lpvm_msg_len(m), lpvm_msg_len(built));
  cr_assert_eq(memcmp(lpvm_msg_data(m), lpvm_msg_data(built), lpvm_msg_len(m)), 0);
  uint32_t n, nb;
  const lpvm_binref *v = lpvm_msg_bins(m, &n), *vb = lpvm_msg_bins(built, &nb);
  cr_assert_eq(n, 1);
  cr_assert_eq(nb, 1);
  cr_assert(v[0].bin == bin && v[0].off == 2 && v[0].len == 5 && v[0].pos == vb[0].pos);
  cr_assert_eq(lpvm_msg_lone_bin(m), v);
  cr_assert_eq(lpvm_msg_lone_bin(built), vb);
  lpvm_tbuf plain;
  lpvm_msg *tuple = build(bin, &plain);   /* {Bin, Sub, ok, Bin}: not a lone one */
  cr_assert_null(lpvm_msg_lone_bin(tuple));
  lpvm_msg_free(tuple);
  lpvm_tbuf_free(&plain);
  cr_assert_null(lpvm_msg_new_bin(bin, 4, 5), "a range past the end");
  cr_assert_null(lpvm_msg_new_bin(bin, 9, 0), "an offset past the end");
  cr_assert_null(lpvm_msg_bin_init(NULL, bin, 0, 8), "no block");
  /* in a block of the caller's: the same; its binaries dropped, it is a block only */
  void *block = malloc(lpvm_msg_bin_size());
  lpvm_msg *own = lpvm_msg_bin_init(block, bin, 0, 8);
  cr_assert_eq((void *)own, block);
  cr_assert_not_null(lpvm_msg_lone_bin(own));
  cr_assert_eq(live(), base + 1);
  lpvm_bin_keep(bin);
  lpvm_msg_drop_bins(own);
  cr_assert_null(lpvm_msg_bins(own, &n), "no table after the drop");
  lpvm_msg_drop_bins(own);   /* nothing more: the reference went once */
  lpvm_bin_drop(bin);
  cr_assert_eq(live(), base + 1, "bin's own reference is still there");
  lpvm_msg_free(own);
  lpvm_bin_drop(bin);
  lpvm_msg_free(built);
  cr_assert_eq(live(), base + 1, "the lone message holds its reference");
  lpvm_msg *f = lpvm_msg_flatten(m);   /* frees m: the last reference goes */
  cr_assert_not_null(f);
  cr_assert_eq(live(), base);
  cr_assert_null(lpvm_msg_lone_bin(f));
  lpvm_tread r;
  const uint8_t *p;
  size_t len;
  cr_assert_eq(lpvm_tread_init(&r, lpvm_msg_data(f), lpvm_msg_len(f)), 0);
  cr_assert_eq(lpvm_get_binary(&r, &p, &len), 0);
  cr_assert_eq(len, 5);
  cr_assert_eq(memcmp(p, "cdefg", 5), 0);
  lpvm_msg_free(f);
}
