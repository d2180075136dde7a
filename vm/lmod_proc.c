/*
** lmod_proc.c -- processes: spawn, identity, links and monitors, exits, names,
** priority, migration, info, processes, halt, recycling and C task types.
**
** spawn sends the function as one term (lfun.c: bytecode with debug info, upvalues
** copied by value, functions among them); an upvalue holding the parent's globals
** becomes the child's own globals. The dump is cached per prototype, so spawning
** the same function N times dumps it once.
*/
#include <lauxlib.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/dist.h"
#include "lpvm/taskmod.h"
#include "vm/lproc_int.h"
#include "vm/lterm.h"

/* ---- spawn -------------------------------------------------------------------------------- */

/* Option k of table t: nil (dflt) or a boolean; anything else raises naming it. */
static int opt_bool(lua_State *L, int t, const char *k, int dflt) {
  int ty = lua_getfield(L, t, k);
  if (ty != LUA_TNIL && ty != LUA_TBOOLEAN)
    luaL_argerror(L, t, lua_pushfstring(L, "option '%s' must be a boolean, got %s", k,
                                        luaL_typename(L, -1)));
  int v = ty == LUA_TNIL ? dflt : lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

/* Option k of table t: nil (0) or a string (1); anything else raises naming it. */
static int opt_string(lua_State *L, int t, const char *k) {
  int ty = lua_getfield(L, t, k);
  lua_pop(L, 1);
  if (ty != LUA_TNIL && ty != LUA_TSTRING)
    luaL_argerror(L, t, lua_pushfstring(L, "option '%s' must be a string, got %s", k,
                                        lua_typename(L, ty)));
  return ty == LUA_TSTRING;
}

typedef struct spawn_opts {
  lpvm_spawn_opts o;
  size_t max_heap;
  uint32_t max_mailbox;
  int monitor;
} spawn_opts;

static void check_options(lua_State *L, int t, spawn_opts *so) {
  static const char *const known[] = {"priority", "thread", "link", "monitor", "max_heap",
                                      "max_mailbox", "node", "fn", NULL};
  lmod_check_keys(L, t, known, "spawn option");
  if (lua_getfield(L, t, "priority") != LUA_TNIL) {
    lua_Integer pr = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : -1;
    luaL_argcheck(L, pr >= LPVM_PRIO_MAX && pr <= LPVM_PRIO_MIN, t,
                  "option 'priority' must be an integer 0..31");
    so->o.prio = (int)pr;
  }
  lua_pop(L, 1);
  if (lua_getfield(L, t, "max_heap") != LUA_TNIL) {
    lua_Integer mh = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : -1;
    luaL_argcheck(L, mh >= 0, t, "option 'max_heap' must be an integer >= 0 (bytes)");
    so->max_heap = (size_t)mh;
  }
  lua_pop(L, 1);
  if (lua_getfield(L, t, "max_mailbox") != LUA_TNIL) {
    lua_Integer mm = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : -1;
    luaL_argcheck(L, mm >= 0 && mm <= UINT32_MAX, t,
                  "option 'max_mailbox' must be an integer >= 0 (messages)");
    so->max_mailbox = (uint32_t)mm;
  }
  lua_pop(L, 1);
  so->o.thread = opt_bool(L, t, "thread", so->o.thread);
  so->o.link = opt_bool(L, t, "link", so->o.link);
  so->monitor = opt_bool(L, t, "monitor", so->monitor);
  opt_string(L, t, "node");
  opt_string(L, t, "fn");
}

static int spawn_common(lua_State *L, int link, int monitor) {
  lproc *p = lproc_check(L);
  spawn_opts so;
  so.o = (lpvm_spawn_opts)LPVM_SPAWN_OPTS_INIT;
  so.o.thread = lproc_cfg.threads ? 1 : 0;
  so.o.link = link;
  so.max_heap = lproc_cfg.max_heap;
  so.max_mailbox = 0;
  so.monitor = monitor;
  int first = 1;
  if (lua_type(L, 1) == LUA_TTABLE) {
    check_options(L, 1, &so);
    first = 2;
    if (lua_getfield(L, 1, "node") != LUA_TNIL) {   /* on another node: lmod_dist.c */
      const char *node = luaL_checkstring(L, -1);
      if (strcmp(node, lpvm_node_name()) != 0) {
        luaL_argcheck(L, !so.monitor, 1, "option 'monitor' cannot go with 'node' (monitor "
                                         "the pid spawn returns)");
        return lmod_dist_spawn(L, so.o.link);
      }
    }
    lua_pop(L, 1);
    /* a local spawn runs the module's main: a function named for it would be ignored */
    if (lua_getfield(L, 1, "fn") != LUA_TNIL)
      luaL_argerror(L, 1, "option 'fn' goes with 'node' naming another node");
    lua_pop(L, 1);
  }
  int top = lua_gettop(L);
  int kind = lua_type(L, first);
  if (kind != LUA_TFUNCTION && kind != LUA_TSTRING)
    luaL_typeerror(L, first, "function or module name");
  if (kind == LUA_TFUNCTION && lua_iscfunction(L, first))
    return luaL_argerror(L, first, "cannot spawn a C function");
  if (kind == LUA_TSTRING) {   /* a name require can look up as a file */
    size_t len;
    lua_tolstring(L, first, &len);
    if (len == 0 || len >= PATH_MAX)
      luaL_argerror(L, first, lua_pushfstring(L, "module name of 1..%d bytes expected",
                                              PATH_MAX - 1));
    lmod_cstr(L, first, first, "module name");
  }
  char err[LTERM_ERRSZ];
  /* no arguments: the empty tuple, not built (cap 0: not ours to free) */
  lpvm_tbuf up, args = {(uint8_t *)lproc_no_args, sizeof lproc_no_args, 0, 0};
  lpvm_tbuf_init(&up);
  if (top > first) lpvm_tbuf_init(&args);
  size_t code_len = 0;
  const char *code = "";
  uint64_t code_id = 0;
  if (kind == LUA_TFUNCTION) {   /* the function as a term, upvalues and all */
    if (!lfun_put_spawn(L, first, &up, &code_id) && lterm_put(L, first, &up, err) != 0) {
      lpvm_tbuf_free(&up);
      if (args.cap) lpvm_tbuf_free(&args);
      return luaL_error(L, "spawn: %s", err);
    }
  } else {
    code = lua_tolstring(L, first, &code_len);
  }
  if (top > first && lterm_put_values(L, first + 1, top - first, &args, err) != 0) {
    lpvm_tbuf_free(&up);
    if (args.cap) lpvm_tbuf_free(&args);
    return luaL_error(L, "spawn: argument %s", err);
  }
  lproc_start *s = NULL;
  if (!up.err && !args.err)
    s = lproc_start_new(kind == LUA_TFUNCTION ? LS_TERM : LS_MODULE, code, code_len, &up,
                        &args);
  if (!s) {
    lpvm_tbuf_free(&up);
    if (args.cap) lpvm_tbuf_free(&args);
    return luaL_error(L, "spawn: not enough memory");
  }
  s->code_id = code_id;
  s->max_heap = so.max_heap;
  s->max_mailbox = so.max_mailbox;
  s->creator = p->task.id;
  s->wait_marker = so.monitor;
  lpvm_tbuf_free(&up);
  if (args.cap) lpvm_tbuf_free(&args);
  lpvm_id id;
  int rc = lproc_spawn(p, s, &so.o, &id);
  if (rc != 0) return lmod_fail(L, rc);
  lmod_push_pid(L, id);
  if (!so.monitor) return 1;
  uint64_t ref = 0;
  lpvm_monitor(&p->task, id, &ref);
  lproc_send_marker(p, id);   /* now it may run: its DOWN can't be missed */
  lmod_push_ref(L, ref);
  return 2;
}

static int lmod_spawn(lua_State *L) { return spawn_common(L, 0, 0); }
static int lmod_spawn_link(lua_State *L) { return spawn_common(L, 1, 0); }
static int lmod_spawn_monitor(lua_State *L) { return spawn_common(L, 0, 1); }

/* ---- identity, links, monitors, exits ------------------------------------------------------- */

static int lmod_self(lua_State *L) {
  lproc *p = lproc_check(L);
  lmod_push_pid(L, p->task.id);
  return 1;
}

/* link(pid): Erlang's link/1. A local pid already dead raises noproc in a process
** that does not trap exits (it may catch it and live on); one that traps gets the
** "EXIT", pid, "noproc" message. A pid that dies after the look links, and its end
** comes as an exit signal (noproc if it was gone when the link arrived), as in
** Erlang. */
static int lmod_link(lua_State *L) {
  lproc *p = lproc_check(L);
  lpvm_id id = lmod_check_pid(L, 1);
  if (id != p->task.id && !lpvm_id_is_remote(id) && !lpvm_is_alive(id)) {
    int trap = lpvm_trap_exit(&p->task, 0);
    lpvm_trap_exit(&p->task, trap);
    if (!trap) {
      lua_pushliteral(L, "noproc");
      return lua_error(L);
    }
  }
  int rc = lpvm_link(&p->task, id);
  if (rc != 0) return lmod_fail(L, rc);
  lua_pushboolean(L, 1);
  return 1;
}

static int lmod_unlink(lua_State *L) {
  lproc *p = lproc_check(L);
  lpvm_unlink(&p->task, lmod_check_pid(L, 1));
  lua_pushboolean(L, 1);
  return 1;
}

/* Options of monitor and demonitor: nil, or the one word `word`. */
static int opt_word(lua_State *L, int arg, const char *word) {
  if (lua_isnoneornil(L, arg)) return 0;
  const char *s = luaL_checkstring(L, arg);
  if (strcmp(s, word) != 0)
    luaL_argerror(L, arg, lua_pushfstring(L, "'%s' or nil expected, got '%s'", word, s));
  return 1;
}

/* monitor(pid | name | {name, node} [, "alias"]) -> ref; a dead pid or unknown name
** gets DOWN with noproc. By name the DOWN names {name, node}, as Erlang's
** monitor(process, Name) and monitor(process, {Name, Node}): this node's name is
** the name alone; another node's goes through io/dist (noconnection when that node
** goes).
** With "alias" the reference is also an active alias until demonitor or the DOWN
** (Erlang's {alias, demonitor}): a reply sent to it after the DOWN is dropped. */
static int lmod_monitor(lua_State *L) {
  lproc *p = lproc_check(L);
  const char *name = NULL, *node = NULL;
  lpvm_id id = 0;
  if (lua_type(L, 1) == LUA_TTABLE) {   /* {name, node}, as send's */
    size_t len, nl;
    luaL_argcheck(L, lua_rawgeti(L, 1, 1) == LUA_TSTRING, 1,
                  "{name, node} expected (name not a string)");
    luaL_argcheck(L, lua_rawgeti(L, 1, 2) == LUA_TSTRING, 1,
                  "{name, node} expected (node not a string)");
    name = lua_tolstring(L, -2, &len);
    node = lua_tolstring(L, -1, &nl);
    luaL_argcheck(L, len >= 1 && len <= 255 && strlen(name) == len, 1,
                  "{name, node}: name must be 1..255 bytes without NUL");
    luaL_argcheck(L, strlen(node) == nl && strchr(node, '@') != NULL, 1,
                  "{name, node}: node name (name@host) expected");
    if (strcmp(node, lpvm_node_name()) == 0) {
      node = NULL;   /* this node's: as the name alone */
    } else {
      luaL_argcheck(L, strcmp(lpvm_node_name(), "nonode@nohost") != 0, 1,
                    "{name, node}: a name on another node, and this node is not distributed (erl: badarg)");
    }
    lua_pop(L, 2);   /* (the table keeps both strings) */
  } else if (lua_type(L, 1) == LUA_TSTRING) {
    size_t len;
    name = lua_tolstring(L, 1, &len);
    luaL_argcheck(L, strlen(name) == len, 1, "name must not hold NUL");
    luaL_argcheck(L, len <= 255, 1, "name must be at most 255 bytes");
  } else {
    id = lmod_check_pid(L, 1);
  }
  int alias = opt_word(L, 2, "alias");
  uint64_t ref;
  int rc = node ? lpvm_monitor_remote_name(&p->task, name, node, &ref)
           : name ? lpvm_monitor_name(&p->task, name, &ref)
                  : lpvm_monitor(&p->task, id, &ref);
  if (rc != 0) return lmod_fail(L, rc);
  lmod_mark(p, ref);   /* the DOWN is a signal: it cannot be in the mailbox yet */
  if (alias && lmod_alias_add(p, ref, 1) != 0) {
    lpvm_demonitor(&p->task, ref);
    return lmod_fail(L, LPVM_ENOMEM);
  }
  lmod_push_ref(L, ref);
  return 1;
}

/* demonitor(ref [, "flush"]): no DOWN for ref arrives afterwards; "flush" also
** removes one already in the mailbox. The alias of ref, if any, ends too: what
** arrived for it stays, unless flushed (lmod_ref_end). */
static int lmod_demonitor(lua_State *L) {
  lproc *p = lproc_check(L);
  uint64_t ref = lmod_check_ref(L, 1);
  int flush = opt_word(L, 2, "flush");
  lpvm_demonitor(&p->task, ref);
  lmod_ref_end(p, ref, flush);
  lua_pushboolean(L, 1);
  return 1;
}

/* trap_exit([flag]) -> the old flag. A flag that is not a boolean raises (Erlang's
** process_flag(trap_exit, 42) is badarg; 42 was taken as true); nil asks, as none. */
static int lmod_trap_exit(lua_State *L) {
  lproc *p = lproc_check(L);
  int old;
  if (!lua_isnoneornil(L, 1)) luaL_checktype(L, 1, LUA_TBOOLEAN);
  if (lua_isnoneornil(L, 1)) {
    old = lpvm_trap_exit(&p->task, 0);
    lpvm_trap_exit(&p->task, old);
  } else {
    old = lpvm_trap_exit(&p->task, lua_toboolean(L, 1));
  }
  lua_pushboolean(L, old);
  return 1;
}

static int exit_k(lua_State *L, int status, lua_KContext ctx) {
  (void)L, (void)status, (void)ctx;
  return 0;
}

/* A yield that ends the step, so a signal sent to ourselves takes effect. */
static int yield_now(lua_State *L, lproc *p) {
  if (!lua_isyieldable(L)) return 0;
  p->wait = LP_RUN;
  if (L != p->L) p->sched_yield = 1;
  return lua_yieldk(L, 0, 0, exit_k);
}

static int encode_reason(lua_State *L, int idx, lpvm_tbuf *b) {
  char err[LTERM_ERRSZ];
  lpvm_tbuf_init(b);
  if (lterm_put_reason(L, idx, b, err) != 0) {
    lpvm_tbuf_free(b);
    return luaL_error(L, "exit: reason %s", err);
  }
  return 0;
}

/* exit(self(), reason): as in Erlang the signal takes effect before exit returns.
** The signals queued so far, ours last, are handled now (in order: the queue is
** ours); if that ended the process, its step ends here with nothing more run (the
** task's state is EXIT: LP_HALT waits for the end). A yield of its own would not do:
** a step resumed by a message goes on resuming a process that yields to run. A
** trapping process got the "EXIT" message and exit returns true. */
static int exit_self(lua_State *L, lproc *p) {
  if (lpvm_fetch_signals(&p->task) && lua_isyieldable(L)) {
    p->wait = LP_HALT;
    if (L != p->L) p->sched_yield = 1;
    return lua_yieldk(L, 0, 0, exit_k);
  }
  lua_pushboolean(L, 1);   /* (not yieldable: it ends when the step does) */
  return 1;
}

/* exit(reason): end this process now (it cannot be caught). exit(pid, reason):
** send an exit signal (Erlang exit/2: "kill" cannot be trapped). */
static int lmod_exit(lua_State *L) {
  lproc *p = lproc_check(L);
  lpvm_tbuf b;
  if (lua_gettop(L) >= 2) {
    lpvm_id id = lmod_check_pid(L, 1);
    encode_reason(L, 2, &b);
    int rc = lpvm_exit(&p->task, id, b.data, b.len);
    lpvm_tbuf_free(&b);
    if (rc != 0 && rc != LPVM_ENOPROC) return lmod_fail(L, rc);
    if (id == p->task.id) return exit_self(L, p);
    lua_pushboolean(L, 1);
    return 1;
  }
  if (lua_isnone(L, 1)) lua_pushliteral(L, "normal");
  encode_reason(L, 1, &b);
  free(p->exit_reason);
  p->exit_reason = malloc(b.len);
  if (p->exit_reason) {
    memcpy(p->exit_reason, b.data, b.len);
    p->exit_len = (uint32_t)b.len;
  }
  lpvm_tbuf_free(&b);
  p->exiting = 1;
  yield_now(L, p);
  lproc_slice_end(L);             /* not yieldable here: unwind; the hook finishes it */
  if (L != p->L) lproc_slice_end(p->L);
  return luaL_error(L, "exit");
}

/* ---- names ------------------------------------------------------------------------------------ */

static int lmod_register(lua_State *L) {
  lproc *p = lproc_check(L);
  const char *name = lmod_check_name(L, 1);
  lpvm_id id = lua_isnoneornil(L, 2) ? p->task.id : lmod_check_pid(L, 2);
  int rc = lpvm_register(name, id);
  if (rc != 0) return lmod_fail(L, rc);
  lua_pushboolean(L, 1);
  return 1;
}

static int lmod_unregister(lua_State *L) {
  int rc = lpvm_unregister(lmod_check_name(L, 1));
  if (rc != 0) return lmod_fail(L, rc);
  lua_pushboolean(L, 1);
  return 1;
}

/* registered() -> { name, ... }: every registered name (a snapshot). */
typedef struct namelist {
  char **v;
  size_t n, cap;
  int oom;
} namelist;

static void collect_name(const char *name, lpvm_id id, void *ud) {
  (void)id;
  namelist *l = ud;
  if (l->oom) return;
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 64;
    char **v = realloc(l->v, cap * sizeof *v);
    if (!v) { l->oom = 1; return; }
    l->v = v, l->cap = cap;
  }
  if (!(l->v[l->n] = strdup(name))) l->oom = 1;
  else l->n++;
}

static void free_names(namelist *l) {
  for (size_t i = 0; i < l->n; i++) free(l->v[i]);
  free(l->v);
}

static int registered_cf(lua_State *L) {
  namelist *l = lua_touserdata(L, 1);
  lua_createtable(L, (int)(l->n > 1u << 24 ? 1u << 24 : l->n), 0);
  for (size_t i = 0; i < l->n; i++) {
    lua_pushstring(L, l->v[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

static int lmod_registered(lua_State *L) {
  namelist l = {NULL, 0, 0, 0};
  lpvm_foreach_name(collect_name, &l);   /* copied out: Lua may not run under the lock */
  if (l.oom) {
    free_names(&l);
    return luaL_error(L, "registered: not enough memory");
  }
  lua_pushcfunction(L, registered_cf);
  lua_pushlightuserdata(L, &l);
  int rc = lua_pcall(L, 1, 1, 0);   /* frees the copies even if Lua runs out of memory */
  free_names(&l);
  if (rc != LUA_OK) return lua_error(L);
  return 1;
}

/* is_alive(pid) -> true while pid is a live process (or port). */
static int lmod_is_alive(lua_State *L) {
  lua_pushboolean(L, lpvm_is_alive(lmod_check_pid(L, 1)));
  return 1;
}

static int lmod_whereis(lua_State *L) {
  lpvm_id id = lpvm_whereis(lmod_check_name(L, 1));
  if (id) lmod_push_pid(L, id);
  else lua_pushnil(L);
  return 1;
}

/* ---- scheduling ------------------------------------------------------------------------------- */

static int lmod_priority(lua_State *L) {
  lproc *p = lproc_check(L);
  int old = lpvm_prio(&p->task);
  if (!lua_isnoneornil(L, 1)) {
    if (lua_type(L, 1) != LUA_TNUMBER) luaL_typeerror(L, 1, "integer 0..31");   /* not "5" */
    lua_Integer pr = luaL_checkinteger(L, 1);
    luaL_argcheck(L, pr >= LPVM_PRIO_MAX && pr <= LPVM_PRIO_MIN, 1, "priority must be 0..31");
    int rc = lpvm_set_prio(&p->task, (int)pr);
    if (rc != 0) return lmod_fail(L, rc);
  }
  lua_pushinteger(L, old);
  return 1;
}

static int migrate_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status, (void)ctx;
  lproc *p = lproc_of(L);
  if (lpvm_on_thread(&p->task) == p->want_thread) {
    lua_pushboolean(L, 1);
    return 1;
  }
  return lmod_fail(L, LPVM_ESYS);
}

/* migrate("thread" | "worker"): returns once the process runs there. */
static int lmod_migrate(lua_State *L) {
  static const char *const modes[] = {"worker", "thread", NULL};
  lproc *p = lproc_check(L);
  int to_thread = lmod_check_option(L, 1, NULL, modes);
  if (lpvm_on_thread(&p->task) == to_thread) {
    lua_pushboolean(L, 1);
    return 1;
  }
  if (!lua_isyieldable(L)) return luaL_error(L, "migrate: cannot switch here (inside a C call)");
  int rc = lpvm_migrate(&p->task, p->task.id, to_thread);
  if (rc != 0) return lmod_fail(L, rc);
  p->want_thread = (uint8_t)to_thread;
  p->tries = 0;
  p->wait = LP_MIGRATE;
  if (L != p->L) p->sched_yield = 1;
  return lua_yieldk(L, 0, 0, migrate_k);
}

/* ---- info ------------------------------------------------------------------------------------- */

/* What m is to info(): 1 the reply, 2 the DOWN of the monitor, 0 neither. */
static int info_kind(lproc *p, lpvm_msg *m, lpvm_tread *map) {
  lpvm_tread r;
  uint32_t n;
  const char *a;
  size_t len;
  uint64_t ref;
  if (lpvm_tread_init(&r, lpvm_msg_data(m), lpvm_msg_len(m)) || lpvm_get_tuple(&r, &n)) return 0;
  if (lpvm_get_atom(&r, &a, &len) || lpvm_get_ref(&r, &ref)) return 0;
  if (n == 3 && len == 4 && memcmp(a, "info", 4) == 0 && ref == p->want_ref) {
    *map = r;
    return 1;
  }
  if (n == 5 && len == 4 && memcmp(a, "DOWN", 4) == 0 && ref == p->mon_ref) return 2;
  return 0;
}

/* Drop the monitor and any DOWN it already delivered (Erlang's demonitor flush). */
static void info_unmonitor(lproc *p) {
  if (!p->mon_ref) return;
  lpvm_demonitor(&p->task, p->mon_ref);
  lpvm_tread r;
  for (lpvm_msg *m = lpvm_mbox_next(&p->task, NULL); m; m = lpvm_mbox_next(&p->task, m))
    if (info_kind(p, m, &r) == 2) {
      lpvm_mbox_take(&p->task, m);
      lpvm_msg_free(m);
      break;
    }
  p->mon_ref = 0;
}

static int info_loop(lua_State *L, lproc *p);

static int info_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status, (void)ctx;
  lproc *p = lproc_of(L);
  p->wait = LP_RUN;
  return info_loop(L, p);
}

static int info_loop(lua_State *L, lproc *p) {
  lpvm_tread map;
  for (lpvm_msg *m = lpvm_mbox_next(&p->task, p->scan); m; m = lpvm_mbox_next(&p->task, m)) {
    int k = info_kind(p, m, &map);
    if (k == 0) {
      p->scan = m;
      continue;
    }
    lpvm_mbox_take(&p->task, m);
    p->scan = NULL;
    p->want_ref = 0;
    if (k == 2) {
      p->mon_ref = 0;
      lpvm_msg_free(m);
      return lmod_fail(L, LPVM_ENOPROC);
    }
    info_unmonitor(p);
    p->owned = m;
    lterm_push(L, &map);
    p->owned = NULL;
    lpvm_msg_free(m);
    return 1;
  }
  p->wait = LP_INFO;
  if (L != p->L) p->sched_yield = 1;
  return lua_yieldk(L, 0, 0, info_k);
}

/* info([pid]) -> {status=, priority=, mode=, message_queue_len=, memory=, ...} or
** nil, "noproc". The reply is picked out of the mailbox; other messages stay. */
static int lmod_info(lua_State *L) {
  lproc *p = lproc_check(L);
  if (p->in_pred) return luaL_error(L, "info: cannot be called from a receive predicate");
  if (p->in_eval) return luaL_error(L, "info: cannot wait inside lpvm.eval");
  lpvm_id id = lua_isnoneornil(L, 1) ? p->task.id : lmod_check_pid(L, 1);
  if (!lua_isyieldable(L)) return luaL_error(L, "info: cannot wait here (inside a C call)");
  lmod_drop_owned(p);
  p->mon_ref = 0;
  if (id != p->task.id && lpvm_monitor(&p->task, id, &p->mon_ref) != 0) p->mon_ref = 0;
  p->scan = p->task.mq_last;   /* the reply can only come after what is there */
  uint64_t ref;
  if (lpvm_request_info(&p->task, id, &ref) != 0) {
    info_unmonitor(p);
    p->scan = NULL;
    return lmod_fail(L, LPVM_ENOPROC);
  }
  p->want_ref = ref;
  lua_settop(L, 0);
  return info_loop(L, p);
}

/* ---- the VM --------------------------------------------------------------------------------- */

typedef struct idlist {
  lpvm_id *v;
  size_t n, cap;
} idlist;

static void collect(lpvm_id id, void *ud) {
  idlist *l = ud;
  if (lpvm_id_is_port(id)) return;
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 256;
    lpvm_id *v = realloc(l->v, cap * sizeof *v);
    if (!v) return;
    l->v = v, l->cap = cap;
  }
  l->v[l->n++] = id;
}

/* processes() -> list of every live process's pid (ports excluded). */
static int lmod_processes(lua_State *L) {
  idlist l = {NULL, 0, 0};
  lpvm_foreach_task(collect, &l);
  lua_createtable(L, (int)(l.n > 1u << 24 ? 1u << 24 : l.n), 0);
  for (size_t i = 0; i < l.n; i++) {
    lmod_push_pid(L, l.v[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  free(l.v);
  return 1;
}

static int halt_k(lua_State *L, int status, lua_KContext ctx) {
  (void)L, (void)status, (void)ctx;
  return 0;
}

/* halt([code]): the VM stops; this process waits for it. */
static int lmod_halt(lua_State *L) {
  lproc *p = lproc_check(L);
  lua_Integer code = luaL_optinteger(L, 1, 0);
  lpvm_halt((int)code);
  if (!lua_isyieldable(L)) return 0;
  p->wait = LP_HALT;
  if (L != p->L) p->sched_yield = 1;
  return lua_yieldk(L, 0, 0, halt_k);
}

/* recycle([n]) -> old bound of the state pool */
static int lmod_recycle(lua_State *L) {
  if (lua_isnoneornil(L, 1)) {
    lua_pushinteger(L, lproc_recycle_get());
    return 1;
  }
  lua_Integer n = luaL_checkinteger(L, 1);
  luaL_argcheck(L, n >= 0 && n <= 1000000, 1, "pool size must be 0..1000000");
  lua_pushinteger(L, lproc_recycle_set((int)n));
  return 1;
}

/* stock() -> states the maker has made ahead and no spawn has taken yet (0: off) */
static int lmod_stock(lua_State *L) {
  lua_pushinteger(L, lproc_maker_stock());
  return 1;
}

/* ---- C task types --------------------------------------------------------------------------- */

/* spawn_task(type, [arg]) -> pid: init gets a lpvm_task_arg with arg as a term. */
static int lmod_spawn_task(lua_State *L) {
  lproc *p = lproc_check(L);
  size_t len;
  const char *type = luaL_checklstring(L, 1, &len);
  const lpvm_task_def *def = strlen(type) == len ? ltask_find(type) : NULL;
  if (!def)
    return luaL_argerror(L, 1, lua_pushfstring(L, "unknown task type %s", lmod_push_quoted(L, 1)));
  char err[LTERM_ERRSZ];
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lua_settop(L, 2);   /* no arg: nil (it said "cannot send a no value value") */
  if (lterm_put_plain(L, 2, &b, err) != 0) {   /* a C task runs no Lua function */
    lpvm_tbuf_free(&b);
    return luaL_error(L, "spawn_task: argument %s", err);
  }
  lpvm_task_arg arg = {b.data, b.len};
  lpvm_id id;
  int rc = lpvm_spawn_task(&p->task, def, &arg, 0, &id);
  lpvm_tbuf_free(&b);
  if (rc != 0) return lmod_fail(L, rc);
  lmod_push_pid(L, id);
  return 1;
}

/* load_tasks(path) -> number of task types registered, or nil, message. A path
** longer than PATH_MAX is nil, message (ltask_load: dlopen is never asked). */
static int lmod_load_tasks(lua_State *L) {
  char err[256];
  int n = ltask_load(lmod_check_cstr(L, 1, "path"), err, sizeof err);
  if (n < 0) {
    lua_pushnil(L);
    lua_pushstring(L, err);
    return 2;
  }
  lua_pushinteger(L, n);
  return 1;
}

const lmod_fn lmod_proc_fns[] = {
    {"spawn", lmod_spawn},
    {"spawn_link", lmod_spawn_link},
    {"spawn_monitor", lmod_spawn_monitor},
    {"self", lmod_self},
    {"link", lmod_link},
    {"unlink", lmod_unlink},
    {"monitor", lmod_monitor},
    {"demonitor", lmod_demonitor},
    {"trap_exit", lmod_trap_exit},
    {"exit", lmod_exit},
    {"register", lmod_register},
    {"unregister", lmod_unregister},
    {"whereis", lmod_whereis},
    {"registered", lmod_registered},
    {"is_alive", lmod_is_alive},
    {"priority", lmod_priority},
    {"migrate", lmod_migrate},
    {"info", lmod_info},
    {"processes", lmod_processes},
    {"halt", lmod_halt},
    {"recycle", lmod_recycle},
    {"stock", lmod_stock},
    {"spawn_task", lmod_spawn_task},
    {"load_tasks", lmod_load_tasks},
    {NULL, NULL}};
