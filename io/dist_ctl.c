/*
** dist_ctl.c -- control messages: the peer's into local signals, local signals for
** the peer's processes into control messages, and the relations that cross.
**
** A local process links, monitors and exits a remote pid exactly as a local one:
** the signal path wraps the signal (SIG_DIST) and this file turns it into LINK,
** UNLINK(_ID), EXIT, EXIT2, MONITOR_P, DEMONITOR_P or MONITOR_P_EXIT. What the peer
** sends comes back as the same signals from a remote id, so links.c and signal.c
** apply Erlang's rules unchanged. The connection keeps its own copy of each link
** and monitor so that, when it is lost, it can tell every local end once: EXIT or
** DOWN with reason noconnection (and DEMONITOR to a local target a remote watcher
** held). A peer's monitor reference can be of any shape, so a local reference
** stands for it and its bytes are kept to answer with.
*/
#include <stdlib.h>
#include <string.h>

#include "io/dist_conn.h"
#include "tasks/sig.h"

/* One element of the control tuple, as raw bytes. */
static int sub_at(lpvm_tread *r, const uint8_t **p, size_t *n) {
  const uint8_t *s = r->p;
  if (lpvm_skip(r)) return LPVM_EBADTERM;
  *p = s;
  *n = (size_t)(r->p - s);
  return 0;
}

/* ---- relations ---------------------------------------------------------------------- */

static int grow(void **arr, size_t *cap, size_t n, size_t elem) {
  if (n < *cap) return 0;
  size_t c = *cap ? *cap * 2 : 8;
  void *p = realloc(*arr, c * elem);
  if (!p) return LPVM_ENOMEM;
  *arr = p;
  *cap = c;
  return 0;
}

static void link_add(dconn *c, lpvm_id local, lpvm_id remote) {
  for (size_t i = 0; i < c->nlinks; i++)
    if (c->links[i].local == local && c->links[i].remote == remote) return;
  if (grow((void **)&c->links, &c->clinks, c->nlinks, sizeof(dlink))) return;
  c->links[c->nlinks++] = (dlink){local, remote};
}

static void link_del(dconn *c, lpvm_id local, lpvm_id remote) {
  for (size_t i = 0; i < c->nlinks; i++)
    if (c->links[i].local == local && c->links[i].remote == remote) {
      c->links[i] = c->links[--c->nlinks];
      return;
    }
}

static int mo_del(dconn *c, uint64_t ref, dmon_out *out) {
  for (size_t i = 0; i < c->nmo; i++)
    if (c->mo[i].ref == ref) {
      if (out) *out = c->mo[i];
      free(c->mo[i].name);
      c->mo[i] = c->mo[--c->nmo];
      return 1;
    }
  return 0;
}

static dmon_out *mo_find(dconn *c, uint64_t ref) {
  for (size_t i = 0; i < c->nmo; i++)
    if (c->mo[i].ref == ref) return &c->mo[i];
  return NULL;
}

static dmon_in *mi_find_ref(dconn *c, uint64_t ref) {
  for (size_t i = 0; i < c->nmi; i++)
    if (c->mi[i].ref == ref) return &c->mi[i];
  return NULL;
}

static dmon_in *mi_find_eref(dconn *c, lpvm_id watcher, const uint8_t *e, size_t n) {
  for (size_t i = 0; i < c->nmi; i++)
    if (c->mi[i].watcher == watcher && c->mi[i].elen == n + 1 &&
        memcmp(c->mi[i].eref + 1, e, n) == 0)
      return &c->mi[i];
  return NULL;
}

static void mi_del(dconn *c, dmon_in *m) {
  free(m->eref);
  free(m->ename);
  *m = c->mi[--c->nmi];
}

/* ---- local signals ------------------------------------------------------------------- */

/* A signal to a local task. `sub` is a term without its version byte (an element of
** the control tuple) or, with whole = 1, a complete term. */
static int local_sig(uint32_t kind, lpvm_id from, lpvm_id to, uint64_t ref,
                     const uint8_t *sub, size_t n, int whole) {
  if (node_id_is_remote(to) || to == 0) return LPVM_ENOPROC;
  size_t len = sub ? n + (whole ? 0 : 1) : 0;
  struct lpvm_sig *s = lpvm_msg_new(len);
  if (!s) return LPVM_ENOMEM;
  s->kind = kind;
  s->from = from;
  s->ref = ref;
  if (sub) {
    uint8_t *d = lpvm_msg_data(s);
    if (!whole) *d++ = 131;
    memcpy(d, sub, n);
  }
  if (sub && kind != SIG_LINK && dist_term_too_deep(lpvm_msg_data(s), len)) {
    /* no Lua value holds it (dist_term.c): a message is dropped, a reason rendered */
    node_desc *nd = node_get(node_id_index(from));
    if (kind == SIG_MESSAGE) {
      dist_log("a message from node %.*s was dropped: it nests deeper than %d levels, "
               "which no Lua value holds", nd ? (int)nd->len : 1, nd ? nd->name : "?",
               DIST_DEPTH);
      free(s);
      return 0;
    }
    size_t rlen;
    uint8_t *r = dist_term_rendered(lpvm_msg_data(s), len, &rlen);
    free(s);
    if (!r) return LPVM_ENOMEM;
    s = lpvm_msg_new(rlen);
    if (!s) { free(r); return LPVM_ENOMEM; }
    s->kind = kind;
    s->from = from;
    s->ref = ref;
    memcpy(lpvm_msg_data(s), r, rlen);
    free(r);
  }
  int rc = sig_send(to, s);
  if (rc) free(s);
  return rc;
}

/* A message from the peer to a local process. A long packet was read into a message
** of its own (c->donor, dist_conn.c): the message moves to the front of that payload
** and is delivered as it is, so its bytes are never copied again. */
static void deliver_msg(dconn *c, lpvm_id from, lpvm_id to, uint64_t ref,
                        const uint8_t *msg, size_t mlen) {
  lpvm_msg *d = c->donor;
  uint8_t *base = d ? lpvm_msg_data(d) : NULL;
  if (!d || msg < base || msg + mlen > base + lpvm_msg_len(d) || !to ||
      node_id_is_remote(to) || dist_term_too_deep(msg, mlen)) {
    local_sig(SIG_MESSAGE, from, to, ref, msg, mlen, 1);   /* (which logs a deep one) */
    return;
  }
  c->donor = NULL;
  memmove(base, msg, mlen);
  d->len = (uint32_t)mlen;
  d->kind = SIG_MESSAGE;
  d->flags = 0;
  d->from = from;
  d->ref = ref;
  if (sig_send(to, d) != 0) free(d);
}

/* The sender of a message the peer sent without one (SEND, a failed spawn's reply):
** an id of that node all the same, so nothing takes it for a local message (from 0
** means "from outside any task": interrupts, the shell) and the receiver applies
** its policy for remote code (lterm_push_msg). */
static lpvm_id peer_sender(const dconn *c) { return node_remote_pid(c->peer_idx, 0, 0); }

/* ---- packets to the peer ----------------------------------------------------------------- */

static void ctl3(lpvm_tbuf *b, int arity, int op, lpvm_id a, lpvm_id bb) {
  lpvm_tbuf_init(b);
  lpvm_put_tuple(b, (uint32_t)arity);
  lpvm_put_int(b, op);
  lpvm_put_pid(b, a);
  lpvm_put_pid(b, bb);
}

static void send_ctl(dconn *c, lpvm_tbuf *b, const uint8_t *msg, size_t mlen) {
  dconn_packet(c, b, msg, mlen);
  lpvm_tbuf_free(b);
}

/* EXIT From -> To with a reason (a complete term). */
static void send_exit(dconn *c, int op, lpvm_id from, lpvm_id to, const uint8_t *reason,
                      size_t len) {
  lpvm_tbuf b;
  ctl3(&b, 4, op, from, to);
  lpvm_put_term(&b, reason, len);
  send_ctl(c, &b, NULL, 0);
}

/* MONITOR_P_EXIT: `proc` is the monitored pid or name as the watcher gave it (a
** complete term), eref the watcher's reference (complete term). */
static void send_mon_exit(dconn *c, const uint8_t *proc, size_t plen, lpvm_id watcher,
                          const uint8_t *eref, size_t elen, const uint8_t *reason,
                          size_t rlen) {
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 5);
  lpvm_put_int(&b, OP_MONITOR_P_EXIT);
  lpvm_put_term(&b, proc, plen);
  lpvm_put_pid(&b, watcher);
  lpvm_put_term(&b, eref, elen);
  lpvm_put_term(&b, reason, rlen);
  send_ctl(c, &b, NULL, 0);
}

/* A term element copied out with a version byte, for lpvm_put_term. */
static uint8_t *whole_of(const uint8_t *sub, size_t n) {
  uint8_t *w = malloc(n + 1);
  if (!w) return NULL;
  w[0] = 131;
  memcpy(w + 1, sub, n);
  return w;
}

/* {29, ReqId, From, GroupLeader, {M, F, Arity}, Opts} + argument list. The reply
** comes back as {'$spawn_reply', Ref, Pid | Error} (in_spawn_reply). */
static void out_spawn_request(dconn *c, lpvm_id from, uint64_t ref, const uint8_t *p,
                              size_t n) {
  if (n < 3 || n < 3u + p[1] || n < 3u + p[1] + p[2 + p[1]]) return;
  int opts = p[0];
  const char *mod = (const char *)p + 2, *fn = (const char *)p + 3 + p[1];
  size_t ml = p[1], fl = p[2 + p[1]];
  const uint8_t *args = p + 3 + ml + fl;
  size_t alen = n - 3 - ml - fl;
  lpvm_tread r;
  uint32_t arity = 0;
  if (lpvm_tread_init(&r, args, alen)) return;
  if (lpvm_get_type(&r) != LPVM_T_NIL && lpvm_get_list(&r, &arity)) return;
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 6);
  lpvm_put_int(&b, OP_SPAWN_REQUEST);
  lpvm_put_ref(&b, ref);
  lpvm_put_pid(&b, from);
  lpvm_put_pid(&b, from);                 /* group leader: the caller */
  lpvm_put_tuple(&b, 3);
  lpvm_put_atom_len(&b, mod, ml);
  lpvm_put_atom_len(&b, fn, fl);
  lpvm_put_int(&b, arity);
  lpvm_put_list(&b, (opts & LPVM_DIST_SPAWN_LINK) ? 1 : 0);
  if (opts & LPVM_DIST_SPAWN_LINK) lpvm_put_atom(&b, "link");
  lpvm_put_nil(&b);
  send_ctl(c, &b, args, alen);
}

static void refuse_with(lpvm_msg *m, const uint8_t *reason, size_t rlen);

/* the atom noproc as an external term */
static const uint8_t noproc[] = {131, 119, 6, 'n', 'o', 'p', 'r', 'o', 'c'};

void dconn_out(dconn *c, lpvm_msg *m) {
  if (lpvm_msg_len(m) < sizeof(dist_wrap)) return;
  dist_wrap h;
  memcpy(&h, lpvm_msg_data(m), sizeof h);
  const uint8_t *body = lpvm_msg_data(m) + sizeof h;
  size_t blen = lpvm_msg_len(m) - sizeof h;
  lpvm_id from = m->from;
  lpvm_tbuf b;
  if (h.kind == DW_REG_SEND) {            /* {6, From, '', Name} + message */
    if (blen < 1 || blen < 1u + body[0]) return;
    lpvm_tbuf_init(&b);
    lpvm_put_tuple(&b, 4);
    lpvm_put_int(&b, OP_REG_SEND);
    lpvm_put_pid(&b, from);
    lpvm_put_atom(&b, "");
    lpvm_put_atom_len(&b, (const char *)body + 1, body[0]);
    send_ctl(c, &b, body + 1 + body[0], blen - 1 - body[0]);
    return;
  }
  if (h.kind == DW_SPAWN_REQ) {
    out_spawn_request(c, from, m->ref, body, blen);
    return;
  }
  /* by name (lpvm_monitor_remote_name): {19|20, From, Name, Ref}, any incarnation */
  dmon_out *named = h.kind == SIG_DEMONITOR ? mo_find(c, m->ref) : NULL;
  if ((h.kind == SIG_MONITOR && blen > 1) || (named && named->name)) {
    uint8_t *name = named ? named->name : malloc(blen);
    size_t nlen = named ? named->nlen : blen;
    if (!name || (!named && grow((void **)&c->mo, &c->cmo, c->nmo, sizeof(dmon_out)))) {
      free(name);
      return;
    }
    if (!named) {
      memcpy(name, body, blen);
      c->mo[c->nmo++] = (dmon_out){m->ref, from, h.to, name, nlen};
    }
    lpvm_tbuf_init(&b);
    lpvm_put_tuple(&b, 4);
    lpvm_put_int(&b, named ? OP_DEMONITOR_P : OP_MONITOR_P);
    lpvm_put_pid(&b, from);
    lpvm_put_term(&b, name, nlen);
    lpvm_put_ref(&b, m->ref);
    send_ctl(c, &b, NULL, 0);
    if (named) mo_del(c, m->ref, NULL);
    return;
  }
  node_desc *d = node_get(node_id_index(h.to));
  if (!d || d->creation != c->peer_creation) {
    /* a process of an earlier incarnation of that node: it is gone, the node is up, so
    ** a link or monitor gets noproc, as erl answers (a message is dropped) */
    refuse_with(m, noproc, sizeof noproc);
    return;
  }
  switch (h.kind) {
    case SIG_MESSAGE:
      if (m->ref == LPVM_DIST_ALIAS_SEND) {   /* {2, Alias, To}: see lpvm/dist.h */
        const uint8_t *alias = NULL;
        size_t alen = 0;
        lpvm_tread r;
        uint32_t n;
        if (lpvm_tread_init(&r, body, blen) == 0) {
          if (lpvm_get_tuple(&r, &n) == 0 && n >= 1) (void)sub_at(&r, &alias, &alen);
          else (void)sub_at(&r, &alias, &alen);
        }
        uint8_t *wa = alias ? whole_of(alias, alen) : NULL;
        lpvm_tbuf_init(&b);
        lpvm_put_tuple(&b, 3);
        lpvm_put_int(&b, OP_SEND);
        if (wa) lpvm_put_term(&b, wa, alen + 1);
        else lpvm_put_atom(&b, "");
        lpvm_put_pid(&b, h.to);
        free(wa);
      } else if (from && (c->peer_flags & DF_SEND_SENDER)) {
        ctl3(&b, 3, OP_SEND_SENDER, from, h.to);
      } else {
        lpvm_tbuf_init(&b);
        lpvm_put_tuple(&b, 3);
        lpvm_put_int(&b, OP_SEND);
        lpvm_put_atom(&b, "");
        lpvm_put_pid(&b, h.to);
      }
      send_ctl(c, &b, body, blen);
      break;
    case SIG_LINK:
      link_add(c, from, h.to);
      ctl3(&b, 3, OP_LINK, from, h.to);
      send_ctl(c, &b, NULL, 0);
      break;
    case SIG_UNLINK:
      link_del(c, from, h.to);
      if (c->peer_flags & DF_UNLINK_ID) {
        lpvm_tbuf_init(&b);
        lpvm_put_tuple(&b, 4);
        lpvm_put_int(&b, OP_UNLINK_ID);
        lpvm_put_int(&b, (int64_t)++c->unlink_id);
        lpvm_put_pid(&b, from);
        lpvm_put_pid(&b, h.to);
      } else {
        ctl3(&b, 3, OP_UNLINK, from, h.to);
      }
      send_ctl(c, &b, NULL, 0);
      break;
    case SIG_EXIT_LINK:
      link_del(c, from, h.to);
      send_exit(c, OP_EXIT, from, h.to, body, blen);
      break;
    case SIG_EXIT:
      send_exit(c, OP_EXIT2, from, h.to, body, blen);
      break;
    case SIG_MONITOR:
      if (grow((void **)&c->mo, &c->cmo, c->nmo, sizeof(dmon_out))) break;
      c->mo[c->nmo++] = (dmon_out){m->ref, from, h.to, NULL, 0};
      ctl3(&b, 4, OP_MONITOR_P, from, h.to);
      lpvm_put_ref(&b, m->ref);
      send_ctl(c, &b, NULL, 0);
      break;
    case SIG_DEMONITOR:
      if (!mo_del(c, m->ref, NULL)) break;
      ctl3(&b, 4, OP_DEMONITOR_P, from, h.to);
      lpvm_put_ref(&b, m->ref);
      send_ctl(c, &b, NULL, 0);
      break;
    case SIG_DOWN: {
      dmon_in *mi = mi_find_ref(c, m->ref);
      if (!mi) break;
      if (mi->ename) {
        send_mon_exit(c, mi->ename, mi->nlen, h.to, mi->eref, mi->elen, body, blen);
      } else {
        lpvm_tbuf p;
        lpvm_tbuf_init(&p);
        lpvm_put_pid(&p, from);
        if (!p.err) send_mon_exit(c, p.data, p.len, h.to, mi->eref, mi->elen, body, blen);
        lpvm_tbuf_free(&p);
      }
      mi_del(c, mi);
      break;
    }
    default:
      break;   /* suspend, info, priority, migrate: local-only signals */
  }
}

/* A link or monitor that cannot be set up ends at once with `reason`. */
static void refuse_with(lpvm_msg *m, const uint8_t *reason, size_t rlen) {
  if (lpvm_msg_len(m) < sizeof(dist_wrap)) return;
  dist_wrap h;
  memcpy(&h, lpvm_msg_data(m), sizeof h);
  if (h.kind == SIG_LINK)
    local_sig(SIG_EXIT_LINK, h.to, m->from, 0, reason, rlen, 1);
  else if (h.kind == SIG_MONITOR)
    local_sig(SIG_DOWN, h.to, m->from, m->ref, reason, rlen, 1);
}

void dconn_refuse(dconn *c, lpvm_msg *m) {
  (void)c;
  refuse_with(m, term_noconnection, term_noconnection_len);
}

void dconn_rel_lost(dconn *c) {
  for (size_t i = 0; i < c->nlinks; i++)
    local_sig(SIG_EXIT_LINK, c->links[i].remote, c->links[i].local, 0, term_noconnection,
              term_noconnection_len, 1);
  c->nlinks = 0;
  for (size_t i = 0; i < c->nmo; i++)
    local_sig(SIG_DOWN, c->mo[i].target, c->mo[i].watcher, c->mo[i].ref, term_noconnection,
              term_noconnection_len, 1), free(c->mo[i].name);
  c->nmo = 0;
  while (c->nmi > 0) {
    dmon_in *mi = &c->mi[c->nmi - 1];
    local_sig(SIG_DEMONITOR, mi->watcher, mi->target, mi->ref, NULL, 0, 0);
    mi_del(c, mi);
  }
}

void dconn_rel_free(dconn *c) {
  for (size_t i = 0; i < c->nmi; i++) free(c->mi[i].eref), free(c->mi[i].ename);
  for (size_t i = 0; i < c->nmo; i++) free(c->mo[i].name);
  free(c->links);
  free(c->mo);
  free(c->mi);
}

/* ---- packets from the peer --------------------------------------------------------------- */


/* net_adm:ping is a gen_server call {is_auth, Node} to net_kernel: with no process
** of that name here, the connection answers yes itself (the peer is authenticated). */
static void net_kernel_call(dconn *c, const uint8_t *msg, size_t mlen) {
  lpvm_tread r;
  uint32_t n;
  const char *a;
  size_t al;
  lpvm_id pid;
  const uint8_t *tag;
  size_t tlen;
  if (lpvm_tread_init(&r, msg, mlen) || lpvm_get_tuple(&r, &n) || n != 3 ||
      lpvm_get_atom(&r, &a, &al) || al != 9 || memcmp(a, "$gen_call", 9) ||
      lpvm_get_tuple(&r, &n) || n != 2 || lpvm_get_pid(&r, &pid) ||
      sub_at(&r, &tag, &tlen) || lpvm_get_tuple(&r, &n) || n != 2 ||
      lpvm_get_atom(&r, &a, &al) || al != 7 || memcmp(a, "is_auth", 7))
    return;
  uint8_t *wt = whole_of(tag, tlen);
  if (!wt) return;
  lpvm_tbuf reply, b;
  lpvm_tbuf_init(&reply);
  lpvm_put_tuple(&reply, 2);
  lpvm_put_term(&reply, wt, tlen + 1);
  lpvm_put_atom(&reply, "yes");
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 3);
  lpvm_put_int(&b, OP_SEND);
  lpvm_put_atom(&b, "");
  lpvm_put_pid(&b, pid);
  if (!reply.err) send_ctl(c, &b, reply.data, reply.len);
  else lpvm_tbuf_free(&b);
  lpvm_tbuf_free(&reply);
  free(wt);
}

static lpvm_id local_name(const char *a, size_t al) {
  char name[256];
  if (al >= sizeof name) return 0;
  memcpy(name, a, al);
  name[al] = 0;
  return lpvm_whereis(name);
}

static int in_monitor(dconn *c, lpvm_tread *r) {
  lpvm_id watcher, target = 0;
  const uint8_t *proc, *eref;
  size_t plen, elen;
  const char *a = NULL;
  size_t al = 0;
  if (lpvm_get_pid(r, &watcher)) return LPVM_EBADTERM;
  lpvm_tread pr = *r;
  if (sub_at(r, &proc, &plen) || sub_at(r, &eref, &elen)) return LPVM_EBADTERM;
  int by_name = lpvm_get_atom(&pr, &a, &al) == 0;
  if (by_name) target = local_name(a, al);
  else if (lpvm_get_pid(&pr, &target)) return LPVM_EBADTERM;
  if (!target && by_name && al == 10 && !memcmp(a, "net_kernel", 10)) return 0;  /* see above */
  uint8_t *we = whole_of(eref, elen);
  if (!we) return 0;
  uint64_t ref = lpvm_make_ref();
  uint8_t *wp = whole_of(proc, plen);
  if (target && (wp || !by_name) &&
      !grow((void **)&c->mi, &c->cmi, c->nmi, sizeof(dmon_in))) {
    c->mi[c->nmi++] = (dmon_in){ref, target, watcher, we, elen + 1, by_name ? wp : NULL,
                                by_name ? plen + 1 : 0};
    if (local_sig(SIG_MONITOR, watcher, target, ref, NULL, 0, 0) == 0) {
      if (!by_name) free(wp);
      return 0;
    }
    c->nmi--;
  }
  if (wp) send_mon_exit(c, wp, plen + 1, watcher, we, elen + 1, noproc, sizeof noproc);
  free(wp);
  free(we);
  return 0;
}

static int in_demonitor(dconn *c, lpvm_tread *r) {
  lpvm_id watcher;
  const uint8_t *eref;
  size_t elen;
  if (lpvm_get_pid(r, &watcher) || lpvm_skip(r) || sub_at(r, &eref, &elen))
    return LPVM_EBADTERM;
  dmon_in *mi = mi_find_eref(c, watcher, eref, elen);
  if (mi) {
    local_sig(SIG_DEMONITOR, watcher, mi->target, mi->ref, NULL, 0, 0);
    mi_del(c, mi);
  }
  return 0;
}

/* An argument list (a complete term) as a tuple of the same elements, for the
** spawner: [] -> {}, [A, B] -> {A, B}, "abc" (STRING_EXT) -> {97, 98, 99}. */
static int args_tuple(const uint8_t *msg, size_t mlen, lpvm_tbuf *out) {
  lpvm_tread r;
  uint32_t n;
  const uint8_t *bytes;
  size_t len;
  lpvm_tbuf_init(out);
  if (lpvm_tread_init(&r, msg, mlen)) return LPVM_EBADTERM;
  if (lpvm_get_nil(&r) == 0) { lpvm_put_tuple(out, 0); return 0; }
  if (lpvm_get_string(&r, &bytes, &len) == 0) {
    lpvm_put_tuple(out, (uint32_t)len);
    for (size_t i = 0; i < len; i++) lpvm_put_int(out, bytes[i]);
    return 0;
  }
  if (lpvm_get_list(&r, &n)) return LPVM_EBADTERM;
  lpvm_put_tuple(out, n);
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *e;
    size_t el;
    if (sub_at(&r, &e, &el)) return LPVM_EBADTERM;
    uint8_t *w = whole_of(e, el);
    if (!w) return LPVM_ENOMEM;
    lpvm_put_term(out, w, el + 1);
    free(w);
  }
  return lpvm_get_nil(&r);   /* a proper list */
}

static void spawn_reply(dconn *c, const uint8_t *reqid, size_t rlen, lpvm_id to,
                        int flags, lpvm_id pid, const char *err) {
  uint8_t *w = whole_of(reqid, rlen);
  if (!w) return;
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 5);
  lpvm_put_int(&b, OP_SPAWN_REPLY);
  lpvm_put_term(&b, w, rlen + 1);
  lpvm_put_pid(&b, to);
  lpvm_put_int(&b, flags);
  if (err) lpvm_put_atom(&b, err);
  else lpvm_put_pid(&b, pid);
  send_ctl(c, &b, NULL, 0);
  free(w);
}

/* {29, ReqId, From, GroupLeader, {M, F, Arity}, Opts} + Args: erlang:spawn on this
** node, and rpc:call (erpc spawns erpc:execute_call). The new process waits until
** the link and monitor asked for are in place and the reply is on its way. */
static int in_spawn_request(dconn *c, lpvm_tread *r, const uint8_t *msg, size_t mlen) {
  const uint8_t *reqid, *optl;
  size_t rlen, olen;
  lpvm_id from, pid = 0;
  uint32_t n;
  const char *mod, *fn;
  size_t ml, fl;
  int64_t arity;
  if (!msg || sub_at(r, &reqid, &rlen) || lpvm_get_pid(r, &from) || lpvm_skip(r) ||
      lpvm_get_tuple(r, &n) || n != 3 || lpvm_get_atom(r, &mod, &ml) ||
      lpvm_get_atom(r, &fn, &fl) || lpvm_get_int(r, &arity))
    return LPVM_EBADTERM;
  lpvm_tread o = *r;
  if (sub_at(r, &optl, &olen)) return LPVM_EBADTERM;
  int link = 0, monitor = 0;
  if (lpvm_get_list(&o, &n) == 0) {
    for (uint32_t i = 0; i < n; i++) {
      const char *a;
      size_t al;
      if (lpvm_get_atom(&o, &a, &al) == 0) {
        if (al == 4 && !memcmp(a, "link", 4)) link = 1;
        else if (al == 7 && !memcmp(a, "monitor", 7)) monitor = 1;
      } else if (lpvm_skip(&o)) {
        return LPVM_EBADTERM;
      }
    }
  }
  const lpvm_dist_spawner *sp = dist_spawner();
  lpvm_tbuf args;
  if (!sp) { spawn_reply(c, reqid, rlen, from, 0, 0, "notsup"); return 0; }
  if (args_tuple(msg, mlen, &args) || args.err) {
    lpvm_tbuf_free(&args);
    spawn_reply(c, reqid, rlen, from, 0, 0, "badarg");
    return 0;
  }
  int rc = sp->spawn(&c->task, mod, ml, fn, fl, args.data, args.len, &pid);
  lpvm_tbuf_free(&args);
  if (rc == LPVM_EPERM)
    dist_log("a function spawned by node %s refused: this node takes no code from other "
             "nodes (lpvm --no-remote-code)", c->peer);
  if (rc) {
    spawn_reply(c, reqid, rlen, from, 0, 0,
                rc == LPVM_ELIMIT   ? "system_limit"
                : rc == LPVM_EPERM ? "remote_code_refused"
                                   : "badarg");
    return 0;
  }
  int flags = 0;
  if (link) {
    link_add(c, pid, from);
    local_sig(SIG_LINK, from, pid, 0, NULL, 0, 0);
    flags |= 1;
  }
  uint8_t *we = monitor ? whole_of(reqid, rlen) : NULL;
  if (we && !grow((void **)&c->mi, &c->cmi, c->nmi, sizeof(dmon_in))) {
    uint64_t ref = lpvm_make_ref();
    c->mi[c->nmi++] = (dmon_in){ref, pid, from, we, rlen + 1, NULL, 0};
    local_sig(SIG_MONITOR, from, pid, ref, NULL, 0, 0);
    flags |= 2;
  } else {
    free(we);
  }
  spawn_reply(c, reqid, rlen, from, flags, pid, NULL);
  sp->release(&c->task, pid);
  return 0;
}

/* {31, ReqId, To, Flags, Result}: the answer to our request, as the message
** {'$spawn_reply', Ref, Pid | Error} to the process that asked. */
static int in_spawn_reply(dconn *c, lpvm_tread *r) {
  uint64_t ref;
  lpvm_id to, pid = 0;
  int64_t flags;
  const uint8_t *res;
  size_t reslen;
  if (lpvm_get_ref(r, &ref)) return 0;   /* not ours */
  if (lpvm_get_pid(r, &to) || lpvm_get_int(r, &flags)) return LPVM_EBADTERM;
  lpvm_tread pr = *r;
  if (sub_at(r, &res, &reslen)) return LPVM_EBADTERM;
  if (lpvm_get_pid(&pr, &pid) == 0 && (flags & 1)) {
    link_add(c, to, pid);
    local_sig(SIG_LINK, pid, to, 0, NULL, 0, 0);
  }
  uint8_t *w = whole_of(res, reslen);
  if (!w) return 0;
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 3);
  lpvm_put_atom(&b, "$spawn_reply");
  lpvm_put_ref(&b, ref);
  lpvm_put_term(&b, w, reslen + 1);
  free(w);
  if (!b.err) local_sig(SIG_MESSAGE, pid ? pid : peer_sender(c), to, 0, b.data, b.len, 1);
  lpvm_tbuf_free(&b);
  return 0;
}

/* The control tuple's elements after its op, and the message (or NULL). */
static int in_ctl(dconn *c, int64_t op, uint32_t arity, lpvm_tread *r, const uint8_t *msg,
                  size_t mlen) {
  lpvm_id from = 0, to = 0;
  const uint8_t *reason = msg, *sub;
  size_t rlen = mlen, n;
  const char *a;
  size_t al;
  int whole = 1;
  switch (op) {
    case OP_SEND:           /* {2, Unused, To}: an alias of ours there: an alias send */
    case OP_SEND_SENDER: {  /* {22, From, To} */
      uint64_t alias = 0;
      if (arity != 3 || !msg) return LPVM_EBADTERM;
      if (op == OP_SEND) {
        lpvm_tread a = *r;
        if (lpvm_get_ref(&a, &alias) != 0) alias = 0;
        if (lpvm_skip(r)) return LPVM_EBADTERM;
        from = peer_sender(c);
      } else if (lpvm_get_pid(r, &from)) {
        return LPVM_EBADTERM;
      }
      if (lpvm_get_pid(r, &to)) return LPVM_EBADTERM;
      deliver_msg(c, from, to, alias, msg, mlen);
      return 0;
    }
    case OP_REG_SEND:       /* {6, From, Cookie, ToName} */
      if (arity != 4 || !msg || lpvm_get_pid(r, &from) || lpvm_skip(r) ||
          lpvm_get_atom(r, &a, &al))
        return LPVM_EBADTERM;
      to = local_name(a, al);
      if (to) deliver_msg(c, from, to, 0, msg, mlen);
      else if (al == 10 && !memcmp(a, "net_kernel", 10)) net_kernel_call(c, msg, mlen);
      return 0;
    case OP_LINK:           /* {1, From, To} */
      if (arity != 3 || lpvm_get_pid(r, &from) || lpvm_get_pid(r, &to)) return LPVM_EBADTERM;
      link_add(c, to, from);
      if (local_sig(SIG_LINK, from, to, 0, NULL, 0, 0) == LPVM_ENOPROC) {
        link_del(c, to, from);
        send_exit(c, OP_EXIT, to, from, noproc, sizeof noproc);
      }
      return 0;
    case OP_UNLINK:         /* {4, From, To} */
    case OP_UNLINK_ID: {    /* {35, Id, From, To} */
      const uint8_t *id = NULL;
      size_t idlen = 0;
      if (arity != (op == OP_UNLINK ? 3u : 4u)) return LPVM_EBADTERM;
      if (op == OP_UNLINK_ID && sub_at(r, &id, &idlen)) return LPVM_EBADTERM;
      if (lpvm_get_pid(r, &from) || lpvm_get_pid(r, &to)) return LPVM_EBADTERM;
      link_del(c, to, from);
      local_sig(SIG_UNLINK, from, to, 0, NULL, 0, 0);
      if (id) {
        uint8_t *wid = whole_of(id, idlen);
        lpvm_tbuf b;
        lpvm_tbuf_init(&b);
        lpvm_put_tuple(&b, 4);
        lpvm_put_int(&b, OP_UNLINK_ID_ACK);
        if (wid) lpvm_put_term(&b, wid, idlen + 1);
        lpvm_put_pid(&b, to);
        lpvm_put_pid(&b, from);
        if (wid) send_ctl(c, &b, NULL, 0);
        else lpvm_tbuf_free(&b);
        free(wid);
      }
      return 0;
    }
    case OP_UNLINK_ID_ACK:
      return 0;
    case OP_EXIT: case OP_EXIT2:                  /* {3|8, From, To, Reason} */
    case OP_PAYLOAD_EXIT: case OP_PAYLOAD_EXIT2:  /* {24|26, From, To} + Reason */
      if (lpvm_get_pid(r, &from) || lpvm_get_pid(r, &to)) return LPVM_EBADTERM;
      if (op == OP_EXIT || op == OP_EXIT2) {
        if (arity != 4 || sub_at(r, &reason, &rlen)) return LPVM_EBADTERM;
        whole = 0;
      } else if (arity != 3 || !msg) {
        return LPVM_EBADTERM;
      }
      if (op == OP_EXIT || op == OP_PAYLOAD_EXIT) link_del(c, to, from);
      local_sig(op == OP_EXIT || op == OP_PAYLOAD_EXIT ? SIG_EXIT_LINK : SIG_EXIT, from,
                to, 0, reason, rlen, whole);
      return 0;
    case OP_MONITOR_P:      /* {19, From, ToProc, Ref} */
      if (arity != 4) return LPVM_EBADTERM;
      return in_monitor(c, r);
    case OP_DEMONITOR_P:    /* {20, From, ToProc, Ref} */
      if (arity != 4) return LPVM_EBADTERM;
      return in_demonitor(c, r);
    case OP_MONITOR_P_EXIT:          /* {21, FromProc, ToPid, Ref, Reason} */
    case OP_PAYLOAD_MONITOR_P_EXIT: {  /* {27, FromProc, ToPid, Ref} + Reason */
      uint64_t ref;
      dmon_out mo;
      if (sub_at(r, &sub, &n) || lpvm_get_pid(r, &to)) return LPVM_EBADTERM;
      if (lpvm_get_ref(r, &ref)) return 0;   /* not one of ours: nothing to do */
      if (op == OP_MONITOR_P_EXIT) {
        if (arity != 5 || sub_at(r, &reason, &rlen)) return LPVM_EBADTERM;
        whole = 0;
      } else if (arity != 4 || !msg) {
        return LPVM_EBADTERM;
      }
      if (mo_del(c, ref, &mo))
        local_sig(SIG_DOWN, mo.target, mo.watcher, ref, reason, rlen, whole);
      return 0;
    }
    case OP_SPAWN_REQUEST:
      if (arity != 6) return LPVM_EBADTERM;
      return in_spawn_request(c, r, msg, mlen);
    case OP_SPAWN_REPLY:
      if (arity != 5) return LPVM_EBADTERM;
      return in_spawn_reply(c, r);
    default:
      return 0;   /* an operation we did not ask for (we announce no alias) */
  }
}

int dconn_in(dconn *c, const uint8_t *p, size_t n) {
  if (n < 2 || p[0] != 112) return LPVM_EBADTERM;   /* pass-through only */
  lpvm_tread r;
  if (lpvm_tread_init(&r, p + 1, n - 1) || lpvm_skip(&r)) return LPVM_EBADTERM;
  size_t clen = (size_t)(r.p - (p + 1));
  const uint8_t *msg = r.p;
  size_t mlen = n - 1 - clen;
  if (lpvm_term_check(p + 1, clen)) return LPVM_EBADTERM;
  if (mlen && lpvm_term_check(msg, mlen)) return LPVM_EBADTERM;
  uint32_t arity;
  int64_t op;
  lpvm_tread_init(&r, p + 1, clen);
  if (lpvm_get_tuple(&r, &arity) || arity < 1 || lpvm_get_int(&r, &op))
    return LPVM_EBADTERM;
  return in_ctl(c, op, arity, &r, mlen ? msg : NULL, mlen);
}
