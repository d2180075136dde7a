-- logger.lua -- OTP's logger for lpvm (docs/otp.md): levels, a default handler on
-- stderr (a UTC timestamp, the level, the pid), a VM-wide level (`lpvm --log-level`,
-- logger.set_level), and the reports the behaviours write (supervisor reports; crash
-- reports come from the VM itself when a process fails).
--
--   local logger = require "logger"
--   logger.warning("disk %d%% full", 93)
--   logger.error({ what = "bad_config", file = path })   -- a report: printed as Lua
--
-- Table arguments of a format are printed as Lua values (lpvm.format), not as
-- "table: 0x...". Events below the level cost one C call and write nothing. A format
-- its arguments do not fit is written as "FORMAT ERROR: format - {args}", as
-- Erlang's logger does: a log call never raises for it (one in an error handler
-- would turn a handled error into a crash).
local lpvm = require "lpvm"

local logger = {}

local LEVELS = { "emergency", "alert", "critical", "error", "warning", "notice", "info", "debug" }
local ORDER = { none = -1, all = #LEVELS - 1 }
for i, l in ipairs(LEVELS) do ORDER[l] = i - 1 end

-- A level argument that is not one raises naming the caller's call (level 3: the
-- caller of the logger function that checks).
local function check_level(level, fname)
  if type(level) ~= "string" then
    error(string.format("bad argument #1 to '%s' (level name expected, got %s)", fname, type(level)), 3)
  end
  if ORDER[level] == nil then
    error(string.format("bad argument #1 to '%s' (log level expected (%s, none, all), got %s)",
      fname, table.concat(LEVELS, ", "), lpvm.format(level)), 3)
  end
end

local function text_of(what, ...)
  if type(what) ~= "string" then return lpvm.format(what) end
  if select("#", ...) == 0 then return what end
  local args = table.pack(...)
  for i = 1, args.n do
    local v = args[i]
    if type(v) == "table" or type(v) == "userdata" then args[i] = lpvm.format(v)
    elseif v == nil or type(v) == "boolean" then args[i] = tostring(v) end
  end
  local ok, text = pcall(string.format, what, table.unpack(args, 1, args.n))
  if ok then return text end
  return "FORMAT ERROR: " .. lpvm.format(what) .. " - " .. lpvm.format({ ... })
end

-- log(level, format, ...) or log(level, report_table) -> true if written
function logger.log(level, what, ...)
  check_level(level, "logger.log")
  if what == nil then error("bad argument #2 to 'logger.log' (format or report expected, got nil)", 2) end
  if not logger.allow(level) then
    lpvm.log(level, "")   -- filtered (raises on an unknown level name)
    return false
  end
  return lpvm.log(level, text_of(what, ...))
end

for _, l in ipairs(LEVELS) do
  logger[l] = function(what, ...) return logger.log(l, what, ...) end
end

-- The VM-wide level: events less severe than it are dropped ("none": all of them).
function logger.set_level(level)
  if level ~= nil then check_level(level, "logger.set_level") end
  return lpvm.log_level(level)
end

function logger.get_level()
  local l = lpvm.log_level()
  return l
end

-- true if an event of `level` would be written now (a filtered event is not even
-- formatted).
function logger.allow(level)
  local want = ORDER[level]
  return want ~= nil and want >= 0 and want <= ORDER[lpvm.log_level()]
end

-- A supervisor report: context is "start_error", "child_terminated",
-- "shutdown_error" or "shutdown" (the supervisor gives up).
function logger.supervisor_report(sup, context, reason, child)
  local lines = { string.format("supervisor report: supervisor %s, %s", tostring(sup), context) }
  if child then
    lines[#lines + 1] = string.format("child: id = %s, pid = %s, restart = %s, shutdown = %s, type = %s",
      lpvm.format(child.id), tostring(child.pid), tostring(child.restart),
      tostring(child.shutdown), tostring(child.type))
  end
  lines[#lines + 1] = "reason: " .. (type(reason) == "string" and reason or lpvm.format(reason))
  return lpvm.log("error", table.concat(lines, "\n"))
end

-- A progress report (info): a supervisor started a child.
function logger.progress_report(sup, child)
  if not logger.allow("info") then return false end
  return lpvm.log("info", string.format("progress report: supervisor %s started child id = %s, pid = %s",
    tostring(sup), lpvm.format(child.id), tostring(child.pid)))
end

return logger
