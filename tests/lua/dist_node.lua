-- dist_node.lua -- a second lpvm node for test_dist2.lua: lpvm dist_node.lua NAME
-- COOKIE PARENT_NODE. Says hello to the parent's lpvm_test process, then serves:
-- "echo" sends a value back, "call" calls a function that came in the message (with
-- --no-remote-code that message is plain data: "graph_as_data" sends it back), "race"
-- connects back to the parent at the moment the parent connects to it.
local name, cookie, parent = ...
assert(lpvm.net_start(name, {cookie = cookie, ticktime = 2}))
lpvm.register("nodeb", lpvm.self())
local f = io.open("/proc/self/stat")
local ospid = f:read("n")
f:close()
lpvm.send({"lpvm_test", parent}, "hello_b", lpvm.self(), lpvm.node(), ospid)
while true do
  local t, from, x = lpvm.receive()
  if t == "echo" then lpvm.send(from, "echo_b", x, lpvm.node())
  elseif t == "call" then   -- a function in a message: called here if it loaded
    if type(x) == "function" then lpvm.send(from, "called", x(), lpvm.node())
    else lpvm.send(from, "not_called", type(x), lpvm.node()) end
  elseif t == "lpvm_graph" then   -- with --no-remote-code: {"call", from, function term}
    lpvm.send(from[2], "graph_as_data", from)
  elseif t == "race" then   -- test_dist2's simultaneous connect: x = {round, deadline}
    local k, at = x[1], x[2]
    lpvm.monitor_node(parent)
    lpvm.send(from, "race_ready", k)
    lpvm.receive(function(m, n) return m == "nodedown" and n == parent end, 5000)
    local wait = at + (k * 3) % 4 - lpvm.now()   -- a few ms apart, seeded by the round
    if wait > 0 then lpvm.sleep(wait) end
    lpvm.send({"lpvm_test", parent}, "race_ping", k)   -- connects, as A does now
    local got = lpvm.receive(function(m, kk) return m == "race_ping" and kk == k end, 15000)
    lpvm.send({"lpvm_test", parent}, "race_done", k, got ~= nil)
  elseif t == "stop" then break end
end
lpvm.halt(0)
