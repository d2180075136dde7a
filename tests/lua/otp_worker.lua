-- otp_worker.lua -- a gen_server worker for test_supervisor.lua: it tells its
-- reporter (a registered name) when it starts and stops, crashes on demand, and can
-- refuse to start or be slow to stop.
local lpvm = require "lpvm"
local gen_server = require "gen_server"
local w = {}

-- opts.gate: a registered name asked before each start ({"ask", pid} -> {"gate", "no"}
-- fails this start with "gated"); no such name, no question.
function w.start_link(id, opts)
  opts = opts or {}
  if opts.gate and lpvm.whereis(opts.gate) then
    lpvm.send(opts.gate, "ask", lpvm.self())
    local _, answer = lpvm.receive(function(t) return t == "gate" end)
    if answer == "no" then return nil, "gated" end
  end
  return gen_server.start_link("otp_worker", { id = id, opts = opts })
end

function w.init(a)
  local o = a.opts
  if o.fail_start then return "stop", "refused" end
  if o.ignore then return "ignore" end
  if o.trap then lpvm.trap_exit(true) end
  if o.report and lpvm.whereis(o.report) then lpvm.send(o.report, "started", a.id, lpvm.self()) end
  return "ok", a
end

function w.handle_call(req, _, s)
  if req == "crash" then error("worker crashed on purpose") end
  if req == "id" then return "reply", s.id, s end
  return "reply", req, s
end

function w.handle_cast(req, s)
  if req == "crash" then error("worker crashed on purpose") end
  if req == "stop_normal" then return "stop", "normal", s end
  return "noreply", s
end

function w.terminate(reason, s)
  local o = s.opts
  if o.slow_stop then lpvm.sleep(o.slow_stop) end
  if o.report and lpvm.whereis(o.report) then lpvm.send(o.report, "stopped", s.id, reason) end
end

return w
