-- gen.lua -- what gen_server, gen_statem and supervisor share (OTP's gen and
-- proc_lib), the half every behaviour process needs: init and its acknowledgement,
-- replies, casts. Each process is its own Lua state, so a supervisor's 10,000
-- children load this file 10,000 times: it holds only what a serving process runs.
-- The client half (start, call, stop, module_spec, whereis, DEFAULT_TIMEOUT) is
-- gen_client.lua and the rare server parts (system messages, reports, is_normal)
-- gen_sys.lua, both loaded on first use. Written on the public lpvm module only.
local lpvm = require "lpvm"

local gen = {}

-- In the new process: the callbacks table from the spec (a module name or a table).
function gen.load_module(spec)
  if type(spec) == "string" then
    local m = require(spec)
    if type(m) ~= "table" then error("module '" .. spec .. "' did not return a callback table", 0) end
    return m
  end
  if type(rawget(spec, "init")) ~= "function" then
    error("the callback table has no function 'init' (undef)", 0)
  end
  return spec
end

-- The acknowledgement to the starter: (parent, tag, "ok") or (parent, tag, "error", reason).
gen.ack = lpvm.send

-- In the new process: register the name, load the callbacks, run init(args). Returns
-- the module and init's results {true, "ok", ...} when init said "ok" (the caller
-- acknowledges once it is ready); otherwise (gen_sys.init_failed) tells the starter
-- and ends the process as OTP does.
function gen.init(parent, tag, name, spec, args)
  if name and not lpvm.register(name) then
    require("gen_sys").init_failed(parent, tag, "already_started", name)
  end
  local ok, mod = pcall(gen.load_module, spec)
  if not ok then require("gen_sys").init_failed(parent, tag, "load", mod) end
  local r = { xpcall(mod.init, gen.traceback, args) }   -- no table library needed
  if r[1] and r[2] == "ok" then return mod, r end
  require("gen_sys").init_failed(parent, tag, "init", r)
end

-- reply(from, value): answer a call (from = {pid, ref}, as handle_call got it).
function gen.reply(from, value)
  if type(from) ~= "table" or from[2] == nil then
    error("bad argument #1 to 'reply' (from table {pid, ref} expected, got " .. type(from) .. ")", 2)
  end
  lpvm.send_alias(from[1], from[2], value)
  return true
end

-- cast and reply, which a server's callbacks use too, now; start, start_link, call,
-- stop (and gen_server's abcast, multi_call) from gen_client.lua on first use.
function gen.client_api(M, behaviour)
  local n_cast = behaviour .. ".cast"
  function M.cast(server, request)
    local t = type(server)
    if t == "string" then server = lpvm.whereis(server)
    elseif t ~= "userdata" and not (t == "table" and type(server[1]) == "string") then
      error("bad argument #1 to '" .. n_cast .. "' (pid, name or {name, node} expected, got "
        .. t .. ")", 2)
    end
    if server then lpvm.send(server, "$gen_cast", request) end
    return true
  end
  M.reply = gen.reply
  return setmetatable(M, { __index = function(t, k)
    return require("gen_client").client_fn(t, behaviour, k)
  end })
end

-- xpcall handler: a string error gets its traceback, another value stays itself.
function gen.traceback(e)
  if type(e) == "string" or type(e) == "number" then return debug.traceback(tostring(e), 2) end
  return e
end

-- gen.start, gen.call, gen.stop, gen.check_timeout, gen.module_spec, gen.whereis,
-- gen.DEFAULT_TIMEOUT: from gen_client.lua, on first use (looked up each time it is
-- missing: a new version of this module drops them). gen_sys.lua has is_normal and
-- the other rare parts of a behaviour process.
return setmetatable(gen, { __index = function(t, k)
  local v = require("gen_client")[k]
  if v ~= nil then rawset(t, k, v) end
  return v
end })
