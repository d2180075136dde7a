/*
** xmpltask.c -- the thesis's XmplTask, written against the public headers only.
*/
#include <stdlib.h>
#include <string.h>

#include <lpvm/task.h>
#include <lpvm/term.h>

#include "xmpltask.h"

static lpvm_task *xmpl_allocate(const lpvm_task_def *def, void *arg) {
  (void)def;
  (void)arg;
  return calloc(1, sizeof(xmpl_task));
}

static void xmpl_free(lpvm_task *t) { free(t); }

/* The spawn argument, if any, is the counter's start value. */
static int xmpl_init(lpvm_task *t, void *arg) {
  xmpl_task *x = (xmpl_task *)t;
  x->counter = arg ? *(const int64_t *)arg : 0;
  return LPVM_SETUP;
}

static int xmpl_setup(lpvm_task *t) {
  ((xmpl_task *)t)->setup_done = 1;
  return LPVM_WAIT;
}

static void reply_count(xmpl_task *x, lpvm_id to) {
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 3);
  lpvm_put_atom(&b, "count");
  lpvm_put_pid(&b, lpvm_self(&x->task));
  lpvm_put_int(&b, x->counter);
  lpvm_send_msg(&x->task, to, lpvm_tbuf_to_msg(&b));
  lpvm_tbuf_free(&b);
}

/* One message: returns LPVM_EXIT on `stop`, LPVM_WAIT otherwise. */
static int xmpl_handle(xmpl_task *x, lpvm_msg *m) {
  lpvm_tread r;
  const char *atom;
  size_t len;
  uint32_t arity;
  if (lpvm_tread_init(&r, lpvm_msg_data(m), lpvm_msg_len(m)) != 0) return LPVM_WAIT;
  if (lpvm_get_atom(&r, &atom, &len) == 0)
    return (len == 4 && memcmp(atom, "stop", 4) == 0) ? LPVM_EXIT : LPVM_WAIT;
  if (lpvm_get_tuple(&r, &arity) != 0 || arity != 2) return LPVM_WAIT;
  if (lpvm_get_atom(&r, &atom, &len) != 0) return LPVM_WAIT;
  int64_t n;
  lpvm_id pid;
  if (len == 4 && memcmp(atom, "incr", 4) == 0 && lpvm_get_int(&r, &n) == 0)
    x->counter += n;
  else if (len == 3 && memcmp(atom, "get", 3) == 0 && lpvm_get_pid(&r, &pid) == 0)
    reply_count(x, pid);
  return LPVM_WAIT;
}

static int xmpl_handle_event(lpvm_task *t) {
  lpvm_msg *m;
  while ((m = lpvm_recv(t)) != NULL) {
    int st = xmpl_handle((xmpl_task *)t, m);
    lpvm_msg_free(m);
    if (st == LPVM_EXIT) return st;
  }
  return LPVM_WAIT;
}

static int xmpl_handle_info(lpvm_task *t, lpvm_tbuf *map) {
  lpvm_put_atom(map, "counter");
  lpvm_put_int(map, ((xmpl_task *)t)->counter);
  return 1;
}

const lpvm_task_def xmpl_def = {
    .type = "xmpltask",
    .prio = 10,
    .flags = LPVM_TASK_START_THREAD,
    .allocate = xmpl_allocate,
    .free = xmpl_free,
    .init = xmpl_init,
    .setup = xmpl_setup,
    .handle_event = xmpl_handle_event,
    .handle_info = xmpl_handle_info,
};
