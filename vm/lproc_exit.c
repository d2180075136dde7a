/*
** lproc_exit.c -- how a failed process says why: its exit reason and crash report.
**
** A process that raised an error ends with a reason built here from the error value
** and the dead thread's frames (lproc_error), and a process that failed by itself is
** reported the way OTP's crash reports are (lproc_crash_report, written by llog.c).
** Both run after the state may have run out of memory, so nothing here allocates in
** the state: the traceback is formatted into a C buffer, the reason built with malloc.
** The one exception is an error object with __tostring (an error class), whose text
** the crash report shows as lua5.4 prints it: that runs Lua, protected and bounded,
** and any failure (no memory included) falls back to the object as a term.
*/
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/lpvm.h"
#include "vm/llog.h"
#include "vm/lproc_int.h"
#include "vm/lterm.h"
#include "vm/lterm_int.h"

/* "msg\nstack traceback:\n\t..." built in C from the dead thread's frames: nothing
** here allocates in the state, which may be out of memory. */
static size_t traceback(lua_State *L, char *out, size_t cap) {
  size_t n = 0;
  lua_Debug ar;
  n += (size_t)snprintf(out + n, cap - n, "\nstack traceback:");
  for (int level = 0; n < cap && lua_getstack(L, level, &ar); level++) {
    if (level >= 20) {
      n += (size_t)snprintf(out + n, cap - n, "\n\t...");
      break;
    }
    if (!lua_getinfo(L, "Sln", &ar)) break;
    if (n >= cap) break;
    if (ar.currentline > 0)
      n += (size_t)snprintf(out + n, cap - n, "\n\t%s:%d: in ", ar.short_src, ar.currentline);
    else
      n += (size_t)snprintf(out + n, cap - n, "\n\t%s: in ", ar.short_src);
    if (n >= cap) break;
    if (ar.name)
      n += (size_t)snprintf(out + n, cap - n, "%s '%s'", *ar.namewhat ? ar.namewhat : "function", ar.name);
    else if (*ar.what == 'm')
      n += (size_t)snprintf(out + n, cap - n, "main chunk");
    else if (*ar.what == 'C')
      n += (size_t)snprintf(out + n, cap - n, "?");
    else
      n += (size_t)snprintf(out + n, cap - n, "function <%s:%d>", ar.short_src, ar.linedefined);
  }
  return n < cap ? n : cap - 1;
}

/* p->failed when the error object had a __tostring: p->exit_reason then holds the
** crash report's text (a binary: the text and the traceback) instead of exit(reason)'s
** term, which only an exit sets (and p->exiting with it). The reason itself, what
** links and monitors see, is the object as a term all the same. */
#define FAILED_TEXT 2

/* Arguments: the error object. Its __tostring's text, or nothing. */
static int tostring_cf(lua_State *L) {
  if (luaL_getmetafield(L, 1, "__tostring") == LUA_TNIL) return 0;
  lua_pop(L, 1);
  luaL_tolstring(L, 1, NULL);   /* raises if __tostring gives no string, as lua5.4 */
  return 1;
}

/* The text of an error object with __tostring (an error class), as lua5.4 prints it,
** malloc'd; NULL when it has none, or it raised, ran too long or found no memory. Its
** Lua needs a live thread: the dead one is reset first (its __close handlers run now,
** not at release, and its frames go: take the traceback before), and everything runs
** under the hook that bounds __close handlers at exit (p->closing: an error after ~2M
** instructions), so a __tostring that loops or raises cannot hang or crash the worker. */
static char *error_text(lproc *p, size_t *len) {
  lua_State *L = p->L;
  int t = lua_type(L, -1);
  if (t != LUA_TTABLE && t != LUA_TUSERDATA) return NULL;
  const void *obj = lua_topointer(L, -1);
  p->closing = 1;
  p->slices = 0;
  lproc_slice_closing(L);
  char *text = NULL;
  /* the error object stays on top unless a __close handler raised another */
  if (lua_resetthread(L) != LUA_OK && lua_gettop(L) >= 1 && lua_type(L, -1) == t &&
      lua_topointer(L, -1) == obj) {
    lua_pushcfunction(L, tostring_cf);
    lua_insert(L, -2);
    if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_type(L, -1) == LUA_TSTRING) {
      const char *s = lua_tolstring(L, -1, len);
      if ((text = malloc(*len + 1)) != NULL) memcpy(text, s, *len + 1);
    }
  }
  lua_settop(L, 0);
  p->closing = 0;
  return text;
}

/* OTP's crash report (llog.c writes it), for a process that failed by itself (an
** error, exit(reason), max_heap) with a reason that is not normal or shutdown,
** linked or not, trapping or not; and for the boot process whatever ended it, so
** `lpvm app.lua` never exits 1 without saying why. Not for a process killed by a
** signal (its sender reports), nor while the VM stops (halt, SIGINT), nor for the
** shell's process once its REPL runs: the shell goes on in a new one, which says how
** this one ended as Erlang's shell does ("** exception exit: ...", vm/shell.c). */
void lproc_crash_report(lproc *p, const uint8_t *reason, size_t len) {
  if (!p->failed && (!p->boot || lpvm_halted())) return;
  if (p->boot && lproc_shell_in_use(p->task.id)) return;
  if (p->failed == FAILED_TEXT && p->exit_reason) {   /* lproc_error's text */
    reason = p->exit_reason;
    len = p->exit_len;
  }
  llog_proc who = {p->task.id, p->boot, p->failed, lpvm_mbox_len(&p->task), p->mem,
                   p->task.reductions};
  llog_crash_report(&who, reason, len);
}

/* The process failed with the error object on top of its stack. The reason is a
** binary "message\nstack traceback:..." for a string (or number) error; another
** error value that can travel (a table, say) is the reason itself, so supervisors
** can match on it; anything else becomes "(error object is a X value)", or the text
** of its __tostring. The crash report shows an object with __tostring by its text
** and the traceback, as lua5.4 prints it (the reason stays the object). */
int lproc_error(lproc *p) {
  lua_State *L = p->L;
  char num[64], tb[4096];
  const char *msg = num;
  size_t mlen;
  int t = lua_type(L, -1);
  if (t == LUA_TSTRING) {
    msg = lua_tolstring(L, -1, &mlen);   /* whole: the reason is bounded by memory only */
  } else if (t == LUA_TNUMBER) {
    mlen = lua_isinteger(L, -1)
               ? (size_t)snprintf(num, sizeof num, LUA_INTEGER_FMT, lua_tointeger(L, -1))
               : (size_t)snprintf(num, sizeof num, LUA_NUMBER_FMT, lua_tonumber(L, -1));
  }
  size_t tlen = traceback(L, tb, sizeof tb);   /* 20 frames at most, marked "..." */
  char *text = NULL;   /* an object's __tostring text (error_text) */
  if (t != LUA_TSTRING && t != LUA_TNUMBER) {
    char err[LTERM_ERRSZ];
    lpvm_tbuf b;
    lpvm_tbuf_init(&b);
    int travels = lterm_put_reason(L, -1, &b, err) == 0 && !b.err;
    text = error_text(p, &mlen);   /* the thread is reset: L's frames are gone */
    if (travels) {
      lpvm_set_reason(&p->task, b.data, b.len);
      lpvm_tbuf_reset(&b);
      p->failed = 1;
      if (text) {   /* the report's text: the object's and the traceback */
        char *whole = malloc(mlen + tlen);
        int made = whole != NULL;
        if (whole) {
          memcpy(whole, text, mlen);
          memcpy(whole + mlen, tb, tlen);
          lpvm_put_binary(&b, whole, mlen + tlen);
          free(whole);
        }
        free(p->exit_reason);
        p->exit_reason = made && !b.err ? malloc(b.len) : NULL;
        if (p->exit_reason) {
          memcpy(p->exit_reason, b.data, b.len);
          p->exit_len = (uint32_t)b.len;
          p->failed = FAILED_TEXT;
        }
        free(text);
      }
      lpvm_tbuf_free(&b);
      return LPVM_EXIT;
    }
    lpvm_tbuf_free(&b);
    if (text) msg = text;
    else mlen = (size_t)snprintf(num, sizeof num, "(error object is a %s value)", lua_typename(L, t));
  }
  /* The binary is built with malloc, not in the state (which may be out of memory).
  ** Only if even that fails is the message cut, and the cut is said in the reason. */
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  char *whole = malloc(mlen + tlen);
  if (whole) {
    memcpy(whole, msg, mlen);
    memcpy(whole + mlen, tb, tlen);
    lpvm_put_binary(&b, whole, mlen + tlen);
    free(whole);
  }
  if (!whole || b.err) {
    char cut[2048 + 96];
    size_t keep = mlen < 2048 ? mlen : 2048;
    memcpy(cut, msg, keep);
    size_t k = keep + (size_t)snprintf(cut + keep, sizeof cut - keep,
                                       "... (%zu bytes cut: out of memory)", mlen - keep);
    lpvm_tbuf_reset(&b);
    lpvm_put_binary(&b, cut, k);
  }
  if (!b.err) lpvm_set_reason(&p->task, b.data, b.len);
  else lpvm_set_reason_atom(&p->task, "error");
  lpvm_tbuf_free(&b);
  free(text);
  p->failed = 1;
  return LPVM_EXIT;
}
