/*
** lterm.c -- Lua values -> Erlang external terms (the mapping is in lterm.h), the
** per-thread scratch builder and messages built from Lua values; the way back is in
** lterm_dec.c, the in-place paths for the common shapes in lterm_plain*.c.
**
** The encoder never raises a Lua error, so it can run where an error could not be
** caught (building an exit reason after the state failed). It reads tables with raw
** accesses only (no metamethod runs while a message is built) and detects cycles
** with the chain of tables being encoded, kept on the C stack: a table shared twice
** in one message (a DAG) is simply copied twice, as Erlang would.
*/
#include <lauxlib.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/binary.h"
#include "lpvm/dist.h"
#include "vm/lproc_int.h"
#include "vm/lterm.h"
#include "vm/lterm_int.h"
#include "vm/lraw.h"

/* ---- the pointer map (lterm_int.h) ----------------------------------------------- */

static uint32_t map_slot(const lterm_map *m, const void *k) {
  uint64_t h = (uint64_t)(uintptr_t)k * UINT64_C(0x9E3779B97F4A7C15);
  uint32_t i = (uint32_t)(h >> 32) & (m->cap - 1);
  while (m->keys[i] && m->keys[i] != k) i = (i + 1) & (m->cap - 1);
  return i;
}

int lterm_map_get(const lterm_map *m, const void *k, uint64_t *v) {
  if (m->n == 0) return 0;
  uint32_t i = map_slot(m, k);
  if (!m->keys[i]) return 0;
  *v = m->vals[i];
  return 1;
}

int lterm_map_put(lterm_map *m, const void *k, uint64_t v) {
  if ((m->n + 1) * 2 > m->cap) {   /* keep it at most half full */
    lterm_map old = *m;
    uint32_t cap = old.cap ? old.cap * 2 : 32;
    m->keys = calloc(cap, sizeof *m->keys);
    m->vals = malloc(cap * sizeof *m->vals);
    if (!m->keys || !m->vals) {
      free(m->keys);
      free(m->vals);
      *m = old;
      return -1;
    }
    m->cap = cap;
    m->n = 0;
    for (uint32_t i = 0; i < old.cap; i++)
      if (old.keys[i]) {
        uint32_t j = map_slot(m, old.keys[i]);
        m->keys[j] = old.keys[i];
        m->vals[j] = old.vals[i];
        m->n++;
      }
    free(old.keys);
    free(old.vals);
  }
  uint32_t i = map_slot(m, k);
  if (!m->keys[i]) m->n++;
  m->keys[i] = k;
  m->vals[i] = v;
  return 0;
}

void lterm_map_free(lterm_map *m) {
  if (m->cap == 0) return;  /* never grew: every plain send passes here, and free(NULL)
                            ** costs ~40 instructions in jemalloc (4 per send) */
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

/* ---- encoding ------------------------------------------------------------------------ */

typedef lterm_enc enc;

int lterm_enc_fail(enc *e, const char *fmt, const char *what) {
  snprintf(e->err, LTERM_ERRSZ, fmt, what);
  return -1;
}
#define enc_fail lterm_enc_fail
#define enc_value lterm_enc_value



/* Keys exactly 1..n? Counts the keys on the way; n is lua_rawlen. */
static int is_sequence(lua_State *L, int t, lua_Unsigned n) {
  lua_Unsigned count = 0;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    lua_Integer k;
    if (!lua_isinteger(L, -1) || (k = lua_tointeger(L, -1)) < 1 || (lua_Unsigned)k > n) {
      lua_pop(L, 1);
      return 0;
    }
    count++;
  }
  return count == n;
}

/* In a graph (lfun.c) a table met again is a reference, a loaded module or the
** globals go by name, and any other is numbered before its contents. */
static int enc_shared(enc *e, int t, const void *self) {
  uint64_t n;
  if (lterm_map_get(&e->refs, self, &n)) {
    lpvm_put_tuple(e->b, 2);
    lpvm_put_atom(e->b, "lpvm_ref");
    lpvm_put_int(e->b, (int64_t)n);
    return 1;
  }
  if (lfun_put_known(e->L, t, e->b, 1)) return 1;
  if (lterm_map_put(&e->refs, self, ++e->nrefs) != 0) return -1;
  return 0;
}

/* A scalar (nil, boolean, number, string, pid or reference) of type ty at idx: put,
** 0; anything else: -1, nothing put. Shared by enc_value and enc_array's loop, which
** saves a call per element. */
static inline int enc_scalar(enc *e, int idx, int ty) {
  lua_State *L = e->L;
  switch (ty) {
    case LUA_TNUMBER:
      if (lua_isinteger(L, idx)) lpvm_put_int(e->b, lua_tointeger(L, idx));
      else lpvm_put_float(e->b, lua_tonumber(L, idx));
      return 0;
    case LUA_TSTRING: {
      size_t len;
      const char *s = lua_tolstring(L, idx, &len);
      lpvm_put_binary(e->b, s, len);
      return 0;
    }
    case LUA_TLIGHTUSERDATA:   /* a pid or a reference (lmod.c) */
      lmod_put_light(e->b, (uint64_t)(uintptr_t)lua_touserdata(L, idx));
      return 0;
    case LUA_TBOOLEAN:
      if (lua_toboolean(L, idx)) lpvm_put_atom_len(e->b, "true", 4);
      else lpvm_put_atom_len(e->b, "false", 5);
      return 0;
    case LUA_TNIL: lpvm_put_atom_len(e->b, "nil", 3); return 0;
    default: return -1;
  }
}

/* A sequence in one pass: lua_next walks an array part in order 1..n, so the
** elements are encoded as they come, with no pass to check the keys first (nor a
** rawgeti per element), and keys that came exactly as 1..n are all the keys: the
** count is patched into the list's header at the end. A key out of that order (a
** map, or a sequence whose integers sit in the hash part) rewinds the builder and
** returns 1: the general path decides. Not in a graph, where a rewind would leave
** numbers behind. */
static int enc_array(enc *e, int t) {
  lua_State *L = e->L;
  lpvm_tbuf *b = e->b;
  size_t mark = b->len;
  uint32_t nbins = e->bins ? e->bins->n : 0;
  uint32_t k = 0;
  int rc = 0;
  lpvm_put_list(b, 1);   /* LIST_EXT, whose count is written when known */
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (!lua_isinteger(L, -2) || lua_tointeger(L, -2) != (lua_Integer)k + 1 ||
        k == UINT32_MAX) {
      lua_pop(L, 2);
      rc = 1;
      break;
    }
    k++;
    int ty = lua_type(L, -1);
    if (ty == LUA_TTABLE || enc_scalar(e, -1, ty) != 0) rc = enc_value(e, lua_absindex(L, -1));
    lua_pop(L, 1);
    if (rc != 0) {
      lua_pop(L, 1);   /* the key */
      return rc;
    }
  }
  if (rc == 0) {
    if (k == 0) b->len = mark;   /* {}: [] is the tail alone */
    else if (!b->err) {
      uint8_t *q = b->data + mark + 1;
      q[0] = (uint8_t)(k >> 24), q[1] = (uint8_t)(k >> 16), q[2] = (uint8_t)(k >> 8);
      q[3] = (uint8_t)k;
    }
    lpvm_put_nil(b);
    return 0;
  }
  b->len = mark;   /* not a sequence in order: the general path */
  if (e->bins) e->bins->n = nbins;
  return 1;
}

/* Outside a graph a table met again on the path of tables being encoded is a cycle.
** e->onpath counts the path's tables by a hash of their address, so most tables
** are known not to be on it without walking it (deep messages walked it per table). */
#define path_slot lterm_path_slot

static int enc_general(enc *e, int t, lua_Unsigned n);

static int enc_table(enc *e, int t) {
  lua_State *L = e->L;
  const void *self = lua_topointer(L, t);
  if (e->shared) {
    int done = enc_shared(e, t, self);
    if (done != 0) return done > 0 ? 0 : enc_fail(e, "out of memory%s", "");
  } else if (e->onpath[path_slot(self)]) {   /* maybe on the path: look */
    for (int i = 0; i < e->depth; i++)
      if (e->path[i] == self) return enc_fail(e, "cannot send a cyclic table%s", "");
  }
  if (e->depth >= LTERM_DEPTH) return enc_fail(e, "message nested too deep%s", "");
  if (!lua_checkstack(L, 4)) return enc_fail(e, "out of memory%s", "");
  e->path[e->depth++] = self;
  int rc;
  if (!e->shared) {
    e->onpath[path_slot(self)]++;
    rc = lraw_ok() ? lterm_raw_list(e, t, self) : 1;
    if (rc > 0) rc = enc_array(e, t);
    if (rc > 0) rc = enc_general(e, t, lua_rawlen(L, t));
    e->onpath[path_slot(self)]--;
  } else {
    rc = enc_general(e, t, lua_rawlen(L, t));
  }
  e->depth--;
  return rc;
}

/* A table as a list if its keys are exactly 1..n, else as a map. */
static int enc_general(enc *e, int t, lua_Unsigned n) {
  lua_State *L = e->L;
  int rc = 0;
  if (is_sequence(L, t, n)) {
    if (n > UINT32_MAX) return enc_fail(e, "table too large to send%s", "");
    if (n > 0) {
      lpvm_put_list(e->b, (uint32_t)n);
      for (lua_Unsigned i = 1; i <= n && rc == 0; i++) {
        lua_rawgeti(L, t, (lua_Integer)i);
        rc = enc_value(e, lua_gettop(L));
        lua_pop(L, 1);
      }
    }
    lpvm_put_nil(e->b);
  } else {
    size_t mark = lpvm_put_map_open(e->b);
    uint32_t pairs = 0;
    lua_pushnil(L);
    while (rc == 0 && lua_next(L, t)) {
      int top = lua_gettop(L);
      rc = enc_value(e, top - 1);
      if (rc == 0) rc = enc_value(e, top);
      lua_pop(L, 1);
      pairs++;
    }
    if (rc != 0) lua_pop(L, 1);   /* the key lua_next left */
    else lpvm_patch_map(e->b, mark, pairs);
  }
  return rc;
}

int lterm_enc_value(enc *e, int idx) {
  lua_State *L = e->L;
  int ty = lua_type(L, idx);
  switch (ty) {
    case LUA_TNIL: case LUA_TBOOLEAN: case LUA_TNUMBER: case LUA_TSTRING:
    case LUA_TLIGHTUSERDATA:
      return enc_scalar(e, idx, ty);
    case LUA_TUSERDATA: {
      size_t off, blen;
      lpvm_bin *bin = lbin_to(L, idx, &off, &blen);
      if (bin && e->bins) lpvm_put_bin(e->b, e->bins, bin, off, blen);   /* shared */
      else if (bin) lpvm_put_binary(e->b, lpvm_bin_data(bin) + off, blen);
      if (bin) return 0;
      uint64_t ref = lmod_to_ref(L, idx);
      size_t flen;
      const uint8_t *ft = ref ? NULL : lterm_foreign(L, idx, &flen);
      if (ft) { lpvm_put_term(e->b, ft, flen); return 0; }
      if (ref == 0) return enc_fail(e, "cannot send a %s value", "userdata");
      lpvm_put_ref(e->b, ref);
      return 0;
    }
    case LUA_TTABLE: return enc_table(e, idx);
    case LUA_TFUNCTION: return lfun_put(e, idx);
    default: return enc_fail(e, "cannot send a %s value", lua_typename(L, ty));
  }
}

/* Encode the n values from idx (n == 1: bare; else a tuple). A function met outside
** a graph restarts the whole message as {lpvm_graph, Message} (lfun.c). */
static int enc_run(lua_State *L, int idx, int n, lpvm_tbuf *b, char *err, int funs,
                   lpvm_binrefs *bins) {
  enc e;
  e.L = L, e.b = b, e.err = err, e.depth = 0, e.funs = funs, e.bins = bins;
  e.shared = 0, e.nrefs = 0, e.noraw = 0, e.pidlen = 0;
  memset(e.onpath, 0, sizeof e.onpath);
  memset(&e.refs, 0, sizeof e.refs);
  memset(&e.cells, 0, sizeof e.cells);
  idx = lua_absindex(L, idx);
  size_t mark = b->len;
  int rc = 0;
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1) {
      b->len = mark;
      if (bins) bins->n = 0;
      e.depth = 0;
      e.shared = 1;
      lpvm_put_tuple(b, 2);
      lpvm_put_atom(b, "lpvm_graph");
    }
    rc = 0;
    if (n != 1) lpvm_put_tuple(b, (uint32_t)n);
    for (int i = 0; i < n && rc == 0; i++) rc = enc_value(&e, idx + i);
    if (rc != LTERM_RETRY || b->err) break;
  }
  lterm_map_free(&e.refs);
  lterm_map_free(&e.cells);
  if (rc == 0 && b->err) return enc_fail(&e, "out of memory building a message%s", "");
  return rc == 0 ? 0 : -1;
}

int lterm_put(lua_State *L, int idx, lpvm_tbuf *b, char *err) {
  return enc_run(L, idx, 1, b, err, 1, NULL);
}

int lterm_put_plain(lua_State *L, int idx, lpvm_tbuf *b, char *err) {
  return enc_run(L, idx, 1, b, err, 0, NULL);
}

int lterm_put_values(lua_State *L, int idx, int n, lpvm_tbuf *b, char *err) {
  return enc_run(L, idx, n, b, err, 1, NULL);
}

int lterm_put_reason(lua_State *L, int idx, lpvm_tbuf *b, char *err) {
  size_t len;
  if (lua_type(L, idx) == LUA_TSTRING) {
    const char *s = lua_tolstring(L, idx, &len);
    if (len > 0 && len < 256) {
      lpvm_tbuf probe = *b;   /* an invalid atom (bad UTF-8) sets err: fall back */
      lpvm_put_atom_len(b, s, len);
      if (!b->err) return 0;
      *b = probe;
      b->err = 0;
    }
  }
  return lterm_put_plain(L, idx, b, err);   /* no functions in a reason */
}

/* ---- the per-thread scratch builder ------------------------------------------------- */

#define SCRATCH_KEEP 65536   /* a bigger buffer is given back after the send */

static pthread_key_t scratch_key;   /* only for its destructor at thread exit */
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

typedef struct scratch {
  lpvm_tbuf b;
  size_t cap;
  lpvm_binrefs bins;   /* the shared binaries of the message being built */
  size_t last;         /* the last message of tables built on this thread: its bytes
                       ** (up to SCRATCH_KEEP), the next one's first size */
} scratch;

/* The thread's scratch, found with one TLS load: pthread_once + getspecific on every
** send cost ~35 instructions of a ~2,800-instruction message hop. */
static _Thread_local scratch *my_scratch;

static void scratch_free(void *p) {
  scratch *s = p;
  free(s->b.data);
  lpvm_binrefs_free(&s->bins);
  free(s);
}

static void scratch_init(void) { pthread_key_create(&scratch_key, scratch_free); }

static scratch *scratch_get(void) {
  scratch *s = my_scratch;
  if (!s) {
    pthread_once(&scratch_once, scratch_init);
    s = calloc(1, sizeof *s);
    if (!s) return NULL;
    pthread_setspecific(scratch_key, s);
    my_scratch = s;
  }
  return s;
}

lpvm_tbuf *lterm_scratch(void) {
  scratch *s = scratch_get();
  if (!s) return NULL;
  if (s->b.data == NULL) {
    lpvm_tbuf_init(&s->b);
    s->cap = s->b.cap;
  } else {
    if (s->b.cap > s->cap) s->cap = s->b.cap;   /* it grew last time */
    s->b.cap = s->cap;                          /* an error had clipped cap */
    s->b.len = 1;                               /* keep the version byte */
    s->b.err = 0;
  }
  return &s->b;
}

/* A message built a value at a time (lmod_call.c's call tuple): lterm_msg_begin gives
** the scratch with its binary table emptied, lterm_put_shared encodes one plain value
** into it with its binaries shared, lterm_msg_end makes the message. */
lpvm_tbuf *lterm_msg_begin(void) {
  lpvm_tbuf *b = lterm_scratch();
  if (b) my_scratch->bins.n = 0;
  return b;
}

int lterm_put_shared(lua_State *L, int idx, lpvm_tbuf *b, char *err) {
  return enc_run(L, idx, 1, b, err, 0, &my_scratch->bins);
}

lpvm_msg *lterm_msg_end(lpvm_tbuf *b, char *err) {
  scratch *s = my_scratch;
  lpvm_msg *m = b->err ? NULL : lpvm_msg_new_term(b->data, b->len, &s->bins);
  if (!m) snprintf(err, LTERM_ERRSZ, "not enough memory");
  s->bins.n = 0;
  if (b->cap > SCRATCH_KEEP || b->err) {   /* don't sit on a huge or broken buffer */
    lpvm_tbuf_free(b);
    s->cap = 0;
  }
  return m;
}

/* What the n values from idx will take: exact for scalars (a number its widest form,
** a pid a node name of up to 48 bytes), a first guess for a table, a function or a
** userdata. The builder grows past it when it must. */
static size_t msg_hint(lua_State *L, int idx, int n) {
  size_t sz = n != 1 ? 5 : 0;   /* the tuple's header */
  for (int i = 0; i < n; i++) {
    switch (lua_type(L, idx + i)) {
      case LUA_TNIL: case LUA_TBOOLEAN: sz += 7; break;      /* an atom, 'false' at most */
      case LUA_TNUMBER: sz += 11; break;                     /* SMALL_BIG of 8 bytes */
      case LUA_TSTRING: sz += 5 + lua_rawlen(L, idx + i); break;
      case LUA_TLIGHTUSERDATA: sz += 72; break;              /* a pid's 64, a ref's 72 */
      default: sz += 256; break;
    }
  }
  return sz;
}

/* The message is encoded straight into its own block (lpvm_msg_build): no scratch
** buffer and no copy of the term, which a 100 KB string paid twice before. */
lpvm_msg *lterm_msg(lua_State *L, int idx, int n, char *err) {
  idx = lua_absindex(L, idx);
  size_t hint;
  if (n >= 0 && n <= LTERM_PLAIN_MAX) {
    lpvm_msg *m = lterm_msg_plain(L, idx, n, &hint);
    if (hint == 0) {   /* scalars: built (or out of memory) */
      if (m) m->flags |= LPVM_MSGF_VALUES;
      else snprintf(err, LTERM_ERRSZ, "not enough memory");
      return m;
    }
  } else {
    hint = msg_hint(L, idx, n);
  }
  scratch *s = scratch_get();
  if (!s) {
    snprintf(err, LTERM_ERRSZ, "not enough memory");
    return NULL;
  }
  lpvm_tbuf b;
  /* a process sends the same shapes again and again: a block as big as the last
  ** message's is not grown (a 6 KB very_big(15) doubled from 256 bytes five times, a
  ** realloc and a copy each); a smaller message gives the rest back at the end. The
  ** hint guesses a table's bytes (up to 256): within 256 a value of the last message
  ** it is taken for the last message's shape again ({self(), true} fits in 60 bytes,
  ** and a block of a 256-byte guess, ~340, was given back by a realloc every
  ** message); past it (a long string more) the hint is the size */
  size_t want = hint;
  if (s->last && hint <= s->last + 256 * (size_t)n + 3) want = s->last;
  lpvm_msg_build(&b, want);
  if (enc_run(L, idx, n, &b, err, 1, &s->bins) != 0) {   /* err says why */
    s->bins.n = 0;
    free(b.data);
    return NULL;
  }
  lpvm_msg *m = lpvm_msg_built(&b, &s->bins);
  if (m) m->flags |= LPVM_MSGF_VALUES;
  if (m) s->last = m->len < SCRATCH_KEEP ? m->len : SCRATCH_KEEP;
  else snprintf(err, LTERM_ERRSZ, "not enough memory");
  return m;
}
