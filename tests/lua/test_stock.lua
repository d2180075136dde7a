-- test_stock.lua -- new states made ahead by the maker thread (vm/lproc_maker.c): many
-- spawners take them while the maker refills. ctest runs this with the maker on
-- (the default, LPVM_STOCK=32; again with 2 workers, for TSan) and off (LPVM_STOCK=0:
-- no process gets one); a heap limit never takes one. That a stock state is the same as a new
-- one is tests/lua/test_recycle.lua's.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

local off = (tonumber(os.getenv("LPVM_STOCK")) or 32) == 0

-- Waits until the maker's stock holds a state (lpvm.stock), at most until `deadline`
-- (lpvm.now()'s clock): the maker runs at idle priority, and a machine busy with other
-- work may give it no core for seconds. True once it holds one.
local function stocked(deadline)
  while lpvm.stock() == 0 do
    if lpvm.now() > deadline then return false end
    lpvm.sleep(5)
  end
  return true
end

-- Spawners each start m children that stay alive (nothing to recycle) until told;
-- each child says whether its state came from the stock. Returns how many did.
local function spawn_waiting(k, m)
  local me = lpvm.self()
  for s = 1, k do
    lpvm.spawn(function(parent, m2)
      local l = require "lpvm"
      local self, kids = l.self(), {}
      for i = 1, m2 do
        kids[i] = l.spawn(function(p)
          local l2 = require "lpvm"
          l2.send(p, "up", l2.info(l2.self()).stock)
          local go = l2.receive()
          l2.send(p, "bye", go)
        end, self)
      end
      local stock = 0
      for _ = 1, m2 do
        local tag, got = l.receive()
        if tag ~= "up" then l.send(parent, "bad", tag) return end
        if got then stock = stock + 1 end
      end
      for i = 1, m2 do l.send(kids[i], i) end
      for _ = 1, m2 do
        local tag = l.receive()
        if tag ~= "bye" then l.send(parent, "bad", tag) return end
      end
      l.send(parent, "done", stock)
    end, me, m)
  end
  local stock = 0
  for _ = 1, k do
    local r = T.recv(60000)   -- thousands of processes each asking info (sanitizers: slow)
    T.eq(r[1], "done")
    stock = stock + r[2]
  end
  return stock
end

test("spawners take states from the stock while the maker refills", function()
  local k, m = 4, T.scaled(1500, 100)
  local total, rounds, made = 0, 0, true
  -- three rounds (the first starts the maker: LPROC_MAKER_AFTER spawns found none);
  -- with the maker on, each next round once the stock holds a state again, and more
  -- rounds until one got a stock state (a take never waits for the maker's lock: a
  -- maker preempted holding it makes a round's takes miss)
  local deadline = lpvm.now() + 60000
  repeat
    total = total + spawn_waiting(k, m)
    rounds = rounds + 1
    if not off then made = stocked(deadline) end
  until rounds >= 3 and (off or total > 0 or not made)
  if off then
    T.eq(total, 0, "LPVM_STOCK=0: no state from the stock")
    T.eq(lpvm.stock(), 0, "LPVM_STOCK=0: an empty stock")
  else
    T.ok(made, "the maker made a state in 60 s")
    T.ok(total > 0, "some of " .. rounds * k * m .. " processes got a stock state")
  end
end)

test("a process with a heap limit makes its own state; its limit counts every byte", function()
  spawn_waiting(1, 50)   -- the maker runs (unless off)
  if not off then T.ok(stocked(lpvm.now() + 60000), "the maker made a state in 60 s") end
  local me = lpvm.self()
  local pid, ref = lpvm.spawn_monitor({ max_heap = 64 << 20 }, function(p)
    local l = require "lpvm"
    local i = l.info(l.self())
    l.send(p, i.stock, i.recycled, i.heap_limit)
  end, me)
  local r = T.recv()
  T.eq(r[1], false, "not from the stock")
  T.eq(r[3], 64 << 20, "its limit")
  T.down(ref)
  -- a limit below a new state's size: the state cannot be made, as before
  local _, ref2 = lpvm.spawn_monitor({ max_heap = 2048 }, function() end)
  local _, why = T.down(ref2)
  T.eq(why, "max_heap", "exit reason")
  T.ok(pid)
end)

test("a stock state's bytes are its process's, as a state made on the spot", function()
  if off then return end
  spawn_waiting(1, 50)
  local old = lpvm.recycle(0)   -- else the next spawn takes the last one's state
  local me = lpvm.self()
  local function body(p)
    local l = require "lpvm"
    collectgarbage()
    collectgarbage()
    local i = l.info(l.self())
    l.send(p, i.stock, i.memory)
  end
  local _, ref = lpvm.spawn_monitor({ max_heap = 64 << 20 }, body, me)
  local spot = T.recv()
  T.down(ref)
  T.eq(spot[1], false, "a heap limit: made on the spot")
  -- once the stock holds a state (until a deadline: the maker, at idle priority, may
  -- wait long for a core on a busy machine), a spawn takes it unless the maker holds
  -- its lock at that moment (a take never waits for it): then again
  local deadline = lpvm.now() + 60000
  while stocked(deadline) and lpvm.now() <= deadline do
    lpvm.spawn(body, me)
    local r = T.recv()
    if r[1] then
      -- the same objects, counted from the first run (the allocator's count, which
      -- max_heap reads, is where Lua's own count was when the process took the state)
      T.ok(math.abs(r[2] - spot[2]) <= 256, "memory " .. r[2] .. " vs " .. spot[2])
      lpvm.recycle(old)
      return
    end
    lpvm.sleep(1)   -- the maker holds its lock: it takes it back in a moment
  end
  lpvm.recycle(old)
  T.ok(false, "no stock state taken in 60 s (" .. lpvm.stock() .. " in stock)")
end)

-- The maker loads the bytecode spawned last into the states it makes (vm/lproc_maker.c
-- lproc_maker_hint): a spawn of that bytecode takes the function loaded, any other
-- loads its own. Two bodies whose bytecode has the same length (the dump cache's
-- numbers tell them apart) spawned in turns, no recycling: each process must run its
-- own body, with its own globals, whichever function its stock state holds.
test("a stock state holding another spawn's bytecode runs its own body", function()
  if off then return end
  local old = lpvm.recycle(0)
  local me = lpvm.self()
  local f1 = load("local p, x = ... local l = require 'lpvm' l.send(p, 'f1', x + 1, l.info(l.self()).stock)")
  local f2 = load("local p, x = ... local l = require 'lpvm' l.send(p, 'f2', x + 2, l.info(l.self()).stock)")
  T.eq(#string.dump(f1), #string.dump(f2), "bytecode of one length")
  spawn_waiting(1, 50)   -- the maker runs
  local function round(f, tag, add, n)
    local stock = 0
    for i = 1, n do
      lpvm.spawn(f, me, i)
      local r = T.recv()
      T.eq(r[1], tag, "the body spawned")
      T.eq(r[2], i + add, "its argument")
      if r[3] then stock = stock + 1 end
    end
    return stock
  end
  local deadline = lpvm.now() + 60000
  local s1, s2, n = 0, 0, 0
  repeat
    s1 = s1 + round(f1, "f1", 1, 40)
    s1 = s1 + round(f1, "f1", 1, 40)
    s2 = s2 + round(f2, "f2", 2, 40)
    n = n + 1
  until (n >= 3 and s1 > 0 and s2 > 0) or not stocked(deadline)
  lpvm.recycle(old)
  T.ok(s1 > 0 and s2 > 0, "stock states taken by both bodies (" .. s1 .. ", " .. s2 .. ")")
end)

T.run()
