-- Runtime micro-benchmarks, the same work as ../erlang/micro.escript does on BEAM:
--   chain N        a chain of 4 processes, 100 round trips of a small message
--                  main->p1->p2->p3->p4->main, then the chain stops; N times (1500)
--   call N         request/reply to a server loop, a fresh ref and receive(2000) (100000)
--   timer_after N  ping-pong, the client waits with receive(10000): a timer armed and
--                  cancelled that never fires (100000)
--   start_timer N  send_after(10000, ...) + cancel_timer (100000)
--   links N        100 processes, each link + unlink with each of the other 99, N rounds (30)
--   spawn_exit N   spawn N processes that return at once; until all are gone (1000000)
-- usage: lpvm [--workers W] micro.lua TEST [N]
local now = lpvm.now_us
local test = arg[1]
local defaults = { chain = 1500, links = 30, spawn_exit = 1000000 }
local N = math.tointeger(tonumber(arg[2])) or defaults[test] or 100000

local function result(ops, t_us, extra)
  print(string.format("RESULT test=micro sys=lpvm bench=%s ops=%d total_s=%.6f per_op_ns=%.1f%s",
    test, ops, t_us / 1e6, t_us * 1e3 / ops, extra or ""))
end

local function forward(n)   -- a chain member: pass everything on, stop after "stop"
  local l = require "lpvm"
  if not n then n = l.receive() end
  while true do
    local m, a = l.receive()
    l.send(n, m, a)
    if m == "stop" then return end
  end
end

local bench = {}

function bench.chain()
  local rt = 100
  local me = lpvm.self()
  local t0 = now()
  for _ = 1, N do
    local p4 = lpvm.spawn(forward)
    lpvm.send(p4, me)
    local p1 = lpvm.spawn(forward, lpvm.spawn(forward, lpvm.spawn(forward, p4)))
    for _ = 1, rt do
      lpvm.send(p1, "ping", me)     -- {ping, self()}, built at run time as BEAM's
      assert(lpvm.receive() == "ping")
    end
    lpvm.send(p1, "stop")
    assert(lpvm.receive() == "stop")
  end
  local t = now() - t0
  result(N * rt, t, string.format(" hop_ns=%.1f", t * 1e3 / (N * rt * 5)))
end

function bench.call()
  local s = lpvm.spawn(function()
    local l = require "lpvm"
    while true do
      local tag, from, ref, req = l.receive()
      if tag == "stop" then return end
      l.send(from, ref, "reply", req)
    end
  end)
  local me = lpvm.self()
  local t0 = now()
  for k = N, 1, -1 do
    local ref = lpvm.make_ref()
    lpvm.send(s, "call", me, ref, k)
    local r, tag, v = lpvm.receive(2000)
    assert(r == ref and tag == "reply" and v == k, "bad reply")
  end
  local t = now() - t0
  lpvm.send(s, "stop")
  result(N, t)
end

function bench.timer_after()
  local e = lpvm.spawn(function()
    local l = require "lpvm"
    while true do
      local from = l.receive()
      if from == "stop" then return end
      l.send(from, "pong")
    end
  end)
  local me = lpvm.self()
  local t0 = now()
  for _ = 1, N do
    lpvm.send(e, me)
    assert(lpvm.receive(10000) == "pong", "the timer fired")
  end
  local t = now() - t0
  lpvm.send(e, "stop")
  result(N, t)
end

function bench.start_timer()
  local me = lpvm.self()
  local t0 = now()
  for _ = 1, N do
    local ref = lpvm.send_after(10000, me, "never")
    assert(lpvm.cancel_timer(ref) ~= false, "already fired")
  end
  result(N, now() - t0)
end

function bench.links()
  local NP = 100
  local me = lpvm.self()
  local pids = {}
  for i = 1, NP do
    pids[i] = lpvm.spawn(function(parent, rounds)
      local l = require "lpvm"
      local all = { l.receive() }
      local self = l.self()
      for _ = 1, rounds do
        for _, p in ipairs(all) do if p ~= self then l.link(p) l.unlink(p) end end
      end
      l.send(parent, "done")
      l.receive()
    end, me, N)
  end
  local t0 = now()
  for i = 1, NP do lpvm.send(pids[i], table.unpack(pids)) end
  for _ = 1, NP do assert(lpvm.receive() == "done") end
  local t = now() - t0
  for i = 1, NP do lpvm.send(pids[i], "stop") end
  result(NP * (NP - 1) * N, t)
end

function bench.spawn_exit()
  local base = #lpvm.processes()
  local f = function() end
  local t0 = now()
  for _ = 1, N do lpvm.spawn(f) end
  while #lpvm.processes() > base do lpvm.sleep(1) end
  result(N, now() - t0)
end

if not bench[test] then
  io.stderr:write("micro.lua: unknown test ", tostring(test), "\n")
  lpvm.halt(2)
end
bench[test]()
