-- main.lua -- two lpvm nodes on this machine: lpvm examples/cluster/main.lua
--
-- This node (a) starts node b as another OS process (`lpvm --sname b node_b.lua`),
-- spawns a worker there by module name, asks it for squares, runs a function there,
-- links to the worker and watches node b go down. The Erlang equivalent is in docs/distribution.md.
local here = arg[0]:match("^(.*/)") or "./"
local ospid = io.open("/proc/self/stat"):read("n")
local tag = tostring(ospid)   -- names unique on this host
local cookie = "cluster" .. tag

assert(lpvm.net_start("a" .. tag, {cookie = cookie}))
lpvm.register("main", lpvm.self())
print("this node:", lpvm.node())

-- node b: a second lpvm VM that says hello to {main, a@host}
local exe = io.popen("readlink /proc/" .. ospid .. "/exe"):read("l")
-- (the running lpvm binary, for the child)
local port = assert(lpvm.open_port({exe, "--sname", "b" .. tag, "--cookie", cookie,
                                    here .. "node_b.lua", lpvm.node()}))
local _, bnode = lpvm.receive(function(t) return t == "b_up" end, 10000)
assert(bnode, "node b did not start")
print("node b is up:", bnode, "connected:", table.concat(lpvm.nodes(), ", "))

-- a worker on b, spawned by module name (its module must be on b's package.path)
local worker = assert(lpvm.spawn({node = bnode, link = true}, "worker", lpvm.self()))
lpvm.receive(function(t, p) return t == "ready" and p == worker end, 5000)
for x = 1, 5 do
  lpvm.send(worker, "square", lpvm.self(), x)
  local _, _, y, where = lpvm.receive(function(t) return t == "result" end, 5000)
  print(string.format("%d^2 = %d (computed on %s)", x, y, where))
end

-- a function spawned there: the closure travels as bytecode with its upvalues (add
-- and the body share `total`, over there too)
local total = 0
local function add(x) total = total + x return total end
lpvm.spawn({node = bnode}, function(parent, xs)
  for _, x in ipairs(xs) do add(x) end
  lpvm.send(parent, "sum", lpvm.node(), total)
end, lpvm.self(), {1, 2, 3})
local _, where, sum = lpvm.receive(function(t) return t == "sum" end, 5000)
print(string.format("a function on %s summed 1, 2, 3: %d (here total is still %d)", where,
                    sum, total))

-- node b goes away: the link and monitor_node say so, once each
lpvm.trap_exit(true)
lpvm.monitor_node(bnode)
lpvm.send({"b", bnode}, "halt")
print(lpvm.receive(function(t) return t == "EXIT" end, 10000))
print(lpvm.receive(function(t) return t == "nodedown" end, 10000))
lpvm.halt(0)
