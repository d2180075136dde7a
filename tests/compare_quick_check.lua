-- compare_quick_check.lua LPVM -- ctest compare_quick: `make compare`'s runner
-- (estone/compare/compare.lua) at --quick sizes produces a well-formed report: every
-- row's figures in the Markdown table and in the JSON, lpvm's figures numbers, and with
-- BEAM installed its figures and the ratios too; --no-beam says BEAM was skipped. It
-- checks the shape of the output only, never a speed.
local lpvm_bin = assert(arg[1], "usage: compare_quick_check.lua LPVM")
local root = ((arg[0]:match("^(.*)/[^/]*$")) or ".") .. "/.."
package.path = root .. "/estone/?.lua;" .. package.path
local json = require("json")

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
local function run(args)
  local jf, mf = os.tmpname(), os.tmpname()
  local p = io.popen(q(lpvm_bin) .. " " .. q(root .. "/estone/compare/compare.lua") .. " --lpvm " ..
    q(lpvm_bin) .. " --quick --json " .. q(jf) .. " --md " .. q(mf) .. " " .. args .. " 2>&1")
  local out = p:read("a")
  local ok = p:close()
  local f = assert(io.open(mf))
  local md = f:read("a")
  f:close()
  local report = json.read(jf)
  os.remove(jf)
  os.remove(mf)
  assert(ok, "compare.lua " .. args .. " failed:\n" .. out)
  assert(out:find(md, 1, true), "stdout does not hold the Markdown table")
  return report, md
end

local function table_lines(md)
  local t = {}
  for line in md:gmatch("[^\n]+") do
    if line:match("^|") and not line:match("^| workload") and not line:match("^|%-") then
      local cells = {}
      for c in line:gmatch("|%s*([^|]-)%s*%f[|]") do cells[#cells + 1] = c end
      t[#t + 1] = cells
    end
  end
  return t
end

local function num(s) return tonumber((s:gsub(",", ""))) end
local function close(a, b) return math.abs(a - b) <= 0.02 * math.max(math.abs(a), math.abs(b)) + 0.01 end

local function check(report, md, want_rows, workers)
  assert(md:find("| workload | W | unit | BEAM | lpvm | lpvm/BEAM | pairwise | better |", 1, true), "no header")
  assert(md:find("\n|---|---|---|---|---|---|---|---|\n", 1, true), "no separator")
  assert(md:find("load average before [%d.]+ [%d.]+ [%d.]+"), "no load average")
  local lines = table_lines(md)
  assert(#lines == #report.rows, ("%d table lines, %d JSON rows"):format(#lines, #report.rows))
  local seen = {}
  for i, r in ipairs(report.rows) do
    local c = lines[i]
    assert(#c == 8, "a line without 8 cells: " .. table.concat(c, "|"))
    assert(c[1] == r.label and num(c[2]) == r.workers and c[3] == r.unit, "line " .. i .. " is not row " .. r.row)
    assert(type(r.lpvm) == "number" and r.lpvm >= 0, r.row .. "." .. r.figure .. ": no lpvm figure")
    assert(close(num(c[5]), r.lpvm), r.row .. ": the table's lpvm figure " .. c[5] .. " vs " .. r.lpvm)
    assert(c[8] == "lower" or c[8] == "higher", "better: " .. c[8])
    if report.beam and r.beam then
      assert(type(r.beam) == "number" and r.beam > 0, r.row .. ": no BEAM figure")
      assert(close(num(c[6]), r.lpvm / r.beam), r.row .. ": ratio " .. c[6])
      assert(num(c[7]) and type(r.pairwise) == "number", r.row .. ": no pairwise ratio")
    else
      assert(c[4] == "—" and c[6] == "—", r.row .. ": a BEAM column without BEAM")
    end
    seen[r.row .. "/" .. r.workers] = true
  end
  for _, name in ipairs(want_rows) do
    for _, w in ipairs(workers) do
      assert(seen[name .. "/" .. w], "row " .. name .. " at " .. w .. " workers missing")
    end
  end
end

local have_beam = os.execute("command -v escript >/dev/null 2>&1") == true
local have_wrk = os.execute("command -v wrk >/dev/null 2>&1") == true

-- every row once, one worker (BEAM beside it when installed)
local all = { "ring10k", "ring100k", "create100k", "spawn_exit", "chain", "msg10", "msg100k", "call",
              "timer_after", "links", "start_timer", "startup", "parallel", "estone_runtime", "estone_interp" }
if have_wrk then all[#all + 1] = "http16" all[#all + 1] = "http64" end
local report, md = run("--workers 1")
assert(report.beam == have_beam, "BEAM ran: " .. tostring(report.beam))
if not have_beam then assert(md:find("\nBEAM skipped: ", 1, true), "no 'BEAM skipped' line") end
check(report, md, all, { 1 })
-- the bytes per process and figure 4's six points are there
local figs = {}
for _, r in ipairs(report.rows) do figs[r.row .. "." .. r.figure] = r end
for k = 1, 6 do assert(figs["parallel.k" .. k .. "_ms"], "figure 4: K = " .. k .. " missing") end
assert(figs["create100k.bytes_per_proc"] and figs["estone_interp.total"] and figs["estone_runtime.total"])

-- without BEAM, two workers, two rows
report, md = run("--no-beam --workers 2 ring10k chain")
assert(report.beam == false and md:find("\nBEAM skipped: --no-beam", 1, true), "no 'BEAM skipped' line")
check(report, md, { "ring10k", "chain" }, { 2 })
print("compare_quick: ok (" .. (have_beam and "with" or "without") .. " BEAM)")
