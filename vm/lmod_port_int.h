/*
** lmod_port_int.h -- what the files of the `lpvm` port calls share (lmod_port.c):
** argument checks, results, requests still queued at a port, waiting for a port's
** answer, and the caller's mailbox. Not public.
*/
#ifndef LPVM_LMOD_PORT_INT_H
#define LPVM_LMOD_PORT_INT_H

#include <lua.h>
#include <stddef.h>
#include <stdint.h>

#include "lpvm/port.h"
#include "vm/lproc_int.h"

/* The tags of the messages a port sends (docs/ports.md), as bits of a wait mask. */
enum {
  LPORT_W_DATA = 1 << 0, LPORT_W_EOF = 1 << 1, LPORT_W_ERROR = 1 << 2,
  LPORT_W_CLOSED = 1 << 3, LPORT_W_CONNECTED = 1 << 4, LPORT_W_ACCEPT = 1 << 5,
  LPORT_W_READY = 1 << 6, LPORT_W_OK = 1 << 7, LPORT_W_POSITION = 1 << 8,
  LPORT_W_EXIT_STATUS = 1 << 9, LPORT_W_STDERR = 1 << 10, LPORT_W_CANCELLED = 1 << 11
};

/* The option names every stream port takes (lport_opts). */
#define LPORT_OPTS "active", "packet", "high_water", "max_packet"

/* ---- arguments and results ---- */
lpvm_id lport_check(lua_State *L, int arg);
/* The port at arg, which must be one of `kinds` (lpvm_port_kind names, NULL-ended;
** one of the lists below): else raises "<expected> expected, got tcp listener". A
** port that has ended passes (the call then answers "closed"). */
lpvm_id lport_check_kind(lua_State *L, int arg, const char *const kinds[],
                         const char *expected);
extern const char *const lport_stream[];     /* spawn, fd, tcp: "stream port" */
extern const char *const lport_owned[];      /* streams and tcp listeners */
extern const char *const lport_listener[];   /* "tcp listener" */
extern const char *const lport_file[];       /* "file port" */
/* The calling process; raises inside a receive predicate (fname: the call's name). */
lproc *lport_check_proc(lua_State *L, const char *fname);
/* nil, reason for a failed C call; LPVM_ESYS carries errno (saved by the caller). */
int lport_fail(lua_State *L, int rc, int err);
int lport_ok(lua_State *L, int rc);          /* true, or lport_fail */
int lport_reason(lua_State *L, const char *reason);   /* nil, reason */
/* A timeout argument in ms: nil = forever (-1). */
int64_t lport_opt_ms(lua_State *L, int arg);
/* The options table at arg (nil or absent: none): its index, or 0; raises on a key
** not in `known`. */
int lport_opt_table(lua_State *L, int arg, const char *const known[]);
lua_Integer lport_opt_int(lua_State *L, int t, const char *k, lua_Integer dflt,
                          lua_Integer lo, lua_Integer hi);
int lport_opt_flag(lua_State *L, int t, const char *k, int dflt);
/* true | false | "once" at idx (LPVM_ACTIVE_*); raises naming arg. */
int lport_to_active(lua_State *L, int idx, int arg);
/* "raw" | "line" | 0 | 1 | 2 | 4 at idx (LPVM_PACKET_*); raises naming arg. */
int lport_to_packet(lua_State *L, int idx, int arg);
/* The options every stream port takes, from table t (0: defaults). */
void lport_opts(lua_State *L, int t, lpvm_port_opts *po);
/* Data to send: a string or a table of strings (an iolist), left at index arg. */
const char *lport_check_data(lua_State *L, int arg, size_t *len);

/* ---- requests that are still queued at a port ---- */
void lport_pending_set(lua_State *L, lpvm_id port, int on);
int lport_pending_get(lua_State *L, lpvm_id port);

/* ---- waiting for a port's answer ---- */
/* Push receive(pred, ms) for lport_wait: ready for lua_callk(L, 2, ...). */
void lport_push_wait(lua_State *L, lpvm_id port, unsigned mask, uint64_t mref, int64_t ms);
/* Wait for the next message of `port` whose tag is in `mask`, or for the DOWN of
** monitor `mref`; ms < 0: forever. Its values are pushed above the current top,
** which k receives as its context. */
int lport_wait(lua_State *L, lpvm_id port, unsigned mask, uint64_t mref, int64_t ms,
               lua_KFunction k);
/* The tag of the answer at base + 1 (NULL: the wait timed out). */
const char *lport_answer(lua_State *L, lua_KContext base);
/* The answer's value (at base + 3) when `ok`; nil, reason for {error, Port, Reason};
** 0 (nothing pushed) for any other tag. */
int lport_value(lua_State *L, lua_KContext base, const char *tag, int ok);

/* ---- the caller's mailbox ---- */
/* Drop every message `port` sent the caller (and close connections it delivered). */
void lport_flush(lproc *p, lpvm_id port);
/* Stop monitor mref and drop its DOWN if it already came. */
void lport_drop_monitor(lproc *p, uint64_t mref);
/* Monitor `port`, the reference pushed as an integer (so it survives a yield). */
uint64_t lport_push_monitor(lua_State *L, lproc *p, lpvm_id port);

/* ---- the calls (lmod_port_fns) ---- */
int lmod_open_port(lua_State *L);             /* lmod_port_prog.c */
int lmod_fd_port(lua_State *L);
int lmod_port_send(lua_State *L);             /* lmod_port_stream.c */
int lmod_recv(lua_State *L);
int lmod_set_active(lua_State *L);
int lmod_set_packet(lua_State *L);
int lmod_shutdown(lua_State *L);
int lmod_controlling_process(lua_State *L);
int lmod_port_close(lua_State *L);
int lmod_is_port(lua_State *L);
int lmod_tcp_listen(lua_State *L);            /* lmod_port_tcp.c */
int lmod_tcp_accept(lua_State *L);
int lmod_tcp_connect(lua_State *L);
int lmod_file_open(lua_State *L);             /* lmod_port_file.c */
int lmod_file_read(lua_State *L);
int lmod_file_write(lua_State *L);
int lmod_file_seek(lua_State *L);

#endif
