-- lpvm.code -- hot code loading, as Erlang's `code` module (docs/code.md).
--
-- The code server itself is C (vm/lcode.c, required here as "lpvm.codeserver"):
-- it keeps each module's current and old version, and every process brings its
-- modules to the current version at its next safe point. This file is the API.
local cs = require "lpvm.codeserver"
local lpvm = require "lpvm"

local code = {}

-- The module name is argument `argn` (default 1) of `fname`. A NUL byte is refused as
-- in every other name lpvm takes (it was a module of its own, "a\0b").
local function check_name(fname, module, argn)
  if type(module) ~= "string" or module == "" then
    error(string.format("bad argument #%d to '%s' (module name expected, got %s)",
                        argn or 1, fname, module == "" and "empty string" or type(module)), 3)
  end
  if module:find("\0", 1, true) then
    error(string.format("bad argument #%d to '%s' (module name must not contain a NUL byte)",
                        argn or 1, fname), 3)
  end
end

local function read(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local src = f:read("a")
  f:close()
  return src
end

-- Where the module's source is: the file it was loaded from, else package.path.
local function find_path(module)
  local i = cs.info(module)
  if i and i.path and i.path ~= module then return i.path end
  return package.searchpath(module, package.path)
end

-- load(module [, source [, mode]]) -> version | nil, reason
-- Compiles first: a syntax error changes nothing and returns nil, message. With
-- old code still there (not purged) it returns nil, "not_purged", as Erlang does.
-- A source string is text only unless mode (Lua load's: "t", "b" or "bt") allows
-- bytecode, which Lua does not verify (a crafted chunk can crash the VM). A module
-- read from its file is loaded as require loads it (text or bytecode, as lua5.4's).
function code.load(module, source, mode)
  check_name("load", module)
  if source ~= nil and type(source) ~= "string" then
    error("bad argument #2 to 'load' (string expected, got " .. type(source) .. ")", 2)
  end
  if mode ~= nil and (type(mode) ~= "string" or mode == "" or mode:find("[^bt]")) then
    error("bad argument #3 to 'load' (mode \"t\", \"b\" or \"bt\" expected)", 2)
  end
  local path, from_file = find_path(module), false
  if source == nil then
    if not path then return nil, "non_existing" end
    local err
    source, err = read(path)
    if not source then return nil, err end
    from_file = true
  end
  if from_file then mode = "bt" end
  mode = mode or "t"
  local fn, err = load(source, path and ("@" .. path) or ("=" .. module), mode)
  if not fn then
    if err:find("^attempt to load a") then   -- the mode's refusal: name the chunk
      err = (path or module) .. ": " .. err
    end
    return nil, err
  end
  local vsn, why = cs.load(module, source, path, from_file, mode:find("b", 1, true) ~= nil)
  if not vsn then return nil, why end
  cs.sync()   -- the caller's own modules: at once
  return vsn
end

-- is_loaded(module) -> version | false
function code.is_loaded(module)
  check_name("is_loaded", module)
  local i = cs.info(module)
  return i and i.version > 0 and i.version or false
end

-- which(module) -> path | nil, "non_existing"
function code.which(module)
  check_name("which", module)
  local path = find_path(module)
  if path then return path end
  return nil, "non_existing"
end

-- all_loaded() -> { {module=, version=, old_version=, path=}, ... } by name
function code.all_loaded()
  local out = {}
  for _, name in ipairs(cs.names()) do
    local i = cs.info(name)
    if i and i.version > 0 then
      out[#out + 1] = { module = name, version = i.version,
                        old_version = i.old_version > 0 and i.old_version or nil,
                        path = i.path }
    end
  end
  table.sort(out, function(a, b) return a.module < b.module end)
  return out
end

-- check_process(pid, module) -> true if the process runs old code of module (a
-- function of the old version is on its stack) | false | nil, "noproc"
function code.check_process(pid, module)
  check_name("check_process", module, 2)
  local ok, info, err = pcall(lpvm.info, pid)
  if not ok then   -- not a pid: named here, not as lpvm.info's argument inside this file
    error(string.format("bad argument #1 to 'check_process' (pid expected, got %s)",
                        type(pid)), 2)
  end
  if not info then return nil, err end
  for _, m in ipairs(info.old_code or {}) do
    if m == module then return true end
  end
  return false
end

-- Drop a monitor and a DOWN of it already queued.
local function forget(mref) lpvm.demonitor(mref, "flush") end

-- Every other process running old code of module, and those that did not answer
-- within ANSWER_MS (a task stuck in C code). All are asked at once; a process that
-- dies before answering (its DOWN) runs nothing.
local ANSWER_MS = 5000
local function old_users(module)
  local me, users, pending, n = lpvm.self(), {}, {}, 0
  for _, pid in ipairs(lpvm.processes()) do
    if pid ~= me then
      local mref = lpvm.monitor(pid)
      local ref = cs.ask_info(pid)
      if ref then
        local ask = { pid = pid, mref = mref, ref = ref }
        pending[ref], pending[mref], n = ask, ask, n + 1
      else
        forget(mref)
      end
    end
  end
  local function wanted(tag, ref) return (tag == "info" or tag == "DOWN") and pending[ref] end
  local deadline = lpvm.now() + ANSWER_MS
  while n > 0 do
    local tag, ref, map = lpvm.receive(wanted, math.max(0, deadline - lpvm.now()))
    if tag == nil then break end   -- the rest did not answer in time
    local ask = pending[ref]
    pending[ask.ref], pending[ask.mref], n = nil, nil, n - 1
    if tag == "info" then
      forget(ask.mref)
      for _, m in ipairs(map.old_code or {}) do
        if m == module then users[#users + 1] = ask.pid end
      end
    end
  end
  local silent = {}
  for ref, ask in pairs(pending) do
    if ref == ask.ref then
      silent[#silent + 1] = ask.pid
      forget(ask.mref)
    end
  end
  return users, silent
end

-- purge(module) -> true if processes were killed | false; the killed pids second.
-- Kills every process running old code of module, then removes the old code. (A
-- process that does not answer within 5 s cannot be told: it is left alone.)
function code.purge(module)
  check_name("purge", module)
  local i = cs.info(module)
  if not i or i.old_version == 0 then return false, {} end
  local users = old_users(module)
  for _, pid in ipairs(users) do lpvm.exit(pid, "kill") end
  cs.drop_old(module)
  return #users > 0, users
end

-- soft_purge(module) -> true (old code removed, or none) | false, pids still running
-- it (and any that did not answer in time)
function code.soft_purge(module)
  check_name("soft_purge", module)
  local i = cs.info(module)
  if not i or i.old_version == 0 then return true end
  local users, silent = old_users(module)
  for _, pid in ipairs(silent) do users[#users + 1] = pid end
  if #users > 0 then return false, users end
  cs.drop_old(module)
  return true
end

-- delete(module) -> true: the current version becomes old (no current one); false
-- if old code is still there. Processes that required it keep what they have.
function code.delete(module)
  check_name("delete", module)
  return cs.delete(module)
end

-- modified() -> names of loaded modules whose file changed on disk since loading
function code.modified()
  local out = {}
  for _, name in ipairs(cs.names()) do
    if cs.modified(name) then out[#out + 1] = name end
  end
  table.sort(out)
  return out
end

-- reload_changed() -> { [module] = version | error message } for development:
-- purges (killing what runs old code, as the Erlang shell's l(M) does) and loads
-- every modified module.
function code.reload_changed()
  local out = {}
  for _, name in ipairs(code.modified()) do
    code.purge(name)
    local vsn, err = code.load(name)
    out[name] = vsn or err
  end
  return out
end

return code
