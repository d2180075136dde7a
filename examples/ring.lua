-- ring.lua -- Joe Armstrong's challenge: create N processes in a ring and send a
-- message round it M times, so that N * M messages are sent in all.
--
--   lpvm examples/ring.lua [N [M]]        (default N = 10000, M = 10)
--   lpvm --threads examples/ring.lua 1000 10    (every process on its own thread)
local N = math.tointeger(tonumber(arg[1] or "10000"))
local M = math.tointeger(tonumber(arg[2] or "10"))
if not N or N < 2 or not M or M < 1 then
  io.stderr:write("usage: lpvm ring.lua [N >= 2 [M >= 1]]\n")
  lpvm.halt(1)
end

-- Each node forwards whatever it receives to the next node; "stop" goes round once
-- more and ends every node.
local function node(nxt)
  while true do
    local v = lpvm.receive()
    lpvm.send(nxt, v)
    if v == "stop" then return end
  end
end

local me = lpvm.self()
local t0 = lpvm.now()
local first = me                     -- the boot process closes the ring
for _ = 1, N - 1 do first = lpvm.spawn(node, first) end
local t1 = lpvm.now()
for lap = 1, M do
  lpvm.send(first, lap)
  assert(lpvm.receive() == lap)
end
local t2 = lpvm.now()
lpvm.send(first, "stop")
assert(lpvm.receive() == "stop")

local hops = N * M
print(string.format("ring: %d processes, %d laps", N, M))
print(string.format("creation: %d ms (%.2f us a process)", t1 - t0, (t1 - t0) * 1000 / (N - 1)))
print(string.format("messages: %d hops in %d ms (%.3f us a hop)", hops, t2 - t1,
                    (t2 - t1) * 1000 / hops))
