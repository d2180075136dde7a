-- lpvm.remsh: the node's side of a remote shell (lpvm --remsh node). One process per
-- attached shell: it evaluates each chunk the shell sends in its own globals (so
-- variables live from line to line), sends back what `print` writes and the results
-- shown as the local shell shows them, and ends when the shell goes away.
local shell = require("lpvm_shell")
local M = {}

function M.main(client)
  local mon = lpvm.monitor(client)
  _G.print = function(...)
    local t = {}
    for i = 1, select("#", ...) do t[i] = tostring((select(i, ...))) end
    lpvm.send(client, "$remsh_out", table.concat(t, "\t") .. "\n")
  end
  while true do
    local tag, src = lpvm.receive(function(t, r)
      return t == "eval" or (t == "DOWN" and r == mon)
    end)
    if tag == "DOWN" then return end
    local f, err = shell.compile(src)
    if not f then
      lpvm.send(client, "$remsh_result", false, err)
    else
      local r = table.pack(xpcall(f, shell.handler))
      if r[1] then
        local out = {}
        for i = 2, r.n do out[#out + 1] = shell.show(r[i]) end
        lpvm.send(client, "$remsh_result", true, table.concat(out, "\t"))
      else
        lpvm.send(client, "$remsh_result", false, tostring(r[2]))
      end
    end
  end
end

return M
