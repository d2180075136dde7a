/*
** ets_store.c -- one storage interface over the two storages: the hash table
** (ets_hash.c: set, bag, duplicate_bag) and the AVL tree (ets_tree.c: ordered_set).
*/
#include <stdlib.h>

#include "tasks/ets_int.h"

int ets_store_init(ets_tab *t) {
  t->root = NULL;
  t->buckets = NULL;
  t->bits = 0;
  return tab_is_hash(t) ? hash_init(t) : 0;
}

void ets_store_detach(ets_tab *t, ets_obj ***buckets, unsigned *bits, ets_obj **root) {
  *buckets = t->buckets;
  *bits = t->bits;
  *root = t->root;
  t->buckets = NULL;
  t->bits = 0;
  t->root = NULL;
  t->tree_version++;   /* the nodes are about to be freed: no walk hint may use them */
}

void ets_free_objs(int type, ets_obj **buckets, unsigned bits, ets_obj *root) {
  if (type == LPVM_ETS_ORDERED_SET) tree_free(root);
  else hash_free(buckets, bits);
}

ets_obj *ets_bag_next(ets_obj *o) {
  ets_obj *n = o->link[0];
  if (n && n->hash == o->hash &&
      term_cmp(obj_key(n), obj_key_end(n), obj_key(o), obj_key_end(o), 1) == 0)
    return n;
  return NULL;
}

void ets_put(ets_tab *t, ets_obj *o, ets_obj **old) {
  if (tab_is_hash(t)) hash_put(t, o, old);
  else tree_put(t, o, old);
}

ets_obj *ets_remove_key(ets_tab *t, const ets_key *k) {
  return tab_is_hash(t) ? hash_remove_key(t, k) : tree_remove_key(t, k);
}

void ets_remove_obj(ets_tab *t, ets_obj *o) {
  if (tab_is_hash(t)) {
    hash_remove_obj(t, o);
  } else {
    ets_key k = {obj_key(o), obj_key_end(o), 0};
    tree_remove_key(t, &k);
  }
}

int ets_first_key(ets_tab *t, lpvm_tbuf *out) {
  return tab_is_hash(t) ? hash_first_key(t, out) : tree_first_key(t, out);
}

int ets_last_key(ets_tab *t, lpvm_tbuf *out) {
  return tab_is_hash(t) ? hash_first_key(t, out) : tree_last_key(t, out);
}

int ets_after_key(ets_tab *t, const ets_key *k, lpvm_tbuf *out) {
  return tab_is_hash(t) ? hash_after_key(t, k, out) : tree_after_key(t, k, out);
}

int ets_before_key(ets_tab *t, const ets_key *k, lpvm_tbuf *out) {
  return tab_is_hash(t) ? hash_after_key(t, k, out) : tree_before_key(t, k, out);
}

int ets_walk(ets_tab *t, int (*fn)(ets_tab *t, ets_obj *o, void *ud), void *ud) {
  return tab_is_hash(t) ? hash_walk(t, fn, ud) : tree_walk(t, fn, ud);
}

/* The exclusive side of ets_fast_enter, with the table lock's state already set (so new
** entrants step back): wait for every stripe's writer bit and group readers to go. */
void ets_fast_drain(ets_tab *t) {
  int spins = 0;
  for (unsigned s = 0; s < ETS_NSTRIPES; s++)
    while (atomic_load_explicit(&t->wc_stripes[s].lock.w, memory_order_seq_cst) & ETS_SLOCK_W)
      ets_slock_wait(&spins);
  for (unsigned s = 0; s < ETS_NSTRIPES; s++) ets_sg_wait_readers(t->slot_sg, s);
}
