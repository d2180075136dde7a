/*
** dist.c -- this node's distribution: start and stop, the listener, the map from
** node names to connection tasks, and the router of signals for remote ids.
**
** Starting (net_kernel:start) makes sure EPMD runs, listens on an ephemeral port,
** registers the name there (the registration is a connection held open), takes the
** creation EPMD gives as this node's and installs the router. The listener is a
** task on the poller that accepts and spawns one connection task per socket.
**
** The map (name -> connection task) is the one place two threads may race to start
** a connection to the same node; it is small and guarded by a mutex. Senders do
** not take it: each node entry caches its connection's id (node_desc.conn), set
** while the connection lives, so routing a signal is one lookup and one push.
*/
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/dist_conn.h"
#include "io/io.h"
#include "io/port_int.h"
#include "lpvm/binary.h"
#include "lpvm/dist.h"
#include "tasks/sig.h"

#define MAX_CONNS 1024

/* A node's entry: its connection and who waits for it to come up ({wait}: connect)
** or go down (monitor_node). Kept here, under the mutex, not in the connection task,
** so that a subscription can never miss a connection that dies meanwhile. */
typedef struct mapent {
  char name[NODE_NAME_MAX + 1];
  size_t len;
  lpvm_id conn;
  int up;
  lpvm_id *waiters, *mons;
  size_t nwait, cwait, nmon, cmon;
} mapent;

static struct {
  pthread_mutex_t mu;
  int running;
  dist_self self;
  int epmd_fd;
  lpvm_id listener;
  mapent map[MAX_CONNS];
  int nmap;
} D = { .mu = PTHREAD_MUTEX_INITIALIZER, .epmd_fd = -1 };

/* The command that closes a connection (an atom term). */
static const uint8_t disconnect_cmd[] = {131, 119, 10, 'd', 'i', 's', 'c', 'o', 'n', 'n',
                                         'e', 'c', 't'};

const dist_self *dist_conf(void) { return &D.self; }

static _Atomic(const lpvm_dist_spawner *) spawner;

void lpvm_dist_set_spawner(const lpvm_dist_spawner *s) {
  atomic_store_explicit(&spawner, s, memory_order_release);
}

const lpvm_dist_spawner *dist_spawner(void) {
  return atomic_load_explicit(&spawner, memory_order_acquire);
}

void dist_log(const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "lpvm dist: %s\n", line);
}

/* {nodeup | nodedown, Node} to a local process */
static void tell(lpvm_id to, const char *what, const char *node) {
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 2);
  lpvm_put_atom(&b, what);
  lpvm_put_atom(&b, node);
  lpvm_msg *m = lpvm_tbuf_to_msg(&b);
  lpvm_tbuf_free(&b);
  if (m) lpvm_send_msg(NULL, to, m);
}

static int add_pid(lpvm_id **arr, size_t *n, size_t *cap, lpvm_id id) {
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 4;
    lpvm_id *a = realloc(*arr, nc * sizeof *a);
    if (!a) return LPVM_ENOMEM;
    *arr = a;
    *cap = nc;
  }
  (*arr)[(*n)++] = id;
  return 0;
}

/* ---- the map ------------------------------------------------------------------------- */

static mapent *map_find(const char *name, size_t len) {
  for (int i = 0; i < D.nmap; i++)
    if (D.map[i].len == len && memcmp(D.map[i].name, name, len) == 0) return &D.map[i];
  return NULL;
}

static void cache_set(uint32_t idx, node_desc *d, void *ud) {
  (void)idx;
  atomic_store_explicit(&d->conn, *(lpvm_id *)ud, memory_order_release);
}

static void cache_clear(uint32_t idx, node_desc *d, void *ud) {
  (void)idx;
  lpvm_id expect = *(lpvm_id *)ud;
  atomic_compare_exchange_strong(&d->conn, &expect, 0);
}

static int valid_name(const char *name, size_t len) {
  const char *at = memchr(name, '@', len);
  return len > 2 && len <= NODE_NAME_MAX && at && at != name && at != name + len - 1 &&
         !memchr(name, 0, len) && !memchr(at + 1, '@', (size_t)(name + len - at - 1));
}

lpvm_id dist_conn_for(const char *name, size_t len, int start) {
  lpvm_id id = 0;
  if (!valid_name(name, len) || node_is_self(name, len, UINT32_MAX)) return 0;
  pthread_mutex_lock(&D.mu);
  if (D.running) {
    mapent *e = map_find(name, len);
    if (e) id = e->conn;
    else if (start && D.nmap < MAX_CONNS && dconn_spawn(-1, name, len, &id) == 0) {
      e = &D.map[D.nmap++];
      memcpy(e->name, name, len);
      e->name[len] = 0;
      e->len = len;
      memset(e, 0, sizeof *e);
      memcpy(e->name, name, len);
      e->len = len;
      e->conn = id;
      node_foreach_named(name, len, cache_set, &id);
    }
  }
  pthread_mutex_unlock(&D.mu);
  return id;
}

/* Erlang's order of node names: atoms compare by their text. */
static int name_cmp(const char *a, size_t al, const char *b, size_t bl) {
  int c = memcmp(a, b, al < bl ? al : bl);
  return c ? c : (al > bl) - (al < bl);
}

/* An accepted connection has its peer's name (send_name): Erlang's rule for a
** simultaneous connect (net_kernel's). No entry: this connection is now the node's
** (pending: senders queue in it). An entry whose connection is up: go on, and the
** newer replaces it at UP (a restarted peer, or one that saw the old one break
** first). An entry still in its handshake: the node with the greater name keeps its
** own attempt, so when ours is greater we answer "nok"; else our attempt takes
** over this socket (`adopt`, pushed under the mutex: dist_conn_gone, which a dying
** connection calls before it drains its mailbox, cannot pass it), which keeps the
** node's connection id and every signal queued in it, in order. */
int dist_conn_accept(lpvm_id conn, const char *name, size_t len, lpvm_msg *adopt) {
  int rc = DACC_OK;
  pthread_mutex_lock(&D.mu);
  mapent *e = map_find(name, len);
  if (e && !e->up && e->conn != conn) {
    if (name_cmp(D.self.name, strlen(D.self.name), name, len) > 0) rc = DACC_NOK;
    else if (sig_send(e->conn, adopt) == 0) rc = DACC_ADOPTED;
    else e->conn = 0;             /* it is gone (its exit is past the map): take over */
  }
  if (!e && D.running && D.nmap < MAX_CONNS) {
    e = &D.map[D.nmap++];
    memset(e, 0, sizeof *e);
    memcpy(e->name, name, len);
    e->name[len] = 0;
    e->len = len;
  }
  if (rc == DACC_OK && e && !e->conn) {
    e->conn = conn;
    node_foreach_named(name, len, cache_set, &conn);
  }
  pthread_mutex_unlock(&D.mu);
  return rc;
}

/* A connection is up. If another connection to that node was up, the newer one wins
** (the old one is closed): a restarted peer, or one that reconnected after seeing
** the old connection break before we did. */
void dist_conn_up(lpvm_id conn, const char *name, size_t len, uint32_t creation) {
  (void)creation;
  lpvm_id old = 0;
  pthread_mutex_lock(&D.mu);
  mapent *e = map_find(name, len);
  if (e && e->conn != conn) old = e->conn;
  if (!e && D.nmap < MAX_CONNS) {
    e = &D.map[D.nmap++];
    memset(e, 0, sizeof *e);
    memcpy(e->name, name, len);
    e->name[len] = 0;
    e->len = len;
  }
  lpvm_id *waiters = NULL;
  size_t nwait = 0;
  if (e) {
    e->conn = conn;
    e->up = 1;
    waiters = e->waiters, nwait = e->nwait;
    e->waiters = NULL, e->nwait = e->cwait = 0;
  }
  node_foreach_named(name, len, cache_set, &conn);
  pthread_mutex_unlock(&D.mu);
  for (size_t i = 0; i < nwait; i++) tell(waiters[i], "nodeup", name);
  free(waiters);
  if (old) lpvm_send(NULL, old, disconnect_cmd, sizeof disconnect_cmd);
}

void dist_conn_gone(lpvm_id conn, const char *name, size_t len, int was_up) {
  (void)was_up;
  mapent gone = {0};
  pthread_mutex_lock(&D.mu);
  mapent *e = map_find(name, len);
  if (e && e->conn == conn) {
    gone = *e;
    *e = D.map[--D.nmap];
  }
  node_foreach_named(name, len, cache_clear, &conn);
  pthread_mutex_unlock(&D.mu);
  for (size_t i = 0; i < gone.nwait; i++) tell(gone.waiters[i], "nodedown", gone.name);
  for (size_t i = 0; i < gone.nmon; i++) tell(gone.mons[i], "nodedown", gone.name);
  free(gone.waiters);
  free(gone.mons);
}

/* lpvm.connect's wait and monitor_node: subscribe `who` to the entry of `node`
** (started when `start`). No entry: the node is unreachable, nodedown at once. */
static int subscribe(lpvm_id who, const char *node, int mon, int on) {
  size_t len = node ? strlen(node) : 0;
  if (!valid_name(node, len)) return LPVM_EINVAL;
  if (on) (void)dist_conn_for(node, len, 1);
  int rc = LPVM_ENOPROC, up = 0;
  pthread_mutex_lock(&D.mu);
  mapent *e = map_find(node, len);
  if (e && !mon && e->up) up = 1, rc = 0;
  else if (e && on) rc = mon ? add_pid(&e->mons, &e->nmon, &e->cmon, who)
                             : add_pid(&e->waiters, &e->nwait, &e->cwait, who);
  else if (e) {                                  /* monitor_node(node, false) */
    for (size_t i = 0; i < e->nmon; i++)
      if (e->mons[i] == who) { e->mons[i] = e->mons[--e->nmon]; break; }
    rc = 0;
  }
  pthread_mutex_unlock(&D.mu);
  if (up) tell(who, "nodeup", node);
  else if (rc && on) tell(who, "nodedown", node);
  return 0;
}

int lpvm_dist_wait(lpvm_id who, const char *node) { return subscribe(who, node, 0, 1); }

int lpvm_dist_monitor_node(lpvm_id who, const char *node, int on) {
  return subscribe(who, node, 1, on);
}

/* ---- the router ------------------------------------------------------------------------ */

/* Wrap the signal for the connection of its target's node (starting one if none, as
** erl connects on first send). No connection possible: LPVM_ENOPROC, and the caller
** answers links and monitors with noproc; the connection itself answers noconnection
** when it fails later. */
static int route(lpvm_id to, struct lpvm_sig *s, uint32_t *queued) {
  node_desc *d = node_get(node_id_index(to));
  if (!d) return LPVM_ENOPROC;
  lpvm_id conn = atomic_load_explicit(&d->conn, memory_order_acquire);
  if (!conn) conn = dist_conn_for(d->name, d->len, 1);
  if (!conn) return LPVM_ENOPROC;
  /* a message's shared binaries leave the node as BINARY_EXT, bytes and all */
  size_t len = lpvm_msg_flat_len(s);
  struct lpvm_sig *w = lpvm_msg_new(sizeof(dist_wrap) + len);
  if (!w) return LPVM_ENOMEM;
  dist_wrap h = {s->kind, 0, to};
  memcpy(lpvm_msg_data(w), &h, sizeof h);
  if (len) lpvm_msg_flat_write(s, lpvm_msg_data(w) + sizeof h);
  if (len && !dist_term_ok(lpvm_msg_data(w) + sizeof h, len)) {   /* dist_term.c */
    if (s->kind == SIG_MESSAGE) {
      dist_log("a message to a process on %.*s was not sent: it holds a NaN or infinite "
               "float or a map with two equal keys, which erl cannot decode",
               (int)d->len, d->name);
      free(w);
      lpvm_msg_free(s);
      return 0;
    }
    size_t rlen;
    uint8_t *r = dist_term_rendered(lpvm_msg_data(w) + sizeof h, len, &rlen);
    free(w);
    if (!r || !(w = lpvm_msg_new(sizeof(dist_wrap) + rlen))) { free(r); return LPVM_ENOMEM; }
    memcpy(lpvm_msg_data(w), &h, sizeof h);
    memcpy(lpvm_msg_data(w) + sizeof h, r, rlen);
    free(r);
  }
  w->kind = SIG_DIST;
  w->from = s->from;
  w->ref = s->ref;
  if (sig_send_q(conn, w, queued) != 0) {
    free(w);
    return LPVM_ENOPROC;
  }
  lpvm_msg_free(s);
  return 0;
}

/* ---- the listener --------------------------------------------------------------------------- */

typedef struct listener {
  lpvm_task task;
  io_fdw w;
} listener;

static int l_init(lpvm_task *t, void *arg) {
  io_fdw_init(&((listener *)t)->w, *(int *)arg, 0);
  return LPVM_SETUP;
}

static int l_setup(lpvm_task *t) {
  listener *l = (listener *)t;
  io_poller_ensure();
  io_watch(&l->w, t->id, IO_IN);
  return LPVM_WAIT;
}

static int l_event(lpvm_task *t) {
  listener *l = (listener *)t;
  lpvm_msg *m;
  int tag;
  uint32_t ev;
  while ((m = lpvm_recv(t)) != NULL) {
    int ready = io_ready_parse(m, &tag, &ev);
    int stop = !ready && lpvm_term_is_atom(lpvm_msg_data(m), lpvm_msg_len(m), "stop");
    lpvm_msg_free(m);
    if (stop) return LPVM_EXIT;
    if (!ready) continue;
    io_fired(&l->w);
    for (int i = 0; i < 64; i++) {   /* a batch, then back to the poller */
      int fd = accept4(l->w.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      lpvm_id id;
      if (dconn_spawn(fd, NULL, 0, &id) != 0) close(fd);
    }
  }
  io_watch(&l->w, t->id, IO_IN);
  return LPVM_WAIT;
}

static void l_terminate(lpvm_task *t, const uint8_t *reason, size_t len) {
  (void)reason, (void)len;
  io_close_fd(&((listener *)t)->w);
}

static const lpvm_task_def listener_def = {
  .type = "dist_listener",
  .prio = LPVM_PRIO_PORT,
  .size = sizeof(listener),
  .init = l_init,
  .setup = l_setup,
  .handle_event = l_event,
  .terminate = l_terminate,
};

static int listen_on(const char *addr, int *port) {
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  if (!addr) a.sin_addr.s_addr = htonl(INADDR_ANY);
  else if (inet_pton(AF_INET, addr, &a.sin_addr) != 1) return LPVM_EINVAL;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return LPVM_ESYS;
  socklen_t al = sizeof a;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 128) < 0 ||
      getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
    close(fd);
    return LPVM_ESYS;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

/* ---- cookie ----------------------------------------------------------------------------------- */

/* ~/.erlang.cookie as erl uses it: created with 20 random capital letters and mode
** 0400 when missing; refused when others may read it. */
static int home_cookie(char *out, size_t cap) {
  const char *home = getenv("HOME");
  if (!home || !*home) { dist_log("no HOME for ~/.erlang.cookie: give a cookie"); return LPVM_EINVAL; }
  char path[4096];
  snprintf(path, sizeof path, "%s/.erlang.cookie", home);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    char c[20];
    for (int i = 0; i < 20; i++) c[i] = (char)('A' + hs_challenge() % 26);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0400);
    if (fd >= 0) {
      ssize_t w = write(fd, c, sizeof c);
      close(fd);
      if (w != (ssize_t)sizeof c) return LPVM_ESYS;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
  }
  if (fd < 0) { dist_log("cannot open %s: %s", path, strerror(errno)); return LPVM_ESYS; }
  struct stat st;
  if (fstat(fd, &st) < 0 || (st.st_mode & 077)) {
    dist_log("cookie file %s must be accessible by owner only", path);
    close(fd);
    return LPVM_EINVAL;
  }
  ssize_t n = read(fd, out, cap - 1);
  close(fd);
  if (n <= 0) return LPVM_EINVAL;
  while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r' || out[n - 1] == ' ')) n--;
  out[n] = 0;
  return n > 0 ? 0 : LPVM_EINVAL;
}

/* ---- start and stop --------------------------------------------------------------------------- */

static int full_name(const lpvm_dist_opts *o, char *out) {
  const char *at = strchr(o->name, '@');
  size_t alen = at ? (size_t)(at - o->name) : strlen(o->name);
  if (alen == 0 || alen > 200) return LPVM_EINVAL;
  char host[256] = {0};
  if (at) {
    snprintf(host, sizeof host, "%s", at + 1);
  } else {
    if (gethostname(host, sizeof host - 1) < 0) return LPVM_ESYS;
    if (!o->longnames) { char *dot = strchr(host, '.'); if (dot) *dot = 0; }
  }
  if (!host[0]) return LPVM_EINVAL;
  int n = snprintf(out, NODE_NAME_MAX + 1, "%.*s@%s", (int)alen, o->name, host);
  /* a second '@' ("a@b@c") made a node whose own name valid_name refuses: no peer
  ** could reach it and sends to {name, itself} went nowhere */
  return n > 0 && n <= NODE_NAME_MAX && valid_name(out, (size_t)n) ? 0 : LPVM_EINVAL;
}

int lpvm_dist_start(const lpvm_dist_opts *o) {
  if (!o || !o->name) return LPVM_EINVAL;
  pthread_mutex_lock(&D.mu);
  int running = D.running;
  pthread_mutex_unlock(&D.mu);
  if (running) return LPVM_ESTATE;
  dist_self self = {0};
  int rc = full_name(o, self.name);
  if (rc) return rc;
  if (o->cookie) {
    if (strlen(o->cookie) >= sizeof self.cookie) return LPVM_EINVAL;
    strcpy(self.cookie, o->cookie);
  } else if ((rc = home_cookie(self.cookie, sizeof self.cookie)) != 0) {
    return rc;
  }
  self.tick_ms = (o->ticktime ? o->ticktime : 60) * 1000 / 4;
  self.max_message = o->max_message ? o->max_message : UINT32_MAX;
  self.hidden = o->hidden;
  int port, lfd = listen_on(o->listen, &port);
  if (lfd < 0) return lfd;
  char alive[256];
  snprintf(alive, sizeof alive, "%.*s", (int)(strchr(self.name, '@') - self.name), self.name);
  int efd;
  uint32_t creation;
  if ((rc = epmd_register(alive, port, 1, &efd, &creation)) != 0) {
    close(lfd);
    return rc;
  }
  pthread_mutex_lock(&D.mu);
  D.self = self;
  D.epmd_fd = efd;
  D.running = 1;
  pthread_mutex_unlock(&D.mu);
  node_set_self(self.name, strlen(self.name), creation);
  node_set_router(route);
  if ((rc = lpvm_spawn_task(NULL, &listener_def, &lfd, 0, &D.listener)) != 0) {
    close(lfd);
    lpvm_dist_stop();
  }
  return rc;
}

int lpvm_dist_stop(void) {
  pthread_mutex_lock(&D.mu);
  if (!D.running) { pthread_mutex_unlock(&D.mu); return LPVM_ESTATE; }
  D.running = 0;
  lpvm_id conns[MAX_CONNS];
  int n = D.nmap;
  for (int i = 0; i < n; i++) conns[i] = D.map[i].conn;
  lpvm_id l = D.listener;
  D.listener = 0;
  if (D.epmd_fd >= 0) close(D.epmd_fd);
  D.epmd_fd = -1;
  pthread_mutex_unlock(&D.mu);
  static const uint8_t stop[] = {131, 119, 4, 's', 't', 'o', 'p'};
  for (int i = 0; i < n; i++) lpvm_send(NULL, conns[i], disconnect_cmd, sizeof disconnect_cmd);
  if (l) lpvm_send(NULL, l, stop, sizeof stop);
  node_set_router(NULL);
  node_set_self(NULL, 0, 0);
  return 0;
}

void io_dist_stop(void) { (void)lpvm_dist_stop(); }

const char *lpvm_node_name(void) { return node_self()->name; }

lpvm_id lpvm_dist_conn(const char *node, int start) {
  return node ? dist_conn_for(node, strlen(node), start) : 0;
}

int lpvm_dist_send_name(lpvm_task *self, const char *name, const char *node,
                        const void *term, size_t len) {
  size_t nl = name ? strlen(name) : 0;
  if (nl == 0 || nl > 255 || !term) return LPVM_EINVAL;
  if (!dist_term_ok(term, len)) {   /* as route: not sent, said on stderr */
    dist_log("a message to {%s, %s} was not sent: it holds a NaN or infinite float or "
             "a map with two equal keys, which erl cannot decode", name, node ? node : "?");
    return 0;
  }
  lpvm_id conn = lpvm_dist_conn(node, 1);
  if (!conn) return LPVM_ENOPROC;
  struct lpvm_sig *w = lpvm_msg_new(sizeof(dist_wrap) + 1 + nl + len);
  if (!w) return LPVM_ENOMEM;
  dist_wrap h = {DW_REG_SEND, 0, 0};
  uint8_t *d = lpvm_msg_data(w);
  memcpy(d, &h, sizeof h);
  d[sizeof h] = (uint8_t)nl;
  memcpy(d + sizeof h + 1, name, nl);
  memcpy(d + sizeof h + 1 + nl, term, len);
  w->kind = SIG_DIST;
  w->from = self ? self->id : 0;
  w->ref = 0;
  if (sig_send(conn, w) != 0) { free(w); return LPVM_ENOPROC; }
  return 0;
}

int lpvm_dist_spawn_request(lpvm_task *self, const char *node, const char *mod,
                            const char *fn, const uint8_t *args, size_t alen,
                            int opts, uint64_t *ref) {
  size_t ml = mod ? strlen(mod) : 0, fl = fn ? strlen(fn) : 0;
  if (!self || ml == 0 || ml > 255 || fl == 0 || fl > 255 || !args || !ref)
    return LPVM_EINVAL;
  lpvm_id conn = lpvm_dist_conn(node, 1);
  if (!conn) return LPVM_ENOPROC;
  size_t n = sizeof(dist_wrap) + 3 + ml + fl + alen;
  struct lpvm_sig *w = lpvm_msg_new(n);
  if (!w) return LPVM_ENOMEM;
  dist_wrap h = {DW_SPAWN_REQ, 0, 0};
  uint8_t *d = lpvm_msg_data(w);
  memcpy(d, &h, sizeof h);
  d += sizeof h;
  *d++ = (uint8_t)opts;
  *d++ = (uint8_t)ml;
  memcpy(d, mod, ml);
  d += ml;
  *d++ = (uint8_t)fl;
  memcpy(d, fn, fl);
  memcpy(d + fl, args, alen);
  *ref = lpvm_make_ref();
  w->kind = SIG_DIST;
  w->from = self->id;
  w->ref = *ref;
  if (sig_send(conn, w) != 0) { free(w); return LPVM_ENOPROC; }
  return 0;
}

int lpvm_dist_disconnect(const char *node) {
  lpvm_id c = lpvm_dist_conn(node, 0);
  return c ? lpvm_send(NULL, c, disconnect_cmd, sizeof disconnect_cmd) : LPVM_ENOPROC;
}

void lpvm_dist_nodes(void (*fn)(const char *node, void *ud), void *ud) {
  char names[64][NODE_NAME_MAX + 1];
  int n = 0;
  pthread_mutex_lock(&D.mu);
  for (int i = 0; i < D.nmap && n < 64; i++)
    if (D.map[i].up) memcpy(names[n++], D.map[i].name, D.map[i].len + 1);
  pthread_mutex_unlock(&D.mu);
  for (int i = 0; i < n; i++) fn(names[i], ud);
}
