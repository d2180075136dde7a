-- tcp_echo.lua -- an echo server for the TCP tests (test_ports.lua, test_poll.lua):
--   local echo_server = dofile(dir .. "tcp_echo.lua")
--   local listener, port = echo_server(pool)
-- `pool` acceptor processes share the listener; each connection gets a handler of its
-- own that sends every chunk back (active once), and closes at the client's eof.
local function echo_server(pool)
  local l, port = assert(lpvm.tcp_listen("127.0.0.1", 0, { active = false, backlog = 1024 }))
  for _ = 1, pool do
    lpvm.spawn(function()
      while true do
        local c = lpvm.tcp_accept(l)
        if not c then return end
        -- the handler: active once, every chunk sent back (port_send waits while
        -- the connection is busy, so a slow client slows its handler down)
        local h = lpvm.spawn(function()
          local c2 = lpvm.receive()
          lpvm.set_active(c2, "once")
          while true do
            local tag, _, d = lpvm.receive(function(_, q) return q == c2 end)
            if tag == "data" then
              lpvm.port_send(c2, d)
              lpvm.set_active(c2, "once")
            elseif tag == "eof" then
              lpvm.port_close(c2)
              return
            else
              return
            end
          end
        end)
        lpvm.controlling_process(c, h)
        lpvm.send(h, c)
      end
    end)
  end
  return l, port
end

return echo_server
