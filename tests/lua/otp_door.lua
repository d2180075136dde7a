-- otp_door.lua -- a code lock as a gen_statem (state functions, state enter calls,
-- a state timeout): the example of OTP's gen_statem guide, for test_gen_statem.lua
-- and docs/otp.md.
local gen_statem = require "gen_statem"
local door = {}

door.callback_mode = { "state_functions", "state_enter" }

function door.start_link(code, opts) return gen_statem.start_link("otp_door", code, opts) end
function door.button(lock, digit) gen_statem.cast(lock, { "button", digit }) end
function door.status(lock) return gen_statem.call(lock, "status") end

function door.init(a)
  return "ok", "locked", { code = a.code, open_ms = a.open_ms or 100, buttons = "", log = a.log }
end

local function note(d, what) if d.log then lpvm.send(d.log, what) end end

function door.locked(ev, content, d, from)
  if ev == "enter" then
    note(d, "locked")
    d.buttons = ""
    return "keep_state", d
  elseif ev == "cast" and content[1] == "button" then
    local b = d.buttons .. content[2]
    if b == d.code then d.buttons = ""; return "next_state", "open", d end
    if #b >= #d.code then b = "" end
    d.buttons = b
    return "keep_state", d
  elseif ev == "call" and content == "status" then
    return "keep_state_and_data", { "reply", from, "locked" }
  end
  return "keep_state_and_data"
end

function door.open(ev, content, d, from)
  if ev == "enter" then
    note(d, "open")
    return "keep_state_and_data", { "state_timeout", d.open_ms, "lock" }
  elseif ev == "state_timeout" then
    return "next_state", "locked", d
  elseif ev == "call" and content == "status" then
    return "keep_state_and_data", { { "reply", from, "open" } }
  elseif ev == "cast" and content[1] == "lock" then
    return "next_state", "locked", d
  elseif ev == "cast" then
    return "keep_state_and_data", "postpone"   -- buttons wait until it is locked again
  end
  return "keep_state_and_data"
end

function door.terminate(reason, state, d) note(d, "terminate " .. state) end

return door
