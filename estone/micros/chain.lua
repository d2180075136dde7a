-- micros/chain.lua -- the message chain shared by msgp, msgp_medium and msgp_huge.
--
-- Per loop: spawn a chain of `len` processes ending at the caller, pass a
-- {self(), {message, Msg}} term down it 100 times (each waits for the previous to
-- come back round), then send stop down the chain and wait for it to return.
local M = {}

-- p1(To): forward {From, {message, X}} as {self(), {message, X}}; pass stop on and end.
local function p1(to)
  local me = lpvm.self()
  while true do
    local from, tag, x = lpvm.receive()
    if from == "stop" then
      lpvm.send(to, "stop")
      return
    end
    lpvm.send(to, me, tag, x)
  end
end
M.p1 = p1

function M.run(loops, len, msg)
  local me = lpvm.self()
  for _ = 1, loops do
    local p = me
    for _ = 1, len do p = lpvm.spawn(p1, p) end
    for _ = 1, 100 do
      lpvm.send(p, me, "message", msg)
      local _, tag = lpvm.receive()
      assert(tag == "message", "chain: unexpected message")
    end
    lpvm.send(p, "stop")
    assert(lpvm.receive() == "stop", "chain: stop did not come back")
  end
  return 0
end

return M
