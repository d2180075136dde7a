-- Armstrong's ring (the same shape as ../erlang/ring.escript): the boot process is
-- member 0, N-1 relays each add 1 and pass the token on; one warm-up round, then M timed
-- rounds. hop_ns = timed rounds / (N * M).   usage: lpvm ring.lua N M
local N = math.tointeger(tonumber(arg[1])) or 10000
local M = math.tointeger(tonumber(arg[2])) or 100
local t0 = lpvm.now_us()
local nxt = lpvm.self()
for _ = 1, N - 1 do
  nxt = lpvm.spawn(function(n, k)
    local l = require "lpvm"
    for _ = 1, k do local v = l.receive() l.send(n, v + 1) end
  end, nxt, M + 1)
end
local t1 = lpvm.now_us()
lpvm.send(nxt, 0)
assert(lpvm.receive() == N - 1)
local t2 = lpvm.now_us()
for _ = 1, M do
  lpvm.send(nxt, 0)
  assert(lpvm.receive() == N - 1)
end
local t3 = lpvm.now_us()
print(string.format("RESULT test=ring sys=lpvm n=%d m=%d create_s=%.6f hop_ns=%.2f",
  N, M, (t1 - t0) / 1e6, (t3 - t2) * 1e3 / (N * M)))
