-- lpvm.erpc: what rpc:call(LpvmNode, M, F, A) runs here. OTP's rpc:call spawns
-- erpc:execute_call(Ref, M, F, A) on the target node and reads the result from the
-- process's exit reason {Ref, return, Result}; lpvm runs require(M)[F](A...) in that
-- process instead (an error becomes {Ref, error, Message, []}, which erpc raises).
local M = {}

function M.execute_call(ref, m, f, args)
  local ok, res = pcall(function()
    local mod = require(m)
    local fn = type(mod) == "table" and mod[f] or nil
    if type(fn) ~= "function" then error("undef: " .. tostring(m) .. "." .. tostring(f), 0) end
    return fn(table.unpack(args or {}))
  end)
  lpvm.exit(lpvm._erpc_result(ref, ok, res))
end

return M
