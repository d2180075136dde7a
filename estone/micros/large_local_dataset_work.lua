-- large_local_dataset_work: the trav and lists work while this process holds a large
-- live data set (very_big(50)), which its garbage collector keeps walking. The time to
-- build the data set is not counted.
local C = require("micros.common")
return function(loops)
  local minus, data = C.tc(C.very_big, 50)
  C.trav(loops)
  C.lists(loops)
  assert(#data == 16)      -- keep the data set alive to the end
  return minus
end
