/*
** dist_conn.h -- the connection task's record and what its two halves share:
** dist_conn.c (socket, handshake, framing, ticks) and dist_ctl.c (control messages
** and the links and monitors that cross the connection).
*/
#ifndef LPVM_IO_DIST_CONN_H
#define LPVM_IO_DIST_CONN_H

#include "io/dist_int.h"
#include "io/poller.h"
#include "tasks/sig.h"

/* A wrapped signal (SIG_DIST): its payload starts with tasks/sig.h's header. */
typedef sig_wrap dist_wrap;

/* A wrap kind beside the signal kinds: a send to a registered name over there
** (payload: name length byte, name, message). */
#define DW_REG_SEND 0x100u
/* A spawn request (payload: opts byte, module length byte, module, function length
** byte, function, argument list term); ref = the request's reference. */
#define DW_SPAWN_REQ 0x101u
/* An accepted socket for the node's pending connection (dist_conn.c, simultaneous
** connects): never a signal to send. */
#define DW_ADOPT 0x102u

typedef struct dlink { lpvm_id local, remote; } dlink;
/* a local watcher monitors a remote target (our reference); by name (monitor(process,
** {Name, Node})) the target is an id standing for the name, kept as an atom term */
typedef struct dmon_out {
  uint64_t ref;
  lpvm_id watcher, target;
  uint8_t *name;    /* NULL: by pid */
  size_t nlen;
} dmon_out;
/* a remote watcher monitors a local target: the local reference stands for the
** peer's, whose bytes (an encoded reference, no version byte) come back in the DOWN;
** a monitor by name keeps the name (a complete atom term) for the DOWN's FromProc,
** from which erl builds {Name, Node} (the pid there broke a match on it) */
typedef struct dmon_in {
  uint64_t ref;
  lpvm_id target, watcher;
  uint8_t *eref;
  size_t elen;
  uint8_t *ename;   /* NULL: by pid */
  size_t nlen;
} dmon_in;

typedef struct dconn {
  lpvm_task task;                 /* first: the runtime's record */
  io_fdw w;
  int st;
  uint8_t initiator, up, quiet, quiet_lookup, failed;
  char peer[NODE_NAME_MAX + 1];
  size_t plen;
  uint32_t peer_creation, peer_idx;
  uint64_t peer_flags;
  uint32_t my_chal;
  uint8_t *rbuf, *wbuf;
  size_t rlen, rcap, wpos, wlen, wcap;
  lpvm_msg *big;                  /* a long packet read straight into a message */
  size_t big_len, big_have;
  uint64_t skip;                  /* bytes left of a packet over max_message */
  lpvm_msg *donor;                /* while dconn_in runs: big, whose payload holds the
                                  ** packet; a message in it is delivered in place */
  lpvm_msg **held;                /* SIG_DIST that came before UP */
  size_t nheld, cheld;
  uint64_t last_in, last_out;     /* ms: ticks */
  dlink *links;
  dmon_out *mo;
  dmon_in *mi;
  size_t nlinks, clinks, nmo, cmo, nmi, cmi;
  uint64_t unlink_id;
} dconn;

/* dist_conn.c: queue one packet (control term built in ctl, message bytes or none) */
void dconn_packet(dconn *c, const lpvm_tbuf *ctl, const uint8_t *msg, size_t mlen);

/* dist_ctl.c */
/* One packet from the peer (after its length): 0, or LPVM_EBADTERM to close. */
int dconn_in(dconn *c, const uint8_t *p, size_t n);
/* A SIG_DIST for the peer, connection up. */
void dconn_out(dconn *c, lpvm_msg *m);
/* A SIG_DIST that cannot go (no connection): answer as Erlang does (noconnection). */
void dconn_refuse(dconn *c, lpvm_msg *m);
/* The connection is gone: noconnection to every local end of a link or monitor. */
void dconn_rel_lost(dconn *c);
void dconn_rel_free(dconn *c);

#endif
