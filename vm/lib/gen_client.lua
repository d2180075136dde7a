-- gen_client.lua -- the client half of gen.lua (OTP's gen): starting a behaviour
-- process synchronously, call and stop. A process that only serves (a gen_server
-- child of a supervisor, say) never loads it: gen.lua's metatable loads it the first
-- time one of its functions is looked up (gen.start, gen.call, gen.stop,
-- gen.check_timeout, gen.module_spec, gen.whereis, gen.DEFAULT_TIMEOUT), and a
-- behaviour module's start/start_link/call/stop (gen_server's abcast, multi_call)
-- likewise.
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
local gen = require "gen"

local C = {}

C.DEFAULT_TIMEOUT = 5000

-- The callbacks as something that can reach the new process: a module name stays a
-- name; a table loaded as a module travels by its name; any other table travels as
-- a value (it must then be able to: plain data and, where lpvm sends closures, code).
function C.module_spec(mod, fname)
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

-- The pid behind a server reference (pid or registered name), or nil.
function C.whereis(server)
  if type(server) == "string" then return lpvm.whereis(server) end
  return server
end

local spawn_keys = { priority = true, thread = true, max_heap = true }
local start_keys = { name = true, timeout = true, spawn_opt = true }

-- A timeout argument: nil -> dflt; math.huge is for ever; else a number >= 0.
function C.check_timeout(v, arg, fname, dflt)
  if v == nil then return dflt end
  if type(v) ~= "number" or v ~= v or v < 0 then
    error(string.format("bad argument #%d to '%s' (timeout in ms >= 0 or math.huge expected, got %s)",
      arg, fname, type(v) == "number" and tostring(v) or type(v)), 3)
  end
  return v
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
  return so, name, C.check_timeout(opts.timeout, 3, fname, math.huge)
end

-- Drop the EXIT a linked child that failed to start left (when trapping exits).
local function flush_exit(pid)
  if lpvm.trap_exit() then
    lpvm.receive(function(tag, from) return tag == "EXIT" and from == pid end, 0)
  end
end

-- start(behaviour, link, mod, args, opts, fname) -> pid | nil, reason [, pid]
-- `behaviour` is the module whose main(parent, tag, name, ...) runs in the process.
function C.start(behaviour, link, mod, args, opts, fname)
  local spec = C.module_spec(mod, fname)
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

function C.check_server(server, fname)
  local t = type(server)
  if t ~= "string" and t ~= "userdata" then
    error(string.format("bad argument #1 to '%s' (pid or name expected, got %s)", fname, t), 3)
  end
end

-- call(server, label, request, timeout) -> the reply's value; raises the reason
-- (noproc, calling_self, timeout, or the exit reason of a server that died).
-- lpvm.call does the whole protocol in C (vm/lmod_call.c).
local lpvm_call = lpvm.call
function C.call(server, label, request, timeout, fname)
  local t = type(server)
  if t ~= "string" and t ~= "userdata" then C.check_server(server, fname) end
  if timeout == nil then timeout = C.DEFAULT_TIMEOUT
  else timeout = C.check_timeout(timeout, 3, fname) end
  return (lpvm_call(server, label, request, timeout))
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
function C.stop(server, reason, timeout, fname)
  C.check_server(server, fname)
  timeout = C.check_timeout(timeout, 3, fname, math.huge)
  if reason == nil then reason = "normal" end
  local pid = C.whereis(server)
  if not pid then error("noproc", 0) end
  -- as OTP: a process cannot wait for its own end
  if pid == lpvm.self() then error("calling_self", 0) end
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

-- abcast's and multi_call's names: a list of registered names.
local function check_names(names, fname)
  if type(names) ~= "table" then
    error(string.format("bad argument #1 to '%s' (list of names expected, got %s)", fname,
      type(names)), 3)
  end
  for i, n in ipairs(names) do
    if type(n) ~= "string" then
      error(string.format("bad argument #1 to '%s' (name expected at index %d, got %s)", fname,
        i, type(n)), 3)
    end
  end
end

-- M[k] for a behaviour's module M that has no k (gen.client_api's metatable): a client
-- function installs them all first.
local CLIENT = { start = true, start_link = true, call = true, stop = true, abcast = true,
                 multi_call = true }
function C.client_fn(M, behaviour, k)
  if not CLIENT[k] then return nil end
  C.install_client(M, behaviour)
  return rawget(M, k)
end

-- The client functions of a behaviour's module M (gen.client_api makes them appear on
-- first use): start, start_link, call, stop, named "<behaviour>.<fn>" in errors;
-- gen_server's also abcast and multi_call.
function C.install_client(M, behaviour)
  local n_start, n_link = behaviour .. ".start", behaviour .. ".start_link"
  local n_call, n_stop = behaviour .. ".call", behaviour .. ".stop"
  rawset(M, "start", function(mod, args, opts)
    return C.start(behaviour, false, mod, args, opts, n_start)
  end)
  rawset(M, "start_link", function(mod, args, opts)
    return C.start(behaviour, true, mod, args, opts, n_link)
  end)
  -- C.call as one C function (vm/lmod_call.c); DEFAULT_TIMEOUT is read now
  rawset(M, "call", lpvm.caller("$gen_call", n_call, C.DEFAULT_TIMEOUT))
  rawset(M, "stop", function(server, reason, timeout)
    return C.stop(server, reason, timeout, n_stop)
  end)
  if behaviour == "gen_server" then
    -- abcast(names, request): cast to each registered name (this node only).
    rawset(M, "abcast", function(names, request)
      check_names(names, "gen_server.abcast")
      for _, n in ipairs(names) do M.cast(n, request) end
      return true
    end)
    -- multi_call(names, request [, timeout]) -> replies {name = reply}, bad {name, ...}
    -- (this node only: every name is called, each within the timeout).
    rawset(M, "multi_call", function(names, request, timeout)
      check_names(names, "gen_server.multi_call")
      C.check_timeout(timeout, 3, "gen_server.multi_call")
      local replies, bad = {}, {}
      for _, n in ipairs(names) do
        local ok, r = pcall(M.call, n, request, timeout)
        if ok then replies[n] = r else bad[#bad + 1] = n end
      end
      return replies, bad
    end)
  end
end

return C
