/*
** test_ets.c -- the ETS C API (include/lpvm/ets.h) and its stress tests: threads
** inserting, deleting, counting and walking one table at once (run under TSan too).
*/
#include <stdatomic.h>

#include "lpvm/ets.h"
#include "testvm.h"

/* {Key, V} with an integer key, as a whole term in b. */
static void obj_ii(lpvm_tbuf *b, int64_t k, int64_t v) {
  lpvm_tbuf_reset(b);
  lpvm_put_tuple(b, 2);
  lpvm_put_int(b, k);
  lpvm_put_int(b, v);
}

static void int_term(lpvm_tbuf *b, int64_t k) {
  lpvm_tbuf_reset(b);
  lpvm_put_int(b, k);
}

static int64_t read_int(const lpvm_tbuf *b) {
  lpvm_tread r;
  int64_t v = -1;
  cr_assert_eq(lpvm_tread_init(&r, b->data, b->len), 0);
  cr_assert_eq(lpvm_get_int(&r, &v), 0);
  return v;
}

Test(ets, c_api_roundtrip) {
  vm_start_n(2, 1);
  lpvm_ets_opts o = LPVM_ETS_OPTS_INIT;
  o.name = "c";
  lpvm_tab t;
  cr_assert_eq(lpvm_ets_new(NULL, &o, &t), 0);
  lpvm_tbuf b, out;
  lpvm_tbuf_init(&b);
  lpvm_tbuf_init(&out);
  /* {"ab", 1} with the key as STRING_EXT (what erl writes for "ab") */
  lpvm_tbuf_reset(&b);
  lpvm_put_tuple(&b, 2);
  lpvm_tbuf k2;
  lpvm_tbuf_init(&k2);
  lpvm_put_term(&b, (const uint8_t[]){131, 107, 0, 2, 'a', 'b'}, 6);
  lpvm_put_int(&b, 1);
  cr_assert_eq(lpvm_ets_insert(NULL, t, b.data, b.len), 0);
  /* looked up as the LIST [97, 98]: the same term */
  lpvm_put_list(&k2, 2);
  lpvm_put_int(&k2, 'a');
  lpvm_put_int(&k2, 'b');
  lpvm_put_nil(&k2);
  cr_assert_eq(lpvm_ets_member(NULL, t, k2.data, k2.len), 1);
  cr_assert_eq(lpvm_ets_lookup(NULL, t, k2.data, k2.len, &out), 1);
  char text[64];
  lpvm_term_format(out.data, out.len, text, sizeof text);
  cr_assert_str_eq(text, "[{\"ab\",1}]");
  /* a key that is not a term, an object that is no tuple */
  cr_assert_eq(lpvm_ets_member(NULL, t, (const uint8_t *)"\x83\x61", 2), LPVM_EBADTERM);
  int_term(&b, 5);
  cr_assert_eq(lpvm_ets_insert(NULL, t, b.data, b.len), LPVM_ETS_EOBJECT);
  cr_assert_eq(lpvm_ets_delete(NULL, t), 0);
  cr_assert_eq(lpvm_ets_member(NULL, t, k2.data, k2.len), LPVM_ETS_ENOTAB);
  lpvm_tbuf_free(&b);
  lpvm_tbuf_free(&out);
  lpvm_tbuf_free(&k2);
  vm_stop();
}

/* ordered_set keys of every type come out in Erlang's term order. */
/* lookup_into: the objects as bytes in the caller's array, or ESPACE and nothing. */
Test(ets, lookup_into) {
  vm_start_n(2, 1);
  lpvm_ets_opts o = LPVM_ETS_OPTS_INIT;
  o.type = LPVM_ETS_BAG;
  lpvm_tab t;
  cr_assert_eq(lpvm_ets_new(NULL, &o, &t), 0);
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  obj_ii(&b, 7, 1);
  cr_assert_eq(lpvm_ets_insert(NULL, t, b.data, b.len), 0);
  obj_ii(&b, 7, 300);
  cr_assert_eq(lpvm_ets_insert(NULL, t, b.data, b.len), 0);
  int_term(&b, 7);
  uint8_t buf[64];
  size_t len = 99;
  cr_assert_eq(lpvm_ets_lookup_into(NULL, t, b.data, b.len, buf, sizeof buf, &len), 2);
  /* {7,1} {7,300}: SMALL_TUPLE 2, SMALL_INT 7, SMALL_INT 1; then INT 300 */
  const uint8_t want[] = {104, 2, 97, 7, 97, 1, 104, 2, 97, 7, 98, 0, 0, 1, 44};
  cr_assert_eq(len, sizeof want);
  cr_assert_eq(memcmp(buf, want, sizeof want), 0);
  cr_assert_eq(lpvm_ets_lookup_into(NULL, t, b.data, b.len, buf, 8, &len), LPVM_ETS_ESPACE);
  int_term(&b, 8);
  cr_assert_eq(lpvm_ets_lookup_into(NULL, t, b.data, b.len, buf, sizeof buf, &len), 0);
  cr_assert_eq(len, 0);
  cr_assert_eq(lpvm_ets_lookup_into(NULL, t, (const uint8_t *)"\x83\x61", 2, buf, sizeof buf,
                                    &len), LPVM_EBADTERM);
  cr_assert_eq(lpvm_ets_delete(NULL, t), 0);
  cr_assert_eq(lpvm_ets_lookup_into(NULL, t, b.data, b.len, buf, sizeof buf, &len),
               LPVM_ETS_ENOTAB);
  lpvm_tbuf_free(&b);
  vm_stop();
}

/* lookup_ints: an integer key's object of integers decoded into C integers; anything
** else ESPACE (the caller's cue to lookup_into), absent 0. */
Test(ets, lookup_ints) {
  vm_start_n(2, 1);
  lpvm_ets_opts o = LPVM_ETS_OPTS_INIT;
  o.read_concurrency = o.write_concurrency = 1;
  lpvm_tab t, bag, os;
  cr_assert_eq(lpvm_ets_new(NULL, &o, &t), 0);
  int64_t row[] = {8, 300, -5, -70000, 255, INT32_MIN, INT32_MAX};
  cr_assert_eq(lpvm_ets_insert_ints(NULL, t, row, 7), 0);
  int64_t kv[] = {7, 1};
  cr_assert_eq(lpvm_ets_insert_ints(NULL, t, kv, 2), 0);
  int64_t v[8] = {0};
  cr_assert_eq(lpvm_ets_lookup_ints(NULL, t, 7, v, 8), 2);
  cr_assert(v[0] == 7 && v[1] == 1);
  cr_assert_eq(lpvm_ets_lookup_ints(NULL, t, 8, v, 8), 7);
  for (int i = 0; i < 7; i++) cr_assert_eq(v[i], row[i]);
  cr_assert_eq(lpvm_ets_lookup_ints(NULL, t, 8, v, 6), LPVM_ETS_ESPACE);   /* 7 > cap */
  cr_assert_eq(lpvm_ets_lookup_ints(NULL, t, 9, v, 8), 0);
  cr_assert_eq(lpvm_ets_lookup_ints(NULL, t, 9, NULL, 0), 0);
  cr_assert_eq(lpvm_ets_lookup_ints(NULL, t, 7, NULL, 0), LPVM_ETS_ESPACE);
  cr_assert_eq(lpvm_ets_lookup_ints(NULL, t, 7, NULL, 2), LPVM_EINVAL);
  int64_t big[] = {10, INT64_C(1) << 40};   /* an element outside 32 bits */
  cr_assert_eq(lpvm_ets_insert_ints(NULL, t, big, 2), 0);
  cr_assert_eq(lpvm_ets_lookup_ints(NULL, t, 10, v, 8), LPVM_ETS_ESPACE);
  int64_t bigkey[] = {INT64_C(1) << 40, 1};
  cr_assert_eq(lpvm_ets_insert_ints(NULL, t, bigkey, 2), 0);
  cr_assert_eq(lpvm_ets_lookup_ints(NULL, t, INT64_C(1) << 40, v, 8), LPVM_ETS_ESPACE);
  lpvm_tbuf b;   /* {11, 1.5} and {12, <<"x">>} */
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 2);
  lpvm_put_int(&b, 11);
  lpvm_put_float(&b, 1.5);
  cr_assert_eq(lpvm_ets_insert(NULL, t, b.data, b.len), 0);
  lpvm_tbuf_reset(&b);
  lpvm_put_tuple(&b, 2);
  lpvm_put_int(&b, 12);
  lpvm_put_binary(&b, "x", 1);
  cr_assert_eq(lpvm_ets_insert(NULL, t, b.data, b.len), 0);
  cr_assert_eq(lpvm_ets_lookup_ints(NULL, t, 11, v, 8), LPVM_ETS_ESPACE);
  cr_assert_eq(lpvm_ets_lookup_ints(NULL, t, 12, v, 8), LPVM_ETS_ESPACE);
  /* a bag: one object is answered, two are ESPACE */
  lpvm_ets_opts ob = LPVM_ETS_OPTS_INIT;
  ob.type = LPVM_ETS_BAG;
  cr_assert_eq(lpvm_ets_new(NULL, &ob, &bag), 0);
  cr_assert_eq(lpvm_ets_insert_ints(NULL, bag, kv, 2), 0);
  cr_assert_eq(lpvm_ets_lookup_ints(NULL, bag, 7, v, 8), 2);
  int64_t kv2[] = {7, 2};
  cr_assert_eq(lpvm_ets_insert_ints(NULL, bag, kv2, 2), 0);
  cr_assert_eq(lpvm_ets_lookup_ints(NULL, bag, 7, v, 8), LPVM_ETS_ESPACE);
  /* an ordered_set finds {1.0, 5} by 1 (==): a float element, so ESPACE */
  lpvm_ets_opts oo = LPVM_ETS_OPTS_INIT;
  oo.type = LPVM_ETS_ORDERED_SET;
  cr_assert_eq(lpvm_ets_new(NULL, &oo, &os), 0);
  lpvm_tbuf_reset(&b);
  lpvm_put_tuple(&b, 2);
  lpvm_put_float(&b, 1.0);
  lpvm_put_int(&b, 5);
  cr_assert_eq(lpvm_ets_insert(NULL, os, b.data, b.len), 0);
  cr_assert_eq(lpvm_ets_lookup_ints(NULL, os, 1, v, 8), LPVM_ETS_ESPACE);
  int64_t kv3[] = {2, 6};
  cr_assert_eq(lpvm_ets_insert_ints(NULL, os, kv3, 2), 0);
  cr_assert_eq(lpvm_ets_lookup_ints(NULL, os, 2, v, 8), 2);
  cr_assert(v[0] == 2 && v[1] == 6);
  cr_assert_eq(lpvm_ets_delete(NULL, t), 0);
  cr_assert_eq(lpvm_ets_lookup_ints(NULL, t, 7, v, 8), LPVM_ETS_ENOTAB);
  cr_assert_eq(lpvm_ets_delete(NULL, bag), 0);
  cr_assert_eq(lpvm_ets_delete(NULL, os), 0);
  lpvm_tbuf_free(&b);
  vm_stop();
}

Test(ets, ordered_set_term_order) {
  vm_start_n(1, 1);
  lpvm_ets_opts o = LPVM_ETS_OPTS_INIT;
  o.type = LPVM_ETS_ORDERED_SET;
  lpvm_tab t;
  cr_assert_eq(lpvm_ets_new(NULL, &o, &t), 0);
  lpvm_tbuf b, out;
  lpvm_tbuf_init(&b);
  lpvm_tbuf_init(&out);
  /* inserted out of order: binary, list, nil, tuple, pid, ref, atom, float, int */
  for (int i = 8; i >= 0; i--) {
    lpvm_tbuf_reset(&b);
    lpvm_put_tuple(&b, 1);
    switch (i) {
      case 0: lpvm_put_int(&b, -5); break;
      case 1: lpvm_put_float(&b, 2.5); break;
      case 2: lpvm_put_atom(&b, "abc"); break;
      case 3: lpvm_put_ref(&b, 7); break;
      case 4: lpvm_put_pid(&b, 9); break;
      case 5: lpvm_put_tuple(&b, 0); break;
      case 6: lpvm_put_nil(&b); break;
      case 7: lpvm_put_list(&b, 1); lpvm_put_int(&b, 1); lpvm_put_nil(&b); break;
      default: lpvm_put_binary(&b, "z", 1); break;
    }
    cr_assert_eq(lpvm_ets_insert(NULL, t, b.data, b.len), 0);
  }
  lpvm_tbuf_reset(&out);
  cr_assert_eq(lpvm_ets_tab2list(NULL, t, &out), 9);
  char text[256];
  lpvm_term_format(out.data, out.len, text, sizeof text);
  cr_assert(strstr(text, "[{-5},{2.5},{abc},{#Ref<") == text, "%s", text);
  cr_assert(strstr(text, "{<0.9.0>},{{}},{[]},{[1]},{<<\"z\">>}]") != NULL, "%s", text);
  lpvm_tbuf_free(&b);
  lpvm_tbuf_free(&out);
  vm_stop();
}

/* The quick checks of small keys and flat objects (tasks/ets.c) agree with the general
** one, and one integer in its three encodings is one key (one hash). */
Test(ets, flat_terms_and_int_encodings) {
  vm_start_n(1, 1);
  lpvm_ets_opts o = LPVM_ETS_OPTS_INIT;
  lpvm_tab t;
  cr_assert_eq(lpvm_ets_new(NULL, &o, &t), 0);
  /* {5, 1} with the key as INTEGER_EXT (not the canonical SMALL_INTEGER_EXT) */
  const uint8_t obj[] = {131, 104, 2, 98, 0, 0, 0, 5, 97, 1};
  cr_assert_eq(lpvm_ets_insert(NULL, t, obj, sizeof obj), 0);
  const uint8_t small[] = {131, 97, 5}, big[] = {131, 110, 1, 0, 5};
  cr_assert_eq(lpvm_ets_member(NULL, t, small, sizeof small), 1);
  cr_assert_eq(lpvm_ets_member(NULL, t, big, sizeof big), 1);
  /* cut short, trailing bytes, a binary longer than the term: refused */
  const uint8_t cut[] = {131, 104, 2, 97, 5, 98, 0, 0};
  const uint8_t trail[] = {131, 104, 2, 97, 5, 97, 1, 97};
  const uint8_t longbin[] = {131, 104, 2, 97, 5, 109, 0, 0, 0, 9, 'x'};
  const uint8_t keytrail[] = {131, 97, 5, 97};
  cr_assert_eq(lpvm_ets_insert(NULL, t, cut, sizeof cut), LPVM_EBADTERM);
  cr_assert_eq(lpvm_ets_insert(NULL, t, trail, sizeof trail), LPVM_EBADTERM);
  cr_assert_eq(lpvm_ets_insert(NULL, t, longbin, sizeof longbin), LPVM_EBADTERM);
  cr_assert_eq(lpvm_ets_member(NULL, t, keytrail, sizeof keytrail), LPVM_EBADTERM);
  cr_assert_eq(lpvm_ets_member(NULL, t, (const uint8_t[]){131, 109, 0, 0, 0, 1}, 6),
               LPVM_EBADTERM);
  cr_assert_eq(lpvm_ets_delete(NULL, t), 0);
  vm_stop();
}

/* An insert over an object of the same size rewrites it in place: the new bytes (and a
** new key encoding, in an ordered_set) are what a lookup sees; size and memory stay. */
Test(ets, insert_in_place) {
  vm_start_n(1, 1);
  for (int type = LPVM_ETS_SET; type <= LPVM_ETS_ORDERED_SET; type++) {
    lpvm_ets_opts o = LPVM_ETS_OPTS_INIT;
    o.type = type;
    lpvm_tab t;
    cr_assert_eq(lpvm_ets_new(NULL, &o, &t), 0);
    lpvm_tbuf b, out;
    lpvm_tbuf_init(&b);
    lpvm_tbuf_init(&out);
    obj_ii(&b, 1000, 7000);
    cr_assert_eq(lpvm_ets_insert(NULL, t, b.data, b.len), 0);
    lpvm_ets_tabinfo before, after;
    cr_assert_eq(lpvm_ets_info(t, &before), 0);
    obj_ii(&b, 1000, 8000);
    cr_assert_eq(lpvm_ets_insert(NULL, t, b.data, b.len), 0);
    cr_assert_eq(lpvm_ets_info(t, &after), 0);
    cr_assert_eq(after.size, 1);
    cr_assert_eq(after.memory, before.memory);
    int_term(&b, 1000);
    cr_assert_eq(lpvm_ets_lookup_element(NULL, t, b.data, b.len, 2, &out), 0);
    cr_assert_eq(read_int(&out), 8000);
    char text[64];
    if (type == LPVM_ETS_ORDERED_SET) {   /* {1000.0, 1} is as long as {1000, 70000} */
      obj_ii(&b, 1000, 70000);
      cr_assert_eq(lpvm_ets_insert(NULL, t, b.data, b.len), 0);
      lpvm_tbuf_reset(&b);
      lpvm_put_tuple(&b, 2);
      lpvm_put_float(&b, 1000.0);
      lpvm_put_int(&b, 1);
      cr_assert_eq(lpvm_ets_insert(NULL, t, b.data, b.len), 0);
      lpvm_tbuf_reset(&out);
      cr_assert_eq(lpvm_ets_tab2list(NULL, t, &out), 1);
      lpvm_term_format(out.data, out.len, text, sizeof text);
      cr_assert_str_eq(text, "[{1.0e3,1}]");
    }
    obj_ii(&b, 1000, 1);   /* shorter: a new object */
    cr_assert_eq(lpvm_ets_insert(NULL, t, b.data, b.len), 0);
    lpvm_tbuf_reset(&out);
    cr_assert_eq(lpvm_ets_tab2list(NULL, t, &out), 1);
    lpvm_term_format(out.data, out.len, text, sizeof text);
    cr_assert_str_eq(text, "[{1000,1}]");
    cr_assert_eq(lpvm_ets_delete(NULL, t), 0);
    lpvm_tbuf_free(&b);
    lpvm_tbuf_free(&out);
  }
  vm_stop();
}

/* lpvm_ets_insert_ints writes what lpvm_ets_insert of the same tuple writes, in every
** kind of table and both ways (the fast path of a read_concurrency +
** write_concurrency set, in place or as a new object, and the term's way): after each
** insert the key's objects and the whole table read the same bytes from two tables fed
** the two ways. Integers at the edges of each encoding, arities 1 to 17 (past the
** fast path), keypos 2, and the errors: no elements, a key position past the tuple. */
Test(ets, insert_ints_as_insert) {
  vm_start_n(1, 1);
  static const int64_t edge[] = {0, 1, 255, 256, -1, 1000, 70000, INT32_MAX, INT32_MIN,
                                 (int64_t)INT32_MAX + 1, (int64_t)INT32_MIN - 1,
                                 INT64_MAX, INT64_MIN, 7};
  enum { NE = sizeof edge / sizeof edge[0] };
  lpvm_tbuf b, k, out1, out2;
  lpvm_tbuf_init(&b);
  lpvm_tbuf_init(&k);
  lpvm_tbuf_init(&out1);
  lpvm_tbuf_init(&out2);
  for (int type = LPVM_ETS_SET; type <= LPVM_ETS_DUPLICATE_BAG; type++)
    for (int conc = 0; conc < 4; conc++)
      for (uint32_t keypos = 1; keypos <= 2; keypos++) {
        lpvm_ets_opts o = LPVM_ETS_OPTS_INIT;
        o.type = type;
        o.keypos = keypos;
        o.write_concurrency = conc & 1;
        o.read_concurrency = conc >> 1;
        lpvm_tab t1, t2;
        cr_assert_eq(lpvm_ets_new(NULL, &o, &t1), 0);
        cr_assert_eq(lpvm_ets_new(NULL, &o, &t2), 0);
        for (int i = 0; i < 6 * NE; i++) {
          /* {key, value, ...}: a key from the edges, the rest varying in size so that
          ** some inserts fit the old object and some do not; each row twice, the
          ** second time with its values' low bits flipped (the same sizes: in place) */
          int64_t v[17];
          size_t n = 1 + (size_t)(i * 5) % 17;
          if (i % 3 == 0) n = 2;
          if (n == 1 && keypos == 2) n = 2;
          for (size_t j = 0; j < n; j++) v[j] = edge[(i + j * (size_t)(i % 3 + 1)) % NE];
          for (int again = 0; again < 2; again++) {
            for (size_t j = 0; again && j < n; j++)
              if (j != keypos - 1) v[j] ^= 1;
            lpvm_tbuf_reset(&b);
            lpvm_put_tuple(&b, (uint32_t)n);
            for (size_t j = 0; j < n; j++) lpvm_put_int(&b, v[j]);
            cr_assert_eq(lpvm_ets_insert(NULL, t1, b.data, b.len), 0);
            cr_assert_eq(lpvm_ets_insert_ints(NULL, t2, v, n), 0, "type %d conc %d n %zu",
                         type, conc, n);
            int_term(&k, v[keypos - 1]);
            lpvm_tbuf_reset(&out1);
            lpvm_tbuf_reset(&out2);
            cr_assert_eq(lpvm_ets_lookup(NULL, t1, k.data, k.len, &out1),
                         lpvm_ets_lookup(NULL, t2, k.data, k.len, &out2));
            cr_assert_eq(out1.len, out2.len);
            cr_assert(memcmp(out1.data, out2.data, out1.len) == 0, "the same bytes");
          }
        }
        lpvm_tbuf_reset(&out1);
        lpvm_tbuf_reset(&out2);
        cr_assert_eq(lpvm_ets_tab2list(NULL, t1, &out1), lpvm_ets_tab2list(NULL, t2, &out2));
        cr_assert_eq(out1.len, out2.len);
        cr_assert(memcmp(out1.data, out2.data, out1.len) == 0, "the same bytes");
        lpvm_ets_tabinfo i1, i2;
        cr_assert_eq(lpvm_ets_info(t1, &i1), 0);
        cr_assert_eq(lpvm_ets_info(t2, &i2), 0);
        cr_assert_eq(i1.size, i2.size);
        cr_assert_eq(i1.memory, i2.memory);
        int64_t one = 5;
        cr_assert_eq(lpvm_ets_insert_ints(NULL, t2, &one, 0), LPVM_ETS_EOBJECT);
        cr_assert_eq(lpvm_ets_insert_ints(NULL, t2, &one, 1),
                     keypos == 1 ? 0 : LPVM_ETS_EOBJECT);
        cr_assert_eq(lpvm_ets_delete(NULL, t1), 0);
        cr_assert_eq(lpvm_ets_delete(NULL, t2), 0);
        int64_t kv[2] = {1, 2};
        cr_assert_eq(lpvm_ets_insert_ints(NULL, t2, kv, 2), LPVM_ETS_ENOTAB);
      }
  lpvm_tbuf_free(&b);
  lpvm_tbuf_free(&k);
  lpvm_tbuf_free(&out1);
  lpvm_tbuf_free(&out2);
  vm_stop();
}

/* ---- stress ------------------------------------------------------------------------ */

typedef struct stress {
  lpvm_tab tab;
  int id, rounds;
  _Atomic int *stop;
  long walked;
} stress;

/* Insert and delete keys of its own range, bump a shared counter. */
static void *writer(void *arg) {
  stress *s = arg;
  lpvm_tbuf b, out;
  lpvm_tbuf_init(&b);
  lpvm_tbuf_init(&out);
  lpvm_ets_incr inc = {2, 1, 0, 0, 0};
  for (int i = 0; i < s->rounds; i++) {
    int64_t k = (int64_t)s->id * 1000000 + i;
    obj_ii(&b, k, i);
    cr_assert_eq(lpvm_ets_insert(NULL, s->tab, b.data, b.len), 0);
    int64_t res;
    int_term(&b, -1);
    cr_assert_eq(lpvm_ets_update_counter(NULL, s->tab, b.data, b.len, &inc, 1, NULL, 0,
                                         &res), 0);
    if (i % 2) {
      int_term(&b, k - 1);
      cr_assert_eq(lpvm_ets_delete_key(NULL, s->tab, b.data, b.len), 0);
    }
    int_term(&b, k);
    lpvm_tbuf_reset(&out);
    cr_assert_eq(lpvm_ets_lookup(NULL, s->tab, b.data, b.len, &out), 1);
    /* one shared key, rewritten in place by every writer (the same size each time):
    ** a reader sees one writer's whole value, never a mix of two */
    obj_ii(&b, -2, (int64_t)(s->id + 1) * 0x01010101);
    cr_assert_eq(lpvm_ets_insert(NULL, s->tab, b.data, b.len), 0);
    int_term(&b, -2);
    lpvm_tbuf_reset(&out);
    cr_assert_eq(lpvm_ets_lookup_element(NULL, s->tab, b.data, b.len, 2, &out), 0);
    int64_t v = read_int(&out);
    cr_assert(v % 0x01010101 == 0 && v >= 0x01010101 && v <= 3 * 0x01010101, "%lld",
              (long long)v);
  }
  lpvm_tbuf_free(&b);
  lpvm_tbuf_free(&out);
  return NULL;
}

/* Walk with first/next and select while the writers run. */
static void *walker(void *arg) {
  stress *s = arg;
  lpvm_tbuf key, out, ms;
  lpvm_tbuf_init(&key);
  lpvm_tbuf_init(&out);
  lpvm_tbuf_init(&ms);
  /* [{{'$1', '_'}, [{'<', '$1', 0}], ['$_']}]: the counter and the shared object */
  lpvm_put_list(&ms, 1);
  lpvm_put_tuple(&ms, 3);
  lpvm_put_tuple(&ms, 2); lpvm_put_atom(&ms, "$1"); lpvm_put_atom(&ms, "_");
  lpvm_put_list(&ms, 1);
  lpvm_put_tuple(&ms, 3); lpvm_put_atom(&ms, "<"); lpvm_put_atom(&ms, "$1"); lpvm_put_int(&ms, 0);
  lpvm_put_nil(&ms);
  lpvm_put_list(&ms, 1); lpvm_put_atom(&ms, "$_"); lpvm_put_nil(&ms);
  lpvm_put_nil(&ms);
  while (!atomic_load(s->stop)) {
    lpvm_tbuf_reset(&key);
    int more = lpvm_ets_first(NULL, s->tab, &key);
    while (more == 1) {
      s->walked++;
      lpvm_tbuf_reset(&out);
      more = lpvm_ets_next(NULL, s->tab, key.data, key.len, &out);
      lpvm_tbuf tmp = key;
      key = out;
      out = tmp;
    }
    cr_assert_eq(more, 0);
    lpvm_tbuf_reset(&out);
    cr_assert(lpvm_ets_select(NULL, s->tab, ms.data, ms.len, LPVM_ETS_SELECT, &out) <= 2);
  }
  lpvm_tbuf_free(&key);
  lpvm_tbuf_free(&out);
  lpvm_tbuf_free(&ms);
  return NULL;
}

static void run_stress(int type, int wc, int rc) {
  vm_start_n(2, 1);
  lpvm_ets_opts o = LPVM_ETS_OPTS_INIT;
  o.type = type;
  o.access = LPVM_ETS_PUBLIC;
  o.write_concurrency = wc;
  o.read_concurrency = rc;
  lpvm_tab t;
  cr_assert_eq(lpvm_ets_new(NULL, &o, &t), 0);
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  obj_ii(&b, -1, 0);
  cr_assert_eq(lpvm_ets_insert(NULL, t, b.data, b.len), 0);
  _Atomic int stop = 0;
  enum { W = 3 };
  int rounds = (int)test_scaled(20000, 500);
  stress s[W + 1];
  pthread_t th[W + 1];
  for (int i = 0; i <= W; i++) {
    s[i] = (stress){t, i, rounds, &stop, 0};
    pthread_create(&th[i], NULL, i < W ? writer : walker, &s[i]);
  }
  for (int i = 0; i < W; i++) pthread_join(th[i], NULL);
  atomic_store(&stop, 1);
  pthread_join(th[W], NULL);
  lpvm_tbuf out;
  lpvm_tbuf_init(&out);
  int_term(&b, -1);
  cr_assert_eq(lpvm_ets_lookup_element(NULL, t, b.data, b.len, 2, &out), 0);
  cr_assert_eq(read_int(&out), (int64_t)W * rounds);   /* no increment lost */
  lpvm_ets_tabinfo in;
  cr_assert_eq(lpvm_ets_info(t, &in), 0);
  cr_assert_eq(in.size, 2 + (size_t)W * (rounds - rounds / 2));   /* and -1, -2 */
  cr_assert_eq(lpvm_ets_delete(NULL, t), 0);
  lpvm_tbuf_free(&b);
  lpvm_tbuf_free(&out);
  vm_stop();
}

Test(ets, stress_set_write_concurrency) { run_stress(LPVM_ETS_SET, 1, 0); }
Test(ets, stress_set) { run_stress(LPVM_ETS_SET, 0, 0); }
Test(ets, stress_ordered_set) { run_stress(LPVM_ETS_ORDERED_SET, 0, 0); }
/* read_concurrency: the reader-group lock (tasks/ets_lock.c) */
Test(ets, stress_set_read_concurrency) { run_stress(LPVM_ETS_SET, 0, 1); }
Test(ets, stress_set_read_write_concurrency) { run_stress(LPVM_ETS_SET, 1, 1); }
Test(ets, stress_ordered_set_read_concurrency) { run_stress(LPVM_ETS_ORDERED_SET, 0, 1); }

/* Whole objects: readers look up a few keys while writers insert (in place and as new
** objects of another size; from a term and from integers, lpvm_ets_insert_ints), update
** all fields at once, delete, insert_new and take the same keys. Every object a reader
** gets is {K, V, V, V} with its own key: never half written, never a mix of two
** writes. */
enum { WHOLE_KEYS = 8 };

static void obj_kvvv(lpvm_tbuf *b, int64_t k, int64_t v) {
  lpvm_tbuf_reset(b);
  lpvm_put_tuple(b, 4);
  lpvm_put_int(b, k);
  for (int i = 0; i < 3; i++) lpvm_put_int(b, v);
}

/* One {K, V, V, V} at r: its key is k and its values agree. */
static void check_whole(lpvm_tread *r, int64_t k) {
  uint32_t arity;
  int64_t key, v[3];
  cr_assert_eq(lpvm_get_tuple(r, &arity), 0);
  cr_assert_eq(arity, 4);
  cr_assert_eq(lpvm_get_int(r, &key), 0);
  cr_assert_eq(key, k);
  for (int i = 0; i < 3; i++) cr_assert_eq(lpvm_get_int(r, &v[i]), 0);
  cr_assert(v[0] == v[1] && v[1] == v[2], "a mixed object {%lld, %lld, %lld, %lld}",
            (long long)k, (long long)v[0], (long long)v[1], (long long)v[2]);
}

/* A list result of n objects (lookup, take) holding none or one whole {K, V, V, V}. */
static void check_whole_list(const lpvm_tbuf *out, int n, int64_t k) {
  cr_assert(n == 0 || n == 1, "%d objects", n);
  if (n == 0) return;
  lpvm_tread r;
  uint32_t len;
  cr_assert_eq(lpvm_tread_init(&r, out->data, out->len), 0);
  cr_assert_eq(lpvm_get_list(&r, &len), 0);
  check_whole(&r, k);
}

static void *whole_writer(void *arg) {
  stress *s = arg;
  lpvm_tbuf b, key, vals, out;
  lpvm_tbuf_init(&b);
  lpvm_tbuf_init(&key);
  lpvm_tbuf_init(&vals);
  lpvm_tbuf_init(&out);
  static const uint32_t pos[3] = {2, 3, 4};
  for (int i = 0; i < s->rounds; i++) {
    int64_t k = (i * 7 + s->id) % WHOLE_KEYS;
    /* small (2 bytes), 32-bit (5) or 64-bit (bigger) values: in place or a new object */
    int64_t v = i % 3 == 0 ? i % 200 : i % 3 == 1 ? 100000 + i : (INT64_C(1) << 40) + i;
    int_term(&key, k);
    switch (i % 5) {
      case 0:
        obj_kvvv(&b, k, v);
        cr_assert_eq(lpvm_ets_insert(NULL, s->tab, b.data, b.len), 0);
        break;
      case 1: {   /* the same object from its integers (rewritten in place from them) */
        int64_t row[4] = {k, v, v, v};
        cr_assert_eq(lpvm_ets_insert_ints(NULL, s->tab, row, 4), 0);
        break;
      }
      case 2:
        lpvm_tbuf_reset(&vals);
        lpvm_put_list(&vals, 3);
        for (int j = 0; j < 3; j++) lpvm_put_int(&vals, v);
        lpvm_put_nil(&vals);
        cr_assert_geq(lpvm_ets_update_element(NULL, s->tab, key.data, key.len, pos, 3,
                                              vals.data, vals.len), 0);
        break;
      case 3:
        cr_assert_geq(lpvm_ets_delete_key(NULL, s->tab, key.data, key.len), 0);
        obj_kvvv(&b, k, v);
        cr_assert_geq(lpvm_ets_insert_new(NULL, s->tab, b.data, b.len), 0);
        break;
      default: {
        lpvm_tbuf_reset(&out);
        check_whole_list(&out, lpvm_ets_take(NULL, s->tab, key.data, key.len, &out), k);
      }
    }
  }
  lpvm_tbuf_free(&b);
  lpvm_tbuf_free(&key);
  lpvm_tbuf_free(&vals);
  lpvm_tbuf_free(&out);
  return NULL;
}

static void *whole_reader(void *arg) {
  stress *s = arg;
  lpvm_tbuf key, out;
  lpvm_tbuf_init(&key);
  lpvm_tbuf_init(&out);
  uint8_t buf[256];
  while (!atomic_load(s->stop)) {
    for (int64_t k = 0; k < WHOLE_KEYS; k++) {
      int_term(&key, k);
      size_t len;
      int n = lpvm_ets_lookup_into(NULL, s->tab, key.data, key.len, buf, sizeof buf, &len);
      cr_assert(n == 0 || n == 1, "lookup_into %d", n);
      lpvm_tread r = {buf, buf + len, 0};
      if (n == 1) check_whole(&r, k), s->walked++;
      lpvm_tbuf_reset(&out);   /* the builder's way too */
      check_whole_list(&out, lpvm_ets_lookup(NULL, s->tab, key.data, key.len, &out), k);
    }
  }
  lpvm_tbuf_free(&key);
  lpvm_tbuf_free(&out);
  return NULL;
}

static void run_whole(int wc, int rc) {
  vm_start_n(2, 1);
  lpvm_ets_opts o = LPVM_ETS_OPTS_INIT;
  o.access = LPVM_ETS_PUBLIC;
  o.write_concurrency = wc;
  o.read_concurrency = rc;
  lpvm_tab t;
  cr_assert_eq(lpvm_ets_new(NULL, &o, &t), 0);
  _Atomic int stop = 0;
  enum { W = 2, R = 2 };
  int rounds = (int)test_scaled(40000, 1000);
  stress s[W + R];
  pthread_t th[W + R];
  for (int i = 0; i < W + R; i++) {
    s[i] = (stress){t, i, rounds, &stop, 0};
    pthread_create(&th[i], NULL, i < W ? whole_writer : whole_reader, &s[i]);
  }
  for (int i = 0; i < W; i++) pthread_join(th[i], NULL);
  atomic_store(&stop, 1);
  for (int i = W; i < W + R; i++) pthread_join(th[i], NULL);
  cr_assert_eq(lpvm_ets_delete(NULL, t), 0);
  vm_stop();
}

Test(ets, stress_whole_objects_read_write_concurrency) { run_whole(1, 1); }
Test(ets, stress_whole_objects_write_concurrency) { run_whole(1, 0); }

/* Single-key operations on a read_concurrency + write_concurrency table enter by the
** key's stripe alone (tasks/ets_int.h, ets_fast_enter); whole-table writers wait them
** out. Two threads step a shared counter and insert, look up and delete keys of their
** own that way while a third inserts lists of objects and select_deletes them (each
** takes the table alone, and grows or shrinks the buckets). No step is lost, every
** object read is whole, and the list thread always finds exactly its own objects. */
enum { FAST_KEYS = 256, FAST_LIST = 200 };

static void *fast_keys(void *arg) {
  stress *s = arg;
  lpvm_tbuf b, key;
  lpvm_tbuf_init(&b);
  lpvm_tbuf_init(&key);
  lpvm_ets_incr inc = {2, 1, 0, 0, 0};
  uint8_t buf[256];
  for (int i = 0; !atomic_load(s->stop); i++, s->walked++) {   /* walked: the steps */
    int64_t k = (int64_t)s->id * FAST_KEYS + i % FAST_KEYS, res;
    int_term(&key, -1);
    cr_assert_eq(lpvm_ets_update_counter(NULL, s->tab, key.data, key.len, &inc, 1, NULL, 0,
                                         &res), 0);
    obj_kvvv(&b, k, i % 3 ? i : (INT64_C(1) << 40) + i);   /* in place, or a new object */
    cr_assert_eq(lpvm_ets_insert(NULL, s->tab, b.data, b.len), 0);
    int_term(&key, k);
    size_t len;
    int n = lpvm_ets_lookup_into(NULL, s->tab, key.data, key.len, buf, sizeof buf, &len);
    cr_assert_eq(n, 1);   /* only this thread writes k */
    lpvm_tread r = {buf, buf + len, 0};
    check_whole(&r, k);
    if (i % 4 == 3) cr_assert_eq(lpvm_ets_delete_key(NULL, s->tab, key.data, key.len), 0);
  }
  lpvm_tbuf_free(&b);
  lpvm_tbuf_free(&key);
  return NULL;
}

static void *fast_lists(void *arg) {
  stress *s = arg;
  lpvm_tbuf b, ms, out;
  lpvm_tbuf_init(&b);
  lpvm_tbuf_init(&ms);
  lpvm_tbuf_init(&out);
  /* [{{'$1', '_', '_', '_'}, [{'>=', '$1', 1000000}], [true]}]: the list objects */
  lpvm_put_list(&ms, 1);
  lpvm_put_tuple(&ms, 3);
  lpvm_put_tuple(&ms, 4); lpvm_put_atom(&ms, "$1");
  for (int j = 0; j < 3; j++) lpvm_put_atom(&ms, "_");
  lpvm_put_list(&ms, 1);
  lpvm_put_tuple(&ms, 3); lpvm_put_atom(&ms, ">="); lpvm_put_atom(&ms, "$1");
  lpvm_put_int(&ms, 1000000);
  lpvm_put_nil(&ms);
  lpvm_put_list(&ms, 1); lpvm_put_atom(&ms, "true"); lpvm_put_nil(&ms);
  lpvm_put_nil(&ms);
  for (int round = 0; round < s->rounds; round++) {
    lpvm_tbuf_reset(&b);
    lpvm_put_list(&b, FAST_LIST);
    for (int j = 0; j < FAST_LIST; j++) {
      lpvm_put_tuple(&b, 4);
      lpvm_put_int(&b, 1000000 + j);
      for (int v = 0; v < 3; v++) lpvm_put_int(&b, round);
    }
    lpvm_put_nil(&b);
    cr_assert_eq(lpvm_ets_insert(NULL, s->tab, b.data, b.len), 0);
    lpvm_tbuf_reset(&out);
    cr_assert_eq(lpvm_ets_select(NULL, s->tab, ms.data, ms.len, LPVM_ETS_SELECT_DELETE,
                                 &out), FAST_LIST);
  }
  lpvm_tbuf_free(&b);
  lpvm_tbuf_free(&ms);
  lpvm_tbuf_free(&out);
  return NULL;
}

Test(ets, stress_fast_path_against_whole_table_writers) {
  vm_start_n(2, 1);
  lpvm_ets_opts o = LPVM_ETS_OPTS_INIT;
  o.access = LPVM_ETS_PUBLIC;
  o.write_concurrency = 1;
  o.read_concurrency = 1;
  lpvm_tab t;
  cr_assert_eq(lpvm_ets_new(NULL, &o, &t), 0);
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  obj_ii(&b, -1, 0);
  cr_assert_eq(lpvm_ets_insert(NULL, t, b.data, b.len), 0);
  _Atomic int stop = 0;
  enum { K = 2 };
  stress s[K + 1];
  pthread_t th[K + 1];
  for (int i = 0; i <= K; i++) {   /* the key threads step until the lists are done */
    s[i] = (stress){t, i, (int)test_scaled(2000, 50), &stop, 0};
    pthread_create(&th[i], NULL, i < K ? fast_keys : fast_lists, &s[i]);
  }
  pthread_join(th[K], NULL);
  atomic_store(&stop, 1);
  for (int i = 0; i < K; i++) pthread_join(th[i], NULL);
  lpvm_tbuf out;
  lpvm_tbuf_init(&out);
  int_term(&b, -1);
  cr_assert_eq(lpvm_ets_lookup_element(NULL, t, b.data, b.len, 2, &out), 0);
  cr_assert_eq(read_int(&out), s[0].walked + s[1].walked);   /* no step lost */
  cr_assert_eq(lpvm_ets_delete(NULL, t), 0);
  lpvm_tbuf_free(&b);
  lpvm_tbuf_free(&out);
  vm_stop();
}

/* The fast way with stale ids: one thread makes and deletes a read_concurrency +
** write_concurrency table under one name (its slot reused, now and then by a table of
** another kind), two others use whatever the name finds. Each call either works on
** a live table or reports that there is none. */
static void *fast_churn_maker(void *arg) {
  stress *s = arg;
  lpvm_ets_opts o = LPVM_ETS_OPTS_INIT;
  o.access = LPVM_ETS_PUBLIC;
  o.named = 1;
  o.name = "fastchurn";
  for (int i = 0; i < s->rounds; i++) {
    o.write_concurrency = i % 4 != 3;
    o.read_concurrency = i % 8 != 5;
    lpvm_tab t;
    cr_assert_eq(lpvm_ets_new(NULL, &o, &t), 0);
    cr_assert_eq(lpvm_ets_delete(NULL, t), 0);
  }
  return NULL;
}

static void *fast_churn_user(void *arg) {
  stress *s = arg;
  lpvm_tbuf b, key, out;
  lpvm_tbuf_init(&b);
  lpvm_tbuf_init(&key);
  lpvm_tbuf_init(&out);
  lpvm_ets_incr inc = {2, 1, 0, 0, 0};
  while (!atomic_load(s->stop)) {
    lpvm_tab t = lpvm_ets_whereis("fastchurn");
    if (!t) continue;
    int64_t k = s->id, res;
    obj_kvvv(&b, k, 7);
    int rc = lpvm_ets_insert(NULL, t, b.data, b.len);
    cr_assert(rc == 0 || rc == LPVM_ETS_ENOTAB, "insert %d", rc);
    int_term(&key, k);
    rc = lpvm_ets_update_counter(NULL, t, key.data, key.len, &inc, 1, NULL, 0, &res);
    cr_assert(rc == 0 || rc == LPVM_ETS_ENOTAB || rc == LPVM_ETS_ENOKEY, "counter %d", rc);
    lpvm_tbuf_reset(&out);
    rc = lpvm_ets_lookup(NULL, t, key.data, key.len, &out);
    cr_assert(rc == 0 || rc == 1 || rc == LPVM_ETS_ENOTAB, "lookup %d", rc);
    s->walked++;
  }
  lpvm_tbuf_free(&b);
  lpvm_tbuf_free(&key);
  lpvm_tbuf_free(&out);
  return NULL;
}

Test(ets, stress_fast_path_stale_ids) {
  vm_start_n(1, 1);
  _Atomic int stop = 0;
  stress s[3];
  pthread_t th[3];
  for (int i = 0; i < 3; i++) {
    s[i] = (stress){0, i, (int)test_scaled(5000, 200), &stop, 0};
    pthread_create(&th[i], NULL, i == 0 ? fast_churn_maker : fast_churn_user, &s[i]);
  }
  pthread_join(th[0], NULL);
  atomic_store(&stop, 1);
  for (int i = 1; i < 3; i++) pthread_join(th[i], NULL);
  cr_assert_eq(lpvm_ets_whereis("fastchurn"), 0);
  vm_stop();
}

/* Tables made and deleted while other threads use them by id and by name. */
static void *churn(void *arg) {
  stress *s = arg;
  lpvm_ets_opts o = LPVM_ETS_OPTS_INIT;
  o.access = LPVM_ETS_PUBLIC;
  o.named = 1;
  o.name = "churn";
  o.write_concurrency = s->id & 1;
  o.read_concurrency = (s->id >> 1) & 1;   /* a slot changes lock kinds */
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  for (int i = 0; i < s->rounds; i++) {
    lpvm_tab t;
    int rc = lpvm_ets_new(NULL, &o, &t);
    if (rc == LPVM_EEXIST) t = lpvm_ets_whereis("churn");
    else cr_assert_eq(rc, 0);
    obj_ii(&b, i, i);
    rc = lpvm_ets_insert(NULL, t, b.data, b.len);
    cr_assert(rc == 0 || rc == LPVM_ETS_ENOTAB, "rc %d", rc);
    rc = lpvm_ets_delete(NULL, t);
    cr_assert(rc == 0 || rc == LPVM_ETS_ENOTAB, "rc %d", rc);
  }
  lpvm_tbuf_free(&b);
  return NULL;
}

Test(ets, stress_create_delete) {
  vm_start_n(1, 1);
  stress s[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    s[i] = (stress){0, i, (int)test_scaled(5000, 200), NULL, 0};
    pthread_create(&th[i], NULL, churn, &s[i]);
  }
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  cr_assert_eq(lpvm_ets_whereis("churn"), 0);
  cr_assert_eq(lpvm_ets_all(NULL, 0), 0);
  vm_stop();
}

/* A million objects (scaled), then the table deleted: LeakSanitizer sees it all go. */
Test(ets, big_table_frees_everything) {
  vm_start_n(1, 1);
  lpvm_ets_opts o = LPVM_ETS_OPTS_INIT;
  lpvm_tab t, u;
  cr_assert_eq(lpvm_ets_new(NULL, &o, &t), 0);
  o.type = LPVM_ETS_ORDERED_SET;
  cr_assert_eq(lpvm_ets_new(NULL, &o, &u), 0);
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  size_t n = test_scaled(1000000, 10000);
  for (size_t i = 0; i < n; i++) {
    obj_ii(&b, (int64_t)i, (int64_t)i);
    cr_assert_eq(lpvm_ets_insert(NULL, t, b.data, b.len), 0);
    if (i % 4 == 0) cr_assert_eq(lpvm_ets_insert(NULL, u, b.data, b.len), 0);
  }
  lpvm_ets_tabinfo in;
  cr_assert_eq(lpvm_ets_info(t, &in), 0);
  cr_assert_eq(in.size, n);
  cr_assert_eq(lpvm_ets_delete(NULL, t), 0);
  lpvm_tbuf_free(&b);
  vm_stop();   /* u is still there: lpvm_stop frees it */
}

/* The C API with NULL results and outside a VM: an error code, never a crash (probe5:
** lpvm_ets_lookup, lookup_element, first/last/next/prev and tab2list wrote through a
** NULL `out`, lookup_into through a NULL `len` or `buf`, insert_ints read a NULL `v`,
** info wrote a NULL `info`, all(NULL, cap) stored into NULL; new outside a VM said
** EINVAL for good options). */
Test(ets, null_results_and_no_vm) {
  lpvm_tab t = 0;
  lpvm_ets_opts o = LPVM_ETS_OPTS_INIT;
  cr_assert_eq(lpvm_ets_new(NULL, &o, &t), LPVM_ESTATE);
  vm_start_n(2, 1);
  o.access = LPVM_ETS_PUBLIC;
  cr_assert_eq(lpvm_ets_new(NULL, &o, &t), 0);
  lpvm_tbuf b, out;
  lpvm_tbuf_init(&b);
  lpvm_tbuf_init(&out);
  obj_ii(&b, 1, 2);
  cr_assert_eq(lpvm_ets_insert(NULL, t, b.data, b.len), 0);
  const uint8_t key[] = {131, 97, 1};
  cr_assert_eq(lpvm_ets_lookup(NULL, t, key, 3, NULL), LPVM_EINVAL);
  cr_assert_eq(lpvm_ets_lookup_element(NULL, t, key, 3, 2, NULL), LPVM_EINVAL);
  cr_assert_eq(lpvm_ets_take(NULL, t, key, 3, NULL), LPVM_EINVAL);
  cr_assert_eq(lpvm_ets_first(NULL, t, NULL), LPVM_EINVAL);
  cr_assert_eq(lpvm_ets_last(NULL, t, NULL), LPVM_EINVAL);
  cr_assert_eq(lpvm_ets_next(NULL, t, key, 3, NULL), LPVM_EINVAL);
  cr_assert_eq(lpvm_ets_prev(NULL, t, key, 3, NULL), LPVM_EINVAL);
  cr_assert_eq(lpvm_ets_tab2list(NULL, t, NULL), LPVM_EINVAL);
  uint8_t buf[64];
  size_t len = 99;
  cr_assert_eq(lpvm_ets_lookup_into(NULL, t, key, 3, buf, sizeof buf, NULL), LPVM_EINVAL);
  cr_assert_eq(lpvm_ets_lookup_into(NULL, t, key, 3, NULL, sizeof buf, &len), LPVM_EINVAL);
  cr_assert_eq(lpvm_ets_lookup_into(NULL, t, key, 3, NULL, 0, &len), LPVM_ETS_ESPACE);
  cr_assert_eq(lpvm_ets_insert_ints(NULL, t, NULL, 2), LPVM_EINVAL);
  cr_assert_eq(lpvm_ets_info(t, NULL), LPVM_EINVAL);
  cr_assert_geq(lpvm_ets_all(NULL, 16), 1);
  /* the table is as it was */
  cr_assert_eq(lpvm_ets_lookup_into(NULL, t, key, 3, buf, sizeof buf, &len), 1);
  cr_assert_eq(lpvm_ets_lookup(NULL, t, key, 3, &out), 1);
  cr_assert_eq(lpvm_ets_delete(NULL, t), 0);
  lpvm_tbuf_free(&b);
  lpvm_tbuf_free(&out);
  vm_stop();
  cr_assert_eq(lpvm_ets_new(NULL, &o, &t), LPVM_ESTATE);
  cr_assert_eq(lpvm_ets_lookup(NULL, t, key, 3, &out), LPVM_ETS_ENOTAB);
}
