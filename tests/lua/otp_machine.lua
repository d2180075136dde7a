-- otp_machine.lua -- a handle_event_function gen_statem for test_gen_statem.lua:
-- event timeouts, next_event, stop_and_reply, repeat_state.
local gen_statem = require "gen_statem"
local m = {}
m.callback_mode = "handle_event_function"

function m.init(a)
  if a.stop then return "stop", a.stop end
  return "ok", 0, { log = a.log, enters = 0 }
end

local function note(d, ...) if d.log then lpvm.send(d.log, ...) end end

function m.handle_event(ev, content, state, d, from)
  note(d, ev, content, state)
  if ev == "call" and content == "get" then return "keep_state_and_data", { "reply", from, state } end
  if ev == "call" and content == "quit" then return "stop_and_reply", "normal", { "reply", from, "bye" } end
  if ev == "cast" and content == "idle" then
    return "keep_state_and_data", { "timeout", 30, "idle_fired" }
  end
  if ev == "cast" and content == "idle_long" then
    return "keep_state_and_data", { "timeout", 300, "idle_long_fired" }
  end
  if ev == "cast" and content == "chain" then
    return "next_state", state + 1, d, { { "next_event", "internal", "step2" } }
  end
  if ev == "internal" and content == "step2" then return "next_state", state + 10, d end
  if ev == "cast" and content == "timed" then   -- a state timeout given with the new state
    return "next_state", state + 1, d, { "state_timeout", 20, "st_fired" }
  end
  if ev == "state_timeout" then return "next_state", state + 100, d end
  if ev == "cast" and type(content) == "table" and content[1] == "bad_action" then
    return "keep_state_and_data", content[2]
  end
  -- {"acts", actions [, new_state]}: return these actions (a test's timers)
  if ev == "cast" and type(content) == "table" and content[1] == "acts" then
    return "next_state", content[3] or state, d, content[2]
  end
  if ev == "cast" and content == "crash" then error("machine crashed") end
  if ev == "cast" and content == "bad" then return "what" end
  return "keep_state_and_data"
end

-- sys.change_code: OTP's gen_statem shape (old_vsn, state, data, extra) -> ok, state, data
function m.code_change(_, state, d, extra) return "ok", state + (extra or 0), d end

function m.terminate(reason, state, d) note(d, "terminate", reason, state) end

return m
