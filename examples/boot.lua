-- boot.lua -- a short tour of lpvm (what `make run` runs).
--
-- Every process below is a Lua state of its own: they share nothing and talk only
-- by asynchronous messages, with Erlang's pids, mailboxes, links and monitors.
local function say(fmt, ...) print(string.format(fmt, ...)) end
local me = lpvm.self()
local t0 = lpvm.now()

say("lpvm tour: I am the boot process %s", tostring(me))

-- 1. The luaproc paper's hello world, with pids instead of channels: one process
--    sends, another receives and prints.
say("\n1. hello world, luaproc style")
local printer = lpvm.spawn(function(parent)
  -- (a spawned function takes its upvalues by value: plain data only, so the
  -- child calls print itself rather than the parent's `say`)
  local text, from = lpvm.receive()
  print(string.format("   %s received %q from %s", tostring(lpvm.self()), text, tostring(from)))
  lpvm.send(parent, "printed")
end, me)
lpvm.spawn(function(to) lpvm.send(to, "hello world", lpvm.self()) end, printer)
lpvm.receive(function(v) return v == "printed" end)

-- 2. A ring: N processes, each forwarding what it gets to the next; the token
--    goes round M times (Joe Armstrong's exercise).
local N, M = 1000, 20
say("\n2. a ring of %d processes, %d laps", N, M)
local function node(nxt)
  while true do
    local v = lpvm.receive()
    lpvm.send(nxt, v)
    if v == "stop" then return end
  end
end
local c0 = lpvm.now()
local first = me
for _ = 1, N - 1 do first = lpvm.spawn(node, first) end
local c1 = lpvm.now()
for lap = 1, M do
  lpvm.send(first, lap)
  local v = lpvm.receive()
  assert(v == lap)
end
local c2 = lpvm.now()
lpvm.send(first, "stop")
lpvm.receive(function(v) return v == "stop" end)
say("   created %d processes in %d ms; %d messages in %d ms (%.2f us a hop)",
    N, c1 - c0, N * M, c2 - c1, (c2 - c1) * 1000 / (N * M))

-- 3. Let it crash: a linked process fails; with trap_exit on, its death arrives as
--    an ordinary message instead of taking us down with it.
say("\n3. a crash caught by a link")
lpvm.trap_exit(true)
local worker = lpvm.spawn_link(function()
  print(string.format("   worker %s: dividing by a string...", tostring(lpvm.self())))
  return 1 / "zero"
end)
local _, who, reason = lpvm.receive(function(tag) return tag == "EXIT" end)
assert(who == worker)
say("   EXIT from %s: %s", tostring(who), tostring(reason):match("[^\n]*"))
lpvm.trap_exit(false)

-- 4. Monitors, names and timers.
say("\n4. a monitor, a name and a timer")
local clock = lpvm.spawn(function()
  local ticks = 0
  while true do
    local msg, from = lpvm.receive()
    if msg == "tick" then ticks = ticks + 1
    elseif msg == "ask" then lpvm.send(from, "ticks", ticks)
    elseif msg == "stop" then return end
  end
end)
lpvm.register("clock", clock)
for i = 1, 3 do lpvm.send_after(10 * i, "clock", "tick") end
lpvm.sleep(50)
lpvm.send("clock", "ask", me)
local _, ticks = lpvm.receive(function(tag) return tag == "ticks" end)
say("   the process registered as 'clock' counted %d ticks sent by send_after", ticks)
local ref = lpvm.monitor(clock)
lpvm.send("clock", "stop")
local _, _, _, _, why = lpvm.receive(function(tag, r) return tag == "DOWN" and r == ref end)
say("   DOWN notice: clock ended with reason %q", why)

-- 5. What is running?
say("\n5. processes now: %d; my info: %s", #lpvm.processes(), (function()
  local i = lpvm.info(me)
  return string.format("priority %d, mode %s, %d bytes, %d reductions",
                       i.priority, i.mode, i.memory, i.reductions)
end)())
say("\ntour done in %d ms. Try: lpvm examples/ring.lua 100000 10, or just lpvm for a shell.",
    lpvm.now() - t0)
