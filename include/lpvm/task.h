/*
** task.h -- the TaskDefinition API: write, spawn and talk to tasks in C.
**
** A task is the one schedulable thing of lpvm (Hedqvist 1998, section 5.2.3): a Lua
** process, a port and a C task are all a `lpvm_task` record driven through the
** callbacks of a `lpvm_task_def`. Extend the record by embedding it as the FIRST
** member of your own struct, as the thesis's XmplTask does:
**
**     typedef struct { lpvm_task task; int counter; } xmpl_task;
**
** Callbacks run on one thread at a time for a given task (a worker or its private
** thread); a task's own data needs no lock. Everything a task does to another task
** is an asynchronous signal. docs/c-tasks.md walks through a complete example.
*/
#ifndef LPVM_TASK_H
#define LPVM_TASK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "lpvm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A task id: slot in the process table (low 32 bits) + generation (bits 32..61) +
** remote flag (bit 62: a process of another node, see docs/distribution.md) + port
** flag (bit 63). 0 is never a valid id. A dead id is never reused for a long time:
** a slot's generation only comes back after 2^30 reuses. */
typedef uint64_t lpvm_id;
#define LPVM_ID_PORT_BIT  (UINT64_C(1) << 63)
#define lpvm_id_is_port(id) (((id) & LPVM_ID_PORT_BIT) != 0)
#define LPVM_ID_REMOTE_BIT (UINT64_C(1) << 62)
#define lpvm_id_is_remote(id) (((id) & LPVM_ID_REMOTE_BIT) != 0)
/* Bits 62 and 63 together: no id has them (a port is never remote, docs/distribution.md).
** The Lua binding carries a reference below 2^62 in the same 64 bits as a pid, tagged
** with them (vm/lmod.c); lpvm_make_ref's counter stays below 2^62 (4.6e18 references). */
#define LPVM_ID_REF_TAG (LPVM_ID_PORT_BIT | LPVM_ID_REMOTE_BIT)
/* The slot and the generation of an id (what <0.Slot.Gen> prints). */
static inline uint32_t lpvm_id_slot(lpvm_id id) { return (uint32_t)id; }
static inline uint32_t lpvm_id_gen(lpvm_id id) {
  return (uint32_t)((id >> 32) & UINT64_C(0x3fffffff));
}
/* An id no task ever has: slot 0 is never allocated (and id 0 means "none"), so
** signalling it gets a dead task's answers: monitoring it, a DOWN with noproc. */
#define LPVM_ID_DEAD (UINT64_C(1) << 32)

/* Task states, returned by the callbacks. */
enum {
  LPVM_SETUP = 0,   /* call `setup` next (only returned by `init`) */
  LPVM_WAIT  = 1,   /* wait for a message (handle_event) or a timeout (handle_timeout) */
  LPVM_IDLE  = 2,   /* runnable: call `idle` again when the task's turn comes */
  LPVM_EXIT  = 3    /* terminate with the reason set by lpvm_set_reason (default normal) */
};

/* Priorities: 0 highest .. 31 lowest. */
#define LPVM_PRIO_MAX      0
#define LPVM_PRIO_MIN      31
#define LPVM_PRIO_SYSTEM   0
#define LPVM_PRIO_PORT     10
#define LPVM_PRIO_HIGH     15
#define LPVM_PRIO_NORMAL   20
#define LPVM_PRIO_LOW      30

/* TaskDefinition flags. */
#define LPVM_TASK_PORT_TYPE       0x01u  /* gets a port id instead of a process id */
#define LPVM_TASK_START_THREAD    0x02u  /* starts on a private thread */
#define LPVM_TASK_CANT_SCHEDULE   0x04u  /* may never run on the workers */
#define LPVM_TASK_CANT_LOWER_PRIO 0x08u
#define LPVM_TASK_CANT_RAISE_PRIO 0x10u

typedef struct lpvm_task lpvm_task;
typedef struct lpvm_task_def lpvm_task_def;
typedef struct lpvm_sig lpvm_msg;     /* a message: an owned buffer of term bytes */
typedef struct lpvm_tbuf lpvm_tbuf;   /* a term builder (term.h) */

/*
** The callback table. Any callback may be NULL:
**   allocate        calloc(1, size) (or sizeof(lpvm_task) when size is 0)
**   free            free()
**   init            return LPVM_SETUP
**   terminate       nothing
**   setup           return LPVM_WAIT
**   idle            return LPVM_WAIT
**   handle_event    drop every queued message, return LPVM_WAIT
**   handle_timeout  return LPVM_WAIT
**   handle_info     add nothing to the info reply
*/
struct lpvm_task_def {
  const char *type;       /* type name, e.g. "xmpltask" */
  int prio;               /* default priority 0..31 */
  unsigned flags;         /* LPVM_TASK_* */
  size_t size;            /* bytes of the record for the default `allocate` */
  /* Allocate the record (zeroed). `arg` is the spawn argument. */
  lpvm_task *(*allocate)(const lpvm_task_def *def, void *arg);
  /* Free a record from `allocate`. May run on any thread. */
  void (*free)(lpvm_task *t);
  /* The task has its id; set up task data. Return the first state (LPVM_SETUP,
  ** LPVM_WAIT or LPVM_IDLE) or a negative LPVM_E* code to abort the spawn. */
  int (*init)(lpvm_task *t, void *arg);
  /* The task is exiting with `reason` (external term bytes): release resources.
  ** Links and monitors are notified by the runtime after this returns. */
  void (*terminate)(lpvm_task *t, const uint8_t *reason, size_t len);
  /* The task is visible to others: it may now send and be sent to. */
  int (*setup)(lpvm_task *t);
  /* Scheduled with no event: do a slice of work. Return LPVM_IDLE for more. */
  int (*idle)(lpvm_task *t);
  /* A message is queued (lpvm_recv / lpvm_mbox_*). Called again while messages
  ** remain, as long as each call takes at least one or new ones arrive. */
  int (*handle_event)(lpvm_task *t);
  /* The timer set by lpvm_set_timer fired. It runs in the step that sees the timer
  ** fire, right after handle_event has had its look at the mailbox, however many
  ** messages keep arriving (Erlang's `after`): a message queued before the timer
  ** fired can still be taken first, a flood cannot hold the timeout back. */
  int (*handle_timeout)(lpvm_task *t);
  /* Append `key, value` pairs to the reply of an INFO signal; return how many. */
  int (*handle_info)(lpvm_task *t, lpvm_tbuf *map);
};

/* A signal. Messages are signals of kind MESSAGE whose payload (term bytes)
** follows the header in the same allocation. */
struct lpvm_sig {
  _Atomic(struct lpvm_sig *) next;   /* signal queue link, then message queue link */
  struct lpvm_sig *prev;           /* message queue back link */
  lpvm_id from;
  uint64_t ref;                    /* monitor reference, timer sequence, ... */
  uint16_t kind;
  uint16_t flags;                  /* a message: LPVM_MSGF_BINS (lpvm/binary.h) */
  uint32_t len;                    /* payload bytes */
};

/*
** The Task record (thesis: pq, sq, id, prio, links, sig, msg, state, flags, fs).
** Its fields belong to the runtime: read them through the functions below.
*/
/*
** Who writes what. Most fields belong to the task: only the thread running its step
** (or spawning it, before it is published) touches them. The shared ones:
**   rq_next     sched/, only under the lock of the run queue that holds the task
**               (the task is QUEUED then, so it does not run).
**   sched_word  atomic: senders set PENDING and take WAITING -> QUEUED; the task's
**               own step does the rest (tasks/task_sched.h).
**   prio        the task itself (lpvm_set_prio, a PRIORITY signal, in its step) and
**               spawn; sched/ reads it when it queues the task, after the QUEUED
**               transition whose acquire makes the last step's write visible.
**   worker      the worker that runs the step, and spawn; read by
**               sched_make_runnable from any thread, ordered the same way.
**   sq_tail     atomic: every sender (mpsc push); sq_head/sq_stub: the task.
**   hint        relaxed atomic: the task, in its step (and as it dies); read by the
**               sender whose WAITING -> QUEUED CAS schedules it on a worker, before
**               it queues it (a task on its own thread may run at once: not read).
**   reg_name    under the name table's lock (tasks/names.c).
*/
#define LPVM_TASK_HINTS 8   /* lpvm_task.more.hints */

struct lpvm_task {
  /* Cold: not touched by a message hop. 64 bytes, so that with the record allocated
  ** on a cache line (lproc_allocate) the hot part below starts on the next one and a
  ** hop's fields of the task and of its type's record (vm/lproc_int.h) fill four
  ** lines, not seven: at 10,000 processes and more every one is a cache miss. */
  struct task_rel *rel;              /* links and monitors: allocated on first use */
  char *reg_name;                    /* registered name; guarded by the name table */
  uint64_t timer_seq;                /* the current lpvm_set_timer, 0 = none */
  struct lpvm_timer *timer;
  uint8_t *reason;                   /* exit reason (term bytes), NULL = normal (or,
                                     ** reason_len UINT32_MAX, "not enough memory") */
  void *user;                        /* free for the task type's own use */
  uint32_t reason_len;
  /* 1 once it got an ETS table (made it, given it, heir to it): its death looks for
  ** its tables. Set by that thread, never cleared; read by the dying task */
  _Atomic(uint32_t) ets_owner;
  uint32_t exit_sigs;                /* signals handled since it last ran (stats) */
  /* Hot: what a send to it and its step read and write. */
  struct lpvm_task *rq_next;         /* run queue link */
  _Atomic(uint32_t) sched_word;       /* who may schedule it: see tasks/task_sched.h */
  uint8_t prio;                      /* 0 (highest) .. 31 */
  uint8_t state;                     /* LPVM_SETUP/WAIT/IDLE/EXIT */
  uint8_t tflags;                    /* trap_exit, suspended, timeout fired, ... */
  int8_t worker;                     /* last worker it ran on (-1: none yet) */
  uint32_t suspended;                /* SUSPEND count not yet RESUMEd */
  uint32_t mq_len;
  lpvm_id id;
  const lpvm_task_def *def;
  /* An address its next step reads first (a Lua process: its lua_State), or NULL:
  ** the sender that makes it runnable prefetches it. Written by the task in its step,
  ** read by a sender at any time (relaxed: a stale hint only costs a useless fetch) */
  _Atomic(const void *) hint;
  /* signal queue: multi-producer, single-consumer (Vyukov) */
  _Atomic(struct lpvm_sig *) sq_tail;
  struct lpvm_sig *sq_head;
  /* The queue's stub is a signal of which only `next` is used: the rest of it holds
  ** more hints, lines the next step reads (a Lua process: its call frames, its
  ** function and the table lookups its next instructions make, noted as it waits),
  ** each a span of 1-8 lines: the distance in bytes from `hint` to an address in the
  ** first line, a multiple of 8, plus the number of lines after it in the low 3 bits
  ** (0: none; a line further than 2 GiB from it is not noted), prefetched with hint's
  ** lines by the same sender; written and read as hint is. */
  union {
    struct lpvm_sig sq_stub;
    struct {
      void *stub_next_;              /* sq_stub.next's place: never used by this name */
      _Atomic(int32_t) hints[LPVM_TASK_HINTS];
    } more;
  };
  /* message queue: only the task touches it */
  struct lpvm_sig *mq_first, *mq_last;
  struct lpvm_sig *timeout_mark;     /* the newest message when the timer fired */
  /* messages sent to it and their payload bytes (senders add: wrapping counts), and
  ** those it took (the task alone stores them, with no read-modify-write); queued
  ** is the difference (in the signal queue or the mailbox). Anyone may read */
  _Atomic(uint32_t) mq_sent;
  uint32_t mq_gen;                   /* bumped by every take: did handle_event take? */
  _Atomic(uint64_t) mq_bytes_in;
  _Atomic(uint32_t) mq_taken;
  _Atomic(uint64_t) mq_bytes_out;
  uint64_t reductions;               /* steps run, or what the task counts itself */
};

/* ---- spawning ---------------------------------------------------------------- */

typedef struct lpvm_spawn_opts {
  int prio;           /* -1 = the definition's default */
  int thread;         /* 1 = private thread, 0 = workers, -1 = as the definition says */
  int link;           /* link creator and new task */
} lpvm_spawn_opts;

#define LPVM_SPAWN_OPTS_INIT { -1, -1, 0 }

/* SpawnTask: create a task of type `def`, call `init(t, arg)`, make it visible,
** then run `setup`. `creator` may be NULL (spawned from outside any task); with
** `link` the creator and the new task are linked before the new one can run. */
LPVM_API int lpvm_spawn_task(lpvm_task *creator, const lpvm_task_def *def, void *arg,
                             int link, lpvm_id *id);
LPVM_API int lpvm_spawn_task_opt(lpvm_task *creator, const lpvm_task_def *def, void *arg,
                                 const lpvm_spawn_opts *opts, lpvm_id *id);

/* ---- the running task's own business (call only from its callbacks) ----------- */

LPVM_API lpvm_id lpvm_self(const lpvm_task *self);
LPVM_API int lpvm_prio(const lpvm_task *self);
/* Change own priority, within CANT_LOWER_PRIO / CANT_RAISE_PRIO. */
LPVM_API int lpvm_set_prio(lpvm_task *self, int prio);
/* Trap exits: exit signals arrive as {'EXIT', From, Reason} messages. Returns the
** previous setting. */
LPVM_API int lpvm_trap_exit(lpvm_task *self, int on);
/* Set the reason used when a callback returns LPVM_EXIT (term bytes, copied). */
LPVM_API int lpvm_set_reason(lpvm_task *self, const uint8_t *term, size_t len);
LPVM_API int lpvm_set_reason_atom(lpvm_task *self, const char *atom);
/* The task's private thread mode: 1 on a private thread, 0 on workers. */
LPVM_API int lpvm_on_thread(const lpvm_task *self);
/* 1 when a higher-priority task waits for this worker: a task that runs long
** (counting reductions) should return LPVM_IDLE soon. */
LPVM_API int lpvm_should_yield(const lpvm_task *self);

/* Mailbox. */
LPVM_API lpvm_msg *lpvm_recv(lpvm_task *self);                    /* oldest, or NULL */
LPVM_API lpvm_msg *lpvm_mbox_next(lpvm_task *self, lpvm_msg *m);  /* m = NULL: oldest */
LPVM_API void lpvm_mbox_take(lpvm_task *self, lpvm_msg *m);       /* unlink m; caller frees */
LPVM_API size_t lpvm_mbox_len(const lpvm_task *self);
/* Messages sent to `self` and not yet taken (signal queue and mailbox), and their
** payload bytes: what an out-of-memory guard such as max_heap counts. */
LPVM_API size_t lpvm_queued_msgs(const lpvm_task *self);
LPVM_API size_t lpvm_queued_bytes(const lpvm_task *self);
/* Handle the signals queued for the running task now, instead of at its next step:
** messages sent to it so far join the mailbox (a receive with timeout 0 needs this).
** Returns 1 if one of them ends the task (it exits when the callback returns; its
** return value is then ignored), else 0. */
LPVM_API int lpvm_fetch_signals(lpvm_task *self);

/* ---- messages ------------------------------------------------------------------ */

LPVM_API lpvm_msg *lpvm_msg_new(size_t len);        /* uninitialised payload of len bytes */
/* A message in a block the caller took from malloc (or a free list of malloc's
** blocks), of at least sizeof(lpvm_msg) + len bytes: the header set up as
** lpvm_msg_new's. Freed as any message; a message without shared binaries
** (LPVM_MSGF_BINS) is just its block, which its taker may also keep for reuse (a
** block of sizeof(lpvm_msg) + len bytes at least). */
LPVM_API lpvm_msg *lpvm_msg_init(void *block, size_t len);
LPVM_API uint8_t *lpvm_msg_data(lpvm_msg *m);
LPVM_API size_t lpvm_msg_len(const lpvm_msg *m);
LPVM_API lpvm_id lpvm_msg_from(const lpvm_msg *m);  /* sender, 0 from outside any task */
LPVM_API void lpvm_msg_free(lpvm_msg *m);

/* Send a message; never blocks. `self` is the sending task or NULL. send_msg takes
** ownership of m in every case. Sending to a dead id is a harmless no-op that
** returns LPVM_ENOPROC. */
LPVM_API int lpvm_send(lpvm_task *self, lpvm_id to, const void *term, size_t len);
LPVM_API int lpvm_send_msg(lpvm_task *self, lpvm_id to, lpvm_msg *m);
/* The same, and *queued gets the messages the receiver had queued once this one was
** in (Erlang charges a sender by it: see lmod_msg.c). */
LPVM_API int lpvm_send_msg_queued(lpvm_task *self, lpvm_id to, lpvm_msg *m, uint32_t *queued);
LPVM_API int lpvm_send_name(lpvm_task *self, const char *name, const void *term, size_t len);
/* A message from the running task to itself: into its mailbox at once when no signal
** is ahead of it in its own queue, so that its callbacks (a Lua process's receive)
** see it in this step; through the queue, as lpvm_send_msg, otherwise. */
LPVM_API int lpvm_send_msg_self(lpvm_task *self, lpvm_msg *m);

/* ---- links, monitors, exits --------------------------------------------------- */

/* Bidirectional link. Linking a dead id delivers an exit signal with reason noproc. */
LPVM_API int lpvm_link(lpvm_task *self, lpvm_id other);
LPVM_API int lpvm_unlink(lpvm_task *self, lpvm_id other);
/* Monitor `target`: exactly one {'DOWN', Ref, process, Id, Reason} message follows
** (reason noproc for a dead id), unless demonitored first. */
LPVM_API int lpvm_monitor(lpvm_task *self, lpvm_id target, uint64_t *ref);
/* Monitor the task registered as `name` (0..255 bytes, else LPVM_EINVAL) now, as
** Erlang's monitor(process, Name): its DOWN is {'DOWN', Ref, process, {Name, Node},
** Reason} with this node's name (nonode@nohost when not distributed), and comes at
** once with noproc when nobody holds the name. */
LPVM_API int lpvm_monitor_name(lpvm_task *self, const char *name, uint64_t *ref);
/* monitor(process, {Name, Node}): Node this node is lpvm_monitor_name; another
** node's DOWN names {Name, Node}, with noconnection when that node goes. */
LPVM_API int lpvm_monitor_remote_name(lpvm_task *self, const char *name, const char *node,
                                      uint64_t *ref);
LPVM_API int lpvm_demonitor(lpvm_task *self, uint64_t ref);
/* A call's reply without the DEMONITOR signal (vm/lmod_call.c): the monitored side
** drops watcher's monitor of it (ref) as if the DEMONITOR had come, 1 if it was
** there, and says so in its reply (LPVM_MSGF_UNWATCH); the monitoring side, seeing
** the flag, drops its own half with lpvm_demonitor_quiet, which sends nothing. Each
** runs on its own task's thread. */
LPVM_API int lpvm_unwatch(lpvm_task *self, uint64_t ref, lpvm_id watcher);
LPVM_API int lpvm_demonitor_quiet(lpvm_task *self, uint64_t ref);
/* Erlang's exit/2: send an exit signal. Reason `kill` cannot be trapped; the
** target then exits with `killed`. `self` may be NULL. */
LPVM_API int lpvm_exit(lpvm_task *self, lpvm_id target, const uint8_t *reason, size_t len);
LPVM_API int lpvm_exit_atom(lpvm_task *self, lpvm_id target, const char *atom);
LPVM_API int lpvm_kill(lpvm_task *self, lpvm_id target);

/* ---- names -------------------------------------------------------------------- */

LPVM_API int lpvm_register(const char *name, lpvm_id id);   /* one name per task */
LPVM_API int lpvm_unregister(const char *name);
LPVM_API lpvm_id lpvm_whereis(const char *name);            /* 0 if none */
/* Call fn(name, id, ud) for every registered name, under the table's read lock:
** fn must not block nor register or unregister. */
LPVM_API void lpvm_foreach_name(void (*fn)(const char *name, lpvm_id id, void *ud), void *ud);

/* ---- other signals -------------------------------------------------------------- */

LPVM_API int lpvm_suspend(lpvm_task *self, lpvm_id target);
LPVM_API int lpvm_resume(lpvm_task *self, lpvm_id target);
/* Ask `target` for information: a map #{id, type, priority, status, mode,
** message_queue_len, reductions, ...} arrives as a message {info, Ref, Map}. */
LPVM_API int lpvm_request_info(lpvm_task *self, lpvm_id target, uint64_t *ref);
LPVM_API int lpvm_set_prio_of(lpvm_task *self, lpvm_id target, int prio);
/* Move `target` to a private thread (to_thread=1) or back to the workers (0). */
LPVM_API int lpvm_migrate(lpvm_task *self, lpvm_id target, int to_thread);

/* Call fn(id, ud) for every live task (a snapshot: tasks may come and go meanwhile).
** fn runs on the caller's thread and must not block. */
LPVM_API void lpvm_foreach_task(void (*fn)(lpvm_id id, void *ud), void *ud);
/* 1 if `id` is a live task (not yet dead), else 0. A snapshot: it may die next. */
LPVM_API int lpvm_is_alive(lpvm_id id);

/* A new unique reference (monitors, timers, requests). Never 0. */
LPVM_API uint64_t lpvm_make_ref(void);

/* ---- timers (timers/) ------------------------------------------------------------ */

/* The thesis's SetTimer: handle_timeout runs after `ms` unless a message comes
** first and the task cancels or resets the timer. One timer per task: setting a new
** one replaces the old. */
LPVM_API int lpvm_set_timer(lpvm_task *self, uint64_t ms);
/* lpvm_set_timer for a wait that a message usually ends within the next step (a
** receive's timeout): in a VM of one worker the timer is only noted, and started at
** the end of the next step if the task still waits (tasks/task_timer.c); so it fires
** no earlier than `ms` after the call, and up to a step later. Elsewhere, and on a
** private thread, it is lpvm_set_timer. */
LPVM_API int lpvm_set_timer_lazy(lpvm_task *self, uint64_t ms);
/* 1 if a pending timer was cancelled, 0 if there was none or it already fired. */
LPVM_API int lpvm_cancel_timer(lpvm_task *self);
/* For a selective receive that scans the mailbox itself: 1 if the timer has fired
** and `seen` (the last message the scan looked at, NULL = none yet) is the newest
** message that was queued when it fired, so every older message has been looked at
** and the scan may stop with a timeout instead of running after new arrivals. */
LPVM_API int lpvm_timeout_reached(const lpvm_task *self, const lpvm_msg *seen);

/* send-after: deliver `term` to `to` after `ms`. *ref identifies it for cancel. */
LPVM_API int lpvm_send_after(lpvm_task *self, uint64_t ms, lpvm_id to, const void *term,
                             size_t len, uint64_t *ref);
/* The same with a built message, which it takes whatever happens (a message with
** shared binaries keeps them until it is delivered or cancelled). */
LPVM_API int lpvm_send_msg_after(lpvm_task *self, uint64_t ms, lpvm_id to, lpvm_msg *m,
                                 uint64_t *ref);
/* The same to a registered name, looked up when it fires (Erlang's send_after/3 with
** an atom): nobody holding the name then drops the message. */
LPVM_API int lpvm_send_msg_after_name(lpvm_task *self, uint64_t ms, const char *name,
                                      lpvm_msg *m, uint64_t *ref);
/* Erlang's start_timer: the same, to `to` or (name non-NULL) to a name looked up when
** it fires, under a reference the caller made with lpvm_make_ref (so the message can
** carry it, as {timeout, Ref, Msg} does); cancel and read it as a send-after's. Takes
** m whatever happens; LPVM_EINVAL for ref 0. */
LPVM_API int lpvm_start_msg_timer(lpvm_task *self, uint64_t ms, lpvm_id to, const char *name,
                                  lpvm_msg *m, uint64_t ref);
/* 1 if cancelled before it fired, 0 if it already fired or is unknown. A send-after
** to a local pid is tied to it (Erlang's is): cancelled when that process ends, and
** at once if it is dead at the start. */
LPVM_API int lpvm_cancel_send_after(uint64_t ref);
/* The milliseconds a send-after has left (0: due), -1 if it fired, was cancelled or is
** unknown (Erlang's read_timer; with cancel nonzero cancel_timer: cancelled if >= 0). */
LPVM_API int64_t lpvm_send_after_left(uint64_t ref, int cancel);

#ifdef __cplusplus
}
#endif

#endif
