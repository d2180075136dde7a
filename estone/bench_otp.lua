-- bench_otp.lua -- one OTP benchmark per run, for estone/bench_otp.sh.
--
--   lpvm estone/bench_otp.lua refcall QUEUED N   -- monitor+alias call by hand, QUEUED
--                                                   unrelated messages in the caller's mailbox
--   lpvm estone/bench_otp.lua gs_call QUEUED N   -- gen_server.call round trip (to the
--                                                   server in estone/bench_echo.lua)
--   lpvm estone/bench_otp.lua sup K              -- simple_one_for_one: start K children,
--                                                   then stop the supervisor
--
-- Each prints one line: the case name and key=value pairs (times in ns).
local what = arg[1]
local now = lpvm.now_us

-- One result line: the case, then the given key=value pairs in order.
local function report(...)
  print(string.format("%s " .. string.rep("%s=%s", select("#", ...) // 2, " "), what, ...))
end

local function fill(q)
  local me = lpvm.self()
  for i = 1, q do lpvm.send(me, "junk", i) end
end

if what == "refcall" then
  local q, n = math.tointeger(tonumber(arg[2])), math.tointeger(tonumber(arg[3]))
  local srv = lpvm.spawn(function()
    while true do
      local from, tag, req = lpvm.receive()
      if from == "stop" then return end
      lpvm.send_alias(from, tag, req)
    end
  end)
  fill(q)
  local me = lpvm.self()
  local t0 = now()
  for i = 1, n do
    local m = lpvm.monitor(srv, "alias")
    lpvm.send(srv, me, m, i)
    local _, v = lpvm.receive_ref(m, 5000)
    lpvm.demonitor(m, "flush")
    assert(v == i)
  end
  local dt = now() - t0
  lpvm.send(srv, "stop")
  report("queued", q, "n", n, "ns_per_call", dt * 1000 // n)
elseif what == "gs_call" then
  local q, n = math.tointeger(tonumber(arg[2])), math.tointeger(tonumber(arg[3]))
  local gen_server = require "gen_server"
  local srv = assert(gen_server.start("bench_echo", nil))   -- estone/bench_echo.lua
  fill(q)
  local call = gen_server.call
  local t0 = now()
  for i = 1, n do assert(call(srv, i) == i) end
  local dt = now() - t0
  gen_server.stop(srv)
  report("queued", q, "n", n, "ns_per_call", dt * 1000 // n)
elseif what == "sup" then
  -- simple_one_for_one: start K gen_server children (estone/bench_echo.lua), then stop
  -- the supervisor, which stops them all
  local k = math.tointeger(tonumber(arg[2]))
  local supervisor = require "supervisor"
  -- lpvm.registered() marks the phases for estone/cg_sup.sh (callgrind dumps its
  -- counts before each call: start-up, starting the children, stopping them)
  local t0 = now()
  local sup = assert(supervisor.start_link({ strategy = "simple_one_for_one",
    children = { { start = { "gen_server", "start_link", "bench_echo" } } } }))
  lpvm.registered()
  for i = 1, k do assert(supervisor.start_child(sup, { i })) end
  local t1 = now()
  lpvm.registered()
  lpvm.unlink(sup)
  local ref = lpvm.monitor(sup)
  lpvm.exit(sup, "shutdown")
  lpvm.receive_ref(ref)
  local t2 = now()
  lpvm.registered()
  report("k", k, "start_us_per_child", (t1 - t0) // k, "stop_us_per_child", (t2 - t1) // k)
else
  io.stderr:write("bench_otp.lua: unknown case ", tostring(what), "\n")
  lpvm.halt(2)
end
