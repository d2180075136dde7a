-- test_receive.lua -- self, send, receive: order, timeouts, selective receive.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

test("self returns a pid that equals itself", function()
  local me = lpvm.self()
  T.ok(me ~= nil)
  T.ok(me == lpvm.self(), "self() == self()")
  T.ok(#tostring(me) > 0, "a pid has a printable form")
end)

test("send to self, receive the values back", function()
  lpvm.send(lpvm.self(), "hello", 42)
  T.eqv(T.recv(), table.pack("hello", 42))
end)

test("send never blocks and returns", function()
  for i = 1, 1000 do lpvm.send(lpvm.self(), i) end
  for i = 1, 1000 do T.eq(T.recv()[1], i) end
end)

test("messages from one sender arrive in the order sent", function()
  local me = lpvm.self()
  local n = T.scaled(2000, 100)
  lpvm.spawn(function(parent, count)
    for i = 1, count do lpvm.send(parent, "seq", i) end
  end, me, n)
  for i = 1, n do
    local r = T.recv()
    T.eq(r[1], "seq")
    T.eq(r[2], i, "message " .. i)
  end
end)

test("per-sender order holds with several senders at once", function()
  local me = lpvm.self()
  local senders, n = 4, T.scaled(1000, 50)
  for s = 1, senders do
    lpvm.spawn(function(parent, id, count)
      for i = 1, count do lpvm.send(parent, id, i) end
    end, me, s, n)
  end
  local last = {}
  for _ = 1, senders * n do
    local r = T.recv()
    local id, i = r[1], r[2]
    T.eq(i, (last[id] or 0) + 1, "sender " .. id)
    last[id] = i
  end
end)

test("receive(timeout) returns nil, 'timeout' on an empty mailbox", function()
  local t0 = lpvm.now()
  local r = table.pack(lpvm.receive(50))
  T.eqv(r, table.pack(nil, "timeout"))
  T.ok(lpvm.now() - t0 >= 45, "waited about 50 ms, not " .. (lpvm.now() - t0))
end)

test("receive(0) polls without blocking", function()
  T.eqv(table.pack(lpvm.receive(0)), table.pack(nil, "timeout"))
  lpvm.send(lpvm.self(), 7)
  T.eqv(table.pack(lpvm.receive(0)), table.pack(7))
end)

test("a message arriving before the timeout is returned", function()
  local me = lpvm.self()
  lpvm.spawn(function(p) lpvm.sleep(20); lpvm.send(p, "late") end, me)
  T.eqv(table.pack(lpvm.receive(2000)), table.pack("late"))
end)

test("receive() with no timeout waits for a message", function()
  local me = lpvm.self()
  lpvm.spawn(function(p) lpvm.sleep(10); lpvm.send(p, "woke") end, me)
  T.eq(lpvm.receive(), "woke")
end)

test("selective receive takes the first match and keeps the rest in order", function()
  local me = lpvm.self()
  for i = 1, 5 do lpvm.send(me, "a", i) end
  lpvm.send(me, "b", 1)
  for i = 6, 8 do lpvm.send(me, "a", i) end
  local r = T.recv_match(function(tag) return tag == "b" end)
  T.eqv(r, table.pack("b", 1))
  for i = 1, 8 do T.eqv(T.recv(), table.pack("a", i)) end
  T.no_msg(0)
end)

test("selective receive: predicate sees every value of a message", function()
  local me = lpvm.self()
  lpvm.send(me, 1, 2, 3)
  lpvm.send(me, 1, 2, 4)
  local r = T.recv_match(function(a, b, c) return a + b + c == 7 end)
  T.eqv(r, table.pack(1, 2, 4))
  T.eqv(T.recv(), table.pack(1, 2, 3))
end)

test("selective receive times out and keeps rejected messages", function()
  local me = lpvm.self()
  lpvm.send(me, "x")
  lpvm.send(me, "y")
  local r = table.pack(lpvm.receive(function(v) return v == "z" end, 30))
  T.eqv(r, table.pack(nil, "timeout"))
  T.eq(T.recv()[1], "x")
  T.eq(T.recv()[1], "y")
end)

test("selective receive waits for a matching message sent later", function()
  local me = lpvm.self()
  lpvm.send(me, "noise", 1)
  lpvm.spawn(function(p)
    lpvm.send(p, "noise", 2)
    lpvm.sleep(20)
    lpvm.send(p, "wanted")
    lpvm.send(p, "noise", 3)
  end, me)
  local r = T.recv_match(function(v) return v == "wanted" end)
  T.eq(r[1], "wanted")
  for i = 1, 3 do T.eqv(T.recv(), table.pack("noise", i)) end
end)

test("selective receive with an error in the predicate keeps the message", function()
  local me = lpvm.self()
  lpvm.send(me, "keep")
  local ok = pcall(lpvm.receive, function() error("pred boom") end, 100)
  T.ok(not ok, "the predicate's error propagates")
  T.eq(T.recv()[1], "keep")
end)

test("receive many messages from a large mailbox", function()
  local me = lpvm.self()
  local n = T.scaled(20000, 1000)
  for i = 1, n do lpvm.send(me, i) end
  T.eq(lpvm.info(me).message_queue_len or lpvm.info(me).mailbox, n, "mailbox length")
  -- take the last one selectively: the rest stay in order
  T.eq(T.recv_match(function(v) return v == n end)[1], n)
  for i = 1, n - 1 do
    local v = lpvm.receive(0)
    if v ~= i then T.eq(v, i) end
  end
end)

test("receive inside a coroutine blocks the process, not the coroutine protocol", function()
  local me = lpvm.self()
  local co = coroutine.wrap(function()
    local v = lpvm.receive()
    coroutine.yield("got " .. v)
    return "done"
  end)
  lpvm.spawn(function(p) lpvm.sleep(10); lpvm.send(p, "x") end, me)
  T.eq(co(), "got x")
  T.eq(co(), "done")
end)

test("a blocked receive() skips what it drops on the wake and waits on", function()
  -- a late reply to an alias no longer active wakes the waiter and is dropped there
  -- (not seen by Lua): the receive must wait on for the next message, in a process
  -- and in a coroutine, and receive(math.huge) returns only the message's values;
  -- receive(ms) (its own continuation too, vm/lmod_msg.c) alike
  local me = lpvm.self()
  for _, form in ipairs({ "plain", "coroutine", "huge", "ms", "ms_coroutine" }) do
    local waiter = lpvm.spawn(function(parent, how)
      local function recv()
        if how == "huge" then return lpvm.receive(math.huge) end
        if how == "ms" or how == "ms_coroutine" then return lpvm.receive(600000) end
        return lpvm.receive()
      end
      local a = lpvm.alias()
      lpvm.unalias(a)
      lpvm.send(parent, "alias", a)
      local r
      if how == "coroutine" or how == "ms_coroutine" then
        r = table.pack(coroutine.wrap(function() return recv() end)())
      else
        r = table.pack(recv())
      end
      lpvm.send(parent, "got", r)
    end, me, form)
    local m = T.recv()
    T.eq(m[1], "alias")
    T.ok(T.wait_until(function() return lpvm.info(waiter).status == "waiting" end),
         form .. ": the waiter blocks")
    lpvm.send_alias(waiter, m[2], "late reply")
    T.ok(T.wait_until(function()
      local i = lpvm.info(waiter)
      return i.status == "waiting" and (i.message_queue_len or i.mailbox) == 0
    end), form .. ": the dropped reply is gone and the waiter waits again")
    lpvm.send(waiter, "real", 1, nil, 3)
    T.eqv(T.recv(), table.pack("got", table.pack("real", 1, nil, 3)), form)
  end
end)

test("receive(ms) times out while dropped replies keep waking it", function()
  -- two producers send late replies to an inactive alias for ever: each wakes the
  -- waiter, which drops it and waits on; the timeout must still end the wait
  local me = lpvm.self()
  local waiter = lpvm.spawn(function(parent)
    local a = lpvm.alias()
    lpvm.unalias(a)
    lpvm.send(parent, "alias", a)
    lpvm.send(parent, "done", lpvm.receive(50))
  end, me)
  local m = T.recv_match(function(tag) return tag == "alias" end)
  local producers = {}
  for i = 1, 2 do
    producers[i] = lpvm.spawn(function(to, a)
      while true do lpvm.send_alias(to, a, "late") end
    end, waiter, m[2])
  end
  local r = T.recv_match(function(tag) return tag == "done" end, 60000)
  for _, pid in ipairs(producers) do lpvm.exit(pid, "kill") end
  T.eqv(r, table.pack("done", nil, "timeout"))
end)

test("every form of a blocking receive in a big VM (frames noted for the waker)", function()
  -- past 4,096 live tasks a waiting process notes its frames for the sender that
  -- wakes it (vm/lmod_msg.c): receive at a function's top, in a coroutine, through
  -- pcall, with a predicate and with a timeout, in loops before field lookups, each
  -- waiting twice in the same place
  local me, n = lpvm.self(), 4200
  local pids = {}
  for i = 1, n do
    pids[i] = lpvm.spawn(function(parent, k)
      local l = require "lpvm"
      local forms = {
        function() return l.receive() end,
        function() return coroutine.wrap(function() return l.receive() end)() end,
        function() local _, v = pcall(l.receive) return v end,
        function() return l.receive(function(v) return v ~= "no" end) end,
        function() return l.receive(600000) end,
        -- the waker also asks for the lines of the field lookups after the receive
        -- (a for loop's, a while loop's jump back; a table with no hash part; a
        -- register that holds no table)
        function() local v for _ = 1, 1 do v = l.receive() local _ = l.send end return v end,
        function()
          local t, arr = { a = 1, b = 2 }, { 1, 2 }
          while true do local v = l.receive() if t.a and not arr.x then return v end end
        end,
        function() local s = "text" local v = l.receive() return s.len and v end,
      }
      local f = forms[k % #forms + 1]
      l.send(parent, "ready")
      for _ = 1, 2 do l.send(parent, "got", k, f()) end
    end, me, i)
  end
  for _ = 1, n do T.eq(T.recv()[1], "ready") end
  T.ok(lpvm.info(pids[n]) ~= nil)
  for round = 1, 2 do
    for i = 1, n do lpvm.send(pids[i], i * 10 + round) end
    local seen = {}
    for _ = 1, n do
      local r = T.recv()
      T.eq(r[1], "got")
      if r[3] ~= r[2] * 10 + round then T.eq(r[3], r[2] * 10 + round, "process " .. r[2]) end
      seen[r[2]] = true
    end
    for i = 1, n do if not seen[i] then T.ok(false, "no reply from " .. i) end end
  end
end)

test("a looping coroutine is preempted like any code", function()
  local me = lpvm.self()
  local pid = lpvm.spawn(function()
    local co = coroutine.create(function() while true do end end)
    coroutine.resume(co)
  end)
  local t0 = lpvm.now()
  lpvm.spawn(function(p) lpvm.send(p, "other ran") end, me)
  T.eq(T.recv()[1], "other ran")
  lpvm.exit(pid, "kill")
  T.ok(lpvm.now() - t0 < math.max(5000, T.WAIT))
end)

test("send to a dead pid is harmless", function()
  local pid = lpvm.spawn(function() end)
  local ref = lpvm.monitor(pid)
  T.down(ref)
  lpvm.send(pid, "into the void")   -- must not raise
  T.no_msg(10)
end)

test("bad arguments to send and receive name the argument", function()
  T.raises(function() lpvm.send() end, "bad argument #1")
  T.raises(function() lpvm.send(42, "x") end, "bad argument #1")
  T.raises(function() lpvm.send({}, "x") end, "bad argument #1")
  T.raises(function() lpvm.receive("soon") end, "bad argument #1")
  T.raises(function() lpvm.receive(function() end, "soon") end, "bad argument #2")
  T.raises(function() lpvm.receive(-5) end, "bad argument #1")
end)

test("receive(0) sees messages sent to self after earlier receives", function()
  T.flush()
  local me = lpvm.self()
  for i = 1, 3 do lpvm.send(me, i) end
  for i = 1, 3 do T.eq(lpvm.receive(50), i) end
  for i = 4, 6 do lpvm.send(me, i) end
  for i = 4, 6 do T.eq(lpvm.receive(0), i) end
  T.eq(select(2, lpvm.receive(0)), "timeout")
end)

test("a kill that arrives during receive(0) or a receive with a timeout ends the process", function()
  -- receive(0) polls the signal queue; receive(ms) brings it in before a timer starts
  for _, ms in ipairs({ 0, 100000 }) do
    local _, ref = lpvm.spawn_monitor(function(t)
      local me = lpvm.self()
      lpvm.send(me, "x")
      lpvm.exit(me, "kill")
      while true do lpvm.receive(t) end   -- never past the first wait: killed
    end, ms)
    local _, reason = T.down(ref)
    T.eq(reason, "killed", "receive(" .. ms .. ")")
  end
end)

test("receive with a timeout takes messages sent to itself in the same step, in order", function()
  T.flush()
  local me = lpvm.self()
  -- more sends than one slice's punishment would allow a sender to another process
  for round = 1, 3 do
    for i = 1, 500 do lpvm.send(me, round, i) end
    for i = 1, 500 do T.eqv(table.pack(lpvm.receive(100000)), table.pack(round, i)) end
  end
  -- the same through every form that starts a timer
  lpvm.send(me, "p")
  T.eqv(table.pack(lpvm.receive(function(x) return x == "p" end, 100000)), table.pack("p"))
  lpvm.send(me, "n")
  T.eqv(table.pack(lpvm.receive(nil, 100000)), table.pack("n"))
  T.no_msg(0)
end)

test("a receive with a timeout finds a message sent to itself behind a rejected one", function()
  T.flush()
  local me = lpvm.self()
  lpvm.send(me, "skip")
  lpvm.spawn(function(p) lpvm.send(p, "other") end, me)
  lpvm.send(me, "take")
  T.eqv(table.pack(lpvm.receive(function(x) return x == "take" end, T.WAIT)), table.pack("take"))
  T.eq(lpvm.receive(T.WAIT), "skip")
  T.eq(lpvm.receive(T.WAIT), "other")
end)

test("timeouts as integers and floats take a queued message alike; a string raises", function()
  local me = lpvm.self()
  for _, ms in ipairs({ 1, 0.5, 2.0, 2 ^ 53, 2 ^ 62, math.maxinteger, math.huge }) do
    lpvm.send(me, ms)
    T.eq(lpvm.receive(ms), ms, "timeout " .. tostring(ms))
  end
  lpvm.send(me, "s")
  T.raises(function() lpvm.receive(nil, "10") end, "bad argument #2", "got string")
  T.eq(lpvm.receive(nil, 10), "s")
  T.raises(function() lpvm.receive(-1) end, "bad argument #1")
  T.raises(function() lpvm.receive(math.mininteger) end, "bad argument #1")
  T.raises(function() lpvm.receive("soon") end, "bad argument #1")
  T.no_msg(0)
end)

test("every documented form of receive does what the docs say", function()
  local me = lpvm.self()
  -- receive(nil, ms): any message, with a timeout (it used to wait for ever)
  local t0 = lpvm.now()
  T.eqv(table.pack(lpvm.receive(nil, 30)), table.pack(nil, "timeout"))
  T.ok(lpvm.now() - t0 >= 30, "receive(nil, 30) waited its 30 ms")
  lpvm.send(me, "a")
  T.eqv(table.pack(lpvm.receive(nil, T.WAIT)), table.pack("a"))
  lpvm.send(me, "b")
  T.eqv(table.pack(lpvm.receive(nil)), table.pack("b"))
  lpvm.send(me, "c")
  T.eqv(table.pack(lpvm.receive(nil, nil)), table.pack("c"))
  -- receive(ms, nil) is receive(ms)
  T.eqv(table.pack(lpvm.receive(0, nil)), table.pack(nil, "timeout"))
  -- receive(pred, nil) waits for ever, as receive(pred)
  lpvm.send(me, "skip")
  lpvm.send(me, "take")
  T.eqv(table.pack(lpvm.receive(function(x) return x == "take" end, nil)), table.pack("take"))
  T.eqv(table.pack(lpvm.receive(0)), table.pack("skip"))
end)

test("math.huge means for ever in receive, sleep and port calls alike", function()
  local me = lpvm.self()
  local waiter = lpvm.spawn(function(parent)
    lpvm.send(parent, "got", lpvm.receive(math.huge))
    lpvm.send(parent, "got", lpvm.receive(function() return true end, math.huge))
  end, me)
  T.no_msg(50)
  lpvm.send(waiter, 1)
  T.eqv(T.recv(), table.pack("got", 1))
  lpvm.send(waiter, 2)
  T.eqv(T.recv(), table.pack("got", 2))
  -- sleep(math.huge) sleeps until killed: messages wait, the process stays
  local sleeper, ref = lpvm.spawn_monitor(function() lpvm.sleep(math.huge) end)
  lpvm.send(sleeper, "ignored")
  T.no_msg(50)
  T.eq(lpvm.info(sleeper).status, "waiting")
  lpvm.exit(sleeper, "kill")
  local _, reason = T.down(ref)
  T.eq(reason, "killed")
  -- a port's recv: math.huge waits until the data comes
  local cat = assert(lpvm.open_port({"cat"}, {packet = "line", active = false}))
  lpvm.spawn(function(port) lpvm.sleep(30) lpvm.port_send(port, "late\n") end, cat)
  T.eq(lpvm.recv(cat, 0, math.huge), "late\n")
  lpvm.port_close(cat)
  -- a huge finite timeout is a timeout, not an error
  lpvm.send(me, "x")
  T.eqv(table.pack(lpvm.receive(1e300)), table.pack("x"))
end)

test("other receive forms are programmer's mistakes and raise", function()
  T.raises(function() lpvm.receive(10, 20) end, "bad argument #2", "no value after a timeout")
  T.raises(function() lpvm.receive(function() end, 10, 20) end, "bad argument #3")
  T.raises(function() lpvm.receive(nil, 10, 20) end, "bad argument #3")
  T.raises(function() lpvm.receive({}, 10) end, "bad argument #1", "function or number expected")
  T.raises(function() lpvm.receive(true) end, "bad argument #1")
  T.raises(function() lpvm.receive(nil, "soon") end, "bad argument #2")
  T.raises(function() lpvm.receive(nil, -1) end, "bad argument #2")
  T.raises(function() lpvm.receive(0 / 0) end, "bad argument #1")
  T.raises(function() lpvm.sleep(-math.huge) end, "bad argument #1")
  T.raises(function() lpvm.sleep(0 / 0) end, "bad argument #1")
  T.raises(function() lpvm.send_after(math.huge, lpvm.self(), "x") end, "bad argument #1")
end)

test("a selective receive scans a huge mailbox of rejected messages (no C recursion)", function()
  local me, n = lpvm.self(), T.scaled(300000, 1000)
  -- (ASan, scale 0.25, needs the 75,000 to overflow the old recursion; under TSan,
  -- scale 0.1, every predicate call costs TSan ~200 KB of its own memory: 3,000)
  if T.scaled(100) < 20 then n = 3000 end
  for i = 1, n do lpvm.send(me, i) end
  lpvm.send(me, "wanted")
  T.eqv(table.pack(lpvm.receive(function(x) return x == "wanted" end, T.WAIT)), table.pack("wanted"))
  T.eq(T.flush(), n, "the rejected messages stay, in order")
end)

T.run()
