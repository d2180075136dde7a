-- ets: Erlang's "ets datadictionary" micro on lpvm's ETS (require "ets", docs/ets.md).
-- Per loop, as estone_SUITE.erl's ets/1: make a set and a private bag; in each, for
-- Beg = 20..39 with J = 1, insert {Beg, J}, {J, Beg}, {{foo, Beg}, J}, {{foo, J}, Beg},
-- delete the absent key haha, match_delete {k, j}, match {Beg, '$1'} and {'$1', J},
-- delete Beg, then first and next; delete both tables. Atoms are Lua strings and the
-- tuple keys {foo, N} Lua arrays, which is how lpvm writes such terms.
local ets = require "ets"
local insert, delete, match, match_delete = ets.insert, ets.delete, ets.match, ets.match_delete
local first, next_key = ets.first, ets.next

local function run_tab(tab, beg, stop, j)
  while beg ~= stop do
    insert(tab, { beg, j })
    insert(tab, { j, beg })
    insert(tab, { { "foo", beg }, j })
    insert(tab, { { "foo", j }, beg })
    delete(tab, "haha")
    match_delete(tab, { "k", "j" })
    match(tab, { beg, "$1" })
    match(tab, { "$1", j })
    delete(tab, beg)
    local k = first(tab)
    next_key(tab, k)
    beg = beg + 1
  end
end

return function(loops)
  for _ = 1, loops do
    local t1 = ets.new("a", { "set" })
    local t2 = ets.new("c", { "bag", "private" })
    run_tab(t1, 20, 40, 1)
    run_tab(t2, 20, 40, 1)
    delete(t1)
    delete(t2)
  end
  return 0
end
