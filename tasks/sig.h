/*
** sig.h -- the signal kinds and sending a built signal: what distribution (io/dist)
** needs of the signal path to carry signals between nodes. The rest of the signal
** path is private to tasks/ (task_int.h).
*/
#ifndef LPVM_TASKS_SIG_H
#define LPVM_TASKS_SIG_H

#include "lpvm/task.h"

/* Signal kinds. */
enum {
  SIG_MESSAGE = 1, SIG_LINK, SIG_UNLINK, SIG_EXIT, SIG_EXIT_LINK, SIG_MONITOR,
  SIG_DEMONITOR, SIG_DOWN, SIG_SUSPEND, SIG_RESUME, SIG_INFO, SIG_PRIORITY,
  SIG_MIGRATE, SIG_TIMEOUT,
  SIG_DIST,      /* a signal for a remote id, wrapped for its connection (io/dist) */
  SIG_UNLINK_ACK /* a local task took our UNLINK: nothing it sent before is ours */
};

/* A signal for a remote id, wrapped for its node's connection (kind SIG_DIST): the
** payload starts with this header, then the original payload. */
typedef struct sig_wrap {
  uint32_t kind;      /* SIG_MESSAGE, SIG_LINK, ... (or a connection's own kinds) */
  uint32_t pad;
  lpvm_id to;         /* the remote id */
} sig_wrap;

/* The reason a lost connection gives (the atom noconnection, a complete term). */
extern const uint8_t term_noconnection[];
extern const size_t term_noconnection_len;

/* Push s to `to`; on a negative code (LPVM_ENOPROC) the signal is still the caller's. */
int sig_send(lpvm_id to, struct lpvm_sig *s);
/* The same; *queued (may be NULL) gets the receiver's queued messages after a
** MESSAGE went in (what a sender is punished by). */
int sig_send_q(lpvm_id to, struct lpvm_sig *s, uint32_t *queued);

#endif
