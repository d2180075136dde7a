-- test_coroutine.lua -- coroutines inside a process (vm/llibs.c): coroutine.yield on the
-- process's own thread raises as lua5.4's on its main thread; coroutines the process
-- makes yield, resume, block in receive and nest as in Lua.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

local OUTSIDE = "attempt to yield from outside a coroutine"

test("coroutine.yield at a process's top level raises, as lua5.4's", function()
  local ok, err = pcall(coroutine.yield, 1, 2)
  T.eq(ok, false)
  T.eq(err, OUTSIDE)
  T.eq(coroutine.isyieldable(), false)
  T.eq(coroutine.isyieldable(coroutine.running()), false)
  -- the process goes on: its own receive still yields to the scheduler from C
  lpvm.send(lpvm.self(), "still here")
  T.eq(lpvm.receive(T.WAIT), "still here")
end)

test("a spawned process that yields at its top level ends with the error", function()
  local reason = T.run_proc(function() coroutine.yield("lost") end)
  T.ok(T.mentions(reason, OUTSIDE), T.show(reason))
end)

test("coroutine.wrap and resume inside a process", function()
  local gen = coroutine.wrap(function(a)
    T.eq(coroutine.isyieldable(), true)
    local b = coroutine.yield(a + 1)
    return b * 2
  end)
  T.eq(gen(1), 2)
  T.eq(gen(5), 10)
  local co = coroutine.create(function(...) return select("#", ...), coroutine.yield(...) end)
  T.eq({coroutine.resume(co, "a", "b")}, {true, "a", "b"})
  T.eq({coroutine.resume(co, "c")}, {true, 2, "c"})
  T.eq(coroutine.status(co), "dead")
end)

test("lpvm.receive blocking inside a coroutine the process made", function()
  local parent = lpvm.self()
  local pid, ref = lpvm.spawn_monitor(function()
    local co = coroutine.create(function()
      lpvm.send(parent, "ready", lpvm.self())
      local m = lpvm.receive()               -- blocks: the scheduler yield passes up
      local n = coroutine.yield("got " .. m)  -- the user's yield: to resume
      return n
    end)
    local ok1, r1 = coroutine.resume(co)
    local ok2, r2 = coroutine.resume(co, "second")
    lpvm.send(parent, "result", ok1, r1, ok2, r2)
  end)
  local r = T.recv_match(function(tag) return tag == "ready" end)
  lpvm.send(r[2], "hello")
  T.eq(T.recv_match(function(tag) return tag == "result" end),
       {"result", true, "got hello", true, "second", n = 5})
  T.eq(T.down(ref), pid)
end)

test("nested coroutines: receive in the inner one, yields to their own resumers", function()
  local parent = lpvm.self()
  local pid, ref = lpvm.spawn_monitor(function()
    local outer = coroutine.wrap(function()
      local inner = coroutine.wrap(function()
        lpvm.send(parent, "inner ready", lpvm.self())
        coroutine.yield(lpvm.receive())
        return "inner done"
      end)
      coroutine.yield(inner())
      coroutine.yield(inner())
      return "outer done"
    end)
    lpvm.send(parent, "seen", outer(), outer(), outer())
  end)
  local r = T.recv_match(function(tag) return tag == "inner ready" end)
  lpvm.send(r[2], "msg")
  T.eq(T.recv_match(function(tag) return tag == "seen" end),
       {"seen", "msg", "inner done", "outer done", n = 4})
  T.eq(T.down(ref), pid)
end)

T.run()
