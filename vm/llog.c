/*
** llog.c -- the VM's log (see llog.h): the level, the stderr handler, and terms
** printed as Lua values.
**
** The level is one atomic int: any thread reads it, lpvm.log_level and --log-level
** write it. An event is formatted into one buffer and written with one write(2), so
** lines from processes on different workers never interleave.
*/
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lpvm/term.h"
#include "vm/llog.h"

static _Atomic int level = LLOG_NOTICE;

static const char *const names[] = {"emergency", "alert", "critical", "error",
                                    "warning",   "notice", "info",    "debug"};

int llog_level(void) { return atomic_load_explicit(&level, memory_order_relaxed); }

void llog_set_level(int l) {
  if (l < LLOG_NONE) l = LLOG_NONE;
  if (l > LLOG_DEBUG) l = LLOG_DEBUG;
  atomic_store_explicit(&level, l, memory_order_relaxed);
}

int llog_parse_level(const char *name) {
  if (!name) return -2;
  for (int i = 0; i <= LLOG_DEBUG; i++)
    if (strcmp(name, names[i]) == 0) return i;
  if (strcmp(name, "none") == 0) return LLOG_NONE;
  if (strcmp(name, "all") == 0) return LLOG_DEBUG;
  return -2;
}

const char *llog_level_name(int l) {
  if (l < 0) return "none";
  return names[l > LLOG_DEBUG ? LLOG_DEBUG : l];
}

int llog_enabled(int l) { return l >= 0 && l <= llog_level(); }

/* ---- the handler -------------------------------------------------------------------- */

typedef struct obuf {
  char *p;
  size_t n, cap;
} obuf;

static void put(obuf *b, const char *s, size_t len) {
  if (b->n >= b->cap) return;
  size_t room = b->cap - 1 - b->n;
  if (len > room) len = room;
  memcpy(b->p + b->n, s, len);
  b->n += len;
  b->p[b->n] = 0;
}

static void putf(obuf *b, const char *fmt, ...) {
  char tmp[128];
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (k > 0) put(b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

static void put_pid(obuf *b, lpvm_id id) {
  unsigned slot = lpvm_id_slot(id), gen = lpvm_id_gen(id);
  if (lpvm_id_is_port(id)) putf(b, "#Port<0.%u>", slot);
  else putf(b, "<0.%u.%u>", slot, gen);
}

void llog_write(int l, lpvm_id pid, const char *text, size_t len) {
  if (!llog_enabled(l)) return;
  size_t cap = len + len / 8 + 128;
  obuf b = {malloc(cap), 0, cap};
  char small[512];
  if (!b.p) b.p = small, b.cap = sizeof small;
  b.p[0] = 0;
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  putf(&b, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s ", tm.tm_year + 1900, tm.tm_mon + 1,
       tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, llog_level_name(l));
  if (pid) put_pid(&b, pid);
  put(&b, ": ", 2);
  for (size_t i = 0; i < len; i++) {   /* continuation lines indented */
    size_t j = i;
    while (j < len && text[j] != '\n') j++;
    put(&b, text + i, j - i);
    if (j < len && j + 1 < len) put(&b, "\n    ", 5);
    i = j;
  }
  if (b.n + 1 >= b.cap) b.n = b.cap - 2;   /* truncated: still end the line */
  b.p[b.n++] = '\n';
  size_t off = 0;
  while (off < b.n) {
    ssize_t w = write(2, b.p + off, b.n - off);
    if (w <= 0) break;
    off += (size_t)w;
  }
  if (b.p != small) free(b.p);
}

/* ---- terms as Lua values -------------------------------------------------------------- */

static int put_value(obuf *b, lpvm_tread *r, int depth, int raw);

static void put_quoted(obuf *b, const uint8_t *s, size_t len) {
  put(b, "\"", 1);
  for (size_t i = 0; i < len && b->n + 1 < b->cap; i++) {
    uint8_t c = s[i];
    if (c == '"' || c == '\\') putf(b, "\\%c", c);
    else if (c == '\n') put(b, "\\n", 2);
    else if (c == '\t') put(b, "\\t", 2);
    else if (c < 32 || c == 127) putf(b, "\\%u", c);
    else put(b, (const char *)&c, 1);
  }
  put(b, "\"", 1);
}

static int is_ident(const uint8_t *s, size_t len) {
  if (len == 0 || len > 64 || (s[0] >= '0' && s[0] <= '9')) return 0;
  for (size_t i = 0; i < len; i++)
    if (!(s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
          (s[i] >= '0' && s[i] <= '9')))
      return 0;
  return 1;
}

/* n elements as {e1, e2, ...} */
static int put_seq(obuf *b, lpvm_tread *r, uint32_t n, int depth) {
  put(b, "{", 1);
  for (uint32_t i = 0; i < n; i++) {
    if (i) put(b, ", ", 2);
    if (put_value(b, r, depth + 1, 0)) return -1;
  }
  put(b, "}", 1);
  return 0;
}

static int put_map(obuf *b, lpvm_tread *r, uint32_t n, int depth) {
  put(b, "{", 1);
  for (uint32_t i = 0; i < n; i++) {
    if (i) put(b, ", ", 2);
    const uint8_t *s;
    size_t len;
    const char *a;
    lpvm_tread probe = *r;
    if (lpvm_get_binary(&probe, &s, &len) == 0 && is_ident(s, len)) {
      put(b, (const char *)s, len);
      *r = probe;
    } else if (lpvm_get_atom(&probe, &a, &len) == 0 && is_ident((const uint8_t *)a, len)) {
      put(b, a, len);
      *r = probe;
    } else {
      put(b, "[", 1);
      if (put_value(b, r, depth + 1, 0)) return -1;
      put(b, "]", 1);
    }
    put(b, " = ", 3);
    if (put_value(b, r, depth + 1, 0)) return -1;
  }
  put(b, "}", 1);
  return 0;
}

static int put_value(obuf *b, lpvm_tread *r, int depth, int raw) {
  const uint8_t *s;
  const char *a;
  size_t len;
  int64_t i;
  double d;
  uint32_t n;
  lpvm_id id;
  uint64_t ref;
  if (depth > 50) return -1;
  switch (lpvm_get_type(r)) {
    case LPVM_T_ATOM:
      if (lpvm_get_atom(r, &a, &len)) return -1;
      if ((len == 3 && !memcmp(a, "nil", 3)) || (len == 4 && !memcmp(a, "true", 4)) ||
          (len == 5 && !memcmp(a, "false", 5)) || raw)
        put(b, a, len);
      else
        put_quoted(b, (const uint8_t *)a, len);   /* atoms arrive in Lua as strings */
      return 0;
    case LPVM_T_BINARY:
      if (lpvm_get_binary(r, &s, &len)) return -1;
      if (raw) put(b, (const char *)s, len);
      else put_quoted(b, s, len);
      return 0;
    case LPVM_T_INT:
      if (lpvm_get_int(r, &i)) return -1;
      putf(b, "%lld", (long long)i);
      return 0;
    case LPVM_T_FLOAT:
      if (lpvm_get_float(r, &d)) return -1;
      putf(b, "%.14g", d);
      return 0;
    case LPVM_T_PID: case LPVM_T_PORT:
      if (lpvm_get_pid(r, &id)) break;
      put_pid(b, id);
      return 0;
    case LPVM_T_REF:
      if (lpvm_get_ref(r, &ref)) break;
      putf(b, "#Ref<0.%u.%u>", (unsigned)(ref >> 32), (unsigned)(uint32_t)ref);
      return 0;
    case LPVM_T_TUPLE:
      if (lpvm_get_tuple(r, &n)) return -1;
      return put_seq(b, r, n, depth);
    case LPVM_T_NIL:
      if (lpvm_get_nil(r)) return -1;
      put(b, "{}", 2);
      return 0;
    case LPVM_T_LIST:
      if (lpvm_get_list(r, &n) || put_seq(b, r, n, depth)) return -1;
      if (lpvm_get_type(r) == LPVM_T_NIL) return lpvm_get_nil(r) ? -1 : 0;
      return lpvm_skip(r) ? -1 : 0;
    case LPVM_T_MAP:
      if (lpvm_get_map(r, &n)) return -1;
      return put_map(b, r, n, depth);
    default: break;
  }
  /* no Lua counterpart (another node's pid, a fun, a bignum): Erlang's text */
  const uint8_t *start = r->p;
  if (lpvm_skip(r)) return -1;
  size_t k = (size_t)(r->p - start);
  uint8_t *tmp = malloc(k + 1);
  char text[256];
  if (!tmp) return -1;
  tmp[0] = 131;
  memcpy(tmp + 1, start, k);
  lpvm_term_format(tmp, k + 1, text, sizeof text);
  free(tmp);
  put(b, text, strlen(text));
  return 0;
}

size_t llog_format_term(const uint8_t *term, size_t len, int raw_top, char *out, size_t cap) {
  if (cap == 0) return 0;
  obuf b = {out, 0, cap};
  out[0] = 0;
  lpvm_tread r;
  if (lpvm_tread_init(&r, term, len) || put_value(&b, &r, 0, raw_top)) {
    if (b.n == 0) put(&b, "(malformed term)", 16);
  }
  return b.n;
}

/* ---- crash reports ------------------------------------------------------------------ */

int llog_normal_reason(const uint8_t *reason, size_t len) {
  if (lpvm_term_is_atom(reason, len, "normal") || lpvm_term_is_atom(reason, len, "shutdown"))
    return 1;
  lpvm_tread r;
  uint32_t n;
  const char *a;
  const uint8_t *bin;
  size_t alen;
  if (lpvm_tread_init(&r, reason, len)) return 0;
  if (lpvm_get_type(&r) == LPVM_T_TUPLE) {
    if (lpvm_get_tuple(&r, &n) || n != 2) return 0;
  } else if (lpvm_get_list(&r, &n) || n != 2) {
    return 0;
  }
  if (lpvm_get_atom(&r, &a, &alen) != 0) {
    if (lpvm_get_binary(&r, &bin, &alen) != 0) return 0;
    a = (const char *)bin;
  }
  return alen == 8 && memcmp(a, "shutdown", 8) == 0;
}

void llog_crash_report(const llog_proc *p, const uint8_t *reason, size_t len) {
  if (!llog_enabled(LLOG_ERROR) || llog_normal_reason(reason, len)) return;
  size_t cap = 8192;
  obuf b = {malloc(cap), 0, cap};
  if (!b.p) return;
  b.p[0] = 0;
  putf(&b, "%s%s ", p->failed ? "crash report: " : "", p->boot ? "the boot process" : "process");
  put_pid(&b, p->id);
  putf(&b, " %s with reason:\n", p->failed ? "ended" : "was ended by an exit signal");
  if (b.n + 128 < b.cap) b.n += llog_format_term(reason, len, 1, b.p + b.n, b.cap - b.n - 128);
  putf(&b, "\nmessage_queue_len: %zu, memory: %zu bytes, reductions: %llu", p->mq_len, p->mem,
       (unsigned long long)p->reductions);
  llog_write(LLOG_ERROR, p->id, b.p, b.n);
  free(b.p);
}
