-- lpvm.dist: the Lua half of distribution (docs/distribution.md).
-- connect(node) waits for the handshake as net_kernel:connect_node/1 does.
local M = {}

function M.connect(node)
  local conn, why = lpvm._dist_conn(node, true)
  if conn == true then return true end          -- this node
  if not conn then return false, why end
  local mon = lpvm.monitor(conn)
  local ok = false
  lpvm.receive(function(tag, n, ...)
    if (tag == "nodeup" or tag == "nodedown") and n == node then
      ok = tag == "nodeup"
      return true
    end
    return tag == "DOWN" and n == mon
  end)
  lpvm.demonitor(mon)
  return ok
end

-- The answer to a spawn request: pid, or nil and the reason ("noconnection" when
-- the connection goes first).
function M.spawn_wait(node, ref)
  local conn = lpvm._dist_conn(node)
  local mon = type(conn) == "userdata" and lpvm.monitor(conn) or nil
  local res, got = nil, false
  lpvm.receive(function(tag, r, x)
    if tag == "$spawn_reply" and r == ref then
      res, got = x, true
      return true
    end
    return mon ~= nil and tag == "DOWN" and r == mon
  end)
  if mon then lpvm.demonitor(mon) end
  if not got then return nil, "noconnection" end
  if type(res) == "userdata" then return res end
  return nil, res
end

return M
