-- test_ets.lua -- shared tables: ETS's semantics from Lua (docs/ets.md).
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local ets = require "ets"

local function keys_of(tab)
  local ks, k = {}, ets.first(tab)
  while k ~= nil do
    ks[#ks + 1] = k
    k = ets.next(tab, k)
  end
  return ks
end

local function sorted(list)
  table.sort(list, function(a, b) return T.show(a) < T.show(b) end)
  return list
end

test("require 'ets' and lpvm.ets are one module", function()
  T.ok(lpvm.ets == ets)
end)

test("an insert over an object of the same size replaces it (set, ordered_set)", function()
  for _, kind in ipairs({"set", "ordered_set"}) do
    local t = ets.new("same", {kind})
    ets.insert(t, {1, "abc", 300})
    local mem = ets.info(t, "memory")
    ets.insert(t, {1, "xyz", 301})
    T.eq(ets.lookup(t, 1), {{1, "xyz", 301}})
    T.eq(ets.info(t, "memory"), mem)
    ets.insert(t, {1, "longer", 1.5, false})
    T.eq(ets.lookup(t, 1), {{1, "longer", 1.5, false}})
    T.eq(ets.info(t, "size"), 1)
    ets.delete(t)
  end
end)

test("set: insert replaces, lookup copies out, delete removes", function()
  local t = ets.new("s", {"set"})
  T.eq(ets.insert(t, {1, "a"}), true)
  ets.insert(t, {1, "b", {x = 1}})
  local r = ets.lookup(t, 1)
  T.eq(r, {{1, "b", {x = 1}}})
  r[1][2] = "changed"   -- a copy: the table keeps its own
  T.eq(ets.lookup(t, 1)[1][2], "b")
  T.eq(ets.lookup(t, 2), {})
  T.eq(ets.member(t, 1), true)
  T.eq(ets.delete(t, 1), true)
  T.eq(ets.member(t, 1), false)
  T.eq(ets.info(t, "size"), 0)
  ets.delete(t)
end)

test("keys are terms compared exactly: 1 and 1.0 differ in a set, not in an ordered_set", function()
  local s = ets.new("s", {"set"})
  ets.insert(s, {1, "int"}, {1.0, "float"}, {"1", "string"}, {{1, 2}, "list"})
  T.eq(ets.info(s, "size"), 4)
  T.eq(ets.lookup(s, 1.0)[1][2], "float")
  T.eq(ets.lookup(s, {1, 2})[1][2], "list")
  local o = ets.new("o", {"ordered_set"})
  ets.insert(o, {1, "int"})
  ets.insert(o, {1.0, "float"})
  T.eq(ets.info(o, "size"), 1)
  T.eq(ets.lookup(o, 1)[1][2], "float")
  ets.delete(s)
  ets.delete(o)
end)

test("map keys match whatever order their pairs were encoded in", function()
  local t = ets.new("m", {"set"})
  local k1 = {}
  for i = 1, 20 do k1["k" .. i] = i end
  ets.insert(t, {k1, "v"})
  local k2 = {}
  for i = 20, 1, -1 do k2["k" .. i] = i end
  T.eq(#ets.lookup(t, k2), 1)
  ets.delete(t)
end)

test("bag keeps distinct objects per key; duplicate_bag keeps duplicates", function()
  local b = ets.new("b", {"bag"})
  ets.insert(b, {1, "x"}, {1, "y"}, {1, "x"}, {2, "z"})
  T.eq(ets.lookup(b, 1), {{1, "x"}, {1, "y"}})
  local d = ets.new("d", {type = "duplicate_bag"})
  ets.insert(d, {1, "x"}, {1, "y"}, {1, "x"})
  T.eq(ets.lookup(d, 1), {{1, "x"}, {1, "y"}, {1, "x"}})
  ets.delete_object(d, {1, "x"})
  T.eq(ets.lookup(d, 1), {{1, "y"}})
  ets.delete_object(b, {1, "y"})
  T.eq(ets.lookup(b, 1), {{1, "x"}})
  T.eq(ets.lookup_element(b, 2, 2), {"z"})
  ets.delete(b)
  ets.delete(d)
end)

test("insert of several objects is atomic; insert_new refuses if any key exists", function()
  local t = ets.new("n", {"set"})
  T.eq(ets.insert_new(t, {1, "a"}), true)
  T.eq(ets.insert_new(t, {1, "b"}), false)
  T.eq(ets.insert_new(t, {2, "b"}, {1, "c"}), false)
  T.eq(ets.member(t, 2), false)
  T.eq(ets.lookup(t, 1)[1][2], "a")
  -- one bad object: nothing is inserted
  T.raises(function() ets.insert(t, {3, "ok"}, {}) end, "bad argument", "key position")
  T.eq(ets.member(t, 3), false)
  ets.delete(t)
end)

test("a value a table cannot hold names what it is, not a send", function()
  local t = ets.new("nofun", {})
  T.raises(function() ets.insert(t, {1, function() end}) end, "bad argument #2",
           "cannot store a function value in a table")
  T.raises(function() ets.insert_new(t, {2, {3, coroutine.create(print)}}) end,
           "cannot store a thread value in a table")
  T.eq(ets.lookup(t, 1)[1], nil, "nothing half-done")
  ets.delete(t)
end)

test("keypos: the key is any element", function()
  local t = ets.new("kp", {keypos = 2})
  ets.insert(t, {"rec", "key1", 10})
  T.eq(ets.lookup(t, "key1")[1][3], 10)
  T.raises(function() ets.insert(t, {"short"}) end, "key position")
  ets.delete(t)
end)

test("take, lookup_element, delete_all_objects, tab2list, foldl", function()
  local t = ets.new("x", {"set"})
  for i = 1, 10 do ets.insert(t, {i, i * i}) end
  T.eq(ets.lookup_element(t, 3, 2), 9)
  T.raises(function() ets.lookup_element(t, 3, 5) end, "bad argument #3")
  T.raises(function() ets.lookup_element(t, 99, 2) end, "bad argument #2", "no object")
  T.eq(ets.take(t, 4), {{4, 16}})
  T.eq(ets.member(t, 4), false)
  T.eq(#ets.tab2list(t), 9)
  T.eq(ets.foldl(function(o, acc) return acc + o[2] end, 0, t), 385 - 16)
  ets.delete_all_objects(t)
  T.eq(ets.info(t, "size"), 0)
  T.eq(ets.tab2list(t), {})
  ets.delete(t)
end)

test("update_counter: increments, thresholds, several ops, defaults", function()
  local t = ets.new("c", {"set"})
  ets.insert(t, {"k", 0, 100})
  T.eq(ets.update_counter(t, "k", 1), 1)
  T.eq(ets.update_counter(t, "k", {2, 5}), 6)
  T.eq(ets.update_counter(t, "k", {{2, 1}, {3, -10}, {2, 1}}), {7, 90, 8})
  T.eq(ets.update_counter(t, "k", {2, 10, 10, 0}), 0)      -- past 10: set to 0
  T.eq(ets.update_counter(t, "k", {3, -100, 0, -1}), -1)  -- below 0: set to -1
  -- a sum past 64 bits is past any threshold too (erl: ets:update_counter(T, K,
  -- {2, 1, 10, 0}) on 2^63 - 1 gives 0): it sets setvalue (it raised); without a
  -- threshold it still raises, and nothing is written
  ets.insert(t, {"max", math.maxinteger, math.mininteger})
  T.eq(ets.update_counter(t, "max", {{2, 1, 10, 0}, {3, -1, 10, 7}}), {0, 7})
  ets.insert(t, {"max", math.maxinteger, math.mininteger})
  T.raises(function() ets.update_counter(t, "max", {{3, -1, 10, 7}, {2, 1}}) end,
           "bad argument #3", "64 bits")
  T.eq(ets.lookup(t, "max"), {{"max", math.maxinteger, math.mininteger}})
  T.eq(ets.update_counter(t, "new", {2, 3}, {"ignored", 10}), 13)
  T.eq(ets.lookup(t, "new"), {{"new", 13}})
  T.raises(function() ets.update_counter(t, "absent", 1) end, "bad argument #2")
  T.raises(function() ets.update_counter(t, "k", {1, 1}) end, "bad argument #3")
  ets.insert(t, {"s", "text"})
  T.raises(function() ets.update_counter(t, "s", 1) end, "not an integer")
  local b = ets.new("cb", {"bag"})
  ets.insert(b, {"k", 1})
  T.raises(function() ets.update_counter(b, "k", 1) end, "table type")
  ets.delete(t)
  ets.delete(b)
end)

test("update_counter and update_element with no updates ({}: Erlang's [])", function()
  -- erl: update_counter(T, K, []) -> [] when K is there, badarg when not, and inserts
  -- the default first (update_counter/4); update_element(T, K, []) -> true or false
  local t = ets.new("none", {"set"})
  ets.insert(t, {1, 5})
  T.eq(ets.update_counter(t, 1, {}), {})
  T.raises(function() ets.update_counter(t, 2, {}) end, "bad argument #2", "no object")
  T.eq(ets.update_counter(t, 3, {}, {"ignored", 9}), {})
  T.eq(ets.lookup(t, 3), {{3, 9}})
  T.eq(ets.update_element(t, 1, {}), true)
  T.eq(ets.update_element(t, 2, {}), false)
  T.eq(ets.lookup(t, 1), {{1, 5}})
  -- a table with fields is not the empty list
  T.raises(function() ets.update_counter(t, 1, {pos = 2}) end, "bad argument #3")
  T.raises(function() ets.update_element(t, 1, {pos = 2}) end, "bad argument #3")
  local b = ets.new("none_bag", {"bag"})
  T.raises(function() ets.update_counter(b, 1, {}) end, "table type")
  T.raises(function() ets.update_element(b, 1, {}) end, "table type")
  ets.delete(t)
  ets.delete(b)
end)

test("update_counter's default may be deeply nested (the stack grows while it is encoded)", function()
  local t = ets.new("ucdeep", {"set", "public"})
  local nested = {}
  local cur = nested
  for _ = 1, 150 do
    local n = {}
    cur[1] = n
    cur = n
  end
  for i = 1, 20 do
    T.eq(ets.update_counter(t, "k" .. i, i, {"k" .. i, 100, nested}), 100 + i)
  end
  local o = ets.lookup(t, "k7")[1]
  T.eq(o[2], 107)
  local depth, c = 0, o[3]
  while type(c) == "table" and c[1] ~= nil do depth = depth + 1; c = c[1] end
  T.eq(depth, 150)
  ets.delete(t)
end)

test("update_element changes elements but never the key", function()
  local t = ets.new("e", {"ordered_set"})
  ets.insert(t, {1, "a", "b"})
  T.eq(ets.update_element(t, 1, {2, "A"}), true)
  T.eq(ets.update_element(t, 1, {{3, "B"}, {2, "AA"}}), true)
  T.eq(ets.lookup(t, 1), {{1, "AA", "B"}})
  T.eq(ets.update_element(t, 2, {2, "x"}), false)
  T.raises(function() ets.update_element(t, 1, {1, 5}) end, "bad argument #3")
  T.raises(function() ets.update_element(t, 1, {4, 5}) end, "bad argument #3")
  ets.delete(t)
end)

test("ordered_set walks in Erlang term order; first/next/last/prev", function()
  local t = ets.new("o", {"ordered_set"})
  local ins = {"b", 3, 2.5, "a", {1}, -7, true, {}}
  for _, k in ipairs(ins) do ets.insert(t, {k}) end
  -- numbers < atoms (true) < [] < lists < binaries (Lua strings)
  T.eq(keys_of(t), {-7, 2.5, 3, true, {}, {1}, "a", "b"})
  T.eq(ets.last(t), "b")
  T.eq(ets.prev(t, "a"), {1})
  T.eq(ets.next(t, "b"), nil)
  T.eq(ets.next(t, 2.7), 3)   -- a key not in the table
  T.eq(ets.prev(t, -7), nil)
  ets.delete(t)
  local e = ets.new("empty", {"set"})
  T.eq(ets.first(e), nil)
  ets.delete(e)
end)

test("ordered_set walks step from the last key returned, and search again after any change", function()
  -- each thread keeps the path to the key it last returned (ets_tree.c): every step
  -- here is checked against a sorted model while the tree changes between steps
  local t = ets.new("hint", {"ordered_set", "public"})
  local u = ets.new("hint2", {"ordered_set", "public"})
  local model, umodel = {}, {}
  local seed = 12345
  local function rnd(n)
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed % n + 1
  end
  for i = 1, 300 do
    local k = rnd(1000)
    model[k] = true
    ets.insert(t, {k, i})
    ets.insert(u, {k * 2})
    umodel[k * 2] = true
  end
  local function after(k)
    local best
    for m in pairs(model) do
      if m > k and (best == nil or m < best) then best = m end
    end
    return best
  end
  local function before(k)
    local best
    for m in pairs(model) do
      if m < k and (best == nil or m > best) then best = m end
    end
    return best
  end
  local k = ets.first(t)
  local steps = 0
  while k ~= nil and steps < 5000 do
    steps = steps + 1
    local r = rnd(10)
    if r == 1 then   -- a new key, maybe right after this one
      local nk = k + rnd(3)
      model[nk] = true
      ets.insert(t, {nk, 0})
    elseif r == 2 then   -- the current key deleted: next from a key not in the tree
      model[k] = nil
      ets.delete(t, k)
    elseif r == 3 then   -- the same key's object replaced by one of another size
      ets.insert(t, {k, "longer object " .. steps})
    elseif r == 4 then   -- another table walked on the same thread between steps
      local want
      for m in pairs(umodel) do
        if m > k * 2 and (want == nil or m < want) then want = m end
      end
      T.eq(ets.next(u, k * 2), want)
    elseif r == 5 then   -- a step back and forth
      T.eq(ets.prev(t, k), before(k))
      T.eq(ets.next(t, k), after(k))
    elseif r == 6 then   -- the same key as a float: equal in term order, other bytes
      T.eq(ets.next(t, k + 0.0), after(k))
    end
    local nk = ets.next(t, k)
    T.eq(nk, after(k), "after " .. k .. " at step " .. steps)
    k = nk
    if k == nil and steps < 5000 then k = ets.first(t) end
  end
  -- backwards, and a walk over a table emptied and filled again mid-walk
  k = ets.last(t)
  local n = 0
  while k ~= nil do
    T.eq(ets.prev(t, k), before(k))
    k = ets.prev(t, k)
    n = n + 1
    if n == 50 then
      ets.delete_all_objects(t)
      model = {}
      for i = 1, 100 do model[i * 7] = true; ets.insert(t, {i * 7}) end
      T.eq(ets.prev(t, k), before(k))
    end
  end
  ets.delete(t)
  -- a table deleted and another made: the old path is never used
  local a = ets.new("hint3", {"ordered_set"})
  for i = 1, 100 do ets.insert(a, {i}) end
  T.eq(ets.first(a), 1)
  ets.delete(a)
  local b = ets.new("hint3", {"ordered_set"})
  for i = 1, 100 do ets.insert(b, {i * 10}) end
  T.eq(ets.next(b, 1), 10)
  T.eq(ets.next(b, 10), 20)
  ets.delete(b)
  ets.delete(u)
end)

test("ordered_set walks by several processes while others change the tree", function()
  local t = ets.new("hintp", {"ordered_set", "public", read_concurrency = true})
  for i = 1, 2000 do ets.insert(t, {i * 2}) end
  local me = lpvm.self()
  local rounds = T.scaled(20, 3)
  for w = 1, 2 do
    lpvm.spawn(function()
      local bad = 0
      for _ = 1, rounds do
        local k, prev = ets.first(t), -1
        while k ~= nil do
          if k <= prev or k % 2 ~= 0 and k % 3 ~= 0 then bad = bad + 1 end
          prev = k
          k = ets.next(t, k)
        end
      end
      lpvm.send(me, "walked", bad)
    end)
  end
  lpvm.spawn(function()
    for r = 1, rounds * 200 do
      local k = (r * 7919) % 4000 + 1
      if r % 2 == 0 then ets.delete(t, k * 2) else ets.insert(t, {k * 3}) end
    end
    lpvm.send(me, "wrote")
  end)
  T.recv_match(function(tag) return tag == "wrote" end, 60000)
  for _ = 1, 2 do
    local r = T.recv_match(function(tag) return tag == "walked" end, 60000)
    T.eq(r[2], 0)
  end
  ets.delete(t)
end)

test("a hash table walk visits each object once while others are deleted and inserted", function()
  local t = ets.new("w", {"set", "public"})
  for i = 1, 2000 do ets.insert(t, {i}) end
  local seen, k, n = {}, ets.first(t), 0
  while k ~= nil do
    T.ok(not seen[k], "visited twice: " .. tostring(k))
    seen[k] = true
    n = n + 1
    if n % 3 == 0 then ets.delete(t, k) end             -- delete the current key
    ets.insert(t, {10000 + n})                           -- and grow the table
    k = ets.next(t, k)
  end
  for i = 1, 2000 do T.ok(seen[i], "missed " .. i) end
  ets.delete(t)
end)

test("match, match_object, match_delete with '_' and '$N'", function()
  local t = ets.new("m", {"bag"})
  ets.insert(t, {"alice", 30, "x"}, {"bob", 25, "y"}, {"alice", 31, "z"})
  T.eq(sorted(ets.match(t, {"alice", "$1", "_"})), {{30}, {31}})
  T.eq(sorted(ets.match(t, {"$2", "$1", "_"})), sorted({{30, "alice"}, {31, "alice"}, {25, "bob"}}))
  T.eq(ets.match_object(t, {"_", 25, "_"}), {{"bob", 25, "y"}})
  T.eq(ets.match(t, {"$1", "$1", "_"}), {})   -- a repeated variable must match itself
  T.eq(ets.match_delete(t, {"alice", "_", "_"}), true)
  T.eq(ets.info(t, "size"), 1)
  ets.delete(t)
end)

test("patterns reach into lists and maps; literals of every kind", function()
  local t = ets.new("deep", {"set"})
  ets.insert(t, {1, {"a", 10}, {x = 1, y = "why"}}, {2, {"b", 20}, {x = 2}},
                {3, {"a", 30, 0}, {}}, {4.5, "str", true})
  T.eq(sorted(ets.match(t, {"$1", {"a", "$2"}, "_"})), {{1, 10}})
  T.eq(sorted(ets.match(t, {"$1", "_", {x = "$2"}})), {{1, 1}, {2, 2}})
  T.eq(ets.match(t, {"_", "_", {y = "why"}}), {{}})
  T.eq(ets.match_object(t, {4.5, "str", true}), {{4.5, "str", true}})
  T.eq(ets.match(t, {4, "_", "_"}), {})             -- 4 is not 4.5
  T.eq(ets.match(t, {"$1", "str", "_"}), {{4.5}})
  ets.delete(t)
end)

test("select with guards and bodies; select_count; select_delete", function()
  local t = ets.new("sel", {"set"})
  for i = 1, 20 do ets.insert(t, {i, i % 3 == 0 and "fizz" or "no", i * 1.5}) end
  local ms = {{{"$1", "fizz", "$2"}, {{">", "$1", 10}}, {{"$1", "$2"}}}}
  T.eq(sorted(ets.select(t, ms)), sorted({{12, 18.0}, {15, 22.5}, {18, 27.0}}))
  T.eq(ets.select_count(t, {{{"$1", "_", "_"}, {{"andalso", {">=", "$1", 5}, {"=<", "$1", 8}}}, {true}}}), 4)
  T.eq(ets.select_count(t, {{{"$1", "_", "$2"}, {{"is_float", "$2"}, {"==", {"rem", "$1", 2}, 0}}, {true}}}), 10)
  T.eq(ets.select(t, {{{"$1", "_", "_"}, {{"==", "$1", 2}}, {"$_"}}}), {{2, "no", 3.0}})
  T.eq(ets.select(t, {{{"$1", "_", "_"}, {{"==", "$1", 2}}, {{"+", "$1", 100}}}}), {{"+", 2, 100}})
  T.eq(ets.select(t, {{{1, "_", "_"}, {}, {"$$"}}}), {{}})   -- a bound key: a lookup
  T.eq(ets.select_delete(t, {{{"$1", "_", "_"}, {{"<", "$1", 11}}, {true}}}), 10)
  T.eq(ets.info(t, "size"), 10)
  T.raises(function() ets.select(t, {"not a clause"}) end, "bad argument #2")
  ets.delete(t)
end)

test("protection with read_concurrency + write_concurrency (single-key calls by the stripe)", function()
  local opts = function(access) return {access, read_concurrency = true, write_concurrency = true} end
  local prot, priv = ets.new("fprot", opts("protected")), ets.new("fpriv", opts("private"))
  ets.insert(prot, {1, 10}); ets.insert(priv, {1, 10})
  T.eq(ets.update_counter(prot, 1, 5), 15)   -- the owner writes both
  T.eq(ets.update_counter(priv, 1, 5), 15)
  local me = lpvm.self()
  lpvm.spawn(function()
    local r = {}
    r.read = ets.lookup(prot, 1)[1][2]
    r.member = ets.member(prot, 1)
    r.insert = select(2, pcall(ets.insert, prot, {1, 0}))
    r.counter = select(2, pcall(ets.update_counter, prot, 1, 1))
    r.delete = select(2, pcall(ets.delete, prot, 1))
    r.plookup = select(2, pcall(ets.lookup, priv, 1))
    r.pinsert = select(2, pcall(ets.insert, priv, {1, 0}))
    lpvm.send(me, "result", r)
  end)
  local r = T.recv()[2]
  T.eq(r.read, 15)
  T.eq(r.member, true)
  for _, k in ipairs({"insert", "counter", "delete"}) do
    T.ok(T.mentions(r[k], "protected"), k .. ": " .. tostring(r[k]))
  end
  T.ok(T.mentions(r.plookup, "no access"), r.plookup)
  T.ok(T.mentions(r.pinsert, "no access"), r.pinsert)
  T.eq(ets.lookup(prot, 1)[1][2], 15)   -- nothing half-done
  T.eq(ets.lookup(priv, 1)[1][2], 15)
  ets.delete(prot); ets.delete(priv)
end)

test("protection: protected tables are read-only to others, private ones closed", function()
  local prot = ets.new("prot", {"protected"})
  local priv = ets.new("priv", {"private"})
  local pub = ets.new("pub", {"public"})
  ets.insert(prot, {1, "p"})
  local me = lpvm.self()
  lpvm.spawn(function()
    local r = {}
    r.read = ets.lookup(prot, 1)[1][2]
    r.write = select(2, pcall(ets.insert, prot, {2}))
    r.private = select(2, pcall(ets.lookup, priv, 1))
    r.public = ets.insert(pub, {9, "from child"})
    r.info = ets.info(priv, "size")
    lpvm.send(me, "result", r)
  end)
  local r = T.recv()[2]
  T.eq(r.read, "p")
  T.ok(T.mentions(r.write, "protected"), r.write)
  T.ok(T.mentions(r.private, "no access"), r.private)
  T.eq(r.public, true)
  T.eq(r.info, 0)
  T.eq(ets.lookup(pub, 9)[1][2], "from child")
  ets.delete(prot); ets.delete(priv); ets.delete(pub)
end)

test("named tables: by name, whereis, rename, name clashes, all, info", function()
  local name = ets.new("ets_named", {"named_table", "public"})
  T.eq(name, "ets_named")
  ets.insert("ets_named", {1, "one"})
  T.eq(ets.lookup("ets_named", 1)[1][2], "one")
  local id = ets.whereis("ets_named")
  T.ok(id ~= nil)
  T.eq(ets.lookup(id, 1)[1][2], "one")
  T.raises(function() ets.new("ets_named", {"named_table"}) end, "exists")
  T.eq(ets.rename("ets_named", "ets_named2"), "ets_named2")
  -- a name in use, its own too (erl: ets:rename(t, t) is badarg)
  T.raises(function() ets.rename("ets_named2", "ets_named2") end, "bad argument #2")
  T.eq(ets.whereis("ets_named2") ~= nil, true)
  T.eq(ets.whereis("ets_named"), nil)
  T.eq(ets.lookup("ets_named2", 1)[1][2], "one")
  local found = false
  for _, t in ipairs(ets.all()) do if t == "ets_named2" then found = true end end
  T.ok(found, "all() lists the named table by name")
  local info = ets.info("ets_named2")
  T.eq(info.type, "set"); T.eq(info.protection, "public"); T.eq(info.named_table, true)
  T.eq(info.owner, lpvm.self()); T.eq(info.size, 1); T.eq(info.keypos, 1)
  T.ok(info.memory > 0)
  ets.delete("ets_named2")
  T.eq(ets.info("ets_named2"), nil)
  T.raises(function() ets.lookup("ets_named2", 1) end, "no such table")
end)

test("a table dies with its owner", function()
  local me = lpvm.self()
  local pid = lpvm.spawn(function()
    local t = ets.new("ets_owned", {"named_table", "public"})
    ets.insert(t, {1})
    lpvm.send(me, "made")
    lpvm.receive()
  end)
  T.recv()
  T.ok(ets.whereis("ets_owned") ~= nil)
  local ref = lpvm.monitor(pid)
  lpvm.send(pid, "stop")
  T.down(ref)
  T.eq(ets.whereis("ets_owned"), nil)
end)

test("an heir takes the table when its owner dies and gets ETS-TRANSFER", function()
  local me = lpvm.self()
  local pid = lpvm.spawn(function()
    local t = ets.new("ets_bequest", {"named_table", heir = me, heir_data = "gift"})
    ets.insert(t, {1, "kept"})
    lpvm.send(me, "made", t)
    lpvm.receive()
  end)
  T.recv()
  lpvm.send(pid, "die")
  local m = T.recv_match(function(tag) return tag == "ETS-TRANSFER" end)
  T.eq(m[2], "ets_bequest")   -- a named table by its name, as new gave it (erl: the atom)
  T.eq(m[3], pid)
  T.eq(m[4], "gift")
  T.eq(ets.info("ets_bequest", "owner"), me)
  T.eq(ets.lookup("ets_bequest", 1)[1][2], "kept")
  ets.insert("ets_bequest", {2})   -- protected, but we own it now
  ets.delete("ets_bequest")
end)

test("owners and heirs dying at once leave no table behind", function()
  local base = #ets.all()
  local me = lpvm.self()
  local n = T.scaled(300, 30)
  local pids = {}
  for i = 1, n do
    local heir = lpvm.spawn(function() lpvm.receive() end)
    local owner = lpvm.spawn(function(h, top)
      for _ = 1, 3 do ets.new("race", {heir = h, heir_data = "d"}) end
      lpvm.send(top, "ready")
      lpvm.receive()
    end, heir, me)
    pids[#pids + 1] = heir
    pids[#pids + 1] = owner
    T.recv_match(function(tag) return tag == "ready" end)
    if i % 2 == 0 then pids[#pids - 1], pids[#pids] = pids[#pids], pids[#pids - 1] end
  end
  T.ok(#ets.all() >= base + 3 * n)
  for _, p in ipairs(pids) do lpvm.send(p, "go") end   -- owner and heir end together
  T.ok(T.wait_until(function() return #ets.all() == base end, 20000),
       "tables left: " .. (#ets.all() - base))
end)

test("give_away hands a table over; only the owner may", function()
  local me = lpvm.self()
  local t = ets.new("ga", {"protected"})
  local pid = lpvm.spawn(function()
    local _, tab, from, data = lpvm.receive(function(tag) return tag == "ETS-TRANSFER" end)
    ets.insert(tab, {"mine", data})
    lpvm.send(from, "done", select(2, pcall(ets.give_away, tab, from)))
    lpvm.receive()
  end)
  T.raises(function() ets.give_away(t, me) end, "bad argument #2")
  T.eq(ets.give_away(t, pid, 42), true)
  local r = T.recv_match(function(tag) return tag == "done" end)
  local back = T.recv_match(function(tag) return tag == "ETS-TRANSFER" end)
  T.eq(back[2], t)            -- an unnamed table by its reference
  T.eq(r[2], true)
  T.eq(ets.lookup(t, "mine"), {{"mine", 42}})
  T.eq(ets.info(t, "owner"), me)   -- it gave the table back
  lpvm.exit(pid, "kill")
  lpvm.spawn(function()
    lpvm.send(me, "tried", select(2, pcall(ets.give_away, t, me)))
  end)
  T.ok(T.mentions(T.recv_match(function(tag) return tag == "tried" end)[2], "not the table's owner"))
  ets.delete(t)
end)

test("bad arguments name the argument", function()
  T.raises(function() ets.new({}) end, "bad argument #1")
  T.raises(function() ets.new("x", {"sett"}) end, "bad argument #2", "sett")
  T.raises(function() ets.lookup({}, 1) end, "bad argument #1")
  T.raises(function() ets.lookup(nil, 1) end, "bad argument #1")
  T.raises(function() ets.lookup(false, 1) end, "bad argument #1")
  -- foldl's table is its third argument: its errors name #3 and 'foldl' (they said
  -- "bad argument #1 to '?'", from the inner tab2list)
  T.raises(function() ets.foldl(function() end, 0, nil) end, "bad argument #3 to 'foldl'")
  T.raises(function() ets.foldl(nil, 0, ets.new("x")) end, "bad argument #1 to 'foldl'")
  local gone = ets.new("gone")
  ets.delete(gone)
  T.raises(function() ets.foldl(function() end, 0, gone) end,
           "bad argument #3 to 'foldl'", "no such table")
  T.raises(function() ets.foldl(function() end, 0, "no_table_so_named") end,
           "bad argument #3 to 'foldl'", "no such table")
  T.raises(function() ets.insert(ets.new("x"), "str") end, "bad argument #2")
  T.raises(function() ets.insert(ets.new("x"), {print}) end, "bad argument #2", "function")
  T.raises(function() ets.new(string.rep("n", 256)) end, "bad argument #1", "255")
  local deep, cur = {}, nil
  cur = deep
  for _ = 1, 300 do cur[1] = {}; cur = cur[1] end
  local d = ets.new("deep", {"public"})
  T.raises(function() ets.insert(d, {deep, 1}) end, "bad argument #2", "nested too deep")
  T.raises(function() ets.lookup(d, deep) end, "bad argument #2", "nested too deep")
  ets.insert(d, {"c", math.maxinteger})
  T.raises(function() ets.update_counter(d, "c", 1) end, "bad argument #3", "64 bits")
  T.eq(ets.lookup_element(d, "c", 2), math.maxinteger)   -- unchanged
  T.raises(function() ets.give_away(d, lpvm.self()) end, "bad argument #2")
  ets.delete(d)
  local t = ets.new("x")
  ets.delete(t)
  T.raises(function() ets.insert(t, {1}) end, "bad argument #1", "no such table")
end)

test("update_counter from 8 processes gives the exact total", function()
  local t = ets.new("cnt", {"set", "public", write_concurrency = true})
  ets.insert(t, {"c", 0})
  local n = T.scaled(2000, 100)
  local me = lpvm.self()
  for _ = 1, 8 do
    lpvm.spawn(function()
      for i = 1, n do
        ets.update_counter(t, "c", 1)
        ets.update_counter(t, i % 50, {2, 1}, {0, 0})
      end
      lpvm.send(me, "done")
    end)
  end
  for _ = 1, 8 do T.recv_match(function(tag) return tag == "done" end, 60000) end
  T.eq(ets.lookup_element(t, "c", 2), 8 * n)
  local sum = 0
  for i = 0, 49 do sum = sum + ets.lookup_element(t, i, 2) end
  T.eq(sum, 8 * n)
  ets.delete(t)
end)

-- The fast paths (vm/lets.c) must give what the general encoder and decoder give.
test("fast paths: every scalar shape round-trips, long and nested objects too", function()
  local t = ets.new("shapes", {"set", "public"})
  local objs = {
    {0, 255, 256, -1, 2147483647, 2147483648, -2147483648, -2147483649,
     math.maxinteger, math.mininteger},
    {"s", "", "a\0b", string.rep("x", 200), 1.5, -0.0, 1e300, true, false},
    {1.0, "float key"},
    {true, "boolean key"}, {false, nil, 3},
    {"nested", {1, {2, "x"}}, {a = 1}, lpvm.self()},
    {"long", string.rep("y", 600)},          -- more than the stack buffer holds
    {string.rep("k", 300), "a long key"},
  }
  for _, o in ipairs(objs) do ets.insert(t, o) end
  for _, o in ipairs(objs) do
    T.eq(ets.lookup(t, o[1]), {o})
    T.eq(ets.member(t, o[1]), true)
  end
  T.eq(ets.lookup(t, 1), {})                 -- 1.0 is the key, 1 is another term
  T.eq(ets.lookup(t, 1.0)[1][2], "float key")
  T.eq(math.type(ets.lookup(t, 1.0)[1][1]), "float")
  T.eq(ets.lookup(t, "nested")[1][4], lpvm.self())
  -- a bag whose objects together do not fit the stack buffer
  local b = ets.new("bigbag", {"bag"})
  for i = 1, 50 do ets.insert(b, {"k", i, string.rep("z", 40)}) end
  local r = ets.lookup(b, "k")
  T.eq(#r, 50)
  T.eq(r[50][2], 50)
  ets.delete(b)
  ets.delete(t)
end)

-- lets.c reads an object's array part in place when it can: every way Lua may lay an
-- array out must store what the general path (several objects at once) stores.
test("fast paths: arrays laid out every way store what the general path stores", function()
  local fast = ets.new("inplace_fast", {"set"})
  local slow = ets.new("inplace_slow", {"set"})
  local grown = {}
  for i = 1, 5 do grown[#grown + 1] = i end       -- array of 8, alimit moved by #
  local shrunk = {10, 2, 3, 4}
  shrunk[4] = nil                                  -- last slot empty: Lua's length
  local holes = {11}
  holes[3] = 3                                     -- a border at 1
  local objs = {
    {[1] = 100, [2] = "hash part"},                -- elements in the hash part
    {2, "array and hash", x = 3},
    {3, nil, 3},
    {4, true, false, nil, 1.5, "short", string.rep("l", 100), -0.0},
    setmetatable({5, "raw"}, {__index = function() return 9 end,
                              __len = function() return 7 end}),
    grown, shrunk, holes,
    {6, {}, "a table inside"},                     -- not scalars: the general path
  }
  for i, o in ipairs(objs) do
    ets.insert(fast, o)
    ets.insert(slow, o, {-i})                      -- two objects: the general encoder
  end
  for _, o in ipairs(objs) do
    local want = {}
    for i = 1, rawlen(o) do want[i] = rawget(o, i) end
    T.eq(ets.lookup(fast, o[1]), {want})
    T.eq(ets.lookup(slow, o[1]), {want})
  end
  for i = 1, #objs do ets.delete(slow, -i) end   -- then the same bytes, object by object
  T.eq(ets.info(fast, "memory"), ets.info(slow, "memory"))
  T.eq(ets.tab2list(fast), ets.tab2list(slow))
  ets.delete(fast)
  ets.delete(slow)
end)

test("ordered_set: integer and string keys in term order on the fast compare", function()
  local o = ets.new("order", {"ordered_set"})
  for _, k in ipairs({"b", "ab", "", "a", "a\0", 300, -5, 2, 2.5, 1.0, -70000, 70000, 255, 256}) do
    ets.insert(o, {k})
  end
  T.eq(keys_of(o), {-70000, -5, 1.0, 2, 2.5, 255, 256, 300, 70000, "", "a", "a\0", "ab", "b"})
  T.eq(ets.next(o, 255), 256)
  T.eq(ets.next(o, 1), 2)           -- 1 == 1.0 in an ordered_set
  T.eq(ets.prev(o, "a"), "")
  T.eq(ets.next(o, "aa"), "ab")     -- need not be present
  ets.delete(o)
end)

test("update_counter in place and not: sizes change across 255 and 32 bits", function()
  local t = ets.new("counters", {"set", "public"})
  ets.insert(t, {"c", 250, "tail"})
  T.eq(ets.update_counter(t, "c", 5), 255)      -- one byte, in place
  T.eq(ets.update_counter(t, "c", 1), 256)      -- grows to 32 bits
  T.eq(ets.update_counter(t, "c", -200), 56)    -- shrinks again
  ets.insert(t, {"d", 2147483640})
  T.eq(ets.update_counter(t, "d", 7), 2147483647)
  T.eq(ets.update_counter(t, "d", 1), 2147483648)
  T.eq(ets.update_counter(t, "d", -2147483648 - 2147483648), -2147483648)
  T.eq(ets.update_counter(t, "c", {{2, 1}, {2, 300}, {2, -300}}), {57, 357, 57})
  T.eq(ets.lookup(t, "c"), {{"c", 57, "tail"}})
  T.eq(ets.lookup(t, "d"), {{"d", -2147483648}})
  local o = ets.new("ocounters", {"ordered_set", "public", keypos = 2})
  ets.insert(o, {10, "x", 20})
  T.eq(ets.update_counter(o, "x", 1), 21)       -- the element after keypos
  T.eq(ets.lookup(o, "x"), {{10, "x", 21}})
  ets.delete(o)
  ets.delete(t)
end)

test("update_counter's one step in place: past strings and floats, thresholds, refusals", function()
  local t = ets.new("inplace", {"set", "public"})
  ets.insert(t, {"k", "name", 2.5, -5, 300, 7, {1, 2}, 9})
  T.eq(ets.update_counter(t, "k", {4, -1}), -6)          -- a negative 32-bit one
  T.eq(ets.update_counter(t, "k", {5, 700}), 1000)       -- 32 bits to 32 bits
  T.eq(ets.update_counter(t, "k", {6, 5, 10, 1}), 1)     -- over the threshold: set
  T.eq(ets.update_counter(t, "k", {6, -5, 0, 42}), 42)   -- under it (a decrement)
  T.eq(ets.update_counter(t, "k", {8, 1}), 10)           -- after a nested element
  T.eq(ets.lookup(t, "k"), {{"k", "name", 2.5, -6, 1000, 42, {1, 2}, 10}})
  -- what was written in place is the encoding any other write makes
  T.eq(ets.select_count(t, {{ {"k", "_", "_", -6, 1000, 42, "_", 10}, {}, {true} }}), 1)
  T.raises(function() ets.update_counter(t, "k", {3, 1}) end, "bad argument #3", "not an integer")
  T.raises(function() ets.update_counter(t, "k", {2, 1}) end, "bad argument #3", "not an integer")
  T.raises(function() ets.update_counter(t, "k", {9, 1}) end, "bad argument #3")
  T.raises(function() ets.update_counter(t, "k", {1, 1}) end, "bad argument #3")
  T.raises(function() ets.update_counter(t, "k", {5, math.maxinteger}) end, "64 bits")
  T.eq(ets.lookup(t, "k"), {{"k", "name", 2.5, -6, 1000, 42, {1, 2}, 10}})   -- untouched
  ets.insert(t, {"big", math.maxinteger - 1})
  T.eq(ets.update_counter(t, "big", 1), math.maxinteger)   -- 64-bit: not in place
  ets.delete(t)
end)

test("names are cached per process, never past a rename or a delete", function()
  ets.new("cached", {"named_table", "public"})
  ets.insert("cached", {1, "first"})
  T.eq(ets.lookup("cached", 1)[1][2], "first")
  ets.rename("cached", "cached2")
  T.raises(function() ets.lookup("cached", 1) end, "bad argument #1", "no such table")
  T.eq(ets.lookup("cached2", 1)[1][2], "first")
  ets.new("cached", {"named_table", "public"})    -- the old name, a new table
  T.eq(ets.lookup("cached", 1), {})
  ets.delete("cached")
  T.raises(function() ets.insert("cached", {1}) end, "bad argument #1", "no such table")
  -- another process renames it: this process's cache must notice too
  local me = lpvm.self()
  lpvm.spawn(function()
    ets.rename("cached2", "cached3")
    lpvm.send(me, "renamed")
  end)
  T.recv_match(function(tag) return tag == "renamed" end, 10000)
  T.raises(function() ets.lookup("cached2", 1) end, "no such table")
  T.eq(ets.lookup("cached3", 1)[1][2], "first")
  ets.delete("cached3")
end)

test("counters patched in place while readers look them up (read_concurrency)", function()
  for _, opts in ipairs({{"set", "public", read_concurrency = true},
                         {"set", "public", read_concurrency = true, write_concurrency = true},
                         {"ordered_set", "public", read_concurrency = true}}) do
    local t = ets.new("rcnt", opts)
    for i = 1, 20 do ets.insert(t, {i, 0, "pad"}) end
    local n = T.scaled(2000, 100)
    local me = lpvm.self()
    for w = 1, 4 do
      lpvm.spawn(function()
        for i = 1, n do ets.update_counter(t, (i + w) % 20 + 1, {2, 1}) end
        lpvm.send(me, "done")
      end)
    end
    for _ = 1, 2 do
      lpvm.spawn(function()
        local bad = 0
        for i = 1, n do
          local o = ets.lookup(t, i % 20 + 1)[1]
          if #o ~= 3 or math.type(o[2]) ~= "integer" or o[3] ~= "pad" then bad = bad + 1 end
        end
        lpvm.send(me, "read", bad)
      end)
    end
    for _ = 1, 4 do T.recv_match(function(tag) return tag == "done" end, 60000) end
    for _ = 1, 2 do
      local r = T.recv_match(function(tag) return tag == "read" end, 60000)
      T.eq(r[2], 0)
    end
    local sum = 0
    for i = 1, 20 do sum = sum + ets.lookup_element(t, i, 2) end
    T.eq(sum, 4 * n)
    ets.delete(t)
  end
end)

test("lookup results built while the collector steps keep every object (both modes)", function()
  -- a lookup's list and tuples are written in place while strings and tuples are
  -- made, each a possible collector step: a list or tuple blackened meanwhile must
  -- take Lua's barrier, or what it holds would be freed under it
  local t = ets.new("gcb", {"duplicate_bag", "public"})
  local per = 12   -- within the 512 bytes a lookup copies to the stack (docs/ets.md)
  for k = 1, 8 do
    for i = 1, per do ets.insert(t, {k, "s" .. k .. "_" .. i, i, i * 0.5, i % 2 == 0}) end
  end
  local modes = {{"incremental", 1, 100, 1}, {"incremental", 1, 1000, 4}, {"generational", 1, 100}}
  for _, m in ipairs(modes) do
    collectgarbage(table.unpack(m))
    local kept, all = {}, {}
    for round = 1, T.scaled(400, 40) do
      local k = round % 8 + 1
      kept[round] = {k, ets.lookup(t, k)}
      if round % 10 == 0 then all[#all + 1] = ets.tab2list(t) end   -- the general decoder's
      if round % 50 == 0 then collectgarbage("step", 0) end
    end
    collectgarbage()
    collectgarbage()
    for _, l in ipairs(all) do
      T.eq(#l, 8 * per)
      for _, o in ipairs(l) do
        T.eq(#o, 5)
        T.eq(o[2], "s" .. o[1] .. "_" .. o[3])
        T.eq(o[5], o[3] % 2 == 0)
      end
    end
    for round, e in ipairs(kept) do
      local k, r = e[1], e[2]
      T.eq(#r, per, "objects of key " .. k .. " in round " .. round)
      local seen = {}
      for _, o in ipairs(r) do
        T.eq(#o, 5)
        T.eq(o[1], k)
        local i = o[3]
        T.eq(o[2], "s" .. k .. "_" .. i)
        T.eq(o[4], i * 0.5)
        T.eq(o[5], i % 2 == 0)
        seen[i] = true
      end
      for i = 1, per do T.ok(seen[i], "object " .. i .. " of key " .. k) end
    end
  end
  collectgarbage("generational")
  ets.delete(t)
end)

test("a match specification's unknown call or unbound variable raises (erl: badarg)", function()
  -- they made the guard false on every object: a select that silently found nothing
  local t = ets.new("msbad", {"set"})
  for i = 1, 5 do ets.insert(t, {i, i * 2}) end
  local bad = {
    {{{"$1", "_"}, {{"<=", "$1", 3}}, {"$1"}}},                  -- Erlang's is "=<"
    {{{"$1", "_"}, {{"is_int", "$1"}}, {"$1"}}},
    {{{"$1", "_"}, {{"abs", "$1", 2}}, {"$1"}}},                 -- abs takes one
    {{{"$1", "_"}, {{">", "$2", 1}}, {"$1"}}},                   -- $2 unbound
    {{{"$1", "_"}, {}, {"$3"}}},
    {{{"$1", "_"}, {{"andalso", {">", "$1", 1}, {"<", "$9", 3}}}, {"$1"}}},
  }
  for i, ms in ipairs(bad) do
    T.raises(function() ets.select(t, ms) end, "bad argument #2", "bad match specification")
    T.raises(function() ets.select_count(t, ms) end, "bad match specification")
    T.raises(function() ets.select_delete(t, ms) end, "bad match specification")
  end
  T.eq(ets.info(t, "size"), 5, "nothing deleted")
  -- what is valid still runs
  local ok = ets.select(t, {{{"$1", "$2"}, {{"andalso", {"=<", "$1", 3}, {"is_integer", "$2"}},
                                           {"not", {"==", {"rem", "$1", 2}, 0}}},
                             {"$2"}}})
  table.sort(ok)
  T.eq(ok, {2, 6})
  T.eq(ets.select_count(t, {{{"_", "$1"}, {{">", {"abs", {"-", "$1"}}, 4}}, {true}}}), 3)
  T.eq(#ets.match(t, {"$1", "_"}), 5)
  ets.delete(t)
end)

test("a NaN key: one key after every number, and the other keys stay whole", function()
  -- Lua has NaN, Erlang not: lpvm orders it after every number, equal to any NaN. It
  -- was equal to every float: in an ordered_set {1.0, "b"} replaced the NaN object
  -- and 1 and 1.0 were kept as two keys.
  local nan, nan2 = 0/0, -(0/0)   -- two bit patterns
  for _, ty in ipairs({"set", "ordered_set", "bag"}) do
    local t = ets.new("nan", {ty})
    ets.insert(t, {nan, "n"})
    ets.insert(t, {1, "a"})
    ets.insert(t, {1.0, "b"})
    ets.insert(t, {nan2, "n2"})
    local want = ({set = 3, ordered_set = 2, bag = 4})[ty]
    T.eq(ets.info(t, "size"), want, ty)
    T.eq(#ets.lookup(t, nan), ty == "bag" and 2 or 1, ty)
    T.eq(#ets.lookup(t, 1.0), 1, ty)
    if ty == "ordered_set" then
      T.eq(ets.lookup(t, 1)[1][2], "b")
      T.eq(ets.first(t), 1.0)
      local last = ets.last(t)
      T.ok(last ~= last, "the NaN is the last key")
    end
    ets.delete(t)
  end
end)

test("many objects: the buckets grow and shrink, and deletion frees them", function()
  local t = ets.new("big", {"set", "public"})
  local n = T.scaled(100000, 5000)
  for i = 1, n do ets.insert(t, {i, "v"}) end
  T.eq(ets.info(t, "size"), n)
  local mem = ets.info(t, "memory")
  for i = 1, n - 10 do ets.delete(t, i) end
  T.eq(ets.info(t, "size"), 10)
  T.ok(ets.info(t, "memory") < mem / 10, "memory shrinks with the objects")
  T.eq(#keys_of(t), 10)
  ets.delete(t)
end)

test("insert of an array of integers (its own fast path) reads back as any insert", function()
  -- lmod_ets.c's l_insert hands {k, v, ...} of integers to lpvm_ets_insert_ints; every
  -- other shape goes the general way: both must read back the same, in every kind
  -- of table, over old objects of the same size (rewritten in place) and of others
  local vals = {0, 1, 255, 256, -1, 1000, 70000, 2147483647, -2147483648, 2147483648,
                -2147483649, math.maxinteger, math.mininteger}
  for _, ty in ipairs({"set", "ordered_set", "bag", "duplicate_bag"}) do
    for _, conc in ipairs({{}, {read_concurrency = true, write_concurrency = true}}) do
      local t = ets.new("ints", {ty, "public", read_concurrency = conc.read_concurrency,
                                 write_concurrency = conc.write_concurrency})
      for i, k in ipairs(vals) do
        for round = 1, 3 do
          local v = vals[(i + 1) % #vals + 1]
          if round == 3 then v = v ~ 1 end   -- the same size as round 2's: in place
          local row = round == 1 and {k} or {k, v, i}
          T.eq(ets.insert(t, row), true)
          local got = ets.lookup(t, k)
          if ty == "set" or ty == "ordered_set" then
            T.eq(#got, 1, ty)
            T.eq(#got[1], #row, ty)
            for j = 1, #row do T.eq(got[1][j], row[j], ty) end
            T.eq(math.type(got[1][1]), "integer", ty)
          end
        end
      end
      -- a hole, a hash part, a float, a string, a nested table: the general way
      ets.insert(t, {5000, nil, 3})
      local h = {5001, 2}; h.x = 1
      ets.insert(t, h)
      ets.insert(t, {5002, 1.5})
      ets.insert(t, {5003, "s"})
      ets.insert(t, {5004, {1, 2}})
      T.eq(ets.lookup(t, 5000)[1][3], 3, ty)
      T.eq(#ets.lookup(t, 5001)[1], 2, ty)
      T.eq(ets.lookup(t, 5002)[1][2], 1.5, ty)
      T.eq(ets.lookup(t, 5003)[1][2], "s", ty)
      T.eq(ets.lookup(t, 5004)[1][2][2], 2, ty)
      -- three distinct objects a key: a set keeps the last, a bag all three
      T.eq(ets.info(t, "size"), ((ty == "set" or ty == "ordered_set") and 1 or 3) * #vals + 5,
           ty)
      ets.delete(t)
    end
  end
  local k2 = ets.new("k2", {"set", "public", keypos = 2})
  ets.insert(k2, {1, 2})
  ets.insert(k2, {3, 2})
  T.eq(ets.lookup(k2, 2)[1][1], 3)
  local ok, err = pcall(ets.insert, k2, {7})   -- the integers' way, refused by the table
  T.ok(not ok and tostring(err):find("bad argument #2", 1, true), "keypos 2 of a 1-tuple")
  ets.delete(k2)
end)

-- select/3, select/1, match/3, match_object/3, select_reverse (vm/lets_select.c)
local function chunks(step, objs, cont)
  local all, sizes = {}, {}
  while objs do
    sizes[#sizes + 1] = #objs
    for _, o in ipairs(objs) do all[#all + 1] = o end
    objs, cont = step(cont)
  end
  return all, sizes
end

test("select with a limit: chunks that add up to select/2, for every table type", function()
  for _, kind in ipairs({"set", "ordered_set", "bag", "duplicate_bag"}) do
    local t = ets.new("chunks", {kind, write_concurrency = kind == "set"})
    for i = 1, 200 do ets.insert(t, {i, i % 7}) end
    local ms = {{{"$1", "$2"}, {{"<", "$2", 3}}, {"$1"}}}
    local whole = ets.select(t, ms)
    local all, sizes = chunks(ets.select, ets.select(t, ms, 10))
    T.eq(sorted(all), sorted(whole), kind)
    for i = 1, #sizes - 1 do T.eq(sizes[i], 10, kind) end
    T.ok(sizes[#sizes] >= 1 and sizes[#sizes] <= 10, kind)
    if kind == "ordered_set" then T.eq(all, whole) end   -- in term order
    -- nothing matches at all: nil, as ETS's '$end_of_table'
    T.eq(ets.select(t, {{{"$1", "_"}, {{">", "$1", 1000}}, {"$1"}}}, 5), nil)
    ets.delete(t)
  end
end)

test("select/1: a continuation can be run again; the last one gives nil", function()
  local t = ets.new("again", {"ordered_set"})
  for i = 1, 5 do ets.insert(t, {i}) end
  local ms = {{{"$1"}, {}, {"$1"}}}
  local a, c1 = ets.select(t, ms, 2)
  T.eq(a, {1, 2})
  local b, c2 = ets.select(c1)
  T.eq(b, {3, 4})
  T.eq(ets.select(c1), {3, 4})           -- the same chunk again
  local c, c3 = ets.select(c2)
  T.eq(c, {5})
  T.eq(ets.select(c3), nil)
  T.eq(ets.select(c3), nil)
  T.eq(type(c1), "table")   -- a term (ETS's continuation is one)
  ets.delete(t)
end)

test("a select continuation is a term: another process continues it on the same table", function()
  for _, kind in ipairs({"set", "ordered_set", "bag"}) do
    local t = ets.new("shared_cont", {kind, "public"})
    for i = 1, 20 do ets.insert(t, {i, i * i}) end
    local ms = {{{"$1", "$2"}, {{">", "$1", 2}}, {"$2"}}}
    local first, cont = ets.select(t, ms, 5)
    T.eq(#first, 5)
    -- another process runs the rest of the chunks and sends back what it saw
    local me = lpvm.self()
    local pid, ref = lpvm.spawn_monitor(function()
      local _, c = lpvm.receive(function(m) return m == "cont" end, T.WAIT)
      local got, objs = {}, nil
      objs, c = ets.select(c)
      while objs do
        for _, v in ipairs(objs) do got[#got + 1] = v end
        objs, c = ets.select(c)
      end
      lpvm.send(me, "got", got)
    end)
    lpvm.send(pid, "cont", cont)
    local tag, got = lpvm.receive(function(m) return m == "got" end, T.WAIT)
    T.eq(tag, "got")
    local all = {}
    for _, v in ipairs(first) do all[#all + 1] = v end
    for _, v in ipairs(got) do all[#all + 1] = v end
    table.sort(all)
    local want = {}
    for i = 3, 20 do want[#want + 1] = i * i end
    T.eq(all, want, kind)
    lpvm.receive(function(m, r) return m == "DOWN" and r == ref end, T.WAIT)
    -- sent and received back (a map and back to a table), select_reverse's too
    if kind == "ordered_set" then
      local r1, rc = ets.select_reverse(t, {{{"$1", "_"}, {}, {"$1"}}}, 3)
      T.eq(r1, {20, 19, 18})
      lpvm.send(me, "again", rc)
      local _, back = lpvm.receive(function(m) return m == "again" end, T.WAIT)
      T.eq(ets.select_reverse(back), {17, 16, 15})
      T.eq(ets.select(back), {17, 16, 15})   -- select/1 continues any of them
    end
    ets.delete(t)
    T.raises(function() ets.select(cont) end, "bad argument #1", "no such table")
  end
end)

test("a forged or damaged continuation raises bad argument #1", function()
  local t = ets.new("forged", {"ordered_set"})
  for i = 1, 10 do ets.insert(t, {i}) end
  local _, c = ets.select(t, {{{"$1"}, {}, {"$1"}}}, 3)
  local function with(field, v)
    local d = {}
    for k, x in pairs(c) do d[k] = x end
    d[field] = v
    return d
  end
  T.eq(ets.select(with("limit", 100)), {4, 5, 6, 7, 8, 9, 10})
  T.eq(ets.select(with("after", nil)), nil)   -- no key to continue after: the end
  for _, bad in ipairs({
      with("tab", nil), with("tab", "forged"), with("tab", lpvm.self()),
      with("ms", nil), with("ms", 3), with("limit", 0), with("limit", -1),
      with("limit", 1.5), with("limit", nil), with("reverse", 1), with("after", 7)}) do
    T.raises(function() ets.select(bad) end, "bad argument #1", "continuation")
  end
  T.raises(function() ets.select(with("tab", lpvm.make_ref())) end, "bad argument #1", "no such table")
  for _, bad in ipairs({"", "\131", "\131\104", "garbage", string.rep("\255", 40),
                        c.ms:sub(1, #c.ms - 1), c.ms .. "x"}) do
    T.raises(function() ets.select(with("ms", bad)) end, "bad argument #1")
    T.raises(function() ets.select(with("after", bad)) end, "bad argument #1")
  end
  -- a key of another type is still a key: the first one after it, in term order
  T.eq(ets.select(with("after", c.after:sub(1, 1) .. "\97\0")), {1, 2, 3})
  ets.delete(t)
end)

test("select/1 after the table changed: every object present throughout, once", function()
  for _, kind in ipairs({"set", "ordered_set", "bag"}) do
    local t = ets.new("moving", {kind})
    for i = 1, 100 do ets.insert(t, {i}) end
    local seen, objs, cont = {}, ets.select(t, {{{"$1"}, {}, {"$1"}}}, 10)
    local extra = 1000
    while objs do
      for _, k in ipairs(objs) do
        T.eq(seen[k], nil, kind .. " twice: " .. tostring(k))
        seen[k] = true
        ets.delete(t, k)                       -- the continuation's own key goes
      end
      if extra < 1100 then   -- a resize or two (the new keys may come later: bounded)
        for _ = 1, 20 do extra = extra + 1; ets.insert(t, {extra}) end
      end
      objs, cont = ets.select(cont)
    end
    for i = 1, 100 do T.ok(seen[i], kind .. " missed " .. i) end
    ets.delete(t)
  end
end)

test("select/1 on a deleted table raises bad argument; bad limits and continuations", function()
  local t = ets.new("gone", {"set"})
  for i = 1, 10 do ets.insert(t, {i}) end
  local _, cont = ets.select(t, {{{"$1"}, {}, {"$1"}}}, 3)
  local _, mcont = ets.match(t, {"$1"}, 3)
  ets.delete(t)
  T.raises(function() ets.select(cont) end, "bad argument #1", "no such table")
  T.raises(function() ets.match(mcont) end, "bad argument #1", "no such table")
  local u = ets.new("limits", {"set"})
  ets.insert(u, {1})
  T.raises(function() ets.select(u, {{{"$1"}, {}, {"$1"}}}, 0) end, "bad argument #3")
  T.raises(function() ets.select(u, {{{"$1"}, {}, {"$1"}}}, "x") end, "bad argument #3")
  T.raises(function() ets.select(u, {"not a clause"}, 5) end, "bad argument #2")
  T.raises(function() ets.select({}) end, "bad argument #1", "continuation")
  T.raises(function() ets.select(u) end, "bad argument #2", "table expected")
  T.raises(function() ets.match("limits") end, "bad argument #2", "table expected")
  T.eq(ets.select(u, {{{"$1"}, {}, {"$1"}}}, nil), {1})   -- nil: no limit, select/2
  ets.delete(u)
end)

test("match/3 and match_object/3 continue with match/1 and match_object/1", function()
  local t = ets.new("m3", {"ordered_set"})
  for i = 1, 9 do ets.insert(t, {i, i % 2 == 0 and "even" or "odd"}) end
  local all = chunks(ets.match, ets.match(t, {"$1", "odd"}, 2))
  T.eq(all, {{1}, {3}, {5}, {7}, {9}})
  all = chunks(ets.match_object, ets.match_object(t, {"_", "even"}, 3))
  T.eq(all, {{2, "even"}, {4, "even"}, {6, "even"}, {8, "even"}})
  T.eq(ets.match(t, {"$1", "none"}, 2), nil)
  -- a fully bound key: one chunk, then nil
  local one, c = ets.match_object(t, {4, "_"}, 5)
  T.eq(one, {{4, "even"}})
  T.eq(ets.match_object(c), nil)
  ets.delete(t)
end)

test("select_reverse: ordered_set backwards, others as select", function()
  local t = ets.new("rev", {"ordered_set"})
  for i = 1, 7 do ets.insert(t, {i}) end
  local ms = {{{"$1"}, {}, {"$1"}}}
  T.eq(ets.select_reverse(t, ms), {7, 6, 5, 4, 3, 2, 1})
  T.eq(chunks(ets.select_reverse, ets.select_reverse(t, ms, 3)), {7, 6, 5, 4, 3, 2, 1})
  T.eq(ets.select_reverse(t, {{{"$1"}, {{">", "$1", 9}}, {"$1"}}}), {})
  ets.delete(t)
  local s = ets.new("rev_set", {"set"})
  for i = 1, 7 do ets.insert(s, {i}) end
  T.eq(ets.select_reverse(s, ms), ets.select(s, ms))
  ets.delete(s)
end)

test("insert of no objects ({} alone, or none) is true and changes nothing (erl: insert(T, []))", function()
  local t = ets.new("nothing", {"set"})
  ets.insert(t, {1, "a"})
  T.eq(ets.insert(t, {}), true)
  T.eq(ets.insert_new(t, {}), true)
  T.eq(ets.insert(t), true)
  T.eq(ets.insert(t, table.unpack({})), true)
  T.eq(ets.insert_new(t), true)
  T.eq(ets.tab2list(t), {{1, "a"}})
  T.raises(function() ets.insert(t, {}, {}) end, "bad argument #2")   -- two objects without keys
  T.raises(function() ets.insert(t, nil) end, "bad argument #2")
  local prot = ets.new("nothing_prot", {"set", "protected"})
  local reason = T.run_proc(function()
    lpvm.exit(select(2, pcall(ets.insert, prot, {})))
  end)
  T.ok(T.mentions(reason, "no access"), T.show(reason))
  ets.delete(prot)
  T.raises(function() ets.insert(prot, {}) end, "no such table")
  ets.delete(t)
end)

T.run()
