/*
** ets.h -- shared term tables (Erlang's ETS) for C tasks; Lua processes use the same
** tables through `require "ets"` (docs/ets.md).
**
** A table holds objects: tuples in Erlang's external term format, the key at
** `keypos` (1-based). Objects are copied in and out: the table owns its own bytes, a
** reader gets a copy, and every single-object operation is atomic and isolated.
** A table belongs to the task that made it and is deleted when that task ends,
** unless its heir takes it (the heir gets {'ETS-TRANSFER', Tab, FromPid, HeirData}, Tab
** the name of a named table as an atom, else the table's reference, as in ETS).
**
** Terms passed in and out are whole external terms (the 131 byte first), as term.h
** builds and reads them. Results are appended to a builder `out` that the caller
** has initialised (lpvm_tbuf_init): lookups write a list [Obj, ...], first/next a
** key. `self` is the calling task (NULL from outside any task: id 0, which owns
** nothing unless it made the table itself). Every function returns 0 (or a count)
** or a negative code: LPVM_EINVAL, LPVM_ENOMEM, LPVM_EBADTERM, LPVM_EEXIST (a name
** taken) or one of the LPVM_ETS_E* below.
*/
#ifndef LPVM_ETS_H
#define LPVM_ETS_H

#include <stddef.h>
#include <stdint.h>

#include "task.h"
#include "term.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A table id: Erlang's table reference (a reference term, lpvm_put_ref). 0 = none. */
typedef uint64_t lpvm_tab;

#define LPVM_ETS_ENOTAB   (-40)   /* no such table (deleted, or never was) */
#define LPVM_ETS_EACCESS  (-41)   /* protected/private table of another task */
#define LPVM_ETS_EOBJECT  (-42)   /* not a tuple, or shorter than keypos */
#define LPVM_ETS_ENOKEY   (-43)   /* no object with this key */
#define LPVM_ETS_EPOS     (-44)   /* element position out of range, or the key */
#define LPVM_ETS_EVALUE   (-45)   /* update_counter: no integer there, or overflow */
#define LPVM_ETS_ETYPE    (-46)   /* not for this table type (update_* on a bag) */
#define LPVM_ETS_EOWNER   (-47)   /* give_away/setopts: only the owner may */
#define LPVM_ETS_ELIMIT   (-48)   /* too many tables */
#define LPVM_ETS_EMATCH   (-49)   /* malformed match specification */
#define LPVM_ETS_ESPACE   (-50)   /* lookup_into: the objects do not fit the buffer */

enum { LPVM_ETS_SET = 0, LPVM_ETS_ORDERED_SET, LPVM_ETS_BAG, LPVM_ETS_DUPLICATE_BAG };
enum { LPVM_ETS_PROTECTED = 0, LPVM_ETS_PUBLIC, LPVM_ETS_PRIVATE };

typedef struct lpvm_ets_opts {
  int type;                  /* LPVM_ETS_SET ... */
  int access;                /* LPVM_ETS_PROTECTED (default), PUBLIC, PRIVATE */
  uint32_t keypos;           /* 1-based; 0 means 1 */
  const char *name;          /* the table's name (an atom in Erlang); NULL = "" */
  int named;                 /* named_table: reachable by lpvm_ets_whereis(name) */
  int read_concurrency;      /* readers preferred over writers */
  int write_concurrency;     /* set/bag: 64 lock stripes, writers of distinct keys
                                in parallel */
  lpvm_id heir;              /* 0 = none */
  const uint8_t *heir_data;  /* a whole term, or NULL for the atom undefined */
  size_t heir_data_len;
} lpvm_ets_opts;

#define LPVM_ETS_OPTS_INIT {LPVM_ETS_SET, LPVM_ETS_PROTECTED, 1, NULL, 0, 0, 0, 0, NULL, 0}

/* One step of update_counter: {Pos, Incr} or {Pos, Incr, Threshold, SetValue}. Pos 0
** is the element after the key (Erlang's update_counter(Tab, Key, Incr)). */
typedef struct lpvm_ets_incr {
  uint32_t pos;
  int64_t incr;
  int has_threshold;
  int64_t threshold, setvalue;
} lpvm_ets_incr;

typedef struct lpvm_ets_tabinfo {
  int type, access, named, read_concurrency, write_concurrency;
  uint32_t keypos;
  lpvm_id owner, heir;
  size_t size;               /* objects */
  size_t memory;             /* bytes held by the table (objects and index) */
  char name[256];
} lpvm_ets_tabinfo;

/* ---- tables ------------------------------------------------------------------------ */

LPVM_API int lpvm_ets_new(lpvm_task *self, const lpvm_ets_opts *o, lpvm_tab *tab);
/* Delete the whole table (its owner, or anyone for a public one). */
LPVM_API int lpvm_ets_delete(lpvm_task *self, lpvm_tab tab);
/* The named table called name, or 0. */
LPVM_API lpvm_tab lpvm_ets_whereis(const char *name);
/* A number that changes whenever any table name appears or goes (new, rename,
** delete): a cache of whereis results is valid while it stays the same. */
LPVM_API uint64_t lpvm_ets_names_epoch(void);
LPVM_API int lpvm_ets_info(lpvm_tab tab, lpvm_ets_tabinfo *info);
/* Up to cap table ids into out; returns how many tables there are. */
LPVM_API size_t lpvm_ets_all(lpvm_tab *out, size_t cap);
/* The owner hands the table to `to` (alive, not itself), which gets
** {'ETS-TRANSFER', Tab, FromPid, Data} (Data NULL: the atom undefined). */
LPVM_API int lpvm_ets_give_away(lpvm_task *self, lpvm_tab tab, lpvm_id to,
                                const uint8_t *data, size_t len);
LPVM_API int lpvm_ets_rename(lpvm_task *self, lpvm_tab tab, const char *name);
/* setopts heir: the owner sets or clears (heir 0) the heir; one not alive now is none. */
LPVM_API int lpvm_ets_set_heir(lpvm_task *self, lpvm_tab tab, lpvm_id heir,
                               const uint8_t *data, size_t len);

/* ---- objects ----------------------------------------------------------------------- */

/* term: one tuple, or a list of tuples (all inserted atomically, or none). */
LPVM_API int lpvm_ets_insert(lpvm_task *self, lpvm_tab tab, const uint8_t *term,
                             size_t len);
/* The tuple {v[0], ..., v[n - 1]} of integers, as lpvm_ets_insert of its term (each
** integer in its smallest encoding) would insert it, without the caller writing the
** term: a row of counters, or the {Key, Value} of an insert from Lua (ets.insert(t,
** {k, v}) goes this way). The same errors (n 0: LPVM_ETS_EOBJECT). */
LPVM_API int lpvm_ets_insert_ints(lpvm_task *self, lpvm_tab tab, const int64_t *v,
                                  size_t n);
/* As insert, but nothing is written if any key is present: 1 inserted, 0 not. */
LPVM_API int lpvm_ets_insert_new(lpvm_task *self, lpvm_tab tab, const uint8_t *term,
                                 size_t len);
/* Objects with key, as a list appended to out; returns how many. */
LPVM_API int lpvm_ets_lookup(lpvm_task *self, lpvm_tab tab, const uint8_t *key,
                             size_t klen, lpvm_tbuf *out);
/* Element pos of the object (set) or a list of it from each object (bag). */
LPVM_API int lpvm_ets_lookup_element(lpvm_task *self, lpvm_tab tab, const uint8_t *key,
                                     size_t klen, uint32_t pos, lpvm_tbuf *out);
/* lookup without a builder: the key's objects copied back to back into buf (cap
** bytes) as tuples without version bytes, *len their bytes; returns how many, or
** LPVM_ETS_ESPACE when they do not fit (nothing else changes: call lpvm_ets_lookup).
** Only memcpy runs under the table's lock. */
LPVM_API int lpvm_ets_lookup_into(lpvm_task *self, lpvm_tab tab, const uint8_t *key,
                                  size_t klen, uint8_t *buf, size_t cap, size_t *len);
/* lookup of an integer key whose object is a tuple of integers, the row that
** lpvm_ets_insert_ints writes: the object's integers decoded into v (cap of them at
** most) under the key's lock; returns how many (>= 1), 0 when the key has no object,
** or LPVM_ETS_ESPACE when the key is outside 32 bits or the object is anything else
** (an element that is not an integer within 32 bits, more than cap of them, or a bag's
** key with several objects: v's contents are then undefined; call
** lpvm_ets_lookup_into or lpvm_ets_lookup, which answer every case).
** The other errors as lpvm_ets_lookup's. ets.lookup(t, k) from Lua goes this way. */
LPVM_API int lpvm_ets_lookup_ints(lpvm_task *self, lpvm_tab tab, int64_t key, int64_t *v,
                                  size_t cap);
LPVM_API int lpvm_ets_member(lpvm_task *self, lpvm_tab tab, const uint8_t *key,
                             size_t klen);
/* lookup and delete in one atomic step. */
LPVM_API int lpvm_ets_take(lpvm_task *self, lpvm_tab tab, const uint8_t *key,
                           size_t klen, lpvm_tbuf *out);
LPVM_API int lpvm_ets_delete_key(lpvm_task *self, lpvm_tab tab, const uint8_t *key,
                                 size_t klen);
LPVM_API int lpvm_ets_delete_object(lpvm_task *self, lpvm_tab tab, const uint8_t *obj,
                                    size_t len);
LPVM_API int lpvm_ets_delete_all(lpvm_task *self, lpvm_tab tab);
/* Erlang's update_counter/3,4: the steps apply in order to one object, atomically;
** results[i] is element pos after step i. dflt (or NULL) is the object inserted
** first when the key is absent. n may be 0 (steps and results then unused): the key
** must still exist or dflt is inserted, as Erlang's update_counter(T, K, []). */
LPVM_API int lpvm_ets_update_counter(lpvm_task *self, lpvm_tab tab, const uint8_t *key,
                                     size_t klen, const lpvm_ets_incr *steps, int n,
                                     const uint8_t *dflt, size_t dlen,
                                     int64_t *results);
/* Erlang's update_element/3: element pos[i] becomes the i-th value of vals, a whole
** term that is the list [V1, ..., Vn]. 1 done, 0 no such key. n may be 0 (vals the
** empty list): 1 when the key exists, as Erlang's update_element(T, K, []). */
LPVM_API int lpvm_ets_update_element(lpvm_task *self, lpvm_tab tab, const uint8_t *key,
                                     size_t klen, const uint32_t *pos, int n,
                                     const uint8_t *vals, size_t vlen);

/* ---- walking ----------------------------------------------------------------------- */

/* The first/last key (1) or none (0); next/prev: the key after/before `key`, which
** need not be in the table any more. ordered_set: term order. Other types: a fixed
** order of their own that no insert, delete or resize changes, so a walk with
** first/next visits every object present throughout exactly once (ETS promises
** that only under safe_fixtable; here it always holds). last = first, prev = next
** there, as in ETS. */
LPVM_API int lpvm_ets_first(lpvm_task *self, lpvm_tab tab, lpvm_tbuf *out);
LPVM_API int lpvm_ets_last(lpvm_task *self, lpvm_tab tab, lpvm_tbuf *out);
LPVM_API int lpvm_ets_next(lpvm_task *self, lpvm_tab tab, const uint8_t *key,
                           size_t klen, lpvm_tbuf *out);
LPVM_API int lpvm_ets_prev(lpvm_task *self, lpvm_tab tab, const uint8_t *key,
                           size_t klen, lpvm_tbuf *out);
/* Every object, as a list appended to out; returns how many. */
LPVM_API int lpvm_ets_tab2list(lpvm_task *self, lpvm_tab tab, lpvm_tbuf *out);

/* ---- match specifications ------------------------------------------------------------
** ms is an Erlang match specification term: [{Head, [Guard], [Body]}, ...], with the
** atoms '_' and '$N' in Head, guards such as {'>', '$1', 3}, {'andalso', G1, G2},
** {is_integer, '$1'}, and a body of '$_', '$$', '$N' or a term built from them
** ({{'$1', '$2'}} is a tuple). docs/ets.md lists what is understood. */
enum {
  LPVM_ETS_SELECT = 0,       /* append the bodies' results as a list */
  LPVM_ETS_SELECT_COUNT,     /* count the objects for which a body returns true */
  LPVM_ETS_SELECT_DELETE,    /* delete them (same test); returns how many */
  LPVM_ETS_SELECT_REPLACE    /* replace each matched object by its body's result, which
                                must be a tuple with the same key (else LPVM_EINVAL and
                                nothing replaced); not for a bag (LPVM_ETS_ETYPE); how many */
};
LPVM_API int lpvm_ets_select(lpvm_task *self, lpvm_tab tab, const uint8_t *ms,
                             size_t len, int mode, lpvm_tbuf *out);
/* select/3 and select/1 (also match/3, match_object/3, select_reverse): the results
** of the objects from the key after `after` on (a key term, version byte first; NULL:
** from the start), in the walk order of first/next (reverse: of last/prev), until
** `limit` results or the end, appended to out as a list. `next` is reset and gets the
** key to pass as `after` for the next chunk, or is left empty (len 0) at the end. A
** bag's objects with one key come in one chunk, which may then pass `limit`. The key
** need not be in the table any more: a walk by chunks sees every object present
** throughout exactly once, whatever happens to the table between them (ETS: only
** while it is fixed). Returns the number of results (0: none left) or an error. */
LPVM_API int lpvm_ets_select_chunk(lpvm_task *self, lpvm_tab tab, const uint8_t *ms,
                                   size_t len, int reverse, const uint8_t *after,
                                   size_t alen, size_t limit, lpvm_tbuf *out,
                                   lpvm_tbuf *next);
/* ets:test_ms/2: run a match specification on one tuple (a whole term, version byte
** first) with no table: 1 and the body's result appended to out, 0 when no clause
** matches (ETS: {ok, false}), or an error (LPVM_ETS_EMATCH: a bad specification,
** LPVM_ETS_EOBJECT: not a tuple). */
LPVM_API int lpvm_ets_test_ms(const uint8_t *obj, size_t olen, const uint8_t *ms,
                              size_t len, lpvm_tbuf *out);

LPVM_API const char *lpvm_ets_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif
