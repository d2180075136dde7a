-- msgp: small messages. A chain of 4 processes passes {self(), true} 100 times a loop.
local C = require("micros.common")
local chain = require("micros.chain")
return function(loops) return chain.run(loops, 4, C.small()) end
