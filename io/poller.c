/*
** poller.c -- the epoll set, waited in by an idle worker, turning readiness into messages.
**
** There is no poller thread. The scheduler's idle path (sched/sched.c) lets one idle
** worker at a time hold the poll: it waits in epoll_wait here instead of on its
** condition variable, so a packet that arrives wakes the worker that will run the
** port it is for, with no hop through another thread (BEAM's schedulers poll the same
** way). A busy worker looks in, without waiting, every few dozen steps when no idle
** worker holds the poll, so readiness is never left unread while work runs. The
** runtime opens the set before the workers start and closes it after they end, and
** hands the scheduler the four io_poll_* functions of io/io.h (the scheduler does not
** include io/).
**
** The epoll data of a registration is the port's id with the descriptor's tag
** folded into two bits a port id never uses: bit 63 (always set in a port id) and
** bit 31 (a slot is below 2^31: ptab_init refuses larger tables). Key 0 is the
** eventfd that wakes the worker in the poll (io_poll_wake). The poll reads no port
** memory, so a port may close and be freed at any time; a late event finds a dead
** id and its message is dropped by the send.
*/
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "io/io.h"
#include "io/poller.h"
#include "lpvm/lpvm.h"

#define BIT31 (UINT64_C(1) << 31)
#define MAX_EVENTS 256

/* epfd and evfd are written by io_poll_open before the workers start and by
** io_poll_close after they end; everything else only reads them. */
static struct {
  _Atomic int ready;     /* epfd is valid */
  int epfd, evfd;
  _Atomic int watched;   /* descriptors in the set (io_watch, io_unwatch) */
} P = {.epfd = -1, .evfd = -1};

/* What the calling thread's last io_poll_wait got, for io_poll_deliver. */
static _Thread_local struct {
  int n;
  struct epoll_event ev[MAX_EVENTS];
} got;

static uint64_t io_key(lpvm_id id, int tag) {
  uint64_t k = id & ~(LPVM_ID_PORT_BIT | BIT31);
  if (tag & 2) k |= LPVM_ID_PORT_BIT;
  if (tag & 1) k |= BIT31;
  return k;
}

static lpvm_id key_id(uint64_t k) { return (k & ~BIT31) | LPVM_ID_PORT_BIT; }
static int key_tag(uint64_t k) { return (int)((k >> 62) & 2) | (int)((k >> 31) & 1); }

/* {'$io', Tag, Events}: twelve bytes, built by hand on the poll's hot path. */
static const uint8_t ready_head[] = {131, 104, 3, 119, 3, '$', 'i', 'o', 97};
#define READY_LEN (sizeof ready_head + 3)

static lpvm_msg *ready_msg(int tag, uint32_t ev) {
  lpvm_msg *m = lpvm_msg_new(READY_LEN);
  if (!m) return NULL;
  uint8_t *p = lpvm_msg_data(m);
  memcpy(p, ready_head, sizeof ready_head);
  p[sizeof ready_head] = (uint8_t)tag;
  p[sizeof ready_head + 1] = 97;
  p[sizeof ready_head + 2] = (uint8_t)ev;
  return m;
}

int io_ready_parse(lpvm_msg *m, int *tag, uint32_t *ev) {
  if (lpvm_msg_from(m) != 0 || lpvm_msg_len(m) != READY_LEN) return 0;
  const uint8_t *p = lpvm_msg_data(m);
  if (memcmp(p, ready_head, sizeof ready_head) != 0) return 0;
  *tag = p[sizeof ready_head];
  *ev = p[sizeof ready_head + 2];
  return 1;
}

static uint32_t map_events(uint32_t e) {
  uint32_t ev = 0;
  if (e & EPOLLIN) ev |= IO_IN;
  if (e & EPOLLOUT) ev |= IO_OUT;
  if (e & (EPOLLERR | EPOLLHUP)) ev |= IO_ERR;
  return ev;
}

/* A lost readiness message would leave the descriptor disarmed for good: retry
** an allocation failure rather than drop it. */
static void deliver(lpvm_id id, int tag, uint32_t ev) {
  for (;;) {
    lpvm_msg *m = ready_msg(tag, ev);
    if (m) {
      lpvm_send_msg(NULL, id, m);  /* dead id: dropped, nothing to do */
      return;
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

int io_poll_wait(int timeout_ms) {
  got.n = 0;
  int n = epoll_wait(P.epfd, got.ev, MAX_EVENTS, timeout_ms);
  for (int i = 0; i < n; i++) {
    if (got.ev[i].data.u64 == 0) {  /* the wake-up: drain it */
      uint64_t v;
      if (read(P.evfd, &v, sizeof v) < 0) { /* already drained */ }
      continue;
    }
    got.ev[got.n++] = got.ev[i];
  }
  return got.n;
}

void io_poll_deliver(void) {
  int n = got.n;
  got.n = 0;
  for (int i = 0; i < n; i++) {
    uint64_t k = got.ev[i].data.u64;
    deliver(key_id(k), key_tag(k), map_events(got.ev[i].events));
  }
}

void io_poll_wake(void) {
  uint64_t one = 1;
  if (write(P.evfd, &one, sizeof one) < 0) { /* the counter cannot overflow here */ }
}

int io_poll_watching(void) {
  return atomic_load_explicit(&P.watched, memory_order_relaxed) > 0;
}

/* Writes to a closed pipe or socket must fail with EPIPE, not kill the VM. An
** embedder's own SIGPIPE handler is left alone. */
static void ignore_sigpipe(void) {
  struct sigaction old;
  if (sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_DFL) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPIPE, &sa, NULL);
  }
}

int io_poll_open(void) {
  if (atomic_load(&P.ready)) return 0;
  ignore_sigpipe();
  P.epfd = epoll_create1(EPOLL_CLOEXEC);
  if (P.epfd < 0) return LPVM_ESYS;
  P.evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  struct epoll_event e = {.events = EPOLLIN, .data.u64 = 0};
  if (P.evfd < 0 || epoll_ctl(P.epfd, EPOLL_CTL_ADD, P.evfd, &e) != 0) {
    int err = errno;
    if (P.evfd >= 0) close(P.evfd);
    close(P.epfd);
    P.epfd = P.evfd = -1;
    errno = err;
    return LPVM_ESYS;
  }
  atomic_store(&P.watched, 0);
  atomic_store_explicit(&P.ready, 1, memory_order_release);
  return 0;
}

void io_poll_close(void) {
  if (!atomic_load(&P.ready)) return;
  atomic_store(&P.ready, 0);
  close(P.evfd);
  close(P.epfd);
  P.epfd = P.evfd = -1;
}

int io_poller_ensure(void) {
  return atomic_load_explicit(&P.ready, memory_order_acquire) ? 0 : LPVM_ESTATE;
}

void io_fdw_init(io_fdw *w, int fd, int tag) {
  memset(w, 0, sizeof *w);
  w->fd = fd;
  w->tag = (uint8_t)tag;
}

static uint32_t epoll_bits(uint32_t events) {
  uint32_t e = EPOLLONESHOT;
  if (events & IO_IN) e |= EPOLLIN;
  if (events & IO_OUT) e |= EPOLLOUT;
  return e;
}

int io_watch(io_fdw *w, lpvm_id id, uint32_t events) {
  if (w->fd < 0 || events == 0 || w->armed == events) return 0;
  if (w->nopoll) {  /* always ready: tell ourselves at once */
    w->armed = events;
    lpvm_msg *m = ready_msg(w->tag, events);
    return m ? lpvm_send_msg(NULL, id, m) : LPVM_ENOMEM;
  }
  int rc = io_poller_ensure();
  if (rc) return rc;
  struct epoll_event e = {.events = epoll_bits(events), .data.u64 = io_key(id, w->tag)};
  if (epoll_ctl(P.epfd, w->added ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, w->fd, &e) != 0) {
    if (errno == EPERM && !w->added) {  /* regular file or the like */
      w->nopoll = 1;
      return io_watch(w, id, events);
    }
    return LPVM_ESYS;
  }
  if (!w->added) atomic_fetch_add_explicit(&P.watched, 1, memory_order_relaxed);
  w->added = 1;
  w->armed = events;
  return 0;
}

void io_unwatch(io_fdw *w) {
  if (w->added && w->fd >= 0) epoll_ctl(P.epfd, EPOLL_CTL_DEL, w->fd, NULL);
  if (w->added) atomic_fetch_sub_explicit(&P.watched, 1, memory_order_relaxed);
  w->added = 0;
  w->armed = 0;
}
