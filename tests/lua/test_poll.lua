-- test_poll.lua -- the idle workers' I/O poll (sched/sched.c "the poll", io/poller.c).
-- There is no poller thread: one idle worker at a time waits in epoll, the others on
-- their condition variables, and busy workers look in every few dozen steps. These
-- tests make workers go idle and wake again and again, with readiness, timers and
-- messages as the wake-ups, with one, two and three workers (tests/CMakeLists.txt
-- runs this file with --workers 1 and 3 too); ThreadSanitizer builds check the
-- hand-over of the poll between workers.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

-- An echo server (one acceptor, a handler per connection): listener, port number.
local tcp_echo = dofile((arg[0]:match("^(.*/)") or "") .. "tcp_echo.lua")
local function echo_server() return tcp_echo(1) end

-- A client: `rounds` round trips of a 10-byte message over its own connection,
-- sleeping `pause(i)` ms before round i (0: none), then reports to `me`. Each reply
-- may take `wait` ms (default T.WAIT).
local function client(me, port, id, rounds, pause, wait)
  lpvm.spawn(function()
    local c, why = lpvm.tcp_connect("127.0.0.1", port, { active = "once" })
    if not c then lpvm.send(me, "client", id, "connect: " .. tostring(why)) return end
    local buf = ""
    for i = 1, rounds do
      local p = pause(i)
      if p > 0 then lpvm.sleep(p) end
      local msg = string.format("%04d:%05d", id % 10000, i % 100000)   -- 10 bytes
      assert(lpvm.port_send(c, msg))
      while #buf < 10 do
        local tag, _, d = lpvm.receive(function(_, q) return q == c end, wait or T.WAIT)
        if tag ~= "data" then
          lpvm.send(me, "client", id, "round " .. i .. ": " .. tostring(tag)) return
        end
        buf = buf .. d
        lpvm.set_active(c, "once")
      end
      if buf:sub(1, 10) ~= msg then
        lpvm.send(me, "client", id, "round " .. i .. ": got " .. buf:sub(1, 10)) return
      end
      buf = buf:sub(11)
    end
    lpvm.port_close(c)
    lpvm.send(me, "client", id, "ok")
  end)
end

local function wait_clients(n, wait)
  for _ = 1, n do
    local r = T.recv_match(function(tag) return tag == "client" end, wait or T.WAIT)
    T.eq(r[3], "ok", "client " .. tostring(r[2]))
  end
end

test("round trips over many connections, with pauses that put every worker to sleep", function()
  local pairs_n, rounds = T.scaled(24, 4), T.scaled(300, 30)
  local l, port = echo_server()
  local me = lpvm.self()
  for id = 1, pairs_n do
    -- every few rounds a 1-2 ms sleep: the workers go idle, one waits in the poll,
    -- and the timer or the readiness wakes them
    client(me, port, id, rounds, function(i) return (i + id) % 7 == 0 and 1 + i % 2 or 0 end)
  end
  wait_clients(pairs_n)
  lpvm.port_close(l)
end)

test("one connection at a time: the worker in the poll is woken by each packet", function()
  local l, port = echo_server()
  local me = lpvm.self()
  client(me, port, 1, T.scaled(2000, 200), function() return 0 end)
  wait_clients(1)
  lpvm.port_close(l)
end)

test("readiness is seen while every worker runs an endless loop", function()
  local loops = {}
  for i = 1, 6 do   -- more loops than workers: no worker is ever idle
    loops[i] = lpvm.spawn(function() local x = 0 while true do x = x + 1 end end)
  end
  lpvm.sleep(5)
  local l, port = echo_server()
  local me = lpvm.self()
  -- each hop of a process waits behind the loops' slices, many times slower on a
  -- loaded machine: a generous wait (without the busy workers' look in the poll the
  -- readiness is never seen, however long the wait)
  local wait = math.max(30000, T.WAIT)
  for id = 1, 3 do client(me, port, id, T.scaled(20, 5), function() return 0 end, wait) end
  local ok, err = pcall(wait_clients, 3, wait)
  for _, p in ipairs(loops) do lpvm.exit(p, "kill") end
  lpvm.port_close(l)
  assert(ok, err)
end)

test("program ports and processes: lines through cat, with pauses", function()
  local n, lines = T.scaled(8, 2), T.scaled(100, 20)
  local me = lpvm.self()
  for id = 1, n do
    lpvm.spawn(function()
      local p = assert(lpvm.open_port({ "cat" }))
      for i = 1, lines do
        if i % 9 == 0 then lpvm.sleep(1) end
        local line = id .. ":" .. i .. "\n"
        assert(lpvm.port_send(p, line))
        local got = ""
        while #got < #line do
          local tag, _, d = lpvm.receive(function(_, q) return q == p end, T.WAIT)
          if tag ~= "data" then lpvm.send(me, "client", id, tostring(tag)) return end
          got = got .. d
        end
        if got ~= line then lpvm.send(me, "client", id, "got " .. got) return end
      end
      lpvm.port_close(p)
      lpvm.send(me, "client", id, "ok")
    end)
  end
  wait_clients(n)
end)

test("timers and messages wake workers asleep beside the one in the poll", function()
  -- a connection stays open, so one worker sleeps in the poll with something to
  -- watch; the others' wake-ups come from the timer thread and from messages
  local l, port = echo_server()
  local c = assert(lpvm.tcp_connect("127.0.0.1", port))
  local me = lpvm.self()
  local n, rounds = T.scaled(16, 4), T.scaled(60, 10)
  for id = 1, n do
    lpvm.spawn(function()
      for i = 1, rounds do
        lpvm.sleep(i % 3)
        lpvm.send(me, "tick", id, i)
      end
    end)
  end
  local last = {}
  for _ = 1, n * rounds do
    local r = T.recv_match(function(tag) return tag == "tick" end, T.WAIT)
    T.eq(r[3], (last[r[2]] or 0) + 1, "ticks of " .. r[2] .. " in order")
    last[r[2]] = r[3]
  end
  lpvm.port_close(c)
  lpvm.port_close(l)
end)

T.run()
