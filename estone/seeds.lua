-- seeds.lua -- the benchmarks of the papers lpvm grows from, one per VM run.
--
--   lpvm [vm options] estone/seeds.lua CASE [args] [--json FILE] [--config NAME]
--
--   procs N [MAX_KB MAX_S]    luaproc figs 1-2: N processes each waiting for one
--                             message: creation time, bytes per process (RSS growth
--                             from /proc/self/status, and the Lua heap lpvm.info
--                             reports), then the time to release them all
--   msgsize COUNT REPEAT      luaproc fig 3: COUNT messages of 10 B, 1 KB, 10 KB and
--                             100 KB sent one after another to a receiver
--   recycle K LIMIT           luaproc fig 4: K short processes, created in a loop,
--                             with lpvm.recycle(LIMIT)
--   parallel MAXK ITER        thesis fig 4: 1..MAXK identical compute-bound processes
--                             at once; time against count
--   ring N M [MAX_KB MAX_S]   Armstrong's ring (tech report 5.1): N processes, a
--                             token round M laps: creation time, ns per hop
--   fig3 REPEAT [DIV]         thesis fig 3: small, medium and large messages, gs
--                             timeout and timeout (run it once per VM configuration)
--
-- MAX_KB / MAX_S bound a big run: it stops spawning (and reports "aborted") when the
-- VM's resident set passes MAX_KB or the spawning passes MAX_S seconds.
-- Each case prints a line for people and a line "JSON {...}" for run_estone.sh.

local dir = (arg and arg[0] or "estone/seeds.lua"):match("^(.*)/[^/]*$") or "."
package.path = dir .. "/?.lua;" .. package.path
local C = require("micros.common")
local json = require("json")

local args, opts = {}, {}
do
  local i = 1
  while arg[i] do
    if arg[i] == "--json" then opts.json = arg[i + 1]; i = i + 1
    elseif arg[i] == "--config" then opts.config = arg[i + 1]; i = i + 1
    else args[#args + 1] = arg[i] end
    i = i + 1
  end
end
local what = args[1]
local function num(i, default)
  local v = args[i] and math.tointeger(tonumber(args[i]))
  return v or default
end

local me = lpvm.self()
local mode = lpvm.info().mode
local clock = C.clock_us
local function ms_since(t0) return (clock() - t0) / 1000 end
local function rss_kb() return C.status_kb("VmRSS") end

local function emit(r)
  r.case = what
  r.config = opts.config or (mode == "thread" and "threads" or "workers")
  r.process_mode = mode
  r.clock = C.clock_name
  r.peak_rss_kb = C.status_kb("VmHWM")
  local line = json.encode(r):gsub("\n%s*", " ")
  print("JSON " .. line)
  if opts.json then json.write(opts.json, r) end
end

-- A guard for big runs: every 10,000 spawns, stop if RSS or time is past its bound.
local function guard(max_kb, max_s, t0)
  return function(i)
    if i % 10000 ~= 0 then return true end
    if max_kb and max_kb > 0 and rss_kb() > max_kb then return false, "rss above " .. max_kb .. " kB" end
    if max_s and max_s > 0 and ms_since(t0) > max_s * 1000 then return false, "spawning took over " .. max_s .. " s" end
    return true
  end
end

local cases = {}

-- procs N: N processes, each says it is up and waits for one message.
function cases.procs()
  local n = num(2, 10000)
  local ok_to_go = guard(num(3), num(4), clock())
  local function idle(parent)
    lpvm.send(parent, "up")
    lpvm.receive()
    lpvm.send(parent, "bye")
  end
  collectgarbage()
  local rss0 = rss_kb()
  local t0 = clock()
  local pids, aborted = {}, nil
  for i = 1, n do
    pids[i] = lpvm.spawn(idle, me)
    local ok, why = ok_to_go(i)
    if not ok then aborted = why .. " at " .. i .. " processes"; break end
  end
  local spawned = #pids
  local spawn_ms = ms_since(t0)
  for _ = 1, spawned do lpvm.receive() end          -- every one is up and waiting
  local create_ms = ms_since(t0)
  local rss1 = rss_kb()
  local heap = 0
  local sample = math.min(spawned, 100)
  for i = 1, sample do
    local inf = lpvm.info(pids[(i * 7919) % spawned + 1])
    heap = heap + (inf and inf.memory or 0)
  end
  local t1 = clock()
  for i = 1, spawned do lpvm.send(pids[i], "go") end
  for _ = 1, spawned do lpvm.receive() end
  local release_ms = ms_since(t1)
  local r = {
    n = n, spawned = spawned, aborted = aborted,
    spawn_ms = spawn_ms, create_ms = create_ms,
    us_per_process = create_ms * 1000 / spawned,
    rss_bytes_per_process = (rss1 - rss0) * 1024 / spawned,
    lua_heap_bytes_per_process = heap / sample,
    rss_before_kb = rss0, rss_after_kb = rss1,
    release_ms = release_ms,
  }
  print(string.format("procs: %d processes: created in %.0f ms (%.2f us each), %.0f B RSS each (Lua heap %.0f B), released in %.0f ms%s",
    spawned, create_ms, r.us_per_process, r.rss_bytes_per_process, r.lua_heap_bytes_per_process,
    release_ms, aborted and (" -- aborted: " .. aborted) or ""))
  emit(r)
end

-- msgsize COUNT REPEAT: the main process sends the same message COUNT times, one after
-- another, to a receiver that answers once it has them all. Best of REPEAT.
function cases.msgsize()
  local count, rep = num(2, 1000), num(3, 5)
  local function sink(parent, k)
    while true do
      for _ = 1, k do lpvm.receive() end
      lpvm.send(parent, "all")
    end
  end
  local p = lpvm.spawn(sink, me, count)
  local rows = {}
  for _, size in ipairs({ 10, 1000, 10000, 100000 }) do
    local msg = string.rep("x", size)
    local best, all = math.huge, {}
    for _ = 1, rep do
      local t0 = clock()
      for _ = 1, count do lpvm.send(p, msg) end
      assert(lpvm.receive() == "all")
      local ms = ms_since(t0)
      all[#all + 1] = ms
      if ms < best then best = ms end
    end
    rows[#rows + 1] = { bytes = size, count = count, ms = best, runs_ms = all,
                        us_per_message = best * 1000 / count }
    print(string.format("msgsize: %d messages of %d B: %.2f ms (%.2f us a message)",
      count, size, best, best * 1000 / count))
  end
  lpvm.exit(p, "kill")
  emit({ count = count, ["repeat"] = rep, rows = rows })
end

-- recycle K LIMIT: create K processes in a loop, as luaproc's test does; each one
-- tells the creator it ran and ends. The time is until the last has reported.
function cases.recycle()
  local k, limit = num(2, 100000), num(3, 0)
  lpvm.recycle(limit)
  local function short(parent) lpvm.send(parent, 1) end
  local t0 = clock()
  for _ = 1, k do lpvm.spawn(short, me) end
  local spawn_ms = ms_since(t0)
  for _ = 1, k do lpvm.receive() end
  local ms = ms_since(t0)
  print(string.format("recycle: %d processes, recycle limit %d: %.0f ms (%.2f us each)",
    k, limit, ms, ms * 1000 / k))
  emit({ k = k, limit = limit, ms = ms, spawn_ms = spawn_ms, us_per_process = ms * 1000 / k })
end

-- parallel MAXK ITER: for k = 1..MAXK, k processes each run the same compute-bound
-- loop (ITER iterations of float arithmetic); the time is until all k are done.
function cases.parallel()
  local maxk, iter = num(2, 6), num(3, 3000000)
  local function work(parent, n)
    local x = 0.0
    for i = 1, n do x = x + (i % 7) * 0.5 - x / (i + 1.0) end
    lpvm.send(parent, x)
  end
  local rows = {}
  for k = 1, maxk do
    local t0 = clock()
    for _ = 1, k do lpvm.spawn(work, me, iter) end
    for _ = 1, k do lpvm.receive() end
    local ms = ms_since(t0)
    rows[#rows + 1] = { k = k, ms = ms }
    print(string.format("parallel: %d process(es) x %d iterations: %.0f ms", k, iter, ms))
  end
  emit({ iter = iter, rows = rows })
end

-- ring N M: Armstrong's ring.
function cases.ring()
  local n, m = num(2, 10000), num(3, 10)
  local ok_to_go = guard(num(4), num(5), clock())
  local function node(nxt)
    while true do
      local v = lpvm.receive()
      lpvm.send(nxt, v)
      if v == "stop" then return end
    end
  end
  collectgarbage()
  local rss0 = rss_kb()
  local t0 = clock()
  local first, made, aborted = me, 1, nil
  for i = 1, n - 1 do
    first = lpvm.spawn(node, first)
    made = made + 1
    local ok, why = ok_to_go(i)
    if not ok then aborted = why .. " at " .. made .. " processes"; break end
  end
  local create_ms = ms_since(t0)
  local rss1 = rss_kb()
  local r = { n = n, made = made, laps = m, create_ms = create_ms,
              us_per_spawn = create_ms * 1000 / (made - 1),
              rss_bytes_per_process = (rss1 - rss0) * 1024 / made, aborted = aborted }
  if not aborted then
    local t1 = clock()
    for lap = 1, m do
      lpvm.send(first, lap)
      assert(lpvm.receive() == lap)
    end
    local ms = ms_since(t1)
    r.hops = n * m
    r.pass_ms = ms
    r.ns_per_hop = ms * 1e6 / (n * m)
  end
  print(string.format("ring: %d processes: created in %.0f ms (%.2f us each, %.0f B RSS each)%s",
    made, create_ms, r.us_per_spawn, r.rss_bytes_per_process,
    aborted and (" -- aborted: " .. aborted) or
      string.format(", %d laps: %d hops in %.0f ms (%.0f ns a hop)", m, r.hops, r.pass_ms, r.ns_per_hop)))
  emit(r)
end

-- fig3 REPEAT: the five runs of the thesis's figure 3. Message passing runs a chain of
-- 4 processes (as EStone's msgp) with a small integer, a "line of text" mix of types
-- (about 90 bytes as a term) and a large message (about 0.7 KB); gs timeout is EStone's
-- generic micro, timeout its timer micro. Best of REPEAT runs each; times in ms.
function cases.fig3()
  local rep, div = num(2, 3), num(3, 1)
  local function n(loops) return math.max(1, loops // div) end
  local chain = require("micros.chain")
  local generic = require("micros.generic")
  local timer = require("micros.timer")
  local medium = { "medium", 42, 3.14, true, { lpvm.self(), "a line of text" }, { 1, 2, 3 } }
  local large = {}
  for i = 1, 16 do large[i] = { i, "twenty byte string..", i * 1.5 } end
  local runs = {
    { "small", function() return chain.run(n(300), 4, 7) end },
    { "medium", function() return chain.run(n(300), 4, medium) end },
    { "large", function() return chain.run(n(100), 4, large) end },
    { "gs timeout", function() return generic(n(1500)) end },
    { "timeout", function() return timer(n(2000)) end },
  }
  local rows = {}
  for _, run in ipairs(runs) do
    local best, all = math.huge, {}
    for _ = 1, rep do
      local t0 = C.start()
      run[2]()
      local ms = ms_since(t0)
      all[#all + 1] = ms
      if ms < best then best = ms end
    end
    rows[#rows + 1] = { name = run[1], ms = best, runs_ms = all }
    print(string.format("fig3: %-10s %8.1f ms", run[1], best))
  end
  emit({ ["repeat"] = rep, divisor = div, rows = rows })
end

local f = cases[what]
if not f then
  io.stderr:write("usage: lpvm [vm options] estone/seeds.lua procs|msgsize|recycle|parallel|ring|fig3 [args] [--json FILE] [--config NAME]\n")
  lpvm.halt(2)
end
f()
lpvm.halt(0)
