/*
** tasklib.c -- a C task type in a shared library, for test_tasks.lua: loaded with
** lpvm.load_tasks(path), spawned with lpvm.spawn_task("echo_task", arg).
**
** An echo_task answers every message with the tuple {<<"echo">>, Arg, Message}
** (Lua: "echo", arg, message), and ends on the message "stop" (a string or an
** lpvm.binary). A message with shared binaries is flattened before it is spliced
** into the reply: lpvm_put_term takes only a plain term, and a C task that keeps a
** message's bytes must not keep references it does not count (lpvm/binary.h).
*/
#include <stdlib.h>
#include <string.h>

#include <lpvm/binary.h>
#include <lpvm/task.h>
#include <lpvm/taskmod.h>
#include <lpvm/term.h>

typedef struct echo_task {
  lpvm_task task;
  uint8_t *arg;
  size_t len;
} echo_task;

static lpvm_task *echo_allocate(const lpvm_task_def *def, void *arg) {
  (void)def;
  (void)arg;
  return calloc(1, sizeof(echo_task));
}

static void echo_free(lpvm_task *t) {
  free(((echo_task *)t)->arg);
  free(t);
}

static int echo_init(lpvm_task *t, void *arg) {
  echo_task *e = (echo_task *)t;
  const lpvm_task_arg *a = arg;
  if (a == NULL || a->term == NULL) return LPVM_EINVAL;
  if ((e->arg = malloc(a->len)) == NULL) return LPVM_ENOMEM;
  memcpy(e->arg, a->term, a->len);
  e->len = a->len;
  return LPVM_WAIT;
}

static int is_stop(lpvm_msg *m) {
  lpvm_tread r;
  const uint8_t *p;
  size_t n;
  uint32_t nb;
  const lpvm_binref *bins = lpvm_msg_bins(m, &nb);
  return lpvm_tread_init(&r, lpvm_msg_data(m), lpvm_msg_len(m)) == 0 &&
         lpvm_get_bytes(&r, bins, nb, &p, &n) == 0 && n == 4 && memcmp(p, "stop", 4) == 0;
}

static int echo_handle_event(lpvm_task *t) {
  echo_task *e = (echo_task *)t;
  lpvm_msg *m;
  while ((m = lpvm_recv(t)) != NULL) {
    if (is_stop(m)) {
      lpvm_msg_free(m);
      return LPVM_EXIT;
    }
    lpvm_msg *flat = lpvm_msg_flatten(m);   /* m itself when it holds no binary */
    if (!flat) {
      lpvm_msg_free(m);
      continue;
    }
    m = flat;
    lpvm_tbuf b;
    lpvm_tbuf_init(&b);
    lpvm_put_tuple(&b, 3);
    lpvm_put_binary(&b, "echo", 4);
    lpvm_put_term(&b, e->arg, e->len);
    lpvm_put_term(&b, lpvm_msg_data(m), lpvm_msg_len(m));
    lpvm_msg *reply = lpvm_tbuf_to_msg(&b);
    lpvm_tbuf_free(&b);
    if (reply) lpvm_send_msg(t, lpvm_msg_from(m), reply);
    lpvm_msg_free(m);
  }
  return LPVM_WAIT;
}

static const lpvm_task_def echo_def = {
    .type = "echo_task",
    .prio = LPVM_PRIO_NORMAL,
    .allocate = echo_allocate,
    .free = echo_free,
    .init = echo_init,
    .handle_event = echo_handle_event,
};

/* A deep_task answers a message N (an integer) with a list nested N deep around the
** integer 7 ([[[...[7]...]]]), as a C task may build it: deeper than 200 levels, no
** Lua value holds it (vm/lterm_depth.c). Any other message ends it. */
static int deep_handle_event(lpvm_task *t) {
  lpvm_msg *m;
  while ((m = lpvm_recv(t)) != NULL) {
    lpvm_tread r;
    int64_t n;
    if (lpvm_tread_init(&r, lpvm_msg_data(m), lpvm_msg_len(m)) || lpvm_get_int(&r, &n) ||
        n < 0 || n > 100000) {
      lpvm_msg_free(m);
      return LPVM_EXIT;
    }
    lpvm_tbuf b;
    lpvm_tbuf_init(&b);
    for (int64_t i = 0; i < n; i++) lpvm_put_list(&b, 1);
    lpvm_put_int(&b, 7);
    for (int64_t i = 0; i < n; i++) lpvm_put_nil(&b);
    lpvm_msg *reply = lpvm_tbuf_to_msg(&b);
    lpvm_tbuf_free(&b);
    if (reply) lpvm_send_msg(t, lpvm_msg_from(m), reply);
    lpvm_msg_free(m);
  }
  return LPVM_WAIT;
}

static const lpvm_task_def deep_def = {
    .type = "deep_task",
    .prio = LPVM_PRIO_NORMAL,
    .handle_event = deep_handle_event,
};

int lpvm_register_tasks(lpvm_task_registry *reg);

int lpvm_register_tasks(lpvm_task_registry *reg) {
  int rc = reg->add(reg, &echo_def);
  return rc ? rc : reg->add(reg, &deep_def);
}
