-- compare.lua -- `make compare`: lpvm beside BEAM on the same workloads, run alternately.
--
--   lpvm estone/compare/compare.lua [--lpvm BIN] [--runs N] [--workers 1,2] [--quick]
--        [--json FILE] [--md FILE] [--no-beam] [ROW ...]
--
-- Every workload is written twice, as an escript (erlang/) and as an lpvm script (lpvm/),
-- doing the same work and printing its figures on a "RESULT key=value ..." line. For each
-- worker count W (BEAM gets +S W, lpvm --workers W) and each row of ROWS below, the
-- runner runs BEAM and lpvm N times, alternating (B L, L B, B L, ...: a drift of the
-- machine's load touches both alike), and reports each figure's median per system, the
-- ratio of the medians lpvm/BEAM and the median of the N pairwise ratios (which holds
-- when the load changes between pairs). Ratios are lpvm/BEAM: below 1 is lpvm ahead
-- for times and bytes, above 1 for rates (req/s, estones; the "better" column says which).
--
-- Output: a Markdown table on stdout (and in --md FILE), every figure with its runs in
-- --json FILE. Without escript on the PATH (or with --no-beam) only lpvm runs and one
-- line says BEAM was skipped. --quick runs every row at a tiny size once: a smoke test
-- of the runner and the workloads (ctest compare_quick), whose figures mean nothing.
-- Exit status 1 if a workload failed (no RESULT line, a non-zero exit, wrk errors),
-- never because of speed.
--
-- A row is one entry of ROWS; adding a workload is adding an entry (and its two scripts):
--   name     the row's name (the command line selects rows by it)
--   beam     the escript (in erlang/), or nil if BEAM has no such workload
--   lpvm     the lpvm script (in lpvm/, or with a slash a path from the repository's root)
--   args     the arguments both scripts get
--   quick    the arguments under --quick (tiny sizes)
--   figures  { {key, label, unit}, ... }: which RESULT keys to report
--   better   "lower" (times, bytes; the default) or "higher" (rates)
--   workers  the worker counts this row runs at (default: all of --workers)
--   note     a line printed under the table when the row ran
--   kind     nil (a script), "startup" (the runner times beam_cmd and lpvm_cmd), "http"
--            (the script is a server, under wrk with `conns` connections) or "estone"
--            (estone.lua's `micros`, scored in estones)

local here = (arg and arg[0] or "estone/compare/compare.lua"):match("^(.*)/[^/]*$") or "."
local root = here .. "/../.."
package.path = here .. "/../?.lua;" .. package.path
local json = require("json")

local RUNTIME_MICROS = { "msgp", "msgp_medium", "msgp_huge", "generic", "timer", "links", "port_io" }
local INTERP_MICROS = { "lists", "pattern", "trav", "large_dataset_work", "large_local_dataset_work",
                        "alloc", "bif_dispatch", "binary_h", "ets", "int_arith", "float_arith", "fcalls" }

local function estone_figures(list)
  local f = {}
  for _, m in ipairs(list) do f[#f + 1] = { m, "EStone " .. m, "estones" } end
  f[#f + 1] = { "total", "EStone " .. (list == RUNTIME_MICROS and "runtime micros" or "interpreter-bound micros") .. ", sum", "estones" }
  return f
end

local ROWS = {
  { name = "ring10k", beam = "ring.escript", lpvm = "ring.lua", args = { "10000", "100" },
    quick = { "1000", "2" }, figures = { { "hop_ns", "ring, 10k processes", "ns/hop" } } },
  { name = "ring100k", beam = "ring.escript", lpvm = "ring.lua", args = { "100000", "10" },
    quick = { "3000", "2" }, figures = { { "hop_ns", "ring, 100k processes", "ns/hop" } } },
  { name = "create100k", beam = "create.escript", lpvm = "create.lua", args = { "100000" },
    quick = { "1000" }, figures = { { "create_s", "create 100k waiting processes", "s" },
                                    { "bytes_per_proc", "bytes per idle process (100k in receive)", "B" } } },
  { name = "spawn_exit", beam = "micro.escript", lpvm = "micro.lua", args = { "spawn_exit" },
    quick = { "spawn_exit", "1000" }, figures = { { "per_op_ns", "spawn + exit, 1M", "ns/spawn" } } },
  { name = "chain", beam = "micro.escript", lpvm = "micro.lua", args = { "chain" },
    quick = { "chain", "10" }, figures = { { "hop_ns", "4-process chain round trips (EStone msgp shape)", "ns/hop" } } },
  { name = "msg10", beam = "msgsize.escript", lpvm = "msgsize.lua", args = { "10", "100000" },
    quick = { "10", "1000" }, figures = { { "per_msg_ns", "10-byte message", "ns/msg" } } },
  { name = "msg100k", beam = "msgsize.escript", lpvm = "msgsize.lua", args = { "100000", "20000" },
    quick = { "100000", "50" }, figures = { { "per_msg_ns", "100 KB message (string)", "ns/msg" } } },
  { name = "msg100k_bin", beam = "msgsize.escript", lpvm = "msgsize_bin.lua", args = { "100000", "200000" },
    quick = { "100000", "50" }, figures = { { "per_msg_ns", "100 KB message (lpvm.binary)", "ns/msg" } } },
  { name = "call", beam = "micro.escript", lpvm = "micro.lua", args = { "call" },
    quick = { "call", "1000" }, figures = { { "per_op_ns", "request/reply with receive timeout", "ns/call" } } },
  { name = "timer_after", beam = "micro.escript", lpvm = "micro.lua", args = { "timer_after" },
    quick = { "timer_after", "1000" }, figures = { { "per_op_ns", "receive with an unused timeout (round trip)", "ns/rt" } } },
  { name = "links", beam = "micro.escript", lpvm = "micro.lua", args = { "links" },
    quick = { "links", "1" }, figures = { { "per_op_ns", "link + unlink", "ns/pair" } } },
  { name = "start_timer", beam = "micro.escript", lpvm = "micro.lua", args = { "start_timer" },
    quick = { "start_timer", "1000" }, figures = { { "per_op_ns", "timer start + cancel", "ns/op" } } },
  { name = "startup", kind = "startup", workers = { 1 },
    beam_cmd = { "erl", "-noshell", "-eval", 'io:format("hello~n"), halt().' },
    lpvm_cmd = { "-e", 'print("hello")' }, figures = { { "wall_ms", "start-up (hello, world)", "ms" } } },
  { name = "http16", kind = "http", conns = 16, beam = "httpd.escript",
    lpvm = "examples/http_server.lua", better = "higher",
    figures = { { "rps", "HTTP page of the luaproc report, wrk 16 conns", "req/s" } } },
  { name = "http64", kind = "http", conns = 64, beam = "httpd.escript",
    lpvm = "examples/http_server.lua", better = "higher",
    figures = { { "rps", "HTTP page of the luaproc report, wrk 64 conns", "req/s" } } },
  { name = "parallel", beam = "parallel.escript", lpvm = "parallel.lua", args = { "6", "3000000" },
    quick = { "6", "20000" },
    figures = { { "k1_ms", "thesis fig. 4: 1 compute process", "ms" }, { "k2_ms", "thesis fig. 4: 2 processes", "ms" },
                { "k3_ms", "thesis fig. 4: 3 processes", "ms" }, { "k4_ms", "thesis fig. 4: 4 processes", "ms" },
                { "k5_ms", "thesis fig. 4: 5 processes", "ms" }, { "k6_ms", "thesis fig. 4: 6 processes", "ms" } } },
  { name = "estone_runtime", kind = "estone", micros = RUNTIME_MICROS, better = "higher",
    beam = "estone.escript", lpvm = "estone/estone.lua", figures = estone_figures(RUNTIME_MICROS) },
  { name = "estone_interp", kind = "estone", micros = INTERP_MICROS, better = "higher",
    lpvm = "estone/estone.lua", figures = estone_figures(INTERP_MICROS),
    note = "EStone's interpreter-bound micros run on lpvm only: they measure Lua 5.4's interpreter, not the runtime" },
}

---------------------------------------------------------------------------- options

local function usage(msg)
  io.stderr:write("compare: ", msg, "\nusage: lpvm estone/compare/compare.lua [--lpvm BIN] [--runs N]",
    " [--workers 1,2] [--quick] [--json FILE] [--md FILE] [--no-beam] [ROW ...]\n")
  lpvm.halt(2)
end

local opts = { lpvm = "build/lpvm", runs = nil, workers = { 1, 2 }, rows = {} }
do
  local i = 1
  while arg[i] do
    local a = arg[i]
    local function val()
      i = i + 1
      return arg[i] or usage(a .. " needs a value")
    end
    if a == "--lpvm" then opts.lpvm = val()
    elseif a == "--runs" then
      opts.runs = math.tointeger(tonumber(val()))
      if not opts.runs or opts.runs < 1 then usage("--runs needs a count >= 1") end
    elseif a == "--workers" then
      opts.workers = {}
      for w in val():gmatch("[^,]+") do
        local n = math.tointeger(tonumber(w))
        if not n or n < 1 then usage("--workers takes counts like 1,2") end
        opts.workers[#opts.workers + 1] = n
      end
    elseif a == "--quick" then opts.quick = true
    elseif a == "--json" then opts.json = val()
    elseif a == "--md" then opts.md = val()
    elseif a == "--no-beam" then opts.no_beam = true
    elseif a:sub(1, 2) == "--" then usage("unknown option '" .. a .. "'")
    else opts.rows[#opts.rows + 1] = a end
    i = i + 1
  end
end
opts.runs = opts.runs or (opts.quick and 1 or 3)

local selected = {}
do
  local known = {}
  for _, r in ipairs(ROWS) do known[r.name] = r end
  for _, name in ipairs(opts.rows) do
    if not known[name] then usage("unknown row '" .. name .. "'") end
  end
  for _, r in ipairs(ROWS) do
    local want = #opts.rows == 0
    for _, name in ipairs(opts.rows) do want = want or name == r.name end
    if want then selected[#selected + 1] = r end
  end
end

---------------------------------------------------------------------------- running

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
local function cmdline(argv)
  local t = {}
  for i, a in ipairs(argv) do t[i] = q(a) end
  return table.concat(t, " ")
end

local function sh(cmd)   -- the command's output (stdout and stderr) and whether it exited 0
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  local ok = p:close()
  return out, ok == true
end

local function have(prog) return os.execute("command -v " .. prog .. " >/dev/null 2>&1") == true end

local function abs(path)
  if path:sub(1, 1) == "/" then return path end
  return (sh("pwd")):gsub("\n$", "") .. "/" .. path
end

opts.lpvm = abs(opts.lpvm)
root = abs(root)
local erl_dir, lpvm_dir = abs(here .. "/erlang"), abs(here .. "/lpvm")
local LIMIT = opts.quick and 120 or 900   -- seconds: a hung workload is killed, not waited for
local beam_ok = not opts.no_beam and have("escript")
local wrk_ok = have("wrk")
local failures = {}
local function fail(what, out)
  failures[#failures + 1] = what
  io.stderr:write("compare: ", what, " failed:\n", (out or ""):sub(-2000), "\n")
end

local function parse_result(out)
  local kv
  for line in out:gmatch("[^\n]+") do
    if line:match("^RESULT ") then
      kv = {}
      for k, v in line:gmatch("(%S+)=(%S+)") do kv[k] = tonumber(v) or v end
    end
  end
  return kv
end

local function args_of(row, side)
  local a = { row[side] }
  for _, x in ipairs(opts.quick and row.quick or row.args or {}) do a[#a + 1] = x end
  return a
end

local function beam_env(w) return "ERL_FLAGS=" .. q("+S " .. w .. " +P 4000000") .. " " end
local function lpvm_prog(script)   -- lpvm/ or, with a slash, from the repository's root
  return script:find("/", 1, true) and root .. "/" .. script or lpvm_dir .. "/" .. script
end

-- One run of a script row: the RESULT line's table, or nil.
local function run_script(row, side, w)
  local argv = args_of(row, side)
  local cmd
  if side == "beam" then
    cmd = "cd " .. q(erl_dir) .. " && " .. beam_env(w) .. "timeout " .. LIMIT .. " escript " .. cmdline(argv)
  else
    argv[1] = lpvm_prog(argv[1])
    cmd = "cd " .. q(lpvm_dir) .. " && timeout " .. LIMIT .. " " .. q(opts.lpvm) .. " --workers " .. w .. " " .. cmdline(argv)
  end
  local out, ok = sh(cmd)
  local kv = parse_result(out)
  if not ok or not kv then return fail(row.name .. " (" .. side .. ", " .. w .. " workers)", out) end
  return kv
end

-- Start-up: the median wall time of REPS runs of the command, timed here.
local function run_startup(row, side)
  local cmd = side == "beam" and cmdline(row.beam_cmd) or q(opts.lpvm) .. " " .. cmdline(row.lpvm_cmd)
  local t = {}
  for i = 1, opts.quick and 3 or 10 do
    local t0 = lpvm.now_us()
    local out, ok = sh("timeout 60 " .. cmd)
    t[i] = (lpvm.now_us() - t0) / 1e3
    if not ok or not out:find("hello") then return fail("startup (" .. side .. ")", out) end
  end
  table.sort(t)
  return { wall_ms = t[(#t + 1) // 2] }
end

-- HTTP: start the server in a session of its own (so it and its children are stopped
-- together), wait for the port it prints, run wrk, stop it. A socket error, a request
-- unanswered after 10 s (wrk's timeout; its default of 2 s is reached on a loaded
-- machine) or an answer other than 2xx fails the row.
local function run_http(row, side, w)
  local log, pidfile = os.tmpname(), os.tmpname()
  local cmd
  if side == "beam" then
    cmd = "cd " .. q(erl_dir) .. " && " .. beam_env(w) .. "exec escript " .. q(row.beam) .. " 0"
  else
    cmd = "exec " .. q(opts.lpvm) .. " --workers " .. w .. " " .. q(lpvm_prog(row.lpvm)) .. " --port 0"
  end
  -- in the background, in a session of its own whose id is the pid written first
  sh("setsid sh -c " .. q("echo $$ >" .. q(pidfile) .. "; " .. cmd) .. " >" .. q(log) .. " 2>&1 </dev/null &")
  -- the line the server prints: "listening on PORT" (BEAM), "http server on http://H:PORT/"
  local port, text
  for _ = 1, 300 do
    local f = io.open(log)
    text = f and f:read("a") or ""
    if f then f:close() end
    port = text:match("listening on (%d+)") or text:match("http://[%d.]+:(%d+)/")
    if port then break end
    lpvm.sleep(100)
  end
  local kv
  if port then
    -- --quick runs wrk for 1 s; on a loaded machine a cold server (BEAM's first
    -- requests) can answer none in it: a run with no answer and no error is tried
    -- once more for 5 s, so only a server that answers nothing fails
    local out, ok, rps, errors
    for _, dur in ipairs(opts.quick and { 1, 5 } or { 5 }) do
      out, ok = sh("timeout " .. (dur + 30) .. " wrk -t2 --timeout 10s -c" .. row.conns .. " -d" .. dur ..
                   "s http://127.0.0.1:" .. port .. "/")
      rps = tonumber(out:match("Requests/sec:%s*([%d.]+)"))
      errors = out:match("Socket errors:[^\n]*") or out:match("Non%-2xx[^\n]*")
      if not ok or errors or (rps and rps > 0) then break end
    end
    if ok and rps and rps > 0 and not errors then kv = { rps = rps }
    else fail(row.name .. " (" .. side .. ", wrk)", out) end
  else
    fail(row.name .. " (" .. side .. "): the server did not start", text)
  end
  local f = io.open(pidfile)
  local sid = f and math.tointeger(tonumber(f:read("a")))
  if f then f:close() end
  if sid then
    os.execute("kill -TERM -" .. sid .. " 2>/dev/null")   -- (dash: no "--")
    for _ = 1, 50 do   -- until the session is gone (its port is then free again)
      if not os.execute("kill -0 -" .. sid .. " 2>/dev/null") then break end
      lpvm.sleep(100)
    end
    os.execute("kill -KILL -" .. sid .. " 2>/dev/null")
  end
  os.remove(log)
  os.remove(pidfile)
  return kv
end

local function run_estone(row, side, w)
  if side == "beam" then
    local cmd = "cd " .. q(erl_dir) .. " && " .. beam_env(w) .. "timeout " .. LIMIT .. " escript " .. q(row.beam) ..
      (opts.quick and " --quick" or "") .. " " .. table.concat(row.micros, ",")
    local out, ok = sh(cmd)
    local kv = parse_result(out)
    if not ok or not kv then return fail(row.name .. " (beam, " .. w .. " workers)", out) end
    local total = 0
    for _, m in ipairs(row.micros) do total = total + (kv[m] or 0) end
    kv.total = total
    return kv
  end
  local tmp = os.tmpname()
  local out, ok = sh("cd " .. q(root) .. " && timeout " .. LIMIT .. " " .. q(opts.lpvm) .. " --workers " .. w ..
    " " .. q(lpvm_prog(row.lpvm)) .. " --only " .. table.concat(row.micros, ",") .. " --json " .. q(tmp) ..
    (opts.quick and " --quick" or ""))
  local okj, data = pcall(json.read, tmp)
  os.remove(tmp)
  if not ok or not okj or type(data) ~= "table" or data.failed ~= 0 then
    return fail(row.name .. " (lpvm, " .. w .. " workers)", out)
  end
  local kv, total = {}, 0
  for _, m in ipairs(data.micros) do kv[m.name] = m.estones total = total + m.estones end
  kv.total = total
  return kv
end

local RUN = { startup = run_startup, http = run_http, estone = run_estone }
local function run_one(row, side, w)
  return (RUN[row.kind] or run_script)(row, side, w)
end

---------------------------------------------------------------------------- statistics

local function median(t)
  if #t == 0 then return nil end
  local s = { table.unpack(t) }
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
end

local function fmt(x)
  if x == nil then return "—" end
  if x ~= x then return "nan" end
  local a = math.abs(x)
  if a >= 1000 then
    local s = string.format("%.0f", x)
    return (s:reverse():gsub("(%d%d%d)", "%1,"):reverse():gsub("^(%-?),", "%1"))
  elseif a >= 100 then return string.format("%.0f", x)
  elseif a >= 10 then return string.format("%.1f", x)
  else return string.format("%.3g", x) end
end

local function loadavg()
  local f = io.open("/proc/loadavg")
  local s = f and f:read("l") or "?"
  if f then f:close() end
  return s:match("^(%S+ %S+ %S+)") or s
end

---------------------------------------------------------------------------- main

local version = (sh(q(opts.lpvm) .. " --version")):match("[^\n]*")
local erts = beam_ok and (sh("erl -noshell -eval 'io:format(\"~s\", [erlang:system_info(otp_release)]), halt().'")) or nil
local report = {
  date = os.date("!%Y-%m-%dT%H:%M:%SZ"), cpus = tonumber((sh("nproc"))) or 0,
  lpvm = version, otp_release = erts, runs = opts.runs, quick = opts.quick or false,
  beam = beam_ok, loadavg_before = loadavg(), rows = {},
}
local lines = {}
local function out(s) print(s) io.stdout:flush() lines[#lines + 1] = s end

out(string.format("# lpvm beside BEAM: %d run(s) each, alternating; BEAM +S W, lpvm --workers W%s",
  opts.runs, opts.quick and " (--quick: tiny sizes, the figures mean nothing)" or ""))
out("")
out(string.format("%s, %d CPUs, %s, load average before %s", report.date, report.cpus, version, report.loadavg_before))
if beam_ok then out("BEAM: OTP " .. tostring(erts))
else out("BEAM skipped: " .. (opts.no_beam and "--no-beam" or "escript is not installed (Debian: erlang-nox)") ..
         "; lpvm's figures only") end
if not wrk_ok then out("HTTP rows skipped: wrk is not installed (Debian: wrk)") end
out("")
out("| workload | W | unit | BEAM | lpvm | lpvm/BEAM | pairwise | better |")
out("|---|---|---|---|---|---|---|---|")

for _, w in ipairs(opts.workers) do
  for _, row in ipairs(selected) do
    local runs_here = true
    if row.workers then
      runs_here = false
      for _, x in ipairs(row.workers) do runs_here = runs_here or x == w end
    end
    if row.kind == "http" and not wrk_ok then runs_here = false end
    if runs_here then
      local got = { beam = {}, lpvm = {} }
      local sides = {}
      if beam_ok and (row.beam or row.beam_cmd) then sides[#sides + 1] = "beam" end
      sides[#sides + 1] = "lpvm"
      for r = 1, opts.runs do
        local order = (r % 2 == 1) and sides or { sides[2], sides[1] }
        for _, side in ipairs(order) do
          got[side][r] = run_one(row, side, w) or false
        end
      end
      for _, f in ipairs(row.figures) do
        local key, label, unit = f[1], f[2], f[3]
        local bs, ls, pairs_ = {}, {}, {}
        for r = 1, opts.runs do
          local b = got.beam[r] and got.beam[r][key]
          local l = got.lpvm[r] and got.lpvm[r][key]
          if type(b) == "number" then bs[#bs + 1] = b end
          if type(l) == "number" then ls[#ls + 1] = l end
          if type(b) == "number" and type(l) == "number" and b > 0 then pairs_[#pairs_ + 1] = l / b end
        end
        local mb, ml = median(bs), median(ls)
        local ratio = (mb and ml and mb > 0) and ml / mb or nil
        local pw = median(pairs_)
        local better = row.better or "lower"
        report.rows[#report.rows + 1] = {
          row = row.name, figure = key, label = label, unit = unit, workers = w, better = better,
          beam = mb, lpvm = ml, ratio = ratio, pairwise = pw, beam_runs = bs, lpvm_runs = ls,
          loadavg = loadavg(),
        }
        out(string.format("| %s | %d | %s | %s | %s | %s | %s | %s |", label, w, unit, fmt(mb), fmt(ml),
          ratio and string.format("%.2f", ratio) or "—", pw and string.format("%.2f", pw) or "—", better))
      end
    end
  end
end

local noted = {}
for _, r in ipairs(report.rows) do
  local row
  for _, x in ipairs(selected) do if x.name == r.row then row = x end end
  if row.note and not noted[row] then
    if not next(noted) then out("") end
    noted[row] = true
    out("- " .. row.note)
  end
end
report.loadavg_after = loadavg()
report.failures = failures
out("")
out("load average after " .. report.loadavg_after .. (#failures > 0 and ("; FAILED: " .. table.concat(failures, "; ")) or ""))
if opts.md then
  local f = assert(io.open(opts.md, "w"))
  f:write(table.concat(lines, "\n"), "\n")
  f:close()
end
if opts.json then json.write(opts.json, report) end
lpvm.halt(#failures > 0 and 1 or 0)
