-- test_http_example.lua -- examples/http_server.lua against slow and greedy clients:
-- a request head that trickles in is cut off at --header_timeout (408, closed),
-- connections over --max_connections are answered 503 and closed, and a legitimate
-- request is still served. Loopback only; every wait is bounded.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

local EXAMPLE = (arg[0]:match("^(.*/)") or "./") .. "../../examples/http_server.lua"
local HEADER_MS, CAP = 1500, 4

-- Start the example (this very binary) on a free port; returns its port and number.
local function start_server(...)
  local srv = assert(lpvm.open_port({ "/proc/self/exe", "--workers", "2", EXAMPLE, "--port", "0",
                                      "--acceptors", "2", ... }, { packet = "line" }))
  local line = T.recv_match(function(tag, p) return tag == "data" and p == srv end, 20000)[3]
  local port = tonumber(line:match("http://127%.0%.0%.1:(%d+)/"))
  T.ok(port, line)
  return srv, port
end

-- One request on a fresh connection: the status code (nil if closed without one) and
-- the whole answer.
local function get(port)
  local c = assert(lpvm.tcp_connect("127.0.0.1", port, { active = false, timeout = 5000 }))
  lpvm.port_send(c, "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
  local got = ""
  while true do
    local data = lpvm.recv(c, 0, 20000)
    if not data then break end
    got = got .. data
  end
  lpvm.port_close(c, 0)
  return tonumber(got:match("^HTTP/1%.1 (%d+)")), got
end

test("GET / is the luaproc report's page: the numbers 1 to 5,000, one a line", function()
  local srv, port = start_server()
  local code, answer = get(port)
  T.eq(code, 200)
  local head, body = answer:match("^(.-\r\n)\r\n(.*)$")
  local t = { "<html><head><title>lpvm</title></head><body>\n" }
  for i = 1, 5000 do t[#t + 1] = i .. "<br>\n" end
  t[#t + 1] = "</body></html>\n"
  T.eq(body, table.concat(t), "the page")
  T.eq(tonumber(head:match("\r\nContent%-Length: (%d+)\r\n")), #body, "Content-Length")
  lpvm.port_close(srv, 0)
end)

test("a trickling head is cut at header_timeout; over the cap is 503; others are served", function()
  local srv, port = start_server("--header_timeout", tostring(HEADER_MS),
                                 "--max_connections", tostring(CAP), "--idle", "60000")
  T.eq(get(port), 200, "a plain request")
  -- CAP slow clients: a request head that never ends, one byte every 100 ms (each
  -- byte would reset an idle timeout: only a deadline on the head stops them)
  local slow, t0, open
  local function from_slow(_, p)
    for i = 1, CAP do if p == slow[i] then return true end end
    return false
  end
  for _ = 1, 20 do
    slow, t0, open = {}, lpvm.now(), CAP
    for i = 1, CAP do
      slow[i] = assert(lpvm.tcp_connect("127.0.0.1", port, { timeout = 5000 }))
      lpvm.port_send(slow[i], "GET / HTTP/1.1\r\nX-Slow: ")
    end
    -- the server may not have counted the plain request's end yet (its DOWN is on
    -- the way): then one of these got 503; close them and try again
    lpvm.sleep(200)
    if not lpvm.receive(from_slow, 0) then break end
    for i = 1, CAP do lpvm.port_close(slow[i], 0) end
    lpvm.sleep(100)
  end
  -- once the server counts them all, one more connection is refused with 503 (the
  -- first tries may still find a place: the slow ones register asynchronously)
  -- (tried until a deadline, not 20 times: a loaded machine registers them later)
  local refused
  local until_ms = lpvm.now() + math.max(20000, T.WAIT)
  repeat
    local code = get(port)
    if code == 503 or code == nil then refused = code or "closed"; break end
    lpvm.sleep(50)
  until lpvm.now() > until_ms
  T.ok(refused, "a connection over the cap was refused")
  T.eq(refused, 503, "refused with an answer")
  -- keep trickling until the server drops them all (bounded: 30 s)
  local answers, closed_at = {}, {}
  while open > 0 and lpvm.now() - t0 < 30000 do
    for i = 1, CAP do
      if not closed_at[i] then lpvm.port_send(slow[i], "x", { nosuspend = true }) end
    end
    while true do
      local tag, p, data = lpvm.receive(from_slow, 0)
      if not tag then break end
      for i = 1, CAP do
        if p == slow[i] then
          if tag == "data" then answers[i] = (answers[i] or "") .. data end
          if tag == "closed" and not closed_at[i] then
            closed_at[i] = lpvm.now() - t0
            open = open - 1
          end
        end
      end
    end
    lpvm.sleep(100)
  end
  T.eq(open, 0, "every slow client was dropped")
  for i = 1, CAP do
    T.ok(closed_at[i] >= HEADER_MS - 100, "dropped at the deadline, not before: " .. closed_at[i])
    T.ok((answers[i] or ""):match("^HTTP/1%.1 408"), "answered 408: " .. T.show(answers[i]))
  end
  -- the places are free again: a legitimate request is served
  local code
  until_ms = lpvm.now() + math.max(20000, T.WAIT)
  repeat
    code = get(port)
    if code == 200 then break end
    lpvm.sleep(50)
  until lpvm.now() > until_ms
  T.eq(code, 200, "served after the slow clients were dropped")
  lpvm.port_close(srv, 0)
end)

test("keep-alive: between requests the connection idles without the head deadline", function()
  local srv, port = start_server("--header_timeout", "300", "--idle", "60000")
  local c = assert(lpvm.tcp_connect("127.0.0.1", port, { active = false, timeout = 5000 }))
  local function ask()
    lpvm.port_send(c, "HEAD / HTTP/1.1\r\nHost: t\r\n\r\n")
    local data = lpvm.recv(c, 0, 20000)
    return data and tonumber(data:match("^HTTP/1%.1 (%d+)"))
  end
  T.eq(ask(), 200)
  lpvm.sleep(800)   -- idle well past header_timeout: fine, no head has started
  T.eq(ask(), 200)
  lpvm.port_close(c, 0)
  lpvm.port_close(srv, 0)
end)

T.run()
