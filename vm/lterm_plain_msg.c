/*
** lterm_plain_msg.c -- the sender's fast path of local messages (lterm_plain.c reads
** them; lterm.c and lterm_dec.c are the general codec).
**
** Most messages are a few scalars, or lists of scalars and pids (EStone's msgp
** shapes): sent millions of times, they must not pay for what the general encoder
** keeps for the rare cases (function graphs, cycles, maps). Here a message of
** scalars and shared binaries, and of lists of them and a few levels of lists, is
** read in place (vm/lraw.h), sized exactly and written straight into its block (a
** binary as its TAG_LPVM_BINREF, the table of binaries after the term); anything
** else goes to the general encoder (lterm.c's lterm_msg), with a first guess of its
** size. The bytes are the general encoder's.
*/
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/binary.h"
#include "lpvm/dist.h"
#include "vm/lproc_int.h"
#include "vm/lproc_small.h"
#include "vm/lterm.h"
#include "vm/lterm_int.h"
#include "vm/lraw.h"

/* The external format's tags these paths write and read (tasks/term_int.h has them all). */
enum {
  T_NEW_FLOAT = 70, T_NEW_PID = 88, T_SMALL_INT = 97, T_INT = 98, T_SMALL_TUPLE = 104,
  T_NIL = 106, T_STRING = 107, T_LIST = 108, T_BINARY = 109, T_MAP = 116,
  T_SMALL_ATOM_UTF8 = 119, T_NEWER_REF = 90, T_SMALL_BIG = 110
};

/* A scalar (nil, a boolean, a number, a string, a pid, a reference) of type t (lua_type's): t and
** the bytes it takes at most (*ref: a reference's id), else -1 (a table, a function,
** a binary or a foreign term: the encoder's general path). */
static inline int scalar_typed(lua_State *L, int idx, int t, size_t *sz, uint64_t *ref) {
  switch (t) {
    case LUA_TNIL: case LUA_TBOOLEAN: *sz = 7; return t;
    case LUA_TNUMBER: *sz = 11; return t;
    case LUA_TSTRING: *sz = 5 + lua_rawlen(L, idx); return t;
    case LUA_TLIGHTUSERDATA: *sz = 72; return t;   /* a pid's 64, a reference's 72 */
    case LUA_TUSERDATA:
      if (!(*ref = lmod_to_ref(L, idx))) return -1;
      *sz = 72;                                     /* tag, count, node, creation, 3 words */
      return t;
    default: return -1;
  }
}

static inline int scalar_of(lua_State *L, int idx, size_t *sz, uint64_t *ref) {
  return scalar_typed(L, idx, lua_type(L, idx), sz, ref);
}

/* The scalar at idx of type t (scalar_of's, which gave ref), as lterm_enc_value puts it. */
static inline void put_scalar(lua_State *L, int idx, int t, uint64_t ref, lpvm_tbuf *b) {
  switch (t) {
    case LUA_TNIL: lpvm_put_atom_len(b, "nil", 3); break;
    case LUA_TBOOLEAN:
      if (lua_toboolean(L, idx)) lpvm_put_atom_len(b, "true", 4);
      else lpvm_put_atom_len(b, "false", 5);
      break;
    case LUA_TNUMBER:
      if (lua_isinteger(L, idx)) lpvm_put_int(b, lua_tointeger(L, idx));
      else lpvm_put_float(b, lua_tonumber(L, idx));
      break;
    case LUA_TSTRING: {
      size_t len;
      const char *str = lua_tolstring(L, idx, &len);
      lpvm_put_binary(b, str, len);
      break;
    }
    case LUA_TUSERDATA: lpvm_put_ref(b, ref); break;
    default: lmod_put_light(b, (uint64_t)(uintptr_t)lua_touserdata(L, idx)); break;
  }
}

int lterm_scalar(lua_State *L, int idx, size_t *sz, uint64_t *ref) {
  return scalar_of(L, idx, sz, ref);
}

void lterm_put_scalar(lua_State *L, int idx, int t, uint64_t ref, lpvm_tbuf *b) {
  put_scalar(L, idx, t, ref, b);
}

/* lterm_msg_plain (below) read in place (vm/lraw.h) for the commonest values:
** up to LTERM_PLAIN_MAX nil, booleans, numbers, strings, pids, shared binaries (up to
** RAW_BINS in all) and references, and lists of such values (a table whose array part holds them from 1 to its first nil
** and whose hash part is empty: EStone generic's request {"abc"}) and of such lists
** (a few levels and tables: RAW_DEPTH, RAW_TABLES; msgp_medium's big()), sized from their
** tags and lengths and written straight into a block lpvm_msg_new made, without
** lua_type, lua_tolstring, lua_tointeger and the builder's calls and checks (~110 of
** msg10's ~1,500 instructions a message), and for a list without the general
** encoder's set-up (its cycle bookkeeping, a scratch, a second look at the values:
** ~1,400 of generic's call). The bytes are the general encoder's (vm/lterm_raw.c's
** walk writes such a list alike). 1 if it took them all (*m the message, or NULL out
** of memory), 0 at the first other value (nothing made: lterm_msg_plain's way). */
static inline void wr32be(uint8_t *q, uint32_t v) {
  v = __builtin_bswap32(v);
  memcpy(q, &v, 4);
}

/* Shared binaries written in place in one message (lpvm.send(pid, "data", b),
** {tag, b}): each is TAG_LPVM_BINREF and its index, as lpvm_put_bin writes it, with
** the message's table after the term (lpvm_msg_set_bins); more go to the general
** encoder. */
#define RAW_BINS 8
typedef struct rawbins {
  uint32_t n;   /* sized (raw_scalar_size), then written (raw_put) */
  lpvm_binref v[RAW_BINS];
} rawbins;

/* A shared binary noted in bins: its tag's 5 bytes, or 0 (another userdata, or more
** than RAW_BINS). Out of line: a message of scalars must not pay registers for it. */
static __attribute__((noinline)) size_t raw_bin_size(const lraw_tvalue *v, rawbins *bins) {
  size_t off, len;
  lpvm_bin *bin;
  if (bins->n >= RAW_BINS || !(bin = lbin_raw(v, &off, &len))) return 0;
  bins->v[bins->n++] = (lpvm_binref){bin, (uint32_t)off, (uint32_t)len, 0, 0};
  return 5;
}

/* The bytes a scalar takes: exactly, but a pid or a reference at most (a node name
** of up to 48 bytes, a longer one grows the block); 0 for another value. (Exact, the
** block goes back to the free list it came from: see vm/lmod_msg.c's msg_done.) A
** shared binary takes its tag's 5 and its entry in bins (filled in order: raw_put
** writes them in the same order, and sets their positions). */
static inline size_t raw_scalar_size(const lraw_tvalue *v, rawbins *bins) {
  size_t len;
  switch (v->tt) {
    case LRAW_VSHRSTR: case LRAW_VLNGSTR:
      lraw_str(v, &len);
      return len > UINT32_MAX - 5 ? 0 : 5 + len;
    case LRAW_VNUMINT: {   /* as raw_put writes it */
      lua_Integer x = v->v.i;
      if (x >= 0 && x <= 255) return 2;
      if (x >= INT32_MIN && x <= INT32_MAX) return 5;
      uint64_t mag = x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x;
      return 3 + (size_t)((64 - __builtin_clzll(mag) + 7) / 8);   /* mag > 2^31 */
    }
    case LRAW_VNUMFLT: return 9;
    case LRAW_VTRUE: return 6;
    case LRAW_VFALSE: return 7;
    case LRAW_VLIGHTUD: return 72;
    case LRAW_VUSERDATA: return raw_bin_size(v, bins);
    default: return lraw_is_nil(v) ? 5 : 0;
  }
}

/* Nested lists written in place: up to RAW_DEPTH levels (the message's own list the
** first) and RAW_TABLES tables in all, beyond which (very_big(15)'s 76 tables, a
** cycle) the general encoder takes the message, having been tried on a few tables
** only. msgp_medium's big() is 4 tables, 4 levels. */
#define RAW_DEPTH 4
#define RAW_TABLES 8

/* A list table's elements (its array part's up to the first nil) and its lists',
** depth levels down at most, *tables more tables at most (counted down): what they
** and the lists' framing take, or 0 if h or a list in it is not such a list. */
static size_t raw_list_size(const lraw_table *h, int depth, int *tables, rawbins *bins) {
  if (h->lastfree) return 0;   /* a hash part: the general encoder */
  unsigned int asize = lraw_real_asize(h), i = 0;
  const lraw_tvalue *a = h->array;
  size_t sz = 6, one;          /* LIST_EXT's 5 bytes and the [] tail */
  for (; i < asize && !lraw_is_nil(&a[i]); i++) {
    if (a[i].tt == LRAW_VTABLE) {
      if (depth <= 1 || --*tables < 0 ||
          !(one = raw_list_size(a[i].v.gc, depth - 1, tables, bins)))
        return 0;
    } else if (!(one = raw_scalar_size(&a[i], bins))) {
      return 0;
    }
    sz += one;
  }
  for (unsigned int j = i + 1; j < asize; j++)   /* a hole: a map */
    if (!lraw_is_nil(&a[j])) return 0;
  return sz;
}

/* Does the chain of last slots from h (a list's last element, if a table, and its
** last, ...) hold a table past RAW_DEPTH levels? Then raw_list_size refuses h, but
** only when it comes there, after sizing what stands before: very_big(15)'s nest
** {{very_big(I-1)}} is each level's last element, and 37 elements were sized before
** the fifth level refused the message (~860 instructions) for the general encoder.
** A message's long list (8 slots or more: big()'s 4 are not probed) is probed once,
** a few loads a level. Only a guess of which encoder to run, never of the bytes:
** the general encoder writes the same ones, so the slots up to alimit are read (the
** real size may be more, with nils past it: the probe just misses such a nest). */
static inline int raw_deep_last(const lraw_table *h) {
  if (h->alimit < 8) return 0;
  for (int d = 1;; d++) {
    unsigned int n = h->alimit;
    if (n == 0 || h->array[n - 1].tt != LRAW_VTABLE) return 0;
    if (d >= RAW_DEPTH) return 1;
    h = h->array[n - 1].v.gc;
  }
}

/* The block being written: its start (the header) and size; the bytes go through a
** pointer kept apart, so they stay in registers (only a pid's put sees the block). */
typedef struct rawblk {
  uint8_t *data;
  size_t cap, all;   /* all: the whole estimate */
  int err;
  uint8_t pidlen;    /* > 0: the message's first local pid is pidlen bytes at pidat */
  uint8_t pidcopy;   /* pid[] holds them (copied at the second local pid) */
  size_t pidat;
  uint8_t pid[LTERM_PID_MAX];
  rawbins *bins;                   /* the shared binaries sized, and n of them written */
} rawblk;

/* A pid or a reference put at q by lmod_put_light, which grows the block for a node
** name past 48 bytes (another node's); room for the whole estimate (more than what
** is left of it) is then made again, so the direct writes after it still fit. */
static __attribute__((noinline)) uint8_t *raw_put_light(rawblk *r, uint8_t *q, uint64_t id) {
  lpvm_tbuf b = {r->data, (size_t)(q - r->data), r->cap, 0};
  size_t at = b.len;
  lmod_put_light(&b, id);
  size_t n = b.len - at;
  if (!b.err && !(id & (LPVM_ID_PORT_BIT | LPVM_ID_REMOTE_BIT)) && n >= 16 &&
      n <= LTERM_PID_MAX) {   /* a local pid: the next ones are copies (raw_put) */
    r->pidat = at, r->pidlen = (uint8_t)n;   /* copied if another comes */
  }
  if (!b.err && n > 72) lpvm_tbuf_room(&b, r->all);
  r->data = b.data, r->cap = b.cap;
  if (b.err) {   /* out of memory: nothing more is written */
    r->err = b.err;
    return b.data + at;
  }
  return b.data + b.len;
}

/* Put the scalar v (raw_scalar_size's) at q, the room is there (raw_put_light for a
** pid): past it. */
static inline __attribute__((always_inline)) uint8_t *
raw_put(rawblk *r, uint8_t *q, const lraw_tvalue *v) {
  size_t len;
  switch (v->tt) {
    case LRAW_VSHRSTR: case LRAW_VLNGSTR: {
      const char *str = lraw_str(v, &len);
      *q = T_BINARY;
      wr32be(q + 1, (uint32_t)len);
      lterm_copy_bytes(q + 5, str, len);
      return q + 5 + len;
    }
    case LRAW_VNUMINT: {   /* as lpvm_put_int: the smallest form */
      lua_Integer x = v->v.i;
      if (x >= 0 && x <= 255) {
        q[0] = T_SMALL_INT, q[1] = (uint8_t)x;
        return q + 2;
      }
      if (x >= INT32_MIN && x <= INT32_MAX) {
        q[0] = T_INT, wr32be(q + 1, (uint32_t)x);
        return q + 5;
      }
      uint64_t mag = x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x;   /* little-endian */
      uint8_t k = 0;
      q[0] = T_SMALL_BIG, q[2] = x < 0;
      for (; mag != 0; mag >>= 8) q[3 + k++] = (uint8_t)mag;
      q[1] = k;
      return q + 3 + k;
    }
    case LRAW_VNUMFLT: {
      uint64_t bits;
      memcpy(&bits, &v->v.n, sizeof bits);
      q[0] = T_NEW_FLOAT;
      wr32be(q + 1, (uint32_t)(bits >> 32)), wr32be(q + 5, (uint32_t)bits);
      return q + 9;
    }
    case LRAW_VUSERDATA: {   /* a shared binary (raw_scalar_size's): its entry's index */
      uint32_t i = r->bins->n++;
      r->bins->v[i].pos = (uint32_t)(q - r->data - sizeof(lpvm_msg));
      q[0] = 200;   /* TAG_LPVM_BINREF (tasks/term_int.h) */
      wr32be(q + 1, i);
      return q + 5;
    }
    case LRAW_VTRUE: memcpy(q, "\x77\x04" "true", 6); return q + 6;
    case LRAW_VFALSE: memcpy(q, "\x77\x05" "false", 7); return q + 7;
    case LRAW_VLIGHTUD: {   /* a local pid as the message's first, its own ID words */
      uint64_t id = (uint64_t)(uintptr_t)v->v.p;
      size_t n = r->pidlen;
      if (n && !(id & (LPVM_ID_PORT_BIT | LPVM_ID_REMOTE_BIT))) {   /* not a reference */
        if (!r->pidcopy) {   /* the block has 72 bytes a pid, from the first one's start */
          memcpy(r->pid, r->data + r->pidat, LTERM_PID_MAX);
          r->pidcopy = 1;
        }
        memcpy(q, r->pid, LTERM_PID_MAX);
        wr32be(q + n - 12, (uint32_t)id), wr32be(q + n - 8, (uint32_t)(id >> 32));
        return q + n;
      }
      if (!n && (n = lpvm_put_pid_at(q, id)) != 0) {   /* the first: noted for the next */
        r->pidat = (size_t)(q - r->data), r->pidlen = (uint8_t)n;
        return q + n;
      }
      return raw_put_light(r, q, id);
    }
    default: memcpy(q, "\x77\x03" "nil", 5); return q + 5;
  }
}

/* The list h (raw_list_size's) at q: past it. Its elements up to the first nil. */
static uint8_t *raw_put_list(rawblk *r, uint8_t *q, const lraw_table *h) {
  const lraw_tvalue *a = h->array;
  unsigned int asize = lraw_real_asize(h), k = 0;
  if (asize > 0 && !lraw_is_nil(&a[0])) {
    size_t at = (size_t)(q - r->data);   /* the head: a pid's put may move the block */
    q += 5;
    for (; k < asize && !lraw_is_nil(&a[k]) && !r->err; k++)
      q = a[k].tt == LRAW_VTABLE ? raw_put_list(r, q, a[k].v.gc) : raw_put(r, q, &a[k]);
    if (r->err) return q;
    r->data[at] = T_LIST, wr32be(r->data + at + 1, k);
  }
  *q++ = T_NIL;
  return q;
}

/* plain_raw's second half: the block made and written, the values sized to sz, bins
** the shared binaries among them (NULL: none, the common case, for which this is
** inlined without their code). */
static inline __attribute__((always_inline)) int
raw_write(const lraw_tvalue *v, int n, size_t sz, rawbins *bins, lpvm_msg **out) {
  /* a small block from the thread's free lists (vm/lproc_small.h), where the
  ** receiver's take puts it back (vm/lmod_msg.c): malloc and free cost ~70. With
  ** shared binaries, malloc's block with room for their table (lpvm_msg_free's) */
  uint32_t nb = bins ? bins->n : 0;
  size_t cap = nb ? lpvm_msg_bins_room(sz, nb) : sizeof(lpvm_msg) + sz;
  lpvm_msg *m = lpvm_msg_init(nb ? malloc(cap) : lproc_small_alloc(cap), sz);
  *out = m;
  if (!m) return 1;
  /* the block as a builder's (lpvm_msg_build): a pid's put may grow it */
  rawblk r;   /* (pid[] and bins[] are written before they are read: not cleared) */
  r.data = (uint8_t *)m, r.cap = cap, r.all = sz, r.err = 0, r.pidlen = 0;
  r.pidcopy = 0, r.bins = bins;
  if (bins) bins->n = 0;
  uint8_t *q = r.data + sizeof(lpvm_msg);
  *q++ = 131;
  if (n != 1) *q++ = T_SMALL_TUPLE, *q++ = (uint8_t)n;
  for (int i = 0; i < n && !r.err; i++) {
    if (v[i].tt != LRAW_VTABLE) {
      q = raw_put(&r, q, &v[i]);
      continue;
    }
    q = raw_put_list(&r, q, v[i].v.gc);
  }
  if (r.err) {   /* a pid's growth failed */
    free(r.data);
    *out = NULL;
    return 1;
  }
  int exact = r.data == (uint8_t *)m && (size_t)(q - r.data) == sizeof(lpvm_msg) + sz;
  size_t len = (size_t)(q - r.data - sizeof(lpvm_msg));
  if (nb && lpvm_msg_bins_room(len, nb) > r.cap) {   /* a pid grew the block */
    uint8_t *d = realloc(r.data, lpvm_msg_bins_room(len, nb));
    if (!d) {
      free(r.data);
      *out = NULL;
      return 1;
    }
    r.data = d;
  }
  m = (lpvm_msg *)(void *)r.data;
  m->len = (uint32_t)len;
  if (nb) lpvm_msg_set_bins(m, bins->v, nb);   /* each takes a reference */
  else if (exact) m->flags |= LPVM_MSGF_SMALL;   /* its block: lproc_small_size of it */
  *out = m;
  return 1;
}

/* A message with shared binaries: out of line, so that the common one does not carry
** their code. */
static __attribute__((noinline)) int raw_write_bins(const lraw_tvalue *v, int n, size_t sz,
                                                    rawbins *bins, lpvm_msg **out) {
  return raw_write(v, n, sz, bins, out);
}

static int plain_raw(lua_State *L, int idx, int n, lpvm_msg **out) {
  const lraw_tvalue *v = ((const lraw_state *)(void *)L)->ci->func + idx;
  size_t sz = 1 + (n != 1 ? 2 : 0), one;
  int tables = RAW_TABLES;
  rawbins bins;   /* (v[] is written before it is read: not cleared) */
  bins.n = 0;
  for (int i = 0; i < n; i++) {
    one = v[i].tt == LRAW_VTABLE ? (--tables < 0 || raw_deep_last(v[i].v.gc)
                                        ? 0 : raw_list_size(v[i].v.gc, RAW_DEPTH, &tables, &bins))
                                 : raw_scalar_size(&v[i], &bins);
    if (!one) return 0;
    sz += one;
  }
  return bins.n ? raw_write_bins(v, n, sz, &bins, out) : raw_write(v, n, sz, NULL, out);
}

/* The common message: up to LTERM_PLAIN_MAX scalars (nil, booleans, numbers,
** strings, pids, references), each put as it is, sized exactly (a pid or a
** reference: a node name of up to 48 bytes; a longer one grows the block), without
** the encoder's bookkeeping for tables and functions (~250 of a ring hop's ~2,800
** instructions). The bytes are the same as lterm_enc_value's. If a value is not a
** scalar nothing is built: NULL, and *hint is a first guess of the message's size
** for the general encoder (64 bytes a table, 256 a function or another userdata),
** from the same look at the values. A table's guess is small: lterm_msg starts from
** the thread's last message of tables when that was bigger, and a block left with
** more than 256 bytes spare is reallocated to its size (tasks/mailbox.c), which cost
** EStone generic's call (a request {"abc"}, ~120 bytes in all) ~740 instructions in
** jemalloc when a table guessed 256. A message of one binary (lpvm.send(pid, b)) is
** made here too, without the encoder (lpvm_msg_new_bin: its bytes are the encoder's). */
/* The message of the lone binary bin (lbin_to's): its block from the small lists,
** where msg_done puts it back (NULL out of memory). */
static lpvm_msg *lone_bin(lpvm_bin *bin, size_t off, size_t len) {
  size_t sz = lpvm_msg_bin_size();
  void *block = lproc_small_alloc(sz);
  lpvm_msg *m = lpvm_msg_bin_init(block, bin, off, len);
  if (!m) {
    if (block) lproc_small_free(block, sz);
    return NULL;
  }
  m->flags |= LPVM_MSGF_SMALL;
  return m;
}

lpvm_msg *lterm_msg_plain(lua_State *L, int idx, int n, size_t *hint) {
  lpvm_msg *m;
  size_t off, len;
  lpvm_bin *bin;
  if (lraw_ok()) {   /* lpvm.send(pid, b): a userdata's tag read first, no lua_type */
    int ud = n == 1 && (((const lraw_state *)(void *)L)->ci->func + idx)->tt == LRAW_VUSERDATA;
    if (!ud && plain_raw(L, idx, n, &m)) {
      *hint = 0;
      return m;
    }
    if (ud && (bin = lbin_to(L, idx, &off, &len)) != NULL) {
      *hint = 0;
      return lone_bin(bin, off, len);
    }
  } else if (n == 1 && lua_type(L, idx) == LUA_TUSERDATA &&
             (bin = lbin_to(L, idx, &off, &len)) != NULL) {
    *hint = 0;
    return lone_bin(bin, off, len);
  }
  int ty[LTERM_PLAIN_MAX];
  uint64_t refs[LTERM_PLAIN_MAX];   /* a reference's id; a string's length */
  const char *strs[LTERM_PLAIN_MAX];
  size_t sz = n != 1 ? 2 : 0, other = 0, one;
  for (int i = 0; i < n; i++) {
    int t = lua_type(L, idx + i);
    if (t == LUA_TSTRING) {   /* its bytes and length read once */
      size_t len;
      strs[i] = lua_tolstring(L, idx + i, &len);
      ty[i] = LUA_TSTRING, refs[i] = len, sz += 5 + len;
    } else if ((ty[i] = scalar_typed(L, idx + i, t, &one, &refs[i])) < 0) {
      other += t == LUA_TTABLE ? 64 : 256;
    } else {
      sz += one;
    }
  }
  *hint = other ? sz + other + 3 : 0;   /* (a tuple's header may take 5 bytes) */
  if (other) return NULL;
  lpvm_tbuf b;
  lpvm_msg_build(&b, sz);
  if (n != 1) lpvm_put_tuple(&b, (uint32_t)n);
  for (int i = 0; i < n; i++) {
    if (ty[i] == LUA_TSTRING) lpvm_put_binary(&b, strs[i], (size_t)refs[i]);
    else put_scalar(L, idx + i, ty[i], refs[i], &b);
  }
  return lpvm_msg_built(&b, NULL);
}
