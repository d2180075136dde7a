-- The thesis's Figure 4 (seed 003, section 6), as ../erlang/parallel.escript: for
-- K = 1..MaxK, K identical processes each run the same compute-bound loop of Iter
-- iterations of float arithmetic; the time is until all K have sent their result.
-- With one worker it grows about linearly with K; with W workers it stays flat up to
-- K = W.   usage: lpvm [--workers W] parallel.lua MaxK Iter
local maxk = math.tointeger(tonumber(arg[1])) or 6
local iter = math.tointeger(tonumber(arg[2])) or 3000000
local function work(parent, n)
  local x = 0.0
  for i = 1, n do x = x + (i % 7) * 0.5 - x / (i + 1.0) end
  lpvm.send(parent, "done", x)
end
local me = lpvm.self()
local fields = {}
-- a warm-up process, not timed: the first run pays for first touches of memory
lpvm.spawn(work, me, iter // 10)
assert(lpvm.receive() == "done")
for k = 1, maxk do
  local t0 = lpvm.now_us()
  for _ = 1, k do lpvm.spawn(work, me, iter) end
  for _ = 1, k do assert(lpvm.receive() == "done") end
  fields[#fields + 1] = string.format("k%d_ms=%.1f", k, (lpvm.now_us() - t0) / 1e3)
end
print(string.format("RESULT test=parallel sys=lpvm iter=%d %s", iter, table.concat(fields, " ")))
