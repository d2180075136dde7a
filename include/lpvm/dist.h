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

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lpvm_dist_opts {
  const char *name;      /* "alive" (short names: @ and the short host name are added)
                         ** or "alive@host" */
  int longnames;         /* 1: --name (the host part is the fully qualified name) */
  const char *cookie;    /* NULL: ~/.erlang.cookie, created as erl creates it */
  const char *listen;    /* address to listen on; NULL: every interface */
  int hidden;            /* 1 (default): a hidden node, as a C node */
  unsigned ticktime;     /* seconds, as erl's net_ticktime; 0: 60 */
  size_t max_message;    /* bytes: a longer packet from a peer is skipped and logged,
                         ** the connection stays; 0: no limit but the framing's 4 GB,
                         ** as erl */
} lpvm_dist_opts;

/* The ref of a message to a remote pid that is an alias send (send_alias): its first
** value is the alias, a reference of the receiver's node. It travels in the SEND
** control message's unused field, and the receiving lpvm tags the message with it
** again, so the caller's receive_ref finds it. */
#define LPVM_DIST_ALIAS_SEND UINT64_MAX

/* Start distribution (net_kernel:start). LPVM_ESTATE if it runs already,
** LPVM_EEXIST if EPMD has that name. */
LPVM_API int lpvm_dist_start(const lpvm_dist_opts *o);
/* Stop: close every connection and unregister from EPMD. */
LPVM_API int lpvm_dist_stop(void);
/* This node's name ("nonode@nohost" when not distributed). */
LPVM_API const char *lpvm_node_name(void);
/* The connection task for `node`, started if none (0 if not distributed or the
** name is malformed). */
LPVM_API lpvm_id lpvm_dist_conn(const char *node, int start);
/* `who` gets {nodeup, Node} once `node` is connected (at once if it is, after a
** connection attempt if not) or {nodedown, Node} if that fails. */
LPVM_API int lpvm_dist_wait(lpvm_id who, const char *node);
/* erlang:monitor_node/2: with on, `who` gets {nodedown, Node} once when the
** connection to `node` goes (at once if none can be made); without, one such
** subscription is dropped. */
LPVM_API int lpvm_dist_monitor_node(lpvm_id who, const char *node, int on);
/* Send a message (a complete term) to the process registered as `name` on `node`
** ({Name, Node} ! Msg); connects first if needed. LPVM_ENOPROC: no such node. */
LPVM_API int lpvm_dist_send_name(lpvm_task *self, const char *name, const char *node,
                        const void *term, size_t len);
/* How a peer's spawn request (erlang:spawn(Node, M, F, A), rpc:call) starts a
** process here: the VM's Lua side installs this. spawn starts module `mod`'s
** function `fn` with `args` (a complete term: a tuple of the arguments) held back
** until release(creator, id), so the connection can link or monitor it first. */
typedef struct lpvm_dist_spawner {
  int (*spawn)(lpvm_task *creator, const char *mod, size_t mlen, const char *fn,
               size_t flen, const uint8_t *args, size_t alen, lpvm_id *id);
  void (*release)(lpvm_task *creator, lpvm_id id);
} lpvm_dist_spawner;
LPVM_API void lpvm_dist_set_spawner(const lpvm_dist_spawner *s);

/* Ask `node` to spawn mod:fn(args) (args: a complete term, a list); the answer
** comes to `self` as {'$spawn_reply', Ref, Pid | Error} with Ref = *ref.
** opts: LPVM_DIST_SPAWN_LINK / _MONITOR (the monitor's reference is *ref). */
#define LPVM_DIST_SPAWN_LINK    1
#define LPVM_DIST_SPAWN_MONITOR 2
LPVM_API int lpvm_dist_spawn_request(lpvm_task *self, const char *node, const char *mod,
                            const char *fn, const uint8_t *args, size_t alen,
                            int opts, uint64_t *ref);

/* Close the connection to `node`: LPVM_ENOPROC if there is none. */
LPVM_API int lpvm_dist_disconnect(const char *node);
/* Call fn for the name of every node with a connection up. */
LPVM_API void lpvm_dist_nodes(void (*fn)(const char *node, void *ud), void *ud);

#ifdef __cplusplus
}
#endif

#endif
