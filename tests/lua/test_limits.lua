-- test_limits.lua -- max_heap counts the message queue, max_mailbox bounds it, info
-- reports it, and senders see nothing of it (issue 10, item 4).
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

-- Producers sending `payload` to `to` for ever; kill them with stop(list).
local function flood(to, n, payload)
  local ps = {}
  for i = 1, n do
    ps[i] = lpvm.spawn(function(dst, data) while true do lpvm.send(dst, data) end end, to, payload)
  end
  return ps
end
local function stop(ps) for _, p in ipairs(ps) do lpvm.exit(p, "kill") end end

-- Wait for the DOWN of ref, and stop the producers whatever happens.
local function down_then_stop(ref, ps)
  local ok, _, why = pcall(T.down, ref, T.WAIT * 2)
  stop(ps)
  if not ok then error(_, 0) end
  return why
end

test("a flooded process that never receives dies of max_heap (the queue counts)", function()
  -- the issue's probe: max_heap 10 MB and 4 producers held 2.28M messages, 2.9 GB
  local pid = lpvm.spawn({ max_heap = 10 * 1024 * 1024 }, function() lpvm.sleep(60000) end)
  local ref = lpvm.monitor(pid)
  local ps = flood(pid, 4, string.rep("x", 2000))
  T.eq(down_then_stop(ref, ps), "max_heap")
end)

test("a selective receive that matches nothing dies of max_heap too", function()
  local pid = lpvm.spawn({ max_heap = 4 * 1024 * 1024 }, function()
    lpvm.receive(function(x) return x == "never" end)
  end)
  local ref = lpvm.monitor(pid)
  local ps = flood(pid, 2, string.rep("y", 2000))
  T.eq(down_then_stop(ref, ps), "max_heap")
end)

test("max_mailbox: more queued messages than allowed end the process", function()
  local pid = lpvm.spawn({ max_mailbox = 1000 }, function() lpvm.sleep(60000) end)
  local ref = lpvm.monitor(pid)
  for i = 1, 1001 do T.eq(lpvm.send(pid, i), true) end   -- the sender sees nothing
  local _, why = T.down(ref, 10000)
  T.eq(why, "max_mailbox")
  T.eq(lpvm.send(pid, "late"), true)
end)

test("max_mailbox: a process that keeps up is never killed", function()
  -- batches of 5 with an ack after each: at most 5 (+ nothing else) ever queued
  local me = lpvm.self()
  local pid = lpvm.spawn({ max_mailbox = 10 }, function(parent)
    for _ = 1, 400 do
      for _ = 1, 5 do lpvm.receive() end
      lpvm.send(parent, "ack")
    end
    lpvm.send(parent, "got", 2000)
  end, me)
  local ref = lpvm.monitor(pid)
  for _ = 1, 400 do
    for i = 1, 5 do lpvm.send(pid, i) end
    T.recv_match(function(tag) return tag == "ack" end, 20000)
  end
  T.eq(T.recv_match(function(tag) return tag == "got" end, 20000)[2], 2000)
  local _, why = T.down(ref, 5000)
  T.eq(why, "normal")
end)

test("info reports the queued bytes and the limits", function()
  local pid = lpvm.spawn({ max_heap = 1 << 30, max_mailbox = 5000 }, function()
    lpvm.receive(function(x) return x == "go" end)
    while lpvm.receive(0) do end
    lpvm.receive(function(x) return x == "end" end)
  end)
  local i0 = lpvm.info(pid)
  T.eq(i0.message_queue_bytes, 0)
  T.eq(i0.heap_limit, 1 << 30)
  T.eq(i0.mailbox_limit, 5000)
  for _ = 1, 100 do lpvm.send(pid, string.rep("z", 1000)) end
  local i1 = lpvm.info(pid)
  T.eq(i1.message_queue_len, 100)
  T.ok(i1.message_queue_bytes >= 100 * 1000, "queued bytes: " .. i1.message_queue_bytes)
  lpvm.send(pid, "go")
  T.wait_until(function() return lpvm.info(pid).message_queue_len == 0 end, math.max(30000, T.WAIT))
  T.eq(lpvm.info(pid).message_queue_bytes, 0)
  lpvm.send(pid, "end")
end)

test("spawn option errors name the option", function()
  T.raises(function() lpvm.spawn({ max_mailbox = -1 }, function() end) end, "max_mailbox")
  T.raises(function() lpvm.spawn({ max_mailbox = "x" }, function() end) end, "max_mailbox")
end)

-- Memory of the whole OS process running out (ulimit -v, no max_heap): a child VM
-- whose process eats memory until Lua says "not enough memory". Found by the limits
-- probe: jemalloc sets a thread up at its first malloc and crashed (SIGSEGV) when the
-- timer thread's came after memory ran out; and a failed process whose reason could
-- not be allocated ended `normal` (links quiet, the boot process's exit status 0).
-- A signal the VM cannot allocate is still lost (a wait may not end: the run is
-- killed after 20 s, status 137): docs/reliability.md, "Limits".
local OOM_CHILD = [[
io.stdout:setvbuf("no")
local function eat(n)
  local pid, ref = lpvm.spawn({ monitor = true }, function()
    local t, i = {}, 0
    while i < n do i = i + 1; t[i] = string.rep("h", 4000) .. i end
  end)
  local _, _, _, _, why = lpvm.receive(function(a, r) return a == "DOWN" and r == ref end)
  print("reason", (tostring(why):match("^[^\n]*")))
end
eat(math.huge)
print("timeout", lpvm.receive(nil, 20) == nil)
eat(math.huge)
lpvm.halt(0)
]]

test("out of memory for the whole VM: no crash, no failure reported as normal", function()
  if T.SANITIZE then return end   -- the sanitizers reserve terabytes of address space
  local vm
  for l in io.lines("/proc/self/status") do vm = vm or tonumber(l:match("^VmSize:%s*(%d+)")) end
  local file = os.tmpname()
  local f = assert(io.open(file, "w")); f:write(OOM_CHILD); f:close()
  for run = 1, 2 do
    local out = io.popen(string.format(
      "ulimit -v %d && timeout -s KILL 20 '%s' --workers 2 '%s' 2>/dev/null; echo status $?",
      vm + 200 * 1024, arg[-1], file))
    local text = out:read("a")
    out:close()
    local code = tonumber(text:match("status (%d+)"))
    T.ok(code == 0 or code == 1 or code == 137, "run " .. run .. ": status " .. tostring(code)
         .. " (139: SIGSEGV)\n" .. text)
    for why in text:gmatch("reason\t([^\n]*)") do
      T.ok(why ~= "normal", "run " .. run .. ": a failed process ended normal\n" .. text)
    end
    if code == 0 then T.ok(text:find("timeout\ttrue"), "run " .. run .. ":\n" .. text) end
  end
  os.remove(file)
end)

T.run()
