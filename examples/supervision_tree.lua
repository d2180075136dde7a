-- supervision_tree.lua -- a two-level supervision tree (docs/otp.md):
--
--   top (one_for_one)
--   ├── cache            a gen_server worker
--   └── pool (one_for_one, at most 2 restarts in 5 s)
--       ├── w1           gen_server workers
--       └── w2
--
--   lpvm examples/supervision_tree.lua
--
-- A crashing worker is restarted by its supervisor; after w2's crash and two of
-- w1's, pool has restarted three children in 5 s, one more than it may: it gives up
-- (stopping w2) and top restarts the whole pool. Then the tree shuts down cleanly,
-- children before parents, in reverse start order.
-- The supervisor reports and crash reports go to stderr.
local gen_server = require "gen_server"
local supervisor = require "supervisor"

-- The worker: this file is also its callback module (required by name in each worker).
local worker = {}
function worker.start_link(name) return gen_server.start_link("supervision_tree", name, { name = name }) end
function worker.init(name)
  lpvm.trap_exit(true)             -- so terminate runs when the supervisor stops it
  print("  start " .. name)
  return "ok", name
end
function worker.handle_call(req, _, name)
  if req == "crash" then error(name .. " was asked to crash") end
  return "reply", name .. " is fine", name
end
function worker.terminate(reason, name)
  local why = tostring(reason):match("^[^\n]*")          -- the first line, without
  print("  stop  " .. name .. " (" .. (why:match(":%d+: (.*)$") or why) .. ")")   -- file:line
end
if (...) == "supervision_tree" then return worker end

-- ---- the demo -----------------------------------------------------------------------------
lpvm.log_level("critical")   -- keep the reports off this demo's output (see docs/otp.md)
local function w(name) return { id = name, start = { "supervision_tree", "start_link", name } } end

print("starting the tree")
local top = assert(supervisor.start_link({ strategy = "one_for_one", intensity = 3, period = 5,
  children = {
    w("cache"),
    { id = "pool", type = "supervisor",
      start = { "supervisor", "start_link", { strategy = "one_for_one", intensity = 2, period = 5,
                                              children = { w("w1"), w("w2") } } } },
  } }, nil, { name = "top" }))

-- Crash a worker, then wait (up to 10 s) until its supervisor has started it again: a
-- new pid under its name. A fixed sleep is not enough on a busy machine.
local function crash(name)
  print("crash " .. name)
  local old = lpvm.whereis(name)
  pcall(gen_server.call, name, "crash")
  for _ = 1, 1000 do
    local now = lpvm.whereis(name)
    if now and now ~= old then return end
    lpvm.sleep(10)
  end
  error(name .. " was not restarted within 10 s")
end

crash("w2")
print(gen_server.call("w2", "ping"))
for _ = 1, 3 do crash("w1") end   -- the second is pool's third restart in 5 s
print(gen_server.call("w1", "ping"))
local c = supervisor.count_children("top")
print(string.format("top: %d children, %d active, %d supervisor", c.specs, c.active, c.supervisors))

print("shutting down")
lpvm.unlink(top)
local ref = lpvm.monitor(top)
lpvm.exit(top, "shutdown")
local _, _, _, _, reason = lpvm.receive_ref(ref)
print("top ended: " .. reason)
