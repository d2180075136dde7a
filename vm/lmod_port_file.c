/*
** lmod_port_file.c -- file ports: file_open, file_read, file_write, file_seek (file_close
** is port_close).
*/
#include <errno.h>
#include <lauxlib.h>
#include <string.h>

#include "lpvm/port.h"
#include "vm/lmod_port_int.h"

/* file_open(path [, mode]) -> file | nil, reason; mode as io.open ("r" default). */
int lmod_file_open(lua_State *L) {
  lproc *p = lproc_check(L);
  const char *path = lmod_check_cstr(L, 1, "path");
  static const char *const modes[] = {"r", "r+", "w", "w+", "a", "a+", "rb", "r+b", "wb",
                                      "w+b", "ab", "a+b", NULL};
  int m = 0;
  if (!lua_isnoneornil(L, 2)) {   /* compared with its length: "r\0+" is no mode */
    luaL_checkstring(L, 2);
    while (modes[m] && !lmod_streq(L, 2, modes[m])) m++;
    if (!modes[m])
      luaL_argerror(L, 2, lua_pushfstring(L, "invalid mode %s", lmod_push_quoted(L, 2)));
  }
  const char *mode = modes[m];
  lpvm_id port;
  int rc = lpvm_file_open(&p->task, path, mode, 0, &port);
  if (rc != 0) return lport_fail(L, rc, errno);
  lmod_push_pid(L, port);
  return 1;
}

/* The answer of a file command: data | true | position | nil, reason. Stack: [base]
** the monitor reference (a port that dies before answering is "closed"). */
static int file_k(lua_State *L, int status, lua_KContext base) {
  (void)status;
  lport_drop_monitor(lproc_of(L), (uint64_t)lua_tointeger(L, (int)base));
  const char *tag = lport_answer(L, base);
  if (!tag || strcmp(tag, "DOWN") == 0) return lport_reason(L, "closed");
  if (strcmp(tag, "ok") == 0) {
    lua_pushboolean(L, 1);
    return 1;
  }
  int n = lport_value(L, base, tag, strcmp(tag, "data") == 0 || strcmp(tag, "position") == 0);
  return n ? n : lport_reason(L, tag);   /* eof, closed */
}

static int file_wait(lua_State *L, lpvm_id f, int rc, unsigned mask) {
  if (rc != 0) return lport_fail(L, rc, 0);
  /* Watch the port: one that dies with the command unanswered must not leave the
  ** caller waiting forever. */
  uint64_t mref = lport_push_monitor(L, lproc_of(L), f);
  return lport_wait(L, f, mask | LPORT_W_ERROR | LPORT_W_CLOSED, mref, -1, file_k);
}

/* file_read(file, n) -> bytes (fewer at the end) | nil, "eof" | nil, reason */
int lmod_file_read(lua_State *L) {
  lproc *p = lport_check_proc(L, "file_read");
  lpvm_id f = lport_check_kind(L, 1, lport_file, "file port");
  lua_Integer n = luaL_checkinteger(L, 2);
  luaL_argcheck(L, n >= 0 && n <= (64 << 20), 2, "byte count 0..64 MiB expected");
  lua_settop(L, 1);
  return file_wait(L, f, lpvm_file_read(&p->task, f, (size_t)n), LPORT_W_DATA | LPORT_W_EOF);
}

/* file_write(file, data) -> true | nil, reason */
int lmod_file_write(lua_State *L) {
  lproc *p = lport_check_proc(L, "file_write");
  lpvm_id f = lport_check_kind(L, 1, lport_file, "file port");
  size_t len;
  const char *data = lport_check_data(L, 2, &len);
  int rc = lpvm_file_write(&p->task, f, data, len);
  lua_settop(L, 1);
  return file_wait(L, f, rc, LPORT_W_OK);
}

/* file_seek(file [, whence [, offset]]) -> position | nil, reason; as file:seek. */
int lmod_file_seek(lua_State *L) {
  static const char *const whences[] = {"set", "cur", "end", NULL};
  lproc *p = lport_check_proc(L, "file_seek");
  lpvm_id f = lport_check_kind(L, 1, lport_file, "file port");
  int whence = lmod_check_option(L, 2, "cur", whences);
  lua_Integer off = luaL_optinteger(L, 3, 0);
  lua_settop(L, 1);
  return file_wait(L, f, lpvm_file_seek(&p->task, f, off, whence), LPORT_W_POSITION);
}
