/*
** dist_epmd.c -- the EPMD client: register this node, look other nodes up.
**
** EPMD (the Erlang Port Mapper Daemon, port 4369) answers one request per TCP
** connection, except ALIVE2 whose connection stays open as the registration: EPMD
** forgets the node when it closes. These are short requests to a local daemon, made
** when distribution starts or a connection looks a node up, so they block with a
** bound (EPMD_TIMEOUT_MS per send, receive and connect) instead of being states of a
** task. As erl does, lpvm starts `epmd -daemon` when none answers.
*/
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io/dist_int.h"
#include "io/port_int.h"

#define EPMD_PORT 4369
#define be16(p) ((uint32_t)(p)[0] << 8 | (p)[1])
#define be32(p) (be16(p) << 16 | be16((p) + 2))
#define EPMD_TIMEOUT_MS 3000
#define ALIVE2_REQ 120
#define ALIVE2_X_RESP 118
#define ALIVE2_RESP 121
#define PORT_PLEASE2_REQ 122
#define PORT2_RESP 119

extern char **environ;

/* A blocking socket to host:EPMD_PORT whose connect, send and receive are bounded. */
static int epmd_connect(const char *host, int *fd) {
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, "4369", &hints, &res) != 0 || !res) return LPVM_ENOPROC;
  int rc = LPVM_ESYS;
  for (struct addrinfo *a = res; a; a = a->ai_next) {
    int s = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) continue;
    int c = connect(s, a->ai_addr, a->ai_addrlen);
    if (c < 0 && errno == EINPROGRESS) {
      struct pollfd pf = {s, POLLOUT, 0};
      int err = 0;
      socklen_t el = sizeof err;
      if (poll(&pf, 1, EPMD_TIMEOUT_MS) == 1 &&
          getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0) c = 0;
      else errno = err ? err : ETIMEDOUT;
    }
    if (c == 0) {
      struct timeval tv = {EPMD_TIMEOUT_MS / 1000, (EPMD_TIMEOUT_MS % 1000) * 1000};
      setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      io_set_nonblock(s, 0);
      *fd = s;
      rc = 0;
      break;
    }
    close(s);
  }
  freeaddrinfo(res);
  return rc;
}

static int send_all(int fd, const uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return LPVM_ESYS;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Read exactly n bytes (EPMD_TIMEOUT_MS per read). */
static int recv_all(int fd, uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return LPVM_ETIMEDOUT;
    if (r <= 0) return LPVM_ESYS;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

/* `epmd -daemon` detaches at once; wait for the launcher, then for the port. */
static int start_epmd(void) {
  pid_t pid;
  char *argv[] = {"epmd", "-daemon", NULL};
  posix_spawnattr_t at;   /* not the VM threads' mask (vm/main.c blocks SIGINT, SIGTERM) */
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_init(&at);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
  int rc = posix_spawnp(&pid, "epmd", NULL, &at, argv, environ);
  posix_spawnattr_destroy(&at);
  if (rc != 0) {
    dist_log("cannot start epmd (is Debian's erlang-base installed?)");
    return LPVM_ENOPROC;
  }
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  return 0;
}

static int local_epmd(int *fd) {
  if (epmd_connect("127.0.0.1", fd) == 0) return 0;
  int rc = start_epmd();
  if (rc) return rc;
  for (int i = 0; i < 60; i++) {   /* up to 3 s for the daemon to listen */
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    if (epmd_connect("127.0.0.1", fd) == 0) return 0;
  }
  dist_log("epmd did not start listening on port %d", EPMD_PORT);
  return LPVM_ETIMEDOUT;
}

int epmd_register(const char *alive, int port, int hidden, int *fd, uint32_t *creation) {
  size_t nlen = strlen(alive);
  if (nlen == 0 || nlen > 255) return LPVM_EINVAL;
  uint8_t req[16 + 255], *q = req + 2;
  *q++ = ALIVE2_REQ;
  *q++ = (uint8_t)(port >> 8); *q++ = (uint8_t)port;
  *q++ = hidden ? 72 : 77;       /* node type: hidden / normal */
  *q++ = 0;                      /* protocol: TCP/IPv4 */
  *q++ = 0; *q++ = 6;            /* highest version */
  *q++ = 0; *q++ = 6;            /* lowest version */
  *q++ = (uint8_t)(nlen >> 8); *q++ = (uint8_t)nlen;
  memcpy(q, alive, nlen);
  q += nlen;
  *q++ = 0; *q++ = 0;            /* no extra */
  size_t body = (size_t)(q - req) - 2;
  req[0] = (uint8_t)(body >> 8);
  req[1] = (uint8_t)body;
  int s, rc = local_epmd(&s);
  if (rc) return rc;
  uint8_t resp[6];
  if ((rc = send_all(s, req, body + 2)) || (rc = recv_all(s, resp, 2))) goto fail;
  if (resp[0] == ALIVE2_X_RESP && (rc = recv_all(s, resp + 2, 4)) == 0) {
    *creation = be32(resp + 2);
  } else if (resp[0] == ALIVE2_RESP && (rc = recv_all(s, resp + 2, 2)) == 0) {
    *creation = be16(resp + 2);
  } else {
    if (rc == 0) rc = LPVM_EBADTERM;
    goto fail;
  }
  if (resp[1] != 0) {
    dist_log("epmd refused the name %s (result %d): is a node of that name running?",
             alive, resp[1]);
    rc = LPVM_EEXIST;
    goto fail;
  }
  *fd = s;
  return 0;
fail:
  if (rc != LPVM_EEXIST) dist_log("epmd registration of %s failed (%s)", alive,
                                  lpvm_strerror(rc));
  close(s);
  return rc;
}

int epmd_port_please(const char *host, const char *alive, int *port) {
  size_t nlen = strlen(alive);
  if (nlen == 0 || nlen > 255) return LPVM_EINVAL;
  uint8_t req[3 + 255];
  req[0] = (uint8_t)((nlen + 1) >> 8);
  req[1] = (uint8_t)(nlen + 1);
  req[2] = PORT_PLEASE2_REQ;
  memcpy(req + 3, alive, nlen);
  int s, rc = epmd_connect(host, &s);
  if (rc) return rc;
  uint8_t resp[4];
  if ((rc = send_all(s, req, nlen + 3)) == 0 && (rc = recv_all(s, resp, 2)) == 0) {
    if (resp[0] != PORT2_RESP) rc = LPVM_EBADTERM;
    else if (resp[1] != 0) rc = LPVM_ENOPROC;              /* no such node */
    else if ((rc = recv_all(s, resp, 2)) == 0) *port = be16(resp);
  }
  close(s);
  return rc;
}
