-- counter.lua, version 2: same state, new behaviour ("decr", another greeting).
local M = {}

function M.start()
  return lpvm.spawn(function() return M.loop(0) end)
end

function M.handle(count, msg, from)
  if msg == "incr" then return count + 1 end
  if msg == "decr" then return count - 1 end
  if msg == "get" then lpvm.send(from, "count", count, "v2 says hello") end
  return count
end

function M.loop(count)
  local msg, from = lpvm.receive()
  if msg == "stop" then return end
  return M.loop(M.handle(count, msg, from))
end

return M
