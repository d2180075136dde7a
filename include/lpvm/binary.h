/*
** binary.h -- immutable, reference-counted binaries shared by messages (docs/binaries.md).
**
** A lpvm_bin is a byte buffer that never changes after it is made, with an atomic
** reference count: a message that carries one holds a reference instead of a copy of
** the bytes, as BEAM's off-heap (refc) binaries do. Any thread may keep or drop a
** reference; the last drop frees the buffer.
**
** A message with binaries: its term has, where each binary is, the 5-byte tag
** TAG_LPVM_BINREF (200) and a 32-bit index into a table that follows the term in
** the same allocation (one lpvm_binref per occurrence, each holding one reference);
** the message's flags have LPVM_MSGF_BINS. lpvm_msg_free drops the references, so
** every path that frees a message (received, dropped at a dead receiver, flushed
** by an exit, refused by a mailbox limit) releases them exactly once. A reader that
** wants them asks with the message's table (lpvm_get_binref, lpvm_get_bytes); to
** every other reader the tag is unknown, so a term anywhere else (another node, a
** file, ETS) cannot smuggle a reference in: it is malformed. Leaving
** the node, a message is flattened: each reference becomes a BINARY_EXT with the
** bytes (lpvm_msg_flat_len/lpvm_msg_flat_write), byte for byte what
** erlang:term_to_binary writes for a binary.
*/
#ifndef LPVM_BINARY_H
#define LPVM_BINARY_H

#include <stddef.h>
#include <stdint.h>

#include "task.h"
#include "term.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LPVM_MSGF_BINS 1u          /* lpvm_sig.flags: a binref table follows the term */
/* lpvm_sig.flags: a process's values, encoded by vm/lterm.c: never one of the runtime's
** markers (an interrupt's wake-up, an eval request), which receive need not look for */
#define LPVM_MSGF_VALUES 2u
/* lpvm_sig.flags, on a call (vm/lmod_call.c): the caller drops its monitor of the
** server when the reply comes, so the server may drop its half as it replies
** (lpvm_unwatch); on the reply: it did, the caller drops its half without sending a
** DEMONITOR (lpvm_demonitor_quiet) */
#define LPVM_MSGF_UNWATCH 4u
/* lpvm_sig.flags: the message's block holds its header and term rounded up to 8 bytes
** (vm/lterm_plain.c's, from vm/lproc_small.h's free lists), so its taker may put it
** back in the list of that size (vm/lmod_msg.c) */
#define LPVM_MSGF_SMALL 8u   /* with LPVM_MSGF_BINS: a lone binary's, lpvm_msg_bin_size() */
/* lpvm_sig.flags, set by its receiver (vm/lmod_msg.c): a message sent to an alias
** that came before the DOWN which ended the alias, so it stays deliverable */
#define LPVM_MSGF_ADMIT 16u
/* lpvm_sig.flags, set by its receiver (vm/lmod_msg.c): a message not of values looked
** at once and found no deeper than a Lua value can be (vm/lterm_depth.c) */
#define LPVM_MSGF_SHALLOW 32u
#define LPVM_BIN_MAX 0xFFFFFFFFu   /* BINARY_EXT's 32-bit length */

typedef struct lpvm_bin lpvm_bin;

/* One binary in a message: bytes [off, off + len) of bin; pos is where its tag is in
** the term (the flattener replaces it there). */
typedef struct lpvm_binref {
  lpvm_bin *bin;
  uint32_t off, len, pos, pad;
} lpvm_binref;

/* A new binary holding a copy of len bytes, with one reference (the caller's).
** NULL when out of memory or len > LPVM_BIN_MAX. */
LPVM_API lpvm_bin *lpvm_bin_new(const void *data, size_t len);
LPVM_API void lpvm_bin_keep(lpvm_bin *b);   /* one more reference */
LPVM_API void lpvm_bin_drop(lpvm_bin *b);   /* one less; the last frees it; NULL: nothing */
LPVM_API const uint8_t *lpvm_bin_data(const lpvm_bin *b);
LPVM_API size_t lpvm_bin_len(const lpvm_bin *b);
/* Binaries alive in this process and their bytes (what tests check leaks by). */
LPVM_API void lpvm_bin_stats(size_t *count, size_t *bytes);

/* ---- building a message with binaries ---------------------------------------------- */

/* The binaries met while building one term (no reference held: the builder's caller
** keeps them alive until lpvm_tbuf_to_msg_bins). Zero-initialise it. */
typedef struct lpvm_binrefs {
  lpvm_binref *v;
  uint32_t n, cap;
} lpvm_binrefs;

/* Append bytes [off, off + len) of bin as one binary term, shared. Errors stick in
** b->err like any put (LPVM_ENOMEM; LPVM_EINVAL if the range is outside bin). */
LPVM_API void lpvm_put_bin(lpvm_tbuf *b, lpvm_binrefs *refs, lpvm_bin *bin, size_t off,
                           size_t len);
/* lpvm_tbuf_to_msg for a term with shared binaries: the message takes a reference to
** each (without any, it is exactly lpvm_tbuf_to_msg). refs is emptied either way. */
LPVM_API lpvm_msg *lpvm_tbuf_to_msg_bins(lpvm_tbuf *b, lpvm_binrefs *refs);
/* A message holding a copy of term (len bytes, its 131 first) and a reference to each
** binary of refs (NULL: none), which is emptied. NULL when out of memory. */
LPVM_API lpvm_msg *lpvm_msg_new_term(const uint8_t *term, size_t len, lpvm_binrefs *refs);
/* A message built in place, with no copy of its term: lpvm_msg_build points b at the
** message's own block (room for the header, then the version byte), hint the term's
** expected size (it grows as any builder does: the header moves with it); the
** lpvm_put_* functions fill it; lpvm_msg_built makes it the message, taking a
** reference to each binary of refs (NULL: none), which is emptied. After an error
** (b->err; LPVM_ENOMEM if the block could not be had) it frees the block and returns
** NULL. Either way b is emptied. */
LPVM_API void lpvm_msg_build(lpvm_tbuf *b, size_t hint);
LPVM_API lpvm_msg *lpvm_msg_built(lpvm_tbuf *b, lpvm_binrefs *refs);
LPVM_API void lpvm_binrefs_free(lpvm_binrefs *refs);
/* A message that is the one shared binary [off, off + len) of bin (what building
** it with lpvm_put_bin alone makes), taking a reference; NULL when out of memory or
** the range is outside bin. */
LPVM_API lpvm_msg *lpvm_msg_new_bin(lpvm_bin *bin, size_t off, size_t len);
/* The same in a block of lpvm_msg_bin_size() bytes the caller has (NULL: block NULL or
** the range outside bin, the block untouched), which lpvm_msg_free can free. */
LPVM_API size_t lpvm_msg_bin_size(void);
LPVM_API lpvm_msg *lpvm_msg_bin_init(void *block, lpvm_bin *bin, size_t off, size_t len);
/* Drop the references m's binaries hold (each once) and forget them: m is then its
** block only, as a message without binaries, for a taker that keeps blocks. */
LPVM_API void lpvm_msg_drop_bins(lpvm_msg *m);

/* ---- reading one ----------------------------------------------------------------------- */

/* At a shared binary of the message whose table is bins (lpvm_msg_bins): its entry
** (no new reference: keep one to outlive the message). lpvm_get_type says
** LPVM_T_OTHER there, and plain readers (lpvm_skip, lpvm_get_binary) refuse it. */
LPVM_API int lpvm_get_binref(lpvm_tread *r, const lpvm_binref *bins, uint32_t nbins,
                             lpvm_binref *out);
/* A binary's bytes, shared (pointing into the binary) or in the term (BINARY_EXT). */
LPVM_API int lpvm_get_bytes(lpvm_tread *r, const lpvm_binref *bins, uint32_t nbins,
                            const uint8_t **data, size_t *len);
/* The table of m's binaries (NULL, *n = 0 without). */
LPVM_API const lpvm_binref *lpvm_msg_bins(const lpvm_msg *m, uint32_t *n);
/* If m is one shared binary and nothing else (lpvm_msg_new_bin's, or the same term
** built otherwise): its entry (no new reference), else NULL. */
LPVM_API const lpvm_binref *lpvm_msg_lone_bin(const lpvm_msg *m);

/* The term of m as it leaves the node: every shared binary a BINARY_EXT. flat_len is
** its length (lpvm_msg_len(m) plus the binaries' bytes); flat_write writes it. */
LPVM_API size_t lpvm_msg_flat_len(const lpvm_msg *m);
LPVM_API void lpvm_msg_flat_write(const lpvm_msg *m, uint8_t *out);
/* m itself if it has no binaries, else a new flat message (same from/ref/kind) and m
** is freed; NULL when out of memory (m is still the caller's). */
LPVM_API lpvm_msg *lpvm_msg_flatten(lpvm_msg *m);

#ifdef __cplusplus
}
#endif

#endif
