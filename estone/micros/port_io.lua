-- port_io: port i/o. 5 processes each open their own `cat` port, then echo a 200-byte
-- command through it I times and a 5-byte command I times (each waits for the echo
-- before sending the next), close it and report back. Only the wait for the 5
-- processes is counted, not spawning them (as in Erlang).
--
-- The Lua port API: lpvm.open_port({"cat"}) -> port; lpvm.port_send(port, data);
-- the owner gets "data", port, bytes messages. cat is a byte stream, so an echo may
-- come back in several pieces: each command waits until all its bytes are back.
local C = require("micros.common")

local function ppp(top, i)
  local port = assert(lpvm.open_port({ "cat" }))
  local send = lpvm.port_send
  local function loop(cmd)
    local want = #cmd
    local function is_data(tag, p) return tag == "data" and p == port end
    for _ = 1, i do
      send(port, cmd)
      local got = 0
      while got < want do
        local _, _, bytes = lpvm.receive(is_data)
        got = got + #bytes
      end
    end
  end
  lpvm.receive(function(m) return m == "go" end)
  loop(string.rep("X", 200))
  loop("abcde")
  if lpvm.port_close then lpvm.port_close(port)
  elseif lpvm.close_port then lpvm.close_port(port)
  else lpvm.exit(port, "kill") end
  lpvm.send(top, lpvm.self(), "ok")
end

local M = {}
function M.available() return lpvm.open_port ~= nil and lpvm.port_send ~= nil end
M.why_not = "lpvm has no Lua port API yet (lpvm.open_port / lpvm.port_send)"

function M.run(loops)
  local me = lpvm.self()
  local t0 = C.clock_us()
  local pps = {}
  for k = 1, 5 do pps[k] = lpvm.spawn(ppp, me, loops) end
  C.send_procs(pps, "go")
  local before = C.clock_us() - t0
  C.wait_for_pids(pps)
  return before
end

return M
