/*
** lembed.c -- the embedding API of include/lpvm/lpvm_lua.h, over the Lua process
** layer (lproc.c, lboot.c, lsys.c). Only this header is installed for embedders:
** the lproc_* names stay free to change.
*/
#include <string.h>

#include "lpvm/lpvm_lua.h"
#include "lpvm/term.h"
#include "vm/lproc.h"
#include "vm/lproc_int.h"

void lpvm_lua_config_init(lpvm_lua_config *c) {
  if (!c) return;
  memset(c, 0, sizeof *c);
  c->recycle = LPROC_DEFAULT_RECYCLE;
}

int lpvm_lua_setup(const lpvm_lua_config *c) {
  lproc_config pc;
  lproc_config_init(&pc);
  if (c) {
    pc.threads = c->threads;
    pc.reductions = c->reductions;
    pc.max_heap = c->max_heap;
    pc.recycle = c->recycle;
    pc.warnings = c->warnings;
    pc.noenv = c->noenv;
    pc.no_remote_code = c->no_remote_code;
  }
  return lproc_setup(&pc);
}

int lpvm_lua_boot(const char *script, const char *code, int argc, char **argv,
                  lpvm_id *pid, char **errmsg) {
  return lproc_boot(script, code, argc, argv, pid, errmsg);
}

int lpvm_lua_spawn(const char *module, const uint8_t *args, size_t len, lpvm_id *pid) {
  if (!module || !*module || (len > 0 && !args)) return LPVM_EINVAL;
  if (len > 0 && lpvm_term_check(args, len) != 0) return LPVM_EBADTERM;
  lpvm_tbuf up, a;
  lpvm_tbuf_init(&up);
  lpvm_put_tuple(&up, 0);   /* a module has no upvalues */
  lpvm_tbuf_init(&a);
  if (len == 0) lpvm_put_tuple(&a, 0);
  lpvm_tbuf view = {(uint8_t *)args, len, len, 0};
  lproc_start *s = up.err || a.err ? NULL
                 : lproc_start_new(LS_MODULE, module, strlen(module), &up, len ? &view : &a);
  lpvm_tbuf_free(&up);
  lpvm_tbuf_free(&a);
  if (!s) return LPVM_ENOMEM;
  s->max_heap = lproc_cfg.max_heap;
  lpvm_spawn_opts o = LPVM_SPAWN_OPTS_INIT;
  o.thread = lproc_cfg.threads ? 1 : 0;
  lpvm_id id = 0;
  int rc = lproc_spawn(NULL, s, &o, &id);
  if (rc == 0 && pid) *pid = id;
  return rc;
}

int lpvm_lua_boot_ok(void) { return lproc_boot_ok(); }

int lpvm_lua_stop(void) {
  lsys_stop_children(2000);
  int rc = lpvm_stop();
  lsys_stopped();
  lproc_teardown();
  return rc;
}
