-- test_monitors.lua -- monitor, demonitor, DOWN notices.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

test("monitor returns a ref; DOWN arrives when the target ends", function()
  local pid = lpvm.spawn(function() lpvm.receive() end)
  local ref = lpvm.monitor(pid)
  T.ok(ref ~= nil)
  lpvm.send(pid, "go")
  local r = T.recv_match(function(tag) return tag == "DOWN" end)
  T.eq(r.n, 5, "DOWN, ref, 'process', pid, reason")
  T.ok(r[2] == ref)
  T.eq(r[3], "process")
  T.ok(r[4] == pid)
  T.eq(r[5], "normal")
end)

test("DOWN carries the crash reason", function()
  local pid = lpvm.spawn(function() lpvm.receive(); error("monitored crash") end)
  local ref = lpvm.monitor(pid)
  lpvm.send(pid, "go")
  local _, reason = T.down(ref)
  T.ok(T.mentions(reason, "monitored crash"), T.show(reason))
end)

test("DOWN arrives exactly once", function()
  local pid = lpvm.spawn(function() lpvm.receive() end)
  local ref = lpvm.monitor(pid)
  lpvm.send(pid, "go")
  T.down(ref)
  lpvm.exit(pid, "kill")   -- already dead: nothing more
  T.no_msg(50)
end)

test("two monitors give two DOWN notices with their own refs", function()
  local pid = lpvm.spawn(function() lpvm.receive() end)
  local r1, r2 = lpvm.monitor(pid), lpvm.monitor(pid)
  T.ok(r1 ~= r2, "distinct references")
  lpvm.send(pid, "go")
  T.down(r1)
  T.down(r2)
  T.no_msg(20)
end)

test("monitoring a dead process gives DOWN with noproc", function()
  local pid, ref0 = lpvm.spawn_monitor(function() end)
  T.down(ref0)
  local ref = lpvm.monitor(pid)
  local p, reason = T.down(ref)
  T.ok(p == pid)
  T.eq(reason, "noproc")
end)

test("demonitor before the end: no DOWN", function()
  local pid = lpvm.spawn(function() lpvm.receive() end)
  local ref = lpvm.monitor(pid)
  lpvm.demonitor(ref)
  lpvm.send(pid, "go")
  T.no_msg(50)
end)

test("demonitor of an unknown or used ref is harmless", function()
  local pid, ref = lpvm.spawn_monitor(function() end)
  T.down(ref)
  lpvm.demonitor(ref)
  T.ok(pid)
end)

test("a monitor does not kill the watcher (unlike a link)", function()
  local me = lpvm.self()
  local watcher = lpvm.spawn(function(p)
    local target = lpvm.spawn(function() error("target dies") end)
    local ref = lpvm.monitor(target)
    local tag, r = lpvm.receive()
    lpvm.send(p, "watcher saw", tag, r == ref)
  end, me)
  local r = T.recv_match(function(t) return t == "watcher saw" end)
  T.eqv(r, table.pack("watcher saw", "DOWN", true))
  T.ok(watcher)
end)

test("killed processes report killed", function()
  local pid = lpvm.spawn(function() lpvm.receive() end)
  local ref = lpvm.monitor(pid)
  lpvm.exit(pid, "kill")
  local _, reason = T.down(ref)
  T.eq(reason, "killed")
end)

test("many monitors on one process", function()
  local pid = lpvm.spawn(function() lpvm.receive() end)
  local refs = {}
  for i = 1, 100 do refs[i] = lpvm.monitor(pid) end
  lpvm.send(pid, "go")
  for i = 1, 100 do T.down(refs[i]) end
  T.no_msg(10)
end)

-- Erlang's monitor(process, Name): the DOWN names {Name, Node} (node() is
-- nonode@nohost when not distributed), whoever held the name, and for a free name
-- too; in Lua the table {name, node}, as send({name, node}, ...) takes it.
test("monitor by registered name: the DOWN names {name, node}", function()
  local pid, pref = lpvm.spawn_monitor(function() lpvm.receive() end)
  lpvm.register("mon_by_name", pid)
  local ref = lpvm.monitor("mon_by_name")
  lpvm.send("mon_by_name", "go")
  local who, reason = T.down(ref)
  T.eq(who, { "mon_by_name", lpvm.node() })
  T.eq(lpvm.node(), "nonode@nohost")
  T.eq(reason, "normal")
  -- a monitor by pid of the same process still names the pid
  T.ok(T.down(pref) == pid)
  -- the name: as long as a name can be; and demonitor forgets it
  local long = string.rep("n", 255)
  local gone = lpvm.monitor(long)
  lpvm.demonitor(gone)
  T.raises(function() lpvm.monitor(long .. "n") end, "bad argument #1", "255")
  T.raises(function() lpvm.monitor("a\0b") end, "bad argument #1", "NUL")
  T.no_msg(30)
end)

test("monitor of an unregistered name gives DOWN noproc naming {name, node}", function()
  local ref = lpvm.monitor("mon_nobody_has_this")
  local who, reason = T.down(ref)
  T.eq(who, { "mon_nobody_has_this", lpvm.node() })
  T.eq(reason, "noproc")
end)

-- Erlang's monitor(process, {Name, node()}) is the same as monitor(process, Name): the
-- DOWN names {Name, Node}, noproc for a free name. lpvm raised "pid expected".
test("monitor({name, node}) of this node is a monitor by name", function()
  local pid = lpvm.spawn(function() lpvm.receive() lpvm.exit("bye") end)
  lpvm.register("mon_by_name_node", pid)
  local ref = lpvm.monitor({ "mon_by_name_node", lpvm.node() })
  lpvm.send(pid, "go")
  local who, reason = T.down(ref)
  T.eq(who, { "mon_by_name_node", lpvm.node() })
  T.eq(reason, "bye")
  local r2 = lpvm.monitor({ "mon_nobody_node", lpvm.node() }, "alias")
  who, reason = T.down(r2)
  T.eq(who, { "mon_nobody_node", lpvm.node() })
  T.eq(reason, "noproc")
  T.raises(function() lpvm.monitor({ "x" }) end, "bad argument #1", "node not a string")
  T.raises(function() lpvm.monitor({ 42, lpvm.node() }) end, "bad argument #1", "name not a string")
  T.raises(function() lpvm.monitor({ "x", "other@host" }) end, "bad argument #1", "another node")
  T.raises(function() lpvm.monitor({ "a\0b", lpvm.node() }) end, "bad argument #1", "NUL")
end)

test("monitor and demonitor: bad arguments name the argument", function()
  T.raises(function() lpvm.monitor() end, "bad argument #1")
  T.raises(function() lpvm.monitor({}) end, "bad argument #1")
  T.raises(function() lpvm.demonitor() end, "bad argument #1")
  T.raises(function() lpvm.demonitor({}) end, "bad argument #1")
end)

-- Past 32 entries a task's monitors and links are indexed (tasks/links.c): demonitors
-- and unlinks in a seeded random order, the index's deletions moving entries about,
-- must leave exactly the others (found by the limits probe: they were scans, and a
-- million monitors took minutes).
test("many monitors and links on one process, half removed in random order", function()
  math.randomseed(1128)
  local n = 3000
  local target = lpvm.spawn(function() lpvm.receive(function(m) return m == "bye" end) end)
  local refs, keep = {}, {}
  for i = 1, n do refs[i] = lpvm.monitor(target) end
  local order = {}
  for i = 1, n do order[i] = i end
  for i = n, 2, -1 do local j = math.random(i); order[i], order[j] = order[j], order[i] end
  for k = 1, n // 2 do T.eq(lpvm.demonitor(refs[order[k]]), true) end
  for k = n // 2 + 1, n do keep[refs[order[k]]] = true end
  for k = 1, n // 2, 7 do T.eq(lpvm.demonitor(refs[order[k]]), true) end   -- again: no-op
  local peers = {}
  for i = 1, 200 do
    peers[i] = lpvm.spawn(function() lpvm.receive(function(m) return m == "bye" end) end)
    lpvm.link(peers[i])
  end
  for i = 1, 200, 2 do lpvm.unlink(peers[i]) end
  lpvm.trap_exit(true)
  for i = 1, 200 do lpvm.exit(peers[i], "gone") end
  lpvm.send(target, "bye")
  local downs, exits = 0, 0
  while downs < n - n // 2 or exits < 100 do
    local m = { lpvm.receive(function(a) return a == "DOWN" or a == "EXIT" end, T.WAIT) }
    T.ok(m[1], "waited for " .. (n - n // 2 - downs) .. " DOWN, " .. (100 - exits) .. " EXIT")
    if m[1] == "DOWN" then
      T.ok(keep[m[2]], "DOWN of a removed monitor")
      keep[m[2]] = nil
      downs = downs + 1
    else
      local i
      for k = 1, 200 do if peers[k] == m[2] then i = k end end
      T.ok(i and i % 2 == 0, "EXIT from an unlinked peer")
      exits = exits + 1
    end
  end
  T.eq(lpvm.receive(function(a) return a == "DOWN" or a == "EXIT" end, 100), nil)
  lpvm.trap_exit(false)
end)

T.run()
