-- echo_server.lua -- a TCP echo server: a pool of acceptors, one process per connection.
--
--   lpvm examples/echo_server.lua [--port 7000] [--host 127.0.0.1] [--acceptors 4]
--   (then: nc 127.0.0.1 7000)
--
-- The listener gives every connection it accepts `active = false`, so nothing is read
-- until the connection's own process asks: the acceptor can hand the connection over
-- (controlling_process) without a byte going to the wrong process. The handler then
-- reads with `active = "once"`: one message per request for more, so a client that
-- sends faster than it reads back is pushed back by TCP instead of filling memory
-- (port_send also waits while the connection's write queue is over its mark).

local opts = { port = 7000, host = "127.0.0.1", acceptors = 4 }
do
  local args = { ... }
  local i = 1
  while i <= #args do
    local k = args[i]:match("^%-%-(%w+)$")
    if not k or opts[k] == nil or args[i + 1] == nil then
      io.stderr:write("usage: echo_server.lua [--port N] [--host ADDR] [--acceptors N]\n")
      os.exit(1)
    end
    opts[k] = type(opts[k]) == "number" and assert(tonumber(args[i + 1]), k) or args[i + 1]
    i = i + 2
  end
end

-- An acceptor process. Everything a spawned function uses must travel with it
-- (upvalues are copied; functions cannot be), so the connection handler is
-- defined inside, with no function upvalues of its own.
local function acceptor(listener)
  -- One connection: echo until the client closes its side.
  local function connection()
    local conn = lpvm.receive()   -- sent by the acceptor once it is ours
    lpvm.set_active(conn, "once")
    while true do
      local tag, _, data = lpvm.receive(function(_, p) return p == conn end)
      if tag == "data" then
        if not lpvm.port_send(conn, data) then return end
        lpvm.set_active(conn, "once")
      elseif tag == "eof" then
        lpvm.port_close(conn)   -- what is queued is written first
        return
      else
        return                  -- "error", "closed": the port is gone
      end
    end
  end

  while true do
    local conn, why = lpvm.tcp_accept(listener)
    if not conn then
      if why == "closed" then return end
      lpvm.sleep(10)            -- emfile and the like: the listener backs off too
    else
      local pid = lpvm.spawn(connection)
      lpvm.controlling_process(conn, pid)
      lpvm.send(pid, conn)
    end
  end
end

local listener, port = lpvm.tcp_listen(opts.host, opts.port, { active = false, backlog = 1024 })
if not listener then
  io.stderr:write("echo_server: cannot listen on ", opts.host, ":", opts.port, ": ", port, "\n")
  os.exit(1)
end
for _ = 1, opts.acceptors do lpvm.spawn(acceptor, listener) end
print(string.format("echo server on %s:%d (%d acceptors)", opts.host, port, opts.acceptors))
io.stdout:flush()
lpvm.receive()   -- the listener lives as long as this process
