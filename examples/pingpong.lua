-- pingpong.lua -- two processes bounce a message back and forth.
--
--   lpvm examples/pingpong.lua [ROUNDS [SIZE]]   (default 100000 rounds, 10-byte payload)
local rounds = math.tointeger(tonumber(arg[1] or "100000")) or 100000
local size = math.tointeger(tonumber(arg[2] or "10")) or 10
local payload = ("p"):rep(size)

local function ponger()
  while true do
    local from, data = lpvm.receive()
    if from == "stop" then return end
    lpvm.send(from, data)
  end
end

local pong = lpvm.spawn(ponger)
local me = lpvm.self()
local t0 = lpvm.now()
for _ = 1, rounds do
  lpvm.send(pong, me, payload)
  lpvm.receive()
end
local dt = lpvm.now() - t0
lpvm.send(pong, "stop")
print(string.format("pingpong: %d round trips of %d bytes in %d ms (%.3f us a round trip)",
                    rounds, size, dt, dt * 1000 / rounds))
