-- test_binary.lua -- lpvm.binary: the string-like API, sharing between processes
-- (a reference, not a copy), and every way a message can end releasing its
-- references exactly once (docs/binaries.md; issue 17, "Large messages").
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

-- Binaries alive in the VM (every process's); a test ends with none of its own left.
local function live() return (lpvm.binary_stats()) end
-- The count to come back to: this process's garbage collected first.
local function baseline()
  collectgarbage()
  collectgarbage()
  return live()
end

-- Collect here, then wait until the VM holds `n` binaries (other processes collect
-- theirs when they end or run their collector).
local function settle(n, what)
  local ok = T.wait_until(function()
    collectgarbage()
    collectgarbage()
    return live() == n
  end, T.WAIT * 2)
  T.ok(ok, (what or "binaries") .. ": " .. live() .. " alive, expected " .. n)
end

test("binary(s): length, bytes, tostring, the string methods", function()
  local b = lpvm.binary("hello world")
  T.ok(lpvm.is_binary(b))
  T.eq(lpvm.is_binary("hello world"), false)
  T.eq(lpvm.is_binary(nil), false)
  T.eq(type(b), "userdata")
  T.eq(#b, 11)
  T.eq(b:len(), 11)
  T.eq(tostring(b), "hello world")
  T.eq(b:tostring(), "hello world")
  T.eq({ b:byte(1, 3) }, { 104, 101, 108 })
  T.eq(b:byte(), 104)
  T.eq(b:byte(-1), 100)
  T.eq({ b:byte(20) }, {})
  T.eq(b:upper(), "HELLO WORLD")                -- other string methods: on a copy
  T.eq({ b:find("wor", 1, true) }, { 7, 9 })
  T.eq(b:rep(2, "|"), "hello world|hello world")
  T.eq(lpvm.binary(b), b, "binary(b) is b")
  T.ok(rawequal(lpvm.binary(b), b))
  T.eq(getmetatable(b), "binary", "the metatable is protected")
  T.eq(#lpvm.binary(""), 0)
  local nul = lpvm.binary("a\0b")
  T.eq(#nul, 3)
  T.eq(tostring(nul), "a\0b")
end)

test("sub is a sub-binary over the same buffer, with string.sub's indexes", function()
  local s = "0123456789"
  local b = lpvm.binary(s)
  local n0 = baseline()
  for i = -12, 12 do
    for j = -12, 12 do
      T.eq(tostring(b:sub(i, j)), s:sub(i, j), ("sub(%d, %d)"):format(i, j))
    end
    T.eq(tostring(b:sub(i)), s:sub(i), ("sub(%d)"):format(i))
  end
  local part = b:sub(3, 5)
  T.ok(lpvm.is_binary(part))
  T.eq(tostring(part:sub(2)), "34", "a sub of a sub")
  T.eq(live(), n0, "no new buffer for a sub-binary")
end)

test("==, <, .. : by bytes between binaries; strings come out of a concatenation", function()
  local a, b = lpvm.binary("abc"), lpvm.binary("abd")
  T.ok(a == lpvm.binary("abc"))
  T.ok(a ~= b)
  T.ok(a < b and a <= b and not (b < a))
  T.ok(lpvm.binary("ab") < a, "a prefix sorts first")
  T.ok(a == lpvm.binary("xabcx"):sub(2, 4), "a sub-binary equals by bytes")
  T.eq(a == "abc", false, "Lua never asks a binary to equal a string")
  T.eq(a .. "d", "abcd")
  T.eq("<" .. a, "<abc")
  T.eq(a .. b, "abcabd")
  T.eq(a .. 1, "abc1")
  T.eq(type(a .. b), "string")
  T.raises(function() return a .. {} end, "concatenate", "table")
  local t = { [a] = 1 }
  T.eq(t[a], 1)
  T.eq(t[lpvm.binary("abc")], nil, "as a table key a binary is itself (as any userdata)")
end)

test("other userdata are not binaries, whatever their metatable's first slot holds", function()
  -- lbin_to reads a userdata's metatable in place (vm/lraw.h): only the binaries'
  -- mark, a pointer no Lua value equals, makes one
  local f = assert(io.tmpfile())
  T.eq(lpvm.is_binary(f), false)
  T.raises(function() lpvm.send(lpvm.self(), f) end, "cannot send")
  if debug and debug.setmetatable then
    local own = debug.getmetatable(f)
    for _, first in ipairs({ lpvm.self(), true, "binary" }) do
      debug.setmetatable(f, { first, {} })
      T.eq(lpvm.is_binary(f), false)
      T.raises(function() lpvm.send(lpvm.self(), f) end, "cannot send")
    end
    debug.setmetatable(f, own)
  end
  f:close()
end)

test("bad arguments raise naming the argument", function()
  T.raises(function() lpvm.binary(1) end, "bad argument #1", "string expected, got number")
  T.raises(function() lpvm.binary() end, "bad argument #1", "string expected, got no value")
  T.raises(function() lpvm.binary({}) end, "bad argument #1", "got table")
  local b = lpvm.binary("x")
  T.raises(function() b:sub() end, "bad argument #1", "number expected")
  T.raises(function() b:sub("a") end, "bad argument #1")
  T.raises(function() b:byte({}) end, "bad argument #1")
  T.raises(function() b.sub("x", 1) end, "bad argument #1", "binary expected, got string")
  T.raises(function() b.len(1) end, "binary expected")
  T.eq(b.nosuch, nil)
end)

test("a binary in a message is shared: the receiver gets the same bytes, no copy", function()
  local base = baseline()
  local big = lpvm.binary(string.rep("0123456789abcdef", 8192))   -- 128 KiB
  T.eq(live(), base + 1)
  local me = lpvm.self()
  local pid = lpvm.spawn(function(parent)
    local x, t = lpvm.receive()
    -- the receiver holds the same buffer: still one binary in the VM
    lpvm.send(parent, lpvm.is_binary(x), #x, x:sub(-4), lpvm.is_binary(t.part), lpvm.binary_stats())
    lpvm.send(parent, x, t)   -- and back
  end, me)
  lpvm.send(pid, big, { part = big:sub(1, 16), other = "str" })
  local r = T.recv()
  T.eq(r[1], true)
  T.eq(r[2], 128 * 1024)
  T.eq(tostring(r[3]), "cdef")
  T.eq(r[4], true)
  T.eq(r[5], base + 1, "one buffer for every holder")
  local back = T.recv()
  T.ok(back[1] == big)
  T.ok(rawequal(back[1], big), "a binary that comes back is the same value (interned)")
  T.eq(tostring(back[2].part), "0123456789abcdef")
  T.eq(back[2].other, "str")
  big, r, back = nil, nil, nil
  settle(base)
end)

test("a binary sent alone: whole or a part, taken by a predicate or in order", function()
  -- lpvm.send(pid, b) is built and read without the term codec (lpvm_msg_new_bin,
  -- lpvm_msg_lone_bin): the same values, the same references
  local base = baseline()
  local big = lpvm.binary(string.rep("0123456789abcdef", 4096))   -- 64 KiB
  local me = lpvm.self()
  local pid = lpvm.spawn(function(parent)
    lpvm.send(parent, "ready")
    -- the part first (a predicate skips the whole one), then the rest in order
    local part = lpvm.receive(function(x) return lpvm.is_binary(x) and #x == 3 end)
    local whole = lpvm.receive()
    local again = lpvm.receive()
    local last = lpvm.receive()
    lpvm.send(parent, tostring(part), lpvm.is_binary(whole), #whole, rawequal(whole, again),
              tostring(last), lpvm.binary_stats())
    lpvm.send(parent, whole)
  end, me)
  T.eq(T.recv()[1], "ready")
  lpvm.send(pid, big)
  lpvm.send(pid, big:sub(-3))
  lpvm.send(pid, big)
  lpvm.send(pid, big:sub(1, 2))
  local r = T.recv()
  T.eq(r[1], "def")
  T.eq(r[2], true)
  T.eq(r[3], 64 * 1024)
  T.eq(r[4], true, "the same buffer received twice is one value")
  T.eq(r[5], "01")
  T.eq(r[6], base + 1, "one buffer for every holder")
  local back = T.recv()
  T.ok(rawequal(back[1], big), "back alone: the sender's own value (interned)")
  big, r, back = nil, nil, nil
  settle(base)
end)

test("a table read as a list up to a hole and then as a map keeps its binary once", function()
  -- vm/lterm_raw.c puts a list's elements as they come; at a non-nil past a nil it
  -- takes back what it put, and the binaries it recorded, before the map is put
  local base = baseline()
  local big = lpvm.binary(string.rep("0123456789abcdef", 512))   -- 8 KiB: shared
  local me = lpvm.self()
  local pid = lpvm.spawn(function(parent)
    local t = lpvm.receive()
    lpvm.send(parent, lpvm.is_binary(t[1]), #t[1], t[1]:sub(-4), t[2], t[3], t[4] == t[1],
              lpvm.binary_stats())
  end, me)
  lpvm.send(pid, { big, nil, 3, big })
  local r = T.recv()
  T.eq(r[1], true)
  T.eq(r[2], 8192)
  T.eq(tostring(r[3]), "cdef")
  T.eq(r[4], nil)
  T.eq(r[5], 3)
  T.eq(r[6], true, "the binary met twice is one value")
  T.eq(r[7], base + 1, "one buffer for every holder")
  big, r = nil, nil
  settle(base)
end)

test("a binary to a dead pid, to a process that dies with it queued, or flushed", function()
  local base = baseline()
  local b = lpvm.binary(string.rep("z", 5000))
  -- a dead receiver
  local _, dead = T.run_proc(function() end)
  lpvm.send(dead, b)
  -- a receiver that never receives and is killed / ends normally with mail queued
  for _, how in ipairs({ "kill", "normal", "crash" }) do
    local pid, ref = lpvm.spawn_monitor(function(h)
      lpvm.receive(function(x) return x == "go" end)
      if h == "crash" then error("boom") end
    end, how)
    for i = 1, 50 do
      lpvm.send(pid, b, b:sub(i, i + 10), { b })
      lpvm.send(pid, b)                -- alone: lpvm_msg_new_bin's message
      lpvm.send(pid, b:sub(i, i + 10))
    end
    if how == "kill" then lpvm.exit(pid, "kill") else lpvm.send(pid, "go") end
    T.down(ref)
  end
  -- send_after: one delivered, one cancelled, one to a process that is gone
  local t1 = lpvm.send_after(10, lpvm.self(), "late", b)
  local t2 = lpvm.send_after(60000, lpvm.self(), "never", b)
  T.eq(math.type(lpvm.cancel_timer(t2)), "integer")   -- the ms it had left
  local gone = select(2, T.run_proc(function() end))
  lpvm.send_after(1, gone, b)
  local r = T.recv_match(function(tag) return tag == "late" end)
  T.ok(r[2] == b)
  T.ok(t1)
  b, r = nil, nil
  settle(base)
end)

test("mailbox limits: a process killed by max_mailbox releases its queued binaries", function()
  local base = baseline()
  local b = lpvm.binary(string.rep("q", 100000))
  local pid = lpvm.spawn({ max_mailbox = 200 }, function() lpvm.sleep(60000) end)
  local ref = lpvm.monitor(pid)
  for _ = 1, 201 do lpvm.send(pid, b) end
  local _, why = T.down(ref, T.WAIT)
  T.eq(why, "max_mailbox")
  for _ = 1, 10 do lpvm.send(pid, b) end   -- to the dead one: dropped at once
  b = nil
  settle(base)
end)

test("binaries leave as bytes: ETS, exit reasons and spawn arguments hold strings", function()
  local base = baseline()
  local b = lpvm.binary("payload")
  local tab = lpvm.ets.new("bin_test", { "set" })
  lpvm.ets.insert(tab, { "k", b })
  local row = lpvm.ets.lookup(tab, "k")[1]
  T.eq(row[2], "payload", "ETS stores the bytes (a copy): they read back as a string")
  lpvm.ets.delete(tab)
  local reason = T.run_proc(function(x) error({ why = x }) end, b)
  T.eq(type(reason), "table")
  T.eq(reason.why, "payload", "spawn arguments and exit reasons carry strings")
  b, row, reason = nil, nil, nil
  settle(base)
end)

test("port_send of a binary writes it from the shared buffer, and releases it", function()
  local base = baseline()
  local big = lpvm.binary(string.rep("abcdefgh", 40000))   -- 320 KB: several writes
  local p = assert(lpvm.open_port({ "cat" }, { active = false }))
  T.eq(lpvm.port_send(p, big), true)
  T.eq(lpvm.port_send(p, big:sub(1, 8)), true)
  T.eq(lpvm.port_send(p, "!"), true)
  local got, n = {}, 0
  while n < #big + 9 do
    local d = assert(lpvm.recv(p, 0, T.WAIT))
    got[#got + 1] = d
    n = n + #d
  end
  T.eq(table.concat(got) == tostring(big) .. "abcdefgh!", true)
  lpvm.port_close(p)
  big, got = nil, nil
  settle(base)
end)

test("stress: processes pass binaries around and die; every reference is released", function()
  local base = baseline()
  local rounds, procs = T.scaled(40, 4), 8
  local me = lpvm.self()
  local bins = {}
  for i = 1, 16 do bins[i] = lpvm.binary(string.rep(string.char(64 + i), 1000 * i)) end
  for _ = 1, rounds do
    local pids = {}
    for i = 1, procs do
      pids[i] = lpvm.spawn(function(parent, k)
        local peers = lpvm.receive(function(x) return type(x) == "table" and x.bins end)
        local held = {}
        for j = 1, 200 do
          local x = lpvm.receive(0)
          if x then held[#held + 1] = x end
          local to = peers[(j + k) % #peers + 1]
          lpvm.send(to, x or peers.bins[j % #peers.bins + 1], { held[#held] })
          if j % 50 == 0 then held = {} end
        end
        if k % 3 == 0 then lpvm.exit("die_with_mail") end
        lpvm.send(parent, "done")
        lpvm.receive(5)   -- keep some mail, then end with it queued
      end, me, i)
    end
    pids.bins = bins
    for i = 1, procs do lpvm.send(pids[i], pids) end
    -- kill a few while they are busy
    lpvm.exit(pids[2], "kill")
    lpvm.exit(pids[5], "kill")
    for i = 1, procs do
      local ref = lpvm.monitor(pids[i])
      T.down(ref, T.WAIT)
    end
    T.flush()
  end
  bins = nil
  settle(base, "after " .. rounds .. " rounds")
end)

test("a binary in a gen_server.call request is shared, not copied", function()
  local gs = require "gen_server"
  local srv = assert(gs.start({
    init = function() return "ok", nil end,
    handle_call = function(req, _, st)
      return "reply", lpvm.is_binary(req) and #req or "copied", st
    end,
  }, nil))
  T.eq(gs.call(srv, lpvm.binary(string.rep("y", 1000))), 1000)
  T.eq(gs.call(srv, "plain"), "copied")           -- a string stays a string
  gs.stop(srv)
end)

T.run()
