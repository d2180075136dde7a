-- bench_ports.lua -- the EStone port i/o pattern through the Lua port API.
--
--   lpvm [--workers N] estone/bench_ports.lua [rounds]
--
-- 5 processes, each with its own `cat` port, alternately send a 200-byte and a
-- 5-byte command and wait for the whole echo (a selective receive on the port), as
-- estone's port_io micro does and build/estone/bench_io does with C tasks. Prints one
-- line: round trips per second over all processes and the time of one round trip.
local rounds = tonumber((...)) or 20000
local NPROC = 5
local me = lpvm.self()

local function pinger(n, parent)
  local port = assert(lpvm.open_port({ "cat" }))
  local big, small = string.rep("x", 200), "hello"
  for i = 1, n do
    local cmd = i % 2 == 1 and big or small
    lpvm.port_send(port, cmd)
    local got = 0   -- a pipe may split the echo
    while got < #cmd do
      local _, _, d = lpvm.receive(function(tag, p) return tag == "data" and p == port end)
      got = got + #d
    end
  end
  lpvm.port_close(port)
  lpvm.send(parent, "done")
end

local t0 = lpvm.now()
for _ = 1, NPROC do lpvm.spawn(pinger, rounds, me) end
for _ = 1, NPROC do lpvm.receive(function(tag) return tag == "done" end) end
local ms = lpvm.now() - t0
local total = NPROC * rounds
print(string.format("port_io rounds=%d procs=%d ms=%d rt_per_s=%.0f us_per_rt=%.1f",
  rounds, NPROC, ms, total / (ms / 1000), ms * 1000 / rounds))
