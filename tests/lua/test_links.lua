-- test_links.lua -- link, unlink, trap_exit, exit: Erlang's exit-signal semantics.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

-- A process that waits forever (until killed or told "stop").
local function waiter()
  return lpvm.spawn(function()
    while lpvm.receive() ~= "stop" do end
  end)
end

-- Is pid still alive? (monitor it: noproc means dead)
local function alive(pid)
  local ref = lpvm.monitor(pid)
  local r = table.pack(lpvm.receive(function(tag, rr) return tag == "DOWN" and rr == ref end, 20))
  if r[1] == nil then
    lpvm.demonitor(ref)
    return true
  end
  return false
end

test("an abnormal exit propagates along a link", function()
  local me = lpvm.self()
  -- middle links to a crasher; the watcher monitors middle
  -- spawn_monitor: a monitor made after spawn said noproc when middle had already
  -- died of the link (a loaded machine, two workers)
  local _, ref = lpvm.spawn_monitor(function(p)
    local c = lpvm.spawn_link(function() lpvm.sleep(10); error("crash!") end)
    lpvm.send(p, "linked", c)
    lpvm.receive()   -- dies of the link before this returns
  end, me)
  T.recv_match(function(t) return t == "linked" end)
  local _, reason = T.down(ref)
  T.ok(T.mentions(reason, "crash!"), "middle died with the crasher's reason: " .. T.show(reason))
end)

test("a normal exit does not propagate along a link", function()
  local me = lpvm.self()
  -- middle waits for the child's DOWN, which leaves the child after its exit signal
  -- (signals from one process to another keep their order), instead of a sleep; and
  -- is watched from its spawn (a monitor made later said noproc if it had ended)
  local _, ref = lpvm.spawn_monitor(function(p)
    local c = lpvm.spawn_link(function() end)   -- ends normally at once
    local cref = lpvm.monitor(c)
    lpvm.receive(function(tag, r) return tag == "DOWN" and r == cref end)
    lpvm.send(p, "survived")
  end, me)
  T.eq(T.recv_match(function(t) return t == "survived" end)[1], "survived")
  local _, reason = T.down(ref)
  T.eq(reason, "normal")
end)

-- Erlang's process_flag(trap_exit, 42) is badarg; lpvm took 42 for its truth.
test("trap_exit takes a boolean; nil asks; priority takes no string", function()
  T.raises(function() lpvm.trap_exit(42) end, "bad argument #1", "boolean expected")
  T.raises(function() lpvm.trap_exit("true") end, "bad argument #1", "boolean expected")
  T.eq(lpvm.trap_exit(), false)
  T.eq(lpvm.trap_exit(true), false)
  T.eq(lpvm.trap_exit(nil), true, "nil asks")
  T.eq(lpvm.trap_exit(false), true)
  T.raises(function() lpvm.priority("5") end, "bad argument #1", "got string")
  T.eq(lpvm.priority(), 20)
end)

test("trap_exit turns exit signals into EXIT messages", function()
  T.eq(lpvm.trap_exit(true), false, "trap_exit returns the previous setting")
  local pid = lpvm.spawn_link(function() error("trapped boom") end)
  local r = T.recv_match(function(tag) return tag == "EXIT" end)
  T.eq(r.n, 3, "EXIT, pid, reason")
  T.ok(r[2] == pid, "the pid of the process that ended")
  T.ok(T.mentions(r[3], "trapped boom"), T.show(r[3]))
  T.eq(lpvm.trap_exit(false), true)
end)

test("a trapping process gets normal exits too", function()
  lpvm.trap_exit(true)
  local pid = lpvm.spawn_link(function() end)
  T.eq(T.exit_from(pid), "normal")
end)

test("the error reason carries the message and a traceback", function()
  lpvm.trap_exit(true)
  local pid = lpvm.spawn_link(function()
    local function inner() error("deep reason") end
    inner()
  end)
  local reason = T.exit_from(pid)
  T.ok(T.mentions(reason, "deep reason"), T.show(reason))
  T.ok(T.mentions(reason, "traceback") or T.mentions(reason, "inner"),
       "a traceback: " .. T.show(reason))
end)

test("a long error message reaches the link whole, traceback included", function()
  -- issue 10, item 11: reasons used to be cut at 2,048 bytes without a mark
  lpvm.trap_exit(true)
  local pid = lpvm.spawn_link(function(n)
    error(string.rep("x", n - 1) .. "!", 0)
  end, 100000)
  local reason = T.exit_from(pid)
  T.eq(type(reason), "string")
  local head, tail = reason:match("^(x+!)(.*)$")
  T.ok(head, "the message starts the reason: " .. reason:sub(1, 40))
  T.eq(#head, 100000)
  T.ok(tail:find("stack traceback:", 1, true), "then the traceback: " .. tail:sub(1, 80))
end)

test("error with a non-string value still ends the process", function()
  lpvm.trap_exit(true)
  local pid = lpvm.spawn_link(function() error({ code = 7 }) end)
  local reason = T.exit_from(pid)
  T.ok(reason ~= nil and reason ~= "normal", T.show(reason))
end)

test("link is bidirectional: the parent's crash kills the child", function()
  local me = lpvm.self()
  local child
  local parent = lpvm.spawn(function(p)
    local c = lpvm.spawn(function() lpvm.receive() end)
    lpvm.link(c)
    lpvm.send(p, "child", c)
    lpvm.receive()
    error("parent dies")
  end, me)
  child = T.recv_match(function(t) return t == "child" end)[2]
  local ref = lpvm.monitor(child)
  lpvm.send(parent, "go")
  local _, reason = T.down(ref)
  T.ok(T.mentions(reason, "parent dies"), T.show(reason))
end)

test("unlink stops propagation", function()
  local me = lpvm.self()
  local w = waiter()
  local ref = lpvm.monitor(w)
  local p = lpvm.spawn(function(parent, target)
    lpvm.link(target)
    lpvm.unlink(target)
    lpvm.send(parent, "unlinked")
    error("crash after unlink")
  end, me, w)
  T.recv_match(function(t) return t == "unlinked" end)
  lpvm.sleep(30)
  T.ok(alive(w), "the waiter survived")
  lpvm.send(w, "stop")
  local _, reason = T.down(ref)
  T.eq(reason, "normal")
  T.ok(p)
end)

test("linking to a dead process gives noproc", function()
  lpvm.trap_exit(true)
  local pid, ref = lpvm.spawn_monitor(function() end)
  T.down(ref)
  lpvm.link(pid)
  T.eq(T.exit_from(pid), "noproc")
end)

test("linking to a dead process raises noproc in a non-trapping linker", function()
  -- erl: link(Dead) in a process that does not trap exits raises error:noproc (the
  -- process lives on if it catches it); one that traps gets {'EXIT', Dead, noproc}
  local me = lpvm.self()
  local dead, ref0 = lpvm.spawn_monitor(function() end)
  T.down(ref0)
  local _, ref = lpvm.spawn_monitor(function(target)
    local ok, err = pcall(lpvm.link, target)
    lpvm.send(me, "linked", ok, err)
    lpvm.receive(function() return false end, 0)   -- an exit signal would land here
    lpvm.send(me, "alive")
  end, dead)
  local r = T.recv_match(function(t) return t == "linked" end)
  T.eq(r[2], false)
  T.eq(r[3], "noproc")
  T.recv_match(function(t) return t == "alive" end)
  T.eq(select(2, T.down(ref)), "normal")
  -- not caught, it ends the process as any error does
  local _, ref2 = lpvm.spawn_monitor(function(target) lpvm.link(target) end, dead)
  local _, reason = T.down(ref2)
  T.ok(T.mentions(reason, "noproc"), T.show(reason))
end)

test("exit(reason) ends the calling process with that reason", function()
  local reason = T.run_proc(function() lpvm.exit("my reason"); error("not reached") end)
  T.eq(reason, "my reason")
end)

test("exit('normal') is a normal end", function()
  T.eq(T.run_proc(function() lpvm.exit("normal") end), "normal")
end)

test("exit with a table reason", function()
  local reason = T.run_proc(function() lpvm.exit({ why = "structured", n = 3 }) end)
  T.eq(reason, { why = "structured", n = 3 })
end)

test("exit(pid, reason) kills a non-trapping process", function()
  local w = waiter()
  local ref = lpvm.monitor(w)
  lpvm.exit(w, "shutdown")
  local _, reason = T.down(ref)
  T.eq(reason, "shutdown")
end)

test("exit(pid, 'normal') is ignored by a non-trapping process", function()
  local w = waiter()
  lpvm.exit(w, "normal")
  lpvm.sleep(20)
  T.ok(alive(w))
  lpvm.send(w, "stop")
end)

test("exit(self(), reason) takes effect at once, as Erlang's exit/2 to oneself", function()
  -- erl: exit(self(), Reason) never returns in a process that does not trap exits
  -- (Reason normal included); a trapping one gets {'EXIT', self(), Reason} and true
  local me = lpvm.self()
  for _, why in ipairs({ "other", "normal" }) do
    local _, ref = lpvm.spawn_monitor(function()
      lpvm.exit(lpvm.self(), why)
      lpvm.send(me, "after exit", why)
    end)
    local _, reason = T.down(ref)
    T.eq(reason, why)
    T.no_msg(30)
  end
  local _, ref = lpvm.spawn_monitor(function()
    pcall(lpvm.exit, lpvm.self(), "inside pcall")
    lpvm.send(me, "after exit")
  end)
  T.eq(select(2, T.down(ref)), "inside pcall")
  T.no_msg(30)
  local _, ref2 = lpvm.spawn_monitor(function()
    lpvm.trap_exit(true)
    local r = lpvm.exit(lpvm.self(), "normal")
    lpvm.send(me, "returned", r, lpvm.receive(0))
    lpvm.exit(lpvm.self(), "kill")
    lpvm.send(me, "after kill")
  end)
  local r = T.recv_match(function(t) return t == "returned" end)
  T.eq(r[2], true)
  T.eq(r[3], "EXIT")
  T.eq(r[5], "normal")
  T.eq(select(2, T.down(ref2)), "killed")
  T.no_msg(30)
end)

test("exit(pid, reason) reaches a trapping process as a message", function()
  local me = lpvm.self()
  local pid = lpvm.spawn(function(p)
    lpvm.trap_exit(true)
    lpvm.send(p, "ready")
    local tag, from, reason = lpvm.receive()
    lpvm.send(p, tag, from, reason)
  end, me)
  T.recv_match(function(t) return t == "ready" end)
  lpvm.exit(pid, "please")
  local r = T.recv_match(function(t) return t == "EXIT" end)
  T.ok(r[2] == me, "from the sender of the exit signal")
  T.eq(r[3], "please")
end)

test("exit(pid, 'kill') cannot be trapped; the reason becomes killed", function()
  local me = lpvm.self()
  local pid = lpvm.spawn(function(p)
    lpvm.trap_exit(true)
    lpvm.send(p, "ready")
    while true do lpvm.receive() end
  end, me)
  T.recv_match(function(t) return t == "ready" end)
  local ref = lpvm.monitor(pid)
  lpvm.exit(pid, "kill")
  local _, reason = T.down(ref)
  T.eq(reason, "killed")
end)

test("kill works on a process in an endless loop", function()
  local pid = lpvm.spawn(function() while true do end end)
  local ref = lpvm.monitor(pid)
  lpvm.sleep(10)
  lpvm.exit(pid, "kill")
  local _, reason = T.down(ref, math.max(5000, T.WAIT))
  T.eq(reason, "killed")
end)

test("links to several processes: all crash together", function()
  local me = lpvm.self()
  local n = 10
  local pids, refs = {}, {}
  local hub = lpvm.spawn(function(p, count)
    local kids = {}
    for i = 1, count do
      kids[i] = lpvm.spawn_link(function() lpvm.receive() end)
    end
    lpvm.send(p, "kids", kids)
    lpvm.receive()
    error("hub down")
  end, me, n)
  pids = T.recv_match(function(t) return t == "kids" end)[2]
  for i, p in ipairs(pids) do refs[i] = lpvm.monitor(p) end
  lpvm.send(hub, "die")
  for i = 1, n do
    local _, reason = T.down(refs[i])
    T.ok(T.mentions(reason, "hub down"), T.show(reason))
  end
end)

test("link, unlink, trap_exit, exit: bad arguments name the argument", function()
  T.raises(function() lpvm.link() end, "bad argument #1")
  T.raises(function() lpvm.link({}) end, "bad argument #1")
  T.raises(function() lpvm.unlink(5) end, "bad argument #1")
  T.raises(function() lpvm.exit(lpvm.self(), print) end, "function")
  T.raises(function() lpvm.exit(42, "x") end, "bad argument #1")
end)

T.run()
