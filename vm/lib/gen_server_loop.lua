-- gen_server_loop.lua -- the part of a gen_server process (gen_server.lua) beyond
-- calls answered with "reply" (served in C from end to end by lpvm.dispatcher) and
-- casts, infos and stop (gen_server.lua's handle_common): call results other than a
-- plain reply (noreply, stop, errors) and actions (timeouts, hibernate, continue).
-- Each process is its own Lua state, and a supervisor starts its children by the
-- thousand: gen_server.lua loads this file on the first result or action that needs
-- it, and it takes over the server's loop from then on.
-- Written on the public lpvm module only.
local lpvm = require "lpvm"
local gen = require "gen"

local G = {}

local receive, send_alias, xpcall = lpvm.receive, lpvm.send_alias, xpcall
local traceback = gen.traceback

local S   -- the running server: mod, state, parent, name (gen_server.lua's, one per process)
-- gen_server.lua's (G.dispatcher): the server's end, a callback's result under xpcall,
-- a cast's or info's result, and the handler of the messages other than calls
local terminate, run, noreply_result, handle_common

local function bad_return(what, ...)
  terminate(require("gen_sys").bad_return(what, ...))
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
    if select("#", ...) >= 4 then      -- "stop", reason, reply, state: the reply
      S.state = c                      -- goes after terminate, as OTP's
      terminate(a, pid, ref, b)
    end
    S.state = b
    terminate(a)
  end
  bad_return("handle_call", ...)
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
    elseif type(action) == "number" and action >= 0 then   -- (-5, NaN: bad_return)
      r = table.pack(receive(nil, action))
      if r.n == 2 and r[1] == nil and r[2] == "timeout" then
        action = noreply_result("handle_info", run(xpcall(S.mod.handle_info or function(_, s)
          return "noreply", s
        end, traceback, "timeout", S.state)))
      else
        -- a system message (sys.get_state, a suspend until resume) is no message of the
        -- server's: the timeout starts again, as OTP's loop does (it was lost, so the
        -- server then waited for ever)
        local system = r.n == 4 and r[1] == "$gen_system"
        local next_action = dispatch(table.unpack(r, 1, r.n))
        if system then next_action = action end
        action = next_action
      end
    else
      bad_return("action", action)
    end
  end
end

-- Take over the server S with gen_server.lua's functions (core: terminate, run,
-- noreply_result, handle_common): returns the dispatcher and serve that replace its
-- first ones (lpvm.dispatcher with this file's call_result).
function G.dispatcher(server, core)
  S = server
  terminate, run, noreply_result = core.terminate, core.run, core.noreply_result
  handle_common = core.handle_common
  dispatch, serve = lpvm.dispatcher(S, traceback, call_result, handle_common)
  return dispatch, serve
end

G.call_result, G.loop = call_result, loop

return G
