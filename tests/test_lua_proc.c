/*
** test_lua_proc.c -- Lua processes end to end: each test boots a chunk that checks
** itself with assert() and halts the VM with 0 when every check passed.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lpvm/lpvm.h"
#include "vm/lproc.h"

/* Run `body` as the boot process (wrapped so a failure halts with 1). */
static int run_lua_cfg(const char *body, const lproc_config *lc) {
  lpvm_config c;
  lpvm_config_init(&c);
  c.workers = 2;
  cr_assert_eq(lpvm_start(&c), 0);
  cr_assert_eq(lproc_setup(lc), 0);
  size_t n = strlen(body) + 512;
  char *code = malloc(n);
  snprintf(code, n,
           "local ok, e = xpcall(function() %s\nend, debug.traceback)\n"
           "if not ok then io.stderr:write('FAIL: ', tostring(e), '\\n') end\n"
           "lpvm.halt(ok and 0 or 1)",
           body);
  char *err = NULL;
  lpvm_id id;
  int rc = lproc_boot(NULL, code, 0, NULL, &id, &err);
  free(code);
  if (rc != 0) {
    fprintf(stderr, "boot: %s\n", err ? err : "?");
    free(err);
    lpvm_stop();
    lproc_teardown();
    return -1;
  }
  int halt = lpvm_wait();
  lpvm_stop();
  lproc_teardown();
  return halt;
}

static int run_lua(const char *body) {
  lproc_config lc;
  lproc_config_init(&lc);
  return run_lua_cfg(body, &lc);
}

#define LUA_OK_(body) cr_assert_eq(run_lua(body), 0)

Test(lua_proc, stdlibs_lazy) {
  LUA_OK_("assert(('x'):upper() == 'X'); assert(math.floor(2.5) == 2);"
          "local t = {}; table.insert(t, 1); assert(#t == 1);"
          "assert(type(os.time()) == 'number'); assert(('10' + 1) == 11);"
          "assert(utf8.char(72) == 'H'); assert(type(io.write) == 'function');"
          "assert(require('string') == string); assert(require('lpvm') == lpvm);"
          "assert(_G._G == _G); assert(_VERSION == 'Lua 5.4');"
          "local co = coroutine.wrap(function() coroutine.yield(1) return 2 end);"
          "assert(co() == 1 and co() == 2); assert(debug.traceback)");
}

Test(lua_proc, messages_and_mapping) {
  LUA_OK_("local L, me = lpvm, lpvm.self();"
          "L.send(me, {1,2,3}, {x=1, y={true,false}}, 1.5, 'bin\\0ary', nil, {}, math.maxinteger);"
          "local a, b, c, d, e, f, g = L.receive();"
          "assert(#a == 3 and a[3] == 3 and b.x == 1 and b.y[1] == true and b.y[2] == false);"
          "assert(c == 1.5 and math.type(c) == 'float' and d == 'bin\\0ary' and e == nil);"
          "assert(next(f) == nil and g == math.maxinteger);"
          "L.send(me, 'one'); assert(select('#', L.receive()) == 1);"
          "local t = {[me] = 1}; L.send(me, me); assert(t[L.receive()] == 1);"
          "assert(tostring(me):match('^<0%.%d+%.%d+>$'));"
          "local cyc = {}; cyc.self = cyc; local ok, err = pcall(L.send, me, cyc);"
          "assert(not ok and err:find('cyclic'));"
          "ok, err = pcall(L.send, me, {f = io.stdout}); assert(not ok and err:find('userdata'));"
          "ok, err = pcall(L.send, me, coroutine.create(print)); assert(not ok and err:find('thread'));"
          "assert(L.receive(0) == nil);"
          "assert(L.send(L.spawn(function() end), 1) == true);"
          "ok, err = pcall(L.send, 'nobody_here', 1); assert(not ok and err:find('registered'))");
}

Test(lua_proc, selective_receive) {
  LUA_OK_("local L, me = lpvm, lpvm.self();"
          "for i = 1, 5 do L.send(me, 'n', i) end; L.send(me, 'x', 0);"
          "local t, v = L.receive(function(tag) return tag == 'x' end); assert(t == 'x');"
          "for i = 1, 5 do local _, k = L.receive(); assert(k == i) end;"
          "local r, why = L.receive(function() return false end, 20); assert(r == nil and why == 'timeout');"
          "L.send(me, 1); local ok, err = pcall(L.receive, function() error('pred!') end);"
          "assert(not ok and err:find('pred!')); assert(L.receive(0) == 1);"
          "L.send(me, 2); ok, err = pcall(L.receive, function() return L.receive(0) end);"
          "assert(not ok and err:find('predicate')); assert(L.receive(0) == 2);"
          /* a late message wakes a selective receive that rejected earlier ones */
          "for i = 1, 100 do L.send(me, 'junk') end;"
          "L.send_after(20, me, 'wanted');"
          "assert(L.receive(function(m) return m == 'wanted' end, 2000) == 'wanted');"
          "local n = 0; while L.receive(0) do n = n + 1 end; assert(n == 100)");
}

Test(lua_proc, spawn_upvalues_and_args) {
  LUA_OK_("local L, me = lpvm, lpvm.self(); local up, x = {k='v'}, 10;"
          "local insert, lp = table.insert, require('lpvm');"
          "L.spawn(function(parent, a) local t = {}; insert(t, a); lp.send(parent, up.k, x, t[1]) end, me, 'arg');"
          "local k, v, a = L.receive(2000); assert(k == 'v' and v == 10 and a == 'arg');"
          "local co = coroutine.create(print);"
          "local ok, err = pcall(L.spawn, function() return co end);"
          "assert(not ok and err:find(\"upvalue 'co' cannot be sent: thread\"), err);"
          "ok, err = pcall(L.spawn, print); assert(not ok);"
          "package.preload['tmod'] = nil;"
          "local p, r = L.spawn_monitor({priority = 25, max_heap = 1000000}, function() assert(L.priority() == 25) end);"
          "local tag, ref, _, pid, why = L.receive(2000); assert(tag == 'DOWN' and ref == r and pid == p and why == 'normal', tostring(why))");
}

Test(lua_proc, errors_links_monitors) {
  LUA_OK_("local L = lpvm; L.trap_exit(true);"
          "local c = L.spawn_link(function() error('boom') end);"
          "local tag, from, reason = L.receive(2000);"
          "assert(tag == 'EXIT' and from == c and reason:find('boom') and reason:find('stack traceback'), tostring(reason));"
          "local c2, r2 = L.spawn_monitor(function() L.exit('bye') end);"
          "local t2, ref2, kind, pid2, why2 = L.receive(2000);"
          "assert(t2 == 'DOWN' and ref2 == r2 and kind == 'process' and pid2 == c2 and why2 == 'bye');"
          "local c3, r3 = L.spawn_monitor(function() error({code = 7}) end);"
          "local _, _, _, _, why3 = L.receive(2000); assert(type(why3) == 'table' and why3.code == 7);"
          "local c4, r4 = L.spawn_monitor(function() setmetatable({}, {__gc = function() error('gc!') end}) ; collectgarbage() end);"
          "local _, _, _, _, why4 = L.receive(2000); assert(why4 == 'normal');"
          "local c5 = L.spawn(function() L.receive() end); local m5 = L.monitor(c5); L.exit(c5, 'kill');"
          "local _, _, _, _, why5 = L.receive(2000); assert(why5 == 'killed');"
          "local m6 = L.monitor(c5); local _, r6, _, _, why6 = L.receive(2000); assert(r6 == m6 and why6 == 'noproc');"
          "local c7 = L.spawn(function() L.receive() end); L.link(c7); L.exit(c7, 'shutdown');"
          "local t7, f7, why7 = L.receive(2000); assert(t7 == 'EXIT' and f7 == c7 and why7 == 'shutdown');"
          "assert(L.trap_exit(false) == true)");
}

Test(lua_proc, max_heap) {
  LUA_OK_("local L = lpvm;"
          "local p, r = L.spawn_monitor({max_heap = 200000}, function() local t = {} for i = 1, 1e7 do t[i] = i end end);"
          "local _, _, _, _, why = L.receive(5000); assert(why == 'max_heap', tostring(why));"
          "p, r = L.spawn_monitor({max_heap = 200000}, function() while true do pcall(function() local s = string.rep('x', 1e6) end) end end);"
          "_, _, _, _, why = L.receive(5000); assert(why == 'max_heap', tostring(why))");
}

Test(lua_proc, names_timers_info) {
  LUA_OK_("local L, me = lpvm, lpvm.self();"
          "assert(L.register('tester')); assert(L.whereis('tester') == me);"
          "local ok, why = L.register('tester'); assert(ok == nil and why);"
          "L.send('tester', 'named'); assert(L.receive(60000) == 'named');"
          "assert(L.unregister('tester')); assert(L.whereis('tester') == nil);"
          "local tr = L.send_after(20, me, 'later'); assert(L.receive(60000) == 'later');"
          "local tr2 = L.send_after(5000, me, 'never'); assert(math.type(L.cancel_timer(tr2)) == 'integer');"
          "assert(L.cancel_timer(tr) == false);"
          "local t0 = L.now(); L.sleep(30); assert(L.now() - t0 >= 29);"
          "L.send(me, 'keep'); local i = L.info(); assert(i.status and i.memory > 0 and i.message_queue_len == 1);"
          "assert(L.receive(0) == 'keep');"
          "local p = L.spawn(function() L.receive() end); local pi = L.info(p); assert(pi.type == 'lua' and pi.id == p);"
          /* gone once its DOWN came (after a sleep of 20 ms it could still be there) */
          "local ref = L.monitor(p); L.exit(p, 'kill');"
          "assert(L.receive(function(t, r) return t == 'DOWN' and r == ref end, 60000) == 'DOWN');"
          "local n, r = L.info(p); assert(n == nil and r == 'noproc');"
          "assert(#L.processes() >= 1);"
          "assert(L.priority(10) == 20 and L.priority() == 10);"
          "assert(not pcall(L.priority, 99))");
}

Test(lua_proc, preemption_and_coroutines) {
  LUA_OK_("local L, me = lpvm, lpvm.self();"
          "local spin = L.spawn(function() while true do end end);"
          "local spin2 = L.spawn(function() while true do end end);"
          "local spin3 = L.spawn(function() coroutine.wrap(function() while true do end end)() end);"
          "L.sleep(20); local t0 = os.clock(); for i = 1, 1e6 do end;"
          "L.exit(spin, 'kill'); L.exit(spin2, 'kill'); L.exit(spin3, 'kill');"
          "local co = coroutine.wrap(function() local m = L.receive(); coroutine.yield(m); return 'done' end);"
          "L.send_after(10, me, 'in-co'); assert(co() == 'in-co'); assert(co() == 'done');"
          "local co2 = coroutine.create(function(a) local b = coroutine.yield(a + 1); return b * 2 end);"
          "local ok, v = coroutine.resume(co2, 1); assert(ok and v == 2);"
          "ok, v = coroutine.resume(co2, 5); assert(ok and v == 10)");
}

Test(lua_proc, migrate) {
  LUA_OK_("local L = lpvm; assert(L.migrate('thread')); assert(L.info().mode == 'thread');"
          "local p = L.spawn(function(parent) L.send(parent, 'hi') end, L.self()); assert(L.receive(1000) == 'hi');"
          "assert(L.migrate('worker')); assert(L.info().mode == 'worker');"
          "local q = L.spawn({thread = true}, function(parent) L.send(parent, L.info().mode) end, L.self());"
          "assert(L.receive(1000) == 'thread')");
}

Test(lua_proc, recycling_isolation) {
  lproc_config lc;
  lproc_config_init(&lc);
  lc.recycle = 4;
  cr_assert_eq(run_lua_cfg(
      "local L, me = lpvm, lpvm.self(); assert(L.recycle() == 4);"
      "for round = 1, 20 do"
      "  local p, r = L.spawn_monitor(function(parent)"
      "    assert(rawget(_G, 'LEAK') == nil, 'global leaked');"
      "    assert(debug.getregistry().leak == nil, 'registry leaked');"
      "    assert(getmetatable(1) == nil, 'number metatable leaked');"
      "    LEAK = true; debug.getregistry().leak = true; debug.setmetatable(1, {});"
      "    string.evil = true; L.send(parent, 'ok')"
      "  end, me);"
      "  assert(L.receive(function(m) return m == 'ok' end, 2000) == 'ok');"
      "  local _, _, _, _, why = L.receive(2000); assert(why == 'normal', tostring(why))"
      "end;"
      "local p = L.spawn(function(parent) L.send(parent, string.evil == nil) end, me);"
      "assert(L.receive(2000) == true); assert(L.recycle(0) == 4)",
      &lc), 0);
}

Test(lua_proc, boot_errors) {
  lpvm_config c;
  lpvm_config_init(&c);
  c.workers = 1;
  cr_assert_eq(lpvm_start(&c), 0);
  lproc_config lc;
  lproc_config_init(&lc);
  cr_assert_eq(lproc_setup(&lc), 0);
  char *err = NULL;
  lpvm_id id;
  cr_assert_lt(lproc_boot(NULL, "x = = 1", 0, NULL, &id, &err), 0);
  cr_assert_not_null(err);
  cr_assert_null(strchr(err, '\n'));
  cr_assert(strstr(err, "syntax") || strstr(err, "unexpected"), "%s", err);
  free(err);
  err = NULL;
  cr_assert_lt(lproc_boot("/nonexistent/x.lua", NULL, 0, NULL, &id, &err), 0);
  cr_assert(err && strstr(err, "cannot open"), "%s", err ? err : "");
  free(err);
  err = NULL;
  /* a crashing boot process: logged, and boot_ok says so */
  cr_assert_eq(lproc_boot(NULL, "error('expected crash')", 0, NULL, &id, &err), 0);
  cr_assert_eq(lpvm_wait(), 0);
  cr_assert_eq(lproc_boot_ok(), 0);
  char *argv[] = {"script", "a1", "a2"};
  cr_assert_eq(lproc_boot(NULL, "assert(arg[0] == 'script' and arg[2] == 'a2' and select('#', ...) == 2)",
                          3, argv, &id, &err), 0);
  cr_assert_eq(lpvm_wait(), 0);
  cr_assert_eq(lproc_boot_ok(), 1);
  lpvm_stop();
  lproc_teardown();
}
