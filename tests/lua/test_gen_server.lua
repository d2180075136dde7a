-- test_gen_server.lua -- gen_server: start, call, cast, replies, stop, timeouts,
-- hibernate, continue, exit semantics. Callbacks in otp_kv.lua.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local gs = require "gen_server"

local function start(args, opts)
  args = args or {}
  args.parent = args.parent or lpvm.self()
  return gs.start("otp_kv", args, opts)
end

local function stopped(pid)   -- wait until pid has ended; its reason
  local ref = lpvm.monitor(pid)
  local _, reason = T.down(ref)
  return reason
end

test("start, call and cast; a registered name works like the pid", function()
  local pid = assert(start({}, { name = "gs_kv" }))
  T.eq(lpvm.whereis("gs_kv"), pid)
  T.eq(gs.call("gs_kv", { "put", "a", 1 }), true)
  T.eq(gs.call(pid, { "get", "a" }), 1)
  T.eq(gs.cast("gs_kv", { "put", "b", { x = 2 } }), true)
  T.eq(gs.call(pid, { "get", "b" }), { x = 2 })
  T.eq(gs.stop("gs_kv"), true)
  T.eq(T.recv()[2], "normal", "terminate ran with the stop reason")
  T.eq(lpvm.whereis("gs_kv"), nil)
end)

test("start_link links; start does not", function()
  local a = assert(gs.start_link("otp_kv", {}))
  local b = assert(gs.start("otp_kv", {}))
  local linked = {}
  lpvm.trap_exit(true)
  lpvm.exit(a, "kill"); lpvm.exit(b, "kill")
  local r = T.recv_match(function(tag) return tag == "EXIT" end)
  T.ok(r[2] == a and r[3] == "killed", T.show(r))
  T.no_msg(50)
  T.ok(not linked[1])
end)

test("call: noproc for an unknown name or a dead pid, at once", function()
  T.eq(select(2, pcall(gs.call, "gs_nobody", 1)), "noproc")
  local pid = assert(start())
  gs.stop(pid)
  T.flush()
  T.eq(select(2, pcall(gs.call, pid, { "get", 1 }, math.huge)), "noproc", "at once: no timeout")
  T.eq(gs.cast("gs_nobody", 1), true, "a cast never fails")
end)

test("call: timeout raises 'timeout' and the late reply never lands", function()
  local pid = assert(start())
  local t0 = lpvm.now()
  local ok, err = pcall(gs.call, pid, { "slow", 200 }, 30)
  T.eq(ok, false)
  T.eq(err, "timeout")
  T.ok(lpvm.now() - t0 >= 29, "waited its 30 ms")
  T.eq(gs.call(pid, { "get", "x" }), nil, "the slow call has been answered by now")
  T.no_msg(20)
  T.eq(lpvm.info().message_queue_len, 0, "not even counted in the mailbox")
  T.eq(gs.call(pid, { "put", 1, 1 }), true, "the server goes on")
  gs.stop(pid)
  T.flush()
end)

test("call: a server killed mid-call raises its exit reason at once", function()
  local pid = assert(start())
  lpvm.spawn(function(p) lpvm.sleep(30); lpvm.exit(p, "kill") end, pid)
  local ok, err = pcall(gs.call, pid, { "slow", 600000 }, math.huge)
  T.eq(ok, false)
  T.eq(err, "killed", "raised at once: the call had no timeout, the server sleeps 10 min")
  T.no_msg(20)
end)

test("call: a reply ends gen_server.call's monitor on both sides, never one made by hand", function()
  -- gen_server.call's message lets the server drop its half of the caller's monitor as
  -- it replies (no DEMONITOR follows, vm/lmod_call.c); a call made by hand does not
  local pid = assert(start())
  local me = lpvm.self()
  local m = lpvm.monitor(pid, "alias")
  lpvm.send(pid, "$gen_call", me, m, { "put", "k", 1 })
  T.eq(select(2, lpvm.receive_ref(m, T.WAIT)), true, "a call by hand is answered")
  for i = 1, 50 do T.eq(gs.call(pid, { "put", i, i }), true) end
  T.eq(gs.call(pid, { "get", "k" }), 1)
  lpvm.exit(pid, "kill")
  local r = table.pack(lpvm.receive_ref(m, T.WAIT))
  T.eq({ r[1], r[5] }, { "DOWN", "killed" }, "the monitor made by hand still sees the end")
  T.no_msg(30)   -- the calls' monitors ended with their replies: no DOWN for them
  local ok, err = pcall(gs.call, pid, { "get", "k" })
  T.eq({ ok, err }, { false, "noproc" }, "a new call monitors afresh")
end)

test("call: a crash in handle_call reaches the caller; terminate sees it", function()
  local pid = assert(start())
  local ok, err = pcall(gs.call, pid, { "crash" })
  T.eq(ok, false)
  T.ok(T.mentions(err, "handle_call crashed"), T.show(err))
  T.ok(T.mentions(err, "stack traceback"), "with the traceback")
  local r = T.recv()
  T.eq(r[1], "terminated")
  T.ok(T.mentions(r[2], "handle_call crashed"))
  T.eq(lpvm.is_alive(pid) and stopped(pid) or "ended", "ended")
end)

test("call: a server on a private thread", function()
  local pid = assert(start({}, { thread = true }))
  T.eq(lpvm.info(pid).mode, "thread")
  for i = 1, 100 do T.eq(gs.call(pid, { "put", i, i * 2 }), true) end
  T.eq(gs.call(pid, { "get", 50 }), 100)
  gs.stop(pid)
  T.flush()
end)

test("call: calling oneself raises calling_self", function()
  local pid = assert(start())
  local ok, err = pcall(gs.call, pid, { "call_self" })
  T.eq(ok, false)
  T.ok(T.mentions(err, "calling_self"), T.show(err))
  T.flush()
end)

test("call: bad arguments name themselves", function()
  T.raises(function() gs.call(42, 1) end, "bad argument #1 to 'gen_server.call'", "pid or name")
  T.raises(function() gs.call("x", 1, -5) end, "bad argument #3 to 'gen_server.call'")
  T.raises(function() gs.start(42) end, "bad argument #1 to 'gen_server.start'")
  T.raises(function() gs.start("otp_kv", {}, { nme = "x" }) end, "unknown option 'nme'")
  local co = coroutine.create(print)
  T.raises(function() gs.start({ init = function() return "ok", co end }) end, "gen_server.start",
    "the callback table is no module", "put it in a module file", "upvalue 'co'")
  T.raises(function() gs.start("otp_kv", { io.stdout }) end, "gen_server.start", "cannot send a userdata")
end)

test("stop and sys on oneself raise calling_self, as OTP's (no wait for the timeout)", function()
  local sys = require "sys"
  local me = lpvm.self()
  lpvm.register("gs_me", me)
  for _, f in ipairs({
    function() return gs.stop(me, "normal", math.huge) end,
    function() return gs.stop("gs_me") end,
    function() return require("gen_statem").stop(me) end,
    function() return sys.get_state(me, math.huge) end,
    function() return sys.suspend("gs_me", math.huge) end,
    function() return sys.resume(me) end,
    function() return sys.change_code(me, "otp_kv", 1, nil, math.huge) end,
  }) do
    local ok, err = pcall(f)
    T.eq(ok, false)
    T.eq(err, "calling_self")
  end
  lpvm.unregister("gs_me")
  T.no_msg(0)
end)

test("cast, abcast, multi_call, sys and a table without init: bad arguments name themselves",
  function()
  local sys = require "sys"
  T.raises(function() gs.cast(42, "x") end, "bad argument #1 to 'gen_server.cast'")
  T.raises(function() require("gen_statem").cast(true, "x") end,
    "bad argument #1 to 'gen_statem.cast'")
  T.eq(gs.cast("gs_nobody", "x"), true, "a cast to a name nobody has is dropped, as OTP's")
  T.raises(function() gs.abcast(nil, "x") end, "bad argument #1 to 'gen_server.abcast'",
    "list of names")
  T.raises(function() gs.multi_call("mc_1", "x") end,
    "bad argument #1 to 'gen_server.multi_call'")
  T.raises(function() gs.multi_call({ "a", 7 }, "x") end, "gen_server.multi_call",
    "index 2")
  T.raises(function() gs.multi_call({ "a" }, "x", -1) end,
    "bad argument #3 to 'gen_server.multi_call'")
  T.raises(function() sys.get_state(true) end, "bad argument #1 to 'sys.get_state'")
  T.raises(function() sys.suspend({}) end, "bad argument #1 to 'sys.suspend'")
  local pid, why = gs.start({ handle_call = function() end })
  T.eq(pid, nil)
  T.ok(T.mentions(why, "no function 'init'"), T.show(why))
end)

test("a callback table that is no module travels, functions and all (docs/code.md)", function()
  local step = 10
  local pid = gs.start({
    init = function(n) return "ok", n end,
    handle_call = function(_, _, n) return "reply", n + step, n + step end,
  }, 5)
  T.eq(gs.call(pid, "bump"), 15)
  T.eq(gs.call(pid, "bump"), 25)
  gs.stop(pid)
end)

test("a server loads only the serving half: gen_client comes with the first client call", function()
  local pid = gs.start({
    init = function() return "ok", 0 end,
    handle_call = function(req, _, s)
      if req == "loaded" then return "reply", package.loaded.gen_client ~= nil, s end
      if req == "rare" then return "reply", package.loaded.gen_sys ~= nil, s end
      if req == "loop" then return "reply", package.loaded.gen_server_loop ~= nil, s end
      -- a call from inside a server: the client half loads then, and works
      local other = require("gen_server").start({
        init = function() return "ok", 1 end,
        handle_call = function(_, _, n) return "reply", n + 1, n end,
      })
      local r = require("gen_server").call(other, "x")
      require("gen_server").stop(other)
      return "reply", r, s
    end,
  })
  T.eq(gs.call(pid, "loaded"), false, "a served process never needed it")
  T.eq(gs.call(pid, "rare"), false, "nor the system messages' half (gen_sys)")
  T.eq(gs.call(pid, "loop"), false, "nor, answering with reply, gen_server_loop")
  T.eq(require("sys").get_state(pid), 0)
  T.eq(gs.call(pid, "rare"), true, "a system message loads it")
  T.eq(gs.call(pid, "start another"), 2)
  T.eq(gs.call(pid, "loaded"), true)
  T.eq(type(require("gen").start), "function", "gen's client functions appear on use")
  T.eq(require("gen").no_such_function, nil)
  gs.stop(pid)
end)

test("casts and infos need no more; the first other result or action loads the rest of the loop", function()
  local me = lpvm.self()
  local function server(init_action)
    return assert(gs.start({
      init = function() return "ok", 0, init_action end,
      handle_call = function(req, from, s)
        if req == "loaded" then return "reply", package.loaded.gen_server_loop ~= nil, s end
        if req == "later" then
          lpvm.send(lpvm.self(), "answer", from)
          return "noreply", s
        end
        return "reply", s, s
      end,
      handle_cast = function(n, s)
        if n == "wait" then return "noreply", s, 20 end   -- a timeout action
        return "noreply", s + n
      end,
      handle_info = function(m, s)
        if type(m) == "table" and m[1] == "answer" then gs.reply(m[2], "late " .. s) end
        if m == "ping" then lpvm.send(me, "pong", s) end
        if m == "timeout" then lpvm.send(me, "timed out", s) end
        return "noreply", s
      end,
    }))
  end
  local a = server()
  T.eq(gs.call(a, "loaded"), false)
  gs.cast(a, 5)
  T.eq(gs.call(a, "state"), 5, "the cast was handled")
  lpvm.send(a, "ping")
  T.eqv(T.recv(), table.pack("pong", 5), "and the info")
  T.eq(gs.call(a, "loaded"), false, "without gen_server_loop")
  gs.cast(a, "wait")
  T.eqv(T.recv(), table.pack("timed out", 5), "a timeout action loads it")
  T.eq(gs.call(a, "loaded"), true)
  gs.cast(a, 1)
  T.eq(gs.call(a, "state"), 6, "and the loop goes on")
  local c = server()
  T.eq(gs.call(c, "later"), "late 0", "noreply, then a deferred reply")
  T.eq(gs.call(c, "loaded"), true)
  T.eq(gs.call(c, "later"), "late 0")
  local e = server(20)
  T.eqv(T.recv(), table.pack("timed out", 0), "init's action")
  T.eq(gs.call(e, "loaded"), true)
  local d = server()
  local ref = lpvm.monitor(d)
  T.eq(gs.stop(d, "normal"), true)
  T.eq(select(2, T.down(ref)), "normal")
  gs.stop(a); gs.stop(c); gs.stop(e)
end)

test("abcast and multi_call reach every registered name", function()
  local me = lpvm.self()
  local function named(n)
    return assert(gs.start({
      init = function() return "ok", n end,
      handle_call = function(req, _, s) return "reply", req .. s, s end,
      handle_cast = function(req, s) lpvm.send(me, "cast", req, s) return "noreply", s end,
    }, nil, { name = "mc_" .. n }))
  end
  local a, b = named(1), named(2)
  T.eq(gs.abcast({ "mc_1", "mc_2", "mc_none" }, "hi"), true)
  local got = { T.recv(), T.recv() }
  table.sort(got, function(x, y) return x[3] < y[3] end)
  T.eq(got, { table.pack("cast", "hi", 1), table.pack("cast", "hi", 2) })
  local replies, bad = gs.multi_call({ "mc_1", "mc_2", "mc_none" }, "q", 1000)
  T.eq(replies, { mc_1 = "q1", mc_2 = "q2" })
  T.eq(bad, { "mc_none" })
  gs.stop(a)
  gs.stop(b)
end)

test("deferred replies: noreply now, gen_server.reply later", function()
  local pid = assert(start())
  local me = lpvm.self()
  for i = 1, 3 do
    lpvm.spawn(function(p, parent, k)
      local g = require "gen_server"
      lpvm.send(parent, "got", k, g.call(p, { "defer" }))
    end, pid, me, i)
  end
  -- the release must come after the three defers: wait until the server holds them
  -- (a sleep of 50 ms let a loaded machine release first and leave a caller waiting)
  local sys = require "sys"
  T.ok(T.wait_until(function() return #sys.get_state(pid).pending == 3 end, T.WAIT * 2),
       "three deferred callers")
  T.eq(gs.call(pid, { "release", "now" }), "released")
  local seen = {}
  for _ = 1, 3 do
    local r = T.recv()
    T.eq(r[1], "got"); T.eq(r[3], "now")
    seen[r[2]] = true
  end
  T.ok(seen[1] and seen[2] and seen[3])
  gs.stop(pid)
  T.flush()
end)

test("handle_call stop: with a reply, then terminate; without one the caller sees the reason", function()
  local pid = assert(start({ slow_terminate = 20 }))
  local ref = lpvm.monitor(pid)
  T.eq(gs.call(pid, { "stop", "shutdown" }), "stopping")
  -- the reply comes after terminate has run, as OTP's (found by otpsem's probe against
  -- OTP 25: it came before, so terminate's effects were not yet there for the caller)
  local t = table.pack(lpvm.receive(function(tag) return tag == "terminated" end, 0))
  T.eq({ t[1], t[2] }, { "terminated", "shutdown" }, "terminate ran before the reply")
  T.eq(select(2, T.down(ref)), "shutdown")
  pid = assert(start())
  local ok, err = pcall(gs.call, pid, { "stop_noreply", "done" })
  T.eq(ok, false); T.eq(err, "done")
  T.flush()
end)

test("stop: reason, noproc, and a server that ends otherwise", function()
  local pid = assert(start())
  T.eq(gs.stop(pid, "shutdown", 1000), true)
  T.eq(T.recv()[2], "shutdown")
  T.eq(select(2, pcall(gs.stop, pid)), "noproc")
  T.eq(select(2, pcall(gs.stop, "gs_nobody")), "noproc")
  pid = assert(start())
  T.eq(gs.stop(pid, { "shutdown", { why = "table reason" } }), true)
  T.eq(T.recv()[2], { "shutdown", { why = "table reason" } })
end)

test("cast stop and handle_info: several values arrive as a table", function()
  local pid = assert(start())
  lpvm.send(pid, "hello", 1, { 2 })
  local r = T.recv()
  T.eq(r[1], "info")
  T.eq(r[2], { "hello", 1, { 2 } })
  lpvm.send(pid, "single")
  T.eq(T.recv()[2], "single")
  gs.cast(pid, { "stop", "normal" })
  T.eq(T.recv()[2], "normal")
end)

test("timeouts: init's and a callback's action bring handle_info('timeout')", function()
  local pid = assert(start({ timeout = 20 }))
  local r = T.recv()
  T.eq(r[1], "info"); T.eq(r[2], "timeout")
  T.eq(gs.call(pid, { "timeout", 10 }), true)
  r = T.recv()
  T.eq(r[2], "timeout")
  T.eq(gs.call(pid, { "timeout", 200 }), true)
  lpvm.send(pid, "first")                 -- a message before the timeout cancels it
  T.eq(T.recv()[2], "first")
  T.no_msg(300)
  gs.stop(pid)
  T.flush()
end)

test("hibernate collects garbage and the server goes on; continue runs next", function()
  local pid = assert(start())
  T.ok(type(gs.call(pid, { "hibernate" })) == "number")
  T.eq(gs.call(pid, { "put", "k", "v" }), true)
  T.eq(gs.call(pid, { "continue", "step" }), true)
  local r = T.recv()
  T.eq(r[1], "continued"); T.eq(r[2], "step")
  gs.stop(pid)
  T.flush()
end)

test("a bad callback return stops the server with bad_return_value", function()
  local pid = assert(start())
  local ok, err = pcall(gs.call, pid, { "bad" })
  T.eq(ok, false)
  T.ok(T.mentions(err, "bad_return_value"), T.show(err))
  T.flush()
  -- a timeout action below 0 or NaN too, through terminate (it ended the server with
  -- receive's argument error, terminate never called: found by probing actions)
  for _, t in ipairs({ -5, 0 / 0 }) do
    pid = assert(start())
    local ref = lpvm.monitor(pid)
    T.eq(gs.call(pid, { "timeout", t }), true)
    local r = T.recv_match(function(tag) return tag == "terminated" end)
    T.eq(r[2][1], "bad_return_value", T.show(r[2]))
    local _, why = T.down(ref)
    T.eq(why[1], "bad_return_value")
  end
  T.flush()
end)

test("a wrong return shows its values: a tuple-like table by its contents, none by '(no values)'", function()
  -- an Erlang user returns {reply, R, S} as a table: the reason showed `table: 0x...`
  local M = {
    init = function(a) if a == "tuple" then return { "ok", 0 } end return "ok", 0 end,
    handle_call = function(req, _, s)
      if req == "tuple" then return { "reply", 1, s } end
      if req == "none" then return end
      return "replay", 1, s
    end,
  }
  local cases = { tuple = '{"reply", 1, 0}', none = "(no values)", typo = '"replay", 1, 0' }
  for req, shown in pairs(cases) do
    local pid = assert(gs.start(M, 0))
    local ref = lpvm.monitor(pid)
    local ok, err = pcall(gs.call, pid, req, 60000)
    T.eq(ok, false)
    T.eq(err, { "bad_return_value", "handle_call", shown }, req)
    local _, why = T.down(ref)
    T.eq(why, { "bad_return_value", "handle_call", shown }, req)
  end
  local pid, why = gs.start(M, "tuple")
  T.eq(pid, nil)
  T.eq(why, { "bad_return_value", "init", '{"ok", 0}' })
  T.flush()
end)

test("a callback module without handle_call / handle_cast: the reason names it", function()
  -- a call or cast to such a server ended it with "attempt to call a nil value"
  local M = { init = function() return "ok", 0 end }
  local pid = assert(gs.start(M))
  local ref = lpvm.monitor(pid)
  local ok, err = pcall(gs.call, pid, "x", 60000)
  T.eq(ok, false)
  T.eq(err, "the callback table has no function 'handle_call' (undef)")
  local _, why = T.down(ref)
  T.eq(why, err)
  pid = assert(gs.start(M))
  ref = lpvm.monitor(pid)
  gs.cast(pid, "x")
  _, why = T.down(ref)
  T.eq(why, "the callback table has no function 'handle_cast' (undef)")
  T.flush()
end)

test("init: error, stop, ignore, already_started, start timeout", function()
  local pid, why = gs.start("otp_kv", { fail = true })
  T.eq(pid, nil)
  T.ok(T.mentions(why, "init failed on purpose"), T.show(why))
  pid, why = gs.start("otp_kv", { stop = "no_config" })
  T.eq(pid, nil); T.eq(why, "no_config")
  pid, why = gs.start("otp_kv", { ignore = true })
  T.eq(pid, nil); T.eq(why, "ignore")
  local first = assert(gs.start("otp_kv", {}, { name = "gs_once" }))
  local p2, why2, other = gs.start("otp_kv", {}, { name = "gs_once" })
  T.eq(p2, nil); T.eq(why2, "already_started"); T.eq(other, first)
  gs.stop(first)
  pid, why = gs.start("otp_kv", { sleep = 500 }, { timeout = 30 })
  T.eq(pid, nil); T.eq(why, "timeout")
  pid, why = gs.start("no_such_module_xyz", {})
  T.eq(pid, nil)
  T.ok(T.mentions(why, "no_such_module_xyz"), T.show(why))
  T.no_msg(20)
end)

test("start_link with trap_exit: a failed init leaves no EXIT behind", function()
  lpvm.trap_exit(true)
  local pid, why = gs.start_link("otp_kv", { stop = "nope" })
  T.eq(pid, nil); T.eq(why, "nope")
  pid, why = gs.start_link("otp_kv", { fail = true })
  T.eq(pid, nil)
  T.no_msg(50)
end)

test("a gen_server trapping exits terminates when its parent exits", function()
  local me = lpvm.self()
  local parent = lpvm.spawn(function(m)
    local g = require "gen_server"
    local pid = g.start_link("otp_kv", { trap = true, parent = m })
    lpvm.send(m, "server", pid)
    lpvm.receive()
    lpvm.exit("shutdown")
  end, me)
  local r = T.recv()
  local pid = r[2]
  local ref = lpvm.monitor(pid)
  lpvm.send(parent, "go")
  T.eq(T.recv_match(function(t) return t == "terminated" end)[2], "shutdown")
  local _, reason = T.down(ref)
  T.eq(reason, "shutdown")
end)

test("a late reply from a crash-free but slow server under load: 200 timed-out calls", function()
  local pid = assert(start())
  for _ = 1, 200 do pcall(gs.call, pid, { "slow", 1 }, 0) end
  T.eq(gs.call(pid, { "get", "nothing" }), nil)
  lpvm.sleep(50)
  T.no_msg(20)
  gs.stop(pid)
  T.flush()
end)

test("stress: many callers, one server", function()
  local pid = assert(start())
  local me = lpvm.self()
  local callers, calls = T.scaled(20, 4), T.scaled(200, 20)
  for c = 1, callers do
    lpvm.spawn(function(p, parent, id, n)
      local g = require "gen_server"
      for i = 1, n do g.call(p, { "put", id * 100000 + i, i }) end
      lpvm.send(parent, "done", id)
    end, pid, me, c, calls)
  end
  for _ = 1, callers do T.eq(T.recv(60000)[1], "done") end
  T.eq(gs.call(pid, { "get", 100000 + calls }), calls)
  gs.stop(pid)
  T.flush()
end)

test("sys: replace_state and get_status, running and suspended (calls wait until resume)", function()
  -- found by otpsem's probe against OTP 25: sys had no replace_state nor get_status
  local sys = require "sys"
  local pid = assert(start({}, { name = "sys_kv" }))
  gs.call(pid, { "put", "a", 1 })
  local new = sys.replace_state(pid, function(st) st.data.a = st.data.a + 41; return st end)
  T.eq(new.data.a, 42)
  T.eq(gs.call(pid, { "get", "a" }), 42)
  -- a raising fn leaves the state as it was; the caller raises callback_failed
  local ok, why = pcall(sys.replace_state, pid, function() error("no") end)
  T.eq(ok, false); T.eq(why[1], "callback_failed"); T.ok(T.mentions(why[2], "no"))
  T.eq(gs.call(pid, { "get", "a" }), 42)
  local st = sys.get_status(pid)
  T.eq({ st.pid, st.name, st.module, st.behaviour, st.status, st.parent },
       { pid, "sys_kv", "otp_kv", "gen_server", "running", lpvm.self() })
  T.eq(st.state, { size = 0 }, "the state as format_status shows it")
  -- suspended: system requests are answered, a call waits until resume
  T.eq(sys.suspend(pid), true)
  T.eq(sys.get_status(pid).status, "suspended")
  sys.replace_state(pid, function(s) s.data.a = 7; return s end)
  local me = lpvm.self()
  lpvm.spawn(function() lpvm.send(me, "answer", require("gen_server").call(pid, { "get", "a" })) end)
  T.ok(T.wait_until(function() return lpvm.info(pid).message_queue_len >= 1 end), "the call is queued")
  T.eq(sys.get_state(pid).data.a, 7, "still suspended, the call not taken")
  T.eq(sys.resume(pid), true)
  T.eq(T.recv_match(function(t) return t == "answer" end)[2], 7)
  T.eq(sys.get_status(pid).status, "running")
  T.raises(function() sys.replace_state(pid, 5) end, "sys.replace_state", "function expected")
  gs.stop(pid)
  T.flush()
end)

test("a timeout action survives system messages: sys requests restart it, as OTP's", function()
  -- found by otpsem's probe against OTP 25: a sys.get_state while a server waited with
  -- a timeout lost the timeout, so the server waited for ever (OTP restarts it)
  local sys = require "sys"
  local pid = assert(start())
  T.eq(gs.call(pid, { "timeout", 300 }), true)
  for _ = 1, 3 do sys.get_state(pid) end
  T.eq(sys.suspend(pid), true)
  T.eq(sys.resume(pid), true)
  local r = T.recv_match(function(t, m) return t == "info" and m == "timeout" end)
  T.eq(r[2], "timeout")
  gs.stop(pid)
  T.flush()
end)

T.run()
