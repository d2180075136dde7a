-- test_gen_statem.lua -- gen_statem: both callback modes, state enter calls, state and
-- event timeouts, postponing, inserted events, replies, stop, errors.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local sm = require "gen_statem"
local door = require "otp_door"
lpvm.log_level("critical")

test("state functions with enter calls: the code lock", function()
  local me = lpvm.self()
  local lock = assert(door.start_link({ code = "123", open_ms = 1000, log = me }))
  T.eq(T.recv()[1], "locked", "the initial state's enter call")
  T.eq(door.status(lock), "locked")
  door.button(lock, "9"); door.button(lock, "1"); door.button(lock, "2")   -- wrong
  T.eq(door.status(lock), "locked")
  door.button(lock, "1"); door.button(lock, "2"); door.button(lock, "3")
  T.eq(T.recv()[1], "open")
  T.eq(door.status(lock), "open")
  local t0 = lpvm.now()
  T.eq(T.recv()[1], "locked", "the state timeout locked it again")
  T.ok(lpvm.now() - t0 >= 500)
  T.eq(door.status(lock), "locked")
  sm.stop(lock)
  T.eq(T.recv()[1], "terminate locked")
end)

test("postponed events are retried after the state changes, in order", function()
  local me = lpvm.self()
  local lock = assert(door.start_link({ code = "12", open_ms = 60, log = me }))
  T.recv()
  door.button(lock, "1"); door.button(lock, "2")
  T.eq(T.recv()[1], "open")
  -- pressed while open: postponed, replayed once locked: they open it again
  door.button(lock, "1"); door.button(lock, "2")
  T.eq(T.recv()[1], "locked")
  T.eq(T.recv()[1], "open", "the postponed buttons were replayed")
  T.eq(T.recv()[1], "locked")
  sm.stop(lock)
  T.flush()
end)

test("a state timeout is cancelled by a state change", function()
  local me = lpvm.self()
  local lock = assert(door.start_link({ code = "1", open_ms = 500, log = me }))
  T.recv()
  door.button(lock, "1")
  T.eq(T.recv()[1], "open")
  sm.cast(lock, { "lock" })              -- leaves "open" before its timeout
  T.eq(T.recv()[1], "locked")
  T.no_msg(700)                          -- the open state's timeout never fires
  T.eq(door.status(lock), "locked")
  sm.stop(lock)
  T.eq(T.recv()[1], "terminate locked")
end)

test("a state timeout given with a state change is the new state's (it fires); {} actions", function()
  -- found by probing gen_statem timers: the state change after the actions cancelled it
  local me = lpvm.self()
  local m = assert(sm.start_link("otp_machine", { log = me }))
  sm.cast(m, "timed")
  T.eq(T.recv()[2], "timed")
  local r = T.recv()
  T.eq({ r[1], r[2], r[3] }, { "state_timeout", "st_fired", 1 })
  T.eq(sm.call(m, "get"), 101)
  T.recv()
  sm.cast(m, { "bad_action", {} })   -- an empty list of actions is no action (it ended it)
  T.recv()
  T.eq(sm.call(m, "get"), 101)
  T.recv()
  T.eq(sm.call(m, "quit"), "bye")
  T.flush()
end)

test("a bad time or reply target in an action ends the machine through terminate", function()
  local me = lpvm.self()
  for _, bad in ipairs({ { "state_timeout", -5, "x" }, { "timeout", "soon", "x" },
                         { "state_timeout", 0 / 0, "x" }, { "reply", 42, "x" } }) do
    local m = assert(sm.start("otp_machine", { log = me }))
    local ref = lpvm.monitor(m)
    sm.cast(m, { "bad_action", bad })
    T.recv()                                           -- the cast, logged
    local t = T.recv_match(function(tag) return tag == "terminate" end)
    T.eq(t[2][1], "bad_action_from_state_function", T.show(t[2]))
    T.eq(t[2][2], bad[1])
    local _, why = T.down(ref)
    T.eq(why[1], "bad_action_from_state_function")
  end
  T.flush()
end)

test("sys on a gen_statem: get_state is {state, data}, suspend/resume, change_code", function()
  -- found by probing sys: a gen_statem took sys's requests for info events, so every
  -- sys call on one timed out
  local sys = require "sys"
  local m = assert(sm.start_link("otp_machine", {}))
  local st = sys.get_state(m)
  T.eq(st[1], 0); T.eq(st[2].enters, 0)
  T.eq(sys.suspend(m), true)
  sm.cast(m, "chain")
  T.eq(sys.get_state(m)[1], 0, "suspended: the cast waits in the mailbox")
  T.eq(sys.resume(m), true)
  T.eq(sm.call(m, "get"), 11)
  T.eq(select(2, sys.change_code(m, "other_module", "1")), "not the server's module")
  T.eq(sys.change_code(m, "otp_machine", "1", 5), true)
  T.eq(sm.call(m, "get"), 16, "code_change(old_vsn, state, data, extra) gave the new state")
  T.eq(sm.call(m, "quit"), "bye")
  T.flush()
end)

test("handle_event_function: calls, casts, infos, next_event, event timeout", function()
  local me = lpvm.self()
  local m = assert(sm.start_link("otp_machine", { log = me }))
  T.eq(sm.call(m, "get"), 0)
  T.recv()
  sm.cast(m, "chain")
  local r1, r2 = T.recv(), T.recv()
  T.eq({ r1[1], r1[2] }, { "cast", "chain" })
  T.eq({ r2[1], r2[2], r2[3] }, { "internal", "step2", 1 }, "the inserted event ran first, in the new state")
  T.eq(sm.call(m, "get"), 11)
  T.recv()
  lpvm.send(m, "hello", 5)
  local r = T.recv()
  T.eq(r[1], "info"); T.eq(r[2], { "hello", 5 })
  sm.cast(m, "idle")
  T.recv()
  r = T.recv()
  T.eq({ r[1], r[2] }, { "timeout", "idle_fired" })
  sm.cast(m, "idle_long")
  sm.cast(m, "other")                    -- an event before the timeout cancels it
  T.recv()
  T.eq(T.recv()[2], "other")
  T.no_msg(400)
  T.eq(sm.call(m, "quit"), "bye")
  T.recv()
  r = T.recv()
  T.eq({ r[1], r[2], r[3] }, { "terminate", "normal", 11 })
end)

test("errors: a crash in a state function, a bad return, init stop", function()
  local me = lpvm.self()
  local m = assert(sm.start("otp_machine", { log = me }))
  local ref = lpvm.monitor(m)
  sm.cast(m, "crash")
  local _, why = T.down(ref)
  T.ok(T.mentions(why, "machine crashed"), T.show(why))
  T.flush()
  m = assert(sm.start("otp_machine", { log = me }))
  ref = lpvm.monitor(m)
  sm.cast(m, "bad")
  _, why = T.down(ref)
  T.ok(T.mentions(why, "bad_return_from_state_function"), T.show(why))
  T.flush()
  local p, w = sm.start_link("otp_machine", { stop = "no" })
  T.eq(p, nil); T.eq(w, "no")
  T.eq(select(2, pcall(sm.call, m, "get")), "noproc")
end)

test("a gen_statem under a supervisor", function()
  local sup = require "supervisor"
  local s = assert(sup.start_link({ children = {
    { id = "lock", start = { "otp_door", "start_link", { code = "1" }, { name = "sup_lock" } } } } }))
  T.eq(door.status("sup_lock"), "locked")
  local old = lpvm.whereis("sup_lock")
  lpvm.exit(old, "kill")
  T.wait_until(function() local p = lpvm.whereis("sup_lock"); return p and p ~= old end)
  T.eq(door.status("sup_lock"), "locked", "restarted")
  lpvm.unlink(s)
  local ref = lpvm.monitor(s)
  lpvm.exit(s, "shutdown")
  T.down(ref)
end)

test("generic timeouts {\"timeout\", name}: survive state changes and events; cancel, update", function()
  -- found by otpsem's probe against OTP 25: no generic timeouts, no cancel or update
  local me = lpvm.self()
  local m = assert(sm.start_link("otp_machine", { log = me }))
  local function acts(a, new_state) sm.cast(m, { "acts", a, new_state }); T.recv() end
  local function fired()   -- the next timeout event: {type, content, state}
    return T.recv_match(function(t) return t ~= "cast" end)
  end
  -- one generic timeout given alone (one action, not a list), then a state change and
  -- an event before it fires: it still fires, in the new state
  acts({ { "timeout", "g" }, 100, "gc" }, 1)
  sm.cast(m, "other"); T.recv()
  local r = fired()
  T.eq({ r[1], r[2], r[3] }, { { "timeout", "g" }, "gc", 1 })
  -- cancel; two names; restart replaces; update changes the content of a running one
  acts({ { { "timeout", "g" }, 60, "x" }, { { "timeout", "g" }, "cancel" },
         { { "timeout", "h" }, 20, "h1" }, { { "timeout", "k" }, 30, "k1" },
         { { "timeout", "k" }, 40, "k2" }, { { "timeout", "k" }, "update", "k3" } })
  r = fired(); T.eq({ r[1], r[2] }, { { "timeout", "h" }, "h1" })
  r = fired(); T.eq({ r[1], r[2] }, { { "timeout", "k" }, "k3" })
  T.no_msg(200)
  -- the state timeout: cancel, update; an update of a timer not running fires at once
  acts({ { "state_timeout", 50, "s" }, { "state_timeout", "cancel" } })
  acts({ { "state_timeout", 50, "s" }, { "state_timeout", "update", "s2" } })
  r = fired(); T.eq({ r[1], r[2] }, { "state_timeout", "s2" })
  acts({ { "state_timeout", "update", "now" } })
  r = fired(); T.eq({ r[1], r[2] }, { "state_timeout", "now" })
  -- the state_timeout event went to state + 100 (otp_machine): a state change
  acts({ { { "timeout", "z" }, "update", "z1" } })
  r = fired(); T.eq({ r[1], r[2] }, { { "timeout", "z" }, "z1" })
  -- the event timeout: cancel
  acts({ { "timeout", 50, "e" }, { "timeout", "cancel" } })
  T.no_msg(200)
  -- a bad time in a generic timeout ends the machine as the others do
  lpvm.unlink(m)
  local ref = lpvm.monitor(m)
  sm.cast(m, { "acts", { { "timeout", "g" }, -1, "x" } })
  local why = select(2, T.down(ref))
  T.eq(why[1], "bad_action_from_state_function")
  T.flush()
end)

test("zero timeouts fire before a message already queued; the event timeout does not", function()
  local me = lpvm.self()
  local m = assert(sm.start_link("otp_machine", { log = me }))
  require("sys").suspend(m)
  sm.cast(m, { "acts", { { "state_timeout", 0, "s0" }, { { "timeout", "g" }, 0, "g0" },
                         { "timeout", 0, "e0" } } })
  sm.cast(m, "queued")
  require("sys").resume(m)
  local got = {}
  for i = 1, 4 do local r = T.recv(); got[i] = { r[1], r[2] } end
  T.eq(got[1][1], "cast")
  T.eq(got[2], { "state_timeout", "s0" })
  T.eq(got[3], { { "timeout", "g" }, "g0" })
  T.eq(got[4], { "cast", "queued" })
  T.no_msg(100)
  T.eq(sm.call(m, "quit"), "bye")
  T.flush()
end)

test("sys on a gen_statem: replace_state takes and gives {state, data}; get_status", function()
  local sys = require "sys"
  local m = assert(sm.start_link("otp_machine", {}))
  local new = sys.replace_state(m, function(sd) sd[2].enters = 5; return { sd[1] + 3, sd[2] } end)
  T.eq(new[1], 3); T.eq(new[2].enters, 5)
  T.eq(sm.call(m, "get"), 3)
  local ok, why = pcall(sys.replace_state, m, function() return 5 end)
  T.eq(ok, false); T.eq(why[1], "callback_failed")
  T.eq(sys.get_state(m)[1], 3, "the state stayed")
  local st = sys.get_status(m)
  T.eq({ st.behaviour, st.module, st.status, st.state[1] }, { "gen_statem", "otp_machine", "running", 3 })
  sys.suspend(m)
  T.eq(sys.get_status(m).status, "suspended")
  sys.resume(m)
  T.eq(sm.call(m, "quit"), "bye")
  T.flush()
end)

test("an event timeout is a deadline: sys requests meanwhile do not put it off", function()
  -- found by otpsem's probe against OTP 25: sys.get_state every 50 ms kept a 300 ms
  -- event timeout from firing until the polling stopped (OTP's fires at 300 ms)
  local me = lpvm.self()
  local m = assert(sm.start_link("otp_machine", { log = me }))
  sm.cast(m, "idle")                     -- {"timeout", 30, "idle_fired"}
  T.recv()
  local poller = lpvm.spawn(function()
    local sys = require "sys"
    while not lpvm.receive(function(t) return t == "stop" end, 0) do
      sys.get_state(m)
      lpvm.sleep(2)
    end
  end)
  local r = T.recv_match(function(t) return t == "timeout" end)
  T.eq(r[2], "idle_fired", "fired while sys requests kept coming")
  lpvm.send(poller, "stop")
  T.eq(sm.call(m, "quit"), "bye")
  T.flush()
end)

T.run()
