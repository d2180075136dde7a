/*
** term.h -- build and read messages in Erlang's external term format (version 131).
**
** Every message and exit reason in lpvm is a complete external term: the byte 131
** followed by one encoded term, exactly what erlang:term_to_binary/1 produces, so a
** real Erlang can check every encoding. The core moves these buffers and never looks
** inside; C tasks build them with a lpvm_tbuf and read them with a lpvm_tread.
**
** Pids, ports and references belong to this node: 'nonode@nohost' with creation 1, or
** the name and creation of a distributed node (docs/distribution.md): a pid's
** ID is the slot of its lpvm_id and its Serial the generation (NEW_PID_EXT); a port's
** 64-bit ID is its lpvm_id without the port bit (V4_PORT_EXT); a reference carries the
** 64-bit lpvm reference in the first two of its three ID words (NEWER_REFERENCE_EXT).
** Not creation 0: a non-distributed erl is itself nonode@nohost/0 and takes such ids
** for its own local ones, which hold only a 15-bit pid ID, 13-bit serial, 28-bit port
** ID and 18-bit first reference word; it refuses the rest with badarg (seen in OTP 25).
** With creation 1 erl keeps every bit and prints <0.SLOT.GEN>, as lpvm does. Readers
** accept any creation of nonode@nohost or this node (a pid erl made reads as the same
** lpvm_id); a pid of another node reads as a remote id (lpvm_id_is_remote), which
** writes back byte for byte; other nodes' ports and references are refused.
**
** Also: a builder's first error sticks in b->err and later puts do nothing;
** lpvm_tbuf_to_msg empties the builder whatever happens (lpvm_tbuf_free after it is
** harmless, and a later put starts a new term); lpvm_put_list(b, 0) writes nothing, so
** with its tail it gives [] as Erlang writes it. NaN and infinities encode, but erl
** refuses them. An erl reference of three words reads as its two low words. Atoms
** in the old Latin-1 forms (ATOM_EXT, SMALL_ATOM_EXT: erl before OTP 26) are returned
** as stored. docs/terms.md has the whole contract.
*/
#ifndef LPVM_TERM_H
#define LPVM_TERM_H

#include <stddef.h>
#include <stdint.h>

#include "task.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- building ------------------------------------------------------------------ */

struct lpvm_tbuf {
  uint8_t *data;
  size_t len, cap;
  int err;              /* first error (LPVM_ENOMEM); later puts do nothing */
};

/* Start a term: writes the version byte. */
LPVM_API void lpvm_tbuf_init(lpvm_tbuf *b);
LPVM_API void lpvm_tbuf_free(lpvm_tbuf *b);
/* Hand the bytes to a new message (the builder is emptied). NULL on error. */
LPVM_API lpvm_msg *lpvm_tbuf_to_msg(lpvm_tbuf *b);
/* Start a new term in the same builder, clearing any error and keeping the buffer
** (unless it grew past 64 KiB): a builder reused for every send stops allocating. */
LPVM_API void lpvm_tbuf_reset(lpvm_tbuf *b);

/* Where the next n bytes go, the buffer grown if it must (NULL after an error, which
** b->err keeps): for a codec that writes a term's bytes itself, then adds to b->len
** what it wrote (vm/lterm_raw.c's lists). The lpvm_put_* functions are this and a few
** stores. */
LPVM_API uint8_t *lpvm_tbuf_room(lpvm_tbuf *b, size_t n);

/* Each put appends one term (containers: their header; the elements follow). */
LPVM_API void lpvm_put_atom(lpvm_tbuf *b, const char *name);          /* UTF-8, < 256 chars */
LPVM_API void lpvm_put_atom_len(lpvm_tbuf *b, const char *name, size_t len);
LPVM_API void lpvm_put_int(lpvm_tbuf *b, int64_t v);                   /* smallest encoding */
LPVM_API void lpvm_put_float(lpvm_tbuf *b, double v);                  /* NEW_FLOAT_EXT */
LPVM_API void lpvm_put_binary(lpvm_tbuf *b, const void *p, size_t len);
LPVM_API void lpvm_put_pid(lpvm_tbuf *b, lpvm_id id);                  /* port ids as ports */
/* A pid of this node (not a port) whose node atom takes at most 16 bytes
** (nonode@nohost's 15) written at q, which has room for 29 bytes, without a builder:
** the bytes written (lpvm_put_pid's), or 0 for any other id (nothing written: then
** lpvm_put_pid). For a codec that writes its terms at lpvm_tbuf_room. */
LPVM_API size_t lpvm_put_pid_at(uint8_t *q, lpvm_id id);
LPVM_API void lpvm_put_ref(lpvm_tbuf *b, uint64_t ref);
LPVM_API void lpvm_put_tuple(lpvm_tbuf *b, uint32_t arity);
LPVM_API void lpvm_put_list(lpvm_tbuf *b, uint32_t n);  /* n elements, then a tail: put_nil */
LPVM_API void lpvm_put_nil(lpvm_tbuf *b);
LPVM_API void lpvm_put_map(lpvm_tbuf *b, uint32_t pairs);              /* key, value, ... */
/* A map whose size is known later: returns a mark for lpvm_patch_map. */
LPVM_API size_t lpvm_put_map_open(lpvm_tbuf *b);
LPVM_API void lpvm_patch_map(lpvm_tbuf *b, size_t mark, uint32_t pairs);
/* Append a complete external term (with its 131 byte) as one element. */
LPVM_API void lpvm_put_term(lpvm_tbuf *b, const uint8_t *term, size_t len);

/* ---- reading -------------------------------------------------------------------- */

enum {
  LPVM_T_ATOM = 1, LPVM_T_INT, LPVM_T_BIGINT, LPVM_T_FLOAT, LPVM_T_BINARY,
  LPVM_T_PID, LPVM_T_PORT, LPVM_T_REF, LPVM_T_TUPLE, LPVM_T_NIL, LPVM_T_LIST,
  LPVM_T_STRING, LPVM_T_MAP, LPVM_T_OTHER
};

typedef struct lpvm_tread {
  const uint8_t *p, *end;
  /* terms the containers opened so far still promise; each needs a byte of input, so
  ** the counts a reader sizes its tables by add up to at most the input's length */
  uint64_t owed;
} lpvm_tread;

/* Check the version byte; LPVM_EBADTERM if absent. */
LPVM_API int lpvm_tread_init(lpvm_tread *r, const uint8_t *term, size_t len);
/* Type of the next term (LPVM_T_*), or LPVM_EBADTERM at the end of input. */
LPVM_API int lpvm_get_type(const lpvm_tread *r);
/* Each get consumes one term (containers: their header) or returns LPVM_EBADTERM
** (wrong type or truncated input) and consumes nothing. A container's count is
** checked against the bytes left after what the enclosing containers still owe, so
** a reader may allocate by it: the sum of all counts stays within the input size. */
LPVM_API int lpvm_get_atom(lpvm_tread *r, const char **name, size_t *len);
LPVM_API int lpvm_get_int(lpvm_tread *r, int64_t *v);      /* also bigs that fit in 64 bits */
LPVM_API int lpvm_get_float(lpvm_tread *r, double *v);
LPVM_API int lpvm_get_binary(lpvm_tread *r, const uint8_t **p, size_t *len);
LPVM_API int lpvm_get_string(lpvm_tread *r, const uint8_t **p, size_t *len);  /* STRING_EXT */
LPVM_API int lpvm_get_pid(lpvm_tread *r, lpvm_id *id);     /* pid or port of this node */
LPVM_API int lpvm_get_ref(lpvm_tread *r, uint64_t *ref);
LPVM_API int lpvm_get_tuple(lpvm_tread *r, uint32_t *arity);
LPVM_API int lpvm_get_list(lpvm_tread *r, uint32_t *n);    /* then n elements and a tail */
LPVM_API int lpvm_get_nil(lpvm_tread *r);
LPVM_API int lpvm_get_map(lpvm_tread *r, uint32_t *pairs);
/* Skip one whole term, containers included (bounded depth, no recursion on C stack). */
LPVM_API int lpvm_skip(lpvm_tread *r);

/* Convenience for whole terms. */
LPVM_API int lpvm_term_is_atom(const uint8_t *term, size_t len, const char *atom);
/* Check a whole buffer is one well-formed term with nothing after it. */
LPVM_API int lpvm_term_check(const uint8_t *term, size_t len);
/* Write a readable Erlang-syntax rendering (truncated to cap-1 chars, NUL-ended);
** returns the length it would have had. For logs and error messages. */
LPVM_API size_t lpvm_term_format(const uint8_t *term, size_t len, char *out, size_t cap);
/* 1 when some value of the term sits deeper than `limit` levels, counted as lpvm's Lua
** decoder counts them (the term at 0; a tuple's, list's or map's elements one deeper;
** an improper list's tail not a level); else 0, also for a term found malformed
** before that depth (lpvm_term_check says that). A Lua process takes messages up to 200 levels: a C task
** can check what it builds before sending. A term shorter than 2 bytes a level
** cannot be that deep: most cost one compare. */
LPVM_API int lpvm_term_too_deep(const uint8_t *term, size_t len, int limit);

#ifdef __cplusplus
}
#endif

#endif
