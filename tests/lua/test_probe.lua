-- test_probe.lua -- the figures of issue 10's reliability probe, kept true at a scaled
-- size: many senders lose, duplicate or reorder nothing; a kill storm gives every
-- DOWN and EXIT exactly once; spawn/exit churn leaves no process or memory behind.
-- The full sizes (10M messages, 100k links, 1M spawns) run in `make soak`.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

test("8 senders: no message lost, duplicated or reordered", function()
  local senders, per = 8, T.scaled(60000, 5000)
  local me = lpvm.self()
  local rcv = lpvm.spawn(function(parent, nsend, n)
    local seen, bad, got = {}, 0, 0
    for s = 1, nsend do seen[s] = 0 end
    while got < nsend * n do
      local s, k = lpvm.receive()
      if k ~= seen[s] + 1 then bad = bad + 1 end
      seen[s] = k
      got = got + 1
    end
    local extra = lpvm.receive(200)   -- a duplicate would still be queued
    lpvm.send(parent, "counted", got, bad, extra)
  end, me, senders, per)
  for s = 1, senders do
    lpvm.spawn(function(to, id, n) for k = 1, n do lpvm.send(to, id, k) end end, rcv, s, per)
  end
  local r = T.recv_match(function(tag) return tag == "counted" end, 120000)
  T.eq(r[2], senders * per)
  T.eq(r[3], 0, "out of order")
  T.eq(r[4], nil, "a message too many")
end)

test("kill storm: every DOWN and every EXIT exactly once", function()
  local n = T.scaled(5000, 200)
  local me = lpvm.self()
  -- a root with n linked children; odd ones trap exits and report the EXIT message,
  -- even ones die with the root; the test monitors them all
  local root = lpvm.spawn(function(parent, count)
    local kids = {}
    for i = 1, count do
      kids[i] = lpvm.spawn_link(function(p, trap)
        if trap then
          lpvm.trap_exit(true)
          lpvm.send(p, "trapping")
          local tag, from, why = lpvm.receive(function(t) return t == "EXIT" end)
          lpvm.send(p, "exit_seen", lpvm.self(), why)
          lpvm.receive(function(t) return t == "EXIT" end, 300)   -- a second one?
        else
          lpvm.receive()
        end
      end, parent, i % 2 == 1)
    end
    lpvm.send(parent, "kids", kids)
    lpvm.receive()
  end, me, n)
  local _, kids = table.unpack(T.recv_match(function(t) return t == "kids" end, 60000))
  for _ = 1, (n + 1) // 2 do T.recv_match(function(t) return t == "trapping" end, 60000) end
  local refs = {}
  for _, pid in ipairs(kids) do refs[lpvm.monitor(pid)] = pid end
  lpvm.exit(root, "kill")
  local downs, exits, dup = 0, 0, 0
  local exited = {}
  while downs < n or exits < (n + 1) // 2 do
    local m = T.recv_match(function(t) return t == "DOWN" or t == "exit_seen" end, 60000)
    if m[1] == "DOWN" then
      if refs[m[2]] then refs[m[2]] = nil; downs = downs + 1 else dup = dup + 1 end
    else
      if exited[m[2]] then dup = dup + 1 else exited[m[2]] = true; exits = exits + 1 end
      T.eq(m[3], "killed", "the root's reason")
    end
  end
  T.eq(downs, n)
  T.eq(exits, (n + 1) // 2)
  T.eq(dup, 0)
  T.no_msg(300)
end)

local function rss_kb()
  local f = io.open("/proc/self/status")
  if not f then return 0 end
  local s = f:read("a")
  f:close()
  return tonumber(s:match("VmRSS:%s*(%d+)")) or 0
end

test("spawn/exit churn leaves no process and no memory behind", function()
  local rounds, batch = 4, T.scaled(10000, 300)
  local me = lpvm.self()
  local base = #lpvm.processes()
  local rss = {}
  local function all_gone()
    -- at most base: a process of an earlier test still ending when base was counted
    -- (a loaded machine) made "== base" wait in vain
    T.ok(T.wait_until(function() return #lpvm.processes() <= base end, math.max(30000, T.WAIT)),
         "processes left: " .. (#lpvm.processes() - base))
  end
  -- Round 0 warms every cache (state pool, allocator arenas) at the most a round can
  -- hold: all `batch` alive at once. How many of a churn round's processes are alive
  -- together depends on the scheduling (a loaded machine ran few of them while this
  -- one spawned: 61 -> 94 MB from round 1 to 3), so measured from a churn round the
  -- growth was the peaks' difference, not a leak.
  local kids = {}
  for i = 1, batch do
    kids[i] = lpvm.spawn(function(p) lpvm.send(p, "up") lpvm.receive() lpvm.send(p, "bye") end, me)
  end
  for _ = 1, batch do T.recv_match(function(t) return t == "up" end, 60000) end
  for i = 1, batch do lpvm.send(kids[i], "go") end
  for _ = 1, batch do T.recv_match(function(t) return t == "bye" end, 60000) end
  kids = nil
  all_gone()
  rss[0] = rss_kb()
  for r = 1, rounds do
    for i = 1, batch do lpvm.spawn(function(p) lpvm.send(p, "bye") end, me) end
    for _ = 1, batch do T.recv_match(function(t) return t == "bye" end, 60000) end
    all_gone()
    rss[r] = rss_kb()
  end
  -- the churn rounds hold no more at once than round 0: they must not grow past it
  -- but for a generous 32 MB of allocator noise
  -- (not under a sanitizer: ASan holds up to 256 MB of freed memory in quarantine).
  -- The base is the larger of rounds 0 and 1: round 0's states are made by whichever
  -- worker runs the children, and each worker has its own arena, so on a loaded
  -- machine the first churn round can warm the other worker's arena (a process's
  -- state is ~8 KB: a batch's worth) -- seen as rare failures at load ~15. A leak
  -- still shows over the three rounds after it (30,000 processes).
  local base = math.max(rss[0], rss[1])
  local list = {}
  for r = 0, rounds do list[#list + 1] = rss[r] end
  T.ok(T.SANITIZE or rss[rounds] - base < 32 * 1024,
       string.format("RSS grew from %d KB to %d KB over %d rounds of %d (KB by round: %s)",
                     base, rss[rounds], rounds - 1, batch, table.concat(list, " ")))
end)

T.run()
