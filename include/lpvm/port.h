/*
** port.h -- ports: OS programs, file descriptors, TCP sockets and files as tasks.
**
** A port is a task with a port id (LPVM_TASK_PORT_TYPE) and an owner process. The
** owner receives everything the port has to say as messages (Erlang terms, below)
** and drives the port with commands, which are messages too: every function here
** builds one command and sends it, so it never blocks, works from any task (pass it
** as `self`) and from outside any task (self = NULL). Results arrive as messages.
**
** The port links itself to its owner and traps exits: when the owner dies, for any
** reason, its ports close (a spawned program is killed and reaped); when a port dies
** abnormally (it is killed, or runs out of memory), the owner hears of it through
** the link. docs/ports.md is the guide.
**
** Messages a port sends to its owner (Port is the port id):
**   {data, Port, Binary}         bytes read (one line / packet in framed modes)
**   {eof, Port}                  the other side closed its output
**   {exit_status, Port, Code}    spawn: the program ended (128 + N: killed by signal N)
**   {stderr, Port, Binary}       spawn with LPVM_STDERR_PIPE: bytes from its stderr
**   {connected, Port}            tcp connect: established
**   {tcp_accept, Listener, Conn} listener: a new connection, owned by the acceptor
**   {ready, Port}                a send refused with LPVM_EBUSY may be retried
**   {error, Port, Reason}        Reason an atom: econnrefused, econnreset, epipe,
**                                emfile, timeout, emsgsize, enoent, ...
**   {closed, Port}               always the port's last message
** File ports answer each command in order: {data, Port, Binary} or {eof, Port} for
** read, {ok, Port} for write, {position, Port, Offset} for seek, {error, Port,
** Reason} for any failure (the file stays open).
*/
#ifndef LPVM_PORT_H
#define LPVM_PORT_H

#include <stddef.h>
#include <stdint.h>

#include "task.h"

#ifdef __cplusplus
extern "C" {
#endif

/* active: how read data reaches the owner. */
#define LPVM_ACTIVE_FALSE 0   /* only on lpvm_port_recv */
#define LPVM_ACTIVE_TRUE  1   /* as it arrives */
#define LPVM_ACTIVE_ONCE  2   /* one message, then LPVM_ACTIVE_FALSE */

/* packet: how the byte stream is cut into messages (and sends are framed). */
#define LPVM_PACKET_RAW   0   /* as read */
#define LPVM_PACKET_1     1   /* 1, 2 or 4-byte big-endian length, then payload */
#define LPVM_PACKET_2     2
#define LPVM_PACKET_4     4
#define LPVM_PACKET_LINE  8   /* one line per message, '\n' included */

typedef struct lpvm_port_opts {
  lpvm_id owner;        /* 0: the calling task (self) */
  int active;           /* LPVM_ACTIVE_*; default TRUE */
  int packet;           /* LPVM_PACKET_*; default RAW */
  size_t high_water;    /* queued bytes before sends get LPVM_EBUSY; 0: 1 MiB */
  size_t max_packet;    /* longest line or packet; 0: 16 MiB */
} lpvm_port_opts;

#define LPVM_PORT_OPTS_INIT {0, LPVM_ACTIVE_TRUE, LPVM_PACKET_RAW, 0, 0}

/* ---- spawn: an OS program on pipes ------------------------------------------------ */

#define LPVM_STDERR_INHERIT   0   /* the VM's own stderr */
#define LPVM_STDERR_TO_STDOUT 1   /* merged into {data, ...} */
#define LPVM_STDERR_PIPE      2   /* separate {stderr, Port, Binary} messages */
#define LPVM_STDERR_NULL      3   /* /dev/null */

typedef struct lpvm_spawn_port_opts {
  const char *const *argv;   /* argv[0] is the program (searched in PATH); NULL-ended */
  const char *const *env;    /* NULL-ended "K=V" list; NULL: the VM's environment */
  const char *cwd;           /* NULL: the VM's */
  int stderr_mode;           /* LPVM_STDERR_* */
} lpvm_spawn_port_opts;

/* Start the program. Its stdout arrives as {data}; when it has closed stdout and
** exited: {eof}, {exit_status}, {closed}. Closing the port kills it (SIGKILL).
** LPVM_ESYS (errno set) if it cannot be started: ENOENT, EMFILE, ... */
LPVM_API int lpvm_port_spawn(lpvm_task *self, const lpvm_spawn_port_opts *so,
                             const lpvm_port_opts *po, lpvm_id *port);

/* ---- fd: descriptors the VM already has (stdin, stdout) ----------------------------- */

/* Wrap in_fd (read; -1 for none) and out_fd (write; -1 for none). They are dup'ed:
** closing the port leaves the originals open. Their file status flags get O_NONBLOCK
** while the port is open (shared with every dup, as with any non-blocking I/O).
** A descriptor that is not open: LPVM_ESYS with errno EBADF. */
LPVM_API int lpvm_port_fd(lpvm_task *self, int in_fd, int out_fd, const lpvm_port_opts *po,
                          lpvm_id *port);

/* ---- tcp -------------------------------------------------------------------------------- */

typedef struct lpvm_tcp_listen_opts {
  int backlog;       /* 0: 128 */
  int reuseaddr;     /* SO_REUSEADDR; default 1 */
  int v6only;        /* IPv6 address: IPV6_V6ONLY */
} lpvm_tcp_listen_opts;

#define LPVM_TCP_LISTEN_OPTS_INIT {0, 1, 0}

/* Listen on host (numeric IPv4 or IPv6 address; NULL: 127.0.0.1) and port (0: any;
** the port chosen is stored in *bound, which may be NULL). `po` are the options of
** the connections it accepts. */
LPVM_API int lpvm_tcp_listen(lpvm_task *self, const char *host, int port,
                             const lpvm_tcp_listen_opts *lo, const lpvm_port_opts *po,
                             lpvm_id *listener, int *bound);
/* Ask for one connection: it arrives to `acceptor` (0: self) as {tcp_accept,
** Listener, Conn}, Conn owned by the acceptor.
** Requests are served in order, so a pool of acceptors each asking again after
** every connection shares the listener. Under EMFILE the listener backs off and
** retries; pending connections wait in the kernel's backlog. */
LPVM_API int lpvm_tcp_accept(lpvm_task *self, lpvm_id listener, lpvm_id acceptor);
/* Connect to host:port (numeric address). {connected, Port} or {error, Port,
** Reason} (econnrefused, timeout after timeout_ms unless 0, ...) then {closed}.
** Sends before the connection is up are queued. */
LPVM_API int lpvm_tcp_connect(lpvm_task *self, const char *host, int port, uint64_t timeout_ms,
                              const lpvm_port_opts *po, lpvm_id *port_id);

/* ---- commands for stream ports (spawn, fd, tcp) ----------------------------------------- */

/* Queue data for writing (framed by the packet option). Never lost: written in
** order, partial writes resume when writable. LPVM_EBUSY when the queue is over
** the high-water mark: nothing was queued, and {ready, Port} comes to the caller
** once the queue has drained to half of it. LPVM_ENOPROC once the port has sent
** {closed, Port}, even while it is still finishing its exit. */
LPVM_API int lpvm_port_send(lpvm_task *self, lpvm_id port, const void *data, size_t len);
struct lpvm_bin;
/* The same for bytes [off, off + len) of a shared binary (lpvm/binary.h), without a
** copy: the port writes them from the binary, which it keeps until they are written. */
LPVM_API int lpvm_port_send_bin(lpvm_task *self, lpvm_id port, struct lpvm_bin *bin,
                                size_t off, size_t len);
/* active false: deliver one message: n bytes exactly (raw; 0 = what is there), or
** one line or packet (n must be 0). {eof} or {error} answer it as well.
** LPVM_EINVAL at once for n over the port's max_packet. From a task other than the
** owner (whom the answer would reach): {error, Port, not_owner} to that task. */
LPVM_API int lpvm_port_recv(lpvm_task *self, lpvm_id port, size_t n);
/* Withdraw the owner's pending recv (Erlang's gen_tcp:recv/3 after its timeout: the
** bytes stay in the port). Exactly one message answers a recv: its {data, ...}, {eof},
** {error, ...} if that had gone already, else {recv_cancelled, Port}; nothing if no recv
** was pending. A later recv then asks for its own n. */
LPVM_API int lpvm_port_recv_cancel(lpvm_task *self, lpvm_id port);
LPVM_API int lpvm_port_set_active(lpvm_task *self, lpvm_id port, int active);
LPVM_API int lpvm_port_set_packet(lpvm_task *self, lpvm_id port, int packet);
/* Close the write side once the queue is written (tcp: shutdown(SHUT_WR); spawn:
** the program's stdin gets EOF). Reading goes on. */
LPVM_API int lpvm_port_shutdown(lpvm_task *self, lpvm_id port);
/* Write what is queued, then close: {closed, Port}. Any port kind. */
LPVM_API int lpvm_port_close(lpvm_task *self, lpvm_id port);
/* Close now: drop what is queued, close the descriptors (a program is killed and
** reaped), then {closed, Port}; the port ends normally, so its owner, linked, lives
** on. Stream ports (spawn, fd, tcp); the others close at their "close" anyway. */
LPVM_API int lpvm_port_close_now(lpvm_task *self, lpvm_id port);
/* What kind of port `port` is: "spawn", "fd", "tcp", "tcp_listen", "file" (or the
** type of another port task); NULL if it is not a port or has ended. A static
** string. The calls for one kind refuse the others with LPVM_EINVAL. */
LPVM_API const char *lpvm_port_kind(lpvm_id port);
/* Hand the port to another task (only its owner may). Messages already sent stay
** with the old owner: hand over with active false, then set it in the new owner. */
LPVM_API int lpvm_port_controlling_process(lpvm_task *self, lpvm_id port, lpvm_id new_owner);

/* ---- file: a regular file through a private-thread port --------------------------------- */

/* mode as fopen: "r", "r+", "w", "w+", "a", "a+". Opens now: LPVM_ESYS with errno
** (ENOENT, EACCES, EMFILE, ...) on failure. */
LPVM_API int lpvm_file_open(lpvm_task *self, const char *path, const char *mode, lpvm_id owner,
                            lpvm_id *port);
LPVM_API int lpvm_file_read(lpvm_task *self, lpvm_id port, size_t n);
LPVM_API int lpvm_file_write(lpvm_task *self, lpvm_id port, const void *data, size_t len);
/* whence: SEEK_SET, SEEK_CUR, SEEK_END (0, 1, 2). */
LPVM_API int lpvm_file_seek(lpvm_task *self, lpvm_id port, int64_t offset, int whence);

/* ---- errors --------------------------------------------------------------------------------- */

/* The Erlang-style atom for an errno value ("econnrefused", "emfile", ...). */
LPVM_API const char *lpvm_errno_atom(int err);

#ifdef __cplusplus
}
#endif

#endif
