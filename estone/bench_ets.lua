-- bench_ets.lua -- ETS operations from Lua processes (estone/bench_ets.sh runs it
-- beside bench_ets.escript, which does the same on BEAM).
--   lpvm estone/bench_ets.lua OP N P
-- OP: insert | lookup | update_counter | next (an ordered_set walk); N objects in a
-- public table made with read_concurrency and write_concurrency (ordered_set for
-- next); P processes run the operation at once, each M times, M about a million / P
-- (a walk: whole passes over the table). Prints one line: "ets op=... ns_per_op=...
-- cpu_ns_per_op=...": the wall time per operation of the slowest process, and the
-- VM's CPU time (all its threads) per operation done by all of them, which a loaded
-- machine distorts much less than wall time.
local ets = require "ets"
local op, n, p = arg[1], tonumber(arg[2]), tonumber(arg[3])
if not (op and n and p) then
  io.stderr:write("usage: lpvm bench_ets.lua insert|lookup|update_counter|next N P\n")
  lpvm.halt(2)
end
local M = tonumber(os.getenv("ETS_BENCH_OPS") or "") or 1000000

local kind = op == "next" and "ordered_set" or "set"
local tab = ets.new("bench", { kind, "public", read_concurrency = true,
                                write_concurrency = true })
for i = 1, n do ets.insert(tab, { i, i }) end

-- Keys spread over 1..n with a stride, as the escript does.
local function worker(top, id)
  lpvm.receive()
  local insert, lookup, update_counter = ets.insert, ets.lookup, ets.update_counter
  local first, next_key = ets.first, ets.next
  local k = id
  local t0 = lpvm.now_us()
  local done = 0
  if op == "insert" then
    for _ = 1, M do k = (k + 7919) % n; insert(tab, { k + 1, k }) end
  elseif op == "lookup" then
    for _ = 1, M do k = (k + 7919) % n; lookup(tab, k + 1) end
  elseif op == "update_counter" then
    for _ = 1, M do k = (k + 7919) % n; update_counter(tab, k + 1, 1) end
  else
    while done < M do
      local key = first(tab)
      while key ~= nil do key = next_key(tab, key); done = done + 1 end
    end
  end
  local ops = op == "next" and done or M
  lpvm.send(top, "done", (lpvm.now_us() - t0) * 1000 / ops, ops)
end

local me = lpvm.self()
local pids = {}
for i = 1, p do pids[i] = lpvm.spawn(worker, me, i) end
local c0 = os.clock()
for i = 1, p do lpvm.send(pids[i], "go") end
local worst, total = 0, 0
for _ = 1, p do
  local _, ns, ops = lpvm.receive(function(tag) return tag == "done" end)
  if ns > worst then worst = ns end
  total = total + ops
end
local cpu = (os.clock() - c0) * 1e9 / total
print(string.format("ets op=%s n=%d procs=%d ns_per_op=%.0f cpu_ns_per_op=%.0f", op, n, p,
                    worst, cpu))
lpvm.halt(0)
