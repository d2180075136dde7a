-- dist_node.lua -- a second lpvm node for test_dist2.lua: lpvm dist_node.lua NAME
-- COOKIE PARENT_NODE. Says hello to the parent's lpvm_test process, then serves.
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
  elseif t == "stop" then break end
end
lpvm.halt(0)
