-- node_b.lua -- node b of the cluster example: started with --sname by main.lua.
local parent = ...
lpvm.register("b", lpvm.self())
lpvm.send({"main", parent}, "b_up", lpvm.node())
lpvm.receive(function(t) return t == "halt" end)
lpvm.halt(0)
