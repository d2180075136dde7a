-- cg_micro.lua NAME LOOPS -- run EStone micro NAME (estone/micros/NAME.lua) for LOOPS
-- loops in a spawned process, as estone.lua does, and wait for it: the driver of
-- cg_msg.sh, which counts two run lengths under callgrind and differences them.
local dir = (arg and arg[0] or "estone/cg_micro.lua"):match("^(.*)/[^/]*$") or "."
local name = arg[1] or error("cg_micro.lua: argument 1 (micro name) expected")
local loops = math.tointeger(tonumber(arg[2]))
  or error("cg_micro.lua: argument 2 (loops) must be an integer")
local pid, ref = lpvm.spawn_monitor(function(d, n, k)
  package.path = d .. "/?.lua;" .. package.path
  local m = require("micros." .. n)
  local run = type(m) == "function" and m or m.run
  run(k, { dir = d })
end, dir, name, loops)
local _, _, _, _, reason = lpvm.receive(function(t, r) return t == "DOWN" and r == ref end)
if reason ~= "normal" then error("cg_micro.lua: " .. name .. " ended: " .. tostring(reason)) end
