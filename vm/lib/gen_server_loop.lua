-- gen_server_loop.lua -- the half of a gen_server process (gen_server.lua) that is
-- more than a plain call: casts, infos, stop, system messages, call results other
-- than a plain "reply" (noreply, stop, errors), actions (timeouts, hibernate,
-- continue) and terminate. A call whose handle_call returns "reply" is served in C
-- from end to end (lpvm.dispatcher), so a process that is only called never runs
-- this file, and each process is its own Lua state: gen_server.lua loads it on the
-- first message or action that needs it (a supervisor's 10,000 children then start
-- without it), and it takes over the server's loop from then on.
-- Written on the public lpvm module only.
local lpvm = require "lpvm"
local gen = require "gen"

local G = {}

local receive, send_alias, xpcall = lpvm.receive, lpvm.send_alias, xpcall
local traceback = gen.traceback

local S   -- the running server: mod, state, parent, name (gen_server.lua's, one per process)

local function terminate(reason)
  local f = S.mod.terminate
  if f then
    local ok, err = xpcall(f, traceback, reason, S.state)
    if not ok then reason = err end   -- an error in terminate replaces the reason
  end
  local rare = require "gen_sys"
  if not rare.is_normal(reason) then rare.report_terminate("gen_server", S, reason) end
  lpvm.exit(reason)
end

local function bad_return(what, ...)
  terminate(require("gen_sys").bad_return(what, ...))
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

-- One message other than a call (n values): returns the next action.
local function handle_common(n, tag, a, b, c, ...)
  if tag == "$gen_cast" and n == 2 then
    return noreply_result("handle_cast", run(xpcall(S.mod.handle_cast, traceback, a, S.state)))
  elseif tag == "$gen_stop" and n == 2 then
    terminate(a)
  elseif tag == "$gen_system" and n == 4 then   -- sys.lua's requests: gen_sys.lua
    local sys = require "gen_sys"
    if sys.handle_system(S, a, b, c) then sys.suspended(S) end
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
-- a plain reply, handle_common the other messages; serve() is dispatch(receive()) in
-- one C call. Made in G.dispatcher.
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
      r = table.pack(receive(nil, action))
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

-- Take over the server S (gen_server.lua's): returns the dispatcher and serve that
-- replace its first ones (lpvm.dispatcher with this file's call_result and
-- handle_common).
function G.dispatcher(server)
  S = server
  dispatch, serve = lpvm.dispatcher(S, traceback, call_result, handle_common)
  return dispatch, serve
end

G.call_result, G.handle_common, G.loop = call_result, handle_common, loop

return G
