-- lists: list manipulation. Per loop, reverse a 39-element list 10 times and append a
-- 10-element list to it 10 times (arrays; every result is a new table).
local C = require("micros.common")
return function(loops) return C.lists(loops) end
