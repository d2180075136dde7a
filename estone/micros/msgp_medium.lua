-- msgp_medium: medium messages. A chain of 4 processes passes
-- {self(), funky_stuff, baby, {1, [123, true, []], "abcdef"}} 100 times a loop.
local C = require("micros.common")
local chain = require("micros.chain")
return function(loops) return chain.run(loops, 4, C.big()) end
