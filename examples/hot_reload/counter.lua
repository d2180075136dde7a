-- counter.lua, version 1: a counting server written the Erlang way. Every message
-- goes through M.handle and the loop goes on with `return M.loop(...)` (a tail call,
-- Erlang's ?MODULE:loop()), so after a reload the next message runs the new code
-- and no frame of the old version stays on the server's stack.
local M = {}

function M.start()
  return lpvm.spawn(function() return M.loop(0) end)
end

function M.handle(count, msg, from)
  if msg == "incr" then return count + 1 end
  if msg == "get" then lpvm.send(from, "count", count, "v1 says hello") end
  return count
end

function M.loop(count)
  local msg, from = lpvm.receive()
  if msg == "stop" then return end
  return M.loop(M.handle(count, msg, from))
end

return M
