-- supervisor.lua -- OTP's supervisor for lpvm (docs/otp.md), a gen_server whose
-- callbacks are in this file, as in OTP.
--
--   supervisor.start_link("my_sup", args [, opts])  -- my_sup.init(args) returns
--       "ok", { strategy = "one_for_one", intensity = 1, period = 5 }, { childspec, ... }
--   supervisor.start_link({ strategy = ..., children = { childspec, ... } } [, nil, opts])
--
-- childspec: { id = any, start = { module, fn, args... } | function,
--              restart = "permanent" | "transient" | "temporary",
--              shutdown = ms | "brutal_kill" | "infinity", type = "worker" | "supervisor" }
-- A start function runs in the supervisor and returns the pid of a process linked to
-- it (gen_server.start_link does), or nil, reason (nil, "ignore": nothing to run).
local lpvm = require "lpvm"
local gen = require "gen"
local gen_server = require "gen_server"
local logger = require "logger"
local is_normal = require("gen_sys").is_normal

local M = {}

local STRATEGIES = { one_for_one = true, one_for_all = true, rest_for_one = true,
                     simple_one_for_one = true }
local RESTARTS = { permanent = true, transient = true, temporary = true }
local TYPES = { worker = true, supervisor = true }
local AUTO_SHUTDOWN = { never = true, any_significant = true, all_significant = true }

-- ---- the API ------------------------------------------------------------------------

function M.start_link(mod, args, opts)
  if type(mod) ~= "string" and type(mod) ~= "table" then
    error("bad argument #1 to 'supervisor.start_link' (module name or spec table expected, got "
      .. type(mod) .. ")", 2)
  end
  local spec = type(mod) == "string" and mod or gen.module_spec(mod, "supervisor.start_link")
  local name = type(opts) == "table" and opts.name or nil
  local a = { mod = spec, args = args, name = name }
  if type(spec) == "table" and spec.init == nil then   -- a flags+children spec, no module
    a = { spec = spec, name = name }
  end
  return gen.start("gen_server", true, "supervisor", a, opts, "supervisor.start_link")
end

-- Requests go as gen_server calls; the answer is the list {a, b, c} of what the
-- handler returned (pid | nil, reason ...).
local function call(sup, req, fname)
  local t = type(sup)
  if t ~= "string" and t ~= "userdata" then
    error(string.format("bad argument #1 to '%s' (pid or name expected, got %s)", fname, t), 3)
  end
  local r = gen_server.call(sup, req, math.huge)
  if type(r) ~= "table" then   -- a gen_server that is no supervisor
    error({ "bad_reply", fname, r }, 0)
  end
  return table.unpack(r, 1, 3)
end

-- start_child(sup, childspec) -> pid | nil, reason; simple_one_for_one:
-- start_child(sup, {extra args...}) appends the args to the template's.
function M.start_child(sup, spec)
  return call(sup, { "start_child", spec }, "supervisor.start_child")
end
-- terminate_child(sup, id) (simple_one_for_one: pid) -> true | nil, "not_found"
function M.terminate_child(sup, id)
  return call(sup, { "terminate_child", id }, "supervisor.terminate_child")
end
-- restart_child(sup, id) -> pid | nil, "running" | "not_found"
function M.restart_child(sup, id)
  return call(sup, { "restart_child", id }, "supervisor.restart_child")
end
-- delete_child(sup, id) -> true | nil, "running" | "not_found"
function M.delete_child(sup, id)
  return call(sup, { "delete_child", id }, "supervisor.delete_child")
end
-- which_children(sup) -> { {id =, pid = pid | "undefined" | "restarting", type =}, ... }
function M.which_children(sup)
  return call(sup, { "which_children" }, "supervisor.which_children")
end
-- count_children(sup) -> { specs =, active =, supervisors =, workers = }
function M.count_children(sup)
  return call(sup, { "count_children" }, "supervisor.count_children")
end
function M.get_childspec(sup, id)
  return call(sup, { "get_childspec", id }, "supervisor.get_childspec")
end

-- ---- child specs -------------------------------------------------------------------

local function bad_spec(what, ...)
  return nil, { "bad_child_spec", string.format(what, ...) }
end

-- A checked copy of a child spec with defaults, or nil, reason.
-- auto_shutdown: the supervisor's flag, nil when unknown (check_childspecs(specs)).
local function check_child(c, sofo, auto_shutdown)
  if type(c) ~= "table" then return bad_spec("child spec must be a table, got %s", type(c)) end
  local s = { id = c.id, start = c.start, restart = c.restart or "permanent",
              type = c.type or "worker", shutdown = c.shutdown,
              significant = c.significant or false }
  if s.id == nil and not sofo then return bad_spec("missing id") end
  local st = type(s.start)
  if st == "table" then
    if type(s.start[1]) ~= "string" or type(s.start[2]) ~= "string" then
      return bad_spec("start must be {module, function, args...}")
    end
  elseif st ~= "function" then
    return bad_spec("start must be {module, function, args...} or a function, got %s", st)
  end
  if not RESTARTS[s.restart] then return bad_spec("bad restart %s", tostring(s.restart)) end
  if not TYPES[s.type] then return bad_spec("bad type %s", tostring(s.type)) end
  -- significant children (OTP 24's auto_shutdown): never permanent, and only under a
  -- supervisor whose auto_shutdown is not "never"
  if type(s.significant) ~= "boolean" then
    return bad_spec("bad significant %s", tostring(s.significant))
  end
  if s.significant and s.restart == "permanent" then
    return bad_spec("bad combination: restart permanent, significant true")
  end
  if s.significant and auto_shutdown == "never" then
    return bad_spec("bad combination: auto_shutdown never, significant true")
  end
  if s.shutdown == nil then s.shutdown = s.type == "supervisor" and "infinity" or 5000 end
  local sh = s.shutdown
  if not (sh == "brutal_kill" or sh == "infinity" or sh == math.huge
          or (math.type(sh) == "integer" and sh >= 0)) then
    return bad_spec("bad shutdown %s", tostring(sh))
  end
  if sh == math.huge then s.shutdown = "infinity" end
  return s
end

-- Run a child's start function (with extra args for simple_one_for_one).
local function start_fn(c, extra)
  local f, args
  if type(c.start) == "function" then f, args = c.start, {}
  else
    -- a module that cannot be loaded is the start's failure, not the supervisor's:
    -- an error here ended the supervisor and every child it had (OTP catches the
    -- start's exception and answers {error, Reason})
    local ok, mod = pcall(require, c.start[1])
    if not ok then return nil, mod end
    f = type(mod) == "table" and mod[c.start[2]] or nil
    if type(f) ~= "function" then
      return nil, { "undef", c.start[1] .. "." .. c.start[2] }
    end
    args = { table.unpack(c.start, 3) }
  end
  if extra then for _, v in ipairs(extra) do args[#args + 1] = v end end
  local r = table.pack(pcall(f, table.unpack(args)))
  if not r[1] then return nil, r[2] end
  local pid, why = r[2], r[3]
  if pid == nil and why ~= nil then return nil, why end
  -- a bare nil (no reason) or an Erlang habit such as {"ok", pid}: name what came back,
  -- by its contents (it was `failed_to_start_child` with no reason, or `table: 0x...`)
  if type(pid) ~= "userdata" then
    return nil, { "bad_start_return", require("gen_sys").show_values(r, 2, r.n) }
  end
  return pid
end

-- ---- the shutdown protocol ------------------------------------------------------------

-- Stop one child: unlink (dropping an EXIT already here), then brutal_kill = kill at
-- once; ms = exit "shutdown", wait that long for the DOWN, then kill; "infinity" =
-- exit "shutdown" and wait. Returns the reason it ended with.
local function shutdown_child(sup, c)
  local pid = c.pid
  if type(pid) ~= "userdata" then return "normal" end
  local ref = lpvm.monitor(pid)
  lpvm.unlink(pid)
  local early = table.pack(lpvm.receive(function(t, p) return t == "EXIT" and p == pid end, 0))
  local reason
  if early[1] == "EXIT" then
    -- it was already ending: its real reason, not a shutdown
    local _, _, _, _, why = lpvm.receive_ref(ref)
    reason = why
    if reason == "noproc" then reason = early[3] end
  elseif c.shutdown == "brutal_kill" then
    lpvm.exit(pid, "kill")
    reason = select(5, lpvm.receive_ref(ref))
    if reason == "killed" then reason = "shutdown" end
  else
    lpvm.exit(pid, "shutdown")
    local timeout = c.shutdown == "infinity" and math.huge or c.shutdown
    local a, _, _, _, why = lpvm.receive_ref(ref, timeout)
    if a == nil then
      lpvm.exit(pid, "kill")
      why = select(5, lpvm.receive_ref(ref))
    end
    reason = why
  end
  c.pid = "undefined"
  -- OTP's rule: "shutdown" (or the kill of a brutal_kill) is the expected end; any
  -- normal end (normal, shutdown, {shutdown, x}) is fine for a child that is not
  -- permanent; anything else, or a kill after the timeout, is a shutdown_error
  local fine = reason == "shutdown" or (c.restart ~= "permanent" and is_normal(reason))
  if not fine then
    logger.supervisor_report(sup.name or lpvm.self(), "shutdown_error", reason,
      { id = c.id, pid = pid, restart = c.restart, shutdown = c.shutdown, type = c.type })
  end
  return reason
end

-- simple_one_for_one: all children at once, as OTP does (exit "shutdown" to every
-- one, wait for all the DOWNs within the shutdown time, kill the rest).
local function shutdown_dynamic(sup)
  local t = sup.template
  local refs, n = {}, 0
  for pid in pairs(sup.dyn) do
    local ref = lpvm.monitor(pid)
    lpvm.unlink(pid)
    refs[ref] = pid
    n = n + 1
    lpvm.exit(pid, t.shutdown == "brutal_kill" and "kill" or "shutdown")
  end
  local deadline = (t.shutdown ~= "infinity" and t.shutdown ~= "brutal_kill")
      and lpvm.now() + t.shutdown or nil
  local function is_down(tag, r) return tag == "DOWN" and refs[r] ~= nil end
  -- shutdown_error reports as OTP's: one per reason that is not the expected end,
  -- with the number of children that ended so (a kill after the shutdown time is one)
  local expected = t.shutdown == "brutal_kill" and "killed" or "shutdown"
  local bad, order, gone = nil, nil, nil
  local function note(why)
    if why == expected or why == "shutdown" or (t.restart ~= "permanent" and is_normal(why)) then
      return
    end
    local key = type(why) == "string" and why or lpvm.format(why)
    bad, order = bad or {}, order or {}
    if not bad[key] then bad[key] = { why = why, n = 0 }; order[#order + 1] = key end
    bad[key].n = bad[key].n + 1
  end
  while n > 0 do
    local left = deadline and math.max(0, deadline - lpvm.now()) or nil
    local tag, r, _, _, why = lpvm.receive(is_down, left)
    if tag == nil then   -- time is up: kill the rest and wait for them
      for _, pid in pairs(refs) do lpvm.exit(pid, "kill") end
      deadline = nil
    else
      if why == "noproc" then gone = gone or {}; gone[refs[r]] = true
      elseif why ~= expected then note(why) end
      refs[r] = nil
      n = n - 1
    end
  end
  -- their EXITs, if any came before the unlink: a child gone already ended with its own
  while true do
    local tag, p, why = lpvm.receive(function(tag, p) return tag == "EXIT" and sup.dyn[p] ~= nil end, 0)
    if tag == nil then break end
    if gone and gone[p] then note(why) end
  end
  sup.dyn, sup.ndyn = {}, 0
  for _, key in ipairs(order or {}) do
    local b = bad[key]
    logger.supervisor_report(sup.name or lpvm.self(), "shutdown_error", b.why,
      { id = t.id, pid = string.format("(%d children)", b.n), restart = t.restart,
        shutdown = t.shutdown, type = t.type })
  end
end

-- Stop children[from..] in reverse order. For a restart (one_for_all, rest_for_one)
-- the temporary ones among them are forgotten, as OTP does: they are never restarted.
local function terminate_children(sup, from, for_restart)
  if sup.strategy == "simple_one_for_one" then return shutdown_dynamic(sup) end
  for i = #sup.children, from or 1, -1 do
    local c = sup.children[i]
    if type(c.pid) == "userdata" then
      sup.by_pid[c.pid] = nil
      shutdown_child(sup, c)
    end
    if for_restart and c.restart == "temporary" then
      sup.by_id[c.id] = nil
      table.remove(sup.children, i)
    end
  end
end

-- ---- starting and restarting -----------------------------------------------------------

local function start_child_rec(sup, c, extra)
  local pid, why = start_fn(c, extra)
  if pid then
    c.pid = pid
    logger.progress_report(sup.name or lpvm.self(), c)
    return pid
  end
  if why == "ignore" then
    c.pid = "undefined"
    return nil, "ignore"
  end
  logger.supervisor_report(sup.name or lpvm.self(), "start_error", why,
    { id = c.id, pid = "undefined", restart = c.restart, shutdown = c.shutdown, type = c.type })
  return nil, why
end

-- Start children[from..] in order; on a failure stop those just started (reverse)
-- and return nil, reason, the child that failed. A temporary child that answers
-- "ignore" is forgotten (OTP keeps no spec that could never run).
local function start_children(sup, from)
  local i = from or 1
  while i <= #sup.children do
    local c = sup.children[i]
    local pid, why = start_child_rec(sup, c)
    if pid then sup.by_pid[pid] = c
    elseif why ~= "ignore" then
      terminate_children(sup, from)
      return nil, { "failed_to_start_child", c.id, why }, c
    elseif c.restart == "temporary" then
      sup.by_id[c.id] = nil
      table.remove(sup.children, i)
      i = i - 1
    end
    i = i + 1
  end
  return true
end

local function index_of(sup, c)
  for i, x in ipairs(sup.children) do if x == c then return i end end
end

-- Count a restart; false when there were more than `intensity` in `period` seconds.
local function add_restart(sup)
  local now = lpvm.now()
  local window = sup.period * 1000
  local kept = {}
  for _, t in ipairs(sup.restarts) do
    if now - t < window then kept[#kept + 1] = t end
  end
  kept[#kept + 1] = now
  sup.restarts = kept
  return #kept <= sup.intensity
end

local function give_up(sup, c)
  logger.supervisor_report(sup.name or lpvm.self(), "shutdown", "reached_max_restart_intensity", c)
  terminate_children(sup)
  return "stop", "shutdown", sup
end

-- Restart what the strategy says after child c (at index i) ended.
local function restart(sup, c, extra)
  if not add_restart(sup) then return give_up(sup, c) end
  local s = sup.strategy
  local ok, why, failed
  if s == "simple_one_for_one" then
    local pid, w = start_child_rec(sup, c, extra)
    if pid then
      sup.dyn[pid] = extra
      sup.ndyn = sup.ndyn + 1
      return "noreply", sup
    end
    if w == "ignore" then return "noreply", sup end
    ok, why = false, w
  elseif s == "one_for_one" then
    local pid, w = start_child_rec(sup, c)
    if pid or w == "ignore" then
      if pid then sup.by_pid[pid] = c end
      return "noreply", sup
    end
    ok, why = false, w
  else
    local i = index_of(sup, c)
    local from = s == "one_for_all" and 1 or i
    terminate_children(sup, from, true)
    ok, why, failed = start_children(sup, from)
  end
  if ok then return "noreply", sup end
  -- the restart failed: try again (each try counts against the intensity) with the
  -- child that failed to start, marked "restarting" until then: a terminate_child,
  -- restart_child or delete_child in between takes it out of that state, and the
  -- try is then dropped, as in OTP
  failed = failed or c
  if s ~= "simple_one_for_one" then failed.pid = "restarting" end
  lpvm.send(lpvm.self(), "$sup_try_again", failed.id, extra or false)
  return "noreply", sup
end

-- check_childspecs({ childspec, ... }) -> true | nil, reason: what start_link or
-- start_child would say of these specs, without a supervisor (OTP's check_childspecs).
function M.check_childspecs(specs, auto_shutdown)
  if type(specs) ~= "table" then
    error("bad argument #1 to 'supervisor.check_childspecs' (list of child specs expected, got "
      .. type(specs) .. ")", 2)
  end
  if auto_shutdown ~= nil and not AUTO_SHUTDOWN[auto_shutdown] then
    error("bad argument #2 to 'supervisor.check_childspecs' (never, any_significant or "
      .. "all_significant expected, got " .. tostring(auto_shutdown) .. ")", 2)
  end
  local seen = {}
  for _, cs in ipairs(specs) do
    local c, why = check_child(cs, false, auto_shutdown)
    if not c then return nil, why end
    if seen[c.id] then return nil, { "duplicate_child_name", c.id } end
    seen[c.id] = true
  end
  return true
end

-- ---- gen_server callbacks -------------------------------------------------------------------

local function check_flags(f)
  if type(f) ~= "table" then return nil, { "bad_flags", "a table expected" } end
  local s = { strategy = f.strategy or "one_for_one", intensity = f.intensity or 1,
              period = f.period or 5, auto_shutdown = f.auto_shutdown or "never" }
  if not STRATEGIES[s.strategy] then return nil, { "bad_flags", "strategy " .. tostring(s.strategy) } end
  if not AUTO_SHUTDOWN[s.auto_shutdown] then
    return nil, { "bad_flags", "auto_shutdown " .. tostring(s.auto_shutdown) }
  end
  if math.type(s.intensity) ~= "integer" or s.intensity < 0 then
    return nil, { "bad_flags", "intensity must be an integer >= 0" }
  end
  if type(s.period) ~= "number" or s.period <= 0 then
    return nil, { "bad_flags", "period must be a number of seconds > 0" }
  end
  return s
end

function M.init(a)
  lpvm.trap_exit(true)
  local flags, specs
  if a.spec then
    flags, specs = a.spec, a.spec.children or {}
  else
    local mod = gen.load_module(a.mod)
    local r = table.pack(mod.init(a.args))
    local verb = r[1]
    flags, specs = r[2], r[3]
    if verb == "ignore" then return "ignore" end
    if verb ~= "ok" then
      return "stop", { "bad_return", "init", require("gen_sys").show_values(r, 1, r.n) }
    end
    specs = specs or {}
  end
  local sup, why = check_flags(flags)
  if not sup then return "stop", why end
  if type(specs) ~= "table" then
    return "stop", { "bad_start_spec", "children must be a list of child specs, got " .. type(specs) }
  end
  sup.name = a.name
  sup.children, sup.by_pid, sup.by_id, sup.restarts = {}, {}, {}, {}
  sup.dyn, sup.ndyn = {}, 0
  if sup.strategy == "simple_one_for_one" then
    if #specs ~= 1 then return "stop", { "bad_start_spec", "simple_one_for_one needs exactly one child spec" } end
    local t, w = check_child(specs[1], true, sup.auto_shutdown)
    if not t then return "stop", w end
    sup.template = t
    return "ok", sup
  end
  for _, cs in ipairs(specs) do
    local c, w = check_child(cs, false, sup.auto_shutdown)
    if not c then return "stop", w end
    if sup.by_id[c.id] ~= nil then return "stop", { "duplicate_child_name", c.id } end
    c.pid = "undefined"
    sup.children[#sup.children + 1] = c
    sup.by_id[c.id] = c
  end
  local ok, w = start_children(sup)
  if not ok then return "stop", { "shutdown", w } end
  return "ok", sup
end

local function find(sup, id)
  return sup.by_id[id]
end

local handlers = {}

function handlers.start_child(sup, spec)
  if sup.strategy == "simple_one_for_one" then
    local extra = type(spec) == "table" and spec or { spec }
    local c = sup.template
    local pid, why = start_fn(c, extra)
    if not pid then return nil, why end
    sup.dyn[pid] = extra
    sup.ndyn = sup.ndyn + 1
    return pid
  end
  local c, why = check_child(spec, false, sup.auto_shutdown)
  if not c then return nil, why end
  local old = sup.by_id[c.id]
  if old then
    if type(old.pid) == "userdata" then return nil, "already_started", old.pid end
    return nil, "already_present"
  end
  c.pid = "undefined"
  local pid, w = start_child_rec(sup, c)
  if not pid and w ~= "ignore" then return nil, w end
  if not pid and c.restart == "temporary" then return nil, "ignore" end   -- not kept
  sup.children[#sup.children + 1] = c
  sup.by_id[c.id] = c
  if pid then sup.by_pid[pid] = c end
  return pid or nil, pid == nil and "ignore" or nil
end

function handlers.terminate_child(sup, id)
  if sup.strategy == "simple_one_for_one" then
    if type(id) ~= "userdata" or sup.dyn[id] == nil then return nil, "not_found" end
    shutdown_child(sup, { pid = id, shutdown = sup.template.shutdown, id = "dynamic",
                          restart = sup.template.restart, type = sup.template.type })
    sup.dyn[id] = nil
    sup.ndyn = sup.ndyn - 1
    return true
  end
  local c = find(sup, id)
  if not c then return nil, "not_found" end
  if type(c.pid) == "userdata" then
    sup.by_pid[c.pid] = nil
    shutdown_child(sup, c)
  end
  c.pid = "undefined"   -- a child waiting to be restarted is not restarted now
  if c.restart == "temporary" then
    sup.by_id[c.id] = nil
    table.remove(sup.children, index_of(sup, c))
  end
  return true
end

function handlers.restart_child(sup, id)
  if sup.strategy == "simple_one_for_one" then return nil, "simple_one_for_one" end
  local c = find(sup, id)
  if not c then return nil, "not_found" end
  if c.pid == "restarting" then return nil, "restarting" end
  if type(c.pid) == "userdata" then return nil, "running" end
  local pid, why = start_child_rec(sup, c)
  if pid then sup.by_pid[pid] = c end
  return pid, why
end

function handlers.delete_child(sup, id)
  if sup.strategy == "simple_one_for_one" then return nil, "simple_one_for_one" end
  local c = find(sup, id)
  if not c then return nil, "not_found" end
  if c.pid == "restarting" then return nil, "restarting" end
  if type(c.pid) == "userdata" then return nil, "running" end
  sup.by_id[c.id] = nil
  table.remove(sup.children, index_of(sup, c))
  return true
end

function handlers.which_children(sup)
  local out = {}
  if sup.strategy == "simple_one_for_one" then
    for pid in pairs(sup.dyn) do
      out[#out + 1] = { id = "undefined", pid = pid, type = sup.template.type }
    end
    return out
  end
  for _, c in ipairs(sup.children) do
    out[#out + 1] = { id = c.id, pid = c.pid, type = c.type }
  end
  return out
end

function handlers.count_children(sup)
  local r = { specs = 0, active = 0, supervisors = 0, workers = 0 }
  if sup.strategy == "simple_one_for_one" then
    local t = sup.template.type == "supervisor" and "supervisors" or "workers"
    r.specs, r.active, r[t] = 1, sup.ndyn, sup.ndyn
    return r
  end
  for _, c in ipairs(sup.children) do
    r.specs = r.specs + 1
    if type(c.pid) == "userdata" then r.active = r.active + 1 end
    if c.type == "supervisor" then r.supervisors = r.supervisors + 1 else r.workers = r.workers + 1 end
  end
  return r
end

function handlers.get_childspec(sup, id)
  local c = sup.template
  if sup.strategy ~= "simple_one_for_one" then c = find(sup, id) end
  if not c then return nil, "not_found" end
  return { id = c.id, start = type(c.start) == "table" and c.start or nil, restart = c.restart,
           shutdown = c.shutdown, type = c.type, significant = c.significant }
end

function M.handle_call(req, _, sup)
  local h = type(req) == "table" and handlers[req[1]]
  if not h then return "reply", { nil, "unknown_request" }, sup end
  return "reply", { h(sup, req[2]) }, sup
end

function M.handle_cast(_, sup) return "noreply", sup end

-- A significant child ended by itself and is not restarted: does the supervisor shut
-- down now? any_significant: yes; all_significant: when no significant child runs.
local function auto_shutdown_due(sup)
  if sup.auto_shutdown == "any_significant" then return true end
  if sup.auto_shutdown ~= "all_significant" then return false end
  if sup.strategy == "simple_one_for_one" then return sup.ndyn == 0 end
  for _, c in ipairs(sup.children) do
    if c.significant and type(c.pid) == "userdata" then return false end
  end
  return true
end

-- A child's EXIT: restart by its restart type and the strategy.
function M.handle_info(msg, sup)
  if type(msg) ~= "table" then return "noreply", sup end
  if msg[1] == "$sup_try_again" then
    local c = msg[2] ~= nil and sup.by_id[msg[2]] or sup.template
    if not c then return "noreply", sup end
    -- dropped if the child was terminated, deleted or restarted by hand meanwhile
    if c ~= sup.template and c.pid ~= "restarting" then return "noreply", sup end
    return restart(sup, c, msg[3] or nil)
  end
  if msg[1] ~= "EXIT" then return "noreply", sup end
  local pid, reason = msg[2], msg[3]
  local c, extra
  if sup.strategy == "simple_one_for_one" then
    extra = sup.dyn[pid]
    if extra == nil then return "noreply", sup end
    sup.dyn[pid] = nil
    sup.ndyn = sup.ndyn - 1
    c = sup.template
  else
    c = sup.by_pid[pid]
    if not c then return "noreply", sup end
    sup.by_pid[pid] = nil
    c.pid = "undefined"
  end
  local normal = is_normal(reason)
  local rec = { id = c.id, pid = pid, restart = c.restart, shutdown = c.shutdown, type = c.type }
  if c.restart == "temporary" or (c.restart == "transient" and normal) then
    if not normal then logger.supervisor_report(sup.name or lpvm.self(), "child_terminated", reason, rec) end
    if sup.strategy ~= "simple_one_for_one" and c.restart == "temporary" then
      sup.by_id[c.id] = nil
      table.remove(sup.children, index_of(sup, c))
    end
    if c.significant and auto_shutdown_due(sup) then
      terminate_children(sup)
      return "stop", "shutdown", sup
    end
    return "noreply", sup
  end
  logger.supervisor_report(sup.name or lpvm.self(), "child_terminated", reason, rec)
  if sup.strategy ~= "simple_one_for_one" then c.pid = "restarting" end
  return restart(sup, c, extra)
end

function M.terminate(_, sup)
  terminate_children(sup)
end

return M
