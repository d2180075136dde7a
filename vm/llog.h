/*
** llog.h -- the VM's log: levels, the default handler (one line per event on stderr
** with a UTC timestamp, the level and the pid) and Lua-syntax printing of terms, so
** reasons read as Lua values. Crash reports (lproc.c) and the `logger` library
** (vm/lib/logger.lua, through lpvm.log) both write here.
*/
#ifndef LPVM_LLOG_H
#define LPVM_LLOG_H

#include <stddef.h>
#include <stdint.h>

#include "lpvm/task.h"

/* syslog's levels, as OTP's logger has them; LLOG_NONE turns everything off. */
enum {
  LLOG_NONE = -1, LLOG_EMERGENCY = 0, LLOG_ALERT, LLOG_CRITICAL, LLOG_ERROR,
  LLOG_WARNING, LLOG_NOTICE, LLOG_INFO, LLOG_DEBUG
};

int llog_level(void);
void llog_set_level(int level);
/* "error", "notice", ..., "none", "all": the level, or -2 for an unknown name. */
int llog_parse_level(const char *name);
const char *llog_level_name(int level);
/* 1 if an event of `level` would be written now. */
int llog_enabled(int level);
/* Write one event: "<time> <level> <pid>: text" (pid 0: none); lines after the first
** are indented. One write(2), so concurrent events do not interleave. */
void llog_write(int level, lpvm_id pid, const char *text, size_t len);
/* The term as Lua source-like text ({1, 2}, {key = "v"}, "str", <0.5.0>); a string
** at the top level is written raw when `raw_top` (a reason's message and traceback).
** Returns the length (truncated at cap - 1, always NUL-terminated). */
size_t llog_format_term(const uint8_t *term, size_t len, int raw_top, char *out, size_t cap);

/* normal, shutdown, {shutdown, _} (from Lua {"shutdown", x}): no failure (OTP's rule). */
int llog_normal_reason(const uint8_t *reason, size_t len);

/* What a crash report says of its process. */
typedef struct llog_proc {
  lpvm_id id;
  int boot;               /* the boot process */
  int failed;             /* it ended by itself (else an exit signal ended it) */
  size_t mq_len, mem;
  uint64_t reductions;
} llog_proc;

/* The crash report of a process that ended with `reason` (nothing for a normal one),
** at level error: its whole reason as Lua text, then its mailbox, memory and work. */
void llog_crash_report(const llog_proc *p, const uint8_t *reason, size_t len);

#endif
