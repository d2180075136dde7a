/*
** embed_test.c -- an application that embeds lpvm, built against an installed lpvm
** with pkg-config only (tests/install_test.sh):
**
**   cc embed_test.c $(pkg-config --cflags --libs lpvm)
**
** It starts the VM, runs a Lua boot chunk (an accumulator), sends
** it a term from C, spawns a Lua process from the module embed_worker.lua (found on
** package.path: run it from this folder) with arguments given as a term, and waits:
** the accumulator halts the VM with the sum as the code. Exit status 0 when every
** check passed.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lpvm/lpvm_lua.h>
#include <lpvm/term.h>

static int failed;

static void check(int ok, const char *what) {
  printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) failed = 1;
}

static const char acc_code[] =
    "local sum = 0\n"
    "while true do\n"
    "  local tag, v = lpvm.receive(60000)\n"   /* every wait has a way out */
    "  if tag == nil then print('lua: no message in 60 s') lpvm.halt(1) end\n"
    "  if tag == 'add' then sum = sum + v\n"
    "  elseif tag == 'stop' then print('lua: sum', sum) io.stdout:flush() lpvm.halt(sum) end\n"
    "end\n";

int main(void) {
  check(lpvm_start(NULL) == 0, "lpvm_start");
  lpvm_lua_config cfg;
  lpvm_lua_config_init(&cfg);
  cfg.max_heap = 64u << 20;
  check(lpvm_lua_setup(&cfg) == 0, "lpvm_lua_setup");

  char *err = NULL;
  lpvm_id pid = 0;
  check(lpvm_lua_boot(NULL, "x = = 1", 0, NULL, &pid, &err) < 0 && err && strstr(err, "unexpected"),
        "a chunk that does not compile is reported, nothing runs");
  free(err);
  err = NULL;
  check(lpvm_lua_spawn("", NULL, 0, &pid) == LPVM_EINVAL, "lpvm_lua_spawn(\"\") is EINVAL");
  const uint8_t junk[] = {131, 104, 9};
  check(lpvm_lua_spawn("embed_worker", junk, sizeof junk, &pid) == LPVM_EBADTERM,
        "a malformed argument term is EBADTERM");

  lpvm_id acc = 0;
  char *argv[] = {"embed_test"};
  int rc = lpvm_lua_boot(NULL, acc_code, 1, argv, &acc, &err);
  check(rc == 0 && acc != 0, "lpvm_lua_boot runs the accumulator");
  if (rc != 0) fprintf(stderr, "%s\n", err ? err : lpvm_strerror(rc));
  /* named from C before the worker can send to the name (the process itself may not
  ** have run yet) */
  check(lpvm_register("acc", acc) == 0, "lpvm_register names the accumulator");

  /* {<<"add">>, 100}: Lua gets the values "add", 100 */
  lpvm_tbuf b;
  lpvm_tbuf_init(&b);
  lpvm_put_tuple(&b, 2);
  lpvm_put_binary(&b, "add", 3);
  lpvm_put_int(&b, 100);
  check(!b.err && lpvm_send(NULL, acc, b.data, b.len) == 0, "lpvm_send a term from C");

  /* the worker module with arguments (10, acc's pid): it sends 1..10 then stop (a
  ** pid, not the name: the accumulator may not have run, and registered, yet) */
  lpvm_tbuf_reset(&b);
  lpvm_put_tuple(&b, 2);
  lpvm_put_int(&b, 10);
  lpvm_put_pid(&b, acc);
  lpvm_id w = 0;
  check(lpvm_lua_spawn("embed_worker", b.data, b.len, &w) == 0 && w != 0,
        "lpvm_lua_spawn runs a Lua module with arguments");
  lpvm_tbuf_free(&b);

  int code = lpvm_wait();
  check(code == 155, "the Lua side summed 100 + 1..10 and halted with 155");
  check(lpvm_lua_stop() == 0, "lpvm_lua_stop");

  /* and again: the VM can be started a second time in the same program */
  check(lpvm_start(NULL) == 0 && lpvm_lua_setup(NULL) == 0, "restart");
  check(lpvm_lua_boot(NULL, "lpvm.halt(7)", 0, NULL, &pid, NULL) == 0, "boot again");
  check(lpvm_wait() == 7, "halt code 7");
  check(lpvm_lua_stop() == 0, "stop again");
  return failed;
}
