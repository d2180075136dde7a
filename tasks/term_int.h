/*
** term_int.h -- what the three halves of the term codec share: the tags of Erlang's
** external term format, byte-order helpers and the few parsers the formatter reuses.
** Not public: C tasks use include/lpvm/term.h.
*/
#ifndef LPVM_TERM_INT_H
#define LPVM_TERM_INT_H

#include <stdint.h>
#include <string.h>

#include "lpvm/binary.h"
#include "lpvm/term.h"

/* Tags (erts external term format, "External Term Format" in the ERTS guide). */
enum {
  TERM_VERSION = 131,
  TAG_NEW_FLOAT = 70,        /* 8-byte IEEE double, big-endian */
  TAG_BIT_BINARY = 77,
  TAG_COMPRESSED = 80,
  TAG_NEW_PID = 88,          /* node, id:32, serial:32, creation:32 */
  TAG_NEW_PORT = 89,         /* node, id:32, creation:32 */
  TAG_NEWER_REF = 90,        /* len:16, node, creation:32, len x id:32 */
  TAG_SMALL_INT = 97,
  TAG_INT = 98,
  TAG_FLOAT = 99,            /* 31-byte "%.20e" string, the pre-R11 form */
  TAG_ATOM = 100,            /* Latin-1, len:16 */
  TAG_REF = 101,             /* node, id:32, creation:8 */
  TAG_PORT = 102,            /* node, id:32, creation:8 */
  TAG_PID = 103,             /* node, id:32, serial:32, creation:8 */
  TAG_SMALL_TUPLE = 104,
  TAG_LARGE_TUPLE = 105,
  TAG_NIL = 106,
  TAG_STRING = 107,          /* len:16 bytes, a list of small integers */
  TAG_LIST = 108,
  TAG_BINARY = 109,
  TAG_SMALL_BIG = 110,
  TAG_LARGE_BIG = 111,
  TAG_NEW_FUN = 112,
  TAG_EXPORT = 113,
  TAG_NEW_REF = 114,         /* len:16, node, creation:8, len x id:32 */
  TAG_SMALL_ATOM = 115,      /* Latin-1, len:8 */
  TAG_MAP = 116,
  TAG_ATOM_UTF8 = 118,
  TAG_SMALL_ATOM_UTF8 = 119,
  TAG_V4_PORT = 120,         /* node, id:64, creation:32 */
  /* Not Erlang's: a shared binary of a message, index:32 into the table after the
  ** term (lpvm/binary.h). Only lpvm_get_binref reads it, given the message's table:
  ** in any other input (another node, a file, a port) it is an unknown tag. */
  TAG_LPVM_BINREF = 200
};

/* The node every lpvm pid, port and reference belongs to, and its creation. The
** creation is not 0 on purpose: a non-distributed erl is itself nonode@nohost with
** creation 0 and would take such pids for its own, which only hold 15+13 bits. */
#define TERM_NODE "nonode@nohost"
#define TERM_NODE_LEN 13
#define TERM_CREATION 1u

static inline uint16_t term_be16(const uint8_t *p) {
  return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}

static inline uint32_t term_be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t term_be64(const uint8_t *p) {
  return (uint64_t)term_be32(p) << 32 | term_be32(p + 4);
}

/* Bytes left between p and end (p <= end always holds in the reader). */
static inline size_t term_left(const uint8_t *p, const uint8_t *end) {
  return (size_t)(end - p);
}

/* A pid, port or reference taken apart. */
typedef struct term_ident {
  int type;                  /* LPVM_T_PID, LPVM_T_PORT or LPVM_T_REF */
  const char *node;          /* node atom name (not NUL-ended) */
  size_t node_len;
  uint32_t creation;
  uint64_t id;               /* pid: id | serial << 32; port: id; ref: w0 | w1 << 32 */
  const uint8_t *words;      /* ref: the raw big-endian id words */
  uint32_t nwords;
} term_ident;

/* A big integer taken apart: magnitude bytes little-endian, high zero bytes dropped. */
typedef struct term_big {
  const uint8_t *digits;
  size_t n;
  int neg;
} term_big;

/* Parsers over [p, end): 0 and *next past the term, or LPVM_EBADTERM. */
int term_atom_at(const uint8_t *p, const uint8_t *end, const char **name,
                 size_t *len, int *latin1, const uint8_t **next);
int term_ident_at(const uint8_t *p, const uint8_t *end, term_ident *id,
                  const uint8_t **next);
int term_big_at(const uint8_t *p, const uint8_t *end, term_big *big,
                const uint8_t **next);
/* Is this node name lpvm's own? */
int term_node_is_local(const char *node, size_t len);

/* term_enc.c: append the bytes of a well-formed term (no version byte), unchecked. */
void term_put_raw(lpvm_tbuf *b, const void *p, size_t n);

/* term_cmp.c: Erlang's term order over two well-formed terms (no version byte):
** <0, 0, >0. exact: =:= (1 < 1.0), else == (1 == 1.0). The hash agrees with the
** exact equality whatever the encoding; term_depth stops counting at limit. */
int term_cmp(const uint8_t *a, const uint8_t *aend, const uint8_t *b,
             const uint8_t *bend, int exact);
uint64_t term_hash_at(const uint8_t *p, const uint8_t *end);   /* any term */
/* term_hash's mixing step, and the class numbers hash in (Erlang's order: 1). */
static inline uint64_t term_mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 29);
}
#define TERM_HASH_NUM 1
/* The commonest keys, small integers, inline without the general walk: the very value
** term_hash_at gives them (their class, mixed with the integer). */
static inline uint64_t term_hash(const uint8_t *p, const uint8_t *end) {
  if (end - p == 2 && p[0] == TAG_SMALL_INT) return term_mix(TERM_HASH_NUM, p[1]);
  if (end - p == 5 && p[0] == TAG_INT)
    return term_mix(TERM_HASH_NUM, (uint64_t)(int64_t)(int32_t)term_be32(p + 1));
  return term_hash_at(p, end);
}
int term_depth(const uint8_t *p, const uint8_t *end, int limit);

/* A reader consumed one whole term (or a container's header) ending at next: it was
** one of the terms the enclosing containers owe (lpvm_tread.owed). */
static inline int term_took(lpvm_tread *r, const uint8_t *next) {
  r->p = next;
  if (r->owed) r->owed--;
  return 0;
}

#endif
