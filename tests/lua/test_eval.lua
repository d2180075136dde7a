-- test_eval.lua -- lpvm.eval: code run inside another live process (vm/leval.c).
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

-- A process waiting in receive, with state in a local its functions see.
local function waiter()
  return lpvm.spawn(function()
    state = { count = 0 }
    while true do
      local m = lpvm.receive()
      if m == "stop" then return end
      state.count = state.count + 1
    end
  end)
end

test("eval into a waiting process: it looks inside, and goes on waiting", function()
  local p = waiter()
  lpvm.send(p, "tick")
  lpvm.send(p, "tick")
  T.eqv(table.pack(lpvm.eval(p, function() return state.count, "x" end)), table.pack(true, 2, "x"))
  T.eqv(table.pack(lpvm.eval(p, "state.count = 40; return state.count")), table.pack(true, 40))
  lpvm.send(p, "tick")
  T.eqv(table.pack(lpvm.eval(p, "return state.count")), table.pack(true, 41), "patched")
  local ref = lpvm.monitor(p)
  lpvm.send(p, "stop")
  T.eq(T.down(ref), p)
end)

test("eval into a busy process runs at its next preemption", function()
  local p = lpvm.spawn(function()
    progress = 0
    while true do progress = progress + 1 end
  end)
  local ok, n = lpvm.eval(p, function() return progress end)
  T.eq(ok, true)
  T.ok(type(n) == "number")
  local ok2, n2 = lpvm.eval(p, function() return progress end)
  T.ok(ok2 and n2 > n, "it kept running")
  lpvm.exit(p, "kill")
end)

test("code that errors does not kill the target", function()
  local p = waiter()
  local ok, err = lpvm.eval(p, function() error("boom") end)
  T.eq(ok, false)
  T.ok(err:find("boom"), err)
  local ok1, err1 = lpvm.eval(p, "return nil + 1")
  T.ok(ok1 == false and err1:find("arithmetic"), err1)
  local ok2, err2 = lpvm.eval(p, "this is not lua")
  T.ok(ok2 == false and err2:find("syntax error") or err2:find("near"), err2)
  T.eqv(table.pack(lpvm.eval(p, "return state ~= nil")), table.pack(true, true),
        "still alive and well")
  local co = coroutine.create(print)
  local ok3, msg3 = lpvm.eval(p, function() return coroutine.create(print) end)
  T.eq(ok3, false)
  T.ok(msg3:find("cannot be sent"), msg3)
  local okr, msgr = lpvm.eval(p, function() return lpvm.receive(10) end)
  T.eq(okr, false, "eval code cannot block")
  T.ok(msgr:find("cannot wait"), msgr)
  lpvm.exit(p, "kill")
  local _ = co
end)

test("a dead process, a slow one, bad arguments", function()
  local p = lpvm.spawn(function() end)
  local ref = lpvm.monitor(p)
  T.down(ref)
  T.eqv(table.pack(lpvm.eval(p, "return 1")), table.pack(nil, "noproc"))
  -- a sleeper that wakes and ends after 300 ms: the eval must time out before that; if
  -- this process was held up past the sleep (a loaded machine) the answer would be
  -- noproc, so that round is tried again with a new sleeper
  local got
  for _ = 1, 20 do
    local t0 = lpvm.now()
    local sleeper = lpvm.spawn(function(me) lpvm.send(me, "asleep") lpvm.sleep(300) end, lpvm.self())
    T.recv_match(function(m) return m == "asleep" end)
    got = table.pack(lpvm.eval(sleeper, "return 1", 20))
    if lpvm.now() - t0 < 280 then break end
  end
  T.eqv(got, table.pack(nil, "timeout"))
  T.eqv(table.pack(lpvm.eval(lpvm.self(), "return 1 + 1")), table.pack(true, 2))
  T.raises(function() lpvm.eval("x", "return 1") end, "bad argument #1 to 'eval'")
  T.raises(function() lpvm.eval(lpvm.self(), 42) end, "bad argument #2 to 'eval'")
  -- a NaN timeout passed the check (NaN < 0 is false): the request went out, then
  -- receive raised naming its own argument, the monitor left behind
  local waiter = lpvm.spawn(function() lpvm.receive() end)
  T.raises(function() lpvm.eval(waiter, "return 1", 0 / 0) end, "bad argument #3 to 'eval'")
  T.raises(function() lpvm.eval(waiter, "return 1", "5") end, "bad argument #3 to 'eval'")
  lpvm.exit(waiter, "kill")
  T.no_msg(350)   -- the sleeper never reached a safe point that runs it: no late answer
end)

test("many processes eval into busy and waiting processes at once (stress)", function()
  local targets = {}
  for i = 1, 4 do
    targets[i] = lpvm.spawn(function()
      hits = 0
      -- busy without touching `hits`: an eval runs between two instructions of this
      -- loop, so a loop that wrote `hits` back could undo its increment
      local spin = 0
      if i % 2 == 0 then while true do spin = spin + 1 end end
      while true do lpvm.receive() end
    end)
  end
  local me, n, rounds = lpvm.self(), T.scaled(20, 4), T.scaled(50, 10)
  for c = 1, n do
    lpvm.spawn(function()
      local bad = 0
      for r = 1, rounds do
        local t = targets[(c + r) % #targets + 1]
        local ok, v = lpvm.eval(t, function() hits = hits + 1; return hits end, 60000)
        if ok ~= true or type(v) ~= "number" then bad = bad + 1 end
      end
      lpvm.send(me, "client", bad)
    end)
  end
  for _ = 1, n do
    local m = T.recv_match(function(tag) return tag == "client" end, 120000)
    T.eq(m[2], 0, "every eval answered")
  end
  local total = 0
  for _, t in ipairs(targets) do
    total = total + select(2, lpvm.eval(t, "return hits", 60000))
    lpvm.exit(t, "kill")
  end
  T.eq(total, n * rounds, "each ran exactly once")
end)

T.run()
