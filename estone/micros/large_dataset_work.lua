-- large_dataset_work: the trav and lists work while 2 other processes each hold a
-- large data set (3 x very_big(50)) and sleep in receive. The time to make them is
-- not counted.
local C = require("micros.common")

-- big_proc(Dir, Top): build the data, say yes, wait for stop.
local function big_proc(dir, top)
  package.path = dir .. "/?.lua;" .. package.path
  local vb = require("micros.common").very_big
  local x, y, z = vb(50), vb(50), vb(50)
  local from = lpvm.receive()
  lpvm.send(from, lpvm.self(), "yes")
  lpvm.receive()              -- stop
  return #x + #y + #z
end

return function(loops, ctx)
  local me = lpvm.self()
  local minus, procs = C.tc(function()
    local ps = {}
    for i = 1, 2 do
      local p = lpvm.spawn(big_proc, ctx.dir, me)
      lpvm.send(p, me)
      lpvm.receive(function(who, yes) return who == p and yes == "yes" end)
      ps[i] = p
    end
    return ps
  end)
  C.trav(loops)
  C.lists(loops)
  C.send_procs(procs, "stop")
  return minus
end
