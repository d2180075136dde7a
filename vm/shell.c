/*
** shell.c -- `lpvm` with no script: an interactive shell, like `erl`.
**
** Two tasks. The shell is an ordinary Lua process running the REPL below. Reading
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
    lpvm_msg_free(m);
    if (from == 0) continue;
    if (r->watched == 0) {
      uint64_t ref;
      r->watched = from;
      lpvm_monitor(&r->task, from, &ref);
    }
    r->asker = from;
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

/* The REPL, run as a Lua process. arg[1] == "tty" when stdin is a terminal: then it
** prints a banner and prompts; over a pipe it prints only results and errors. */
static const char shell_lua[] =
    "local lpvm = lpvm or require('lpvm')\n"
    "local READER, TAG = '" READER_NAME "', '\\1lpvm_shell'\n"
    "local tty = arg and arg[1] == 'tty'\n"
    "local write, concat = io.write, table.concat\n"
    "\n"
    "local function readline(prompt)\n"
    "  if tty then write(prompt); io.stdout:flush() end\n"
    "  lpvm.send(READER, 'read')\n"
    "  local _, line = lpvm.receive(function(tag) return tag == TAG end)\n"
    "  return line or nil\n"
    "end\n"
    "\n"
    "local show\n"
    "local function key_order(a, b)\n"
    "  local ta, tb = type(a), type(b)\n"
    "  if ta ~= tb then return ta < tb end\n"
    "  if ta == 'number' or ta == 'string' then return a < b end\n"
    "  return tostring(a) < tostring(b)\n"
    "end\n"
    "function show(v, depth, seen)\n"
    "  local t = type(v)\n"
    "  if t == 'string' then return (string.format('%q', v):gsub('\\\\\\n', '\\\\n')) end\n"
    "  if t ~= 'table' then return tostring(v) end\n"
    "  local mt = getmetatable(v)\n"
    "  if mt and mt.__tostring then return tostring(v) end\n"
    "  if seen[v] then return '<cycle>' end\n"
    "  if depth > 5 then return '{...}' end\n"
    "  seen[v] = true\n"
    "  local parts, n = {}, #v\n"
    "  for i = 1, n do parts[#parts + 1] = show(v[i], depth + 1, seen) end\n"
    "  local keys = {}\n"
    "  for k in pairs(v) do\n"
    "    if not (math.type(k) == 'integer' and k >= 1 and k <= n) then keys[#keys + 1] = k end\n"
    "  end\n"
    "  table.sort(keys, key_order)\n"
    "  for _, k in ipairs(keys) do\n"
    "    local ks = type(k) == 'string' and k:match('^[%a_][%w_]*$') and k\n"
    "      or '[' .. show(k, depth + 1, seen) .. ']'\n"
    "    parts[#parts + 1] = ks .. ' = ' .. show(v[k], depth + 1, seen)\n"
    "  end\n"
    "  seen[v] = nil\n"
    "  if #parts > 100 then\n"
    "    local more = #parts - 100\n"
    "    for i = #parts, 101, -1 do parts[i] = nil end\n"
    "    parts[101] = '... (' .. more .. ' more)'\n"
    "  end\n"
    "  return '{' .. concat(parts, ', ') .. '}'\n"
    "end\n"
    "\n"
    "local function compile(src)\n"
    "  local f = load('return ' .. src, '=stdin', 't')\n"
    "  if f then return f end\n"
    "  return load(src, '=stdin', 't')\n"
    "end\n"
    "\n"
    "local function handler(e)\n"
    "  local msg = type(e) == 'string' and e or show(e, 0, {})\n"
    "  local tb = debug.traceback(msg, 2)\n"
    "  local cut = tb:find('\\n%s*%[C%]: in [^\\n]*\\'xpcall\\'')\n"
    "  return cut and tb:sub(1, cut - 1) or tb\n"
    "end\n"
    "\n"
    "local function report(ok, ...)\n"
    "  if not ok then\n"
    "    io.stderr:write((...), '\\n')\n"
    "  elseif select('#', ...) > 0 then\n"
    "    local out = {}\n"
    "    for i = 1, select('#', ...) do out[i] = show((select(i, ...)), 0, {}) end\n"
    "    write(concat(out, '\\t'), '\\n')\n"
    "  end\n"
    "  io.stdout:flush()\n"
    "end\n"
    "\n"
    "if tty then\n"
    "  write('lpvm " LPVM_VERSION " (', _VERSION, ') shell. Ctrl-D quits. ',\n"
    "        'Try lpvm.processes() or lpvm.info(lpvm.self()).\\n')\n"
    "end\n"
    "while true do\n"
    "  local line = readline('> ')\n"
    "  if not line then break end\n"
    "  local src = line:gsub('^=', 'return ')\n"
    "  local f, err = compile(src)\n"
    "  while not f and err:sub(-5) == '<eof>' do\n"
    "    local more = readline('>> ')\n"
    "    if not more then break end\n"
    "    src = src .. '\\n' .. more\n"
    "    f, err = compile(src)\n"
    "  end\n"
    "  if f then report(xpcall(f, handler))\n"
    "  elseif src:find('%S') then io.stderr:write(err, '\\n') end\n"
    "end\n"
    "if tty then write('\\n') end\n"
    "io.stdout:flush()\n"
    "lpvm.halt(0)\n";

int lproc_shell(lpvm_id *id) {
  lpvm_id rid;
  int rc = lpvm_spawn_task(NULL, &reader_def, NULL, 0, &rid);
  if (rc < 0) return rc;
  if ((rc = lpvm_register(READER_NAME, rid)) < 0) {
    lpvm_kill(NULL, rid);
    return rc;
  }
  char *argv[] = {(char *)"lpvm", (char *)(isatty(STDIN_FILENO) ? "tty" : "pipe"), NULL};
  char *err = NULL;
  rc = lproc_boot(NULL, shell_lua, 2, argv, id, &err);
  if (rc < 0) {
    fprintf(stderr, "lpvm: shell: %s\n",
            err ? (strncmp(err, "lpvm: ", 6) == 0 ? err + 6 : err) : lpvm_strerror(rc));
    free(err);
    lpvm_kill(NULL, rid);
  }
  return rc;
}
