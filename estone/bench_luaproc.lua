-- bench_luaproc.lua -- the luaproc paper's benchmarks (section 4), one case per run,
-- through the luaproc compatibility layer and, for comparison, written with lpvm's
-- native API. For estone/bench_luaproc.sh.
--
--   lpvm   estone/bench_luaproc.lua CASE ARGS      -- luaproc cases and native cases
--   LUA_CPATH='build/vm/?.so;;' lua5.4 estone/bench_luaproc.lua CASE ARGS
--                                                  -- luaproc cases in the stock lua
-- Cases:
--   create N          N processes, each with its own channel, each waiting for one
--                     message the main script sends once all exist (paper 4.1)
--   create_native N   the same with lpvm.spawn and pids (no channels)
--   msg SIZE REPS     1,000 messages of SIZE bytes to one receiver, REPS times (4.3)
--   msg_native SIZE REPS       the same with lpvm.send (asynchronous) and one final ack
--   msg_native_sync SIZE REPS  lpvm.send with an ack per message: luaproc's rendezvous
--   recycle K MAX     K processes made one after another, each printing a line, with
--                     at most MAX recycled states (4.4); run with stdout to /dev/null
--   recycle_native K MAX       the same with lpvm.spawn and lpvm.recycle
-- Each prints one line of key=value pairs on stderr (stdout may be /dev/null).
local luaproc = require "luaproc"
local what = arg[1]
local A, B = tonumber(arg[2]), tonumber(arg[3])

-- Milliseconds. The main script of the stock lua is no lpvm process and has no
-- lpvm.now: a one-shot luaproc process reads the clock for it.
local function now()
  if lpvm then return lpvm.now() end
  luaproc.newproc([[ luaproc.send("$clock", lpvm.now()) ]])
  return luaproc.receive("$clock")
end
if not lpvm then luaproc.newchannel("$clock") end

local function report(t)
  local keys, out = {}, { what }
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do out[#out + 1] = k .. "=" .. tostring(t[k]) end
  io.stderr:write(table.concat(out, " "), "\n")
end

local function per(total_ms, n) return math.floor(total_ms * 1e6 / n) end   -- ns each

if what == "create" then
  local n = math.tointeger(A)
  local t0 = now()
  for i = 1, n do
    luaproc.newchannel("c" .. i)
    luaproc.newproc("luaproc.receive('c" .. i .. "')")
  end
  local t1 = now()
  for i = 1, n do luaproc.send("c" .. i, true) end
  luaproc.wait()
  local t2 = now()
  report({ n = n, create_ms = t1 - t0, total_ms = t2 - t0, ns_per_proc = per(t2 - t0, n) })

elseif what == "create_native" then
  local n, me = math.tointeger(A), lpvm.self()
  local t0 = now()
  local pids = {}
  for i = 1, n do pids[i] = lpvm.spawn(function() lpvm.receive(); lpvm.send(me, 1) end) end
  local t1 = now()
  for i = 1, n do lpvm.send(pids[i], true) end
  for _ = 1, n do lpvm.receive() end
  local t2 = now()
  report({ n = n, create_ms = t1 - t0, total_ms = t2 - t0, ns_per_proc = per(t2 - t0, n) })

elseif what == "msg" then
  local size, reps = math.tointeger(A), math.tointeger(B)
  local payload = string.rep("x", size)
  luaproc.newchannel("m")
  luaproc.newproc([[ while luaproc.receive("m") ~= "stop" do end ]])
  local t0 = now()
  for _ = 1, 1000 * reps do luaproc.send("m", payload) end
  luaproc.send("m", "stop")
  local t1 = now()
  luaproc.wait()
  report({ size = size, msgs = 1000 * reps, ms_per_1000 = (t1 - t0) / reps,
           ns_per_msg = per(t1 - t0, 1000 * reps) })

elseif what == "msg_native" or what == "msg_native_sync" then
  local size, reps, sync = math.tointeger(A), math.tointeger(B), what == "msg_native_sync"
  local payload, me = string.rep("x", size), lpvm.self()
  local pid = lpvm.spawn(function(ack_each)
    while true do
      local v = lpvm.receive()
      if ack_each or v == "stop" then lpvm.send(me, true) end
      if v == "stop" then return end
    end
  end, sync)
  local t0 = now()
  for _ = 1, 1000 * reps do
    lpvm.send(pid, payload)
    if sync then lpvm.receive() end
  end
  lpvm.send(pid, "stop")
  lpvm.receive()
  local t1 = now()
  report({ size = size, msgs = 1000 * reps, ms_per_1000 = (t1 - t0) / reps,
           ns_per_msg = per(t1 - t0, 1000 * reps) })

elseif what == "recycle" then
  local k, max = math.tointeger(A), math.tointeger(B)
  luaproc.recycle(max)
  local t0 = now()
  for _ = 1, k do luaproc.newproc([[ print("hello from a Lua process") ]]) end
  luaproc.wait()
  local t1 = now()
  report({ k = k, recycle = max, total_ms = t1 - t0, ns_per_proc = per(t1 - t0, k) })

elseif what == "recycle_native" then
  local k, max, me = math.tointeger(A), math.tointeger(B), lpvm.self()
  lpvm.recycle(max)
  local t0 = now()
  for _ = 1, k do
    lpvm.spawn(function() print("hello from a Lua process"); lpvm.send(me, 1) end)
  end
  for _ = 1, k do lpvm.receive() end
  local t1 = now()
  report({ k = k, recycle = max, total_ms = t1 - t0, ns_per_proc = per(t1 - t0, k) })

else
  io.stderr:write("bench_luaproc.lua: unknown case '", tostring(what), "'\n")
  os.exit(1)
end
