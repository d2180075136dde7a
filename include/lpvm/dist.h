/*
** dist.h -- distribution: this VM as a node of an Erlang cluster.
**
** lpvm speaks Erlang's distribution protocol (version 6, OTP 23+): it registers
** with EPMD, accepts and makes connections authenticated by the cookie, and then a
** pid of another node is an lpvm_id like any other (lpvm_id_is_remote): send,
** link, monitor and exit work across nodes, and a lost connection gives each linked
** or monitoring process one EXIT or DOWN with reason noconnection.
** docs/distribution.md has the whole story.
*/
#ifndef LPVM_DIST_H
#define LPVM_DIST_H

#include "task.h"

typedef struct lpvm_dist_opts {
  const char *name;      /* "alive" (short names: @ and the short host name are added)
                         ** or "alive@host" */
  int longnames;         /* 1: --name (the host part is the fully qualified name) */
  const char *cookie;    /* NULL: ~/.erlang.cookie, created as erl creates it */
  const char *listen;    /* address to listen on; NULL: every interface */
  int hidden;            /* 1 (default): a hidden node, as a C node */
  unsigned ticktime;     /* seconds, as erl's net_ticktime; 0: 60 */
} lpvm_dist_opts;

/* Start distribution (net_kernel:start). LPVM_ESTATE if it runs already,
** LPVM_EEXIST if EPMD has that name. */
int lpvm_dist_start(const lpvm_dist_opts *o);
/* Stop: close every connection and unregister from EPMD. */
int lpvm_dist_stop(void);
/* This node's name ("nonode@nohost" when not distributed). */
const char *lpvm_node_name(void);
/* The connection task for `node`, started if none (0 if not distributed or the
** name is malformed). A task may send it {wait, Pid} (answers {nodeup, Node} or
** {nodedown, Node}) and {monitor_node, Pid, Bool}. */
lpvm_id lpvm_dist_conn(const char *node, int start);
/* Send a message (a complete term) to the process registered as `name` on `node`
** ({Name, Node} ! Msg); connects first if needed. LPVM_ENOPROC: no such node. */
int lpvm_dist_send_name(lpvm_task *self, const char *name, const char *node,
                        const void *term, size_t len);
/* Close the connection to `node`: LPVM_ENOPROC if there is none. */
int lpvm_dist_disconnect(const char *node);
/* Call fn for the name of every node with a connection up. */
void lpvm_dist_nodes(void (*fn)(const char *node, void *ud), void *ud);

#endif
