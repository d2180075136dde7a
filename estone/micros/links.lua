-- links: managing many links. 100 processes, spawn_linked to this one and trapping
-- exits, each get the list of all 100 and walk it I times, linking to and unlinking
-- from the others in turn; each then reports back.
local C = require("micros.common")

local function lproc(top)
  lpvm.trap_exit(true)
  local procs, i
  while true do   -- skip EXIT messages until the work order comes
    local tag, a, b = lpvm.receive()
    if tag == "procs" then procs, i = a, b; break end
  end
  local link, unlink = lpvm.link, lpvm.unlink
  local op = "link"
  while i > 0 do
    for k = 1, #procs do
      if op == "link" then link(procs[k]); op = "unlink"
      else unlink(procs[k]); op = "link" end
    end
    op = (op == "link") and "unlink" or "link"
    i = i - 1
  end
  lpvm.send(top, lpvm.self(), "done")
end

return function(loops)
  local me = lpvm.self()
  local l = {}
  for k = 1, 100 do l[k] = lpvm.spawn_link(lproc, me) end
  C.send_procs(l, "procs", l, loops)
  C.wait_for_pids(l)
  return 0
end
