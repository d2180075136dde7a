/*
** shell_edit.c -- line editing for the shell on a terminal: libedit.
**
** libedit (BSD licence) rather than GNU readline (GPL v3): lpvm is MIT, and a binary
** linked with readline would have to be distributed under the GPL. libedit's
** readline-compatible API gives the editing keys, history and completion users know
** from lua5.4 and bash.
**
** Only the reader task of shell.c calls these, on its private thread, one line at a
** time; libedit's state is global, so there is one reader per OS process (it is a
** registered name). The callback interface lets the reader poll the terminal and
** stay responsive to its mailbox (the VM halting, a Ctrl-C) instead of blocking in
** readline(). History lives in ~/.lpvm_history (the last EDIT_HISTORY lines).
** Completion candidates come from the shell process with each request (its global
** names and their fields, "lpvm.spawn"), since only that process can read its state.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <editline/readline.h>

#include "vm/shell_int.h"

#define EDIT_HISTORY 1000

static char *history_path;
static char *cands;        /* "name\nname.field\n...": the completions of this line */
static char *done_line;    /* the line libedit handed over (NULL at EOF) */
static int done;           /* 1: the callback ran */
static int active;         /* a handler is installed (the terminal is in raw mode) */
/* A key was read since the prompt appeared. libedit's rl_end and rl_line_buffer are
** not kept current in callback mode (stale after a Backspace or a new prompt), so
** "an empty prompt" for Ctrl-C means one where nothing was typed. */
static int typed;

/* Break words where Lua expressions break, but not at '.' and ':' (fields). */
static char word_breaks[] = " \t\n\"\\'`@$><=;|&{(,)[]+-*/%^~#";

static void on_line(char *line) {
  done_line = line;
  done = 1;
  rl_callback_handler_remove();   /* no second line until the shell asks again */
  active = 0;
}

/* Candidates that start with text, one per call (state 0 restarts), malloc'd. */
static char *candidate(const char *text, int state) {
  static const char *at;
  size_t n = strlen(text);
  if (state == 0) at = cands;
  while (at && *at) {
    const char *end = strchr(at, '\n');
    size_t len = end ? (size_t)(end - at) : strlen(at);
    const char *c = at;
    at = end ? end + 1 : at + len;
    if (len >= n && memcmp(c, text, n) == 0) {
      char *s = malloc(len + 1);
      if (!s) return NULL;
      memcpy(s, c, len);
      s[len] = 0;
      return s;
    }
  }
  return NULL;
}

static char **complete(const char *text, int start, int end) {
  (void)start, (void)end;
  rl_attempted_completion_over = 1;   /* no file names */
  return rl_completion_matches(text, candidate);
}

void shell_edit_start(void) {
  rl_readline_name = "lpvm";
  rl_catch_signals = 0;    /* SIGINT is the VM's (vm/main.c), not libedit's */
  rl_attempted_completion_function = complete;
  rl_completer_word_break_characters = word_breaks;
  rl_completion_append_character = '\0';
  const char *home = getenv("HOME");
  if (home && *home) {
    size_t n = strlen(home) + sizeof "/.lpvm_history";
    history_path = malloc(n);
    if (history_path) {
      snprintf(history_path, n, "%s/.lpvm_history", home);
      read_history(history_path);   /* none yet is fine */
    }
  }
  stifle_history(EDIT_HISTORY);
}

void shell_edit_begin(const char *prompt, char *completions) {
  free(cands);
  cands = completions;
  done = 0;
  typed = 0;
  rl_callback_handler_install(prompt, on_line);
  active = 1;
}

int shell_edit_feed(char **line) {
  typed = 1;
  rl_callback_read_char();
  if (!done) return 0;
  done = 0;
  *line = done_line;
  if (done_line && done_line[strspn(done_line, " \t")] != '\0') {
    add_history(done_line);
    if (history_path) write_history(history_path);
  }
  return 1;
}

int shell_edit_cancel(void) {
  int empty = !typed;
  if (active) {
    rl_callback_handler_remove();
    active = 0;
  }
  fputs("\n", stdout);
  fflush(stdout);
  return empty;
}

void shell_edit_end(void) {
  if (active) rl_callback_handler_remove();
  active = 0;
  free(cands);
  cands = NULL;
  free(history_path);
  history_path = NULL;
}
