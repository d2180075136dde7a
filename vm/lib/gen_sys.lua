-- gen_sys.lua -- what a behaviour process rarely needs, loaded on the first need: the
-- system messages of sys.lua (suspend, resume, get_state, change_code), a failed
-- init, the error report of a process terminating abnormally, which reasons need
-- none (is_normal), and the reason for a callback's bad return value. Every process
-- of a behaviour loads gen.lua and its behaviour's module (each process is its own Lua
-- state: a supervisor's 10,000 children load them 10,000 times), so what only some
-- processes ever run lives here.
-- Written on the public lpvm module only.
local lpvm = require "lpvm"
local gen = require "gen"

local G = {}

local send_alias = lpvm.send_alias

-- A system request {"$gen_system", pid, ref, request} to the server S (mod, state):
-- suspend, resume, get_state and change_code. Returns true when it was "suspend".
-- statem: S is a gen_statem's (mod, state, data), answered in OTP's gen_statem shapes:
-- get_state is {state, data}, code_change(old_vsn, state, data, extra) -> "ok",
-- state, data (a gen_server's: code_change(old_vsn, state, extra) -> "ok", state).
-- The state as format_status shows it (reports, get_status): the status table
-- {state = ...} through the module's format_status, if it has one that works.
local function formatted_state(S, state, reason)
  local status = { state = state, reason = reason }
  if S.mod and S.mod.format_status then
    local ok, st = pcall(S.mod.format_status, status)
    if ok and type(st) == "table" then status = st end
  end
  return status
end

-- The callback module's name (nil for a callback table that is no module).
local function module_name(mod)
  local m = gen.module_spec(mod, "sys.get_status")
  return type(m) == "string" and m or nil
end

function G.handle_system(S, pid, ref, request, statem, suspended)
  local what = type(request) == "table" and request[1] or request
  if what == "suspend" or what == "resume" then
    send_alias(pid, ref, true)
    return what == "suspend"
  elseif what == "get_state" then
    send_alias(pid, ref, true, statem and { S.state, S.data } or S.state)
  elseif what == "replace_state" then
    -- {"replace_state", fn}: fn(state) -> new state (a gen_statem's: fn({state, data})
    -- -> {state, data}); if it raises (or a gen_statem's returns no such table) the
    -- state stays and the caller raises {"callback_failed", reason}, as OTP's
    local ok, new = xpcall(request[2], gen.traceback, statem and { S.state, S.data } or S.state)
    if ok and statem and type(new) ~= "table" then
      ok, new = false, "a {state, data} table expected, got " .. lpvm.format(new)
    end
    if not ok then
      send_alias(pid, ref, nil, { "callback_failed", new })
    else
      if statem then S.state, S.data = new[1], new[2] else S.state = new end
      send_alias(pid, ref, true, new)
    end
  elseif what == "get_status" then
    send_alias(pid, ref, true, {
      pid = lpvm.self(), name = S.name or nil, module = module_name(S.mod),
      behaviour = statem and "gen_statem" or "gen_server",
      status = suspended and "suspended" or "running", parent = S.parent,
      state = formatted_state(S, statem and { S.state, S.data } or S.state).state })
  elseif what == "change_code" then
    -- {"change_code", module, old_vsn, extra}: the module is loaded already, and this
    -- process took its new version at this message (lcode.c's safe point)
    local module, old_vsn, extra = request[2], request[3], request[4]
    local f = S.mod.code_change
    if module ~= gen.module_spec(S.mod, "change_code") then
      send_alias(pid, ref, nil, "not the server's module")
    elseif not f then
      send_alias(pid, ref, true)   -- as OTP: no callback, the state stays
    else
      local ok, verb, state, data
      if statem then
        ok, verb, state, data = xpcall(f, gen.traceback, old_vsn, S.state, S.data, extra)
      else
        ok, verb, state = xpcall(f, gen.traceback, old_vsn, S.state, extra)
      end
      if ok and verb == "ok" then
        S.state = state
        if statem then S.data = data end
        send_alias(pid, ref, true)
      else
        send_alias(pid, ref, nil, ok and ("bad return from code_change: " .. tostring(verb))
          or verb)
      end
    end
  else
    send_alias(pid, ref, nil, "unknown system message")
  end
  return false
end

-- A system request to the server S (a gen_statem's when statem), then, after a
-- "suspend", only system messages until "resume". Returns nil (no action).
function G.system(S, pid, ref, request, statem)
  if G.handle_system(S, pid, ref, request, statem) then G.suspended(S, statem) end
  return nil
end

-- A message gen_server S cannot take (it has no handle_info): a warning, then nothing.
function G.dropped(S, msg)
  require("logger").warning("gen_server %s: unexpected message dropped (no handle_info): %s",
    tostring(S.name or lpvm.self()), tostring(msg))
  return nil
end

-- Suspended (sys.suspend): only system messages are taken until "resume".
function G.suspended(S, statem)
  while true do
    local _, pid, ref, request = lpvm.receive(function(tag, _, _, _, ...)
      return tag == "$gen_system" and select("#", ...) == 0
    end)
    if request == "resume" then
      send_alias(pid, ref, true)
      return
    end
    G.handle_system(S, pid, ref, request, statem, true)
  end
end

-- gen.init's failures: tell the starter (parent, tag) and end the process as OTP does.
-- what: "already_started" (x: the name), "load" (x: the error loading the callbacks)
-- or "init" (x: init's results {ok, verb, ...}, verb not "ok").
function G.init_failed(parent, tag, what, x)
  if what == "already_started" then
    lpvm.send(parent, tag, "error", "already_started", lpvm.whereis(x))
    lpvm.exit("normal")
  elseif what == "load" or not x[1] then
    local err = what == "load" and x or x[2]
    lpvm.send(parent, tag, "error", err)
    lpvm.exit(err)
  end
  local verb = x[2]
  local reason = verb == "stop" and x[3] or verb == "ignore" and "ignore"
      or { "bad_return_value", "init", G.show_values(x, 2, #x) }
  -- as OTP 26's init_fail: the starter gets nil, reason, not an exit signal
  lpvm.unlink(parent)
  lpvm.send(parent, tag, "error", reason)
  lpvm.exit(reason == "ignore" and "normal" or reason)
end

-- A reason that is not worth a report: normal, shutdown, {"shutdown", _}.
function G.is_normal(reason)
  return reason == "normal" or reason == "shutdown"
      or (type(reason) == "table" and reason[1] == "shutdown")
end

-- The exit reason for a callback `what` that returned values it may not.
-- The values are shown as reports show terms (lpvm.format): a table by its contents,
-- so an Erlang habit such as `return {"reply", r, s}` reads `{"reply", 1, 0}`, not
-- `table: 0x...`; a string quoted; no values as "(no values)"; cut at 1,000 bytes.
function G.show_values(vals, first, last)
  local shown = {}
  for i = first, last do shown[#shown + 1] = lpvm.format(vals[i]) end
  local text = #shown == 0 and "(no values)" or table.concat(shown, ", ")
  if #text > 1000 then text = text:sub(1, 1000) .. "..." end
  return text
end

function G.bad_return(what, ...)
  local vals = table.pack(...)
  return { "bad_return_value", what, G.show_values(vals, 1, vals.n) }
end

-- The error report of a behaviour process terminating abnormally (OTP's "Generic
-- server terminating"): its reason and its state, as format_status shows it.
function G.report_terminate(kind, S, reason)
  local logger = require "logger"
  if not logger.allow("error") then return end
  local status = formatted_state(S, S.state, reason)
  local why = status.reason
  logger.error("%s %s terminating\nreason: %s\nstate: %s", kind,
    S.name and (S.name .. " " .. tostring(lpvm.self())) or tostring(lpvm.self()),
    type(why) == "string" and why or lpvm.format(why), lpvm.format(status.state))
end

return G
