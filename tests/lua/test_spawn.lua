-- test_spawn.lua -- spawn, spawn_link, spawn_monitor, options, upvalues, modules.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

test("spawn runs a function with its arguments", function()
  local me = lpvm.self()
  local pid = lpvm.spawn(function(p, a, b, c) lpvm.send(p, a + b, c) end, me, 1, 2, "three")
  T.ok(pid ~= nil and pid ~= me, "a new pid")
  T.eqv(T.recv(), table.pack(3, "three"))
end)

test("spawn passes nil arguments through", function()
  local me = lpvm.self()
  lpvm.spawn(function(p, ...) lpvm.send(p, select("#", ...), ...) end, me, nil, 2, nil)
  T.eqv(T.recv(), table.pack(3, nil, 2, nil))
end)

test("self() in the child is the pid spawn returned", function()
  local me = lpvm.self()
  local pid = lpvm.spawn(function(p) lpvm.send(p, lpvm.self()) end, me)
  T.ok(T.recv()[1] == pid)
end)

test("upvalues are copied by value", function()
  local me = lpvm.self()
  local count, name, list = 10, "up", { 1, 2, 3 }
  lpvm.spawn(function()
    count = count + 1
    list[4] = 4
    lpvm.send(me, count, name, list)
  end)
  T.eqv(T.recv(), table.pack(11, "up", { 1, 2, 3, 4 }))
  T.eq(count, 10, "the parent's upvalue is unchanged")
  T.eq(#list, 3, "the parent's table is unchanged")
end)

test("upvalues that are Lua functions travel with the function", function()
  local me = lpvm.self()
  local function double(x) return 2 * x end
  lpvm.spawn(function() lpvm.send(me, double(21)) end)
  T.eq(T.recv()[1], 42)
end)

test("upvalues holding modules or their functions travel by name", function()
  local lp = require("lpvm")
  local insert, fmt = table.insert, string.format
  local me = lpvm.self()
  lp.spawn(function()
    local t = {}
    insert(t, fmt("%d-%s", 7, "x"))
    lp.send(me, t[1], lp == lpvm)
  end)
  T.eqv(T.recv(), table.pack("7-x", true))
end)

test("an upvalue that cannot be copied is an error naming it", function()
  local co = coroutine.create(function() end)
  T.raises(function() lpvm.spawn(function() return co end) end, "co")
  local handle = io.stdout
  T.raises(function() lpvm.spawn(function() return handle end) end, "handle")
end)

test("a cyclic table in an upvalue travels with its cycle (test_funs.lua has more)", function()
  local me = lpvm.self()
  local cyclic = { n = 1 }
  cyclic.me = cyclic
  lpvm.spawn(function() lpvm.send(me, cyclic.me.me.n, cyclic.me == cyclic) end)
  T.eqv(T.recv(), table.pack(1, true))
end)

test("globals are not shared with the child", function()
  local me = lpvm.self()
  shared_global = "parent"
  lpvm.spawn(function()
    lpvm.send(me, shared_global)
    shared_global = "child"
  end)
  T.eqv(T.recv(), table.pack(nil))
  lpvm.sleep(10)
  T.eq(shared_global, "parent")
  shared_global = nil
end)

test("the child has the standard libraries from its first line", function()
  local me = lpvm.self()
  lpvm.spawn(function()
    local t = {}
    table.insert(t, ("x"):upper())
    lpvm.send(me, t[1], math.floor(2.5), string.rep("a", 3), type(os.time()),
              type(io.write), type(require), utf8.char(65), type(coroutine.wrap),
              type(debug.traceback))
  end)
  T.eqv(T.recv(), table.pack("X", 2, "aaa", "number", "function", "function", "A",
                             "function", "function"))
end)

test("spawn of a module name runs that module", function()
  local me = lpvm.self()
  -- tests/lua/mod_echo.lua: sends back its arguments, prefixed with "mod_echo"
  local pid = lpvm.spawn("mod_echo", me, "a", 1)
  T.ok(pid)
  T.eqv(T.recv(), table.pack("mod_echo", "a", 1))
end)

test("spawn of a missing module: error or a process that dies naming it", function()
  -- spawn_monitor, not spawn then monitor: with two workers the child can fail and be
  -- gone before a later monitor, whose DOWN then says only noproc
  local ok, pid, ref = pcall(lpvm.spawn_monitor, "no_such_module_xyz")
  if ok then
    local _, reason = T.down(ref)
    T.ok(T.mentions(reason, "no_such_module_xyz"), "reason " .. T.show(reason))
  else
    T.ok(T.mentions(pid, "no_such_module_xyz"))
  end
end)

test("spawn_link links the child", function()
  lpvm.trap_exit(true)
  local pid = lpvm.spawn_link(function() error("linked boom") end)
  local reason = T.exit_from(pid)
  T.ok(T.mentions(reason, "linked boom"), "reason " .. T.show(reason))
end)

test("spawn_monitor returns pid and ref; DOWN follows", function()
  local pid, ref = lpvm.spawn_monitor(function() end)
  T.ok(pid and ref)
  local p, reason = T.down(ref)
  T.ok(p == pid)
  T.eq(reason, "normal")
end)

test("options table: link = true", function()
  lpvm.trap_exit(true)
  local pid = lpvm.spawn({ link = true }, function() lpvm.exit("bye") end)
  T.eq(T.exit_from(pid), "bye")
end)

test("options table: monitor = true returns a ref", function()
  local pid, ref = lpvm.spawn({ monitor = true }, function() lpvm.exit("ciao") end)
  local p, reason = T.down(ref)
  T.ok(p == pid)
  T.eq(reason, "ciao")
end)

test("options table: priority", function()
  local me = lpvm.self()
  lpvm.spawn({ priority = 5 }, function() lpvm.send(me, lpvm.priority()) end)
  T.eq(T.recv()[1], 5)
  lpvm.spawn({ priority = 30 }, function() lpvm.send(me, lpvm.info(lpvm.self()).priority) end)
  T.eq(T.recv()[1], 30)
end)

test("options table: thread = true runs on a private thread", function()
  local me = lpvm.self()
  local pid = lpvm.spawn({ thread = true }, function()
    lpvm.send(me, lpvm.info(lpvm.self()).mode)
    lpvm.receive()
  end)
  T.eq(T.recv()[1], "thread")
  T.eq(lpvm.info(pid).mode, "thread")
  lpvm.exit(pid, "kill")
end)

test("options table: max_heap", function()
  local pid, ref = lpvm.spawn({ max_heap = 256 * 1024, monitor = true }, function()
    local t = {}
    for i = 1, 1e7 do t[i] = ("x"):rep(64) .. i end
  end)
  local _, reason = T.down(ref)
  T.eq(reason, "max_heap")
  T.ok(pid)
end)

test("spawn argument errors name the argument", function()
  T.raises(function() lpvm.spawn() end, "bad argument #1")
  T.raises(function() lpvm.spawn(42) end, "bad argument #1")
  T.raises(function() lpvm.spawn({}, 42) end, "bad argument #2")
  T.raises(function() lpvm.spawn({ priority = 99 }, function() end) end, "priority")
  T.raises(function() lpvm.spawn({ priority = "high" }, function() end) end, "priority")
  T.raises(function() lpvm.spawn({ max_heap = -1 }, function() end) end, "max_heap")
  T.raises(function() lpvm.spawn(function() end, io.stdout) end, "userdata")
  T.raises(function() lpvm.spawn({ bogus = 1 }, function() end) end, "bad argument #1",
           "unknown spawn option 'bogus'")
end)

test("an argument that cannot be copied is an error", function()
  T.raises(function() lpvm.spawn(function() end, coroutine.create(print)) end)
  local t = {}
  t[1] = t
  T.raises(function() lpvm.spawn(function() end, t) end, "cycl")
end)

test("C functions cannot be spawned", function()
  T.raises(function() lpvm.spawn(print) end)
end)

test("many processes", function()
  local me = lpvm.self()
  local n = T.scaled(5000, 200)
  for i = 1, n do
    lpvm.spawn(function(p, k) lpvm.send(p, k) end, me, i)
  end
  local seen, sum = 0, 0
  for _ = 1, n do
    sum = sum + T.recv()[1]
    seen = seen + 1
  end
  T.eq(seen, n)
  T.eq(sum, n * (n + 1) // 2)
end)

test("a spawn chain: each process spawns the next (module spawn)", function()
  local depth = T.scaled(300, 20)
  lpvm.spawn("mod_chain", lpvm.self(), depth)
  T.eqv(T.recv(), table.pack("bottom", 0))
end)

T.run()
