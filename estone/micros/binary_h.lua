-- binary_h: binary handling. Per loop, 20 rounds of sending a 2000-byte binary (a Lua
-- string) 10 times to an echo process and taking the 10 echoes back, then 100 rounds
-- of split_binary, size, binary_to_list(Y, 1, 2) and a term round trip. lpvm gives
-- Lua no term_to_binary; string.pack/string.unpack of the term's fields stand in.
-- Spawning the echo process and making the binary are not counted.
local C = require("micros.common")

local function echo(pid)
  while true do lpvm.send(pid, (lpvm.receive())) end
end

local send, receive = lpvm.send, lpvm.receive
local sub, byte, pack, unpack = string.sub, string.byte, string.pack, string.unpack

local function echo_loop(p, i, b)
  for _ = 1, i do
    send(p, b); send(p, b); send(p, b); send(p, b); send(p, b)
    send(p, b); send(p, b); send(p, b); send(p, b); send(p, b)
    receive(); receive(); receive(); receive(); receive()
    receive(); receive(); receive(); receive(); receive()
  end
end

local FMT = "s1jjs1s1"
local function split_loop(b, term, i)
  while i > 0 do
    local x, y = sub(b, 1, i), sub(b, i + 1)
    local _ = #x
    _ = { byte(y, 1, 2) }
    _ = { unpack(FMT, pack(FMT, term[1], term[2], term[3], term[4], term[5])) }
    i = i - 1
  end
end

return function(loops)
  local t0 = C.clock_us()
  local p = lpvm.spawn(echo, lpvm.self())
  local b = string.rep("\5", 2000)
  local compensate = C.clock_us() - t0
  local term = { "abc", 1, 2222, tostring(lpvm.self()), "ancnd" }
  for _ = 1, loops do
    echo_loop(p, 20, b)
    split_loop(b, term, 100)
  end
  lpvm.exit(p, "kill")
  return compensate
end
