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

return M
