-- sys.lua -- OTP's sys for lpvm's gen_server and gen_statem: suspend a server, change
-- its code, resume it (docs/code.md, "Upgrading a gen_server"). A gen_statem's state is
-- {state, data}, its code_change(old_vsn, state, data, extra) (gen_statem.lua).
--
--   sys.suspend(server [, timeout])                               -> true
--   sys.change_code(server, module, old_vsn, extra [, timeout])   -> true | nil, reason
--   sys.resume(server [, timeout])                                -> true
--   sys.get_state(server [, timeout])                             -> state
--   sys.replace_state(server, fn [, timeout])                     -> new state
--   sys.get_status(server [, timeout])                            -> status table
-- A server that is gone or does not answer in time raises its reason, "noproc" or
-- "timeout", as gen_server.call does. While suspended a server takes only system
-- messages; calls and casts wait in its mailbox.
local gen = require "gen"
local lpvm = require "lpvm"

local sys = {}

-- A system request ({"$gen_system", from, ref, request}, answered on the alias ref
-- with ok, value): returns ok, value; raises the server's reason, noproc or timeout.
local function system(server, request, timeout, targ, fname)
  local t = type(server)
  if t ~= "string" and t ~= "userdata" then
    error(string.format("bad argument #1 to '%s' (pid or name expected, got %s)", fname, t), 3)
  end
  timeout = gen.check_timeout(timeout, targ, fname, gen.DEFAULT_TIMEOUT)
  local pid = gen.whereis(server)
  if not pid then error("noproc", 0) end
  -- as OTP (a system message is a call): a process cannot ask itself
  if pid == lpvm.self() then error("calling_self", 0) end
  local ref = lpvm.monitor(pid, "alias")
  lpvm.send(pid, "$gen_system", lpvm.self(), ref, request)
  local a, ok, value, _, why = lpvm.receive_ref(ref, timeout)
  lpvm.demonitor(ref, "flush")
  if a == ref then return ok, value end
  if a == "DOWN" then error(why, 0) end
  error("timeout", 0)
end

function sys.suspend(server, timeout)
  return (system(server, "suspend", timeout, 2, "sys.suspend"))
end

function sys.resume(server, timeout)
  return (system(server, "resume", timeout, 2, "sys.resume"))
end

function sys.get_state(server, timeout)
  return select(2, system(server, "get_state", timeout, 2, "sys.get_state"))
end

-- replace_state(server, fn): the server runs fn(state) (a gen_statem's fn({state,
-- data}) -> {state, data}; fn travels as a copy, its upvalues too) and keeps what it
-- returns; if fn raises, the state stays and this raises {"callback_failed", reason}.
function sys.replace_state(server, fn, timeout)
  if type(fn) ~= "function" then
    error("bad argument #2 to 'sys.replace_state' (function expected, got " .. type(fn) .. ")", 2)
  end
  local ok, v = system(server, { "replace_state", fn }, timeout, 3, "sys.replace_state")
  if not ok then error(v, 0) end
  return v
end

-- get_status(server) -> { pid =, name =, module =, behaviour = "gen_server" |
-- "gen_statem", status = "running" | "suspended", parent =, state = }: state as the
-- module's format_status shows it (a gen_statem's: {state, data}).
function sys.get_status(server, timeout)
  return select(2, system(server, "get_status", timeout, 2, "sys.get_status"))
end

-- change_code(server, module, old_vsn, extra): the server calls
-- module.code_change(old_vsn, state, extra) -> "ok", new_state, in its new version.
function sys.change_code(server, module, old_vsn, extra, timeout)
  if type(module) ~= "string" then
    error("bad argument #2 to 'sys.change_code' (module name expected, got " .. type(module) .. ")", 2)
  end
  local ok, why = system(server, { "change_code", module, old_vsn, extra }, timeout, 5,
                         "sys.change_code")
  if ok then return true end
  return nil, why
end

return sys
