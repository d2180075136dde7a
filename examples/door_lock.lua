-- door_lock.lua -- a code lock as a gen_statem (docs/otp.md), after the example in
-- OTP's gen_statem guide: state functions, state enter calls, a state timeout that
-- locks the door again, buttons pressed while it is open postponed until it locks.
--
--   lpvm examples/door_lock.lua
local gen_statem = require "gen_statem"

local lock = {}
lock.callback_mode = { "state_functions", "state_enter" }

function lock.start_link(code) return gen_statem.start_link("door_lock", code, { name = "door" }) end
function lock.button(digit) gen_statem.cast("door", { "button", digit }) end
function lock.status() return gen_statem.call("door", "status") end

function lock.init(code) return "ok", "locked", { code = code, buttons = "" } end

function lock.locked(event, content, data, from)
  if event == "enter" then
    print("  [door] locked")
    data.buttons = ""
    return "keep_state", data
  elseif event == "cast" then                    -- a button
    local buttons = data.buttons .. content[2]
    if buttons == data.code then return "next_state", "open", data end
    if #buttons >= #data.code then buttons = "" end   -- wrong code: start again
    data.buttons = buttons
    return "keep_state", data
  elseif event == "call" then
    return "keep_state_and_data", { "reply", from, "locked" }
  end
  return "keep_state_and_data"
end

function lock.open(event, _, data, from)
  if event == "enter" then
    print("  [door] open")
    return "keep_state_and_data", { "state_timeout", 300, "lock" }   -- locks in 300 ms
  elseif event == "state_timeout" then
    return "next_state", "locked", data
  elseif event == "call" then
    return "keep_state_and_data", { "reply", from, "open" }
  end
  return "keep_state_and_data", "postpone"         -- buttons wait until it is locked
end

if (...) == "door_lock" then return lock end

-- ---- the demo ------------------------------------------------------------------------
assert(lock.start_link("123"))
print("status:", lock.status())
for _, d in ipairs({ "1", "2", "4" }) do lock.button(d) end
print("after 1 2 4:", lock.status())
for _, d in ipairs({ "1", "2", "3" }) do lock.button(d) end
print("after 1 2 3:", lock.status())
for _, d in ipairs({ "1", "2", "3" }) do lock.button(d) end   -- pressed while open
lpvm.sleep(450)
print("450 ms later:", lock.status(), "(it locked, then the postponed 1 2 3 opened it)")
lpvm.sleep(400)
print("400 ms more:", lock.status())
gen_statem.stop("door")
