-- alloc: allocation and deallocation. Per loop, 14 very_big(2) terms made and dropped.
local C = require("micros.common")
local vb = C.very_big
return function(loops)
  for _ = 1, loops do
    local _x11, _x12, _x13 = vb(2), vb(2), vb(2)
    local _z = { vb(2), vb(2), vb(2) }
    local _x17, _x18, _x19, _x20 = vb(2), vb(2), vb(2), vb(2)
    local _x21, _x22, _x23, _x24 = vb(2), vb(2), vb(2), vb(2)
  end
  return 0
end
