-- gen.lua -- what gen_server, gen_statem and supervisor share (OTP's gen and
-- proc_lib), the half a behaviour process needs: init and its acknowledgement,
-- replies, reports. The client half (start, call, stop) is gen_client.lua, loaded on
-- first use: every process of a behaviour loads this file, and a supervisor's
-- 10,000 children that only serve load less (each process is its own Lua state).
-- Written on the public lpvm module only.
local lpvm = require "lpvm"

local gen = {}

gen.DEFAULT_TIMEOUT = 5000

-- The callbacks as something that can reach the new process: a module name stays a
-- name; a table loaded as a module travels by its name; any other table travels as
-- a value (it must then be able to: plain data and, where lpvm sends closures, code).
function gen.module_spec(mod, fname)
  local t = type(mod)
  if t == "string" then return mod end
  if t ~= "table" then
    error(string.format("bad argument #1 to '%s' (module name or callback table expected, got %s)",
      fname, t), 3)
  end
  for name, v in pairs(package.loaded) do
    if v == mod and type(name) == "string" then return name end
  end
  return mod
end

-- In the new process: the callbacks table from the spec.
function gen.load_module(spec)
  if type(spec) == "string" then
    local m = require(spec)
    if type(m) ~= "table" then error("module '" .. spec .. "' did not return a callback table", 0) end
    return m
  end
  return spec
end

-- In the new process, before init: register the name (or tell the starter it is
-- taken). Returns true to go on.
function gen.register(parent, tag, name)
  if not name then return true end
  if lpvm.register(name) then return true end
  lpvm.send(parent, tag, "error", "already_started", lpvm.whereis(name))
  return false
end

function gen.ack(parent, tag, ...)
  lpvm.send(parent, tag, ...)
end

-- In the new process: register, load the callbacks, run init(args). Returns the
-- module and init's packed results when init said "ok" (the caller acknowledges once
-- it is ready); otherwise tells the starter and ends the process as OTP does.
function gen.init(parent, tag, name, spec, args)
  if not gen.register(parent, tag, name) then lpvm.exit("normal") end
  local ok, mod = pcall(gen.load_module, spec)
  if not ok then
    gen.ack(parent, tag, "error", mod)
    lpvm.exit(mod)
  end
  local r = table.pack(xpcall(mod.init, gen.traceback, args))
  if not r[1] then
    gen.ack(parent, tag, "error", r[2])
    lpvm.exit(r[2])
  end
  if r[2] == "ok" then return mod, r end
  local reason = r[2] == "stop" and r[3] or r[2] == "ignore" and "ignore"
      or { "bad_return_value", "init", tostring(r[2]) }
  -- as OTP 26's init_fail: the starter gets nil, reason, not an exit signal
  lpvm.unlink(parent)
  gen.ack(parent, tag, "error", reason)
  lpvm.exit(reason == "ignore" and "normal" or reason)
end

-- The pid behind a server reference (pid or registered name), or nil.
function gen.whereis(server)
  if type(server) == "string" then return lpvm.whereis(server) end
  return server
end

-- reply(from, ...): answer a call (from = {pid, ref}, as handle_call got it).
function gen.reply(from, ...)
  if type(from) ~= "table" or from[2] == nil then
    error("bad argument #1 to 'reply' (from table {pid, ref} expected, got " .. type(from) .. ")", 2)
  end
  lpvm.send_alias(from[1], from[2], ...)
  return true
end

-- cast and reply, which a server's callbacks use too, now; start, start_link, call
-- and stop (gen_client.lua) on first use.
local CLIENT = { start = true, start_link = true, call = true, stop = true }
function gen.client_api(M, behaviour)
  function M.cast(server, request)
    local pid = gen.whereis(server)
    if pid then lpvm.send(pid, "$gen_cast", request) end
    return true
  end
  function M.reply(from, value) return gen.reply(from, value) end
  return setmetatable(M, { __index = function(t, k)
    if not CLIENT[k] then return nil end
    require("gen_client").install_client(t, behaviour)
    return rawget(t, k)
  end })
end

-- A reason that is not worth a report: normal, shutdown, {"shutdown", _}.
function gen.is_normal(reason)
  return reason == "normal" or reason == "shutdown"
      or (type(reason) == "table" and reason[1] == "shutdown")
end

-- The error report of a behaviour process terminating abnormally (OTP's "Generic
-- server terminating"): its reason and its state, as format_status shows it.
function gen.report_terminate(kind, S, reason)
  local logger = require "logger"
  if not logger.allow("error") then return end
  local status = { state = S.state, reason = reason }
  if S.mod and S.mod.format_status then
    local ok, st = pcall(S.mod.format_status, status)
    if ok and type(st) == "table" then status = st end
  end
  local why = status.reason
  logger.error("%s %s terminating\nreason: %s\nstate: %s", kind,
    S.name and (S.name .. " " .. tostring(lpvm.self())) or tostring(lpvm.self()),
    type(why) == "string" and why or lpvm.format(why), lpvm.format(status.state))
end

-- xpcall handler: a string error gets its traceback, another value stays itself.
function gen.traceback(e)
  if type(e) == "string" or type(e) == "number" then return debug.traceback(tostring(e), 2) end
  return e
end

-- gen.start, gen.call, gen.stop, gen.check_timeout: from gen_client.lua, on first use
-- (looked up each time it is missing: a new version of this module drops them).
return setmetatable(gen, { __index = function(t, k)
  local v = require("gen_client")[k]
  if v ~= nil then rawset(t, k, v) end
  return v
end })
