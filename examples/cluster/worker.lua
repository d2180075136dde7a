-- worker.lua -- the module the cluster example runs on node b (by remote spawn) and
-- that erl can call: rpc:call('b@host', worker, square, [7]).
local M = {}

function M.square(x) return x * x end

-- main(parent): serve {"square", from, x} requests until "stop".
function M.main(parent)
  lpvm.send(parent, "ready", lpvm.self(), lpvm.node())
  while true do
    local op, from, x = lpvm.receive()
    if op == "square" then lpvm.send(from, "result", x, M.square(x), lpvm.node())
    elseif op == "stop" then return end
  end
end

return M
