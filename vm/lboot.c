/*
** lboot.c -- the boot process: the command line run as the stand-alone lua runs it.
**
** lua5.4 runs LUA_INIT, then each -e and -l in the order given, then the script with
** its arguments as `...`, then (with -i) its REPL in the same state, compiling each
** just before running it. The boot process does the same: its state is made here, on
** the caller's thread, with a table of steps {fn, args...}. The first step is compiled
** here, before the process is spawned, so a script alone that does not compile (or a
** file that cannot be read) is one line on stderr and nothing has run; a later step
** is kept as {kind, text, name, args...} and compiled when its turn comes, so
** `lpvm -e X missing.lua` runs X first, as lua5.4 does, and then says "lpvm: cannot
** open missing.lua" on one line and ends the boot process (status 1, with the reason
** {"shutdown", message}: no crash report on top of the line). The process's body is
** boot_main, a C function that calls the steps in order through lua_callk, so every
** step may block (receive, sleep) and be preempted; an error in a step ends the
** process with it, as lua stops at the first error. The shell, last, is `require("lpvm_shell").run(tty, version)` (vm/lib/lpvm_shell.lua)
** reading lines from the terminal reader of vm/shell.c.
*/
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/lpvm.h"
#include "vm/lproc.h"
#include "vm/lproc_int.h"
#include "vm/lterm.h"

static int load_step(lua_State *L, const lproc_step *st);

/* ---- the body --------------------------------------------------------------------------- */

/* A step kept as {kind, text, name, args...} (lua_gettop: at `step`): compiled now,
** pushed with its arguments; returns how many values. One line on stderr and the end
** of the boot process if it does not compile, as lua5.4 stops there. */
static int push_late_step(lua_State *L, int step) {
  int n = (int)lua_rawlen(L, step);
  luaL_checkstack(L, n, "too many arguments");
  lua_rawgeti(L, step, 1);
  lua_rawgeti(L, step, 2);
  lua_rawgeti(L, step, 3);
  lproc_step st = {(int)lua_tointeger(L, -3), lua_tostring(L, -2), lua_tostring(L, -1)};
  if (load_step(L, &st) != LUA_OK) {
    const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "cannot load";
    fprintf(stderr, "lpvm: %s\n", msg);
    fflush(stderr);
    lua_createtable(L, 2, 0);
    lua_pushliteral(L, "shutdown");
    lua_rawseti(L, -2, 1);
    lua_pushvalue(L, -2);
    lua_rawseti(L, -2, 2);
    return lua_error(L);
  }
  lua_replace(L, step + 1);   /* the function where the kind was */
  lua_settop(L, step + 1);
  for (int k = 4; k <= n; k++) lua_rawgeti(L, step, k);
  return n - 2;
}

/* Stack: [1] the steps. Call step i and those after it. */
static int boot_k(lua_State *L, int status, lua_KContext i) {
  (void)status;
  for (;; i++) {
    lua_settop(L, 1);
    if (lua_rawgeti(L, 1, (lua_Integer)i) == LUA_TNIL) return 0;
    int step = lua_gettop(L);
    int n = (int)lua_rawlen(L, step);
    if (lua_rawgeti(L, step, 1) == LUA_TNUMBER) {
      lua_pop(L, 1);
      n = push_late_step(L, step);
    } else {
      lua_pop(L, 1);
      luaL_checkstack(L, n, "too many arguments");
      for (int k = 1; k <= n; k++) lua_rawgeti(L, step, k);
    }
    lua_callk(L, n - 1, 0, i + 1, boot_k);
  }
}

static int boot_main(lua_State *L) { return boot_k(L, LUA_OK, 1); }

/* ---- compiling the steps ------------------------------------------------------------------ */

static char *one_line(const char *prefix, const char *msg) {
  size_t n = strlen(prefix) + strlen(msg) + 1;
  char *s = malloc(n);
  if (!s) return NULL;
  snprintf(s, n, "%s%s", prefix, msg);
  for (char *c = s; *c; c++)
    if (*c == '\n' || *c == '\r') *c = ' ';
  return s;
}

/* The folder of the boot script goes on every process's package.path and cpath
** (llibs.c), absolute so a later chdir does not lose it. A folder whose name holds
** a path separator of Lua's (';' or '?') cannot be put there and is left out. */
static void set_script_dir(const char *script) {
  char *dir = NULL;
  if (script && strcmp(script, "-") != 0) {
    char *full = realpath(script, NULL);
    char *slash = full ? strrchr(full, '/') : NULL;
    if (slash) {
      *slash = 0;
      if (strpbrk(full, ";?") == NULL) dir = full[0] ? full : strcpy(full, "/");
    }
    if (!dir) free(full);
  }
  llibs_set_script_dir(dir);
  free(dir);
}

static int load_stdin(lua_State *L) {
  luaL_Buffer b;
  char chunk[4096];
  size_t n;
  luaL_buffinit(L, &b);
  while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0) luaL_addlstring(&b, chunk, n);
  luaL_pushresult(&b);
  size_t len;
  const char *src = lua_tolstring(L, -1, &len);
  if (len > 0 && src[0] == '#') {   /* a #! line, as lua does */
    while (len > 0 && *src != '\n') src++, len--;
  }
  int rc = luaL_loadbuffer(L, src, len, "=stdin");
  lua_remove(L, -2);
  return rc;
}

/* -l g=mod: `g = require(mod)`, in Lua so that a module that blocks while loading
** can (a C function calling require could not yield). */
static const char lib_chunk[] = "local g, m = ... _ENV[g] = require(m)";
static const char shell_chunk[] = "return require('lpvm_shell').run(...)";

/* Push the step's function, or its message and a nonzero status. */
static int load_step(lua_State *L, const lproc_step *st) {
  int rc;
  switch (st->kind) {
    case LPROC_STEP_CODE:
      rc = luaL_loadbuffer(L, st->text, strlen(st->text), st->name ? st->name : "=(command line)");
      break;
    case LPROC_STEP_FILE:
      rc = strcmp(st->text, "-") == 0 ? load_stdin(L) : luaL_loadfilex(L, st->text, NULL);
      break;
    case LPROC_STEP_LIB:
      rc = luaL_loadbuffer(L, lib_chunk, sizeof lib_chunk - 1, "=(command line)");
      break;
    default:
      lua_pushliteral(L, "bad boot step");
      return LUA_ERRRUN;
  }
  return rc;
}

static int load_cf(lua_State *L) {
  const lproc_boot_spec *b = lua_touserdata(L, 1);
  int tty = (int)lua_tointeger(L, 2);
  lua_settop(L, 0);
  lproc_state_init(L, 0);
  lua_pushcfunction(L, boot_main);
  lua_createtable(L, b->nsteps + 1, 0);
  int n = 0;
  for (int i = 0; i < b->nsteps; i++) {
    const lproc_step *st = &b->steps[i];
    lua_createtable(L, 3, 0);
    int k = 1;
    if (i == 0) {   /* compiled now: alone, its failure is the caller's one line */
      if (load_step(L, st) != LUA_OK) lua_error(L);
      lua_rawseti(L, -2, 1);
    } else {        /* compiled when its turn comes (push_late_step) */
      lua_pushinteger(L, st->kind);
      lua_rawseti(L, -2, 1);
      lua_pushstring(L, st->text);
      lua_rawseti(L, -2, 2);
      if (st->name) lua_pushstring(L, st->name);
      else lua_pushboolean(L, 0);
      lua_rawseti(L, -2, 3);
      k = 3;
    }
    if (st->kind == LPROC_STEP_LIB) {
      lua_pushstring(L, st->name ? st->name : st->text);
      lua_rawseti(L, -2, ++k);
      lua_pushstring(L, st->text);
      lua_rawseti(L, -2, ++k);
    }
    if (i == b->script)   /* the script's arguments: what follows it on the line */
      for (int a = b->arg0 + 1; a < b->argc; a++) {
        lua_pushstring(L, b->argv[a]);
        lua_rawseti(L, -2, ++k);
      }
    lua_rawseti(L, -2, ++n);
  }
  if (b->shell) {
    lua_createtable(L, 2, 0);
    if (luaL_loadbuffer(L, shell_chunk, sizeof shell_chunk - 1, "=shell") != LUA_OK)
      lua_error(L);
    lua_rawseti(L, -2, 1);
    lua_pushboolean(L, tty);
    lua_rawseti(L, -2, 2);
    lua_pushliteral(L, LPVM_VERSION);
    lua_rawseti(L, -2, 3);
    lua_rawseti(L, -2, ++n);
  }
  /* arg, as the stand-alone lua makes it */
  lua_createtable(L, b->argc > b->arg0 ? b->argc - b->arg0 - 1 : 0, b->arg0 + 1);
  for (int i = 0; i < b->argc; i++) {
    lua_pushstring(L, b->argv[i]);
    lua_rawseti(L, -2, i - b->arg0);
  }
  lua_setglobal(L, "arg");
  return 2;
}

int lproc_boot_spec_run(const lproc_boot_spec *b, lpvm_id *id, char **errmsg) {
  if (errmsg) *errmsg = NULL;
  if (!b || b->nsteps < 0 || (b->nsteps > 0 && !b->steps) || b->argc < 0 ||
      (b->argc > 0 && !b->argv) || b->script >= b->nsteps ||
      (b->argc > 0 && (b->arg0 < 0 || b->arg0 >= b->argc)))
    return LPVM_EINVAL;
  lua_State *L = lproc_state_new();
  if (!L) {
    if (errmsg) *errmsg = one_line("lpvm: ", "not enough memory");
    return LPVM_ENOMEM;
  }
  const char *script = NULL;
  if (b->script >= 0 && b->steps[b->script].kind == LPROC_STEP_FILE)
    script = b->steps[b->script].text;
  set_script_dir(script);
  lpvm_id reader = 0;
  int tty = 0;
  if (b->shell) {
    int rc = lproc_shell_reader(&reader);
    if (rc < 0) {
      lua_close(L);
      if (errmsg) *errmsg = one_line("lpvm: cannot start the shell: ", lpvm_strerror(rc));
      return rc;
    }
    tty = rc;
  }
  lua_pushcfunction(L, load_cf);
  lua_pushlightuserdata(L, (void *)b);
  lua_pushinteger(L, tty);
  if (lua_pcall(L, 2, 2, 0) != LUA_OK) {
    const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "cannot load";
    if (errmsg) *errmsg = one_line("lpvm: ", msg);
    lua_close(L);
    if (reader) lpvm_kill(NULL, reader);
    return LPVM_EINVAL;
  }
  lpvm_id nid = 0;
  int rc = lproc_spawn_boot(L, 1, &nid);
  if (rc != 0) {
    if (errmsg) *errmsg = one_line("lpvm: cannot start the boot process: ", lpvm_strerror(rc));
    if (reader) lpvm_kill(NULL, reader);
    return rc;
  }
  if (reader) lproc_shell_watch(reader, nid);
  if (id) *id = nid;
  return 0;
}

int lproc_boot(const char *script, const char *code, int argc, char **argv, lpvm_id *id,
               char **errmsg) {
  if (!script && !code) return LPVM_EINVAL;
  lproc_step st = {code ? LPROC_STEP_CODE : LPROC_STEP_FILE, code ? code : script, NULL};
  lproc_boot_spec b = {&st, 1, 0, argc, argv, 0, 0};
  return lproc_boot_spec_run(&b, id, errmsg);
}

/* ---- the shell again -------------------------------------------------------------------- */

/* The shell's process ended while the shell was in use (vm/shell.c's reader saw its
** DOWN after it had asked for a line): an exit it called, a kill, an exit signal from
** a process it linked to. Erlang's shell starts a new evaluator then, and so does
** lpvm: a new process runs require('lpvm_shell').run(tty, version, <the DOWN's
** values>), which says how the old one ended and reads on. Its globals start afresh:
** they were the old state's. Made here, on the reader's thread, as the boot state is
** made on the caller's. */
typedef struct respawn_args { const uint8_t *down; size_t len; int tty; } respawn_args;

static int respawn_cf(lua_State *L) {
  const respawn_args *a = lua_touserdata(L, 1);
  lua_settop(L, 0);
  lproc_state_init(L, 0);
  if (luaL_loadbuffer(L, shell_chunk, sizeof shell_chunk - 1, "=shell") != LUA_OK)
    return lua_error(L);
  lua_pushboolean(L, a->tty);
  lua_pushliteral(L, LPVM_VERSION);
  return 3 + lterm_push_values_ex(L, a->down, a->len, 1);
}

int lproc_shell_respawn(int tty, const uint8_t *down, size_t len, lpvm_id *id) {
  lua_State *L = lproc_state_new();
  if (!L) return LPVM_ENOMEM;
  respawn_args a = {down, len, tty};
  lua_pushcfunction(L, respawn_cf);
  lua_pushlightuserdata(L, &a);
  if (lua_pcall(L, 1, LUA_MULTRET, 0) != LUA_OK) {
    lua_close(L);
    return LPVM_EINVAL;
  }
  return lproc_spawn_boot(L, lua_gettop(L) - 1, id);
}
