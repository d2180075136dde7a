-- test_alloc.lua -- the Lua states' allocator (vm/lproc.c, vm/lproc_small.h): small
-- blocks reused through each thread's free lists keep their contents apart and the
-- heap count exact. ctest also runs it with 2 workers (lua_alloc_workers2), where
-- processes move between workers and free blocks made on the other one; the
-- TSan build checks that stays race-free.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

-- Tables, arrays, hash parts and strings of every small size (8 to 128 bytes and a
-- little past), filled with values that say where they belong.
local function build(id, n)
  local t = { id = id }
  for i = 1, n do
    local a = {}
    for j = 1, i % 9 do a[j] = id * 1000 + i * 10 + j end
    local h = {}
    for j = 1, i % 6 do h["k" .. j] = id + j end
    t[i] = { a, h, string.rep(string.char(65 + id % 26), i % 120), id * 7 + i }
  end
  return t
end

local function check(t, id, n)
  if t.id ~= id or #t ~= n then return false end
  for i = 1, n do
    local a, h, s, v = t[i][1], t[i][2], t[i][3], t[i][4]
    if #a ~= i % 9 or #s ~= i % 120 or v ~= id * 7 + i then return false end
    for j = 1, i % 9 do if a[j] ~= id * 1000 + i * 10 + j then return false end end
    for j = 1, i % 6 do if h["k" .. j] ~= id + j then return false end end
    if s ~= string.rep(string.char(65 + id % 26), i % 120) then return false end
  end
  return true
end

test("processes churning small objects and passing tables keep every value", function()
  local me = lpvm.self()
  local np, rounds, n = T.scaled(40, 8), T.scaled(60, 12), 40
  local pids = {}
  for k = 1, np do
    pids[k] = lpvm.spawn(function(parent, id, count, size)
      local ok = true
      -- the predecessor's first table may come before the peer's pid
      local _, peer = lpvm.receive(function(tag) return tag == "peer" end)
      for r = 1, count do
        local t = build(id * 100 + r, size)   -- garbage after the send: freed here
        lpvm.send(peer, "t", t)
        local _, got = lpvm.receive(function(tag) return tag == "t" end)
        ok = ok and check(got, got.id, size)
        if r % 4 == 0 then lpvm.migrate("thread") lpvm.migrate("worker") end
      end
      lpvm.send(parent, "done", id, ok)
    end, me, k, rounds, n)
  end
  for k = 1, np do lpvm.send(pids[k], "peer", pids[k % np + 1]) end   -- a ring
  local bad = {}
  for _ = 1, np do
    local tag, id, ok = table.unpack(T.recv(T.WAIT * 4), 1, 3)
    T.eq(tag, "done")
    if not ok then bad[#bad + 1] = id end
  end
  T.eq(#bad, 0)
end)

test("short-lived processes: recycled states reuse blocks freed elsewhere", function()
  local me = lpvm.self()
  local np = T.scaled(400, 40)
  for k = 1, np do
    lpvm.spawn(function(parent, id)
      local t = build(id, 30)
      lpvm.send(parent, "t", id, check(t, id, 30) and t or false)
    end, me, k)
  end
  local good = 0
  for _ = 1, np do
    local tag, id, t = table.unpack(T.recv(T.WAIT * 4), 1, 3)
    T.eq(tag, "t")
    if t and check(t, id, 30) then good = good + 1 end
  end
  T.eq(good, np)
end)

test("the state's count stays exact through the free lists (what max_heap checks)", function()
  -- info().memory is the allocator's count plus the record: against Lua's own count
  -- the difference must not move, however much was made, resized and freed
  local me = lpvm.self()
  lpvm.spawn(function(parent)
    local function probe()
      local c = collectgarbage("count") * 1024
      return lpvm.info().memory - c
    end
    collectgarbage("stop")
    probe()
    local d1 = probe()
    collectgarbage("restart")
    local keep = {}
    for i = 1, 20000 do
      local t = { i, { i }, tostring(i), string.rep("x", i % 200) }
      if i % 7 == 0 then keep[#keep + 1] = t end
      local s = {}
      for j = 1, i % 40 do s[j] = j; s["k" .. j] = j end   -- arrays and hashes resized
    end
    keep = nil
    collectgarbage()
    collectgarbage("stop")
    local d2 = probe()
    lpvm.send(parent, "d", d1, d2)
  end, me)
  local tag, d1, d2 = table.unpack(T.recv(), 1, 3)
  T.eq(tag, "d")
  T.eq(d2, d1)
end)

test("max_heap still stops a process growing in small objects", function()
  local _, ref = lpvm.spawn({ max_heap = 1024 * 1024, monitor = true }, function()
    local t = {}
    for i = 1, 1e7 do t[i] = { i } end
  end)
  local _, why = T.down(ref, T.WAIT)
  T.eq(why, "max_heap")
end)

T.run()
