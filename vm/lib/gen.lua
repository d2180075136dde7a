-- gen.lua -- what gen_server, gen_statem and supervisor share (OTP's gen and
-- proc_lib): starting a behaviour process synchronously, the call protocol, replies
-- and stop. Written on the public lpvm module only.
--
-- Start: the starter makes a tag, spawns the behaviour's module (its `main` runs in
-- the new process) monitored (and linked for start_link), and waits for the tag's
-- acknowledgement or the DOWN: init's result comes back as pid, or nil and a reason.
--
-- Call: the caller monitors the server with an alias (one reference for the reply
-- and the DOWN), sends {"$gen_call", caller, ref, request} and waits for the ref
-- (lpvm.call, in C); the server answers with send_alias, so a reply that comes after
-- the caller gave up (timeout) is dropped unseen instead of landing in its mailbox.
local lpvm = require "lpvm"

local gen = {}

gen.DEFAULT_TIMEOUT = 5000

local spawn_keys = { priority = true, thread = true, max_heap = true }
local start_keys = { name = true, timeout = true, spawn_opt = true }

-- A timeout argument: nil -> dflt; math.huge is for ever; else a number >= 0.
function gen.check_timeout(v, arg, fname, dflt)
  if v == nil then return dflt end
  if type(v) ~= "number" or v ~= v or v < 0 then
    error(string.format("bad argument #%d to '%s' (timeout in ms >= 0 or math.huge expected, got %s)",
      arg, fname, type(v) == "number" and tostring(v) or type(v)), 3)
  end
  return v
end

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

-- Check a start options table; returns the spawn options table and the name.
local function start_opts(opts, fname)
  if opts == nil then return {}, nil, nil end
  if type(opts) ~= "table" then
    error(string.format("bad argument #3 to '%s' (options table expected, got %s)", fname, type(opts)), 4)
  end
  local so = {}
  for k, v in pairs(opts) do
    if spawn_keys[k] then so[k] = v
    elseif not start_keys[k] then
      error(string.format("bad argument #3 to '%s' (unknown option '%s')", fname, tostring(k)), 4)
    end
  end
  if type(opts.spawn_opt) == "table" then
    for k, v in pairs(opts.spawn_opt) do so[k] = v end
  end
  local name = opts.name
  if name ~= nil and type(name) ~= "string" then
    error(string.format("bad argument #3 to '%s' (option 'name' must be a string)", fname), 4)
  end
  return so, name, gen.check_timeout(opts.timeout, 3, fname, math.huge)
end

-- Drop the EXIT a linked child that failed to start left (when trapping exits).
local function flush_exit(pid)
  if lpvm.trap_exit() then
    lpvm.receive(function(tag, from) return tag == "EXIT" and from == pid end, 0)
  end
end

-- start(behaviour, link, mod, args, opts, fname) -> pid | nil, reason [, pid]
-- `behaviour` is the module whose main(parent, tag, name, ...) runs in the process.
function gen.start(behaviour, link, mod, args, opts, fname)
  local spec = gen.module_spec(mod, fname)
  local so, name, timeout = start_opts(opts, fname)
  so.monitor = true
  so.link = link or nil
  local tag = lpvm.make_ref()
  local ok, pid, mref = pcall(lpvm.spawn, so, behaviour, lpvm.self(), tag, name or false, spec, args)
  if not ok then
    if type(spec) == "table" then
      error(string.format("%s: the callback table is no module and cannot be sent to the new "
        .. "process (%s): put it in a module file", fname, tostring(pid)), 3)
    end
    error(string.format("%s: %s", fname, tostring(pid)), 3)
  end
  if not pid then return nil, mref end
  local r = table.pack(lpvm.receive(function(a, b) return a == tag or (a == "DOWN" and b == mref) end,
    timeout))
  if r[1] == tag then
    lpvm.demonitor(mref, "flush")
    if r[2] == "ok" then return pid end
    -- init said stop or ignore: the process is ending by itself
    if link then
      lpvm.unlink(pid)
      flush_exit(pid)
    end
    return nil, r[3], r[4]
  elseif r[1] == "DOWN" then
    if link then flush_exit(pid) end
    return nil, r[5]
  end
  -- timed out: OTP kills the half-started process
  if link then lpvm.unlink(pid) end
  lpvm.exit(pid, "kill")
  lpvm.demonitor(mref, "flush")
  return nil, "timeout"
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

local function check_server(server, fname)
  local t = type(server)
  if t ~= "string" and t ~= "userdata" then
    error(string.format("bad argument #1 to '%s' (pid or name expected, got %s)", fname, t), 3)
  end
end

-- call(server, label, request, timeout) -> the reply's value; raises the reason
-- (noproc, calling_self, timeout, or the exit reason of a server that died).
-- lpvm.call does the whole protocol in C (vm/lmod_call.c).
local lpvm_call = lpvm.call
function gen.call(server, label, request, timeout, fname)
  local t = type(server)
  if t ~= "string" and t ~= "userdata" then check_server(server, fname) end
  if timeout == nil then timeout = gen.DEFAULT_TIMEOUT
  else timeout = gen.check_timeout(timeout, 3, fname) end
  return (lpvm_call(server, label, request, timeout))
end

-- reply(from, ...): answer a call (from = {pid, ref}, as handle_call got it).
function gen.reply(from, ...)
  if type(from) ~= "table" or from[2] == nil then
    error("bad argument #1 to 'reply' (from table {pid, ref} expected, got " .. type(from) .. ")", 2)
  end
  lpvm.send_alias(from[1], from[2], ...)
  return true
end

-- Two reasons alike: equal, or tables with alike contents (a reason comes back from
-- a DOWN as a copy).
local function same(a, b)
  if a == b then return true end
  if type(a) ~= "table" or type(b) ~= "table" then return false end
  for k, v in pairs(a) do if not same(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

-- stop(server, reason, timeout): ask the process to terminate with reason and wait
-- until it has; raises noproc, timeout, or the other reason it ended with.
function gen.stop(server, reason, timeout, fname)
  check_server(server, fname)
  timeout = gen.check_timeout(timeout, 3, fname, math.huge)
  if reason == nil then reason = "normal" end
  local pid = gen.whereis(server)
  if not pid then error("noproc", 0) end
  local ref = lpvm.monitor(pid)
  lpvm.send(pid, "$gen_stop", reason)
  local a, _, _, _, why = lpvm.receive_ref(ref, timeout)
  if a == nil then
    lpvm.demonitor(ref, "flush")
    error("timeout", 0)
  end
  if same(why, reason) then return true end
  error(why, 0)
end

-- The client functions every behaviour has (its process speaks the same protocol):
-- start, start_link, call, cast, reply, stop, named "<behaviour>.<fn>" in errors.
function gen.client_api(M, behaviour)
  local n_start, n_link = behaviour .. ".start", behaviour .. ".start_link"
  local n_call, n_stop = behaviour .. ".call", behaviour .. ".stop"
  local call = gen.call
  function M.start(mod, args, opts)
    return gen.start(behaviour, false, mod, args, opts, n_start)
  end
  function M.start_link(mod, args, opts)
    return gen.start(behaviour, true, mod, args, opts, n_link)
  end
  function M.call(server, request, timeout)
    return call(server, "$gen_call", request, timeout, n_call)
  end
  function M.cast(server, request)
    local pid = gen.whereis(server)
    if pid then lpvm.send(pid, "$gen_cast", request) end
    return true
  end
  function M.reply(from, value) return gen.reply(from, value) end
  function M.stop(server, reason, timeout)
    return gen.stop(server, reason, timeout, n_stop)
  end
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

return gen
