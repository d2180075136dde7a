/*
** test_io.h -- helpers for the port tests: descriptor counts, reading port
** messages, and a relay task that owns ports and forwards what it gets to the
** collector (so a test can kill an owner without losing sight of its messages).
*/
#ifndef LPVM_TEST_IO_H
#define LPVM_TEST_IO_H

#include <dirent.h>
#include <errno.h>
#include <signal.h>

#include "lpvm/port.h"
#include "testvm.h"

/* Open descriptors of this process. */
static inline int fd_count(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1;  /* the DIR's own */
}

/* A port message {Tag, Port, ...}: its tag, port and (if any) binary or int. */
typedef struct pmsg {
  char tag[32];
  lpvm_id port;
  const uint8_t *bin;
  size_t len;
  int64_t num;
  char atom[32];
  lpvm_id id2;   /* {tcp_accept, L, Conn}: Conn */
  lpvm_msg *m;
} pmsg;

static inline int pmsg_parse(lpvm_msg *m, pmsg *p) {
  memset(p, 0, sizeof *p);
  p->m = m;
  lpvm_tread r;
  uint32_t ar;
  const char *a;
  size_t n;
  if (lpvm_tread_init(&r, lpvm_msg_data(m), lpvm_msg_len(m)) || lpvm_get_tuple(&r, &ar) ||
      ar < 2 || lpvm_get_atom(&r, &a, &n) || n >= sizeof p->tag)
    return -1;
  memcpy(p->tag, a, n);
  if (lpvm_get_pid(&r, &p->port) != 0) return -1;
  if (ar < 3) return 0;
  switch (lpvm_get_type(&r)) {
    case LPVM_T_BINARY: lpvm_get_binary(&r, &p->bin, &p->len); break;
    case LPVM_T_INT: lpvm_get_int(&r, &p->num); break;
    case LPVM_T_PORT: case LPVM_T_PID: lpvm_get_pid(&r, &p->id2); break;
    case LPVM_T_ATOM:
      if (lpvm_get_atom(&r, &a, &n) == 0 && n < sizeof p->atom) memcpy(p->atom, a, n);
      break;
    default: break;
  }
  return 0;
}

/* Next message, which must be a port message with `tag` (NULL: any). */
static inline void next_pmsg(pmsg *p, const char *tag, long ms) {
  char buf[256];
  lpvm_msg *m = coll_next(ms);
  cr_assert_not_null(m, "no message (expected %s)", tag ? tag : "any");
  cr_assert_eq(pmsg_parse(m, p), 0, "not a port message: %s", fmt_msg(m, buf, sizeof buf));
  if (tag)
    cr_assert(strcmp(p->tag, tag) == 0, "got %s, expected %s", fmt_msg(m, buf, sizeof buf),
              tag);
}

static inline void pmsg_free(pmsg *p) {
  lpvm_msg_free(p->m);
  p->m = NULL;
}

static inline void expect_pmsg(const char *tag, long ms) {
  pmsg p;
  next_pmsg(&p, tag, ms);
  pmsg_free(&p);
}

/* ---- relay: an owner task that forwards every message to the collector ----------- */

static lpvm_id relay_sink;

/* The atom `stop` from outside any task ends it normally. */
static inline int relay_event(lpvm_task *t) {
  lpvm_msg *m;
  while ((m = lpvm_recv(t)) != NULL) {
    if (lpvm_msg_from(m) == 0 && lpvm_term_is_atom(lpvm_msg_data(m), lpvm_msg_len(m), "stop")) {
      lpvm_msg_free(m);
      return LPVM_EXIT;
    }
    lpvm_send_msg(t, relay_sink, m);
  }
  return LPVM_WAIT;
}

static const lpvm_task_def relay_def = {.type = "relay", .prio = 20,
                                        .handle_event = relay_event};

static inline lpvm_id relay_spawn(lpvm_id sink) {
  lpvm_id id;
  relay_sink = sink;
  cr_assert_eq(lpvm_spawn_task(NULL, &relay_def, NULL, 0, &id), 0);
  return id;
}

/* The process `pid` is gone and reaped (no zombie) within ms. */
static inline int reaped_within(pid_t pid, long ms) {
  for (long i = 0; i < ms; i++) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
    sleep_ms(1);
  }
  return 0;
}

static inline lpvm_port_opts popts(lpvm_id owner, int active, int packet) {
  lpvm_port_opts o = LPVM_PORT_OPTS_INIT;
  o.owner = owner;
  o.active = active;
  o.packet = packet;
  return o;
}

#endif
