/*
** lterm_int.h -- what the term codec (lterm.c, lterm_dec.c) and the function codec (lfun.c) share:
** the encoder's and decoder's state. Not for other files: they use vm/lterm.h.
*/
#ifndef LPVM_LTERM_INT_H
#define LPVM_LTERM_INT_H

#include <lua.h>
#include <stdint.h>
#include <string.h>

#include "lpvm/binary.h"
#include "lpvm/term.h"

#define LTERM_DEPTH 200   /* nesting limit, both ways */
/* lterm_dec.c gc_before: a message of LTERM_GC_BEFORE bytes or more is decoded after the
** collection its tables would bring forward, guessed at LTERM_GC_FACTOR times its
** bytes (very_big(15) makes 2.8), at most LTERM_GC_ROOM */
#define LTERM_GC_BEFORE 256
#define LTERM_GC_FACTOR 4
#define LTERM_GC_ROOM (1 << 20)
#define LTERM_PATH_SLOTS 256  /* lterm.c's cycle check: a power of 2, <= 256 */
#define LTERM_PID_MAX 48  /* lterm_raw.c's copied pid: a node name of up to 33 bytes */
#define LTERM_RETRY (-2)  /* encoder: a function met outside a graph; start again as one */

/* A pointer -> number map (open addressing, malloc'd: the encoder never allocates in
** the Lua state, so it can't raise). */
typedef struct lterm_map {
  const void **keys;
  uint64_t *vals;
  uint32_t cap, n;
} lterm_map;

/* A list lterm_raw.c's walk writes while a nested one is written in its loop. */
typedef struct lterm_wframe {
  const void *a;          /* its array (lraw_tvalue) */
  unsigned asize, k;      /* its size and the element being written */
  size_t mark;            /* where its bytes begin */
} lterm_wframe;

typedef struct lterm_enc {
  lua_State *L;
  lpvm_tbuf *b;
  char *err;
  const void *path[LTERM_DEPTH];   /* tables being encoded, outermost first */
  int depth;
  uint8_t onpath[LTERM_PATH_SLOTS];   /* outside a graph: path's tables by address hash */
  int funs;          /* functions may be encoded (not in exit reasons) */
  lpvm_binrefs *bins;   /* a message's shared binaries; NULL: binaries are copied in */
  int shared;        /* a graph (the message holds a function): every table and
                     ** function is numbered, and one met again is a reference */
  uint32_t nrefs;    /* functions and shared tables numbered so far */
  lterm_map refs;    /* function or shared table -> its number (1..) */
  lterm_map cells;   /* upvalue cell -> (function number << 8 | upvalue index) */
  int noraw;         /* > 0: inside a table lterm_raw.c could not walk off the stack */
  uint8_t pidlen;    /* > 0: pid[] holds a local pid's bytes as lpvm_put_pid put them
                     ** (tag, node atom, ID, serial, creation): lterm_raw.c copies them */
  uint8_t pid[LTERM_PID_MAX];
  lterm_wframe wfr[LTERM_DEPTH];   /* lterm_raw.c's open lists, by depth (not cleared) */
} lterm_enc;

int lterm_enc_value(lterm_enc *e, int idx);

/* n bytes from s to d: up to 16 with two (overlapping) loads and stores, without a
** call to memcpy (a message's strings are mostly short: very_big's are 1 to 17 bytes):
** lterm_raw.c's walk, lterm_plain_msg.c's in-place writer. */
static inline void lterm_copy_bytes(uint8_t *d, const char *s, size_t n) {
  if (n < 4) {   /* first: very_big's one-letter strings, atoms' names */
    if (n) d[0] = (uint8_t)s[0], d[n / 2] = (uint8_t)s[n / 2], d[n - 1] = (uint8_t)s[n - 1];
  } else if (n <= 16) {
    if (n >= 8) {
      uint64_t x, y;
      memcpy(&x, s, 8), memcpy(&y, s + n - 8, 8);
      memcpy(d, &x, 8), memcpy(d + n - 8, &y, 8);
    } else {
      uint32_t x, y;
      memcpy(&x, s, 4), memcpy(&y, s + n - 4, 4);
      memcpy(d, &x, 4), memcpy(d + n - 4, &y, 4);
    }
  } else if (n <= 32) {   /* 17-32: four overlapping words (very_big's 17-byte string) */
    uint64_t x, y, z, w;
    memcpy(&x, s, 8), memcpy(&y, s + 8, 8), memcpy(&z, s + n - 16, 8), memcpy(&w, s + n - 8, 8);
    memcpy(d, &x, 8), memcpy(d + 8, &y, 8), memcpy(d + n - 16, &z, 8), memcpy(d + n - 8, &w, 8);
  } else {
    memcpy(d, s, n);
  }
}

/* The cycle check's slot of a table (lterm.c's enc_table, lterm_raw.c's lists). */
static inline unsigned lterm_path_slot(const void *t) {
  uint64_t a = (uint64_t)(uintptr_t)t * UINT64_C(0x9E3779B97F4A7C15);   /* Fibonacci */
  return (unsigned)(a >> 56) & (LTERM_PATH_SLOTS - 1);
}
int lterm_enc_fail(lterm_enc *e, const char *fmt, const char *what);

typedef struct lterm_dec {
  lua_State *L;
  lpvm_tread *r;
  int trusted;       /* lpvm_fun terms may be loaded (local messages) */
  const lpvm_binref *bins;   /* the message's shared binaries (lpvm/binary.h) */
  uint32_t nbins;
  int shared;        /* inside a graph: tables and functions are numbered */
  int refs;          /* stack index of the numbering table (a graph) */
  uint32_t nrefs;    /* numbered values so far */
} lterm_dec;

void lterm_dec_value(lterm_dec *d, int depth);
_Noreturn void lterm_dec_bad(lua_State *L);

/* lterm.c: the map */
int lterm_map_get(const lterm_map *m, const void *k, uint64_t *v);   /* 1 if found */
int lterm_map_put(lterm_map *m, const void *k, uint64_t v);          /* -1: no memory */
void lterm_map_free(lterm_map *m);

/* lterm_raw.c: the table at t (self: its address; vm/lraw.h trusted) encoded as a list
** straight from its array part when its keys are 1..k there and its hash part holds
** nothing: 0 done (or an element's error, < 0), 1 not such a table (nothing put). */
int lterm_raw_list(lterm_enc *e, int t, const void *self);

/* lterm_plain_msg.c and lterm_plain.c: the fast paths of local messages. */
#define LTERM_PLAIN_MAX 8   /* values of a message of scalars */
/* Up to LTERM_PLAIN_MAX scalars (nil, booleans, numbers, strings, pids, references)
** and lists of them and of a few levels of lists, as a message (NULL: out of
** memory), *hint 0; if a value is not one, NULL and *hint the size to start the
** general encoder's message with. */
lpvm_msg *lterm_msg_plain(lua_State *L, int idx, int n, size_t *hint);
/* The values of a local message of scalars, pids, references and tables of them (with
** skip, all but a leading reference): how many were pushed, or -1 (nothing pushed)
** when the general decoder must read it. */
int lterm_push_plain(lua_State *L, const uint8_t *p, size_t len, int skip);
/* The same for a local message with shared binaries (LPVM_MSGF_BINS): its table's
** entries pushed where their tags are. */
int lterm_push_plain_bins(lua_State *L, const lpvm_msg *m, int skip);
/* The one value at p (before end) pushed the same way: past it, or NULL (nothing
** pushed). */
const uint8_t *lterm_plain_at(lua_State *L, const uint8_t *p, const uint8_t *end);

/* lfun.c: the function forms (docs/terms.md, "Functions"). */
int lfun_put(lterm_enc *e, int idx);                  /* a Lua or C function */
int lfun_put_known(lua_State *L, int v, lpvm_tbuf *b, int tables);   /* 1 if by name */
/* Inside a graph, at one of the forms ({lpvm_fun, ..}, {lpvm_ref, N}, '$env',
** {'$mod', ..}, {'$fn', ..}): push its value and return 1; else 0. */
int lfun_push(lterm_dec *d, int depth);
/* A table was made while decoding a graph: number it. */
void lfun_number(lterm_dec *d, int idx);
/* At {lpvm_graph, Term} from a trusted source: step in, push the numbering table
** (the caller removes it at d->refs when done) and return 1. */
int lfun_graph_begin(lterm_dec *d);
/* '$env', {'$mod', Name}, {'$fn', Module, Field}: push the value, return 1. */
int lfun_push_known(lua_State *L, lpvm_tread *r);

#endif
