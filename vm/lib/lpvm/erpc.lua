-- lpvm.erpc: what rpc:call(LpvmNode, M, F, A) runs here. OTP's rpc:call spawns
-- erpc:execute_call(Ref, M, F, A) on the target node and reads the result from the
-- process's exit reason {Ref, return, Result}; lpvm runs require(M)[F](A...) in that
-- process instead (an error becomes {Ref, error, Message, []}, which erpc raises).
-- rpc:cast and erpc:cast spawn erpc:execute_cast(M, F, A): the call, no answer.
local M = {}

-- An error ends the process with a crash report here, as erl logs the cast's error.
function M.execute_cast(m, f, args)
  local mod = require(m)
  local fn = type(mod) == "table" and mod[f] or nil
  if type(fn) ~= "function" then error("undef: " .. tostring(m) .. "." .. tostring(f), 0) end
  fn(table.unpack(args or {}))
end

function M.execute_call(ref, m, f, args)
  local ok, res = pcall(function()
    local mod = require(m)
    local fn = type(mod) == "table" and mod[f] or nil
    if type(fn) ~= "function" then error("undef: " .. tostring(m) .. "." .. tostring(f), 0) end
    return fn(table.unpack(args or {}))
  end)
  -- The result leaves as the exit reason, the protocol's way, but that is no failure:
  -- an exit signal to oneself ends the process with it without a crash report (a
  -- process's own exit(reason) gets one), as erl logs nothing for erpc's exits.
  local reason = lpvm._erpc_result(ref, ok, res)
  lpvm.trap_exit(false)
  lpvm.exit(lpvm.self(), reason)
  lpvm.receive()   -- the signal ends the process here
end

return M
