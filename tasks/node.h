/*
** node.h -- node names, creations and remote ids: what the term codec and the
** signal path know of distribution.
**
** This node is `nonode@nohost` (creation 1) until distribution starts and then
** `name@host` with the creation EPMD gave it; the descriptor is swapped atomically
** and the old one kept, so an encoder never reads a freed name.
**
** A remote pid is an lpvm_id with bit 62 set (the local generation stops at bit 61):
**
**   bit 63     0 (remote ports are not ids)
**   bit 62     LPVM_ID_REMOTE_BIT
**   bits 48-61 node index: an entry (name, creation) of the node table
**   bits 24-47 the pid's Serial (NEW_PID_EXT)
**   bits 0-23  the pid's ID
**
** erl's pids (ID < 2^20 by default) and lpvm's (slot < 2^23 by default) fit; a pid
** whose ID or Serial is wider does not decode (LPVM_EBADTERM). Node entries live as
** long as the VM: one per incarnation of a peer, at most NODE_MAX.
**
** The signal path hands every signal for a remote id to the router installed by
** io/ (sig_send -> node_route), which owns connections; the core never sees a socket.
*/
#ifndef LPVM_TASKS_NODE_H
#define LPVM_TASKS_NODE_H

#include <stddef.h>
#include <stdint.h>

#include "lpvm/task.h"

#define NODE_MAX 16383
#define NODE_NAME_MAX 255

#define node_id_is_remote(id) (((id) & (LPVM_ID_PORT_BIT | LPVM_ID_REMOTE_BIT)) == \
                               LPVM_ID_REMOTE_BIT)
#define node_id_index(id)  ((uint32_t)(((id) >> 48) & 0x3fff))
#define node_id_num(id)    ((uint32_t)((id) & 0xffffff))
#define node_id_serial(id) ((uint32_t)(((id) >> 24) & 0xffffff))

typedef struct node_desc {
  uint32_t creation;
  uint8_t len;
  uint8_t atom[2 + NODE_NAME_MAX];    /* SMALL_ATOM_UTF8_EXT: tag, len, name */
  char name[NODE_NAME_MAX + 1];       /* NUL-ended */
  _Atomic lpvm_id conn;               /* remote entries: the router's cache */
} node_desc;

/* This node. Never NULL. */
const node_desc *node_self(void);
/* Become name@host with `creation` (distribution started) or, with name NULL,
** nonode@nohost again. */
int node_set_self(const char *name, size_t len, uint32_t creation);
/* The VM stopped (no task is left): nonode@nohost again, earlier names freed. The
** node entries stay: a remote id outlives nothing, but costs nothing either. */
void node_fini(void);
/* Is (name, creation) this node? creation UINT32_MAX: any creation. Ids of
** nonode@nohost are always this node's (what lpvm wrote before it had a name). */
int node_is_self(const char *name, size_t len, uint32_t creation);

/* The entry of (name, creation), made on first use: index >= 1, or LPVM_ELIMIT,
** LPVM_EINVAL (empty or too long a name). */
int node_intern(const char *name, size_t len, uint32_t creation);
/* Entry by index, or NULL. */
node_desc *node_get(uint32_t idx);
/* Visit every entry of `name` (any creation). */
void node_foreach_named(const char *name, size_t len,
                        void (*fn)(uint32_t idx, node_desc *d, void *ud), void *ud);

/* A remote pid from its parts; 0 if ID or Serial is too wide. */
lpvm_id node_remote_pid(uint32_t idx, uint32_t num, uint32_t serial);

/* The router: takes s (returns 0) or leaves it to the caller (negative: LPVM_ENOPROC
** for an unreachable node, so links and monitors answer noproc/noconnection).
** *queued (may be NULL): what waits in the connection, for the sender's punishment,
** as for a local receiver's mailbox. */
typedef int (*node_router_fn)(lpvm_id to, struct lpvm_sig *s, uint32_t *queued);
void node_set_router(node_router_fn fn);
int node_route(lpvm_id to, struct lpvm_sig *s, uint32_t *queued);

#endif
