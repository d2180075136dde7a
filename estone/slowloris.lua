-- slowloris.lua -- N connections that trickle a request head that never ends (one
-- byte a second each), and a legitimate GET every 5 s: its status and time. Run
-- against examples/http_server.lua (docs/lua-ports.md, "The connection cap"):
--
--   (ulimit -n 512; build/lpvm examples/http_server.lua --port 8080) &
--   (ulimit -n 4096; build/lpvm estone/slowloris.lua 8080 1000)
local port = tonumber(arg[1])
local N = tonumber(arg[2] or 1000)
local slow, opened = {}, 0
for i = 1, N do
  local c = lpvm.tcp_connect("127.0.0.1", port, { timeout = 2000 })
  if c then opened = opened + 1; slow[#slow + 1] = c; lpvm.port_send(c, "GET / HTTP/1.1\r\nX: ") end
end
local function get()
  local t0 = lpvm.now()
  local c = lpvm.tcp_connect("127.0.0.1", port, { active = false, timeout = 5000 })
  if not c then return "connect failed", lpvm.now() - t0 end
  lpvm.port_send(c, "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
  local got = ""
  while true do local d = lpvm.recv(c, 0, 30000); if not d then break end; got = got .. d end
  lpvm.port_close(c, 0)
  return got:match("^HTTP/1%.1 (%d+)") or "no answer", lpvm.now() - t0
end
print("opened", opened)
local t0 = lpvm.now()
for round = 1, 30 do
  for _, c in ipairs(slow) do lpvm.port_send(c, "x", { nosuspend = true }) end
  if round % 5 == 1 then
    print(string.format("t=%5d ms  GET -> %s in %d ms", lpvm.now() - t0, get()))
  end
  lpvm.sleep(1000)
end
local alive = 0
for _, c in ipairs(slow) do if lpvm.port_send(c, "x") then alive = alive + 1 end end
print("slow connections still accepted writes:", alive)
lpvm.halt(0)
