-- supervisor.lua -- a supervisor restarts a crashing worker, through trap_exit.
--
-- The worker serves requests under the registered name "worker" and crashes on bad
-- ones. The supervisor (the boot process) traps exits, so a crash reaches it as an
-- "EXIT", pid, reason message instead of killing it; it starts a new worker, unless
-- crashes come too often. A client process sends requests meanwhile.
local MAX_RESTARTS = 5

-- The worker. A spawned function takes its upvalues by value (plain data only), so
-- everything it needs is global (lpvm, print, ...) or an argument.
local function worker(n)
  lpvm.register("worker")
  print(string.format("  worker #%d up as %s", n, tostring(lpvm.self())))
  while true do
    local op, x, from = lpvm.receive()
    if op == "stop" then return end
    if op == "sqrt" then
      if x < 0 then error("cannot take the square root of " .. x) end
      lpvm.send(from, "result", x, math.sqrt(x))
    end
  end
end

-- The client: asks for square roots; the negative ones crash the worker. It monitors
-- the worker for each request, so a crash answers with a DOWN instead of silence.
local function client(supervisor, numbers)
  for _, x in ipairs(numbers) do
    local w = lpvm.whereis("worker")
    while not w do lpvm.sleep(1); w = lpvm.whereis("worker") end   -- restarting
    local ref = lpvm.monitor(w)
    lpvm.send(w, "sqrt", x, lpvm.self())
    local tag, a, b = lpvm.receive(function(t, r)
      return t == "result" or (t == "DOWN" and r == ref)
    end)
    if tag == "result" then
      lpvm.demonitor(ref)
      print(string.format("client: sqrt(%g) = %g", a, b))
    else
      print(string.format("client: the worker crashed on sqrt(%g)", x))
    end
  end
  lpvm.send(supervisor, "client done")
end

lpvm.trap_exit(true)
local restarts = 0
local w = lpvm.spawn_link(worker, 1)
lpvm.spawn(client, lpvm.self(), { 4, 2, -1, 9, -4, 16 })
while true do
  local tag, pid, reason = lpvm.receive()
  if tag == "EXIT" and pid == w then
    if reason == "normal" then break end
    restarts = restarts + 1
    print(string.format("supervisor: worker died (%s); restart #%d",
                        tostring(reason):match("[^\n]*"), restarts))
    if restarts > MAX_RESTARTS then
      print("supervisor: too many restarts, giving up")
      break
    end
    w = lpvm.spawn_link(worker, restarts + 1)
  elseif tag == "client done" then
    lpvm.send(w, "stop")
  end
end
print(string.format("done: the worker was restarted %d times", restarts))
