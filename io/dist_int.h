/*
** dist_int.h -- what the io/dist_*.c files share: the handshake codec, the EPMD
** client, the connection task and the node-wide state (dist.c).
**
** Erlang's distribution protocol (ERTS User's Guide, "Distribution Protocol"):
** EPMD maps node names to ports; a connection starts with a handshake of 2-byte
** framed messages (version 6, OTP 23+) in which each side proves it knows the
** cookie with an MD5 digest of the other's challenge; then 4-byte framed packets
** carry a control tuple and maybe a message, both external terms, and an empty
** packet is a tick that keeps an idle connection alive.
*/
#ifndef LPVM_IO_DIST_INT_H
#define LPVM_IO_DIST_INT_H

#include <stddef.h>
#include <stdint.h>

#include "lpvm/term.h"
#include "lpvm/dist.h"
#include "tasks/node.h"

/* Capability flags (DFLAG_*). */
#define DF_PUBLISHED          UINT64_C(0x1)
#define DF_EXTENDED_REFS      UINT64_C(0x4)
#define DF_DIST_MONITOR       UINT64_C(0x8)
#define DF_FUN_TAGS           UINT64_C(0x10)
#define DF_DIST_MONITOR_NAME  UINT64_C(0x20)
#define DF_NEW_FUN_TAGS       UINT64_C(0x80)
#define DF_EXTENDED_PIDS      UINT64_C(0x100)
#define DF_EXPORT_PTR_TAG     UINT64_C(0x200)
#define DF_BIT_BINARIES       UINT64_C(0x400)
#define DF_NEW_FLOATS         UINT64_C(0x800)
#define DF_UNICODE_IO         UINT64_C(0x1000)
#define DF_SMALL_ATOM_TAGS    UINT64_C(0x4000)
#define DF_UTF8_ATOMS         UINT64_C(0x10000)
#define DF_MAP_TAG            UINT64_C(0x20000)
#define DF_BIG_CREATION       UINT64_C(0x40000)
#define DF_SEND_SENDER        UINT64_C(0x80000)
#define DF_BIG_SEQTRACE       UINT64_C(0x100000)
#define DF_EXIT_PAYLOAD       UINT64_C(0x400000)
#define DF_HANDSHAKE_23       UINT64_C(0x1000000)
#define DF_UNLINK_ID          UINT64_C(0x2000000)
#define DF_SPAWN              (UINT64_C(1) << 32)
#define DF_V4_NC              (UINT64_C(1) << 34)

/* What OTP 25 requires of a peer (and so do we), and what lpvm offers. */
#define DF_MANDATORY (DF_EXTENDED_REFS | DF_FUN_TAGS | DF_EXTENDED_PIDS | DF_UTF8_ATOMS | \
                      DF_NEW_FUN_TAGS | DF_BIG_CREATION | DF_NEW_FLOATS | DF_MAP_TAG |   \
                      DF_EXPORT_PTR_TAG | DF_BIT_BINARIES | DF_HANDSHAKE_23)
#define DF_OURS (DF_MANDATORY | DF_DIST_MONITOR | DF_DIST_MONITOR_NAME |                 \
                 DF_SMALL_ATOM_TAGS | DF_UNICODE_IO | DF_SEND_SENDER | DF_BIG_SEQTRACE | \
                 DF_UNLINK_ID | DF_V4_NC | DF_SPAWN)

/* Control message operations (the first element of the control tuple). */
enum {
  OP_LINK = 1, OP_SEND = 2, OP_EXIT = 3, OP_UNLINK = 4, OP_REG_SEND = 6,
  OP_EXIT2 = 8, OP_MONITOR_P = 19, OP_DEMONITOR_P = 20, OP_MONITOR_P_EXIT = 21,
  OP_SEND_SENDER = 22, OP_PAYLOAD_EXIT = 24, OP_PAYLOAD_EXIT2 = 26,
  OP_PAYLOAD_MONITOR_P_EXIT = 27, OP_SPAWN_REQUEST = 29, OP_SPAWN_REPLY = 31,
  OP_UNLINK_ID = 35, OP_UNLINK_ID_ACK = 36
};

/* ---- dist_hs.c: handshake messages (pure: no I/O, fuzzable) ---------------------- */

#define HS_MAX 1024               /* longest handshake message we accept */

typedef struct hs_name {          /* 'N' send_name, or 'N' challenge when has_chal */
  uint64_t flags;
  uint32_t challenge, creation;
  const char *name;
  size_t len;
} hs_name;

/* Parse one handshake message body (after its 2-byte length). 0 or LPVM_EBADTERM. */
int hs_parse_name(const uint8_t *p, size_t n, hs_name *out);       /* 'N' send_name */
int hs_parse_challenge(const uint8_t *p, size_t n, hs_name *out);  /* 'N' challenge */
int hs_parse_status(const uint8_t *p, size_t n, const char **st, size_t *len);
int hs_parse_reply(const uint8_t *p, size_t n, uint32_t *chal, const uint8_t **digest);
int hs_parse_ack(const uint8_t *p, size_t n, const uint8_t **digest);
/* Build one handshake message with its 2-byte length into out (HS_MAX bytes);
** returns its length. */
size_t hs_build_name(uint8_t *out, uint64_t flags, uint32_t creation, const char *name);
size_t hs_build_status(uint8_t *out, const char *status);
size_t hs_build_challenge(uint8_t *out, uint64_t flags, uint32_t chal, uint32_t creation,
                          const char *name);
size_t hs_build_reply(uint8_t *out, uint32_t chal, const uint8_t digest[16]);
size_t hs_build_ack(uint8_t *out, const uint8_t digest[16]);
/* MD5(cookie ++ decimal text of challenge): the proof of the cookie. */
void hs_digest(const char *cookie, uint32_t chal, uint8_t out[16]);
/* A 32-bit random challenge. */
uint32_t hs_challenge(void);

/* ---- dist_epmd.c: the EPMD client (loopback, short blocking requests, bounded) ---- */

/* Make sure an epmd listens on 127.0.0.1:4369, starting `epmd -daemon` if none does.
** Then register `alive` with our listen port; *fd is the registration (closing it
** unregisters), *creation what EPMD gave. */
int epmd_register(const char *alive, int port, int hidden, int *fd, uint32_t *creation);
/* Look `alive` up on `host`'s EPMD: its port, or a negative LPVM_E* code. */
int epmd_port_please(const char *host, const char *alive, int *port);

/* ---- dist.c: node-wide state ---------------------------------------------------------- */

typedef struct dist_self {
  char name[NODE_NAME_MAX + 1];   /* alive@host */
  char cookie[256];
  unsigned tick_ms;               /* net_ticktime / 4 */
  size_t max_message;             /* longest packet taken; longer ones are skipped */
  int hidden;
} dist_self;

/* Read-only while distribution runs (set before the first connection). */
const dist_self *dist_conf(void);
/* The connection for a node name: found, or started (initiator) when `start`. */
lpvm_id dist_conn_for(const char *name, size_t len, int start);
/* The connection task tells the node table and the map that it is up / gone. */
void dist_conn_up(lpvm_id conn, const char *name, size_t len, uint32_t creation);
void dist_conn_gone(lpvm_id conn, const char *name, size_t len, int was_up);
/* An acceptor has its peer's name: may it go on (simultaneous connects, dist.c)? On
** DACC_ADOPTED `adopt` went to the node's pending connection, which takes the
** socket over; otherwise it is still the caller's. */
enum { DACC_OK, DACC_NOK, DACC_ADOPTED };
int dist_conn_accept(lpvm_id conn, const char *name, size_t len, lpvm_msg *adopt);
/* The installed spawner (lpvm_dist_set_spawner), or NULL. */
const lpvm_dist_spawner *dist_spawner(void);
/* Log one line about distribution (stderr: "lpvm dist: ..."). */
void dist_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- dist_term.c: what Erlang's format cannot carry ---------------------------------------- */

/* 0 when the term (version byte first) holds a NaN or infinite float, or a map with
** two equal keys, which erl cannot decode; else 1. */
int dist_term_ok(const uint8_t *term, size_t len);
/* The deepest a value of a term may sit and still become a Lua value (the term at 0):
** vm/lterm_int.h's LTERM_DEPTH, which io cannot include. */
#define DIST_DEPTH 200
/* 1 when the term (version byte first) nests deeper than DIST_DEPTH, else 0. */
int dist_term_too_deep(const uint8_t *term, size_t len);
/* A binary term of the term's rendering (malloc'ed, *out_len set), NULL on no memory. */
uint8_t *dist_term_rendered(const uint8_t *term, size_t len, size_t *out_len);

/* ---- dist_conn.c: the connection task --------------------------------------------------- */

/* Spawn a connection: accepted (fd >= 0, name NULL) or to `name` (fd < 0). */
int dconn_spawn(int fd, const char *name, size_t len, lpvm_id *id);

#endif
