-- gen_statem.lua -- OTP's generic state machine for lpvm (docs/otp.md).
--
-- callback_mode: "state_functions" (one function per state, named like the state) or
-- "handle_event_function" (one handle_event); a table {mode, "state_enter"} (or a
-- function returning either) also asks for state enter calls.
--   init(args)                              -> "ok", state, data [, actions]
--                                            | "stop", reason | "ignore"
--   <state>(event_type, content, data, from)        (state_functions)
--   handle_event(event_type, content, state, data, from)   (handle_event_function)
--       -> "next_state", state, data [, actions] | "keep_state", data [, actions]
--        | "keep_state_and_data" [, actions] | "repeat_state", data [, actions]
--        | "repeat_state_and_data" [, actions] | "stop", reason [, data]
--        | "stop_and_reply", reason, replies [, data]
--   terminate(reason, state, data)
-- event_type: "call" (then `from` is set: reply with gen_statem.reply(from, v) or a
-- {"reply", from, v} action), "cast", "info", "timeout" (the event timeout),
-- "state_timeout", "internal" (next_event), "enter" (content: the old state).
-- actions: one action or a list of them:
--   {"reply", from, value}     "postpone"     "hibernate"
--   {"state_timeout", ms, content}   {"timeout", ms, content}   (the event timeout)
--   {{"timeout", name}, ms, content} (a generic timeout: event type {"timeout", name})
--   {<any of the three>, "cancel"}   {<any of the three>, "update", content}
--   {"next_event", type, content}
local lpvm = require "lpvm"
local gen = require "gen"

local M = {}

local traceback, pack, unpack = gen.traceback, table.pack, table.unpack

-- ---- the client API -----------------------------------------------------------------

gen.client_api(M, "gen_statem")   -- start, start_link, call, cast, reply, stop

-- ---- the machine ---------------------------------------------------------------------

local S = {}   -- mod, state, data, parent, name, enter, by_state, queue, postponed,
               -- timers, by_ref (all of this process's own: one machine per process)

local function terminate(reason)
  local f = S.mod.terminate
  if f then
    local ok, err = xpcall(f, traceback, reason, S.state, S.data)
    if not ok then reason = err end
  end
  local rare = require "gen_sys"
  if not rare.is_normal(reason) then rare.report_terminate("gen_statem", S, reason) end
  lpvm.exit(reason)
end

local function call_state(etype, content, from)
  local f, r
  if S.by_state then
    f = S.mod[S.state]
    if type(f) ~= "function" then terminate({ "undef_state_function", tostring(S.state) }) end
    r = pack(xpcall(f, traceback, etype, content, S.data, from))
  else
    r = pack(xpcall(S.mod.handle_event, traceback, etype, content, S.state, S.data, from))
  end
  if not r[1] then terminate(r[2]) end
  return r
end

-- Timers: the state timeout and each generic timeout {"timeout", name} is a record
-- in S.timers (key: STATE_KEY or the name's key) holding a fresh ref, the content and
-- the send_after timer that will send {"$statem_timeout", ref}; S.by_ref maps a
-- running ref back to its key, so a cancelled or restarted timer that fires anyway
-- is recognised and dropped. A zero time (and an update of a timer that is not
-- running) does not go through the mailbox: its firing is queued behind the events
-- already taken (inserted, postponed), before any message, as OTP does.
local STATE_KEY = {}

local function timer_key(name)
  if type(name) == "table" then return "t:" .. lpvm.format(name) end
  return name
end

local function cancel_timer(key)
  local t = S.timers[key]
  if not t then return end
  if t.tref then lpvm.cancel_timer(t.tref) end
  S.by_ref[t.ref] = nil
  S.timers[key] = nil
end

-- etype: "state_timeout" or {"timeout", name}
local function start_timer(key, etype, ms, content)
  cancel_timer(key)
  if ms == math.huge then return end
  local ref = lpvm.make_ref()
  local t = { ref = ref, etype = etype, content = content }
  if ms == 0 then
    S.queue[#S.queue + 1] = { "$statem_t0", ref }
  else
    t.tref = lpvm.send_after(ms, lpvm.self(), "$statem_timeout", ref)
  end
  S.timers[key], S.by_ref[ref] = t, key
end

-- The event of a timer that fired, or nil if it was cancelled or restarted since.
local function timer_event(ref)
  local key = S.by_ref[ref]
  if key == nil then return nil end
  local t = S.timers[key]
  S.by_ref[ref], S.timers[key] = nil, nil
  return { t.etype, t.content }
end

-- {"state_timeout", ...} or {{"timeout", name}, ...}: ms, content | "cancel" |
-- "update", content (an update of a timer not running fires it at once, as OTP's)
local function timer_action(key, etype, a)
  if a[2] == "cancel" then return cancel_timer(key) end
  if a[2] == "update" then
    local t = S.timers[key]
    if t then t.content = a[3] else start_timer(key, etype, 0, a[3]) end
    return
  end
  start_timer(key, etype, a[2], a[3])
end

-- A list of actions, or one action? An empty table is the empty list (OTP's []: it
-- was taken for one action without a kind and ended the machine with bad_action).
-- A generic timeout {{"timeout", name}, ms | "cancel" | "update", ...} is one action
-- (a list's second element is never a number, "cancel" or "update").
local function is_list(actions)
  if type(actions) ~= "table" then return false end
  local first, second = actions[1], actions[2]
  if type(first) == "table" then
    return not (first[1] == "timeout" and (type(second) == "number"
      or second == "cancel" or second == "update"))
  end
  return first == nil or first == "postpone" or first == "hibernate"
end

-- A time an action may carry: ms >= 0, or math.huge (infinity)
local function good_ms(ms) return type(ms) == "number" and ms >= 0 end

-- Carry out the actions; returns postpone (boolean). A malformed one ends the machine
-- through terminate, as OTP's {bad_action_from_state_function, Action} does (a bad
-- time or reply target raised inside the loop: no terminate call, no report).
local function do_actions(actions, event, enter)
  if actions == nil then return false end
  if type(actions) ~= "table" or not is_list(actions) then actions = { actions } end
  local postpone = false
  for _, a in ipairs(actions) do
    local kind = type(a) == "table" and a[1] or a
    if kind == "reply" then
      local ok, err = pcall(gen.reply, a[2], a[3])
      if not ok then terminate({ "bad_action_from_state_function", "reply", tostring(err) }) end
    elseif kind == "postpone" then
      if enter then terminate({ "bad_action_from_state_function", "postpone" }) end
      postpone = true
    elseif kind == "hibernate" then
      S.hibernate = true
    elseif kind == "state_timeout" or kind == "timeout"
        or (type(kind) == "table" and kind[1] == "timeout") then
      local what = type(a) == "table" and a[2]
      if what ~= "cancel" and what ~= "update" and not good_ms(what) then
        terminate({ "bad_action_from_state_function", type(kind) == "table" and "timeout"
          or kind, tostring(what) })
      end
      if kind == "state_timeout" then timer_action(STATE_KEY, "state_timeout", a)
      elseif kind ~= "timeout" then timer_action(timer_key(kind[2]), kind, a)
      elseif what == "cancel" then S.ev_timeout = nil
      elseif what == "update" then
        if S.ev_timeout then S.ev_content = a[3] else S.ev_timeout, S.ev_content = lpvm.now(), a[3] end
      else
        -- a deadline, not a length: a system message (sys.get_state every 100 ms) or a
        -- stale timer message does not start it again, as OTP's timer is not
        S.ev_timeout = what == math.huge and math.huge or lpvm.now() + what
        S.ev_content = a[3]
      end
    elseif kind == "next_event" then
      if enter then terminate({ "bad_action_from_state_function", "next_event" }) end
      S.inserted[#S.inserted + 1] = { a[2], a[3] }
    else
      terminate({ "bad_action", tostring(kind) })
    end
  end
  return postpone
end

local function enter_state(old)
  if not S.enter then return end
  local r = call_state("enter", old)
  local verb = r[2]
  if verb == "keep_state" or verb == "repeat_state" then
    S.data = r[3]
    do_actions(r[4], nil, true)
  elseif verb == "keep_state_and_data" or verb == "repeat_state_and_data" then
    do_actions(r[3], nil, true)
  elseif verb == "next_state" and r[3] == S.state then
    S.data = r[4]
    do_actions(r[5], nil, true)
  elseif verb == "stop" then
    if r.n >= 4 then S.data = r[4] end
    terminate(r[3])
  else
    terminate({ "bad_return_from_state_enter", require("gen_sys").show_values(r, 2, r.n) })
  end
end

-- One event through the state function; handles the result.
local function handle(event)
  S.ev_timeout = nil          -- any event cancels the event timeout
  local etype, content, from = event[1], event[2], event[3]
  local r = call_state(etype, content, from)
  local verb = r[2]
  local old = S.state
  local actions, new_state, repeat_enter = nil, old, false
  if verb == "next_state" then
    new_state, S.data, actions = r[3], r[4], r[5]
  elseif verb == "keep_state" then
    S.data, actions = r[3], r[4]
  elseif verb == "keep_state_and_data" then
    actions = r[3]
  elseif verb == "repeat_state" then
    S.data, actions, repeat_enter = r[3], r[4], true
  elseif verb == "repeat_state_and_data" then
    actions, repeat_enter = r[3], true
  elseif verb == "stop" then
    if r.n >= 4 then S.data = r[4] end
    terminate(r[3])
  elseif verb == "stop_and_reply" then
    if r.n >= 5 then S.data = r[5] end
    do_actions(r[4])
    terminate(r[3])
  else
    terminate({ "bad_return_from_state_function", require("gen_sys").show_values(r, 2, r.n) })
  end
  -- the state changes before the actions run: a state timeout given with a new state
  -- is that state's (cancelling after the actions lost it: it never fired)
  if new_state ~= old then
    S.state = new_state
    cancel_timer(STATE_KEY)
  end
  if do_actions(actions, event) then S.postponed[#S.postponed + 1] = event end
  if new_state ~= old then
    -- postponed events are retried, oldest first, before anything newer
    for i = #S.postponed, 1, -1 do table.insert(S.queue, 1, S.postponed[i]) end
    S.postponed = {}
  end
  -- inserted events come before everything else
  for i = #S.inserted, 1, -1 do table.insert(S.queue, 1, S.inserted[i]) end
  S.inserted = {}
  if new_state ~= old or repeat_enter then enter_state(old) end
end

-- sys.lua's requests ({"$gen_system", pid, ref, request}): gen_sys.lua answers them
-- as for a gen_server, in OTP's gen_statem shapes (get_state is {state, data},
-- code_change(old_vsn, state, data, extra) -> "ok", state, data); after "suspend"
-- only system requests are taken until "resume" (events wait in the mailbox).
local function system(pid, ref, request)
  require("gen_sys").system(S, pid, ref, request, true)
end

-- A message as an event, or nil (handled here: stop, the parent's exit, sys).
local function to_event(n, tag, a, b, c, ...)
  if tag == "$gen_system" and n == 4 then system(a, b, c); return nil end
  if tag == "$gen_call" and n == 4 then return { "call", c, { a, b } } end
  if tag == "$gen_cast" and n == 2 then return { "cast", a } end
  if tag == "$statem_timeout" and n == 2 then return timer_event(a) end
  if tag == "$gen_stop" and n == 2 then terminate(a) end
  if tag == "EXIT" and n == 3 and a == S.parent then terminate(b) end
  if n == 1 then return { "info", tag } end
  return { "info", { tag, a, b, c, ... } }
end

local function dispatch(...) return to_event(select("#", ...), ...) end

-- The next event: queued ones (inserted, postponed) first, then the mailbox; the
-- event timeout fires only if nothing comes in time.
local function next_event()
  if #S.queue > 0 then
    local ev = table.remove(S.queue, 1)
    if ev[1] == "$statem_t0" then return timer_event(ev[2]) end
    return ev
  end
  if S.hibernate then
    S.hibernate = false
    collectgarbage("collect")
  end
  local t = S.ev_timeout
  if t == nil or t == math.huge then return dispatch(lpvm.receive()) end
  local r = pack(lpvm.receive(nil, math.max(0, t - lpvm.now())))
  if r.n == 2 and r[1] == nil and r[2] == "timeout" then
    S.ev_timeout = nil
    return { "timeout", S.ev_content }
  end
  return to_event(r.n, unpack(r, 1, r.n))
end

-- callback_mode -> mode, state_enter (nil, reason if it is bad)
local function callback_mode(mod)
  local cm = mod.callback_mode
  if type(cm) == "function" then cm = cm() end
  local mode = type(cm) == "table" and cm[1] or cm
  if mode ~= "state_functions" and mode ~= "handle_event_function" then
    return nil, { "bad_callback_mode", tostring(mode) }
  end
  return mode, type(cm) == "table" and (cm[2] == "state_enter" or cm.state_enter == true)
end

function M.main(parent, tag, name, spec, args)
  local mod, r = gen.init(parent, tag, name, spec, args)
  S.mod, S.name, S.parent = mod, name, parent
  S.queue, S.postponed, S.inserted = {}, {}, {}
  S.timers, S.by_ref = {}, {}
  local mode, enter = callback_mode(mod)
  if not mode then
    gen.ack(parent, tag, "error", enter)
    lpvm.exit(enter)
  end
  S.by_state, S.enter = mode == "state_functions", enter
  S.state, S.data = r[3], r[4]
  gen.ack(parent, tag, "ok")
  if do_actions(r[5]) then terminate({ "bad_action_from_init", "postpone" }) end
  for i = #S.inserted, 1, -1 do table.insert(S.queue, 1, S.inserted[i]) end
  S.inserted = {}
  enter_state(S.state)         -- the initial state's enter call: old state = itself
  while true do
    local ev = next_event()
    if ev then handle(ev) end
  end
end

return M
