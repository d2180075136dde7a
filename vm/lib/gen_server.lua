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

-- ---- the client API -------------------------------------------------------------

-- start, start_link, call, cast, reply, stop (gen.lua: the same for gen_statem):
--   start(mod, args [, opts]) / start_link(...) -> pid | nil, reason
--   call(server, request [, timeout_ms = 5000]) -> reply
--   cast(server, request) -> true (a dead or unknown server loses it)
--   reply(from, reply): a deferred reply to a handle_call that returned "noreply"
--   stop(server [, reason = "normal" [, timeout_ms = math.huge]]) -> true
--   abcast(names, request) -> true: cast to each registered name (this node only)
--   multi_call(names, request [, timeout]) -> replies {name = reply}, bad {name, ...}
-- All but cast and reply appear on first use (gen_client.lua): a server process that
-- never calls loads none of them.
gen.client_api(M, "gen_server")

-- ---- the server process -----------------------------------------------------------
-- Each process is its own Lua state, and a supervisor starts its children by the
-- thousand: what servers run all the time is here (init; calls, which lpvm.dispatcher
-- serves in C when handle_call returns "reply"; casts, infos, stop); the rest (other
-- call results, actions: timeouts, hibernate, continue) is gen_server_loop.lua, loaded
-- by the first result or action that needs it, which then runs the loop.

local S = {}        -- the running server: mod, state, parent, name (one per process)
local dispatch, serve   -- lpvm.dispatcher(S, ...), made in M.main; serve() is dispatch(receive())
local rest          -- gen_server_loop.lua, once loaded

-- reply_pid, reply_ref, reply: a handle_call's {"stop", reason, reply, state}, answered
-- after terminate has run, as OTP does (the caller sees terminate's effects).
local function terminate(reason, reply_pid, reply_ref, reply)
  local f = S.mod.terminate
  if f then
    local ok, err = xpcall(f, gen.traceback, reason, S.state)
    if not ok then reason = err end   -- an error in terminate replaces the reason
  end
  local rare = require "gen_sys"
  if not rare.is_normal(reason) then rare.report_terminate("gen_server", S, reason) end
  if reply_pid then lpvm.send_alias(reply_pid, reply_ref, reply) end
  lpvm.exit(reason)
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
  terminate(require("gen_sys").bad_return(what, verb, a, b, ...))
end

-- One message other than a call (n values): returns the next action.
local function handle_common(n, tag, a, b, c, ...)
  if tag == "$gen_cast" and n == 2 then
    local f = S.mod.handle_cast
    if f == nil then terminate("the callback table has no function 'handle_cast' (undef)") end
    return noreply_result("handle_cast", run(xpcall(f, gen.traceback, a, S.state)))
  elseif tag == "$gen_stop" and n == 2 then
    terminate(a)
  elseif tag == "$gen_system" and n == 4 then   -- sys.lua's requests: gen_sys.lua
    return require("gen_sys").system(S, a, b, c)
  elseif tag == "EXIT" and n == 3 and a == S.parent then
    terminate(b)                       -- trapping exits: the parent's end is ours
  end
  local msg = tag
  if n ~= 1 then msg = { tag, a, b, c, ... } end
  local f = S.mod.handle_info
  if not f then return require("gen_sys").dropped(S, msg) end
  return noreply_result("handle_info", run(xpcall(f, gen.traceback, msg, S.state)))
end

local function full()
  if not rest then
    rest = require "gen_server_loop"
    dispatch, serve = rest.dispatcher(S, { terminate = terminate, run = run,
                                           noreply_result = noreply_result,
                                           handle_common = handle_common })
  end
  return rest
end

-- Messages until a result or action needs gen_server_loop.lua, which keeps the loop.
local function loop(action)
  while action == nil do action = serve() end
  return full().loop(action)
end

-- The new process: main(parent, tag, name, spec, args).
function M.main(parent, tag, name, spec, args)
  local mod, r = gen.init(parent, tag, name, spec, args)
  S.mod, S.name, S.parent, S.state = mod, name, parent, r[3]
  dispatch, serve = lpvm.dispatcher(S, gen.traceback,
    function(...) return full().call_result(...) end, handle_common)
  gen.ack(parent, tag, "ok")
  return loop(r[4])
end

return M
