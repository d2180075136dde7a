-- test_names.lua -- register, unregister, whereis, send by name.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

test("register(name) names the caller; whereis finds it", function()
  lpvm.register("names_me")
  T.ok(lpvm.whereis("names_me") == lpvm.self())
  lpvm.unregister("names_me")
  T.eq(lpvm.whereis("names_me"), nil)
end)

test("register(name, pid) names another process; send by name", function()
  local me = lpvm.self()
  local pid = lpvm.spawn(function(p)
    local v = lpvm.receive()
    lpvm.send(p, "echo", v)
  end, me)
  lpvm.register("names_echo", pid)
  T.ok(lpvm.whereis("names_echo") == pid)
  lpvm.send("names_echo", "by name")
  T.eqv(T.recv(), table.pack("echo", "by name"))
end)

test("a name is released when its process ends", function()
  local pid = lpvm.spawn(function() lpvm.receive() end)
  lpvm.register("names_short", pid)
  local ref = lpvm.monitor(pid)
  lpvm.send("names_short", "go")
  T.down(ref)
  T.ok(T.wait_until(function() return lpvm.whereis("names_short") == nil end, 1000),
       "name gone after the process ended")
  -- and can be taken again
  lpvm.register("names_short")
  lpvm.unregister("names_short")
end)

-- Each thread remembers its last lookup while no name changes (tasks/names.c): a
-- name that moves, goes and comes back must be followed at once by sends and whereis,
-- another name looked up between them must not be confused with it.
test("sends by name follow the name as it moves and goes", function()
  local me = lpvm.self()
  local function echo(tag)
    return lpvm.spawn(function()
      while true do
        local v = lpvm.receive()
        if v == "stop" then return end
        lpvm.send(me, tag, v)
      end
    end)
  end
  local a, b = echo("a"), echo("b")
  lpvm.register("names_moving", a)
  lpvm.register("names_other", b)
  for round = 1, 3 do
    lpvm.send("names_moving", round)
    T.eqv(T.recv(), table.pack("a", round))
    lpvm.send("names_other", round)
    T.eqv(T.recv(), table.pack("b", round))
    T.ok(lpvm.whereis("names_moving") == a)
  end
  lpvm.unregister("names_moving")
  T.eq(lpvm.whereis("names_moving"), nil)
  T.raises(function() lpvm.send("names_moving", "gone") end, "no process registered")
  lpvm.unregister("names_other")
  lpvm.register("names_moving", b)   -- the same name, another process
  lpvm.send("names_moving", "moved")
  T.eqv(T.recv(), table.pack("b", "moved"))
  local ref = lpvm.monitor(b)
  lpvm.send("names_moving", "stop")   -- its process ends: the name goes with it
  T.down(ref)
  T.ok(T.wait_until(function() return lpvm.whereis("names_moving") == nil end, 5000),
       "name gone after the process ended")
  T.raises(function() lpvm.send("names_moving", "gone") end, "no process registered")
  lpvm.send(a, "stop")
end)

test("whereis of an unknown name is nil", function()
  T.eq(lpvm.whereis("names_nobody_here"), nil)
end)

test("a name already taken cannot be registered again", function()
  lpvm.register("names_taken")
  local other = lpvm.spawn(function() lpvm.receive() end)
  local ok, res = pcall(lpvm.register, "names_taken", other)
  T.ok(not ok or not res, "registering a taken name fails")
  T.ok(lpvm.whereis("names_taken") == lpvm.self())
  lpvm.unregister("names_taken")
  lpvm.exit(other, "kill")
end)

test("a process has at most one name", function()
  lpvm.register("names_first")
  local ok, res = pcall(lpvm.register, "names_second")
  T.ok(not ok or not res, "a second name for the same process fails")
  lpvm.unregister("names_first")
  lpvm.unregister("names_second")
end)

test("unregister of an unknown name does not raise", function()
  local ok = pcall(lpvm.unregister, "names_never_registered")
  T.ok(ok)
end)

test("send to an unknown name fails", function()
  local ok, res = pcall(lpvm.send, "names_nobody", "x")
  T.ok(not ok or not res, "send to an unregistered name raises or returns false/nil")
end)

test("binary and long names", function()
  local name = ("n"):rep(200)
  lpvm.register(name)
  T.ok(lpvm.whereis(name) == lpvm.self())
  lpvm.unregister(name)
end)

test("names: bad arguments name the argument", function()
  T.raises(function() lpvm.register() end, "bad argument #1")
  T.raises(function() lpvm.register({}) end, "bad argument #1")
  T.raises(function() lpvm.register("x", "y") end, "bad argument #2")
  T.raises(function() lpvm.whereis() end, "bad argument #1")
  T.raises(function() lpvm.unregister() end, "bad argument #1")
end)

-- Erlang's register takes atoms only (register(42, self()) is badarg); a number was
-- coerced by luaL_checklstring and named the caller "42".
test("names: a number is no name (not coerced to a string)", function()
  T.raises(function() lpvm.register(42) end, "bad argument #1", "string (a name) expected, got number")
  T.raises(function() lpvm.register(4.5, lpvm.self()) end, "bad argument #1")
  T.raises(function() lpvm.whereis(42) end, "bad argument #1", "got number")
  T.raises(function() lpvm.unregister(42) end, "bad argument #1", "got number")
  T.eq(lpvm.whereis("42"), nil)
  T.eq(lpvm.whereis("4.5"), nil)
end)

T.run()
