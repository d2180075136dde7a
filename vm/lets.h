/*
** lets.h -- the fast paths of `require "ets"` (vm/lmod_ets.c): Lua values of the common
** shapes encoded straight into a caller's array, objects rebuilt straight into Lua
** tables, and named tables resolved through a per-process cache (docs/ets.md,
** "Performance").
*/
#ifndef LPVM_LETS_H
#define LPVM_LETS_H

#include <lauxlib.h>
#include <lua.h>
#include <stddef.h>
#include <stdint.h>

#include "lpvm/ets.h"
#include "lpvm/term.h"
#include "vm/lraw.h"

/* Room for a key or an object on the fast paths; what does not fit takes the
** general path (lterm.c). */
#define LETS_KEYBUF 128
#define LETS_OBJBUF 512

/* A scalar (nil, boolean, integer, float, string) as a term, version byte first,
** exactly as lterm_put_plain writes it: its length, or 0 when the value is of
** another type or does not fit in cap bytes. */
size_t lets_scalar(lua_State *L, int idx, uint8_t *buf, size_t cap);
/* The integer v as a term (version byte first), as lets_scalar writes it when it is
** within 32 bits: its length, or 0 (outside them, or cap < 6: lets_scalar's way). */
static inline size_t lets_int_term(uint8_t *buf, size_t cap, lua_Integer v) {
  if (cap < 6) return 0;
  buf[0] = 131;   /* VERSION */
  if (v >= 0 && v <= 255) {
    buf[1] = 97;   /* SMALL_INTEGER_EXT */
    buf[2] = (uint8_t)v;
    return 3;
  }
  if (v < INT32_MIN || v > INT32_MAX) return 0;
  uint32_t u = (uint32_t)v;
  buf[1] = 98;   /* INTEGER_EXT, big-endian */
  buf[2] = (uint8_t)(u >> 24), buf[3] = (uint8_t)(u >> 16);
  buf[4] = (uint8_t)(u >> 8), buf[5] = (uint8_t)u;
  return 6;
}
/* The Lua array at idx, all of whose elements are scalars, as a tuple (version byte
** first): its length, or 0 (another shape, or too big: use the general encoder). */
size_t lets_object(lua_State *L, int idx, uint8_t *buf, size_t cap);
/* The usual object, a Lua array of integers ({k, v}, a counter's row) held in its
** array part alone (no hash part, no length search pending, its last slot not nil:
** its length is alimit, as luaH_getn answers), copied into v (cap of them at most)
** for lpvm_ets_insert_ints: how many, or 0 for anything else (lets_object's way
** then). Inline in an insert, with lraw_ok() already asked by the caller. */
static inline size_t lets_int_row(const lraw_table *t, int64_t *v, size_t cap) {
  unsigned n = t->alimit;
  if ((t->flags & LRAW_BITRAS) || t->lastfree || n == 0 || n > cap ||
      lraw_is_nil(&t->array[n - 1]))
    return 0;
  const lraw_tvalue *a = t->array;
  if (n == 2) {   /* {k, v}: no loop */
    if (a[0].tt != LRAW_VNUMINT || a[1].tt != LRAW_VNUMINT) return 0;
    v[0] = a[0].v.i, v[1] = a[1].v.i;
    return 2;
  }
  for (unsigned i = 0; i < n; i++) {
    if (a[i].tt != LRAW_VNUMINT) return 0;
    v[i] = a[i].v.i;
  }
  return n;
}
/* Push n tuples lying back to back in [p, p + len) (no version byte) as a Lua
** array of arrays, each made with its exact size. Raises on a malformed term. Uses 3
** stack slots without asking: call it with LUA_MINSTACK's slots free (as a C
** function is called). */
void lets_push_objects(lua_State *L, const uint8_t *p, size_t len, int n);
/* Push lpvm_ets_lookup_ints's answer as lookup's list: {} for m 0, else {{v[0], ...,
** v[m - 1]}}, each table of its exact size. The same slots and rule as
** lets_push_objects. */
void lets_push_ints(lua_State *L, const int64_t *v, int m);
/* The same, with the mirror already trusted (lraw_ok() said so). */
void lets_push_ints_raw(lua_State *L, const int64_t *v, int m);
/* Push a whole term (version byte first) that is a list, as lterm.c would, with
** tuples, lists and scalars decoded here: 1, or 0 (nothing pushed) for another
** term. Raises on a malformed term. */
int lets_push_list(lua_State *L, const uint8_t *p, size_t len);
/* Push one term (version byte first) whose value is a scalar; 0 (nothing pushed)
** when it is not one. */
int lets_push_scalar(lua_State *L, const uint8_t *p, size_t len);

/* One value by the general encoder (lterm_put_plain), raising an error that names
** argument arg when it cannot be a term. */
void lets_put_value(lua_State *L, int idx, lpvm_tbuf *b, int arg);

/* lets_ms.c: the match specification at idx ({ {head, guards, body}, ... }) as
** Erlang's term; or one clause {pattern, [], [body]} (body: "$$", "$_", "true"). */
void lets_put_ms(lua_State *L, int idx, lpvm_tbuf *b, int arg);
/* The same for select_replace: a body's last table is the new object, a tuple. */
void lets_put_ms_replace(lua_State *L, int idx, lpvm_tbuf *b, int arg);
void lets_put_pattern_ms(lua_State *L, int idx, lpvm_tbuf *b, const char *body);

/* lets_select.c: select/match/match_object with a limit (the argument limit_arg; 0:
** none, select_reverse's list alone) and select_reverse, the first chunk, ms the
** encoded specification: pushes the results and a continuation, or nil. */
int lets_select_first(lua_State *L, lpvm_task *self, lpvm_tab tab, const lpvm_tbuf *ms,
                      int limit_arg, int reverse, lpvm_tbuf *out);
/* The next chunk of the continuation at argument 1: its results and a new one, or nil. */
int lets_select_next(lua_State *L, lpvm_task *self, lpvm_tbuf *out);
/* The table named by the string at arg, through the process's cache (upvalue 1 of
** every function of the module): 0 when there is none. A cached id is forgotten as
** soon as any table name changes (lpvm_ets_names_epoch), so a renamed or deleted table
** is never reached by its old name. */
lpvm_tab lets_by_name(lua_State *L, int arg);
/* The cache itself, made when the module is opened. */
void lets_new_cache(lua_State *L);

/* lmod_ets.c's helpers for the module's other files (lets_admin.c, lets_select.c),
** each called inside one of the module's functions (check_tab reads its upvalues):
** the thread's output builder, the input scratch, a term decoded as one Lua value,
** an ETS error raised as ETS's badarg naming arg, the calling process, a table
** argument, an optional term argument (NULL when nil), a Lua array as a tuple. */
lpvm_tbuf *lets_out(lua_State *L);
lpvm_tbuf *lets_in(lua_State *L);
void lets_push_term(lua_State *L, lpvm_tbuf *b);
int lets_fail(lua_State *L, int rc, int arg);
lpvm_task *lets_self(lua_State *L);
lpvm_tab lets_check_tab(lua_State *L, int arg);
lpvm_tbuf *lets_opt_term(lua_State *L, int idx, int arg);
void lets_put_object(lua_State *L, int idx, lpvm_tbuf *b, int arg);
/* The functions of lets_admin.c (new, info, ...) and lets_select.c (select, match, ...). */
extern const luaL_Reg lets_admin_fns[];
extern const luaL_Reg lets_ms_fns[];

#endif
