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

T.run()
