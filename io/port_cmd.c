/*
** port_cmd.c -- commands to ports, from any task: the public lpvm_port_* calls.
**
** A command is a message to the port task (`{command, Data}`, `{active, A}`, `close`,
** ...), built here and handled by the port's own step (port.c for the stream kinds,
** port_file.c, port_tcp.c). The checks a sender can make without the port's lock live
** here too: the port's kind (read through a pinned ptab entry, set before the port is
** published) and, for data, its high-water mark, so an over-full port answers
** LPVM_EBUSY at once and tells the sender `{ready}` later instead of queueing more.
*/
#include <stdint.h>
#include <string.h>

#include "io/port_int.h"
#include "lpvm/binary.h"
#include "tasks/ptab.h"

/* ---- commands, from any task --------------------------------------------------------------- */

static int send_built(lpvm_task *self, lpvm_id port, lpvm_tbuf *b) {
  lpvm_msg *m = lpvm_tbuf_to_msg(b);
  lpvm_tbuf_free(b);
  return m ? lpvm_send_msg(self, port, m) : LPVM_ENOMEM;
}

/* b starts a command {Tag, Value}: the value is put next. */
static void tagged(lpvm_tbuf *b, const char *tag) {
  lpvm_tbuf_init(b);
  lpvm_put_tuple(b, 2);
  lpvm_put_atom(b, tag);
}

/* {Tag, Atom} */
static int cmd_atom2(lpvm_task *self, lpvm_id port, const char *tag, const char *atom) {
  lpvm_tbuf b;
  tagged(&b, tag);
  lpvm_put_atom(&b, atom);
  return send_built(self, port, &b);
}

int io_cmd_atom(lpvm_task *self, lpvm_id port, const char *atom) {
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_atom(&b, atom);
  return send_built(self, port, &b);
}

int io_cmd_int(lpvm_task *self, lpvm_id port, const char *tag, int64_t v) {
  lpvm_tbuf b;
  tagged(&b, tag);
  lpvm_put_int(&b, v);
  return send_built(self, port, &b);
}

int io_cmd_pid(lpvm_task *self, lpvm_id port, const char *tag, lpvm_id id) {
  lpvm_tbuf b;
  tagged(&b, tag);
  lpvm_put_pid(&b, id);
  return send_built(self, port, &b);
}

int io_cmd_bin(lpvm_task *self, lpvm_id port, const char *tag, const void *p, size_t len) {
  lpvm_tbuf b;
  tagged(&b, tag);
  lpvm_put_binary(&b, p, len);
  return send_built(self, port, &b);
}

static int check_port(lpvm_id port) {
  return lpvm_id_is_port(port) ? 0 : LPVM_EINVAL;
}

/* ---- what kind a port is --------------------------------------------------------------- */

const char *lpvm_port_kind(lpvm_id port) {
  if (!lpvm_id_is_port(port)) return NULL;
  lpvm_task *t = ptab_pin(port);   /* published after init: kind and def are set */
  if (!t) return NULL;
  io_stream *s = io_stream_of(t);
  const char *k = s ? s->kind->type : t->def->type;
  ptab_unpin(t);
  return k;
}

int io_kind_check(lpvm_id port, const char *const kinds[]) {
  if (!lpvm_id_is_port(port)) return LPVM_EINVAL;
  const char *k = lpvm_port_kind(port);
  if (!k) return 0;   /* ended: the command goes nowhere and the caller sees closed */
  for (int i = 0; kinds[i]; i++)
    if (strcmp(kinds[i], k) == 0) return 0;
  return LPVM_EINVAL;
}

static const char *const stream_kinds[] = {"spawn", "fd", "tcp", NULL};
static const char *const owned_kinds[] = {"spawn", "fd", "tcp", "tcp_listen", NULL};

/* May a command go to this stream port now? 0, or LPVM_EBUSY (over its high-water
** mark: the sender is told {ready} later), LPVM_ENOPROC, LPVM_EINVAL. */
static int send_allowed(lpvm_task *self, lpvm_id port) {
  if (check_port(port)) return LPVM_EINVAL;
  lpvm_task *t = ptab_pin(port);
  if (!t) return LPVM_ENOPROC;
  io_stream *s = io_stream_of(t);
  int busy = s && atomic_load_explicit(&s->queued_pub, memory_order_relaxed) >= s->hwm;
  int gone = s && atomic_load_explicit(&s->gone, memory_order_acquire);
  ptab_unpin(t);
  if (!s) return LPVM_EINVAL;
  if (gone) return LPVM_ENOPROC;
  if (busy) {
    io_cmd_atom(self, port, "ready_req");
    return LPVM_EBUSY;
  }
  return 0;
}

int lpvm_port_send(lpvm_task *self, lpvm_id port, const void *data, size_t len) {
  if (!data && len) return LPVM_EINVAL;
  int rc = send_allowed(self, port);
  return rc ? rc : io_cmd_bin(self, port, "command", data, len);
}

int lpvm_port_send_bin(lpvm_task *self, lpvm_id port, lpvm_bin *bin, size_t off, size_t len) {
  if (!bin) return LPVM_EINVAL;
  int rc = send_allowed(self, port);
  if (rc) return rc;
  lpvm_tbuf b;
  lpvm_binrefs refs = {0};
  tagged(&b, "command");
  lpvm_put_bin(&b, &refs, bin, off, len);
  rc = b.err;
  lpvm_msg *m = lpvm_tbuf_to_msg_bins(&b, &refs);
  lpvm_binrefs_free(&refs);
  if (!m) return rc ? rc : LPVM_ENOMEM;
  return lpvm_send_msg(self, port, m);
}

int lpvm_port_recv(lpvm_task *self, lpvm_id port, size_t n) {
  if (io_kind_check(port, stream_kinds) || n > INT64_MAX) return LPVM_EINVAL;
  lpvm_task *t = ptab_pin(port);
  io_stream *s = io_stream_of(t);
  size_t max = s ? s->max_packet : SIZE_MAX;   /* written once, by init */
  if (t) ptab_unpin(t);
  if (n > max) return LPVM_EINVAL;
  return io_cmd_int(self, port, "recv", (int64_t)n);
}

int lpvm_port_recv_cancel(lpvm_task *self, lpvm_id port) {
  return io_kind_check(port, stream_kinds) ? LPVM_EINVAL : io_cmd_atom(self, port, "recv_cancel");
}

int lpvm_port_set_active(lpvm_task *self, lpvm_id port, int active) {
  static const char *names[] = {"false", "true", "once"};
  if (io_kind_check(port, stream_kinds) || active < 0 || active > 2) return LPVM_EINVAL;
  return cmd_atom2(self, port, "active", names[active]);
}

int lpvm_port_set_packet(lpvm_task *self, lpvm_id port, int packet) {
  if (io_kind_check(port, stream_kinds)) return LPVM_EINVAL;
  if (packet == LPVM_PACKET_LINE) return cmd_atom2(self, port, "packet", "line");
  if (packet != 0 && packet != 1 && packet != 2 && packet != 4) return LPVM_EINVAL;
  return io_cmd_int(self, port, "packet", packet);
}

int lpvm_port_shutdown(lpvm_task *self, lpvm_id port) {
  return io_kind_check(port, stream_kinds) ? LPVM_EINVAL : io_cmd_atom(self, port, "shutdown");
}

int lpvm_port_close(lpvm_task *self, lpvm_id port) {
  return check_port(port) ? LPVM_EINVAL : io_cmd_atom(self, port, "close");
}

int lpvm_port_close_now(lpvm_task *self, lpvm_id port) {
  return check_port(port) ? LPVM_EINVAL : io_cmd_atom(self, port, "close_now");
}

int lpvm_port_controlling_process(lpvm_task *self, lpvm_id port, lpvm_id new_owner) {
  if (io_kind_check(port, owned_kinds) || !new_owner || lpvm_id_is_port(new_owner))
    return LPVM_EINVAL;
  return io_cmd_pid(self, port, "controlling_process", new_owner);
}
