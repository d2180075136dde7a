-- bench_dist.lua -- distribution over one connection, lpvm <-> lpvm (bench_dist.sh).
--   lpvm bench_dist.lua client N M   this node a; starts node b; prints one line
--   lpvm bench_dist.lua server A     node b: an echo and a counting sink
-- Latency: N round trips of a 10-byte binary. Throughput: M one-way 10-byte messages
-- to a sink that answers when it has them all.
local role = ...
local payload = "0123456789"
local ospid = io.open("/proc/self/stat"):read("n")

if role == "server" then
  local parent = select(2, ...)
  local sink = lpvm.spawn(function()
    while true do
      local _, from, m = lpvm.receive()
      for _ = 2, m do lpvm.receive() end
      lpvm.send(from, "got", m)
    end
  end)
  lpvm.register("echo", lpvm.self())
  lpvm.send({"bench", parent}, "ready", lpvm.self(), sink)
  while true do
    local t, from, p = lpvm.receive()
    if t == "ping" then lpvm.send(from, "pong", p)
    elseif t == "stop" then lpvm.halt(0) end
  end
end

local args = {...}
local n, m = tonumber(args[2]) or 20000, tonumber(args[3]) or 200000
assert(lpvm.net_start("bencha" .. ospid, {cookie = "bench" .. ospid}))
lpvm.register("bench", lpvm.self())
local exe = io.popen("readlink /proc/" .. ospid .. "/exe"):read("l")
local here = arg[0]:match("^(.*/)") or "./"
-- in the background, not as a port: the mailbox holds nothing but the benchmark's
os.execute(string.format("%s --workers 1 --sname benchb%d --cookie bench%d %s server %s &",
                         exe, ospid, ospid, here .. "bench_dist.lua", lpvm.node()))
local _, echo, sink = lpvm.receive(function(t) return t == "ready" end, 20000)
assert(echo, "node b did not start")
local me = lpvm.self()
for _ = 1, 1000 do lpvm.send(echo, "ping", me, payload) lpvm.receive() end   -- warm up
local t0 = lpvm.now_us()
for _ = 1, n do
  lpvm.send(echo, "ping", me, payload)
  lpvm.receive()
end
local rt_us = (lpvm.now_us() - t0) / n
lpvm.send(sink, "count", me, m)
t0 = lpvm.now_us()
for _ = 2, m do lpvm.send(sink, payload) end
lpvm.receive(function(t) return t == "got" end)
local per_s = m / ((lpvm.now_us() - t0) / 1e6)
-- node b's end before ours, so `perf stat` (docs/distribution.md) counts both
lpvm.monitor_node("benchb" .. ospid .. "@" .. lpvm.node():match("@(.*)"))
lpvm.send(echo, "stop")
lpvm.receive(function(t) return t == "nodedown" end, 5000)
print(string.format("rt_us=%.1f msgs_per_s=%.0f", rt_us, per_s))
lpvm.halt(0)
