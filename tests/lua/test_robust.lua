-- test_robust.lua -- crashes never take the VM down; max_heap; recycling isolation.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

test("a crashing process does not take the VM down", function()
  local reason = T.run_proc(function() error("just me") end)
  T.ok(T.mentions(reason, "just me"))
  lpvm.send(lpvm.self(), "still here")
  T.eq(T.recv()[1], "still here")
end)

test("many crashes, of every kind", function()
  local crashes = {
    function() error("plain") end,
    function() error() end,
    function() error(nil) end,
    function() error({ 1, 2 }) end,
    function() error(setmetatable({}, { __tostring = function() error("tostring boom") end })) end,
    function() local t = nil; return t.x end,
    function() return 1 + {} end,
    function() string.rep("x", -1):foo() end,
    function() coroutine.wrap(function() error("in coroutine") end)() end,
    function() lpvm.send(lpvm.self(), 1); lpvm.receive(function() error("in predicate") end, 1000) end,
    function() pcall(error); error("after pcall") end,
  }
  local n = T.scaled(10, 2)
  for _ = 1, n do
    for i, f in ipairs(crashes) do
      local reason = T.run_proc(f)
      -- error(nil) ends with the atom nil, which arrives as Lua nil
      T.ok(reason ~= "normal", "crash #" .. i .. " is not a normal end")
    end
  end
end)

test("a stack overflow ends only its process", function()
  -- Lua grows the stack to its limit (1M slots, 80 MB of fresh pages) before it
  -- raises: 0.5 s on a quiet machine, several under load, so a long bound.
  local _, ref = lpvm.spawn_monitor(function() local function f() return f() + 1 end; f() end)
  local _, reason = T.down(ref, math.max(60000, T.WAIT))
  T.ok(T.mentions(reason, "stack overflow"), T.show(reason))
end)

test("an error in a finalizer is only a warning (Lua 5.4), never a VM crash", function()
  local reason = T.run_proc(function()
    setmetatable({}, { __gc = function() error("in gc") end })
    collectgarbage()
  end)
  T.eq(reason, "normal")
end)

test("hundreds of processes crashing at once, monitored and linked", function()
  lpvm.trap_exit(true)
  local n = T.scaled(500, 20)
  local refs = {}
  for i = 1, n do
    local _, ref = lpvm.spawn_monitor(function(k)
      if k % 2 == 0 then error("even " .. k) else local x = nil; return x.y end
    end, i)
    refs[i] = ref
    lpvm.spawn_link(function() error("linked crash") end)
  end
  for i = 1, n do
    local _, reason = T.down(refs[i], math.max(10000, T.WAIT))
    T.ok(reason ~= "normal")
  end
  for _ = 1, n do T.recv_match(function(t) return t == "EXIT" end, math.max(10000, T.WAIT)) end
  lpvm.send(lpvm.self(), "alive")
  T.eq(T.recv_match(function(v) return v == "alive" end)[1], "alive")
end)

test("errors inside pcall inside a process are caught normally", function()
  local reason = T.run_proc(function()
    local ok, err = pcall(error, "caught")
    if ok or err ~= "caught" then error("pcall did not catch") end
  end)
  T.eq(reason, "normal")
end)

test("a yield across pcall (receive inside pcall) works", function()
  local me = lpvm.self()
  local pid = lpvm.spawn(function(p)
    local ok, v = pcall(function() return lpvm.receive(5000) end)
    lpvm.send(p, ok, v)
  end, me)
  lpvm.sleep(10)
  lpvm.send(pid, "x")
  T.eqv(T.recv(), table.pack(true, "x"))
end)

test("max_heap kills a greedy process with reason max_heap", function()
  local pid, ref = lpvm.spawn({ max_heap = 1024 * 1024, monitor = true }, function()
    local t = {}
    local i = 0
    while true do
      i = i + 1
      t[i] = ("y"):rep(100) .. i
    end
  end)
  local _, reason = T.down(ref, math.max(10000, T.WAIT))
  T.eq(reason, "max_heap")
  T.ok(pid)
end)

test("max_heap: one large allocation", function()
  local _, ref = lpvm.spawn({ max_heap = 512 * 1024, monitor = true }, function()
    local s = ("z"):rep(4 * 1024 * 1024)
    return #s
  end)
  local _, reason = T.down(ref)
  T.eq(reason, "max_heap")
end)

test("max_heap is not hit by a process that stays small", function()
  local _, ref = lpvm.spawn({ max_heap = 4 * 1024 * 1024, monitor = true }, function()
    for i = 1, 1000 do local t = { i, tostring(i) } end
    collectgarbage()
  end)
  local _, reason = T.down(ref)
  T.eq(reason, "normal")
end)

test("max_heap kill does not leak into pcall", function()
  -- an out-of-memory inside pcall must still end the process with max_heap
  local _, ref = lpvm.spawn({ max_heap = 512 * 1024, monitor = true }, function()
    while true do
      pcall(function()
        local t = {}
        for i = 1, 1e6 do t[i] = { i } end
      end)
    end
  end)
  local _, reason = T.down(ref, math.max(10000, T.WAIT))
  T.eq(reason, "max_heap")
end)

test("linked processes learn about a max_heap death", function()
  lpvm.trap_exit(true)
  local pid = lpvm.spawn({ max_heap = 256 * 1024, link = true }, function()
    local s = ""
    while true do s = s .. ("q"):rep(1000) end
  end)
  T.eq(T.exit_from(pid, math.max(10000, T.WAIT)), "max_heap")
end)

test("recycle(n) sets the pool size and returns something sane", function()
  local ok, v = pcall(lpvm.recycle, 16)
  T.ok(ok, "recycle(16): " .. tostring(v))
end)

test("a recycled state does not see the previous owner's globals", function()
  lpvm.recycle(64)
  local me = lpvm.self()
  local n = T.scaled(200, 20)
  -- the first wave leaves globals, metatables and library changes behind
  for i = 1, n do
    local _, ref = lpvm.spawn_monitor(function(k)
      leaked_global = "secret" .. k
      string.leaked = true
      _G.x = k
      setmetatable(_G, { __index = function() return "leaky" end })
      package.loaded.leaky_mod = { k }
    end, i)
    T.down(ref)
  end
  -- the next wave must see a clean state
  for i = 1, n do
    lpvm.spawn(function(p)
      lpvm.send(p, "clean", leaked_global, rawget(string, "leaked"), rawget(_G, "x"),
                undefined_global_xyz, package.loaded.leaky_mod)
    end, me, i)
  end
  for _ = 1, n do
    T.eqv(T.recv(), table.pack("clean", nil, nil, nil, nil, nil))
  end
end)

test("a recycled state does not see the previous owner's messages or links", function()
  lpvm.recycle(64)
  local me = lpvm.self()
  for _ = 1, 20 do
    local pid, ref = lpvm.spawn_monitor(function() lpvm.trap_exit(true); lpvm.register("recycled_name") end)
    T.down(ref)
    T.ok(pid)
  end
  lpvm.spawn(function(p)
    lpvm.send(p, lpvm.receive(0), lpvm.whereis("recycled_name") == nil)
  end, me)
  T.eqv(T.recv(), table.pack(nil, true))
end)

test("recycle(0) turns the pool off", function()
  lpvm.recycle(0)
  T.eq(T.run_proc(function() x = 1 end), "normal")
end)

test("recycle: bad argument", function()
  T.raises(function() lpvm.recycle(-1) end, "bad argument #1")
  T.raises(function() lpvm.recycle("lots") end, "bad argument #1")
end)

test("spawn_task: an unknown task type is an error naming it", function()
  local ok, err = pcall(lpvm.spawn_task, "no_such_task_type")
  T.ok(not ok or err == nil, "spawn_task of an unknown type fails")
  T.raises(function() lpvm.spawn_task() end, "bad argument #1")
end)

test("load_tasks: a missing library returns nil and a message", function()
  local ok, a, b = pcall(lpvm.load_tasks, "/nonexistent/libnothing.so")
  if ok then
    T.eq(a, nil)
    T.ok(type(b) == "string", "an error message")
  else
    T.ok(T.mentions(a, "libnothing"), T.show(a))
  end
  T.raises(function() lpvm.load_tasks() end, "bad argument #1")
end)

test("a process ending with live children leaves them running", function()
  local me = lpvm.self()
  local parent, ref = lpvm.spawn_monitor(function(p)
    lpvm.spawn(function(pp) lpvm.sleep(30); lpvm.send(pp, "orphan ok") end, p)
  end, me)
  T.down(ref)
  T.eq(T.recv()[1], "orphan ok")
  T.ok(parent)
end)

T.run()
