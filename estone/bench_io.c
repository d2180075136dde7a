/*
** bench_io.c -- port I/O: the estone port pattern through `cat`, and TCP echo on
** loopback (round trips, and streaming throughput) with N connections.
**
**   build/estone/bench_io [rounds]
**
** estone port i/o (Hedqvist's EStone suite): 5 tasks, each with its own `cat`
** port, alternately send a 200-byte and a 5-byte command and wait for the echo.
** No asserts: this measures, the tests check.
*/
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lpvm/lpvm.h"
#include "lpvm/port.h"
#include "lpvm/task.h"
#include "lpvm/term.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static _Atomic int done_tasks;
static _Atomic int failed;

/* {Tag, Port, ...}: the tag and (for data) the binary. */
static int parse(lpvm_msg *m, char *tag, size_t cap, const uint8_t **bin, size_t *len) {
  lpvm_tread r;
  uint32_t ar;
  const char *a;
  size_t n;
  lpvm_id port;
  if (lpvm_tread_init(&r, lpvm_msg_data(m), lpvm_msg_len(m)) || lpvm_get_tuple(&r, &ar) ||
      ar < 2 || lpvm_get_atom(&r, &a, &n) || n >= cap || lpvm_get_pid(&r, &port))
    return -1;
  memcpy(tag, a, n);
  tag[n] = 0;
  *len = 0;
  if (ar == 3 && lpvm_get_type(&r) == LPVM_T_BINARY) lpvm_get_binary(&r, bin, len);
  return 0;
}

/* ---- a ping task: send a message to its port, wait for all of it back, repeat ---- */

typedef struct ping_task {
  lpvm_task task;
  lpvm_id port;
  long rounds, done;
  size_t sizes[2], want, got;
  int tcp, tcp_port;
} ping_task;

typedef struct ping_args {
  int tcp, tcp_port;
  long rounds;
  size_t a, b;
} ping_args;

static void ping_send(ping_task *p) {
  static const char payload[65536];
  p->want = p->sizes[p->done & 1];
  p->got = 0;
  if (lpvm_port_send(&p->task, p->port, payload, p->want) != 0) atomic_store(&failed, 1);
}

static int ping_finish(ping_task *p) {
  lpvm_port_close(&p->task, p->port);
  atomic_fetch_add(&done_tasks, 1);
  return LPVM_WAIT;  /* exits on {closed} */
}

static int ping_event(lpvm_task *t) {
  ping_task *p = (ping_task *)t;
  lpvm_msg *m;
  while ((m = lpvm_recv(t)) != NULL) {
    char tag[32];
    const uint8_t *bin;
    size_t len;
    int st = LPVM_WAIT;
    if (parse(m, tag, sizeof tag, &bin, &len) == 0) {
      if (!strcmp(tag, "connected")) ping_send(p);
      else if (!strcmp(tag, "data") && (p->got += len) >= p->want) {
        if (++p->done == p->rounds) ping_finish(p);
        else ping_send(p);
      } else if (!strcmp(tag, "error")) atomic_store(&failed, 1);
      else if (!strcmp(tag, "closed")) st = LPVM_EXIT;
    }
    lpvm_msg_free(m);
    if (st == LPVM_EXIT) return st;
  }
  return LPVM_WAIT;
}

static int ping_setup(lpvm_task *t) {
  ping_task *p = (ping_task *)t;
  int rc;
  if (p->tcp) {
    rc = lpvm_tcp_connect(t, "127.0.0.1", p->tcp_port, 5000, NULL, &p->port);
  } else {
    static const char *const cat[] = {"cat", NULL};
    lpvm_spawn_port_opts so = {cat, NULL, NULL, LPVM_STDERR_INHERIT};
    rc = lpvm_port_spawn(t, &so, NULL, &p->port);
    if (rc == 0) ping_send(p);
  }
  if (rc) {
    atomic_store(&failed, 1);
    return LPVM_EXIT;
  }
  return LPVM_WAIT;
}

static int ping_init(lpvm_task *t, void *arg) {
  ping_task *p = (ping_task *)t;
  const ping_args *a = arg;
  p->rounds = a->rounds;
  p->sizes[0] = a->a;
  p->sizes[1] = a->b;
  p->tcp = a->tcp;
  p->tcp_port = a->tcp_port;
  return LPVM_SETUP;
}

static const lpvm_task_def ping_def = {.type = "ping", .prio = 20, .size = sizeof(ping_task),
                                       .init = ping_init, .setup = ping_setup,
                                       .handle_event = ping_event};

/* Run n ping tasks; returns the seconds it took for all of them. */
static double run_pings(int n, const ping_args *a) {
  atomic_store(&done_tasks, 0);
  double t0 = now_s();
  for (int i = 0; i < n; i++) lpvm_spawn_task(NULL, &ping_def, (void *)a, 0, NULL);
  while (atomic_load(&done_tasks) < n && !atomic_load(&failed)) {
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  return now_s() - t0;
}

/* ---- the TCP echo server: a listener, an acceptor, one handler per connection ------- */

static lpvm_id listener;
static _Atomic int listener_port;

static int echo_event(lpvm_task *t) {
  lpvm_id conn = (lpvm_id)(uintptr_t)t->user;
  lpvm_msg *m;
  while ((m = lpvm_recv(t)) != NULL) {
    char tag[32];
    const uint8_t *bin;
    size_t len;
    int st = LPVM_WAIT;
    if (lpvm_term_is_atom(lpvm_msg_data(m), lpvm_msg_len(m), "go")) {
      lpvm_port_set_active(t, conn, LPVM_ACTIVE_TRUE);
    } else if (parse(m, tag, sizeof tag, &bin, &len) == 0) {
      /* a ping client never has more than one message in flight: no EBUSY here */
      if (!strcmp(tag, "data")) lpvm_port_send(t, conn, bin, len);
      else if (!strcmp(tag, "eof")) lpvm_port_close(t, conn);
      else if (!strcmp(tag, "closed")) st = LPVM_EXIT;
    }
    lpvm_msg_free(m);
    if (st == LPVM_EXIT) return st;
  }
  return LPVM_WAIT;
}

static int echo_init(lpvm_task *t, void *arg) {
  t->user = arg;
  return LPVM_WAIT;
}

static const lpvm_task_def echo_def = {.type = "echo", .prio = 20, .init = echo_init,
                                       .handle_event = echo_event};

static int acceptor_event(lpvm_task *t) {
  lpvm_msg *m;
  while ((m = lpvm_recv(t)) != NULL) {
    lpvm_tread r;
    uint32_t ar;
    const char *a;
    size_t n;
    lpvm_id l, c, h;
    if (!lpvm_tread_init(&r, lpvm_msg_data(m), lpvm_msg_len(m)) && !lpvm_get_tuple(&r, &ar) &&
        ar == 3 && !lpvm_get_atom(&r, &a, &n) && n == 10 && !memcmp(a, "tcp_accept", 10) &&
        !lpvm_get_pid(&r, &l) && !lpvm_get_pid(&r, &c) &&
        lpvm_spawn_task(t, &echo_def, (void *)(uintptr_t)c, 0, &h) == 0) {
      lpvm_port_controlling_process(t, c, h);
      lpvm_tbuf b;
      lpvm_tbuf_init(&b);
      lpvm_put_atom(&b, "go");
      lpvm_send_msg(t, h, lpvm_tbuf_to_msg(&b));
      lpvm_tbuf_free(&b);
      lpvm_tcp_accept(t, l, 0);
    }
    lpvm_msg_free(m);
  }
  return LPVM_WAIT;
}

static int acceptor_setup(lpvm_task *t) {
  lpvm_port_opts po = LPVM_PORT_OPTS_INIT;
  po.active = LPVM_ACTIVE_FALSE;
  int port;
  if (lpvm_tcp_listen(t, "127.0.0.1", 0, NULL, &po, &listener, &port) != 0) {
    atomic_store(&failed, 1);
    return LPVM_EXIT;
  }
  atomic_store(&listener_port, port);
  lpvm_tcp_accept(t, listener, 0);
  return LPVM_WAIT;
}

static const lpvm_task_def acceptor_def = {.type = "acceptor", .prio = 20,
                                           .setup = acceptor_setup,
                                           .handle_event = acceptor_event};

/* ---- the runs ---------------------------------------------------------------------------- */

static void start(int workers) {
  lpvm_config c;
  lpvm_config_init(&c);
  c.workers = workers;
  if (lpvm_start(&c) != 0) {
    fprintf(stderr, "lpvm_start failed\n");
    exit(1);
  }
}

static void bench_cat(int workers, long rounds) {
  start(workers);
  ping_args a = {0, 0, rounds, 200, 5};
  double s = run_pings(5, &a);
  double ops = 5.0 * (double)rounds;
  printf("estone port i/o (5 tasks x %ld round trips, 200 B / 5 B, cat), %d workers: "
         "%.0f round trips/s, %.1f us per round trip%s\n",
         rounds, workers, ops / s, s * 1e6 / (double)rounds,
         atomic_load(&failed) ? " (FAILED)" : "");
  lpvm_stop();
}

static void bench_tcp(int workers, int conns, long rounds, size_t size) {
  start(workers);
  atomic_store(&listener_port, 0);
  lpvm_spawn_task(NULL, &acceptor_def, NULL, 0, NULL);
  int port = 0;
  for (int i = 0; i < 1000 && !(port = atomic_load(&listener_port)); i++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  ping_args a = {1, port, rounds, size, size};
  double s = run_pings(conns, &a);
  double ops = (double)conns * (double)rounds;
  printf("tcp echo, %3d connections x %ld round trips of %zu B, %d workers: %.0f round "
         "trips/s, %.1f us per round trip, %.1f MB/s echoed%s\n",
         conns, rounds, size, workers, ops / s, s * 1e6 / (double)rounds,
         ops * (double)size / s / 1e6, atomic_load(&failed) ? " (FAILED)" : "");
  lpvm_stop();
}

int main(int argc, char **argv) {
  long rounds = argc > 1 ? atol(argv[1]) : 20000;
  for (int w = 1; w <= 2; w++) bench_cat(w, rounds);
  for (int w = 1; w <= 2; w++) {
    bench_tcp(w, 1, rounds, 64);
    bench_tcp(w, 16, rounds / 4, 64);
    bench_tcp(w, 64, rounds / 16, 64);
    bench_tcp(w, 16, rounds / 20, 65536);
  }
  return atomic_load(&failed);
}
