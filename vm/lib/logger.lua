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
-- "table: 0x...". Events below the level cost one C call and write nothing.
local lpvm = require "lpvm"

local logger = {}

local LEVELS = { "emergency", "alert", "critical", "error", "warning", "notice", "info", "debug" }

local function text_of(what, ...)
  if type(what) ~= "string" then return lpvm.format(what) end
  if select("#", ...) == 0 then return what end
  local args = table.pack(...)
  for i = 1, args.n do
    local v = args[i]
    if type(v) == "table" or type(v) == "userdata" then args[i] = lpvm.format(v)
    elseif v == nil or type(v) == "boolean" then args[i] = tostring(v) end
  end
  return string.format(what, table.unpack(args, 1, args.n))
end

-- log(level, format, ...) or log(level, report_table) -> true if written
function logger.log(level, what, ...)
  if type(level) ~= "string" then
    error("bad argument #1 to 'logger.log' (level name expected, got " .. type(level) .. ")", 2)
  end
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
  return lpvm.log_level(level)
end

function logger.get_level()
  local l = lpvm.log_level()
  return l
end

local ORDER = { none = -1, all = #LEVELS - 1 }
for i, l in ipairs(LEVELS) do ORDER[l] = i - 1 end

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
