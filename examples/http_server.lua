-- http_server.lua -- an HTTP/1.1 server: a pool of acceptors, one process per connection.
--
--   lpvm [--workers N] examples/http_server.lua [--port 8080] [--host 127.0.0.1]
--        [--acceptors 16] [--idle 30000] [--header_timeout 10000]
--        [--max_connections N]
--
-- It serves the page of the luaproc report's HTTP benchmark (seed 002, section 5.2):
-- a dynamically generated HTML page with the numbers 1 to 5,000, built anew for every
-- request. GET and HEAD on / (or /index.html); anything else on another path is 404,
-- a request that does not parse is 400 (and the connection closes), another method
-- on / is 405. Keep-alive is HTTP/1.1's default; "Connection: close" and HTTP/1.0
-- without "Connection: keep-alive" close after the response. A connection idle for
-- --idle ms is closed. A client that disconnects mid-request only ends its own
-- process (docs/lua-ports.md walks through this file).
--
-- Slow and greedy clients (slowloris): a request's head (request line and headers)
-- must arrive within --header_timeout ms, or the answer is 408 and the connection
-- closes (Erlang's inets and Cowboy have the same deadline: a client trickling a
-- byte a second no longer holds a connection for ever). At most --max_connections
-- connections are served at once (inets's max_clients): one more is answered 503
-- and closed at once, so the VM never runs out of descriptors. The default is
-- 1024, or less if the descriptor limit (ulimit -n) is lower.

-- The soft limit on open descriptors, from /proc (nil if it cannot be read).
local function fd_limit()
  local f = io.open("/proc/self/limits")
  if not f then return nil end
  local t = f:read("a")
  f:close()
  return tonumber(t:match("Max open files%s+(%d+)"))
end

local opts = { port = 8080, host = "127.0.0.1", acceptors = 16, idle = 30000,
               header_timeout = 10000,
               -- keep 64 descriptors for the VM itself and the listener
               max_connections = math.max(16, math.min(1024, (fd_limit() or 1088) - 64)) }
do
  local args = { ... }
  local i = 1
  while i <= #args do
    local k = args[i]:match("^%-%-([%w_]+)$")
    if not k or opts[k] == nil or args[i + 1] == nil then
      io.stderr:write("usage: http_server.lua [--port N] [--host ADDR] [--acceptors N] " ..
                      "[--idle MS] [--header_timeout MS] [--max_connections N]\n")
      os.exit(1)
    end
    opts[k] = type(opts[k]) == "number" and assert(tonumber(args[i + 1]), k) or args[i + 1]
    i = i + 2
  end
end

-- The connection count: each handler asks ("conn", pid) and gets "ok" or "full";
-- its DOWN frees the place. One process, so the cap is exact across acceptors.
local function limiter(max)
  local n = 0
  while true do
    local tag, who = lpvm.receive()
    if tag == "conn" then
      if n < max then
        n = n + 1
        lpvm.monitor(who)
        lpvm.send(who, "ok")
      else
        lpvm.send(who, "full")
      end
    elseif tag == "DOWN" then
      n = n - 1
    end
  end
end

-- An acceptor process. A spawned function takes copies of its upvalues, and
-- functions cannot be copied, so the connection handler is defined in here and
-- uses no function upvalues of its own.
local function acceptor(listener, limits, idle_ms, header_ms)
  local function connection()
    local MAX_HEAD = 16384                 -- request line and headers
    local MAX_BODY = 1 << 20
    local conn = lpvm.receive()            -- sent once the connection is ours
    local buf = ""
    lpvm.send(limits, "conn", lpvm.self())
    -- (bounded: were the limiter ever gone, a connection would be refused, not hang)
    local place = lpvm.receive(function(v) return v == "ok" or v == "full" end, 5000) or "full"

    -- The page, built anew for every request: the numbers 1 to 5,000, one a line.
    -- string.format writes 100 lines a call, in C; `i .. "<br>\n"` per number made
    -- two Lua strings a line (the number's, then the line's) and the page cost twice
    -- the instructions (docs/performance.md, "HTTP").
    local lines100 = string.rep("%d<br>\n", 100)
    local function page()
      local t, seq = { "<html><head><title>lpvm</title></head><body>\n" }, {}
      for base = 0, 4900, 100 do
        for i = 1, 100 do seq[i] = base + i end
        t[#t + 1] = string.format(lines100, table.unpack(seq, 1, 100))
      end
      t[#t + 1] = "</body></html>\n"
      return table.concat(t)
    end

    local reasons = { [200] = "OK", [400] = "Bad Request", [404] = "Not Found",
                      [405] = "Method Not Allowed", [408] = "Request Timeout",
                      [413] = "Payload Too Large",
                      [431] = "Request Header Fields Too Large",
                      [501] = "Not Implemented", [503] = "Service Unavailable",
                      [505] = "HTTP Version Not Supported" }

    -- Returns false if the client is gone.
    local function respond(status, body, keep, head_only, extra)
      local hdr = string.format(
        "HTTP/1.1 %d %s\r\nServer: lpvm\r\nContent-Type: text/html\r\n" ..
        "Content-Length: %d\r\n%s%s\r\n",
        status, reasons[status], #body, keep and "" or "Connection: close\r\n", extra or "")
      return lpvm.port_send(conn, head_only and hdr or { hdr, body }) ~= nil
    end

    local extra_hdr = { [405] = "Allow: GET, HEAD\r\n", [503] = "Retry-After: 1\r\n" }
    local function fail(status)
      respond(status, "<html><body>" .. status .. " " .. reasons[status] .. "</body></html>\n",
              false, false, extra_hdr[status])
      lpvm.port_close(conn)
    end

    -- More bytes into buf, waiting at most ms; nil, why when the client has gone,
    -- went quiet or quit (why: "timeout" if it went quiet).
    local function fill(ms)
      local data, why = lpvm.recv(conn, 0, ms)
      if not data then return nil, why end
      buf = buf .. data
      return true
    end

    if place == "full" then return fail(503) end
    local first = true
    while true do
      -- the head: request line and headers, up to the blank line, within header_ms
      -- of the connection's start (first request) or of its first byte (the next
      -- ones: between requests a keep-alive connection may idle for idle_ms)
      local deadline = (first or #buf > 0) and lpvm.now() + header_ms or nil
      first = false
      local head_end = buf:find("\r\n\r\n", 1, true)
      while not head_end do
        if #buf > MAX_HEAD then return fail(431) end
        local seen = #buf
        local wait = deadline and math.min(deadline - lpvm.now(), idle_ms) or idle_ms
        if wait <= 0 then return fail(408) end
        local ok, why = fill(wait)
        if not ok then
          if why == "timeout" and deadline then return fail(408) end
          return lpvm.port_close(conn, 0)
        end
        deadline = deadline or lpvm.now() + header_ms
        head_end = buf:find("\r\n\r\n", math.max(1, seen - 3), true)
      end
      local head = buf:sub(1, head_end - 1)
      buf = buf:sub(head_end + 4)
      local method, target, major, minor =
        head:match("^[^\r\n]*"):match("^(%u+) (%S+) HTTP/(%d)%.(%d)$")
      if not method then return fail(400) end
      if major ~= "1" then return fail(505) end
      local hdrs = {}
      for line in head:gmatch("\r\n([^\r\n]*)") do
        local k, v = line:match("^([%w!#$%%&'*+.^_`|~-]+):[ \t]*(.-)[ \t]*$")
        if not k then return fail(400) end
        hdrs[k:lower()] = v
      end
      -- a body is read and ignored; chunked request bodies are not supported
      if hdrs["transfer-encoding"] then return fail(501) end
      local len = hdrs["content-length"]
      if len then
        len = len:match("^%d+$") and tonumber(len)
        if not len then return fail(400) end
        if len > MAX_BODY then return fail(413) end
        while #buf < len do
          if not fill(idle_ms) then return lpvm.port_close(conn, 0) end
        end
        buf = buf:sub(len + 1)
      end
      local conn_hdr = (hdrs["connection"] or ""):lower()
      local keep
      if minor == "0" then keep = conn_hdr:find("keep-alive", 1, true) ~= nil
      else keep = conn_hdr:find("close", 1, true) == nil end
      local path = target:match("^[^?#]*")
      local ok
      if path ~= "/" and path ~= "/index.html" then
        ok = respond(404, "<html><body>404 Not Found</body></html>\n", keep, method == "HEAD")
      elseif method ~= "GET" and method ~= "HEAD" then
        return fail(405)
      else
        ok = respond(200, page(), keep, method == "HEAD",
                     keep and minor == "0" and "Connection: keep-alive\r\n" or nil)
      end
      if not ok then return end            -- the client is gone
      if not keep then return lpvm.port_close(conn) end
    end
  end

  while true do
    local conn, why = lpvm.tcp_accept(listener)
    if conn then
      local pid = lpvm.spawn(connection)
      lpvm.controlling_process(conn, pid)
      lpvm.send(pid, conn)
    elseif why == "closed" then
      return
    else
      lpvm.sleep(10)   -- out of descriptors and the like: the listener backs off too
    end
  end
end

-- Connections start passive (active = false): nothing is read until their own
-- process asks, so handing them over loses nothing.
local listener, port = lpvm.tcp_listen(opts.host, opts.port,
                                       { active = false, backlog = 1024 })
if not listener then
  io.stderr:write("http_server: cannot listen on ", opts.host, ":", opts.port, ": ", port, "\n")
  os.exit(1)
end
local limits = lpvm.spawn(limiter, opts.max_connections)
for _ = 1, opts.acceptors do
  lpvm.spawn(acceptor, listener, limits, opts.idle, opts.header_timeout)
end
print(string.format("http server on http://%s:%d/ (%d acceptors, at most %d connections)",
                    opts.host, port, opts.acceptors, opts.max_connections))
io.stdout:flush()
lpvm.receive()   -- the listener lives as long as this process
