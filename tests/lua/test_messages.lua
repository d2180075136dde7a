-- test_messages.lua -- every Lua type through a message, both ways, and the errors.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

-- An echo process: sends every message back to the pid given as its first value.
local function start_echo()
  return lpvm.spawn(function()
    while true do
      local r = table.pack(lpvm.receive())
      if r[1] == "stop" then return end
      lpvm.send(r[1], table.unpack(r, 2, r.n))
    end
  end)
end

local echo

-- Send the values through another process and back; compare.
local function roundtrip(...)
  local want = table.pack(...)
  lpvm.send(echo, lpvm.self(), ...)
  local got = T.recv()
  T.eqv(got, want)
  return got
end

test("start the echo process", function()
  echo = start_echo()
  roundtrip("ping")
end)

test("nil and booleans", function()
  roundtrip(nil)
  roundtrip(true)
  roundtrip(false)
  roundtrip(true, false, nil)
end)

test("nil in the middle and at the end of several values", function()
  local r = roundtrip(1, nil, 3, nil)
  T.eq(r.n, 4)
end)

test("integers, small and large, keep their subtype", function()
  for _, v in ipairs({ 0, 1, -1, 255, 256, -256, 1 << 31, -(1 << 31),
                       (1 << 31) - 1, -(1 << 31) - 1, 1 << 32, (1 << 53) + 1,
                       math.maxinteger, math.mininteger,
                       math.maxinteger - 1, math.mininteger + 1 }) do
    local r = roundtrip(v)
    T.eq(math.type(r[1]), "integer", "subtype of " .. v)
  end
end)

test("floats keep their value and subtype", function()
  for _, v in ipairs({ 0.0, 1.0, -1.5, 0.1, 1e300, -1e-300, math.pi, 2.0 ^ 63,
                       math.huge, -math.huge }) do
    local r = roundtrip(v)
    T.eq(math.type(r[1]), "float", "subtype of " .. tostring(v))
  end
  local r = roundtrip(0 / 0)
  T.ok(r[1] ~= r[1], "NaN stays NaN")
  r = roundtrip(-0.0)
  T.eq(1 / r[1], -math.huge, "negative zero keeps its sign")
end)

test("strings are binary safe", function()
  roundtrip("")
  roundtrip("a\0b\0\0c")
  local all = {}
  for i = 0, 255 do all[#all + 1] = string.char(i) end
  roundtrip(table.concat(all))
  roundtrip(("\xff\0"):rep(1000))
  roundtrip("héllo wörld ✓")
end)

test("large strings", function()
  roundtrip(("x"):rep(100000))
  roundtrip(("0123456789"):rep(T.scaled(100000, 1000)))
end)

-- A long string inside tables, by each path: a list sent in place, a map and deep
-- nesting by the general encoder (its block sized for the last message, then grown
-- for the string), a graph; after a message of 64 KB and after a small one.
test("large strings inside tables arrive exact", function()
  local mb = ("\0\1\255ab\0"):rep(T.scaled(174763, 2000))   -- ~1 MB, zeros inside
  local k100 = ("0123456789"):rep(10000)
  local before = { ("y"):rep(65536), "small" }
  local f = function() return mb end
  for _, first in ipairs(before) do
    roundtrip(first)
    roundtrip({ mb })
    roundtrip({ lpvm.self(), k100, mb, 1, "s" })
    roundtrip({ data = mb, n = 1 })
    roundtrip({ { { { { { { k100, { mb } } } } } } } })
    roundtrip({ k100, mb, k100 }, { x = { k100 } }, mb)
    local many = { mb }
    for i = 2, 3000 do many[i] = i end                 -- small puts after the long one
    many[3001] = k100
    roundtrip(many)
    lpvm.send(echo, lpvm.self(), { f, mb })             -- a graph: a function inside
    local t = T.recv()[1]
    T.eq(t[2], mb)
    T.eq(t[1](), mb)
  end
end)

test("tables whose keys are 1..n arrive as lists", function()
  roundtrip({ 1, 2, 3 })
  roundtrip({ "a", true, 1.5, { 1 } })
  local big = {}
  for i = 1, 5000 do big[i] = i * 2 end
  roundtrip(big)
end)

test("other tables arrive as maps", function()
  roundtrip({ a = 1, b = "two", c = false })
  roundtrip({ [1] = "x", [3] = "z" })                  -- hole: a map
  roundtrip({ [0] = "zero", [1] = "one" })
  roundtrip({ [-1] = 1, [2.5] = "f", [true] = "t", [false] = "f" })
  roundtrip({ 1, 2, name = "mixed" })
  lpvm.send(echo, lpvm.self(), { [{ 1, 2 }] = "table key" })
  local m = T.recv()[1]
  local k, v = next(m)
  T.eq(k, { 1, 2 })
  T.eq(v, "table key")
end)

test("the empty table arrives as an empty table", function()
  local r = roundtrip({})
  T.eq(type(r[1]), "table")
  T.eq(next(r[1]), nil)
end)

test("nested tables", function()
  roundtrip({ user = { name = "ann", tags = { "a", "b" }, meta = { { x = 1 }, { y = { z = {} } } } } })
  local deep = {}
  local cur = deep
  for i = 1, 100 do cur.next = { i = i }; cur = cur.next end
  roundtrip(deep)
end)

test("a table referenced twice (no cycle) is copied twice", function()
  local shared = { 1, 2 }
  local r = roundtrip({ shared, shared })
  T.eq(r[1][1], { 1, 2 })
  T.eq(r[1][2], { 1, 2 })
end)

test("pids travel and still work", function()
  local me = lpvm.self()
  local r = roundtrip(me, echo, { owner = me, list = { me } })
  T.ok(r[1] == me, "a pid comes back equal")
  T.ok(r[3].owner == me)
  lpvm.send(r[1], "via returned pid")
  T.eq(T.recv()[1], "via returned pid")
end)

test("references travel and still compare equal", function()
  local ref = lpvm.monitor(echo)
  local r = roundtrip(ref)
  T.ok(r[1] == ref, "a monitor reference comes back equal")
  lpvm.demonitor(ref)
  local tref = lpvm.send_after(100000, lpvm.self(), "never")
  r = roundtrip(tref)
  T.ok(r[1] == tref, "a timer reference comes back equal")
  lpvm.cancel_timer(tref)
end)

test("many values in one message", function()
  local vals = {}
  for i = 1, 200 do vals[i] = i end
  roundtrip(table.unpack(vals))
end)

-- Up to 8 scalars are built by a short path of their own (vm/lterm_plain.c,
-- lterm_msg_plain), anything else by the general encoder; a local message of scalars
-- and tables is read by a short path (lterm_push_plain), one holding a shared binary
-- or a function by the general decoder. The same values must arrive the same either
-- way, and the paths may meet in one mailbox.
test("a few scalars and the same values beside a table arrive alike", function()
  local me = lpvm.self()
  local sets = {
    { "lpvm_graph", 1 },                         -- a string, not the graph wrapper's atom
    { nil, true, false, 0, -1, 255, 256, 2.5 },  -- 8: the short path's limit
    { 1, 2, 3, 4, 5, 6, 7, 8, 9 },              -- 9: the general path
    { math.maxinteger, math.mininteger, -0.0, 3.0, 1 << 31, -(1 << 31) - 1 },
    { "", "a\0b", me, ("x"):rep(300), me },
    { 0 / 0 },
  }
  for i, vals in ipairs(sets) do
    local n = (i == 2) and 8 or #vals   -- set 2 starts with nil: # does not count it
    lpvm.send(me, table.unpack(vals, 1, n))
    lpvm.send(me, { general = 1 }, table.unpack(vals, 1, n))  -- a map first: the general encoder
    lpvm.send(me, lpvm.binary("b"), table.unpack(vals, 1, n))   -- the general decoder
    local a = table.pack(lpvm.receive())
    for _, how in ipairs({ "with a table", "with a binary" }) do
      local b = table.pack(lpvm.receive())
      T.eq(a.n, n, "set " .. i)
      T.eq(b.n, n + 1, "set " .. i .. " " .. how)
      for k = 1, n do
        local x, y = a[k], b[k + 1]
        if x ~= x then
          T.ok(y ~= y, "NaN in set " .. i)
        else
          T.eq(math.type(x), math.type(y), "subtype, set " .. i .. " value " .. k)
          T.ok(x == y and (x ~= 0 or 1 / x == 1 / y), "set " .. i .. " value " .. k)
        end
      end
    end
  end
end)

-- Tables: a sequence is encoded in one pass of lua_next when its keys come in order
-- 1..n (vm/lterm.c, enc_array), else by the general path, which checks the keys and
-- makes a list or a map; read back by the short path, and by the general decoder
-- when the message also holds a shared binary (or a function: a graph, whose tables
-- the general encoder writes too). Every table arrives alike all three ways.
test("tables arrive alike by the short and the general paths", function()
  local me = lpvm.self()
  local function nest(depth, leaf)
    local t = leaf
    for _ = 1, depth do t = { t } end
    return t
  end
  local backwards = {}           -- integer keys inserted from the top: some in the hash part
  for i = 40, 1, -1 do backwards[i] = i * 2 end
  local string_in_place = { 1 }  -- keys 1, 2, "3", 4: # is 4, and the hash part may
                                 -- give "3" before 4 (it depends on the hash seed)
  string_in_place[2] = 2
  string_in_place["3"] = 3
  string_in_place[4] = 4
  local emptied = { 1, 2, 3, x = 1 }
  emptied.x = nil                -- a sequence again, with an empty hash part
  local cases = {
    {}, { 1, 2, 3 }, { 1, 2, x = 3 }, { [1] = "a", [3] = "c" }, { nil, "b" },
    { 1, nil, 3 }, { ["1"] = "a" }, { [1.5] = 1, [-1] = 2, [0] = 3 }, backwards,
    string_in_place, emptied, { { 1, { 2, { 3 } } }, { a = { b = { c = 1 } } }, { true, false } },
    { me, "s", 2.5, math.mininteger, { me, { me } }, {}, { {} } },
    { [me] = me, [true] = false, [1] = { x = { 1, 2 } } },
    nest(150, "deep"), nest(20, { 1, 2, 3 }),
  }
  for i, t in ipairs(cases) do
    lpvm.send(me, t)
    lpvm.send(me, t, lpvm.binary("b"))
    lpvm.send(me, t, print)
    local a = table.pack(lpvm.receive())
    local b = table.pack(lpvm.receive())
    local c = table.pack(lpvm.receive())
    T.eqv(a, table.pack(t), "case " .. i .. ", short path")
    T.eqv(b, table.pack(t, b[2]), "case " .. i .. ", general decoder")
    T.ok(lpvm.is_binary(b[2]), "case " .. i .. ": the binary")
    T.eqv(c, table.pack(t, print), "case " .. i .. ", graph")
  end
end)

-- A process keeps the short strings it is sent again and again (vm/lterm_plain.c's
-- cache, anchored in its state): each must arrive as the interned string (a table key
-- finds it), with the right bytes when strings share a length and their end bytes
-- (one slot), across collections that free every other copy, at the 40-byte limit of
-- short strings and past it.
test("short strings met again arrive as themselves", function()
  local me = lpvm.self()
  local function make(i)   -- a fresh string each call, never a constant
    local k = i % 43       -- lengths 0..42 (short strings end at 40)
    if k == 0 then return "" end
    return ("a"):rep(k // 2) .. string.char(65 + i % 7) .. ("z"):rep(k - k // 2 - 1)
  end
  local want = {}
  for i = 1, 300 do want[i] = make(i) end
  for round = 1, 4 do
    for rep = 1, 3 do      -- three times in a row: kept from the second
      for i = 1, #want do lpvm.send(me, make(i), { make(i), i }) end
      for i = 1, #want do
        local s, t = lpvm.receive()
        local key = { [want[i]] = i }
        T.eq(s, want[i], "round " .. round .. " rep " .. rep .. " string " .. i)
        T.eq(key[s], i, "interned: string " .. i)
        T.eq(t[1], want[i], "in a list: string " .. i)
        T.eq(key[t[1]], i, "interned in a list: string " .. i)
      end
      collectgarbage("collect")
    end
    lpvm.send(echo, me, "x", "y", "x")   -- the same through another process
    T.eqv(T.recv(), table.pack("x", "y", "x"))
  end
end)

-- More strings come again than the cache has slots (16: 8 buckets of two ways), so
-- buckets see three or more in turn, keep two, replace a kept one: each string must
-- still arrive as itself, interned, in a list and alone, across collections.
test("short strings taking turns in the cache's buckets arrive as themselves", function()
  local me = lpvm.self()
  local function make(i, j)   -- a fresh string each call: 24 names of 6 bytes
    return string.char(97 + i % 26) .. ("q"):rep(4) .. string.char(65 + (i * 7 + j) % 26)
  end
  local names = {}
  for i = 1, 24 do names[i] = make(i, 0) end
  for round = 1, 3 do
    for _ = 1, 20 do
      local l = {}
      for i = 1, 24 do l[i] = make(i, 0) end
      lpvm.send(me, make(round, 0), l)
      local s, t = lpvm.receive()
      local key = {}
      for i = 1, 24 do key[names[i]] = i end
      T.eq(s, names[round], "alone, round " .. round)
      T.eq(key[s], round, "alone, interned, round " .. round)
      for i = 1, 24 do
        T.eq(t[i], names[i], "in a list: string " .. i)
        T.eq(key[t[i]], i, "interned in a list: string " .. i)
      end
    end
    collectgarbage("collect")
  end
end)

-- A message of scalars and lists of scalars and lists (a table whose array part holds
-- them up to its first nil, with no hash part; 4 levels, 8 tables) is written in
-- place (vm/lterm_plain.c, plain_raw); beside a map it goes through the general
-- encoder, beside a binary the general decoder reads it. All three must arrive alike.
test("lists of scalars arrive alike by the in-place and the general paths", function()
  local me = lpvm.self()
  local ref = lpvm.make_ref()
  local sets = {
    { me, 7, "call", { "abc" } },
    { { 1, 2.5, true, false, "s", me, ref, -1, 256, 1 << 40, math.mininteger } },
    { {}, { "" }, {}, { ("x"):rep(300) } },
    { { nil, 2 } },                      -- a hole: a map
    { { 1, 2, 3, nil }, "tail" },
    { { 1, { 2 } }, 3 },                 -- nested lists: in place too
    { { 1, { me, { "s", { 4, { 5 } } } } }, 3 },   -- five levels: the general encoder
    { { 1, { 2, { x = 1 } } } },         -- a map inside: the general encoder
  }
  local emptied = { 1, 2, x = 3 }
  emptied.x = nil                       -- a hash part, empty: the general encoder
  sets[#sets + 1] = { emptied, emptied }
  for i, vals in ipairs(sets) do
    local n = #vals
    lpvm.send(me, table.unpack(vals, 1, n))
    lpvm.send(me, { general = 1 }, table.unpack(vals, 1, n))
    lpvm.send(me, lpvm.binary("b"), table.unpack(vals, 1, n))
    local a = table.pack(lpvm.receive())
    T.eqv(a, table.pack(table.unpack(vals, 1, n)), "set " .. i .. " in place")
    for _, how in ipairs({ "general encoder", "general decoder" }) do
      local b = table.pack(lpvm.receive())
      T.eqv(table.pack(table.unpack(b, 2, b.n)), a, "set " .. i .. ", " .. how)
    end
  end
  T.eq(select(2, lpvm.receive(0)), "timeout")
end)

test("nesting: too deep is an error, a cycle deep down is one too", function()
  local t = {}
  for _ = 1, 250 do t = { t } end
  T.raises(function() lpvm.send(lpvm.self(), t) end, "too deep")
  local top = { 1 }
  local at = top
  for _ = 1, 50 do
    at[2] = { 1 }
    at = at[2]
  end
  at[2] = top
  T.raises(function() lpvm.send(lpvm.self(), "x", top) end, "cycl")
  at[2] = { "end" }
  lpvm.send(lpvm.self(), "x", top)
  T.eqv(T.recv(), table.pack("x", top))
end)

test("cycles of lists alone are errors, found at any depth and width", function()
  local t = { 1 }
  t[2] = t                                           -- a list holding itself
  T.raises(function() lpvm.send(lpvm.self(), t) end, "cycl")
  T.raises(function() lpvm.send(lpvm.self(), "x", { { t } }) end, "cycl")
  local a, b = { 1 }, { 2 }
  a[2], b[2] = b, a                                  -- two lists holding each other
  T.raises(function() lpvm.send(lpvm.self(), a, 3) end, "cycl")
  local wide = {}
  for i = 1, 64 do wide[i] = wide end                -- 64 ways back at every level
  T.raises(function() lpvm.send(lpvm.self(), wide) end, "cycl")
  local top = { "top" }
  local at = top
  for _ = 1, 190 do                                  -- a cycle just inside the limit
    at[2] = { "x" }
    at = at[2]
  end
  at[2] = top
  T.raises(function() lpvm.send(lpvm.self(), "x", top) end, "cycl")
  at[2] = top[2]                                     -- back into the middle
  T.raises(function() lpvm.send(lpvm.self(), top) end, "cycl")
  at[2] = nil
  lpvm.send(lpvm.self(), top)                        -- no cycle: 191 levels arrive
  T.eqv(T.recv(), table.pack(top))
  T.no_msg(10)
end)

test("a message of no values", function()
  lpvm.send(lpvm.self())
  local r = T.recv()
  T.eq(r.n, 0)
end)

test("a cycle is an error at the sender and nothing is sent", function()
  local t = { 1 }
  t.self = t
  T.raises(function() lpvm.send(lpvm.self(), t) end, "cycl")
  local a, b = {}, {}
  a.b, b.a = b, a
  T.raises(function() lpvm.send(lpvm.self(), "ok", a) end, "cycl")
  T.no_msg(10)
end)

test("coroutines and userdata cannot be sent (functions can: test_funs.lua)", function()
  T.raises(function() lpvm.send(lpvm.self(), coroutine.create(print)) end, "thread")
  T.raises(function() lpvm.send(lpvm.self(), io.stdout) end, "userdata")
  T.raises(function() lpvm.send(lpvm.self(), 1, 2, { { { io.stdout } } }) end, "userdata")
  local co = coroutine.create(print)
  T.raises(function() lpvm.send(lpvm.self(), { f = function() return co end }) end, "'co'")
  T.no_msg(10)
end)

test("a failed send leaves the sender usable", function()
  pcall(lpvm.send, lpvm.self(), { io.stdout })
  roundtrip("still fine")
end)

test("stop the echo process", function()
  local ref = lpvm.monitor(echo)
  lpvm.send(echo, "stop")
  local _, reason = T.down(ref)
  T.eq(reason, "normal")
end)

-- A message to itself goes straight into the mailbox when nothing is in its signal
-- queue (tasks/signal.c, send_self); one of its own signals there keeps it behind.
test("messages to itself keep their order, behind its own exit signal", function()
  local reason = T.run_proc(function()
    local me = lpvm.self()
    lpvm.trap_exit(true)
    for i = 1, 3 do lpvm.send(me, "m", i) end
    lpvm.exit(me, "to_self")   -- trapped: an EXIT message, through the signal queue
    for i = 4, 6 do lpvm.send(me, "m", i) end
    local got = {}
    for _ = 1, 7 do
      local a, b, c = lpvm.receive(1000)
      got[#got + 1] = a == "EXIT" and ("EXIT:" .. tostring(c)) or (a .. b)
    end
    assert(table.concat(got, " ") == "m1 m2 m3 EXIT:to_self m4 m5 m6", table.concat(got, " "))
    assert(select(2, lpvm.receive(0)) == "timeout", "nothing more")
  end)
  T.eq(reason, "normal")
end)

T.run()
