/*
** shell.c -- the terminal side of the shell (`lpvm` with no script, or -i).
**
** Two tasks. The shell is the boot process running the REPL of vm/lib/lpvm_shell.lua
** after the command line's steps (vm/lboot.c). Reading the terminal blocks, so it
** happens in a C task of its own that lives on a private thread (START_THREAD |
** CANT_SCHEDULE) and never touches a worker: the reader. On a terminal it edits the
** line with libedit (shell_edit.c: keys, history, Tab completion); over a pipe it
** reads lines as they come.
**
** The shell asks for each line: it sends the reader {"read", prompt, completions},
** the reader answers with one line. Reading only on request means that while user
** code runs in the shell, no stdin line sits in the shell's mailbox where the user's
** own lpvm.receive() could take it; the mailbox holds only what other processes sent.
**
** Ctrl-C: vm/main.c's signal thread passes it here (lproc_shell_sigint). While the
** shell waits for a line, the line is dropped (a second Ctrl-C at an empty prompt
** quits); while it evaluates, the evaluation is interrupted (lproc_interrupt) and the
** shell and the VM carry on, as lua5.4's "interrupted!".
**
** The shell's process may end while the shell is in use (an exit typed in it, a
** linked process's crash): the reader, which monitors it, starts a new one that reads
** on (respawn below), as Erlang's shell starts a new evaluator.
**
** The reader polls stdin with a short timeout rather than blocking in read(), so that
** it still notices a kill (lpvm.halt, SIGTERM), a Ctrl-C or the end of the shell
** within 100 ms. It monitors the shell and ends when the shell ends.
*/
#include <errno.h>
#include <stdatomic.h>
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
#include "vm/shell_int.h"

#define READER_NAME "lpvm_shell_stdin"
#define LINE_TAG "\x01lpvm_shell"   /* first value of every reply to the shell */
#define POLL_MS 100
#define MAX_LINE (1u << 20)

/* From outside any task (lproc_shell_watch, lproc_shell_sigint): the shell's pid, or
** one byte 'I' for a Ctrl-C. */
#define SIGINT_BYTE 'I'

typedef struct reader {
  lpvm_task task;
  int tty;             /* stdin is a terminal: libedit (shell_edit.c) */
  char *buf;           /* pipe: bytes read but not yet handed out */
  size_t len, cap;
  int eof;             /* stdin is at its end (or failed) */
  lpvm_id asker;       /* the process waiting for a line; 0 = none */
  lpvm_id watched;     /* the shell, monitored from the start */
  int asked;           /* the shell has asked for a line: its REPL runs */
  int armed;           /* the last Ctrl-C came at an empty prompt: the next one quits */
} reader;

/* The shell's process while its REPL runs (0: none): written by the reader, read by a
** dying process's crash report (lproc_shell_in_use) on any thread. */
static _Atomic lpvm_id shell_in_use;

int lproc_shell_in_use(lpvm_id id) { return id != 0 && atomic_load(&shell_in_use) == id; }

static lpvm_task *reader_allocate(const lpvm_task_def *def, void *arg) {
  (void)def;
  reader *r = calloc(1, sizeof(reader));
  if (r) r->tty = arg != NULL;
  return (lpvm_task *)r;
}

static void reader_free(lpvm_task *t) {
  reader *r = (reader *)t;
  free(r->buf);
  free(r);
}

static void reader_terminate(lpvm_task *t, const uint8_t *reason, size_t len) {
  (void)reason, (void)len;
  if (((reader *)t)->tty) shell_edit_end();
}

/* Reply {Tag, Line}, {Tag, false} at the end of input, or {Tag, false, Why} after a
** Ctrl-C at the prompt (Why: "cleared" the line typed was dropped, "interrupt" at an
** empty prompt, "quit" for a second one there). */
static void reply(reader *r, const char *line, size_t len, const char *why) {
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, why ? 3 : 2);
  lpvm_put_binary(&b, LINE_TAG, sizeof LINE_TAG - 1);
  if (line) lpvm_put_binary(&b, line, len);
  else lpvm_put_atom(&b, "false");
  if (why) lpvm_put_binary(&b, why, strlen(why));
  lpvm_msg *m = lpvm_tbuf_to_msg(&b);
  lpvm_tbuf_free(&b);
  if (m) lpvm_send_msg(&r->task, r->asker, m);
  r->asker = 0;
}

/* Pipe: hand out one complete line from the buffer (or the rest at EOF); 1 if done. */
static int try_answer(reader *r) {
  if (r->tty || !r->asker) return 0;
  char *nl = r->len ? memchr(r->buf, '\n', r->len) : NULL;
  if (nl == NULL && !r->eof && r->len < MAX_LINE) return 0;
  if (nl == NULL && r->len == 0) {
    reply(r, NULL, 0, NULL);
    return 1;
  }
  size_t take = nl ? (size_t)(nl - r->buf) + 1 : r->len;
  size_t n = take;
  while (n > 0 && (r->buf[n - 1] == '\n' || r->buf[n - 1] == '\r')) n--;
  reply(r, r->buf, n, NULL);
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

/* A request from the shell: {"read", Prompt, Completions} (binaries); a remote
** shell's (--remsh) is {"read_remote", ...}: it is not started again when it ends (a
** new one would evaluate here, not on the node the user attached to). On a terminal
** the editor shows the prompt and starts a line. 1 for "read". */
static int request(reader *r, lpvm_msg *m) {
  lpvm_tread rd;
  uint32_t n;
  const uint8_t *prompt = NULL, *tag = NULL, *c = NULL;
  size_t plen = 0, tlen = 0, clen = 0;
  if (lpvm_tread_init(&rd, lpvm_msg_data(m), lpvm_msg_len(m)) == 0 &&
      lpvm_get_tuple(&rd, &n) == 0 && n == 3 && lpvm_get_binary(&rd, &tag, &tlen) == 0 &&
      lpvm_get_binary(&rd, &prompt, &plen) == 0)
    lpvm_get_binary(&rd, &c, &clen);
  int local = tag && tlen == 4 && memcmp(tag, "read", 4) == 0;
  if (!r->tty) return local;
  char *p = strndup(prompt ? (const char *)prompt : "> ", prompt ? plen : 2);
  char *cands = strndup(c ? (const char *)c : "", clen);
  shell_edit_begin(p ? p : "> ", cands);
  free(p);
  return local;
}

/* Ctrl-C (vm/main.c through lproc_shell_sigint). At the prompt: drop the line; a
** second one at an empty prompt quits. While the shell evaluates: interrupt it. */
static void on_sigint(reader *r) {
  if (!r->asker) {
    r->armed = 0;
    if (r->watched) lproc_interrupt(r->watched);
    return;
  }
  int empty = r->tty ? shell_edit_cancel() : 1;
  const char *why = !empty ? "cleared" : r->armed ? "quit" : "interrupt";
  r->armed = empty;
  reply(r, NULL, 0, why);
}

/* The shell's process ended (m: its DOWN). Before its REPL asked for a line (an error
** in a script run before -i's shell) the reader ends with it, and the VM with them, as
** lua5.4 stops at a script's error; so it does when the VM is halting. Once the REPL
** runs, a new shell process goes on reading (lproc_shell_respawn: an exit typed in the
** shell, or a linked process's crash, does not end the VM; Erlang's shell starts a new
** evaluator). 0 when it did. */
static int respawn(reader *r, lpvm_msg *m) {
  atomic_store(&shell_in_use, 0);
  if (!r->asked || lpvm_halted()) return -1;
  if (r->asker && r->tty) shell_edit_cancel();   /* the line it was waiting for */
  r->asker = 0;
  r->asked = 0;
  r->armed = 0;
  lpvm_id nid = 0;
  if (lproc_shell_respawn(r->tty, lpvm_msg_data(m), lpvm_msg_len(m), &nid) != 0) return -1;
  uint64_t ref;
  r->watched = nid;
  return lpvm_monitor(&r->task, nid, &ref) == 0 ? 0 : -1;
}

/* Requests, Ctrl-Cs and DOWN notices. Returns LPVM_EXIT when the shell is gone. */
static int reader_mail(reader *r) {
  lpvm_msg *m;
  while ((m = lpvm_recv(&r->task)) != NULL) {
    if (is_down(m)) {
      int again = respawn(r, m) == 0;
      lpvm_msg_free(m);
      if (again) continue;
      return LPVM_EXIT;
    }
    lpvm_id from = lpvm_msg_from(m);
    lpvm_id watch = 0;
    if (from == 0 && lpvm_msg_len(m) == sizeof watch)   /* lproc_shell_watch */
      memcpy(&watch, lpvm_msg_data(m), sizeof watch);
    if (from == 0 && lpvm_msg_len(m) == 1 && *lpvm_msg_data(m) == SIGINT_BYTE) on_sigint(r);
    int local = 0;
    if (from != 0) {
      r->asker = watch = from;
      local = request(r, m);
    }
    lpvm_msg_free(m);
    if (watch != 0 && r->watched == 0) {
      uint64_t ref;
      r->watched = watch;
      lpvm_monitor(&r->task, watch, &ref);
    }
    if (local && from == r->watched && !r->asked) {
      r->asked = 1;
      atomic_store(&shell_in_use, from);
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

/* Pipe: read what is there into the buffer. */
static void pipe_read(reader *r) {
  if (r->cap - r->len < 4096) {
    size_t cap = r->cap ? r->cap * 2 : 8192;
    char *nb = realloc(r->buf, cap);
    if (nb == NULL) {
      r->eof = 1;
      return;
    }
    r->buf = nb;
    r->cap = cap;
  }
  ssize_t got = read(STDIN_FILENO, r->buf + r->len, r->cap - r->len);
  if (got > 0) r->len += (size_t)got;
  else if (got == 0 || (errno != EINTR && errno != EAGAIN)) r->eof = 1;
}

/* Wait up to POLL_MS for input, then give the runtime a chance to deliver signals
** (the VM halting, a Ctrl-C). */
static int reader_idle(lpvm_task *t) {
  reader *r = (reader *)t;
  int st = reader_mail(r);
  if (st != LPVM_IDLE) return st;
  if (try_answer(r)) return LPVM_WAIT;
  struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
  int n = poll(&p, 1, POLL_MS);
  if (n < 0 && errno != EINTR) r->eof = 1;
  if (n > 0 && r->tty) {
    char *line;
    if (shell_edit_feed(&line)) {
      r->armed = 0;
      reply(r, line, line ? strlen(line) : 0, NULL);
      free(line);
      return LPVM_WAIT;
    }
    return LPVM_IDLE;
  }
  if (n > 0) pipe_read(r);
  if (r->eof && r->tty) {
    reply(r, NULL, 0, NULL);
    return LPVM_WAIT;
  }
  return try_answer(r) ? LPVM_WAIT : LPVM_IDLE;
}

static const lpvm_task_def reader_def = {
    .type = "shell_stdin",
    .prio = LPVM_PRIO_PORT,
    .flags = LPVM_TASK_START_THREAD | LPVM_TASK_CANT_SCHEDULE,
    .allocate = reader_allocate,
    .free = reader_free,
    .terminate = reader_terminate,
    .handle_event = reader_handle_event,
    .idle = reader_idle,
};

int lproc_shell_reader(lpvm_id *rid) {
  int tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
  if (tty) shell_edit_start();
  int rc = lpvm_spawn_task(NULL, &reader_def, tty ? (void *)1 : NULL, 0, rid);
  if (rc < 0) return rc;
  if ((rc = lpvm_register(READER_NAME, *rid)) < 0) {
    lpvm_kill(NULL, *rid);
    return rc;
  }
  return tty;
}

int lproc_shell_sigint(void) {
  lpvm_id rid = lpvm_whereis(READER_NAME);
  char b = SIGINT_BYTE;
  return rid != 0 && lpvm_send(NULL, rid, &b, 1) == 0;
}

/* The reader monitors the shell from the start: a shell that dies before it first
** asks for a line (an error in the script before -i's shell) ends the reader too. */
void lproc_shell_watch(lpvm_id rid, lpvm_id shell) {
  lpvm_send(NULL, rid, &shell, sizeof shell);
}
