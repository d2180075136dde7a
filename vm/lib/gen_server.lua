-- gen_server.lua -- OTP's generic server for lpvm (docs/otp.md).
--
--   local gen_server = require "gen_server"
--   local pid = gen_server.start_link("my_server", args, { name = "kv" })
--   gen_server.call("kv", { "get", "a" })      -- handle_call(request, from, state)
--   gen_server.cast("kv", { "put", "a", 1 })   -- handle_cast(request, state)
--
-- Callbacks return a verb and values instead of OTP's tuples:
--   init(args)                      -> "ok", state [, action] | "stop", reason | "ignore"
--   handle_call(req, from, state)   -> "reply", reply, state [, action]
--                                    | "noreply", state [, action]
--                                    | "stop", reason, reply, state | "stop", reason, state
--   handle_cast(req, state)         -> "noreply", state [, action] | "stop", reason, state
--   handle_info(msg, state)         -> the same as handle_cast
--   handle_continue(arg, state)     -> the same as handle_cast
--   terminate(reason, state)        -> ignored
--   code_change(old_vsn, state, extra) -> "ok", state
--   format_status(status)           -> status (what a crash report shows of the state)
-- action: a timeout in ms (handle_info("timeout", state) if nothing comes first),
-- "hibernate" (a full garbage collection, then wait), or { continue = arg }.
-- A message of several values reaches handle_info as the table {v1, ..., vn} (as a
-- tuple would); a message of one value as that value.
local lpvm = require "lpvm"
local gen = require "gen"

local M = {}

local receive, send_alias, pack, select, xpcall = lpvm.receive, lpvm.send_alias, table.pack, select, xpcall
local traceback = gen.traceback

-- ---- the client API -------------------------------------------------------------

-- start, start_link, call, cast, reply, stop (gen.lua: the same for gen_statem):
--   start(mod, args [, opts]) / start_link(...) -> pid | nil, reason
--   call(server, request [, timeout_ms = 5000]) -> reply
--   cast(server, request) -> true (a dead or unknown server loses it)
--   reply(from, reply): a deferred reply to a handle_call that returned "noreply"
--   stop(server [, reason = "normal" [, timeout_ms = math.huge]]) -> true
gen.client_api(M, "gen_server")

-- abcast(names, request): cast to each registered name (this node only).
function M.abcast(names, request)
  for _, n in ipairs(names) do M.cast(n, request) end
  return true
end

-- multi_call(names, request [, timeout]) -> replies {name = reply}, bad {name, ...}
-- (this node only: every name is called, each within the timeout).
function M.multi_call(names, request, timeout)
  local replies, bad = {}, {}
  for _, n in ipairs(names) do
    local ok, r = pcall(M.call, n, request, timeout)
    if ok then replies[n] = r else bad[#bad + 1] = n end
  end
  return replies, bad
end

-- ---- the server process -----------------------------------------------------------

local S = {}        -- the running server: mod, state, parent, name (one per process)

local function terminate(reason, stacktrace)
  local f = S.mod.terminate
  if f then
    local ok, err = xpcall(f, traceback, reason, S.state)
    if not ok then reason = err end   -- an error in terminate replaces the reason
  end
  if not gen.is_normal(reason) then gen.report_terminate("gen_server", S, reason) end
  lpvm.exit(reason)
end

local function bad_return(what, ...)
  local vals = pack(...)
  local shown = {}
  for i = 1, vals.n do shown[i] = tostring(vals[i]) end
  terminate({ "bad_return_value", what, table.concat(shown, ", ") })
end

-- The callback fn(...) under xpcall: an error terminates the server (terminate is
-- called with the error and its traceback, which is also the exit reason).
local function run(ok, ...)
  if ok then return ... end
  terminate((...))
end

-- After a callback returned `verb, ...` for a cast, info or continue.
-- Returns the action (timeout, "hibernate", table) or nil.
local function noreply_result(what, verb, a, b, ...)
  if verb == "noreply" then
    S.state = a
    return b
  elseif verb == "stop" then
    S.state = b
    terminate(a)
  end
  bad_return(what, verb, a, b, ...)
end

local function do_continue(action)
  while type(action) == "table" and action.continue ~= nil do
    local f = S.mod.handle_continue
    if not f then terminate({ "undef", "handle_continue" }) end
    action = noreply_result("handle_continue", run(xpcall(f, traceback, action.continue, S.state)))
  end
  return action
end

local function call_result(pid, ref, ok, ...)
  if not ok then terminate((...)) end
  local verb, a, b, c = ...
  if verb == "reply" then
    send_alias(pid, ref, a)
    S.state = b
    return c
  elseif verb == "noreply" then
    S.state = a
    return b
  elseif verb == "stop" then
    if select("#", ...) >= 4 then      -- "stop", reason, reply, state
      lpvm.send_alias(pid, ref, b)
      S.state = c
    else
      S.state = b
    end
    terminate(a)
  end
  bad_return("handle_call", ...)
end

-- System messages (vm/lib/sys.lua, OTP's sys): suspend, resume, get_state and
-- change_code. Returns true when the request was "suspend".
local function handle_system(pid, ref, request)
  local what = type(request) == "table" and request[1] or request
  if what == "suspend" or what == "resume" then
    lpvm.send_alias(pid, ref, true)
    return what == "suspend"
  elseif what == "get_state" then
    lpvm.send_alias(pid, ref, true, S.state)
  elseif what == "change_code" then
    -- {"change_code", module, old_vsn, extra}: the module is loaded already, and this
    -- process took its new version at this message (lcode.c's safe point)
    local module, old_vsn, extra = request[2], request[3], request[4]
    local f = S.mod.code_change
    if module ~= gen.module_spec(S.mod, "change_code") then
      lpvm.send_alias(pid, ref, nil, "not the server's module")
    elseif not f then
      lpvm.send_alias(pid, ref, true)   -- as OTP: no callback, the state stays
    else
      local ok, verb, state = xpcall(f, traceback, old_vsn, S.state, extra)
      if ok and verb == "ok" then
        S.state = state
        lpvm.send_alias(pid, ref, true)
      else
        lpvm.send_alias(pid, ref, nil, ok and ("bad return from code_change: " .. tostring(verb))
          or verb)
      end
    end
  else
    lpvm.send_alias(pid, ref, nil, "unknown system message")
  end
  return false
end

-- Suspended (sys.suspend): only system messages are taken until "resume".
local function suspended()
  while true do
    local _, pid, ref, request = receive(function(tag, _, _, _, ...)
      return tag == "$gen_system" and select("#", ...) == 0
    end)
    if request == "resume" then
      lpvm.send_alias(pid, ref, true)
      return
    end
    handle_system(pid, ref, request)
  end
end

-- One message other than a call (n values): returns the next action.
local function handle_common(n, tag, a, b, c, ...)
  if tag == "$gen_cast" and n == 2 then
    return noreply_result("handle_cast", run(xpcall(S.mod.handle_cast, traceback, a, S.state)))
  elseif tag == "$gen_stop" and n == 2 then
    terminate(a)
  elseif tag == "$gen_system" and n == 4 then
    if handle_system(a, b, c) then suspended() end
    return nil
  elseif tag == "EXIT" and n == 3 and a == S.parent then
    terminate(b)                       -- trapping exits: the parent's end is ours
  end
  local msg = tag
  if n ~= 1 then msg = { tag, a, b, c, ... } end
  local f = S.mod.handle_info
  if not f then
    require("logger").warning("gen_server %s: unexpected message dropped (no handle_info): %s",
      tostring(S.name or lpvm.self()), tostring(msg))
    return nil
  end
  return noreply_result("handle_info", run(xpcall(f, traceback, msg, S.state)))
end

-- One message, as receive returned it: returns the next action. A call is handled in
-- C (lpvm.dispatcher: handle_call, its reply, S.state); call_result gets what is not
-- a plain reply, handle_common the other messages. serve() is dispatch(receive()) in
-- one C call. Made in M.main.
local dispatch, serve

local function loop(action)
  while true do
    while action == nil do action = serve() end
    if type(action) == "table" then action = do_continue(action) end
    local r
    if action == nil then
      action = serve()
    elseif action == "hibernate" then
      collectgarbage("collect")
      action = serve()
    elseif math.type(action) == "integer" or type(action) == "number" then
      r = pack(receive(nil, action))
      if r.n == 2 and r[1] == nil and r[2] == "timeout" then
        action = noreply_result("handle_info", run(xpcall(S.mod.handle_info or function(_, s)
          return "noreply", s
        end, traceback, "timeout", S.state)))
      else
        action = dispatch(table.unpack(r, 1, r.n))
      end
    else
      bad_return("action", action)
    end
  end
end

-- The new process: main(parent, tag, name, spec, args).
function M.main(parent, tag, name, spec, args)
  local mod, r = gen.init(parent, tag, name, spec, args)
  S.mod, S.name, S.parent, S.state = mod, name, parent, r[3]
  dispatch, serve = lpvm.dispatcher(S, traceback, call_result, handle_common)
  gen.ack(parent, tag, "ok")
  return loop(r[4])
end

return M
