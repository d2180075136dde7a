-- otp_kv.lua -- a gen_server callback module for test_gen_server.lua.
local lpvm = require "lpvm"
local gen_server = require "gen_server"
local kv = {}

function kv.init(args)
  args = args or {}
  if args.fail then error("init failed on purpose") end
  if args.stop then return "stop", args.stop end
  if args.ignore then return "ignore" end
  if args.sleep then lpvm.sleep(args.sleep) end
  if args.trap then lpvm.trap_exit(true) end
  local state = { data = {}, parent = args.parent, pending = {}, slow_terminate = args.slow_terminate }
  if args.timeout then return "ok", state, args.timeout end
  return "ok", state
end

function kv.handle_call(req, from, state)
  local op = req[1]
  if op == "get" then return "reply", state.data[req[2]], state
  elseif op == "put" then state.data[req[2]] = req[3]; return "reply", true, state
  elseif op == "slow" then lpvm.sleep(req[2]); return "reply", "slow done", state
  elseif op == "defer" then state.pending[#state.pending + 1] = from; return "noreply", state
  elseif op == "release" then
    for _, f in ipairs(state.pending) do gen_server.reply(f, req[2]) end
    state.pending = {}
    return "reply", "released", state
  elseif op == "crash" then error("handle_call crashed")
  elseif op == "stop" then return "stop", req[2], "stopping", state
  elseif op == "stop_noreply" then return "stop", req[2], state
  elseif op == "hibernate" then return "reply", collectgarbage("count"), state, "hibernate"
  elseif op == "timeout" then return "reply", true, state, req[2]
  elseif op == "continue" then return "reply", true, state, { continue = req[2] }
  elseif op == "bad" then return "what"
  elseif op == "self" then return "reply", lpvm.self(), state
  elseif op == "call_self" then return "reply", gen_server.call(lpvm.self(), { "get", 1 }), state
  end
  return "reply", { "unknown", op }, state
end

function kv.handle_cast(req, state)
  if req[1] == "put" then state.data[req[2]] = req[3]; return "noreply", state end
  if req[1] == "stop" then return "stop", req[2], state end
  return "noreply", state
end

function kv.handle_info(msg, state)
  if state.parent then lpvm.send(state.parent, "info", msg) end
  return "noreply", state
end

function kv.handle_continue(arg, state)
  if state.parent then lpvm.send(state.parent, "continued", arg) end
  return "noreply", state
end

function kv.terminate(reason, state)
  if state.slow_terminate then lpvm.sleep(state.slow_terminate) end   -- a window for a reply too early
  if state.parent then lpvm.send(state.parent, "terminated", reason) end
end

function kv.format_status(status)
  status.state = { size = #status.state.pending }
  return status
end

return kv
