-- estone.lua -- Erlang's EStone benchmark suite, ported to lpvm's Lua processes.
--
--   lpvm [--workers N | --threads] estone/estone.lua [options]
--     --quick          loops / 100 (at least 1): proves every micro runs, in seconds
--     --only a,b,...   run only these micros (names as in the table below)
--     --json FILE      write every figure to FILE
--     --config NAME    a label for this run's VM configuration (in the JSON)
--     --repeat N       run each micro N times and score the fastest run (default 1)
--     --list           print the micros and exit
--
-- Each micro runs in a fresh process, as in estone_SUITE.erl, for a fixed number of
-- loops; its time in microseconds (less any set-up time the micro excludes, as
-- Erlang's do) gives  estones = weight^2 * 31,000,000 / microseconds,  and the total
-- is the sum. A micro that lpvm cannot run (none since ETS and the Lua port API) is
-- reported "not run" and left out of the total. Exit status: 0, or 1 if a micro
-- failed (raised an error, or its process died); never because of speed.

local dir = (arg and arg[0] or "estone/estone.lua"):match("^(.*)/[^/]*$") or "."
package.path = dir .. "/?.lua;" .. package.path
local C = require("micros.common")
local json = require("json")

local STONEFACTOR = 31000000

-- name, title, weight, loops: Erlang's table, in Erlang's order
local MICROS = {
  { "lists", "list manipulation", 7, 6400 },
  { "msgp", "small messages", 10, 1515 },
  { "msgp_medium", "medium messages", 14, 1527 },
  { "msgp_huge", "huge messages", 4, 52 },
  { "pattern", "pattern matching", 5, 1046 },
  { "trav", "traverse", 4, 2834 },
  { "port_io", "Port i/o", 12, 4800 },
  { "large_dataset_work", "Work with large dataset", 3, 1193 },
  { "large_local_dataset_work", "Work with large local dataset", 3, 1174 },
  { "alloc", "Alloc and dealloc", 2, 3710 },
  { "bif_dispatch", "Bif dispatch", 5, 1623 },
  { "binary_h", "Binary handling", 4, 581 },
  { "ets", "ets datadictionary", 6, 342 },
  { "generic", "Generic server (with timeout)", 9, 7977 },
  { "int_arith", "Small Integer arithmetics", 3, 4157 },
  { "float_arith", "Float arithmetics", 1, 5526 },
  { "fcalls", "Function calls", 5, 882 },
  { "timer", "Timers", 2, 2312 },
  { "links", "Links", 1, 30 },
}

local function usage(msg)
  io.stderr:write("estone: ", msg, "\nusage: lpvm [vm options] estone/estone.lua",
    " [--quick] [--only a,b] [--json FILE] [--config NAME] [--repeat N] [--list]\n")
  lpvm.halt(2)
end

local opts = { divisor = 1, config = nil, rep = 1 }
do
  local i = 1
  while arg[i] do
    local a = arg[i]
    if a == "--quick" then opts.divisor = 100
    elseif a == "--json" then opts.json = arg[i + 1]; i = i + 1
    elseif a == "--only" then opts.only = arg[i + 1]; i = i + 1
    elseif a == "--config" then opts.config = arg[i + 1]; i = i + 1
    elseif a == "--repeat" then
      opts.rep = math.tointeger(tonumber(arg[i + 1] or ""))
      if not opts.rep or opts.rep < 1 then usage("--repeat needs a count >= 1") end
      i = i + 1
    elseif a == "--list" then opts.list = true
    else usage("unknown option '" .. a .. "'") end
    if a ~= "--quick" and a ~= "--list" and not arg[i] then usage(a .. " needs a value") end
    i = i + 1
  end
end

if opts.list then
  for _, m in ipairs(MICROS) do
    print(string.format("%-26s %-32s weight %2d  loops %d", m[1], m[2], m[3], m[4]))
  end
  lpvm.halt(0)
end

local selected = {}
if opts.only then
  local known = {}
  for _, m in ipairs(MICROS) do known[m[1]] = true end
  for name in opts.only:gmatch("[^,%s]+") do
    if not known[name] then usage("unknown micro '" .. name .. "' (--list shows them)") end
    selected[name] = true
  end
end

local mode = lpvm.info().mode    -- "thread" under --threads
opts.config = opts.config or (mode == "thread" and "threads" or "workers")

-- Run one micro in a fresh process; return its result table.
local function micro_proc(d, name, loops, top)
  package.path = d .. "/?.lua;" .. package.path
  local Cm = require("micros.common")
  local m = require("micros." .. name)
  local run = type(m) == "function" and m or m.run
  local ctx = { dir = d }
  local t0 = Cm.start()
  local compensate = run(loops, ctx) or 0
  local t1 = Cm.clock_us()
  lpvm.send(top, "estone_result", name, t1 - t0, compensate)
end

local function availability(name)
  local m = require("micros." .. name)
  if type(m) == "table" and m.available and not m.available() then return false, m.why_not end
  return true
end

local function first_line(s)
  s = tostring(s)
  return s:match("^[^\n]*")
end

local function run_micro(name, loops, limit_ms)
  local me = lpvm.self()
  local pid, ref = lpvm.spawn_monitor(micro_proc, dir, name, loops, me)
  local elapsed, compensate, failure
  local tag, a, b, c, d = lpvm.receive(function(t, x, _, y)
    return (t == "estone_result" and x == name) or (t == "DOWN" and x == ref)
  end, limit_ms)
  if tag == "estone_result" then
    elapsed, compensate = b, c
    lpvm.receive(function(t, x) return t == "DOWN" and x == ref end, 10000)
  elseif tag == "DOWN" then
    failure = "process ended: " .. first_line(d)
  else
    failure = "no result within " .. limit_ms .. " ms"
    lpvm.exit(pid, "kill")
  end
  return elapsed, compensate, failure
end

-- Erlang's macro() warms up with lists(500) first.
C.lists(500)

local results, total_us, total_stones, failed, excluded = {}, 0, 0, 0, {}
local t_start = C.clock_us()
for _, m in ipairs(MICROS) do
  local name, title, weight, loops = m[1], m[2], m[3], m[4]
  if not opts.only or selected[name] then
    loops = math.max(1, loops // opts.divisor)
    local r = { name = name, title = title, weight = weight, loops = loops }
    local ok, why = availability(name)
    if not ok then
      r.status, r.reason = "not run", why
      excluded[#excluded + 1] = name
    else
      io.stderr:write(string.format("%s(%d)\n", name, loops))
      local limit = opts.divisor > 1 and 120000 or 900000
      local elapsed, compensate, failure
      local runs = {}
      for _ = 1, opts.rep do
        local e, c, f = run_micro(name, loops, limit)
        if f then failure = f; break end
        runs[#runs + 1] = math.floor(e - c + 0.5)
        if not elapsed or e - c < elapsed - compensate then elapsed, compensate = e, c end
      end
      if opts.rep > 1 then r.runs_microsecs = runs end
      if failure then
        r.status, r.reason = "failed", failure
        failed = failed + 1
        io.stderr:write("estone: ", name, " failed: ", failure, "\n")
      else
        local us = math.max(1, math.floor(elapsed - compensate + 0.5))
        r.status = "ok"
        r.microsecs = us
        r.compensate_us = math.floor(compensate + 0.5)
        r.millis = math.floor(us / 1000 + 0.5)
        r.estones = (weight * weight * STONEFACTOR) // us
        total_us = total_us + us
        total_stones = total_stones + r.estones
      end
    end
    results[#results + 1] = r
  end
end
local wall_us = C.clock_us() - t_start

-- The report, laid out like estone_SUITE's pp/4.
print("EStone test completed")
print(string.format("**** lpvm (%s), config %s, clock %s%s ****", _VERSION,
  opts.config, C.clock_name, opts.divisor > 1 and ", --quick (loops / 100)" or ""))
print(string.format("**** Total time %.3f seconds ****", total_us / 1e6))
print(string.format("**** ESTONES = %d ****", total_stones))
print()
print(string.format("%-35s  %-12s  %-10s  %%   %-10s", "    Title", "Millis", "Estone", "Loops"))
print()
for _, r in ipairs(results) do
  if r.status == "ok" then
    print(string.format("%-35s  %-12d  %-10d  %-3d %-10d", r.title, r.millis, r.estones,
      r.weight, r.loops))
  else
    print(string.format("%-35s  %-12s  %-10s  %-3d %-10d  (%s)", r.title, r.status, "-",
      r.weight, r.loops, r.reason))
  end
end
print()
if #excluded > 0 then
  print("not run, left out of the total: " .. table.concat(excluded, ", "))
end
if failed > 0 then print(string.format("FAILED: %d micro(s)", failed)) end
print(string.format("ESTONES = %d", total_stones))

if opts.json then
  local f = io.open("/proc/loadavg")
  local load = f and f:read("l"); if f then f:close() end
  local v = io.popen and io.popen("nproc 2>/dev/null")
  local ncpu = v and tonumber(v:read("a")); if v then v:close() end
  json.write(opts.json, {
    suite = "estone",
    config = opts.config,
    process_mode = mode,
    quick = opts.divisor > 1,
    loops_divisor = opts.divisor,
    ["repeat"] = opts.rep,
    clock = C.clock_name,
    stonefactor = STONEFACTOR,
    estones = total_stones,
    total_microsecs = total_us,
    wall_microsecs = math.floor(wall_us),
    failed = failed,
    excluded = excluded,
    loadavg = load,
    cpus = ncpu,
    date = os.date("!%Y-%m-%dT%H:%M:%SZ"),
    micros = results,
  })
end

lpvm.halt(failed > 0 and 1 or 0)
