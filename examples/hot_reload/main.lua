-- A live upgrade (docs/code.md): start a server from counter.lua, change the file
-- under it, reload, and watch the running server keep its state and take the new
-- code. Run: build/lpvm examples/hot_reload/main.lua
local code = lpvm.code
local here = arg[0]:match("^(.*/)") or "./"

local function copy(from, to)
  local src = assert(io.open(from, "rb")):read("a")
  local f = assert(io.open(to, "wb"))
  f:write(src)
  f:close()
end

-- Work on a copy, so the example can rewrite "its" module file.
local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p '" .. dir .. "'"))
copy(here .. "counter.lua", dir .. "/counter.lua")
package.path = dir .. "/?.lua;" .. package.path

local counter = require "counter"
local server = counter.start()
local me = lpvm.self()
local function get()
  lpvm.send(server, "get", me)
  local _, count, hello = lpvm.receive(function(tag) return tag == "count" end, 5000)
  return count, hello
end

for _ = 1, 3 do lpvm.send(server, "incr") end
print("before:", get())                           --> 3   v1 says hello
print("loaded:", code.is_loaded("counter"), code.which("counter"))

-- The developer edits the file...
copy(here .. "counter_v2.lua", dir .. "/counter.lua")
print("modified:", table.concat(code.modified(), ", "))   --> counter
-- ...and reloads what changed (Erlang's shell: l(counter)).
for name, vsn in pairs(code.reload_changed()) do print("reloaded:", name, "version", vsn) end

-- The server is in receive inside version 1's loop: old code on its stack.
print("server runs old code:", code.check_process(server, "counter"))   --> true
lpvm.send(server, "decr")                         -- its next message runs version 2
print("after:", get())                            --> 2   v2 says hello
print("server runs old code:", code.check_process(server, "counter"))   --> false
print("old version purged:", code.soft_purge("counter"))                --> true

-- Look inside a running process from outside (ALua's console, skynet's inject).
local ok, n = lpvm.eval(server, function() return collectgarbage("count") > 0 end)
print("eval in the server:", ok, n)

lpvm.send(server, "stop")
os.remove(dir .. "/counter.lua")
os.remove(dir)
