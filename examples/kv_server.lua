-- kv_server.lua -- a key-value store as a gen_server (docs/otp.md).
--
--   lpvm examples/kv_server.lua
--
-- Like an Erlang module, this file holds both the client API (start_link, put, get,
-- ...) and the gen_server callbacks. The server process loads it by name with
-- require (the boot script's folder is on every process's package.path); run as a
-- script, it also runs the demo at the bottom.
local gen_server = require "gen_server"

local kv = {}

-- ---- client API ---------------------------------------------------------------

function kv.start_link(name)
  return gen_server.start_link("kv_server", {}, { name = name })
end

function kv.put(server, key, value) return gen_server.call(server, { "put", key, value }) end
function kv.get(server, key) return gen_server.call(server, { "get", key }) end
function kv.delete(server, key) gen_server.cast(server, { "delete", key }) end
-- Wait until `key` is set (a deferred reply), at most timeout ms.
function kv.wait_for(server, key, timeout) return gen_server.call(server, { "wait_for", key }, timeout) end

-- ---- callbacks ----------------------------------------------------------------

function kv.init()
  return "ok", { data = {}, waiting = {} }
end

function kv.handle_call(req, from, st)
  local op, key = req[1], req[2]
  if op == "put" then
    local old = st.data[key]
    st.data[key] = req[3]
    for _, f in ipairs(st.waiting[key] or {}) do gen_server.reply(f, req[3]) end
    st.waiting[key] = nil
    return "reply", old, st
  elseif op == "get" then
    return "reply", st.data[key], st
  elseif op == "wait_for" then
    if st.data[key] ~= nil then return "reply", st.data[key], st end
    st.waiting[key] = st.waiting[key] or {}
    table.insert(st.waiting[key], from)     -- answered by a later put
    return "noreply", st
  end
  return "reply", nil, st
end

function kv.handle_cast(req, st)
  if req[1] == "delete" then st.data[req[2]] = nil end
  return "noreply", st
end

function kv.terminate(reason, st)
  local n = 0
  for _ in pairs(st.data) do n = n + 1 end
  print(string.format("kv: terminating (%s) with %d keys", tostring(reason), n))
end

if (...) == "kv_server" then return kv end   -- required: just the module

-- ---- the demo (run as a script) --------------------------------------------------
local pid = assert(kv.start_link("kv"))
print("started", pid == lpvm.whereis("kv"))
print("put a ->", kv.put("kv", "a", 1))
print("put a ->", kv.put("kv", "a", 2))
print("get a ->", kv.get("kv", "a"))
kv.delete("kv", "a")
print("get a ->", kv.get("kv", "a"))

-- a client waits for a key another one sets later
lpvm.spawn(function(parent)
  local k = require "kv_server"
  lpvm.send(parent, "waited", k.wait_for("kv", "ready", 2000))
end, lpvm.self())
lpvm.sleep(20)
kv.put("kv", "ready", "yes")
print("waiter got", select(2, lpvm.receive(2000)))

-- a call that times out raises "timeout"; its late reply never arrives
print("wait_for missing ->", pcall(kv.wait_for, "kv", "missing", 50))
print("get from a server that does not exist ->", pcall(kv.get, "nobody", "a"))

gen_server.stop("kv")
print("stopped", lpvm.whereis("kv"))
