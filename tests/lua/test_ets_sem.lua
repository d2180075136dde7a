-- test_ets_sem.lua -- ETS's semantics checked against what erl (OTP 25) answers for the
-- same calls (docs/ets.md, docs/reliability/etssem.md): each test is a scenario that was
-- written as an escript and as Lua, and whose outputs differed before its fix.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local ets = require "ets"

-- A process that has surely ended: spawned with a monitor, its DOWN received.
local function dead_pid()
  local pid, ref = lpvm.spawn_monitor(function() end)
  lpvm.receive_ref(ref, T.WAIT)
  return pid
end

test("an heir that is not alive when named is none (erl: info heir = none)", function()
  local me = lpvm.self()
  local dead = dead_pid()
  local t = ets.new("h", {heir = dead, heir_data = "x"})
  T.eq(ets.info(t, "heir"), "none")
  T.eq(ets.setopts(t, {heir = me, heir_data = "y"}), true)
  T.eq(ets.info(t, "heir"), me)
  T.eq(ets.setopts(t, {heir = dead, heir_data = "z"}), true)
  T.eq(ets.info(t, "heir"), "none")
  ets.delete(t)
  -- an owner whose heir died before it: the table goes with it, no ETS-TRANSFER
  local heir, href = lpvm.spawn_monitor(function() lpvm.receive(function(m) return m == "stop" end) end)
  local owner, oref = lpvm.spawn_monitor(function()
    local w = ets.new("w", {heir = heir, heir_data = "d"})
    lpvm.send(me, "made", w, ets.info(w, "heir"))
    lpvm.receive(function(m) return m == "stop" end)
  end)
  local _, w, h = lpvm.receive(function(m) return m == "made" end, T.WAIT)
  T.eq(h, heir)
  lpvm.send(heir, "stop")
  lpvm.receive_ref(href, T.WAIT)
  lpvm.send(owner, "stop")
  lpvm.receive_ref(oref, T.WAIT)
  T.eq(ets.info(w), nil)
end)

-- Each guard's count of matching objects, as erl's ets:select gave them for the same
-- guard in an escript (1: true, 0: false or a failing call); before, every one of these
-- calls raised "bad match specification" (erl: all are match specification functions).
test("match specification guards: hd, tl, length, size, maps, bit operations, ... as erl", function()
  local t = ets.new("t", {"set"})
  ets.insert(t, {1, {1, 2, 3}, "abc", {a = 1, b = 2}, 2.5, -7})
  ets.insert(t, {true, 5})
  local function count(guard)
    return #ets.select(t, {{{"$1", "$2", "$3", "$4", "$5", "$6"}, {guard}, {true}}})
  end
  local cases = {
    {{"==", {"hd", "$2"}, 1}, 1}, {{"==", {"tl", "$2"}, {"const", {2, 3}}}, 1},
    {{"==", {"length", "$2"}, 3}, 1}, {{"==", {"size", "$3"}, 3}, 1},
    {{"==", {"bit_size", "$3"}, 24}, 1}, {{"==", {"map_size", "$4"}, 2}, 1},
    {{"==", {"map_get", "a", "$4"}, 1}, 1}, {{"is_map_key", "b", "$4"}, 1},
    {{"not", {"is_map_key", "c", "$4"}}, 1}, {{"==", {"map_get", "c", "$4"}, 1}, 0},
    {{"=:=", {"float", "$1"}, 1.0}, 1}, {{"==", {"round", "$5"}, 3}, 1},
    {{"==", {"trunc", "$5"}, 2}, 1}, {{"==", {"round", -2.5}, -3}, 1},
    {{"==", {"band", 6, 3}, 2}, 1}, {{"==", {"bor", 6, 3}, 7}, 1}, {{"==", {"bxor", 6, 3}, 5}, 1},
    {{"==", {"bnot", "$6"}, 6}, 1}, {{"==", {"bsl", 1, 62}, 1 << 62}, 1},
    {{"==", {"bsl", 1, 63}, 0}, 0},   -- a bignum in Erlang: here the call fails
    {{"==", {"bsr", "$6", 1}, -4}, 1}, {{"==", {"bsr", "$6", 100}, -1}, 1},
    {{"==", {"bsl", 5, -1}, 2}, 1}, {{"==", {"+", "$6"}, -7}, 1},
    {{"==", {"binary_part", "$3", 1, 1}, {"const", "b"}}, 1},
    {{"==", {"binary_part", "$3", 3, -2}, {"const", "bc"}}, 1},
    {{"==", {"binary_part", "$3", 2, 2}, {"const", "c"}}, 0},
    {{"is_function", "$1"}, 0}, {{"is_port", "$1"}, 0},
    {{"==", {"hd", {"tl", "$2"}}, 2}, 1}, {{"==", {"length", {"tl", {"tl", {"tl", "$2"}}}}, 0}, 1},
    {{"==", {"hd", {"const", {}}}, 1}, 0}, {{"==", {"float", "$3"}, 1}, 0},
    {{"==", {"band", 1.0, 1}, 1}, 0},
  }
  for i, c in ipairs(cases) do
    T.eq(count(c[1]), c[2], "case " .. i .. " " .. T.show(c[1]))
  end
  -- is_record(T, Tag, Size) and size of a tuple, on the object {true, 5} ('$_')
  T.eq(#ets.select(t, {{"$1", {{"is_record", "$1", true, 2}}, {"$_"}}}), 1)
  T.eq(#ets.select(t, {{"$1", {{"==", {"size", "$1"}, 2}}, {"$_"}}}), 1)
  T.eq(ets.select(t, {{{"$1", "_"}, {}, {{"hd", "$1"}}}}), {{"hd", true}})   -- a Lua body builds
  ets.delete(t)
end)

-- A body's nested lists are built in the match specification's arena and copied into
-- it again: when it grew meanwhile, the copy read the freed old arena (ASan:
-- heap-use-after-free in term_put_raw).
test("select bodies that build big nested lists copy what the arena held", function()
  local t = ets.new("t", {"set"})
  local big = {}
  for i = 1, 200 do big[i] = string.rep("x", 40) .. i end
  ets.insert(t, {1, big})
  local r = ets.select(t, {{{"$1", "$2"}, {}, {{{"$2", "$2"}, {"$2", {"$2", "$2"}}}}}})
  T.eq(r, {{{big, big}, {big, {big, big}}}})
  ets.delete(t)
end)

-- erl's info(T) has every item ets:info/1 lists; lpvm lacked compressed,
-- decentralized_counters and node ("unknown info item"), and new's type and access
-- fields took any option word (type = "public" made a protected... public set).
test("info has erl's items; new's type and access fields take only their own words", function()
  local t = ets.new("i", {"compressed"})
  T.eq(ets.info(t, "compressed"), false)
  T.eq(ets.info(t, "decentralized_counters"), false)
  T.eq(ets.info(t, "node"), lpvm.node())
  local all = ets.info(t)
  for _, item in ipairs({"id", "decentralized_counters", "read_concurrency",
                         "write_concurrency", "compressed", "memory", "owner", "heir",
                         "name", "size", "node", "named_table", "type", "keypos",
                         "protection"}) do
    T.ok(all[item] ~= nil, "info(t) has " .. item)
  end
  ets.delete(t)
  T.raises(function() ets.new("x", {type = "public"}) end, "bad argument #2 to 'new'", "public")
  T.raises(function() ets.new("x", {access = "set"}) end, "bad argument #2 to 'new'", "set")
  T.raises(function() ets.new("x", {protection = "bag"}) end, "bad argument #2 to 'new'", "bag")
  T.raises(function() ets.new("x", {type = 1}) end, "bad argument #2 to 'new'", "type")
  local b = ets.new("x", {type = "bag", access = "public"})
  T.eq(ets.info(b, "type"), "bag")
  T.eq(ets.info(b, "protection"), "public")
  ets.delete(b)
end)

-- ets:select_replace/2 was missing ("attempt to call a nil value"). Each count and
-- table below is what erl gave for the same calls in an escript.
test("select_replace: as erl's, the key kept, a duplicate_bag's order too, not a bag", function()
  for _, ty in ipairs({"set", "ordered_set", "duplicate_bag"}) do
    local t = ets.new("t", {ty, "public", "write_concurrency"})
    for i = 1, 6 do ets.insert(t, {i, i * 10, "x"}) end
    T.eq(ets.select_replace(t, {{{"$1", "$2", "$3"}, {{">", "$1", 3}}, {{"$1", "$2", "y"}}}}), 3, ty)
    T.eq(ets.select_replace(t, {{{"$1", "$2", "_"}, {{"<", "$1", 3}}, {"$_"}}}), 2, ty)
    -- a result with another key, or not a tuple: nothing replaced (erl: badarg)
    T.raises(function() ets.select_replace(t, {{{"$1", "$2", "_"}, {}, {{"$2", "$1"}}}}) end,
             "bad argument #2 to 'select_replace'", "key")
    T.raises(function() ets.select_replace(t, {{{"$1", "$2", "_"}, {}, {"$1"}}}) end,
             "bad argument #2 to 'select_replace'")
    T.eq(ets.select_replace(t, {{{"$1", "$2", "_"}, {{"==", "$1", 2}}, {{"$1"}}}}), 1, ty)
    T.eq(ets.select_replace(t, {{{2, "_", "_"}, {}, {{2, 0}}}}), 0, ty)   -- {2} now
    local l = ets.tab2list(t)
    table.sort(l, function(a, b) return a[1] < b[1] end)
    T.eq(l, {{1, 10, "x"}, {2}, {3, 30, "x"}, {4, 40, "y"}, {5, 50, "y"}, {6, 60, "y"}}, ty)
    T.eq(ets.info(t, "size"), 6)
    ets.delete(t)
  end
  local d = ets.new("d", {"duplicate_bag"})
  ets.insert(d, {"k", 1}) ets.insert(d, {"k", 2}) ets.insert(d, {"k", 1}) ets.insert(d, {"k", 3})
  T.eq(ets.select_replace(d, {{{"k", 1}, {}, {{"k", 1, "extra"}}}}), 2)
  T.eq(ets.lookup(d, "k"), {{"k", 1, "extra"}, {"k", 2}, {"k", 1, "extra"}, {"k", 3}})
  local mem = ets.info(d, "memory")
  T.eq(ets.select_replace(d, {{{"k", 1, "extra"}, {}, {{"k", 1}}}}), 2)
  T.eq(ets.lookup(d, "k"), {{"k", 1}, {"k", 2}, {"k", 1}, {"k", 3}})
  T.ok(ets.info(d, "memory") < mem)
  ets.delete(d)
  local b = ets.new("b", {"bag"})
  ets.insert(b, {1, 2})
  T.raises(function() ets.select_replace(b, {{"_", {}, {"$_"}}}) end,
           "bad argument #1 to 'select_replace'", "table type")
  ets.delete(b)
  -- protection: a protected table's objects are replaced by its owner only
  local p = ets.new("p", {"set"})
  ets.insert(p, {1, 2})
  local me = lpvm.self()
  local _, ref = lpvm.spawn_monitor(function()
    lpvm.send(me, "tried", pcall(ets.select_replace, p, {{"_", {}, {"$_"}}}))
  end)
  local _, ok, err = lpvm.receive(function(m) return m == "tried" end, T.WAIT)
  lpvm.receive_ref(ref, T.WAIT)
  T.eq(ok, false)
  T.ok(tostring(err):find("no access", 1, true), err)
  ets.delete(p)
end)

-- ets:foldr/3 was missing. erl, on an ordered_set {3,c} {1,a} {2,b} {2.5,x}: foldl
-- consing gives [{3,c},{2.5,x},{2,b},{1,a}], foldr [{1,a},{2,b},{2.5,x},{3,c}].
test("foldr walks the other way from foldl, over a snapshot, errors naming #3", function()
  local o = ets.new("o", {"ordered_set"})
  ets.insert(o, {3, "c"}, {1, "a"}, {2, "b"}, {2.5, "x"})
  local function cons(x, acc) table.insert(acc, 1, x) return acc end
  T.eq(ets.foldl(cons, {}, o), {{3, "c"}, {2.5, "x"}, {2, "b"}, {1, "a"}})
  T.eq(ets.foldr(cons, {}, o), {{1, "a"}, {2, "b"}, {2.5, "x"}, {3, "c"}})
  local s = ets.new("s", {"set"})
  for i = 1, 20 do ets.insert(s, {i}) end
  local l, r = ets.foldl(cons, {}, s), ets.foldr(cons, {}, s)
  for i = 1, 20 do T.eq(l[i], r[21 - i]) end
  T.eq(ets.foldr(function(x, n) ets.delete(s, x[1]) return n + 1 end, 0, s), 20)
  T.eq(ets.info(s, "size"), 0)
  ets.delete(s)
  T.raises(function() ets.foldr(cons, {}, s) end, "bad argument #3 to 'foldr'", "no such table")
  T.raises(function() ets.foldr(nil, {}, o) end, "bad argument #1 to 'foldr'")
  ets.delete(o)
end)

-- ets:test_ms/2 was missing. erl: test_ms({1, <<"a">>, 3}, MS) gives {ok, [1, 3]},
-- {ok, false} when no clause matches, {ok, Obj} for '$_', {error, _} for a bad one.
test("test_ms runs a match specification on one object, as erl's", function()
  local o = {1, "a", 3}
  T.eq(ets.test_ms(o, {{{"$1", "_", "$2"}, {{">", "$2", 2}}, {"$$"}}}), {1, 3})
  T.eq(ets.test_ms(o, {{{"$1", "_", "$2"}, {{">", "$2", 5}}, {"$$"}}}), false)
  T.eq(ets.test_ms(o, {{{"$1", "_", "$2"}, {}, {"$_"}}}), o)
  T.eq(ets.test_ms(o, {{{"_", "_"}, {}, {true}}, {"_", {}, {"$_"}}}), o)   -- 2nd clause
  T.eq(ets.test_ms(o, {}), false)
  T.eq(ets.test_ms({}, {{"_", {}, {true}}}), true)
  T.raises(function() ets.test_ms(o, {{"_", {{"<=", 1, 2}}, {true}}}) end,
           "bad argument #2 to 'test_ms'", "bad match specification")
  T.raises(function() ets.test_ms("x", {}) end, "bad argument #1 to 'test_ms'")
  T.raises(function() ets.test_ms({print}, {}) end, "bad argument #1 to 'test_ms'", "function")
end)

-- select_replace holds the table alone: readers by the key's stripe (read_concurrency +
-- write_concurrency) see each object whole, old or new, while it changes their sizes.
test("select_replace while other processes look the objects up by their stripes", function()
  local me = lpvm.self()
  local t = ets.new("t", {"set", "public", "read_concurrency", "write_concurrency"})
  local keys = 100
  for i = 1, keys do ets.insert(t, {i, 0, 0}) end
  local refs = {}
  for r = 1, 2 do
    local pid, ref = lpvm.spawn_monitor(function()
      local bad = 0
      lpvm.send(me, "ready")
      while lpvm.receive(function(m) return m == "stop" end, 0) == nil do
        for i = 1, keys do
          local o = ets.lookup(t, i)[1]
          if not o or o[2] ~= o[3] then bad = bad + 1 end
        end
      end
      lpvm.send(me, "bad", bad)
    end)
    refs[r] = {pid, ref}
    lpvm.receive(function(m) return m == "ready" end, T.WAIT)
  end
  local rounds = T.scaled(150, 10)
  for round = 1, rounds do
    T.eq(ets.select_replace(t, {{{"$1", "_", "_"}, {}, {{"$1", round, round}}},
                                {{"$1", "_", "_", "_"}, {}, {{"$1", round, round}}}}), keys)
    if round % 2 == 0 then   -- a bigger object, so the next replace changes the size back
      ets.select_replace(t, {{{"$1", "$2", "$3"}, {}, {{"$1", "$2", "$3", string.rep("p", 40)}}}})
    end
  end
  for r = 1, 2 do lpvm.send(refs[r][1], "stop") end
  for r = 1, 2 do
    local _, bad = lpvm.receive(function(m) return m == "bad" end, T.WAIT)
    T.eq(bad, 0)
    lpvm.receive_ref(refs[r][2], T.WAIT)
  end
  T.eq(ets.info(t, "size"), keys)
  local last = ets.lookup(t, 1)[1]
  T.eq({last[2], last[3]}, {rounds, rounds})
  ets.delete(t)
end)

T.run()
