/*
** lcode.c -- the code server: Lua modules as VM-wide versioned code (thesis 5.2.9,
** Erlang's code server; docs/code.md), compiled once per VM.
**
** Every Lua module a process requires from package.path goes through here (this
** searcher takes the place of Lua's file searcher, package.searchers[2]): the first
** require anywhere reads the file, compiles it and registers it as version 1; later
** requires in any process load that version's bytecode, so all processes run the
** same code. Processes share nothing, so each loads a module into its own state, and
** compiling costs far more than loading bytecode (gen_server.lua and gen.lua: ~1.5 ms
** against ~0.1 ms): a supervisor starting 10,000 children compiles them once. The
** bytecode keeps its debug information (tracebacks are unchanged) and is kept per
** version up to LCODE_MAX_BYTES in all; past that a version is compiled from its
** source each time. A module holds at most two versions, current and old. lpvm.code.load (vm/lib/lpvm/
** code.lua) makes a new current one (the current becomes old; refused while an old
** one exists: "not_purged") and bumps `gen`.
**
** Each process remembers which version of each module it required (registry
** [&vers_key]). At its next safe point -- lproc_resume, that is before it runs again
** after a receive, sleep or preemption -- a process that sees a new `gen` runs the
** new chunks of its modules and updates each module table in place (lcode_safe_point),
** so `M.f()` reaches the new code while a function held in a local keeps the old.
** The update runs on a helper coroutine of the process (p->helper), since the main
** thread is suspended; nothing else touches the state then.
**
** Versions are told apart by chunk name: version 1 has the usual "@path", version N
** "@path (vN)". A process's info reply carries old_code, the modules whose old version
** has a function on its stack (lcode_info): check_process and purge ask that.
**
** Locking: `mu` guards the module list; nothing Lua runs under it (sources are copied
** out first). `gen` is read without the lock at every resume.
*/
#include <lauxlib.h>
#include <lualib.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "vm/lproc_int.h"

typedef struct lcode_ver {
  int vsn;           /* 0: none */
  char *src, *chunk; /* source (or bytecode) and chunk name */
  size_t len;
  char *code;        /* its bytecode once a process compiled it (NULL: not yet) */
  size_t code_len;
  int binary;        /* src may be bytecode: a file, as require reads it, or
                     ** code.load with mode "b"; else it loads as text only ("t") */
} lcode_ver;

#define LCODE_MAX_BYTES (64u << 20)   /* bytecode kept in all; past it, compile */

typedef struct lcode_mod {
  struct lcode_mod *next;
  char *name, *path;          /* path: NULL for a module loaded from a string */
  struct timespec mtime;      /* of the file when read */
  long long size;
  int last;                   /* the highest version number given */
  lcode_ver cur, old;
} lcode_mod;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static lcode_mod *mods;
static size_t code_bytes;   /* bytecode kept, under mu */
static _Atomic uint64_t gen = 1;

static const char vers_key = 'v';     /* registry: module name -> version required */
static const char helper_key = 'h';   /* registry: the helper coroutine (p->helper) */

/* ---- the module list (under mu) ----------------------------------------------------- */

static lcode_mod *find(const char *name) {
  for (lcode_mod *m = mods; m; m = m->next)
    if (strcmp(m->name, name) == 0) return m;
  return NULL;
}

static void ver_free(lcode_ver *v) {
  free(v->src);
  free(v->chunk);
  free(v->code);
  code_bytes -= v->code_len;
  memset(v, 0, sizeof *v);
}

static char *dup_str(const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

static char *chunk_name(const char *name, const char *path, int vsn) {
  char buf[1100];
  if (vsn == 1) snprintf(buf, sizeof buf, path ? "@%s" : "=%s", path ? path : name);
  else snprintf(buf, sizeof buf, path ? "@%s (v%d)" : "=%s (v%d)", path ? path : name, vsn);
  return dup_str(buf);
}

/* Make `src` the current version of m (the current one becomes old; after a delete,
** when there is none, the old one stays). */
static int set_current(lcode_mod *m, const char *src, size_t len, int binary) {
  lcode_ver v = {.vsn = m->last + 1, .src = malloc(len ? len : 1), .len = len,
                 .binary = binary};
  v.chunk = chunk_name(m->name, m->path, v.vsn);
  if (!v.src || !v.chunk) {
    ver_free(&v);
    return -1;
  }
  memcpy(v.src, src, len);
  m->last = v.vsn;
  if (m->cur.vsn) {
    ver_free(&m->old);
    m->old = m->cur;
  }
  m->cur = v;
  atomic_fetch_add(&gen, 1);
  return 0;
}

static void stat_into(lcode_mod *m) {
  struct stat st;
  if (m->path && stat(m->path, &st) == 0) {
    m->mtime = st.st_mtim;
    m->size = (long long)st.st_size;
  }
}

/* A copy of a version, taken under the lock, used without it: its bytecode if kept,
** else its source. */
typedef struct snap {
  int vsn, is_code, binary;
  char *src, *chunk, *path, *name;
  size_t len;
} snap;

static void snap_free(snap *s) {
  free(s->src);
  free(s->chunk);
  free(s->path);
  free(s->name);
  memset(s, 0, sizeof *s);
}

static int snap_take(lcode_mod *m, snap *s) {
  memset(s, 0, sizeof *s);
  if (!m || !m->cur.vsn) return 0;
  s->vsn = m->cur.vsn;
  s->is_code = m->cur.code != NULL;
  s->binary = m->cur.binary;
  s->len = s->is_code ? m->cur.code_len : m->cur.len;
  s->src = malloc(s->len ? s->len : 1);
  s->chunk = dup_str(m->cur.chunk);
  s->path = dup_str(m->path);
  s->name = dup_str(m->name);
  if (!s->src || !s->chunk || !s->name || (m->path && !s->path)) {
    snap_free(s);
    return -1;
  }
  memcpy(s->src, s->is_code ? m->cur.code : m->cur.src, s->len);
  return 1;
}

/* Keep the bytecode of the function on top (left there) as version vsn of `name`,
** if that is still the current version and there is room. */
static void keep_code(lua_State *L, const char *name, int vsn) {
  size_t len;
  char *code = lproc_dump_top(L, &len);
  if (!code) return;
  pthread_mutex_lock(&mu);
  lcode_mod *m = find(name);
  if (m && m->cur.vsn == vsn && !m->cur.code && code_bytes + len <= LCODE_MAX_BYTES) {
    m->cur.code = code;
    m->cur.code_len = len;
    code_bytes += len;
    code = NULL;
  }
  pthread_mutex_unlock(&mu);
  free(code);
}

/* ---- reading a file ---------------------------------------------------------------------- */

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    char *b = realloc(buf, cap * 2);
    if (!b) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = b;
    cap *= 2;
  }
  if (buf && ferror(f)) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *len = n;
  return buf;
}

/* ---- in a process: require and the safe point --------------------------------------------- */

/* The process's table of required versions (made on first use). */
static void push_vers(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &vers_key) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_createtable(L, 0, 4);   /* a behaviour process requires about that many */
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &vers_key);
  lproc *p = lproc_of(L);
  if (p && !p->helper) {   /* the safe point runs updates on it */
    p->helper = lua_newthread(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &helper_key);
  }
}

/* Load a snapshot: pushes the chunk, or the compiler's message and returns nonzero.
** A version loaded from its source leaves its bytecode for the next process. */
static int load_snap(lua_State *L, const snap *s) {
  if (s->is_code) return luaL_loadbufferx(L, s->src, s->len, s->chunk, "b");
  int st = luaL_loadbufferx(L, s->src, s->len, s->chunk, s->binary ? NULL : "t");
  if (st == LUA_OK) keep_code(L, s->name, s->vsn);
  return st;
}

/* package.searchers entry: (name) -> loader, path | nil. */
static int lcode_searcher(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  snap s;
  pthread_mutex_lock(&mu);
  int have = snap_take(find(name), &s);
  pthread_mutex_unlock(&mu);
  if (have < 0) return luaL_error(L, "not enough memory");
  if (!have) {
    /* package.searchpath(name, package.path); upvalue 1 is the package table */
    lua_getfield(L, lua_upvalueindex(1), "searchpath");
    lua_pushvalue(L, 1);
    lua_getfield(L, lua_upvalueindex(1), "path");
    if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "'package.path' must be a string");
    lua_call(L, 2, 2);
    if (lua_isnil(L, -2)) return 1;   /* the "no file ..." message */
    lua_pop(L, 1);
    const char *path = lua_tostring(L, -1);
    size_t len;
    char *src = read_file(path, &len);
    if (!src) return 0;
    /* a file that does not compile is not registered: fixed, it loads next time */
    lua_pushfstring(L, "@%s", path);
    int st = luaL_loadbufferx(L, src, len, lua_tostring(L, -1), NULL);
    if (st != LUA_OK) {
      free(src);
      return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s", name, path,
                        lua_tostring(L, -1));
    }
    lua_remove(L, -2);   /* the chunk, named as version 1 is: kept if we register it */
    pthread_mutex_lock(&mu);
    lcode_mod *m = find(name);
    int ours = 0;
    if (!m && (m = calloc(1, sizeof *m)) != NULL) {
      ours = 1;
      m->name = dup_str(name);
      m->path = dup_str(path);
      if (!m->name || !m->path || set_current(m, src, len, 1) != 0) {
        free(m->name), free(m->path), free(m);
        m = NULL;
      } else {
        stat_into(m);
        m->next = mods;
        mods = m;
      }
    } else if (m && !m->cur.vsn) {   /* deleted (code.delete): loaded again, as Erlang's
                                     ** interactive mode loads a module on its next call */
      char *np = dup_str(path);
      if (np) {
        free(m->path);
        m->path = np;   /* the new version's chunk name says where it came from */
        if (set_current(m, src, len, 1) == 0) stat_into(m);
      }
    }
    have = snap_take(m, &s);   /* ours, or what another process registered first */
    pthread_mutex_unlock(&mu);
    free(src);
    if (have <= 0) return luaL_error(L, "not enough memory");
    if (ours && s.vsn == 1 && !s.is_code) {
      keep_code(L, name, 1);   /* our compile is version 1: no second one */
      s.is_code = -1;
    } else {
      lua_pop(L, 1);
    }
  }
  push_vers(L);
  lua_pushinteger(L, s.vsn);
  lua_setfield(L, -2, name);
  lua_pop(L, 1);
  int st = s.is_code == -1 ? LUA_OK : load_snap(L, &s);
  if (s.path) lua_pushstring(L, s.path);
  else lua_pushstring(L, name);
  snap_free(&s);
  if (st != LUA_OK) {
    lua_pop(L, 1);
    return lua_error(L);
  }
  return 2;
}

/* require(name) before the package library is open (llibs.c's light require; stack:
** 1 name, 2 package.loaded): a module the code server holds as bytecode is loaded and
** run as require would through this searcher -- the version noted, the chunk called
** with (name, path), package.loaded[name] set to its result or true -- without
** opening the package library (its searchers, paths and preloads cost a process more
** than loading a small module). Returns 2 (module, path) or 0 when the code server
** does not hold the module's bytecode yet: the caller opens package and requires. */
int lcode_require(lua_State *L, const char *name) {
  snap s;
  pthread_mutex_lock(&mu);
  lcode_mod *m = find(name);
  int have = m && m->cur.code ? snap_take(m, &s) : 0;
  pthread_mutex_unlock(&mu);
  if (have <= 0) return 0;   /* not held (or no memory: require says so) */
  push_vers(L);
  lua_pushinteger(L, s.vsn);
  lua_setfield(L, -2, name);
  lua_pop(L, 1);
  int st = load_snap(L, &s);
  if (st == LUA_OK) {
    lua_pushvalue(L, 1);
    if (s.path) lua_pushstring(L, s.path);
    else lua_pushstring(L, name);
  }
  snap_free(&s);
  if (st != LUA_OK) return lua_error(L);
  lua_pushvalue(L, -1);
  lua_insert(L, -4);         /* path, chunk, name, path */
  lua_call(L, 2, 1);
  if (!lua_isnil(L, -1)) lua_setfield(L, 2, name);
  else lua_pop(L, 1);
  if (lua_getfield(L, 2, name) == LUA_TNIL) {   /* as require: true for no value */
    lua_pop(L, 1);
    lua_pushboolean(L, 1);
    lua_pushvalue(L, -1);
    lua_setfield(L, 2, name);
  }
  lua_insert(L, -2);         /* module, path */
  return 2;
}

/* The new version's table replaces the old one's contents in place: its fields are
** set, and functions the new version no longer has are removed (data stays). */
static void update_table(lua_State *L, int old, int neu) {
  lua_pushnil(L);
  while (lua_next(L, old)) {
    lua_pushvalue(L, -2);
    int gone = lua_rawget(L, neu) == LUA_TNIL && lua_type(L, -2) == LUA_TFUNCTION;
    lua_pop(L, 2);
    if (gone) {
      lua_pushvalue(L, -1);
      lua_pushnil(L);
      lua_rawset(L, old);   /* assigning nil to an existing field: next still works */
    }
  }
  lua_pushnil(L);
  while (lua_next(L, neu)) {
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, old);
  }
}

/* (name, snap*) in the process: run the new chunk and install its result. */
static int update_cf(lua_State *L) {
  const char *name = lua_tostring(L, 1);
  const snap *s = lua_touserdata(L, 2);
  if (load_snap(L, s) != LUA_OK) return lua_error(L);
  lua_pushvalue(L, 1);
  lua_pushstring(L, s->path ? s->path : name);
  lua_call(L, 2, 1);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_pushboolean(L, 1);
  }
  int neu = lua_gettop(L);
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(L, -1, name);
  if (lua_type(L, -1) == LUA_TTABLE && lua_type(L, neu) == LUA_TTABLE) {
    update_table(L, lua_gettop(L), neu);
  } else {
    lua_pushvalue(L, neu);
    lua_setfield(L, -3, name);
  }
  return 0;
}

/* Bring every module this process required to its current version. */
static int sync_cf(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &vers_key) != LUA_TTABLE) return 0;
  int vers = lua_gettop(L);
  lua_newtable(L);   /* names first: the loop below changes `vers` */
  int names = vers + 1, n = 0;
  lua_pushnil(L);
  while (lua_next(L, vers)) {
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_rawseti(L, names, ++n);
  }
  for (int i = 1; i <= n; i++) {
    lua_rawgeti(L, names, i);
    const char *name = lua_tostring(L, -1);
    lua_getfield(L, vers, name);
    int have = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    snap s;
    pthread_mutex_lock(&mu);
    int ok = snap_take(find(name), &s);
    pthread_mutex_unlock(&mu);
    if (ok > 0 && s.vsn != have) {
      lua_pushinteger(L, s.vsn);
      lua_setfield(L, vers, name);   /* a failed update is not retried */
      lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
      int loaded = lua_getfield(L, -1, name) != LUA_TNIL;
      lua_pop(L, 2);
      if (loaded) {
        lua_pushcfunction(L, update_cf);
        lua_pushvalue(L, -2);
        lua_pushlightuserdata(L, &s);
        if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
          lproc *p = lproc_of(L);
          lpvm_id id = p ? p->task.id : 0;
          fprintf(stderr, "lpvm: process <0.%u.%u> keeps the old '%s': %s\n",
                  (unsigned)(uint32_t)id, (unsigned)((id >> 32) & 0x7fffffff), name,
                  lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "error");
          lua_pop(L, 1);
        }
      }
    }
    if (ok > 0) snap_free(&s);
    lua_pop(L, 1);
  }
  return 0;
}

void lcode_safe_point(lproc *p) {
  uint64_t g = atomic_load_explicit(&gen, memory_order_acquire);
  if (p->code_gen == g) return;
  lua_State *T = p->helper;
  if (T && lua_status(T) == LUA_OK && lua_gettop(T) == 0 && lua_checkstack(T, 4)) {
    lua_pushcfunction(T, sync_cf);
    if (lua_pcall(T, 0, 0, 0) != LUA_OK) {   /* out of memory: try again next time */
      lua_settop(T, 0);
      return;
    }
  }
  p->code_gen = g;
}

/* ---- old code on a process's stack (its info reply) --------------------------------------- */

int lcode_info(lproc *p, lpvm_tbuf *map) {
  lpvm_put_atom(map, "old_code");
  const char *hits[64];
  int nh = 0;
  lua_State *L = p->L;
  lua_Debug ar;
  pthread_mutex_lock(&mu);
  for (int level = 0; L && !p->closing && lua_getstack(L, level, &ar); level++) {
    if (!lua_getinfo(L, "S", &ar) || !ar.source) continue;
    for (lcode_mod *m = mods; m; m = m->next) {
      if (!m->old.vsn || strcmp(m->old.chunk, ar.source) != 0) continue;
      int seen = 0;
      for (int i = 0; i < nh; i++) seen |= hits[i] == m->name;
      if (!seen && nh < 64) hits[nh++] = m->name;
    }
  }
  lpvm_put_list(map, (uint32_t)nh);
  for (int i = 0; i < nh; i++) lpvm_put_binary(map, hits[i], strlen(hits[i]));
  lpvm_put_nil(map);
  pthread_mutex_unlock(&mu);
  return 1;
}

/* ---- the Lua face: require "lpvm.codeserver" (used by vm/lib/lpvm/code.lua) -------------- */

/* load(name, source [, path [, from_file [, binary]]]) -> version | nil, "not_purged".
** The caller compiled the source already (in the mode it allows): a syntax error never
** gets here. A version may be bytecode if it came from a file (as require's) or the
** caller allowed it (binary); else every later load of it is text only. */
static int cs_load(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  size_t len;
  const char *src = luaL_checklstring(L, 2, &len);
  const char *path = luaL_optstring(L, 3, NULL);
  int from_file = lua_toboolean(L, 4);
  int binary = from_file || lua_toboolean(L, 5);
  pthread_mutex_lock(&mu);
  lcode_mod *m = find(name);
  int rc = 0;
  if (m && m->old.vsn) {
    rc = 1;
  } else {
    if (!m && (m = calloc(1, sizeof *m)) != NULL) {
      m->name = dup_str(name);
      if (!m->name) free(m), m = NULL;
      else m->next = mods, mods = m;
    }
    if (m && path && (!m->path || strcmp(m->path, path) != 0)) {
      char *np = dup_str(path);
      if (np) free(m->path), m->path = np;
    }
    if (!m || set_current(m, src, len, binary) != 0) rc = -1;
    else if (from_file) stat_into(m);
  }
  int vsn = m ? m->cur.vsn : 0;
  pthread_mutex_unlock(&mu);
  if (rc < 0) return luaL_error(L, "not enough memory");
  if (rc > 0) {
    lua_pushnil(L);
    lua_pushliteral(L, "not_purged");
    return 2;
  }
  lua_pushinteger(L, vsn);
  return 1;
}

/* info(name) -> {version=, old_version=, path=} | nil */
static int cs_info(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  pthread_mutex_lock(&mu);
  lcode_mod *m = find(name);
  int vsn = m ? m->cur.vsn : 0, old = m ? m->old.vsn : 0;
  char *path = m ? dup_str(m->path) : NULL;
  pthread_mutex_unlock(&mu);
  if (!m || (!vsn && !old)) {
    free(path);
    return 0;
  }
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, vsn);
  lua_setfield(L, -2, "version");
  lua_pushinteger(L, old);
  lua_setfield(L, -2, "old_version");
  lua_pushstring(L, path);
  free(path);
  lua_setfield(L, -2, "path");
  return 1;
}

/* names() -> every module with a current or old version */
static int cs_names(lua_State *L) {
  lua_newtable(L);
  int n = 0;
  for (;;) {   /* copy one name at a time: pushing may raise, never under mu */
    char *name = NULL;
    pthread_mutex_lock(&mu);
    int i = 0;
    for (lcode_mod *m = mods; m; m = m->next)
      if ((m->cur.vsn || m->old.vsn) && i++ == n) {
        name = dup_str(m->name);
        break;
      }
    pthread_mutex_unlock(&mu);
    if (!name) break;
    lua_pushstring(L, name);
    free(name);
    lua_rawseti(L, -2, ++n);
  }
  return 1;
}

/* modified(name) -> true when the module's file changed since it was read */
static int cs_modified(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  pthread_mutex_lock(&mu);
  lcode_mod *m = find(name);
  int changed = 0;
  struct stat st;
  if (m && m->path && m->cur.vsn) {
    if (stat(m->path, &st) != 0) changed = 1;   /* deleted counts as changed */
    else changed = st.st_mtim.tv_sec != m->mtime.tv_sec ||
                   st.st_mtim.tv_nsec != m->mtime.tv_nsec || (long long)st.st_size != m->size;
  }
  pthread_mutex_unlock(&mu);
  lua_pushboolean(L, changed);
  return 1;
}

/* drop_old(name) -> true if there was an old version */
static int cs_drop_old(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  pthread_mutex_lock(&mu);
  lcode_mod *m = find(name);
  int had = m && m->old.vsn;
  if (had) ver_free(&m->old);
  pthread_mutex_unlock(&mu);
  lua_pushboolean(L, had);
  return 1;
}

/* delete(name): the current version becomes old (Erlang's code:delete); false if an
** old version is still there or there is no current one. */
static int cs_delete(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  pthread_mutex_lock(&mu);
  lcode_mod *m = find(name);
  int ok = m && m->cur.vsn && !m->old.vsn;
  if (ok) {
    m->old = m->cur;
    memset(&m->cur, 0, sizeof m->cur);
    atomic_fetch_add(&gen, 1);
  }
  pthread_mutex_unlock(&mu);
  lua_pushboolean(L, ok);
  return 1;
}

/* sync(): the caller's own modules now (its safe point is the call itself). */
static int cs_sync(lua_State *L) {
  lua_pushcfunction(L, sync_cf);
  lua_call(L, 0, 0);
  lproc *p = lproc_of(L);
  if (p) p->code_gen = atomic_load(&gen);
  return 0;
}

/* required(name) -> the version this process required, or nil */
static int cs_required(lua_State *L) {
  luaL_checkstring(L, 1);
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &vers_key) != LUA_TTABLE) return 0;
  lua_getfield(L, -1, lua_tostring(L, 1));
  return 1;
}

/* ask_info(pid) -> ref: the {info, Ref, Map} reply comes as a message (purge asks
** every process at once instead of one lpvm.info round trip after another). */
static int cs_ask_info(lua_State *L) {
  lproc *p = lproc_check(L);
  uint64_t ref;
  if (lpvm_request_info(&p->task, lmod_check_pid(L, 1), &ref) != 0) return 0;
  lmod_push_ref(L, ref);
  return 1;
}

static const luaL_Reg cs_fns[] = {
    {"ask_info", cs_ask_info},
    {"load", cs_load},         {"info", cs_info},       {"names", cs_names},
    {"modified", cs_modified}, {"drop_old", cs_drop_old}, {"delete", cs_delete},
    {"sync", cs_sync},         {"required", cs_required}, {NULL, NULL}};

int lcode_open(lua_State *L) {
  luaL_newlib(L, cs_fns);
  return 1;
}

void lcode_install(lua_State *L, int package) {
  package = lua_absindex(L, package);
  if (lua_getfield(L, package, "searchers") == LUA_TTABLE) {
    lua_pushvalue(L, package);
    lua_pushcclosure(L, lcode_searcher, 1);
    lua_rawseti(L, -2, 2);   /* in place of Lua's file searcher */
  }
  lua_pop(L, 1);
  if (lua_getfield(L, package, "preload") == LUA_TTABLE) {
    lua_pushcfunction(L, lcode_open);
    lua_setfield(L, -2, "lpvm.codeserver");
    lua_pushcfunction(L, leval_open);
    lua_setfield(L, -2, "lpvm.evalserver");
  }
  lua_pop(L, 1);
}

void lcode_teardown(void) {
  pthread_mutex_lock(&mu);
  while (mods) {
    lcode_mod *m = mods;
    mods = m->next;
    ver_free(&m->cur);
    ver_free(&m->old);
    free(m->name);
    free(m->path);
    free(m);
  }
  pthread_mutex_unlock(&mu);
}
