-- test_ets_ints.lua -- ets.lookup by an integer key (vm/lmod_ets.c: an object of
-- integers is decoded under the lock into C integers, lpvm_ets_lookup_ints, and its
-- tables made in place; everything else the byte way): the answers are the same
-- whichever way a lookup takes, and every result is a fresh copy.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local ets = require "ets"

local function lookup_eq(tab, k, want)
  T.eq(T.show(ets.lookup(tab, k)), T.show(want))
end

test("an integer key's objects of every shape come back as inserted", function()
  for _, kind in ipairs({"set", "ordered_set", "bag", "duplicate_bag"}) do
    for _, opts in ipairs({{}, {read_concurrency = true, write_concurrency = true}}) do
      local o = {kind, "public"}
      for k, v in pairs(opts) do o[k] = v end
      local t = ets.new("ints", o)
      local rows = {
        {1, 2}, {2, 300, -5, -70000, 255, 256, -1, 0},
        {3, 2147483647, -2147483648}, {4, 2147483648}, {5, -2147483649},
        {6, 1.5}, {7, "x"}, {8, true}, {9, {1, 2}}, {10},
        {11, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},   -- 16 integers
        {12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},   -- 17
        {math.maxinteger, 1}, {math.mininteger, 2},
      }
      for _, r in ipairs(rows) do ets.insert(t, r) end
      for _, r in ipairs(rows) do lookup_eq(t, r[1], {r}) end
      lookup_eq(t, 13, {})
      lookup_eq(t, -1, {})
      if kind == "bag" or kind == "duplicate_bag" then
        ets.insert(t, {1, 3})
        lookup_eq(t, 1, {{1, 2}, {1, 3}})
      end
      ets.delete(t)
    end
  end
end)

test("1 and 1.0: distinct keys in a set, one key in an ordered_set", function()
  local s = ets.new("s", {"set"})
  ets.insert(s, {1.0, 5})
  lookup_eq(s, 1, {})
  ets.insert(s, {1, 6})
  lookup_eq(s, 1, {{1, 6}})
  T.eq(math.type(ets.lookup(s, 1)[1][1]), "integer")
  T.eq(math.type(ets.lookup(s, 1.0)[1][1]), "float")
  local o = ets.new("o", {"ordered_set"})
  ets.insert(o, {1.0, 5})
  local r = ets.lookup(o, 1)
  T.eq(#r, 1)
  T.eq(math.type(r[1][1]), "float")
  T.eq(r[1][2], 5)
end)

test("each lookup is a fresh copy, which the table does not see changed", function()
  local t = ets.new("c", {"set", read_concurrency = true, write_concurrency = true})
  ets.insert(t, {1, 2})
  local a, b = ets.lookup(t, 1), ets.lookup(t, 1)
  T.ok(a ~= b and a[1] ~= b[1])
  a[1][2] = 99
  a[1][3] = "more"
  a[2] = {}
  lookup_eq(t, 1, {{1, 2}})
  T.eq(#b, 1)
  T.eq(#b[1], 2)
end)

test("results stay whole while the collector runs between and inside lookups", function()
  for _, mode in ipairs({"incremental", "generational"}) do
    collectgarbage(mode)
    local t = ets.new("gc", {"set", "public", read_concurrency = true,
                             write_concurrency = true})
    for i = 1, 200 do ets.insert(t, {i, i * 3, -i}) end
    local kept = {}
    for round = 1, 20 do
      for i = 1, 200 do
        kept[#kept + 1] = ets.lookup(t, i)
        if i % 7 == 0 then collectgarbage("step", 1) end
      end
      if round % 5 == 0 then collectgarbage() end
    end
    collectgarbage()
    for n, r in ipairs(kept) do
      local i = (n - 1) % 200 + 1
      T.eq(#r, 1)
      T.eq(#r[1], 3)
      T.ok(r[1][1] == i and r[1][2] == i * 3 and r[1][3] == -i)
    end
    ets.delete(t)
  end
  collectgarbage("generational")
end)

test("errors are named as before", function()
  local t = ets.new("e", {"set", "private"})
  ets.insert(t, {1, 2})
  ets.delete(t)
  T.raises(function() ets.lookup(t, 1) end, "no such table")
end)

T.run()
