-- bench_lua.lua -- one Lua-process benchmark per run, for estone/bench_lua.sh.
--
--   lpvm [--threads] estone/bench_lua.lua ring N M
--   lpvm [--threads] estone/bench_lua.lua spawn K RECYCLE
--   lpvm [--threads] estone/bench_lua.lua idle K
--   lpvm [--threads] estone/bench_lua.lua msg SIZE ROUNDS
--
-- Each prints one line of key=value pairs (times in ns unless the key says so) and
-- the VM's peak resident set size (VmHWM of /proc/self/status) as rss_kb.
local what = arg[1]

local function status_kb(field)
  local f = io.open("/proc/self/status")
  if not f then return 0 end
  local s = f:read("a")
  f:close()
  return tonumber(s:match(field .. ":%s*(%d+)")) or 0
end

local function report(t)
  t.rss_kb = status_kb("VmHWM")
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  local out = { what }
  for _, k in ipairs(keys) do out[#out + 1] = k .. "=" .. tostring(t[k]) end
  print(table.concat(out, " "))
end

local me = lpvm.self()

if what == "ring" then
  local n, m = math.tointeger(tonumber(arg[2])), math.tointeger(tonumber(arg[3]))
  local function node(nxt)
    while true do
      local v = lpvm.receive()
      lpvm.send(nxt, v)
      if v == "stop" then return end
    end
  end
  local t0 = lpvm.now()
  local first = me
  for _ = 1, n - 1 do first = lpvm.spawn(node, first) end
  local t1 = lpvm.now()
  for lap = 1, m do
    lpvm.send(first, lap)
    lpvm.receive()
  end
  local t2 = lpvm.now()
  lpvm.send(first, "stop")
  lpvm.receive()
  report({ n = n, laps = m, create_ms = t1 - t0,
           ns_per_spawn = (t1 - t0) * 1000000 // (n - 1),
           ns_per_hop = (t2 - t1) * 1000000 // (n * m) })

elseif what == "spawn" then
  -- K processes that end at once; each tells us it ran. With RECYCLE > 0 finished
  -- states go back to a pool and are reused.
  local k, rec = math.tointeger(tonumber(arg[2])), math.tointeger(tonumber(arg[3]))
  lpvm.recycle(rec)
  local batch = 1000
  local t0 = lpvm.now()
  local done = 0
  while done < k do
    local b = math.min(batch, k - done)
    for _ = 1, b do lpvm.spawn(function(p) lpvm.send(p, 1) end, me) end
    for _ = 1, b do lpvm.receive() end
    done = done + b
  end
  local dt = lpvm.now() - t0
  report({ k = k, recycle = rec, ms = dt, ns_per_spawn = dt * 1000000 // k,
           spawns_per_s = dt > 0 and (k * 1000 // dt) or 0 })

elseif what == "idle" then
  -- K processes blocked in receive: RSS growth per process, and the Lua heap each
  -- one reports (info().memory).
  local k = math.tointeger(tonumber(arg[2]))
  collectgarbage()
  local rss0 = status_kb("VmRSS")
  local pids = {}
  for i = 1, k do pids[i] = lpvm.spawn(function() lpvm.receive() end) end
  -- let every one reach its receive
  lpvm.sleep(200)
  local rss1 = status_kb("VmRSS")
  local heap, sampled = 0, 0
  for i = 1, k, math.max(1, k // 200) do
    local inf = lpvm.info(pids[i])
    if inf then heap = heap + inf.memory; sampled = sampled + 1 end
  end
  for i = 1, k do lpvm.send(pids[i], "stop") end
  report({ k = k, rss_bytes_per_proc = (rss1 - rss0) * 1024 // k,
           heap_bytes_per_proc = sampled > 0 and heap // sampled or 0 })

elseif what == "msg" then
  -- ping-pong of a SIZE-byte string: one round trip is two messages.
  local size, rounds = math.tointeger(tonumber(arg[2])), math.tointeger(tonumber(arg[3]))
  local payload = ("m"):rep(size)
  local pong = lpvm.spawn(function()
    while true do
      local from, data = lpvm.receive()
      if from == "stop" then return end
      lpvm.send(from, data)
    end
  end)
  -- warm up
  for _ = 1, 10 do lpvm.send(pong, me, payload); lpvm.receive() end
  local t0 = lpvm.now()
  for _ = 1, rounds do
    lpvm.send(pong, me, payload)
    lpvm.receive()
  end
  local dt = lpvm.now() - t0
  lpvm.send(pong, "stop")
  local ns = dt * 1000000 // (2 * rounds)
  report({ size = size, rounds = rounds, ns_per_msg = ns,
           mb_per_s = dt > 0 and math.tointeger((2 * rounds * size * 1000) // (dt * 1000000)) or 0 })
else
  io.stderr:write("usage: bench_lua.lua ring N M | spawn K RECYCLE | idle K | msg SIZE ROUNDS\n")
  lpvm.halt(1)
end
