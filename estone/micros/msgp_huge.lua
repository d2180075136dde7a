-- msgp_huge: huge messages. A chain of 2 processes passes very_big(15) (15 nested
-- levels of 16 elements) 100 times a loop.
local C = require("micros.common")
local chain = require("micros.chain")
return function(loops) return chain.run(loops, 2, C.very_big(15)) end
