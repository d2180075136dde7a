-- test_call.lua -- lpvm.call(server, label, request [, timeout]): the caller's side of
-- gen_server.call in C (vm/lmod_call.c), against servers written by hand.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local WAIT = T.WAIT

-- A server by hand: takes {label, from, ref, request} and runs answer(from, ref, req).
local function server(answer)
  return lpvm.spawn(function(answer_)
    while true do
      local label, from, ref, req = lpvm.receive()
      if label == "stop" then return end
      answer_(from, ref, req, label)
    end
  end, answer)
end

test("the request arrives as {label, caller, ref, request}; the reply's values come back", function()
  local me = lpvm.self()
  local srv = server(function(from, ref, req, label)
    lpvm.send_alias(from, ref, label, req, from, lpvm.make_ref() ~= ref)
  end)
  local label, req, from, fresh = lpvm.call(srv, "$my_call", { k = "v", 1, 2 })
  T.eq(label, "$my_call")
  T.eq(req, { k = "v", 1, 2 })
  T.eq(from, me)
  T.eq(fresh, true)
  T.eq(select("#", lpvm.call(srv, "x", 1)), 4, "every value after the reference")
  lpvm.send(srv, "stop")
  T.no_msg(20)
end)

test("a reply sent by hand as {ref, value} (not to the alias) is taken too", function()
  local srv = server(function(from, ref, req) lpvm.send(from, ref, req * 2) end)
  T.eq(lpvm.call(srv, "l", 21), 42)
  local srv2 = server(function(from, ref) lpvm.send(from, ref) end)
  T.eq(select("#", lpvm.call(srv2, "l", 1)), 0, "a bare reference: no values")
  lpvm.send(srv, "stop")
  lpvm.send(srv2, "stop")
end)

test("a request holding a function travels (as send would send it)", function()
  local srv = server(function(from, ref, req) lpvm.send_alias(from, ref, req.f(20)) end)
  local up = 22
  T.eq(lpvm.call(srv, "l", { f = function(x) return x + up end }), 42)
  lpvm.send(srv, "stop")
end)

test("noproc for an unknown name or a dead pid; calling_self", function()
  T.eq(select(2, pcall(lpvm.call, "call_nobody", "l", 1)), "noproc")
  local pid = lpvm.spawn(function() end)
  local ref = lpvm.monitor(pid)
  T.down(ref)
  T.eq(select(2, pcall(lpvm.call, pid, "l", 1, math.huge)), "noproc", "at once")
  T.eq(select(2, pcall(lpvm.call, lpvm.self(), "l", 1)), "calling_self")
  lpvm.register("call_me")
  T.eq(select(2, pcall(lpvm.call, "call_me", "l", 1)), "calling_self")
  lpvm.unregister("call_me")
  T.no_msg(20)
end)

test("a server that dies mid-call raises its exit reason, tables too", function()
  local srv = server(function(_, _, req) lpvm.exit(req) end)
  local ok, why = pcall(lpvm.call, srv, "l", "gone")
  T.eq(ok, false)
  T.eq(why, "gone")
  local srv2 = server(function(_, _, req) lpvm.exit(req) end)
  T.eq(select(2, pcall(lpvm.call, srv2, "l", { "shutdown", 7 })), { "shutdown", 7 })
  T.no_msg(20)
  T.eq(lpvm.info().message_queue_len, 0)
end)

test("timeout raises 'timeout'; the late reply and the monitor leave nothing behind", function()
  -- The server answers only when told to, after the call gave up: with a reply after a
  -- 100 ms sleep against a 20 ms timeout, a loaded machine once let the reply win.
  -- "replied" follows the late reply from the same sender, so once it is here the
  -- late one has arrived (and was dropped).
  local srv = server(function(from, ref)
    lpvm.receive(function(t) return t == "go" end)
    lpvm.send_alias(from, ref, "late")
    lpvm.send(from, "replied")
  end)
  local t0 = lpvm.now()
  T.eq(select(2, pcall(lpvm.call, srv, "l", 0, 20)), "timeout")
  T.ok(lpvm.now() - t0 >= 19, "waited its 20 ms")
  lpvm.send(srv, "go")
  T.recv_match(function(t) return t == "replied" end)
  T.eq(select(2, pcall(lpvm.call, srv, "l", 0, 0)), "timeout", "0: poll once")
  lpvm.send(srv, "go")
  T.recv_match(function(t) return t == "replied" end)
  T.no_msg(20)
  T.eq(lpvm.info().message_queue_len, 0, "not even counted in the mailbox")
  lpvm.exit(srv, "kill")
  T.no_msg(50)   -- no DOWN either: the monitor ended with the call
end)

test("unrelated messages stay queued, in order", function()
  local me = lpvm.self()
  for i = 1, 5 do lpvm.send(me, "junk", i) end
  local srv = server(function(from, ref, req) lpvm.send_alias(from, ref, req) end)
  for i = 1, 100 do T.eq(lpvm.call(srv, "l", i), i) end
  lpvm.send(srv, "stop")
  for i = 1, 5 do T.eq(select(2, lpvm.receive(WAIT)), i) end
  T.no_msg(20)
end)

test("bad arguments name themselves; a value that cannot travel sends nothing", function()
  T.raises(function() lpvm.call(42, "l", 1) end, "bad argument #1", "pid")
  T.raises(function() lpvm.call(lpvm.self(), "l") end, "bad argument #3")
  T.raises(function() lpvm.call(lpvm.self(), "l", 1, -1) end, "bad argument #4")
  T.raises(function() lpvm.call(lpvm.self(), "l", 1, 5, 6) end, "bad argument #5")
  local got = 0
  local srv = server(function() got = got + 1 end)
  T.raises(function() lpvm.call(srv, "l", io.stdout) end, "call:")
  local t = {}
  t.self = t
  T.raises(function() lpvm.call(srv, "l", t) end, "call:")
  lpvm.send(srv, "stop")
  T.no_msg(30)   -- no monitor left: no DOWN when the server ends
  T.eq(got, 0, "nothing was sent")
end)

test("caller: one reply value, the default timeout, errors named as given", function()
  local srv = server(function(from, ref, req, label) lpvm.send_alias(from, ref, label, req) end)
  local call = lpvm.caller("$lbl", "my.call", 5000)
  T.eq(select("#", call(srv, 7)), 1, "the first value only")
  T.eq(call(srv, 7), "$lbl")
  T.eq(call(srv, 7, math.huge), "$lbl", "math.huge: for ever")
  T.eq(select(2, pcall(call, "caller_nobody", 1)), "noproc")
  T.raises(function() call(42, 1) end, "bad argument #1 to 'my.call'", "pid or name")
  T.raises(function() call(srv, 1, -5) end, "bad argument #3 to 'my.call'")
  T.raises(function() call(srv, 1, "5") end, "bad argument #3 to 'my.call'")
  T.raises(function() call(srv, 1, 0 / 0) end, "bad argument #3 to 'my.call'")
  T.raises(function() lpvm.caller(1) end, "bad argument #2")
  local slow = server(function(from, ref, req)
    lpvm.sleep(req)
    lpvm.send_alias(from, ref, "late")
  end)
  T.eq(select(2, pcall(lpvm.caller("l", "f", 10), slow, 100)), "timeout", "the default given")
  lpvm.sleep(150)
  T.no_msg(20)
  lpvm.send(srv, "stop")
  lpvm.exit(slow, "kill")
  T.no_msg(30)
end)

test("handle_call: a reply is sent at once, anything else comes back as xpcall's results", function()
  local me = lpvm.self()
  -- a server whose loop is handle_call's: replies, noreply, errors, values after state
  local srv = lpvm.spawn(function(parent)
    local st = 0
    local function f(req, from, s)
      if req == "noreply" then return "noreply", s + 1, "act" end
      if req == "boom" then error("boom") end
      if req == "from" then return "reply", from, s end
      if req == "fn" then return "reply", function() return s + 41 end, s end
      return "reply", req, s + 1, "act", "extra"
    end
    while true do
      local label, pid, ref, req = lpvm.receive()
      if label == "stop" then return end
      local replied, a, b = lpvm.handle_call(f, function(e) return "handled: " .. tostring(e) end,
        req, pid, ref, st)
      if replied then
        st = a
        lpvm.send(parent, "replied", a, b)
      else
        lpvm.send(parent, "other", a)
        if a[1] and a[2] == "noreply" then lpvm.send_alias(pid, ref, "late " .. a[3]) end
        if not a[1] then lpvm.send_alias(pid, ref, a[2]) end
      end
    end
  end, me)
  local function recv3()
    local r = T.recv()
    return { r[1], r[2], r[3] }
  end
  T.eq(lpvm.call(srv, "l", 5), 5)
  T.eq(recv3(), { "replied", 1, "act" }, "the new state and the action")
  T.eq(lpvm.call(srv, "l", "noreply"), "late 2")
  T.eq(T.recv()[2], { n = 4, true, "noreply", 2, "act" })
  T.ok(tostring(lpvm.call(srv, "l", "boom")):find("handled: .*boom"), "the handler's value")
  local r = T.recv()
  T.eq(r[1], "other")
  T.eq(r[2].n, 2)
  T.eq(r[2][1], false)
  T.eq(lpvm.call(srv, "l", "fn")(), 42, "a reply holding a function travels")
  T.eq(T.recv()[1], "replied")
  local from = lpvm.call(srv, "l", "from")
  T.eq(from[1], me, "from = {pid, ref}")
  T.eq(T.recv()[1], "replied")
  lpvm.send(srv, "stop")
  T.no_msg(20)
end)

test("handle_call: a callback that waits (yields) and a reply that cannot travel", function()
  local me = lpvm.self()
  local srv = lpvm.spawn(function(parent)
    local function f(req, _, s)
      if req == "bad" then return "reply", io.stdout, s end
      lpvm.sleep(5)                       -- yields inside handle_call
      local _, v = lpvm.receive(100)      -- and receives
      return "reply", v, s
    end
    while true do
      local label, pid, ref, req = lpvm.receive(function(l) return l ~= "poke" end)
      if label == "stop" then return end
      local ok, err = pcall(lpvm.handle_call, f, debug.traceback, req, pid, ref, 0)
      if not ok then lpvm.send(parent, "raised", err) end
    end
  end, me)
  lpvm.send(srv, "poke", 42)
  T.eq(lpvm.call(srv, "l", "wait"), 42)
  T.eq(select(2, pcall(lpvm.call, srv, "l", "bad", 200)), "timeout")
  T.ok(T.recv()[2]:find("send_alias: cannot send"), "the encoding error raises, as send_alias's")
  lpvm.send(srv, "stop")
  T.no_msg(20)
end)

test("dispatcher: calls handled in C, the rest to the Lua functions given", function()
  local me = lpvm.self()
  local srv = lpvm.spawn(function(parent)
    local S = { state = 0, mod = {} }
    function S.mod.handle_call(req, from, s)
      if req == "noreply" then return "noreply", s end
      if req == "boom" then error("boom") end
      if req == "wait" then return "reply", select(2, lpvm.receive(function(t) return t == "poke" end)), s end
      return "reply", { req, from[1], s }, s + 1, s % 2 == 0 and "even" or nil
    end
    local function on_result(pid, ref, ok, ...)
      lpvm.send(parent, "result", ok, select("#", ...), ...)
      lpvm.send_alias(pid, ref, "from on_result")
      return "r", "s"
    end
    local function on_other(n, ...)
      lpvm.send(parent, "other", n, ...)
      return "o", n
    end
    local d = lpvm.dispatcher(S, function(e) return "H " .. tostring(e) end, on_result, on_other)
    while true do
      local r = table.pack(d(lpvm.receive(function(t) return t ~= "poke" end)))
      if r[1] == "o" and r[2] == 1 then return end
      lpvm.send(parent, "returned", S.state, table.unpack(r, 1, r.n))
    end
  end, me)
  T.eq(lpvm.call(srv, "$gen_call", "a"), { "a", me, 0 })
  T.eq(T.recv(), { n = 3, "returned", 1, "even" }, "state stored, the action returned")
  T.eq(lpvm.call(srv, "$gen_call", "b")[3], 1)
  T.eq(T.recv(), { n = 3, "returned", 2, nil }, "no action: nil")
  T.eq(lpvm.call(srv, "$gen_call", "noreply"), "from on_result")
  T.eq(T.recv(), { n = 5, "result", true, 2, "noreply", 2 })
  T.eq(T.recv(), { n = 4, "returned", 2, "r", "s" }, "on_result's values")
  T.eq(lpvm.call(srv, "$gen_call", "boom"), "from on_result")
  local r = T.recv()
  T.eq({ r[1], r[2], r[3] }, { "result", false, 1 })
  T.ok(r[4]:find("^H .*boom"), "the message handler's value")
  T.recv()
  lpvm.send(srv, "poke", 7)
  T.eq(lpvm.call(srv, "$gen_call", "wait"), 7, "the callback may wait")
  T.recv()
  lpvm.send(srv, "$gen_call", 1, 2)     -- not four values: on_other
  T.eq(T.recv(), { n = 5, "other", 3, "$gen_call", 1, 2 })
  T.eq(T.recv(), { n = 4, "returned", 2, "o", 3 })
  lpvm.send(srv, "$gen_call", 1, 2, 3, 4)
  T.eq(T.recv()[2], 5)
  T.recv()
  lpvm.send(srv, "bye")
  T.eq(T.recv(), { n = 3, "other", 1, "bye" })
  T.raises(function() lpvm.dispatcher(1) end, "bad argument #1")
  T.no_msg(20)
end)

test("dispatcher's serve(): d(receive()) in one call, the same answers", function()
  local me = lpvm.self()
  local srv = lpvm.spawn(function(parent)
    local S = { state = 0, mod = {} }
    local kept
    function S.mod.handle_call(req, from, s)
      if req == "keep" then kept = from; return "noreply", s end
      if req == "answer kept" then
        lpvm.send_alias(kept[1], kept[2], "late", rawequal(kept[2], from[2]))
        return "reply", kept[2] == from[2], s
      end
      if req == "boom" then error("boom") end
      return "reply", { req, from[1], s, type(from[2]) }, s + 1
    end
    local function on_result(pid, ref, ok, ...)
      lpvm.send(parent, "result", ok, lpvm.is_alive(pid), select("#", ...), ...)
      if not ok then lpvm.send_alias(pid, ref, "from on_result") end
      return "r"
    end
    local function on_other(n, ...)
      lpvm.send(parent, "other", n, ...)
      return "o", n
    end
    local _, serve = lpvm.dispatcher(S, function(e) return "H " .. tostring(e) end, on_result,
      on_other)
    while true do
      local r = table.pack(serve())
      if r[1] == "o" and r[2] == 1 then return end
      lpvm.send(parent, "returned", S.state, table.unpack(r, 1, r.n))
    end
  end, me)
  T.eq(lpvm.call(srv, "$gen_call", 5), { 5, me, 0, "userdata" }, "a scalar request")
  T.eq(T.recv(), { n = 3, "returned", 1, nil })
  local bin = lpvm.binary(string.rep("x", 100))
  local got = lpvm.call(srv, "$gen_call", { "get", bin, k = { 1.5, true } })
  T.eq({ got[1][1], tostring(got[1][2]), got[1].k[1], got[1].k[2] },
    { "get", string.rep("x", 100), 1.5, true }, "a table with a binary")
  T.recv()
  -- a call made by hand is the same bytes as lpvm.call's: served the same way
  local ref = lpvm.monitor(srv, "alias")
  lpvm.send(srv, "$gen_call", me, ref, "by hand")
  local _, v = lpvm.receive_ref(ref, WAIT)
  T.eq(v, { "by hand", me, 2, "userdata" })
  lpvm.demonitor(ref, "flush")
  T.recv()
  -- the reference in `from` is the interned one: kept, compared, answered later
  local kref = lpvm.monitor(srv, "alias")
  lpvm.send(srv, "$gen_call", me, kref, "keep")
  T.eq(T.recv(), { n = 6, "result", true, true, 2, "noreply", 3 })
  T.recv()
  lpvm.send(srv, "$gen_call", me, kref, "answer kept")
  local a = table.pack(lpvm.receive_ref(kref, WAIT))
  local b = table.pack(lpvm.receive_ref(kref, WAIT))
  lpvm.demonitor(kref, "flush")
  T.eq({ a[2], a[3], b[2] }, { "late", true, true }, "the same userdata in both calls")
  T.recv()
  T.eq(lpvm.call(srv, "$gen_call", "boom"), "from on_result", "an error to on_result")
  local r = T.recv()
  T.eq({ r[1], r[2] }, { "result", false })
  T.ok(r[5]:find("^H .*boom"))
  T.recv()
  -- not a call of this shape: the values as receive gives them, to dispatch
  lpvm.send(srv, "$gen_call", me, "not a ref", 1)
  T.eq(T.recv(), { n = 7, "result", true, true, 3, "reply", { 1, me, 3, "string" }, 4 },
    "a string where the reference goes: on_result")
  T.recv()
  lpvm.send(srv, "$gen_call", 1, 2)
  T.eq(T.recv(), { n = 5, "other", 3, "$gen_call", 1, 2 })
  T.recv()
  lpvm.send(srv, "bye")
  T.eq(T.recv(), { n = 3, "other", 1, "bye" })
  T.no_msg(20)
end)

test("stress: callers on every worker, one server, replies never cross", function()
  local srv = server(function(from, ref, req) lpvm.send_alias(from, ref, req) end)
  local n, k = T.scaled(20, 4), T.scaled(500, 50)
  local me = lpvm.self()
  for c = 1, n do
    lpvm.spawn(function()
      for i = 1, k do
        local v = lpvm.call(srv, "l", { c, i }, WAIT)
        if v[1] ~= c or v[2] ~= i then lpvm.send(me, "crossed", c, i) return end
      end
      lpvm.send(me, "done", c)
    end)
  end
  for _ = 1, n do T.eq(T.recv()[1], "done", "no reply crossed") end
  lpvm.send(srv, "stop")
end)

T.run()
