-- soak.lua -- mixed load for N minutes, to show that lpvm stays flat: no memory or
-- descriptor growth, no process leak, no lost message. Not a test (it takes minutes)
-- and not in CI: `make soak SOAK_MINUTES=10` (docs/reliability.md has a run).
--
--   lpvm estone/soak.lua [minutes [report_seconds]]
--
-- Four loads run side by side, each in its own processes, and report to a stats
-- process; every report_seconds (default 60) one line gives the VM's RSS, open
-- descriptors, live processes and what each load did in that window:
--   spawn   spawn/exit churn: batches of 1,000 processes that each answer and end
--   flood   4 senders x batches of 20,000 numbered messages to one receiver, which
--           checks every batch (count, order per sender): lost/dup/reordered
--   kill    kill storms: a root with 2,000 linked children, watched by a monitor on
--           each; the root is killed: every child must die, every DOWN come once
--   port    port churn: open `cat`, echo a line through it, close it; fds return
-- Every wait for an answer gives up after 120 s and counts it lost, so an overloaded
-- machine (a process not scheduled for minutes) can show losses that are delays.
-- Exit status 0 when nothing was lost and no check failed, 1 otherwise.
-- SOAK_LOADS=spawn,flood (say) runs only those loads, to find which one grows.

local minutes = tonumber(arg[1]) or 10
local every = tonumber(arg[2]) or 60
local stop_at = lpvm.now() + math.floor(minutes * 60000)

local function vm_pid()
  local f = assert(io.open("/proc/self/stat"))
  local pid = f:read("n")
  f:close()
  return pid
end
local PID = vm_pid()

local function rss_kb()
  local f = io.open("/proc/self/status")
  if not f then return -1 end
  local s = f:read("a")
  f:close()
  return tonumber(s:match("VmRSS:%s*(%d+)")) or -1
end

local function fds()
  local f = io.popen("ls /proc/" .. PID .. "/fd | wc -l")
  local n = f:read("n")
  f:close()
  return (n or 0) - 1   -- the ls pipe itself
end

local function running() return lpvm.now() < stop_at end

-- ---- the loads: each sends ("stat", name, field, n) to the stats process --------------

local function spawn_churn(stats)
  local me = lpvm.self()
  while lpvm.now() < stop_at do
    local n = 1000
    for i = 1, n do lpvm.spawn(function(p, k) lpvm.send(p, "child", k) end, me, i) end
    local got = 0
    while got < n do
      local tag = lpvm.receive(function(t) return t == "child" end, 120000)
      if not tag then break end
      got = got + 1
    end
    lpvm.send(stats, "stat", "spawn", "done", n)
    lpvm.send(stats, "stat", "spawn", "lost", n - got)
  end
end

local SENDERS, BATCH = 4, 20000

local function flood_receiver(stats)
  local seen = {}
  for s = 1, SENDERS do seen[s] = 0 end
  while true do
    local tag, s, k = lpvm.receive()
    if tag == "m" then
      if k ~= seen[s] + 1 then lpvm.send(stats, "stat", "flood", "reordered", 1) end
      seen[s] = k
    elseif tag == "mark" then   -- k = how many sender s sent in all so far
      lpvm.send(stats, "stat", "flood", "lost", k - seen[s])
      lpvm.send(stats, "stat", "flood", "done", BATCH)
    elseif tag == "stop" then
      return
    end
  end
end

local function flood_sender(rcv, s)
  local k = 0
  while lpvm.now() < stop_at do
    for _ = 1, BATCH do
      k = k + 1
      lpvm.send(rcv, "m", s, k)
    end
    lpvm.send(rcv, "mark", s, k)
    lpvm.sleep(0)
  end
end

local function kill_storm(stats)
  local CHILDREN = 2000
  local me = lpvm.self()
  while lpvm.now() < stop_at do
    local root = lpvm.spawn(function(parent, n)
      local kids = {}
      for i = 1, n do kids[i] = lpvm.spawn_link(function() lpvm.receive() end) end
      lpvm.send(parent, "ready", kids)
      lpvm.receive()
    end, me, CHILDREN)
    local _, kids = lpvm.receive(function(t) return t == "ready" end, 120000)
    local refs, want = {}, 1
    refs[lpvm.monitor(root)] = true
    for _, pid in ipairs(kids or {}) do
      refs[lpvm.monitor(pid)] = true
      want = want + 1
    end
    lpvm.exit(root, "kill")
    local got, dup = 0, 0
    while got < want do
      local tag, ref = lpvm.receive(function(t) return t == "DOWN" end, 120000)
      if not tag then break end
      if refs[ref] then refs[ref] = nil; got = got + 1 else dup = dup + 1 end
    end
    lpvm.send(stats, "stat", "kill", "done", want)
    lpvm.send(stats, "stat", "kill", "lost", want - got)
    lpvm.send(stats, "stat", "kill", "dup", dup)
  end
end

local function port_churn(stats)
  while lpvm.now() < stop_at do
    local p = lpvm.open_port({ "cat" }, { packet = "line" })
    if not p then
      lpvm.send(stats, "stat", "port", "failed", 1)
    else
      lpvm.port_send(p, "ping\n")
      local _, _, line = lpvm.receive(function(t, q) return t == "data" and q == p end, 120000)
      if line ~= "ping\n" and line ~= "ping" then lpvm.send(stats, "stat", "port", "lost", 1) end
      lpvm.port_close(p)
      lpvm.send(stats, "stat", "port", "done", 1)
    end
  end
end

-- ---- stats and the report -----------------------------------------------------------

local total, window = {}, {}
local function add(name, field, n)
  local key = name .. "." .. field
  total[key] = (total[key] or 0) + n
  window[key] = (window[key] or 0) + n
end
local function w(key) return window[key] or 0 end

local t0 = lpvm.now()
local function report()
  local min = (lpvm.now() - t0) / 60000
  print(string.format(
    "%6.1f min  rss %7d KB  fds %4d  procs %6d | spawn %8d lost %d | flood %9d lost %d reord %d" ..
    " | kill %7d lost %d dup %d | port %6d lost %d fail %d",
    min, rss_kb(), fds(), #lpvm.processes(),
    w("spawn.done"), w("spawn.lost"), w("flood.done"), w("flood.lost"), w("flood.reordered"),
    w("kill.done"), w("kill.lost"), w("kill.dup"), w("port.done"), w("port.lost"), w("port.failed")))
  io.stdout:flush()
  window = {}
end

-- a first port now, so that whatever opens once for good with it is in the start
-- line's count (the poll's epoll and eventfd open with the VM)
do
  local p = lpvm.open_port({ "true" })
  if p then lpvm.port_close(p) end
end
print(string.format("soak: %g min, a report every %g s", minutes, every))
print(string.format("   0.0 min  rss %7d KB  fds %4d  procs %6d  (start)", rss_kb(), fds(), #lpvm.processes()))
io.stdout:flush()

local me = lpvm.self()
local loads = {}
local want = os.getenv("SOAK_LOADS") or "spawn,flood,kill,port"
local function on(name) return ("," .. want .. ","):find("," .. name .. ",", 1, true) end
local rcv = lpvm.spawn(flood_receiver, me)
if on("spawn") then loads[#loads + 1] = lpvm.spawn(spawn_churn, me) end
if on("flood") then
  for s = 1, SENDERS do loads[#loads + 1] = lpvm.spawn(flood_sender, rcv, s) end
end
if on("kill") then loads[#loads + 1] = lpvm.spawn(kill_storm, me) end
if on("port") then loads[#loads + 1] = lpvm.spawn(port_churn, me) end
local mons = {}
for _, pid in ipairs(loads) do mons[lpvm.monitor(pid)] = true end
local live = #loads

local next_report = lpvm.now() + math.floor(every * 1000)
while live > 0 do
  local tag, a, b, c, d = lpvm.receive(math.max(1, next_report - lpvm.now()))
  if tag == "stat" then
    add(a, b, c)
  elseif tag == "DOWN" and mons[a] then   -- "DOWN", ref, "process", pid, reason
    mons[a] = nil
    live = live - 1
    if d ~= "normal" then
      print("a load ended abnormally: " .. tostring(d))
      total["load.crashed"] = (total["load.crashed"] or 0) + 1
    end
  end
  if lpvm.now() >= next_report then
    report()
    next_report = math.max(next_report + math.floor(every * 1000), lpvm.now() + 1000)
  end
end
lpvm.send(rcv, "stop")   -- after every sender's last message: it is read last
local rref = lpvm.monitor(rcv)
while true do
  local tag, a, b, c = lpvm.receive(30000)
  if tag == "stat" then add(a, b, c) elseif tag == nil or (tag == "DOWN" and a == rref) then break end
end
while true do
  local tag, a, b, c = lpvm.receive(0)
  if tag == nil then break elseif tag == "stat" then add(a, b, c) end
end
report()
lpvm.sleep(500)
print(string.format("   end      rss %7d KB  fds %4d  procs %6d  (after the loads)", rss_kb(), fds(),
                    #lpvm.processes()))

local bad = 0
for _, k in ipairs({ "spawn.lost", "flood.lost", "flood.reordered", "kill.lost", "kill.dup",
                     "port.lost", "port.failed", "load.crashed" }) do
  bad = bad + (total[k] or 0)
end
print(string.format("total: %d spawned, %d flood messages, %d killed in storms, %d ports; " ..
                    "lost/duplicated/reordered/failed: %d",
                    total["spawn.done"] or 0, total["flood.done"] or 0, total["kill.done"] or 0,
                    total["port.done"] or 0, bad))
lpvm.halt(bad == 0 and 0 or 1)
