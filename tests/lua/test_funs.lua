-- test_funs.lua -- Lua functions travel: in spawn, upvalues and messages, with their
-- upvalues copied (functions among them), cycles and shared variables kept.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

local function echo_back(...)
  lpvm.send(lpvm.self(), ...)
  return T.recv()
end

test("a spawned closure calls the parent's local helper functions", function()
  local me = lpvm.self()
  local function helper(x) return x * 2 end
  local function twice(x) return helper(helper(x)) end
  lpvm.spawn(function() lpvm.send(me, twice(5)) end)
  T.eq(T.recv()[1], 20)
end)

test("recursive and mutually recursive local functions travel", function()
  local me = lpvm.self()
  local function fact(n) if n <= 1 then return 1 end return n * fact(n - 1) end
  local even, odd
  function even(n) if n == 0 then return true end return odd(n - 1) end
  function odd(n) if n == 0 then return false end return even(n - 1) end
  lpvm.spawn(function() lpvm.send(me, fact(10), even(10), odd(7), even(3)) end)
  T.eqv(T.recv(), table.pack(3628800, true, true, false))
  -- and in a message
  local m = echo_back(fact, even)
  T.eq(m[1](6), 720)
  T.eq(m[2](11), false)
end)

test("a module-style table whose functions use it travels, cycle and all", function()
  local M = {}
  function M.a() return M.b() + 1 end
  function M.b() return 41 end
  local me = lpvm.self()
  lpvm.spawn(function() lpvm.send(me, M.a()) end)
  T.eq(T.recv()[1], 42)
  local copy = echo_back(M)[1]
  T.eq(copy.a(), 42)
  T.ok(copy ~= M, "a copy")
  copy.b = function() return 0 end
  T.eq(copy.a(), 1, "the copy's functions use the copy")
  T.eq(M.a(), 42, "the original is untouched")
end)

test("closures sharing a variable keep sharing it in the copy", function()
  local count = 0
  local function inc() count = count + 1; return count end
  local function get() return count end
  local m = echo_back(inc, get)
  m[1](); m[1]()
  T.eq(m[2](), 2)
  T.eq(count, 0, "the sender's variable is not shared")
end)

test("inside a message with a function, tables keep identity and may be cyclic", function()
  local t = { 1, 2 }
  t.self = t
  local shared = { "s" }
  local f = function() return t, shared end
  local m = echo_back(f, shared, t)
  local t2, s2 = m[1]()
  T.ok(t2.self == t2, "cycle kept")
  T.ok(s2 == m[2], "one table reached twice is one table")
  T.ok(t2 == m[3])
  T.eq(#t2, 2)
end)

test("closures of one body keep their own upvalues", function()
  local fs = {}
  for k = 1, 5 do fs[k] = function() return k * 10 end end
  local got = echo_back(fs)[1]
  for k = 1, 5 do T.eq(got[k](), k * 10) end
end)

test("C functions and modules travel by name", function()
  local m = echo_back(print, string.format, { f = table.concat })
  T.ok(m[1] == print and m[2] == string.format and m[3].f == table.concat)
  local fmt = string.format
  local f = echo_back(function(x) return fmt("<%s>", x) end)[1]
  T.eq(f("a"), "<a>")
end)

test("globals: a function uses the receiver's own globals", function()
  the_global = "sender"
  local f = echo_back(function() return the_global end)[1]
  T.eq(f(), "sender", "same process, same globals")
  local me = lpvm.self()
  lpvm.spawn(function()
    the_global = "child"
    lpvm.send(me, (function() return the_global end)())
  end)
  T.eq(T.recv()[1], "child")
  T.eq(the_global, "sender")
end)

test("a function travels in spawn arguments and through a third process", function()
  local me = lpvm.self()
  local base = 100
  local add = function(x) return base + x end
  local relay = lpvm.spawn(function()
    local f, to = lpvm.receive(T.WAIT)
    lpvm.send(to, f, f(1))
  end)
  lpvm.send(relay, add, me)
  local m = T.recv()
  T.eq(m[2], 101)
  T.eq(m[1](5), 105)
  lpvm.spawn(function(g) lpvm.send(me, g(2)) end, add)
  T.eq(T.recv()[1], 102)
end)

test("what cannot travel is an error naming the upvalue; nothing is sent", function()
  local co = coroutine.create(function() end)
  T.raises(function() lpvm.send(lpvm.self(), function() return co end) end,
           "upvalue 'co' cannot be sent: thread")
  local handle = io.stdout
  T.raises(function() lpvm.spawn(function() return handle end) end,
           "spawn: upvalue 'handle' cannot be sent: userdata")
  local cyclic = {}
  cyclic.me = cyclic
  T.raises(function() lpvm.send(lpvm.self(), cyclic) end, "cyclic")
  T.raises(function() lpvm.exit(function() end) end, "function")
  T.no_msg(10)
end)

test("sending the same function many times is cheap and gives equal results", function()
  local k = 7
  local f = function(x) return x + k end
  for i = 1, T.scaled(2000, 50) do
    lpvm.send(lpvm.self(), f)
    T.eq(lpvm.receive(T.WAIT)(i), i + 7)
  end
end)

T.run()
