/*
** xmpldemo.c -- embed lpvm in a C program and drive the thesis's counter task.
**
** A "client" task spawns a counter on the workers and one on a private thread,
** sends each a thousand {incr, 1}, asks both for their count and prints the replies.
*/
#include <stdio.h>
#include <string.h>

#include <lpvm/lpvm.h>
#include <lpvm/task.h>
#include <lpvm/term.h>

#include "xmpltask.h"

typedef struct client {
  lpvm_task task;
  lpvm_id counters[2];
  int replies;
} client;

static void send_tuple2(lpvm_task *self, lpvm_id to, const char *tag, lpvm_id pid,
                        int64_t n) {
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 2);
  lpvm_put_atom(&b, tag);
  if (pid) lpvm_put_pid(&b, pid);
  else lpvm_put_int(&b, n);
  lpvm_send_msg(self, to, lpvm_tbuf_to_msg(&b));
  lpvm_tbuf_free(&b);
}

static int client_setup(lpvm_task *t) {
  client *c = (client *)t;
  for (int i = 0; i < 2; i++) {
    lpvm_spawn_opts o = LPVM_SPAWN_OPTS_INIT;
    o.thread = i;      /* one on the workers, one on a private thread */
    o.link = 1;
    if (lpvm_spawn_task_opt(t, &xmpl_def, NULL, &o, &c->counters[i]) != 0) return LPVM_EXIT;
    for (int k = 0; k < 1000; k++) send_tuple2(t, c->counters[i], "incr", 0, 1);
    send_tuple2(t, c->counters[i], "get", lpvm_self(t), 0);
  }
  return LPVM_WAIT;
}

static int client_event(lpvm_task *t) {
  client *c = (client *)t;
  lpvm_msg *m;
  while ((m = lpvm_recv(t)) != NULL) {
    char text[128];
    lpvm_term_format(lpvm_msg_data(m), lpvm_msg_len(m), text, sizeof text);
    printf("client got %s\n", text);
    lpvm_msg_free(m);
    if (++c->replies == 2) {
      for (int i = 0; i < 2; i++) lpvm_send(t, c->counters[i], "\x83\x77\x04stop", 7);
      return LPVM_EXIT;
    }
  }
  return LPVM_WAIT;
}

static const lpvm_task_def client_def = {
    .type = "client", .prio = 20, .size = sizeof(client),
    .setup = client_setup, .handle_event = client_event,
};

int main(void) {
  if (lpvm_start(NULL) != 0) return 1;
  lpvm_id id;
  int rc = lpvm_spawn_task(NULL, &client_def, NULL, 0, &id);
  if (rc != 0) {
    fprintf(stderr, "spawn: %s\n", lpvm_strerror(rc));
    return 1;
  }
  lpvm_wait();
  lpvm_vmstats st;
  lpvm_stats(&st);
  printf("tasks spawned %llu, exited %llu\n", (unsigned long long)st.tasks_spawned,
         (unsigned long long)st.tasks_exited);
  lpvm_stop();
  return 0;
}
