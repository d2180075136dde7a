-- Process creation and bytes per idle process (as ../erlang/create.escript): spawn N
-- processes that each block in receive, read the RSS, then send each one message and
-- wait for all N acknowledgements. bytes_per_proc = RSS growth / N.
-- usage: lpvm create.lua N
local function rss()
  for l in io.lines("/proc/self/status") do
    local v = l:match("^VmRSS:%s+(%d+)")
    if v then return tonumber(v) * 1024 end
  end
end
local N = math.tointeger(tonumber(arg[1])) or 100000
local r0 = rss()
local me = lpvm.self()
local t0 = lpvm.now_us()
local ps = {}
for i = 1, N do
  ps[i] = lpvm.spawn(function(parent) local l = require "lpvm" l.receive() l.send(parent, "done") end, me)
end
local t1 = lpvm.now_us()
-- spawn returns before the new process has run: let all of them reach their receive
-- (the time is not counted) so the RSS holds N idle processes, as BEAM's does
lpvm.sleep(100)
local r1 = rss()
local t2 = lpvm.now_us()
for i = 1, N do lpvm.send(ps[i], "go") end
for _ = 1, N do lpvm.receive() end
local t3 = lpvm.now_us()
print(string.format("RESULT test=create sys=lpvm n=%d create_s=%.6f send_s=%.6f " ..
  "rss_start=%d rss_created=%d bytes_per_proc=%.1f",
  N, (t1 - t0) / 1e6, (t3 - t2) / 1e6, r0, r1, (r1 - r0) / N))
