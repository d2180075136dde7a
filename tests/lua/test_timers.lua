-- test_timers.lua -- now, sleep, send_after, cancel_timer, receive timeouts.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

test("now() is a monotonic integer of milliseconds", function()
  local a = lpvm.now()
  T.eq(math.type(a), "integer")
  local b = lpvm.now()
  T.ok(b >= a)
end)

test("sleep(ms) waits at least that long", function()
  local t0 = lpvm.now()
  lpvm.sleep(30)
  local dt = lpvm.now() - t0
  T.ok(dt >= 29, "slept " .. dt .. " ms")
  -- "not forever" with room for a loaded machine and sanitizer builds (2 s was a
  -- timed assertion a descheduled worker could fail)
  T.ok(dt < 60000, "and not forever: " .. dt .. " ms")
end)

test("sleep(0) returns", function()
  lpvm.sleep(0)
end)

test("sleep does not take messages from the mailbox", function()
  lpvm.send(lpvm.self(), "kept")
  lpvm.sleep(5)
  T.eq(T.recv()[1], "kept")
end)

test("a sleeping process lets others run", function()
  local me = lpvm.self()
  lpvm.spawn(function() lpvm.send(me, "ran") end)
  -- polled in sleeps (a loaded machine may take longer than one): were sleep to hold
  -- the worker, a one-worker VM would never run the other process
  T.eq(T.wait_until(function() return lpvm.receive(0) end, 5000), "ran")
end)

test("many processes sleep concurrently", function()
  local me = lpvm.self()
  local n = T.scaled(1000, 50)
  local t0 = lpvm.now()
  for i = 1, n do
    lpvm.spawn(function(p, k) lpvm.sleep(50); lpvm.send(p, k) end, me, i)
  end
  for _ = 1, n do T.recv() end
  local dt = lpvm.now() - t0
  T.ok(dt >= 49, "at least one sleep: " .. dt)
end)

test("send_after delivers the values after the delay", function()
  local t0 = lpvm.now()
  local ref = lpvm.send_after(30, lpvm.self(), "tick", 1, { 2 })
  T.ok(ref ~= nil)
  T.eqv(T.recv(), table.pack("tick", 1, { 2 }))
  T.ok(lpvm.now() - t0 >= 29, "after " .. (lpvm.now() - t0) .. " ms")
end)

test("send_after to another process", function()
  local me = lpvm.self()
  local pid = lpvm.spawn(function(p)
    local v = lpvm.receive(2000)
    lpvm.send(p, "got", v)
  end, me)
  lpvm.send_after(10, pid, "delayed")
  T.eqv(T.recv(), table.pack("got", "delayed"))
end)

test("send_after to a registered name", function()
  lpvm.register("timer_test_me")
  lpvm.send_after(5, "timer_test_me", "by name")
  T.eq(T.recv()[1], "by name")
  lpvm.unregister("timer_test_me")
end)

test("send_after to a name looks it up when it fires (Erlang's send_after/3)", function()
  -- a free name at the call is no error; still free when it fires: dropped silently
  T.eq(lpvm.whereis("erlsem_timer_free"), nil)
  T.ok(lpvm.send_after(10, "erlsem_timer_free", "lost"))
  lpvm.send_after(60, lpvm.self(), "marker")   -- fires after it
  T.eq(T.recv()[1], "marker")
  T.no_msg(30)
  -- held by A at the call, by us when it fires: it comes here
  local a, mref = lpvm.spawn_monitor(function() lpvm.receive() end)
  lpvm.register("erlsem_timer_name", a)
  local ref = lpvm.send_after(1000, "erlsem_timer_name", "late bound")
  lpvm.send(a, "stop")
  T.down(mref)
  lpvm.register("erlsem_timer_name")
  T.eq(T.recv()[1], "late bound")
  T.eq(lpvm.cancel_timer(ref), false, "it fired")
  -- a named one can be cancelled; a name with a NUL is never anyone's
  local r2 = lpvm.send_after(60000, "erlsem_timer_name", "never")
  T.eq(math.type(lpvm.cancel_timer(r2)), "integer")
  lpvm.send_after(5, "erlsem_timer_name\0x", "nul")
  lpvm.send_after(50, lpvm.self(), "marker2")
  T.eq(T.recv()[1], "marker2")
  T.no_msg(30)
  lpvm.unregister("erlsem_timer_name")
end)

test("cancel_timer before it fires: nothing arrives", function()
  local ref = lpvm.send_after(50, lpvm.self(), "never")
  T.ok(lpvm.cancel_timer(ref), "cancel_timer returns a true value when it cancelled")
  T.no_msg(100)
end)

test("cancel_timer after it fired returns false", function()
  local ref = lpvm.send_after(1, lpvm.self(), "fired")
  T.eq(T.recv()[1], "fired")
  T.ok(not lpvm.cancel_timer(ref), "too late to cancel")
end)

-- Erlang's cancel_timer and read_timer answer the milliseconds left, or false when the
-- timer fired, was cancelled or never was; lpvm's cancel_timer said true.
test("cancel_timer and read_timer answer the ms left, or false", function()
  local ref = lpvm.send_after(60000, lpvm.self(), "never")
  local left = lpvm.read_timer(ref)
  T.eq(math.type(left), "integer")
  T.ok(left > 0 and left <= 60000, "read_timer: " .. tostring(left))
  local c = lpvm.cancel_timer(ref)
  T.eq(math.type(c), "integer")
  T.ok(c >= 0 and c <= left, "cancel_timer: " .. tostring(c) .. " after " .. left)
  T.eq(lpvm.cancel_timer(ref), false, "cancelled already")
  T.eq(lpvm.read_timer(ref), false, "cancelled: nothing to read")
  local fired = lpvm.send_after(0, lpvm.self(), "fired")
  T.eq(T.recv()[1], "fired")
  T.eq(lpvm.read_timer(fired), false)
  T.eq(lpvm.cancel_timer(fired), false)
  T.eq(lpvm.cancel_timer(lpvm.make_ref()), false, "never a timer")
  T.eq(lpvm.read_timer(lpvm.make_ref()), false)
  T.no_msg(20)
end)

-- erlang:cancel_timer(Ref, [{async, true}, {info, true}]) answers with the message
-- {cancel_timer, Ref, Left}; {info, false} answers ok (here true) and sends nothing.
test("cancel_timer and read_timer options: async and info", function()
  local ref = lpvm.send_after(60000, lpvm.self(), "never")
  T.eq(lpvm.read_timer(ref, {async = true}), true)
  local m = T.recv()
  T.eq(m[1], "read_timer")
  T.ok(m[2] == ref)
  T.eq(math.type(m[3]), "integer")
  T.eq(lpvm.cancel_timer(ref, {async = true}), true)
  m = T.recv()
  T.eq(m[1], "cancel_timer")
  T.ok(m[2] == ref)
  T.eq(math.type(m[3]), "integer")
  T.eq(lpvm.cancel_timer(ref, {async = true, info = true}), true)
  m = T.recv()
  T.eq(m[1], "cancel_timer")
  T.eq(m[3], false)
  local r2 = lpvm.send_after(60000, lpvm.self(), "never")
  T.eq(lpvm.cancel_timer(r2, {info = false}), true)
  T.eq(lpvm.read_timer(r2), false, "cancelled although not told")
  T.eq(lpvm.cancel_timer(r2, {async = true, info = false}), true)
  T.no_msg(20)
  T.raises(function() lpvm.cancel_timer(r2, {asink = true}) end, "bad argument #2", "asink")
  T.raises(function() lpvm.cancel_timer(r2, {async = 1}) end, "bad argument #2", "async")
  T.raises(function() lpvm.cancel_timer(r2, "async") end, "bad argument #2")
  T.raises(function() lpvm.read_timer(r2, {info = true}) end, "bad argument #2", "info")
  T.raises(function() lpvm.read_timer(42) end, "bad argument #1", "reference expected")
end)

-- erlang:send_after to a pid is tied to that process: to a dead one it is no timer,
-- and the end of its target cancels it (it must not wait out its hour in the wheel).
test("send_after to a pid that is dead, or dies, is cancelled", function()
  local pid, mref = lpvm.spawn_monitor(function() end)
  T.down(mref)
  local r1 = lpvm.send_after(3600000, pid, "nobody")
  T.eq(lpvm.read_timer(r1), false, "to a dead pid: no timer")
  T.eq(lpvm.cancel_timer(r1), false)
  local refs = {}
  local victim, vref = lpvm.spawn_monitor(function() lpvm.receive() end)
  for i = 1, 100 do refs[i] = lpvm.send_after(3600000, victim, i) end
  T.eq(math.type(lpvm.read_timer(refs[50])), "integer", "pending while it lives")
  lpvm.send(victim, "go")
  T.down(vref)   -- its timers went before its DOWN was sent
  for i = 1, 100 do T.eq(lpvm.read_timer(refs[i]), false, "tied timer " .. i) end
  -- its own timers too (a process that arms send_after(self) and ends)
  local selfish, sref = lpvm.spawn_monitor(function(me)
    lpvm.send(me, "armed", lpvm.send_after(3600000, lpvm.self(), "tick"))
  end, lpvm.self())
  local armed = T.recv()
  T.eq(armed[1], "armed")
  T.down(sref)
  T.eq(lpvm.read_timer(armed[2]), false)
  -- and a named one is not tied to who held the name at the start
  lpvm.register("erlsem3_tied_name")
  local named = lpvm.send_after(3600000, "erlsem3_tied_name", "x")
  T.eq(math.type(lpvm.cancel_timer(named)), "integer")
  lpvm.unregister("erlsem3_tied_name")
end)

test("timers fire in deadline order", function()
  local me = lpvm.self()
  -- 100 ms apart: starting the three must not take longer (a loaded machine took 20)
  lpvm.send_after(300, me, 3)
  lpvm.send_after(100, me, 1)
  lpvm.send_after(200, me, 2)
  for i = 1, 3 do T.eq(T.recv()[1], i) end
end)

test("many timers, half cancelled", function()
  local me = lpvm.self()
  local n = T.scaled(2000, 100)
  local refs = {}
  for i = 1, n do refs[i] = lpvm.send_after(100 + i % 20, me, i) end
  -- On a loaded machine an early timer may fire before its cancel: cancel_timer then
  -- returns false, and that one message is due. No other even one may come.
  local due, fired = {}, 0
  for i = 1, n, 2 do due[i] = true end
  for i = 2, n, 2 do
    if lpvm.cancel_timer(refs[i]) == false then due[i] = true end
  end
  for _ in pairs(due) do fired = fired + 1 end
  T.ok(fired < n, "some cancels came in time")
  local got = 0
  for _ = 1, fired do
    local v = T.recv()[1]
    T.ok(due[v], "only timers not cancelled fire: got " .. tostring(v))
    due[v] = nil
    got = got + 1
  end
  T.no_msg(60)
  T.eq(got, fired)
end)

test("a timer to a process that has ended is harmless", function()
  local pid, ref = lpvm.spawn_monitor(function() end)
  T.down(ref)
  lpvm.send_after(1, pid, "nobody")
  lpvm.sleep(10)
end)

test("receive timeout then a later message is still received", function()
  local me = lpvm.self()
  lpvm.send_after(40, me, "later")
  T.eqv(table.pack(lpvm.receive(5)), table.pack(nil, "timeout"))
  T.eq(T.recv()[1], "later")
end)

-- Erlang's after "5" / timer:sleep("5") are errors; luaL_checknumber coerced the string.
test("a timeout given as a string raises (not coerced)", function()
  T.raises(function() lpvm.sleep("5") end, "bad argument #1", "got string")
  T.raises(function() lpvm.send_after("5", lpvm.self(), 1) end, "bad argument #1", "got string")
  T.raises(function() lpvm.receive(function() return true end, "5") end, "bad argument #2",
           "got string")
  T.raises(function() lpvm.receive("5") end, "bad argument #1")
  T.raises(function() lpvm.receive_ref(lpvm.make_ref(), "5") end, "bad argument #2", "got string")
  T.raises(function() lpvm.receive(math.mininteger) end, "bad argument #1")
  T.raises(function() lpvm.receive(-math.huge) end, "bad argument #1")
  T.eqv(table.pack(lpvm.receive(0.5)), table.pack(nil, "timeout"))
  lpvm.send(lpvm.self(), "y")
  T.eq(lpvm.receive(math.maxinteger), "y")
  lpvm.send(lpvm.self(), "z")
  T.eq(lpvm.receive(2^70), "z")
end)

test("timer arguments: errors name the argument", function()
  T.raises(function() lpvm.sleep() end, "bad argument #1")
  T.raises(function() lpvm.sleep("long") end, "bad argument #1")
  T.raises(function() lpvm.sleep(-1) end, "bad argument #1")
  T.raises(function() lpvm.send_after("x", lpvm.self(), 1) end, "bad argument #1")
  T.raises(function() lpvm.send_after(10, 42, 1) end, "bad argument #2")
  T.raises(function() lpvm.send_after(10, lpvm.self(), io.stdout) end, "userdata")
  T.raises(function() lpvm.cancel_timer() end, "bad argument #1")
  T.raises(function() lpvm.cancel_timer("x") end, "bad argument #1")
end)

-- Issue 10, item 2: a timeout fires however busy the mailbox is. Two producers
-- flood `w` (forever: they are killed at the end); every wait below must still end.
local function flooded(kind)
  local me = lpvm.self()
  local w = lpvm.spawn(function(parent, what)
    local t0 = lpvm.now()
    local a, b
    if what == "receive" then
      a, b = lpvm.receive(function(x) return x == "reply" end, 100)
    elseif what == "sleep" then
      lpvm.sleep(100)
      a = "woke"
    elseif what == "recv" then
      local p = assert(lpvm.open_port({ "cat" }, { active = false }))
      a, b = lpvm.recv(p, 0, 100)
      lpvm.port_close(p)
    elseif what == "queued" then   -- a match queued before the timer fires wins
      lpvm.send(lpvm.self(), "reply")
      local t1 = lpvm.now()
      while lpvm.now() - t1 < 50 do end   -- spin past the 1 ms timeout below
      a, b = lpvm.receive(function(x) return x == "reply" end, 1)
    end
    lpvm.send(parent, "done", lpvm.now() - t0, a, b)
  end, me, kind)
  local producers = {}
  for i = 1, 2 do
    producers[i] = lpvm.spawn(function(to) while true do lpvm.send(to, 1) end end, w)
  end
  local got = T.recv_match(function(tag) return tag == "done" end, 10000)
  for _, pid in ipairs(producers) do lpvm.exit(pid, "kill") end
  lpvm.exit(w, "kill")
  return got
end

test("receive(pred, ms) times out while two producers flood the mailbox", function()
  local r = flooded("receive")
  T.ok(r[2] >= 99, "timed out after " .. r[2] .. " ms")
  T.eq(r[3], nil)
  T.eq(r[4], "timeout")
end)

test("sleep(ms) returns while two producers flood the mailbox", function()
  local r = flooded("sleep")
  T.ok(r[2] >= 99, "slept " .. r[2] .. " ms")
  T.eq(r[3], "woke")
end)

test("port recv(p, 0, ms) times out while two producers flood the mailbox", function()
  local r = flooded("recv")
  T.eq(r[3], nil)
  T.eq(r[4], "timeout")
end)

test("a message queued before the timeout fired still wins under a flood", function()
  T.eq(flooded("queued")[3], "reply")
end)

-- A receive's timer is only noted in a VM of one worker (tasks/task_timer.c) and
-- started at the end of the next step if the process still waits, or before the
-- worker sleeps. These run with one worker too (lua_timers_workers1).
test("a receive timeout fires while another process keeps the worker busy", function()
  local me = lpvm.self()
  -- it spins until killed: the worker never runs out of work, so the note must be
  -- started at a step's end
  local spinner = lpvm.spawn(function() while true do end end)
  local w = lpvm.spawn(function(parent)
    lpvm.send(parent, "waited", lpvm.receive(function(x) return x == "never" end, 20))
  end, me)
  local r = T.recv_match(function(tag) return tag == "waited" end, 60000)
  lpvm.exit(spinner, "kill")
  lpvm.exit(w, "kill")
  T.eq(r[2], nil)
  T.eq(r[3], "timeout")
end)

test("a process killed while its receive timer is noted", function()
  for _ = 1, 20 do
    local me = lpvm.self()
    local w, ref = lpvm.spawn_monitor(function(parent)
      lpvm.send(parent, "ready")
      lpvm.receive(function(x) return x == "never" end, 60000)
    end, me)
    T.recv_match(function(x) return x == "ready" end)
    lpvm.exit(w, "kill")   -- its receive is noted, or started: either way it goes
    local _, reason = T.down(ref)
    T.eq(reason, "killed")
  end
  -- the timers of the processes after them still work
  T.eqv(table.pack(lpvm.receive(function() return false end, 5)), table.pack(nil, "timeout"))
end)

test("many processes time out at once, and replies beat the rest", function()
  local me = lpvm.self()
  local n = T.scaled(200, 20)
  for i = 1, n do
    lpvm.spawn(function(parent, k)
      -- odd ones get their answer from a timer (the timer thread's send wakes them),
      -- even ones wait for nothing and time out
      if k % 2 == 1 then lpvm.send_after(k % 7, lpvm.self(), "answer", k) end
      local a, b = lpvm.receive(function(x) return x == "answer" end, 5 + k % 11)
      lpvm.send(parent, "result", k, a, b)
    end, me, i)
  end
  local timeouts, answers = 0, 0
  for _ = 1, n do
    local r = T.recv_match(function(tag) return tag == "result" end, 60000)
    if r[3] == nil then
      T.eq(r[4], "timeout")
      timeouts = timeouts + 1
    else
      T.eq(r[3], "answer")
      T.eq(r[4], r[2])
      T.eq(r[2] % 2, 1, "only odd ones are answered")
      answers = answers + 1
    end
  end
  T.eq(timeouts + answers, n)
  T.ok(timeouts >= n // 2, "every even one timed out: " .. timeouts)
end)

-- Request/reply with a timeout, as gen_server.call does, between processes that
-- reply at once, late (after the timeout: the late reply stays in the mailbox) or
-- never, from the workers and from the timer thread. Under TSan with one worker
-- (lua_timers_workers1) this is the stress test of the noted timers.
test("calls with timeouts: replied, late and never, many rounds", function()
  local me = lpvm.self()
  local server = lpvm.spawn(function()
    while true do
      local from, ref, how = lpvm.receive()
      if from == "stop" then return end
      if how == "now" then lpvm.send(from, "reply", ref)
      elseif how == "later" then lpvm.send_after(30, from, "reply", ref) end
    end
  end)
  local clients = 4
  for c = 1, clients do
    lpvm.spawn(function(parent, s, rounds)
      local got = { now = 0, later = 0, never = 0 }
      for i = 1, rounds do
        local how = (i % 10 == 0) and "later" or (i % 10 == 5) and "never" or "now"
        local ref = lpvm.make_ref()
        lpvm.send(s, lpvm.self(), ref, how)
        local tag, r = lpvm.receive(function(t, r2) return t == "reply" and r2 == ref end,
                                    how == "now" and 60000 or 3)
        if how == "now" then assert(tag == "reply" and r == ref, "no reply")
        else assert(tag == nil and r == "timeout", how .. ": " .. tostring(tag)) end
        got[how] = got[how] + 1
      end
      lpvm.send(parent, "client", got.now, got.later, got.never)
    end, me, server, T.scaled(300, 30))
  end
  local rounds = T.scaled(300, 30)
  for _ = 1, clients do
    local r = T.recv_match(function(tag) return tag == "client" end, 120000)
    T.eq(r[2] + r[3] + r[4], rounds)
  end
  lpvm.send(server, "stop")
end)

-- Erlang's erlang:start_timer/3: the message carries the timer's reference,
-- {timeout, TRef, Msg}, so a receiver tells the current timer from a stale one.
test("start_timer sends \"timeout\", ref, ... and is cancelled as send_after", function()
  local ref = lpvm.start_timer(20, lpvm.self(), "tick", { 1 })
  local left = lpvm.read_timer(ref)
  T.eq(math.type(left), "integer")
  T.ok(left >= 0 and left <= 20, "read_timer: " .. tostring(left))
  T.eqv(T.recv(), table.pack("timeout", ref, "tick", { 1 }))
  T.eq(lpvm.cancel_timer(ref), false, "it fired")
  -- a stale timer's message is told apart by its reference
  local old = lpvm.start_timer(0, lpvm.self(), "round")
  local cur = lpvm.start_timer(30, lpvm.self(), "round")
  T.ok(old ~= cur)
  local seen = {}
  for _ = 1, 2 do
    local tag, r = lpvm.receive(5000)
    T.eq(tag, "timeout")
    seen[#seen + 1] = r
  end
  T.eq(seen[1], old, "the stale one first")
  T.eq(seen[2], cur, "then the current one, with its own reference")
  -- no values: just "timeout", ref
  local bare = lpvm.start_timer(0, lpvm.self())
  T.eqv(T.recv(), table.pack("timeout", bare))
  -- cancelled before it fires: nothing comes, the ms left are answered
  local never = lpvm.start_timer(60000, lpvm.self(), "never")
  T.eq(math.type(lpvm.cancel_timer(never)), "integer")
  T.no_msg(30)
end)

test("start_timer to a name, a dead pid, another process; bad arguments", function()
  lpvm.register("start_timer_me")
  local r = lpvm.start_timer(5, "start_timer_me", "by name")
  T.eqv(T.recv(), table.pack("timeout", r, "by name"))
  lpvm.unregister("start_timer_me")
  -- a free name is no error; the message is dropped when it fires
  T.ok(lpvm.start_timer(5, "start_timer_free", "lost"))
  -- a dead pid: no timer (false at once), nothing sent
  local dead, mref = lpvm.spawn_monitor(function() end)
  T.down(mref)
  local d = lpvm.start_timer(1000, dead, "x")
  T.eq(lpvm.read_timer(d), false)
  -- another process gets the reference the starter got
  local me = lpvm.self()
  local pid = lpvm.spawn(function(p)
    local tag, ref, v = lpvm.receive(5000)
    lpvm.send(p, "got", tag, ref, v)
  end, me)
  local r2 = lpvm.start_timer(5, pid, "there")
  T.eqv(T.recv(), table.pack("got", "timeout", r2, "there"))
  T.no_msg(20)
  T.raises(function() lpvm.start_timer("5", me) end, "#1")
  T.raises(function() lpvm.start_timer(-1, me) end, "#1")
  T.raises(function() lpvm.start_timer(5, 42) end, "#2")
  T.raises(function() lpvm.start_timer(5, me, coroutine.create(print)) end, "start_timer")
  T.no_msg(20)
end)

T.run()
