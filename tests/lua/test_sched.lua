-- test_sched.lua -- preemption, priorities, migration, info, processes.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

test("two endless loops do not starve a third process", function()
  local me = lpvm.self()
  local spinners = {}
  -- more spinners than workers, so every worker is busy looping
  for i = 1, 4 do
    spinners[i] = lpvm.spawn(function() local x = 0; while true do x = x + 1 end end)
  end
  lpvm.sleep(20)
  local t0 = lpvm.now()
  lpvm.spawn(function(p) lpvm.send(p, "third ran") end, me)
  T.eq(T.recv(math.max(5000, T.WAIT))[1], "third ran")
  local dt = lpvm.now() - t0
  for _, p in ipairs(spinners) do lpvm.exit(p, "kill") end
  T.ok(dt < math.max(5000, T.WAIT), "third process ran after " .. dt .. " ms")
end)

test("a loop that starts with its fresh state is preempted even if the start was slow", function()
  -- A fresh state is set up inside its first slice; a tick during that set-up armed
  -- the hook that the set-up then cleared, and a loop of sends to a dead process (it
  -- never waits) held its worker for good: the parent, queued there, never ran again.
  local dead = lpvm.spawn(function() end)
  local pool = lpvm.recycle(0)   -- fresh states each time, not recycled ones
  lpvm.sleep(5)
  for _ = 1, T.scaled(100, 10) do
    local ps = {}
    for i = 1, 2 do
      ps[i] = lpvm.spawn(function(to) while true do lpvm.send(to, 1) end end, dead)
    end
    lpvm.sleep(20)
    for _, p in ipairs(ps) do
      local ref = lpvm.monitor(p)
      lpvm.exit(p, "kill")
      T.recv_match(function(tag, r) return tag == "DOWN" and r == ref end, 20000)
    end
  end
  lpvm.recycle(pool)
end)

test("looping processes at the same priority all make progress", function()
  local me = lpvm.self()
  local n = 6
  local pids = {}
  for i = 1, n do
    pids[i] = lpvm.spawn(function(p, id)
      local count = 0
      while true do
        count = count + 1
        if count % 100000 == 0 then lpvm.send(p, "progress", id) end
      end
    end, me, i)
  end
  local seen, got = {}, 0
  local deadline = lpvm.now() + math.max(10000, T.WAIT)
  while got < n and lpvm.now() < deadline do
    local r = table.pack(lpvm.receive(100))
    if r[1] == "progress" and not seen[r[2]] then
      seen[r[2]] = true
      got = got + 1
    end
  end
  for _, p in ipairs(pids) do lpvm.exit(p, "kill") end
  T.eq(got, n, "every looping process progressed")
end)

test("a higher-priority process runs promptly while loops hog the workers", function()
  local me = lpvm.self()
  local spinners = {}
  for i = 1, 4 do
    spinners[i] = lpvm.spawn({ priority = 25 }, function() while true do end end)
  end
  lpvm.sleep(20)
  local worst = 0
  for _ = 1, 5 do
    local t0 = lpvm.now()
    lpvm.spawn({ priority = 5 }, function(p) lpvm.send(p, "high") end, me)
    -- (an earlier test's loopers may have sent "progress" just before their kill)
    T.eq(T.recv_match(function(x) return x == "high" end, math.max(5000, T.WAIT))[1], "high")
    worst = math.max(worst, lpvm.now() - t0)
  end
  for _, p in ipairs(spinners) do lpvm.exit(p, "kill") end
  -- within a slice or so; a generous bound for loaded machines and sanitizer builds
  T.ok(worst < T.WAIT // 5, "a high-priority process waited " .. worst .. " ms")
end)

-- Time slices end by a hook armed from a CPU-time tick (vm/lproc_slice.c): loops in a
-- coroutine, in a deep recursion and in a pcall'ed callback are cut as well.
test("loops inside coroutines, deep recursion and metamethods are preempted too", function()
  local me = lpvm.self()
  local bodies = {
    function() coroutine.wrap(function() while true do end end)() end,
    function()
      local co = coroutine.create(function() while true do coroutine.yield() end end)
      while true do coroutine.resume(co) end
    end,
    function()
      local function deep(n) if n == 0 then while true do end end return deep(n - 1) + 1 end
      deep(50000)
    end,
    function() pcall(function() while true do end end) end,
    function()
      local t = setmetatable({}, { __index = function() while true do end end })
      return t.x
    end,
  }
  local pids = {}
  for i, f in ipairs(bodies) do pids[i] = lpvm.spawn(f) end
  lpvm.sleep(20)
  -- with both workers busy, a process of the same priority still gets its turns
  for _ = 1, 5 do
    lpvm.spawn(function(p) lpvm.send(p, "turn") end, me)
    T.eq(T.recv_match(function(x) return x == "turn" end, math.max(5000, T.WAIT))[1], "turn")
  end
  for _, p in ipairs(pids) do
    local ref = lpvm.monitor(p)
    lpvm.exit(p, "kill")
    T.down(ref)
  end
end)

-- debug.sethook in a process (a profiler, a coverage tool): the slice's hook borrows
-- Lua's one hook slot as a slice ends and gives the process's own back
-- (vm/lproc_slice.c), so that hook keeps firing across slices and the process is still
-- preempted. In count mode (ThreadSanitizer builds) a process's own hook replaces the
-- slice's for good (docs/lua-processes.md): there only the first part is checked
-- (lua_sched_count runs this file with --reductions and LPVM_COUNT_MODE=1).
test("a process's own debug hook stays across its slices, and the process is still preempted", function()
  local me = lpvm.self()
  local counting = os.getenv("LPVM_SANITIZE") == "thread" or os.getenv("LPVM_COUNT_MODE") == "1"
  local n = counting and 1 or 4   -- more loops than workers
  local function spin(p, ms)
    local lines, lost = 0, 0
    debug.sethook(function() lines = lines + 1 end, "l")
    local t0 = lpvm.now()
    while lpvm.now() - t0 < ms do
      if debug.gethook() == nil then lost = lost + 1 end
    end
    debug.sethook()
    lpvm.send(p, "spun", lines, lost)
  end
  for _ = 1, n do lpvm.spawn(spin, me, counting and 200 or 3000) end
  if not counting then
    lpvm.sleep(20)
    lpvm.spawn(function(p) lpvm.send(p, "third ran") end, me)
    T.eq(T.recv(math.max(8000, T.WAIT))[1], "third ran", "the hooked loops were preempted")
  end
  for _ = 1, n do
    local m = T.recv(math.max(20000, T.WAIT))
    T.eq(m[1], "spun")
    T.eq(m[3], 0, "the process's own hook was never gone")
    T.ok(m[2] > 1000, "its hook kept firing: " .. m[2] .. " lines")
  end
end)

test("exit() from a loop under pcall ends the process at once", function()
  local reason = T.run_proc(function()
    while true do pcall(lpvm.exit, "bye") end
  end)
  T.eq(reason, "bye")
end)

test("an exit signal ends a loop inside a C boundary (sort comparator, require, gsub)", function()
  -- Lua called from C cannot yield, so the preemption hook cannot end the step there;
  -- a kill (or an exit the process does not trap) used to wait for the C call to
  -- return: for ever for these loops, and the VM's stop gave up after 40 s.
  local me = lpvm.self()
  local loops = {
    function() table.sort({3, 2, 1}, function() while true do end end) end,
    function() while true do pcall(table.sort, {3, 2, 1}, function() while true do end end) end end,
    function() string.gsub("abc", "%w", function() while true do end end) end,
    function()
      package.preload.spin = function() while true do end end
      require "spin"
    end,
  }
  for i, body in ipairs(loops) do
    for _, why in ipairs({"kill", "boom"}) do
      local pid, ref = lpvm.spawn_monitor(function(parent, f)
        lpvm.send(parent, "looping")
        f()
      end, me, body)
      T.recv_match(function(tag) return tag == "looping" end, 30000)
      lpvm.sleep(20)   -- let it enter the loop (it cannot have left it)
      lpvm.exit(pid, why)
      local _, reason = T.down(ref, 60000)
      T.eq(reason, why == "kill" and "killed" or "boom", "loop " .. i .. ", exit " .. why)
    end
  end
  -- a process that traps exits gets the message and loops on; a kill still ends it
  local pid, ref = lpvm.spawn_monitor(function(parent)
    lpvm.trap_exit(true)
    lpvm.send(parent, "looping")
    table.sort({3, 2, 1}, function() while true do end end)
  end, me)
  T.recv_match(function(tag) return tag == "looping" end, 30000)
  lpvm.exit(pid, "boom")
  T.no_msg(100)
  T.eq(lpvm.info(pid) ~= nil, true, "a trapped exit does not end it")
  lpvm.exit(pid, "kill")
  local _, reason = T.down(ref, 60000)
  T.eq(reason, "killed")
end)

test("priority() reads and sets the caller's priority", function()
  local old = lpvm.priority()
  T.eq(math.type(old), "integer")
  T.ok(old >= 0 and old <= 31)
  local prev = lpvm.priority(12)
  T.eq(prev, old, "priority(p) returns the previous priority")
  T.eq(lpvm.priority(), 12)
  T.eq(lpvm.info(lpvm.self()).priority, 12)
  lpvm.priority(old)
  T.eq(lpvm.priority(), old)
end)

test("priority: out of range is an error", function()
  T.raises(function() lpvm.priority(32) end, "bad argument #1")
  T.raises(function() lpvm.priority(-1) end, "bad argument #1")
  T.raises(function() lpvm.priority("high") end, "bad argument #1")
end)

test("migrate to a private thread and back, messages keep flowing", function()
  local me = lpvm.self()
  local pid = lpvm.spawn(function(p)
    for step = 1, 3 do
      lpvm.send(p, "mode", step, lpvm.info(lpvm.self()).mode)
      local cmd = lpvm.receive()
      if cmd == "thread" or cmd == "worker" then lpvm.migrate(cmd) end
    end
    local n = 0
    while true do
      local v = lpvm.receive()
      if v == "end" then break end
      n = n + 1
    end
    lpvm.send(p, "count", n)
  end, me)
  T.eqv(T.recv(), table.pack("mode", 1, "worker"))
  lpvm.send(pid, "thread")
  T.eqv(T.recv(), table.pack("mode", 2, "thread"))
  lpvm.send(pid, "worker")
  T.eqv(T.recv(), table.pack("mode", 3, "worker"))
  local n = T.scaled(2000, 100)
  lpvm.send(pid, "go")
  for i = 1, n do lpvm.send(pid, i) end
  lpvm.send(pid, "end")
  T.eqv(T.recv(), table.pack("count", n))
end)

test("migrate while messages are in flight loses nothing", function()
  local me = lpvm.self()
  local n = T.scaled(5000, 200)
  local pid = lpvm.spawn(function(p, count)
    local sum, got = 0, 0
    local mode = "thread"
    while got < count do
      local v = lpvm.receive()
      sum = sum + v
      got = got + 1
      if got % 500 == 0 then
        lpvm.migrate(mode)
        mode = mode == "thread" and "worker" or "thread"
      end
    end
    lpvm.send(p, "sum", sum)
  end, me, n)
  for i = 1, n do lpvm.send(pid, i) end
  T.eqv(T.recv(math.max(10000, T.WAIT)), table.pack("sum", n * (n + 1) // 2))
end)

test("migrate: bad argument", function()
  T.raises(function() lpvm.migrate("elsewhere") end, "bad argument #1")
  T.raises(function() lpvm.migrate() end, "bad argument #1")
end)

test("info(pid) describes a process", function()
  local pid = lpvm.spawn(function() while lpvm.receive() ~= "stop" do end end)
  lpvm.send(pid, 1, 2) -- consumed
  lpvm.sleep(10)
  local i = lpvm.info(pid)
  T.eq(type(i), "table")
  T.ok(i.status ~= nil, "status")
  T.eq(math.type(i.priority), "integer")
  T.eq(i.mode, "worker")
  T.eq(math.type(i.message_queue_len), "integer")
  T.ok(math.type(i.memory) == "integer" and i.memory > 0, "memory " .. tostring(i.memory))
  T.eq(math.type(i.reductions), "integer")
  lpvm.exit(pid, "kill")
end)

test("info shows the mailbox length and a waiting status", function()
  local pid = lpvm.spawn(function()
    lpvm.receive(function(v) return v == "never" end)
  end)
  for k = 1, 5 do lpvm.send(pid, k) end
  -- until it has looked at them and waits (after a sleep of 20 ms a loaded machine
  -- had not run it yet: "runnable")
  T.wait_until(function() return lpvm.info(pid).status == "waiting" end, math.max(30000, T.WAIT))
  local i = lpvm.info(pid)
  T.eq(i.message_queue_len, 5)
  T.eq(i.status, "waiting")
  lpvm.exit(pid, "kill")
end)

test("info of self works", function()
  local i = lpvm.info(lpvm.self())
  -- asking itself, a process waits for its own reply: any status string will do
  T.eq(type(i.status), "string", "own status")
  T.ok(lpvm.info().priority, "info() with no argument describes the caller")
end)

test("info of a dead process is nil", function()
  local pid, ref = lpvm.spawn_monitor(function() end)
  T.down(ref)
  T.eq(lpvm.info(pid), nil)
end)

test("info reductions grow with work", function()
  local pid = lpvm.spawn(function()
    local x = 0
    for i = 1, 1e6 do x = x + i end
    lpvm.receive()
  end)
  -- until the work is done and it waits (a sleep of 50 ms could end before it ran)
  T.wait_until(function() return lpvm.info(pid).status == "waiting" end, math.max(30000, T.WAIT))
  local a = lpvm.info(pid).reductions
  T.ok(a > 0, "reductions " .. a)
  lpvm.exit(pid, "kill")
end)

test("processes() lists live processes, self included", function()
  local pid = lpvm.spawn(function() lpvm.receive() end)
  local list = lpvm.processes()
  T.eq(type(list), "table")
  local has_me, has_pid = false, false
  for _, p in ipairs(list) do
    if p == lpvm.self() then has_me = true end
    if p == pid then has_pid = true end
  end
  T.ok(has_me, "self is listed")
  T.ok(has_pid, "the child is listed")
  local ref = lpvm.monitor(pid)
  lpvm.send(pid, "go")
  T.down(ref)
  for _, p in ipairs(lpvm.processes()) do T.ok(p ~= pid, "dead process not listed") end
end)

test("a thread-mode process can block without stalling workers", function()
  local me = lpvm.self()
  local t = lpvm.spawn({ thread = true }, function(p)
    os.execute("sleep 0.2")   -- blocking C call on its private thread
    lpvm.send(p, "thread done")
  end, me)
  -- meanwhile, worker processes keep running
  for i = 1, 10 do
    lpvm.spawn(function(p, k) lpvm.send(p, "w", k) end, me, i)
  end
  for _ = 1, 10 do T.recv_match(function(v) return v == "w" end) end
  T.eq(T.recv_match(function(v) return v == "thread done" end)[1], "thread done")
  T.ok(t)
end)

test("info: bad argument", function()
  T.raises(function() lpvm.info(42) end, "bad argument #1")
end)

T.run()
