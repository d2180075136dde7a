-- bench_terms.lua SHAPE N -- EStone's message shapes between two processes, for
-- instruction counts (estone/cg_terms.sh): this process sends {self(), "message", M}
-- to an echo process N times, and the echo sends it back, as estone/micros/chain.lua
-- passes M along. SHAPE: none (M = nil, scalars only), small, big, huge (very_big(15),
-- msgp_huge's message). Each round trip is two messages, each encoded and decoded.
local dir = (arg and arg[0] or "estone/bench_terms.lua"):match("^(.*)/[^/]*$") or "."
local common = dofile(dir .. "/micros/common.lua")
local shape, n = arg[1] or "small", tonumber(arg[2] or "1000")
local msgs = {
  none = function() return nil end,
  small = common.small,
  big = common.big,
  huge = function() return common.very_big(15) end,
}
assert(msgs[shape], "bench_terms.lua: shape is none, small, big or huge")
local msg = msgs[shape]()
local me = lpvm.self()
local echo = lpvm.spawn(function()
  local self = lpvm.self()
  while true do
    local from, tag, x = lpvm.receive()
    if from == "stop" then return end
    lpvm.send(from, self, tag, x)
  end
end)
for _ = 1, n do
  lpvm.send(echo, me, "message", msg)
  local _, tag = lpvm.receive()
  assert(tag == "message", "bench_terms.lua: unexpected message")
end
lpvm.send(echo, "stop")
