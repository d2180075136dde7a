-- chart.lua -- turn estone/results/*.json into charts (SVG, written directly) and a
-- Markdown summary.
--
--   lpvm estone/chart.lua [DIR]      (DIR defaults to estone/results; lua5.4 works too)
--
-- Reads  DIR/estone_{workers,threads,workers1}.json, DIR/seeds.jsonl, DIR/meta.json
-- Writes DIR/estone.svg   EStone: bars per micro, one per configuration
--        DIR/seeds.svg    the seeds' benchmarks: thesis figs 3-4, luaproc figs 1-4, ring
--        DIR/summary.md   the same figures as tables
--        DIR/all.json     everything in one file

local here = (arg and arg[0] or "estone/chart.lua"):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local json = require("json")
local DIR = arg[1] or (here .. "/results")

local CONFIGS = {
  { key = "workers", label = "worker threads (default)", color = "#3b75af" },
  { key = "threads", label = "private threads (--threads)", color = "#ef8636" },
  { key = "workers1", label = "one worker (--workers 1)", color = "#519e3e" },
  { key = "workers2", label = "two workers (--workers 2)", color = "#7a4fa0" },
}
local CONFIG_BY = {}
for _, c in ipairs(CONFIGS) do CONFIG_BY[c.key] = c end

local function exists(p) local f = io.open(p) if f then f:close() return true end return false end

-- ---- input --------------------------------------------------------------------------
local estone = {}
for _, c in ipairs(CONFIGS) do
  local p = DIR .. "/estone_" .. c.key .. ".json"
  if exists(p) then estone[c.key] = json.read(p) end
end
local seeds = {}
if exists(DIR .. "/seeds.jsonl") then
  for line in io.lines(DIR .. "/seeds.jsonl") do
    if line:match("%S") then seeds[#seeds + 1] = json.decode(line) end
  end
end
local meta = exists(DIR .. "/meta.json") and json.read(DIR .. "/meta.json") or {}

local function seeds_of(case, config)
  local out = {}
  for _, s in ipairs(seeds) do
    if s.case == case and (not config or s.config == config) and not s.failed then out[#out + 1] = s end
  end
  return out
end

-- ---- SVG helpers ----------------------------------------------------------------------
local function esc(s) return (tostring(s):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;")) end

local Svg = {}
Svg.__index = Svg
local function svg(width) return setmetatable({ w = width, parts = {}, y = 0 }, Svg) end
function Svg:add(fmt, ...) self.parts[#self.parts + 1] = string.format(fmt, ...) end
function Svg:text(x, y, s, attrs)
  self:add('<text x="%.1f" y="%.1f" %s>%s</text>', x, y, attrs or "", esc(s))
end
function Svg:rect(x, y, w, h, color, title)
  self:add('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s">%s</rect>', x, y,
    math.max(w, 0), h, color, title and ("<title>" .. esc(title) .. "</title>") or "")
end
function Svg:line(x1, y1, x2, y2, color, width, dash)
  self:add('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%s"%s/>',
    x1, y1, x2, y2, color, width or 1, dash and (' stroke-dasharray="' .. dash .. '"') or "")
end
function Svg:finish()
  local head = string.format('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
    .. 'viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">'
    .. '<rect width="100%%" height="100%%" fill="white"/>', self.w, self.y, self.w, self.y)
  return head .. "\n" .. table.concat(self.parts, "\n") .. "\n</svg>\n"
end

local function fmt_num(v)
  if v == nil then return "-" end
  if v >= 100 or math.type(v) == "integer" then
    local s = string.format("%d", math.floor(v + 0.5))
    return (s:reverse():gsub("(%d%d%d)", "%1,"):reverse():gsub("^,", ""))
  elseif v >= 10 then return string.format("%.1f", v)
  else return string.format("%.2f", v) end
end

-- A "nice" axis maximum and tick step for a linear axis from 0 to max: the step is
-- 1, 2, 2.5 or 5 times a power of ten, with at most 6 steps.
local function nice(max)
  if max <= 0 then return 1, 0.2 end
  local p = 10 ^ math.floor(math.log(max, 10) - 1)
  while true do
    for _, m in ipairs({ 1, 2, 2.5, 5 }) do
      local step = m * p
      if max / step <= 6 then return math.ceil(max / step - 1e-9) * step, step end
    end
    p = p * 10
  end
end

-- Grouped horizontal bars. p = { title, subtitle, groups = {label...}, series =
-- {{label, color}...}, value(gi, si) -> number|nil, note(gi, si) -> string|nil,
-- fmt(v) -> string, axis_label, ref = value of a dashed reference line }
function Svg:hbars(p)
  local left, right = p.left or 230, 90
  local bar_h, gap = p.bar_h or 11, 8
  local x0, x1 = left, self.w - right
  local y = self.y + 24
  self:text(16, y, p.title, 'font-size="16" font-weight="bold"')
  if p.subtitle then
    for line in (p.subtitle .. "\n"):gmatch("(.-)\n") do
      y = y + 16
      self:text(16, y, line, 'fill="#444"')
    end
  end
  y = y + 12
  -- legend
  local lx = 16
  for _, s in ipairs(p.series) do
    self:rect(lx, y, 12, 12, s.color)
    self:text(lx + 16, y + 10, s.label)
    lx = lx + 26 + 7 * #s.label
  end
  y = y + 26
  local max = 0
  for gi = 1, #p.groups do
    for si = 1, #p.series do
      local v = p.value(gi, si)
      if v and v > max then max = v end
    end
  end
  if p.ref and p.ref > max then max = p.ref end
  local top, step = nice(max)
  local scale = (x1 - x0) / top
  local ytop = y
  local gh = #p.series * bar_h + gap
  local ybottom = ytop + #p.groups * gh
  -- grid
  local t = 0
  while t <= top + 1e-9 do
    local x = x0 + t * scale
    self:line(x, ytop - 4, x, ybottom, "#ddd")
    self:text(x, ybottom + 14, (p.fmt_axis or fmt_num)(t), 'text-anchor="middle" fill="#555" font-size="10"')
    t = t + step
  end
  if p.axis_label then
    self:text((x0 + x1) / 2, ybottom + 30, p.axis_label, 'text-anchor="middle" fill="#333"')
  end
  if p.ref then
    local x = x0 + p.ref * scale
    self:line(x, ytop - 4, x, ybottom, "#888", 1.2, "4,3")
  end
  for gi, g in ipairs(p.groups) do
    local gy = ytop + (gi - 1) * gh
    self:text(x0 - 8, gy + #p.series * bar_h / 2 + 4, g, 'text-anchor="end"')
    for si, s in ipairs(p.series) do
      local by = gy + (si - 1) * bar_h
      local v = p.value(gi, si)
      if v then
        self:rect(x0, by, v * scale, bar_h - 1, s.color, g .. ", " .. s.label .. ": " .. (p.fmt or fmt_num)(v))
        self:text(x0 + v * scale + 4, by + bar_h - 2, (p.fmt or fmt_num)(v), 'font-size="10" fill="#222"')
      elseif si == 1 or not p.note_once then
        local note = p.note and p.note(gi, si) or "not run"
        self:text(x0 + 4, by + bar_h - 2, note, 'font-size="10" fill="#999" font-style="italic"')
      end
    end
  end
  self.y = ybottom + (p.axis_label and 44 or 28)
end

-- Lines: p = { title, subtitle, xs = {x...}, series = {{label, color, ys = {...}}},
-- xlabel, ylabel, fmt }
function Svg:lines(p)
  local left, right, h = 70, 200, p.height or 220
  local y = self.y + 24
  self:text(16, y, p.title, 'font-size="16" font-weight="bold"')
  if p.subtitle then
    for line in (p.subtitle .. "\n"):gmatch("(.-)\n") do
      y = y + 16
      self:text(16, y, line, 'fill="#444"')
    end
  end
  local ytop, ybottom = y + 20, y + 20 + h
  local x0, x1 = left, self.w - right
  local max = 0
  for _, s in ipairs(p.series) do for _, v in pairs(s.ys) do if v > max then max = v end end end
  local top, step = nice(max)
  local xmin, xmax = p.xs[1], p.xs[#p.xs]
  local function X(x) return x0 + (x - xmin) / math.max(xmax - xmin, 1) * (x1 - x0) end
  local function Y(v) return ybottom - v / top * (ybottom - ytop) end
  local t = 0
  while t <= top + 1e-9 do
    self:line(x0, Y(t), x1, Y(t), "#ddd")
    self:text(x0 - 6, Y(t) + 4, fmt_num(t), 'text-anchor="end" fill="#555" font-size="10"')
    t = t + step
  end
  for _, x in ipairs(p.xs) do
    self:text(X(x), ybottom + 14, tostring(x), 'text-anchor="middle" fill="#555" font-size="10"')
  end
  self:text((x0 + x1) / 2, ybottom + 30, p.xlabel, 'text-anchor="middle" fill="#333"')
  self:add('<text transform="translate(18,%.1f) rotate(-90)" text-anchor="middle" fill="#333">%s</text>',
    (ytop + ybottom) / 2, esc(p.ylabel))
  for i, s in ipairs(p.series) do
    local pts = {}
    for k, x in ipairs(p.xs) do
      if s.ys[k] then pts[#pts + 1] = string.format("%.1f,%.1f", X(x), Y(s.ys[k])) end
    end
    self:add('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>', s.color, table.concat(pts, " "))
    for k, x in ipairs(p.xs) do
      if s.ys[k] then
        self:add('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s</title></circle>', X(x), Y(s.ys[k]),
          s.color, esc(s.label .. ", " .. x .. ": " .. fmt_num(s.ys[k])))
      end
    end
    self:rect(x1 + 16, ytop + (i - 1) * 18, 12, 12, s.color)
    self:text(x1 + 32, ytop + (i - 1) * 18 + 10, s.label)
  end
  self.y = ybottom + 44
end

function Svg:para(lines, attrs)
  for _, l in ipairs(lines) do
    self.y = self.y + 16
    self:text(16, self.y, l, attrs or 'fill="#444"')
  end
  self.y = self.y + 8
end

local function write(path, s)
  local f = assert(io.open(path, "w"))
  f:write(s)
  f:close()
end

local md = {}
local function out(s) md[#md + 1] = s or "" end

local when = string.format("%s, %s CPUs, %s; load average before %s, after %s",
  meta.date or "?", meta.cpus or "?", meta.lpvm or "lpvm", meta.load_before or "?", meta.load_after or "?")
if meta.note then when = when .. ". " .. meta.note end

-- ---- the EStone chart -------------------------------------------------------------------
local present = {}
for _, c in ipairs(CONFIGS) do if estone[c.key] then present[#present + 1] = c end end
if #present > 0 then
  local base = estone[present[1].key]
  local groups, names = {}, {}
  for _, m in ipairs(base.micros) do groups[#groups + 1] = m.title .. " (" .. m.weight .. ")"; names[#names + 1] = m.name end
  local function micro(cfg, name)
    for _, m in ipairs(estone[cfg].micros) do if m.name == name then return m end end
  end
  local series = {}
  for _, c in ipairs(present) do
    series[#series + 1] = { label = string.format("%s: %s ESTONES", c.label, fmt_num(estone[c.key].estones)),
                            color = c.color, key = c.key }
  end
  local s = svg(1000)
  local excluded = base.excluded and #base.excluded > 0 and
    ("Not run, left out of every total: " .. table.concat(base.excluded, ", ") .. ".") or ""
  s:hbars({
    title = "EStone on lpvm: estones per micro (longer is faster)",
    subtitle = "estones = weight\194\178 \195\151 31,000,000 / microseconds, the fastest of " ..
      (base["repeat"] or 1) .. " runs; the total ESTONES is the sum. Weight in brackets.\n" ..
      when .. (base.quick and "\n--quick run: loops / 100, figures meaningless" or "") ..
      (excluded ~= "" and ("\n" .. excluded) or ""),
    groups = groups, series = series,
    value = function(gi, si)
      local m = micro(series[si].key, names[gi])
      return m and m.estones
    end,
    note = function(gi, si)
      local m = micro(series[si].key, names[gi])
      if not m then return "-" end
      if m.status == "failed" then return "FAILED: " .. (m.reason or "") end
      return "not run: " .. (m.reason or "")
    end,
    axis_label = "estones", note_once = true,
  })
  write(DIR .. "/estone.svg", s:finish())

  out("## EStone")
  out()
  out(when .. ".")
  out()
  local hdr, sep = "| micro | title | weight | loops |", "|---|---|---:|---:|"
  for _, c in ipairs(present) do
    hdr = hdr .. " " .. c.key .. " ms | " .. c.key .. " estones |"
    sep = sep .. "---:|---:|"
  end
  out(hdr); out(sep)
  for gi, name in ipairs(names) do
    local m0 = base.micros[gi]
    local row = string.format("| %s | %s | %d | %d |", name, m0.title, m0.weight, m0.loops)
    for _, c in ipairs(present) do
      local m = micro(c.key, name)
      if m and m.status == "ok" then
        row = row .. string.format(" %s | %s |", fmt_num(m.microsecs / 1000), fmt_num(m.estones))
      else
        row = row .. " " .. (m and m.status or "-") .. " | - |"
      end
    end
    out(row)
  end
  local tot = "| **ESTONES** | | | |"
  for _, c in ipairs(present) do tot = tot .. string.format(" %s s | **%s** |", fmt_num(estone[c.key].total_microsecs / 1e6), fmt_num(estone[c.key].estones)) end
  out(tot)
  out()
  if excluded ~= "" then out(excluded); out() end
end

-- ---- the seeds chart ------------------------------------------------------------------
local s = svg(1000)
s:para({ "lpvm: the seed papers' benchmarks", when }, 'font-size="13" fill="#222"')

-- thesis figure 3
local fig3 = {}
for _, c in ipairs(CONFIGS) do
  local r = seeds_of("fig3", c.key)[1]
  if r then fig3[c.key] = r end
end
if fig3.workers then
  local names = {}
  for _, row in ipairs(fig3.workers.rows) do names[#names + 1] = row.name end
  local function ms(cfg, i) return fig3[cfg] and fig3[cfg].rows[i] and fig3[cfg].rows[i].ms end
  local series = {}
  for _, c in ipairs(CONFIGS) do if fig3[c.key] then series[#series + 1] = { label = c.label, color = c.color, key = c.key } end end
  s:hbars({
    title = "Thesis figure 3: time relative to worker threads (shorter is faster)",
    subtitle = "chains of 4 processes, as EStone's msgp, 100 messages a loop: small, one integer (300 loops); medium, ~90 B of\n" ..
      "mixed types (300 loops); large, ~0.7 KB (100 loops).\n" ..
      "gs timeout: EStone's generic micro (1500 loops); timeout: EStone's timer micro (2000 loops). 1.0 = worker threads." ..
      ((fig3.workers.divisor or 1) > 1 and ("\nloops divided by " .. fig3.workers.divisor) or ""),
    groups = names, series = series, ref = 1,
    value = function(gi, si)
      local a, b = ms(series[si].key, gi), ms("workers", gi)
      return a and b and a / b
    end,
    fmt = function(v) return string.format("%.2f\195\151", v) end,
    fmt_axis = function(v) return string.format("%.1f", v) end,
    axis_label = "time / time with worker threads",
    left = 120,
  })
  out("## Thesis figure 3 (times in ms, and relative to worker threads)")
  out()
  local hdr, sep = "| run |", "|---|"
  for _, c in ipairs(series) do hdr = hdr .. " " .. c.key .. " |"; sep = sep .. "---:|" end
  out(hdr); out(sep)
  for i, n in ipairs(names) do
    local row = "| " .. n .. " |"
    for _, c in ipairs(series) do
      row = row .. string.format(" %s ms (%.2f\195\151) |", fmt_num(ms(c.key, i)), ms(c.key, i) / ms("workers", i))
    end
    out(row)
  end
  out()
end

-- thesis figure 4
local par = {}
for _, c in ipairs(CONFIGS) do par[c.key] = seeds_of("parallel", c.key)[1] end
if par.workers or par.workers1 or par.workers2 then
  local xs, series = {}, {}
  local any = par.workers2 or par.workers or par.workers1
  for _, r in ipairs(any.rows) do xs[#xs + 1] = r.k end
  for _, c in ipairs(CONFIGS) do
    local p = par[c.key]
    if p then
      local ys = {}
      for i, r in ipairs(p.rows) do ys[i] = r.ms end
      series[#series + 1] = { label = c.label, color = c.color, ys = ys }
    end
  end
  s:lines({
    title = "Thesis figure 4: k identical compute-bound processes at once",
    subtitle = string.format("each runs %s iterations of float arithmetic; time until all k are done. " ..
      "Flat while k <= CPUs in use, then rising.", fmt_num(any.iter)),
    xs = xs, series = series, xlabel = "processes (k)", ylabel = "ms",
  })
  out("## Thesis figure 4: parallelism (ms until k processes are done)")
  out()
  local hdr, sep = "| k |", "|---:|"
  for _, c in ipairs(CONFIGS) do if par[c.key] then hdr = hdr .. " " .. c.key .. " |"; sep = sep .. "---:|" end end
  out(hdr); out(sep)
  for i, k in ipairs(xs) do
    local row = "| " .. k .. " |"
    for _, c in ipairs(CONFIGS) do if par[c.key] then row = row .. " " .. fmt_num(par[c.key].rows[i].ms) .. " |" end end
    out(row)
  end
  out()
end

-- luaproc figures 1-2: idle processes
local procs = seeds_of("procs", "workers")
if #procs > 0 then
  local groups = {}
  for _, r in ipairs(procs) do groups[#groups + 1] = fmt_num(r.spawned) .. " processes" .. (r.aborted and " (aborted)" or "") end
  s:hbars({
    title = "luaproc figures 1-2: N processes each waiting for one message",
    subtitle = "creation: spawning them until every one has run to its receive (microseconds a process);\n" ..
      "memory: growth of the VM's resident set (VmRSS) per process, and the Lua heap a process reports.",
    groups = groups,
    series = { { label = "us to create a process", color = "#3b75af" } },
    value = function(gi) return procs[gi].us_per_process end,
    axis_label = "microseconds a process", left = 170,
  })
  s:hbars({
    title = "", groups = groups,
    series = { { label = "RSS bytes a process", color = "#8c6bb1" }, { label = "Lua heap bytes a process", color = "#c994c7" } },
    value = function(gi, si) return si == 1 and procs[gi].rss_bytes_per_process or procs[gi].lua_heap_bytes_per_process end,
    axis_label = "bytes a process", left = 170,
  })
  out("## luaproc figures 1-2: N idle processes (worker threads)")
  out()
  out("| N | create | per process | RSS per process | Lua heap per process | release all | peak RSS |")
  out("|---:|---:|---:|---:|---:|---:|---:|")
  for _, r in ipairs(procs) do
    out(string.format("| %s | %s ms | %.1f \194\181s | %s B | %s B | %s ms | %s MB |%s", fmt_num(r.spawned), fmt_num(r.create_ms),
      r.us_per_process, fmt_num(r.rss_bytes_per_process), fmt_num(r.lua_heap_bytes_per_process),
      fmt_num(r.release_ms), fmt_num(r.peak_rss_kb / 1024), r.aborted and (" aborted: " .. r.aborted) or ""))
  end
  out()
end

-- luaproc figure 3: message sizes
local ms_rows = {}
for _, c in ipairs(CONFIGS) do ms_rows[c.key] = seeds_of("msgsize", c.key)[1] end
if ms_rows.workers then
  local groups, series = {}, {}
  for _, r in ipairs(ms_rows.workers.rows) do groups[#groups + 1] = fmt_num(r.bytes) .. " B" end
  for _, c in ipairs(CONFIGS) do if ms_rows[c.key] then series[#series + 1] = { label = c.label, color = c.color, key = c.key } end end
  s:hbars({
    title = string.format("luaproc figure 3: %s messages sent one after another", fmt_num(ms_rows.workers.count)),
    subtitle = "total time until the receiver has them all, by message size (best of " .. (ms_rows.workers["repeat"] or 1) .. ")",
    groups = groups, series = series,
    value = function(gi, si) local r = ms_rows[series[si].key].rows[gi]; return r and r.ms end,
    axis_label = "ms for all the messages", left = 120,
  })
  out("## luaproc figure 3: message sizes")
  out()
  local hdr, sep = "| size |", "|---:|"
  for _, c in ipairs(series) do hdr = hdr .. " " .. c.key .. " total | per message |"; sep = sep .. "---:|---:|" end
  out(hdr); out(sep)
  for i, g in ipairs(groups) do
    local row = "| " .. g .. " |"
    for _, c in ipairs(series) do
      local r = ms_rows[c.key].rows[i]
      row = row .. string.format(" %s ms | %.2f \194\181s |", fmt_num(r.ms), r.us_per_message)
    end
    out(row)
  end
  out()
end

-- luaproc figure 4: recycling
local rec = seeds_of("recycle", "workers")
if #rec > 0 then
  local groups = {}
  for _, r in ipairs(rec) do groups[#groups + 1] = "recycle " .. r.limit end
  s:hbars({
    title = string.format("luaproc figure 4: %s short processes created in a loop", fmt_num(rec[1].k)),
    subtitle = "time until every one has run and reported, by lpvm.recycle limit (worker threads)",
    groups = groups, series = { { label = "ms", color = "#3b75af" } },
    value = function(gi) return rec[gi].ms end, axis_label = "ms", left = 120,
  })
  out("## luaproc figure 4: recycling")
  out()
  out("| recycle limit | processes | total | per process |")
  out("|---:|---:|---:|---:|")
  for _, r in ipairs(rec) do
    out(string.format("| %d | %s | %s ms | %.2f \194\181s |", r.limit, fmt_num(r.k), fmt_num(r.ms), r.us_per_process))
  end
  out()
end

-- Armstrong's ring
local rings = seeds_of("ring", "workers")
if #rings > 0 then
  local groups = {}
  for _, r in ipairs(rings) do groups[#groups + 1] = fmt_num(r.made) .. " processes" end
  s:hbars({
    title = "Armstrong's ring: N processes, a token sent round",
    subtitle = "creation: microseconds a spawn; passing: nanoseconds a hop (worker threads)",
    groups = groups,
    series = { { label = "us a spawn", color = "#3b75af" }, { label = "ns a hop / 1000 (us a hop)", color = "#ef8636" } },
    value = function(gi, si)
      local r = rings[gi]
      if si == 1 then return r.us_per_spawn end
      return r.ns_per_hop and r.ns_per_hop / 1000
    end,
    note = function(gi) return rings[gi].aborted and ("aborted: " .. rings[gi].aborted) or "-" end,
    axis_label = "microseconds", left = 170,
  })
  out("## Armstrong's ring (worker threads)")
  out()
  out("| N | laps | creation | per spawn | per hop | RSS per process | peak RSS |")
  out("|---:|---:|---:|---:|---:|---:|---:|")
  for _, r in ipairs(rings) do
    out(string.format("| %s | %d | %s ms | %.1f \194\181s | %s | %s B | %s MB |", fmt_num(r.made), r.laps,
      fmt_num(r.create_ms), r.us_per_spawn, r.ns_per_hop and (fmt_num(r.ns_per_hop) .. " ns") or ("aborted: " .. (r.aborted or "?")),
      fmt_num(r.rss_bytes_per_process), fmt_num(r.peak_rss_kb / 1024)))
  end
  for _, r in ipairs(seeds_of("ring_largest_skipped")) do
    out(string.format("\nA ring above 1M processes was not tried: %s kB available, ~%s B a process.",
      fmt_num(r.avail_kb), fmt_num(r.bytes_per_process)))
  end
  out()
end

local failed = {}
for _, r in ipairs(seeds) do if r.failed then failed[#failed + 1] = r.case .. " (" .. r.config .. ", " .. (r.args or "") .. ")" end end
if #failed > 0 then
  s:para({ "FAILED: " .. table.concat(failed, "; ") }, 'fill="#b00"')
  out("**Failed:** " .. table.concat(failed, "; "))
  out()
end

if #seeds > 0 then write(DIR .. "/seeds.svg", s:finish()) end
write(DIR .. "/summary.md", "# lpvm EStone and seed benchmarks\n\n" .. table.concat(md, "\n") .. "\n")
json.write(DIR .. "/all.json", { meta = meta, estone = estone, seeds = seeds })
print("chart.lua: wrote " .. DIR .. "/{estone.svg,seeds.svg,summary.md,all.json}")
