/*
** lterm.h -- Lua values <-> Erlang external terms (docs/terms.md, "Lua values and terms").
**
** Lua to term:  nil -> 'nil'; true/false -> 'true'/'false'; integer -> integer;
**   float -> float; string -> binary; lpvm.binary -> binary (in lterm_msg a shared
**   reference, lpvm/binary.h); pid -> pid; reference -> reference;
**   a table whose keys are exactly 1..n -> list (the empty table -> []);
**   any other table -> map. Several values -> a tuple; one value travels bare.
**   A Lua function travels with copies of its upvalues, a C function by name: a
**   message holding one is a graph {lpvm_graph, Message} in which tables keep their
**   identity and may be cyclic (lfun.c, docs/terms.md "Functions"). Userdata (other
**   than references), threads and cyclic tables outside a graph are an error at the
**   sender; nothing is sent then. Exit reasons hold no functions.
** Term to Lua:  'nil' -> nil; 'true'/'false' -> booleans; any other atom -> string;
**   binary -> string (a message's shared binary -> that binary); integer -> integer (bigger than 64 bits: float); float ->
**   float; pid or port -> pid; reference -> reference; list and string -> sequence;
**   [] -> {}; map -> table (pairs with a nil key are dropped); a tuple inside a term
**   -> sequence {e1, ..., en}; a message that is a tuple -> its elements as values.
**   Anything else (funs, bit strings, ...) -> its Erlang text as a string.
*/
#ifndef LPVM_LTERM_H
#define LPVM_LTERM_H

#include <lua.h>
#include <stddef.h>

#include "lpvm/term.h"

#define LTERM_ERRSZ 160

/* Encode one Lua value. Never raises: returns 0, or -1 with a message in err
** ("cannot send a function value", "cannot send a cyclic table", ...). */
int lterm_put(lua_State *L, int idx, lpvm_tbuf *b, char *err);
/* lterm_put without functions ("cannot send a function value"): for readers that
** are not Lua processes of this VM (C tasks, printed values). */
int lterm_put_plain(lua_State *L, int idx, lpvm_tbuf *b, char *err);
/* Encode the n values from idx as a message (one bare value, or a tuple). */
int lterm_put_values(lua_State *L, int idx, int n, lpvm_tbuf *b, char *err);
/* Encode an exit reason: a string that can be an atom becomes one ("normal",
** "kill", "shutdown" keep their Erlang meaning), anything else as lterm_put. */
int lterm_put_reason(lua_State *L, int idx, lpvm_tbuf *b, char *err);

/* A per-thread builder reused by every send, so a send allocates only its message. */
lpvm_tbuf *lterm_scratch(void);
/* The n values from idx as a message (lterm_put_values) for a process of this node:
** built in the scratch builder, and a binary (lpvm.binary) goes in by reference
** (lpvm/binary.h), not copied. NULL with a message in err when it cannot be sent. */
lpvm_msg *lterm_msg(lua_State *L, int idx, int n, char *err);
/* The same a value at a time (lmod_call.c's call tuple): lterm_msg_begin gives the
** scratch builder (NULL: out of memory), lpvm_put_* and lterm_put_shared (one value,
** no functions, binaries by reference) write into it, lterm_msg_end makes the
** message (NULL with err set). A failed lterm_put_shared leaves the builder to the
** next lterm_msg_begin or lterm_msg. */
lpvm_tbuf *lterm_msg_begin(void);
/* A scalar (nil, boolean, number, string, pid, reference) at idx: its Lua type and
** the bytes it takes at most (*ref: a reference's id), else -1; lterm_put_scalar puts
** it as lterm_put would (t and ref as lterm_scalar gave them). For a message built
** in place (lpvm_msg_build) around one value, as lmod_call.c's call and reply. */
int lterm_scalar(lua_State *L, int idx, size_t *sz, uint64_t *ref);
void lterm_put_scalar(lua_State *L, int idx, int t, uint64_t ref, lpvm_tbuf *b);
int lterm_put_shared(lua_State *L, int idx, lpvm_tbuf *b, char *err);
lpvm_msg *lterm_msg_end(lpvm_tbuf *b, char *err);

/* Decode a whole term: a top-level tuple pushes its elements, anything else one
** value. Returns how many values were pushed. Raises a Lua error on a malformed
** term or when out of memory: call it only where errors are caught. */
int lterm_push_values(lua_State *L, const uint8_t *term, size_t len);
/* The same, for bytes that may not come from this VM's encoder: with trusted 0 a
** function term ({lpvm_graph, ..}, {lpvm_fun, ..}) reads as plain data and no
** bytecode is loaded (loading crafted bytecode can crash the VM). */
int lterm_push_values_ex(lua_State *L, const uint8_t *term, size_t len, int trusted);
/* A message's values: functions load from this node's processes, and from other
** (authenticated) nodes unless lterm_trust_remote_funs(0) was called (lpvm
** --no-remote-code): then they read as plain data. */
int lterm_push_msg(lua_State *L, const lpvm_msg *m);
/* lterm_push_msg without the first value (a reply's reference: lpvm.call). */
int lterm_push_msg_tail(lua_State *L, const lpvm_msg *m);
/* A message of this node {label, pid, ref, value} (label a string, pid and ref this
** node's: lmod_call.c's call tuple): 1 with the pid, the reference and where the value
** begins, which lterm_push_in then pushes (raising as lterm_push_msg on a malformed
** term, and on bytes after it); 0 for any other message. */
int lterm_call_head(const lpvm_msg *m, const char *label, size_t len, lpvm_id *pid,
                    uint64_t *ref, const uint8_t **at);
void lterm_push_in(lua_State *L, const lpvm_msg *m, const uint8_t *at);
void lterm_trust_remote_funs(int on);
int lterm_remote_funs_trusted(void);
/* Decode one value at r (which advances). Raises like lterm_push_values. */
void lterm_push(lua_State *L, lpvm_tread *r);

/* lterm_depth.c: 1 if the term holds a value deeper than the decoder reads
** (LTERM_DEPTH): a message of a C task, a port or lpvm_send that no receive could
** decode. Shorter than LTERM_DEEP_MIN bytes it cannot be (one compare). */
#define LTERM_DEEP_MIN (2 * (200 + 1))
int lterm_too_deep(const uint8_t *term, size_t len);

/* The bytes (a complete term) of a foreign reference value at idx, or NULL. */
const uint8_t *lterm_foreign(lua_State *L, int idx, size_t *len);
/* Push a term Lua has no value for (a complete term) as such a foreign value. */
void lterm_push_foreign(lua_State *L, const uint8_t *term, size_t len);

#endif
