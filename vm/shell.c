/*
** shell.c -- the terminal side of the shell (`lpvm` with no script, or -i).
**
** Two tasks. The shell is the boot process running the REPL of vm/lib/lpvm_shell.lua
** after the command line's steps (vm/lboot.c). Reading
** the terminal blocks, so it happens in a C task of its own that lives on a private
** thread (START_THREAD | CANT_SCHEDULE) and never touches a worker: the reader.
**
** The shell asks for each line: it sends the reader any message, the reader answers
** with one line. Reading only on request means that while user code runs in the
** shell, no stdin line sits in the shell's mailbox where the user's own
** lpvm.receive() could take it; the mailbox holds only what other processes sent.
**
** The reader polls stdin with a short timeout rather than blocking in read(), so that
** it still notices a kill (lpvm.halt, SIGTERM) or the end of the shell within 100 ms.
** It monitors the shell and ends when the shell ends.
*/
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lpvm/lpvm.h"
#include "lpvm/task.h"
#include "lpvm/term.h"
#include "vm/lproc.h"
#include "vm/lproc_int.h"

#define READER_NAME "lpvm_shell_stdin"
#define LINE_TAG "\x01lpvm_shell"   /* first value of every reply to the shell */
#define POLL_MS 100
#define MAX_LINE (1u << 20)

typedef struct reader {
  lpvm_task task;
  char *buf;           /* bytes read but not yet handed out */
  size_t len, cap;
  int eof;             /* stdin is at its end (or failed) */
  lpvm_id asker;       /* the process waiting for a line; 0 = none */
  lpvm_id watched;     /* the shell, monitored once it first asks */
} reader;

static lpvm_task *reader_allocate(const lpvm_task_def *def, void *arg) {
  (void)def;
  (void)arg;
  return calloc(1, sizeof(reader));
}

static void reader_free(lpvm_task *t) {
  reader *r = (reader *)t;
  free(r->buf);
  free(r);
}

/* Reply {Tag, Line} or, at the end of input, {Tag, false}. */
static void reply(reader *r, const char *line, size_t len) {
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 2);
  lpvm_put_binary(&b, LINE_TAG, sizeof LINE_TAG - 1);
  if (line) lpvm_put_binary(&b, line, len);
  else lpvm_put_atom(&b, "false");
  lpvm_msg *m = lpvm_tbuf_to_msg(&b);
  lpvm_tbuf_free(&b);
  if (m) lpvm_send_msg(&r->task, r->asker, m);
  r->asker = 0;
}

/* Hand out one complete line from the buffer (or the rest at EOF); 1 if done. */
static int try_answer(reader *r) {
  char *nl = r->len ? memchr(r->buf, '\n', r->len) : NULL;
  if (nl == NULL && !r->eof && r->len < MAX_LINE) return 0;
  if (nl == NULL && r->len == 0) {
    reply(r, NULL, 0);
    return 1;
  }
  size_t take = nl ? (size_t)(nl - r->buf) + 1 : r->len;
  size_t n = take;
  while (n > 0 && (r->buf[n - 1] == '\n' || r->buf[n - 1] == '\r')) n--;
  reply(r, r->buf, n);
  memmove(r->buf, r->buf + take, r->len - take);
  r->len -= take;
  return 1;
}

/* 1 if the message is a {'DOWN', ...} notice (the shell ended). */
static int is_down(lpvm_msg *m) {
  lpvm_tread rd;
  uint32_t arity;
  const char *a;
  size_t n;
  return lpvm_tread_init(&rd, lpvm_msg_data(m), lpvm_msg_len(m)) == 0 &&
         lpvm_get_tuple(&rd, &arity) == 0 && arity == 5 &&
         lpvm_get_atom(&rd, &a, &n) == 0 && n == 4 && memcmp(a, "DOWN", 4) == 0;
}

/* Requests and DOWN notices. Returns LPVM_EXIT when the shell is gone. */
static int reader_mail(reader *r) {
  lpvm_msg *m;
  while ((m = lpvm_recv(&r->task)) != NULL) {
    if (is_down(m)) {
      lpvm_msg_free(m);
      return LPVM_EXIT;
    }
    lpvm_id from = lpvm_msg_from(m);
    lpvm_id watch = 0;
    if (from == 0 && lpvm_msg_len(m) == sizeof watch)   /* lproc_shell_watch */
      memcpy(&watch, lpvm_msg_data(m), sizeof watch);
    lpvm_msg_free(m);
    if (from != 0) r->asker = watch = from;
    if (watch != 0 && r->watched == 0) {
      uint64_t ref;
      r->watched = watch;
      lpvm_monitor(&r->task, watch, &ref);
    }
  }
  return r->asker ? LPVM_IDLE : LPVM_WAIT;
}

static int reader_handle_event(lpvm_task *t) {
  reader *r = (reader *)t;
  int st = reader_mail(r);
  if (st != LPVM_IDLE) return st;
  return try_answer(r) ? LPVM_WAIT : LPVM_IDLE;
}

/* Wait up to POLL_MS for input, then give the runtime a chance to deliver signals. */
static int reader_idle(lpvm_task *t) {
  reader *r = (reader *)t;
  int st = reader_mail(r);
  if (st != LPVM_IDLE) return st;
  if (try_answer(r)) return LPVM_WAIT;
  struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
  int n = poll(&p, 1, POLL_MS);
  if (n < 0 && errno != EINTR) r->eof = 1;
  if (n > 0) {
    if (r->cap - r->len < 4096) {
      size_t cap = r->cap ? r->cap * 2 : 8192;
      char *nb = realloc(r->buf, cap);
      if (nb == NULL) {
        r->eof = 1;
        return try_answer(r) ? LPVM_WAIT : LPVM_IDLE;
      }
      r->buf = nb;
      r->cap = cap;
    }
    ssize_t got = read(STDIN_FILENO, r->buf + r->len, r->cap - r->len);
    if (got > 0) r->len += (size_t)got;
    else if (got == 0 || (errno != EINTR && errno != EAGAIN)) r->eof = 1;
  }
  return try_answer(r) ? LPVM_WAIT : LPVM_IDLE;
}

static const lpvm_task_def reader_def = {
    .type = "shell_stdin",
    .prio = LPVM_PRIO_PORT,
    .flags = LPVM_TASK_START_THREAD | LPVM_TASK_CANT_SCHEDULE,
    .allocate = reader_allocate,
    .free = reader_free,
    .handle_event = reader_handle_event,
    .idle = reader_idle,
};

int lproc_shell_reader(lpvm_id *rid) {
  int rc = lpvm_spawn_task(NULL, &reader_def, NULL, 0, rid);
  if (rc < 0) return rc;
  if ((rc = lpvm_register(READER_NAME, *rid)) < 0) {
    lpvm_kill(NULL, *rid);
    return rc;
  }
  return isatty(STDIN_FILENO) ? 1 : 0;
}

/* The reader monitors the shell from the start: a shell that dies before it first
** asks for a line (an error in the script before -i's shell) ends the reader too. */
void lproc_shell_watch(lpvm_id rid, lpvm_id shell) {
  lpvm_send(NULL, rid, &shell, sizeof shell);
}
