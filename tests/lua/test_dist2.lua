-- test_dist2.lua -- two lpvm nodes (docs/distribution.md): this one and a second lpvm
-- OS process running dist_node.lua. Remote spawn by module name, a ring that crosses
-- the nodes, links and monitors across, node down when the other VM is killed.
-- Loopback only; epmd is started if none runs (needs Debian's erlang-base: the
-- test passes as skipped without it); every wait is bounded.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

if not os.execute("command -v epmd >/dev/null 2>&1") then
  print("skip: epmd not installed (Debian: erlang-base)")
  lpvm.halt(0)
  return
end

local HERE = (arg[0]:match("^(.*/)") or "./")
local tag = tostring(io.open("/proc/self/stat"):read("n"))   -- unique on this host
local cookie = "lpvm2test" .. tag
-- ticktime 2 s: ticks every 500 ms, a silent peer is gone after 2 s
T.ok(lpvm.net_start("lpvma" .. tag, {cookie = cookie, ticktime = 2}))
local me = lpvm.node()
lpvm.register("lpvm_test", lpvm.self())

local exe
do
  local f = io.open("/proc/self/stat")
  local pid = f:read("n")
  f:close()
  f = io.popen("readlink /proc/" .. pid .. "/exe")
  exe = f:read("l")
  f:close()
end

local function start_b(name, flag)
  local argv = {exe, HERE .. "dist_node.lua", name, cookie, me}
  if flag then table.insert(argv, 2, flag) end
  local port = assert(lpvm.open_port(argv, {stderr = "stdout"}))
  -- (90 s: a loaded machine; no hello ends the run with status 1 at once, as an error
  -- outside a test left the distribution's tasks keeping the VM alive until ctest's
  -- timeout)
  local r = table.pack(lpvm.receive(function(t) return t == "hello_b" end, 90000))
  if r[1] ~= "hello_b" then
    io.stderr:write("test_dist2: node " .. name .. " did not say hello within 90 s\n")
    lpvm.halt(1)
  end
  return port, r[2], r[3], r[4]
end

local portb, nodeb_pid, nodeb, ospid_b = start_b("lpvmb" .. tag)

test("the second node said hello by name; connect, nodes, echo by pid", function()
  T.ok(nodeb:match("^lpvmb"), nodeb)
  T.eq(lpvm.connect(nodeb), true)
  local found = false
  for _, n in ipairs(lpvm.nodes()) do found = found or n == nodeb end
  T.ok(found)
  lpvm.send(nodeb_pid, "echo", lpvm.self(), {k = "v"})
  local r = T.recv_match(function(t) return t == "echo_b" end)
  T.eq(r[2].k, "v")
  T.eq(r[3], nodeb)
  lpvm.send({"nodeb", nodeb}, "echo", lpvm.self(), 7)
  r = T.recv_match(function(t) return t == "echo_b" end)
  T.eq(r[2], 7)
end)

test("erpc's process (what rpc:call runs) ends with its result and no crash report; "
  .. "a spawn of a missing function says which", function()
  local ref = lpvm.make_ref()
  lpvm.trap_exit(true)   -- (linked at the spawn: the process may end before a monitor)
  local pid = lpvm.spawn({node = nodeb, fn = "execute_call", link = true}, "lpvm.erpc", ref,
    "string", "rep", {"ab", 2})
  local reason = T.exit_from(pid, 15000)
  lpvm.trap_exit(false)
  T.eq(type(reason), "table", T.show(reason))
  T.eq(reason[1], ref); T.eq(reason[2], "return"); T.eq(reason[3], "abab")
  -- node B's stderr comes here as port data: nothing may mention a crash report
  lpvm.send(nodeb_pid, "echo", lpvm.self(), "sync")
  T.recv_match(function(t) return t == "echo_b" end)
  lpvm.sleep(300)
  while true do
    local t, p, text = lpvm.receive(function(t, p) return t == "data" and p == portb end, 0)
    if not t then break end
    T.ok(not tostring(text):find("crash report", 1, true), text)
  end
  -- a function of a module that returned no table (lpvm.eval returns a function)
  lpvm.trap_exit(true)
  local bad = lpvm.spawn({node = nodeb, fn = "run", link = true}, "lpvm.eval")
  local why = T.exit_from(bad, 15000)
  lpvm.trap_exit(false)
  T.ok(tostring(why):find("module lpvm.eval returned a function, not a table: it has no "
    .. "function run", 1, true), T.show(why))
  lpvm.trap_exit(true)
  bad = lpvm.spawn({node = nodeb, fn = "nosuchfn", link = true}, "string")
  why = T.exit_from(bad, 15000)
  lpvm.trap_exit(false)
  T.ok(tostring(why):find("module string has no function nosuchfn", 1, true), T.show(why))
end)

test("an idle connection lives on ticks", function()
  lpvm.sleep(3000)   -- longer than the 2 s a silent peer is allowed
  local found = false
  for _, n in ipairs(lpvm.nodes()) do found = found or n == nodeb end
  T.ok(found, "the idle connection was dropped")
  lpvm.send(nodeb_pid, "echo", lpvm.self(), "still")
  T.eq(T.recv_match(function(t) return t == "echo_b" end)[2], "still")
end)

-- The port this node listens on, from EPMD (`epmd -names`).
local function my_port()
  local f = io.popen("epmd -names")
  local out = f:read("a")
  f:close()
  return tonumber(out:match("name " .. me:match("^[^@]+") .. " at port (%d+)"))
end

test("garbage on the distribution port closes that connection, not the VM", function()
  local port = assert(my_port())
  local junk = {
    "\0\5Nxxxx",                                    -- send_name too short
    "\255\255" .. string.rep("A", 100),              -- a handshake message too long
    "\0\3abc",                                       -- not a handshake message
    string.rep("\0", 64),                             -- zeros
  }
  for _, bytes in ipairs(junk) do
    local conn = assert(lpvm.tcp_connect("127.0.0.1", port, {active = true}))
    lpvm.port_send(conn, bytes)
    T.recv_match(function(t, p) return (t == "eof" or t == "closed") and p == conn end, 15000)
    lpvm.port_close(conn)
  end
  -- a peer that stops in the middle of the handshake is dropped after its timeout
  -- (not waited for here); the node still works:
  lpvm.send(nodeb_pid, "echo", lpvm.self(), "alive")
  T.eq(T.recv_match(function(t) return t == "echo_b" end)[2], "alive")
end)

test("connect to a node that does not exist is false", function()
  T.eq(lpvm.connect("nosuchnode" .. tag .. "@localhost"), false)
  T.raises(function() lpvm.connect("no-at-sign") end, "name@host")
end)

test("remote spawn by module name runs there", function()
  local pid = assert(lpvm.spawn({node = nodeb}, "dist_mod", lpvm.self()))
  local r = T.recv_match(function(t) return t == "started" end)
  T.eq(r[2], pid)
  T.eq(r[3], nodeb)
  local pid2 = assert(lpvm.spawn({node = nodeb, fn = "hello"}, "dist_mod", lpvm.self()))
  r = T.recv_match(function(t) return t == "hello_from_spawned" end)
  T.eq(r[2], pid2)
  T.raises(function() lpvm.spawn({node = nodeb, monitor = true}, "dist_mod") end,
           "option 'monitor' cannot go with 'node'")
  -- a module that is not there: the process dies at once, the spawn itself succeeds
  T.ok(lpvm.spawn({node = nodeb}, "no_such_module_here"))
end)

test("a ring crosses the nodes", function()
  local members, k, rounds = {}, 8, T.scaled(50, 5)
  for i = 1, k do
    if i % 2 == 0 then
      members[i] = assert(lpvm.spawn({node = nodeb, fn = "ring"}, "dist_mod", lpvm.self()))
    else
      members[i] = lpvm.spawn(function(parent) require("dist_mod").ring(parent) end,
                              lpvm.self())
    end
  end
  for i = 1, k do lpvm.send(members[i], "next", members[i % k + 1]) end
  lpvm.send(members[1], "token", k * rounds)
  local r = T.recv_match(function(t) return t == "done" end, 30000)
  T.eq(r[2], me)      -- k * rounds hops end back at member 1
  for i = 1, k do lpvm.send(members[i], "stop") end
end)

test("remote spawn of a closure: upvalues by value, a shared pair, link, result", function()
  lpvm.trap_exit(true)
  local parent, base, conf = lpvm.self(), 40, {k = "v", list = {1, 2, 3}}
  local n = 0                                   -- shared by inc, get and the body
  local function inc() n = n + 1 return n end
  local function get() return n end
  local pid = assert(lpvm.spawn({node = nodeb, link = true}, function(x)
    inc()
    inc()
    lpvm.send(parent, "closure_result", lpvm.node(), base + x, conf.k, #conf.list, get(), n)
    local _, why = lpvm.receive(function(t) return t == "quit" end)
    lpvm.exit(why)
  end, 2))
  local r = T.recv_match(function(t) return t == "closure_result" end, 15000)
  T.eq(r[2], nodeb)
  T.eq(r[3], 42)
  T.eq(r[4], "v")
  T.eq(r[5], 3)
  T.eq(r[6], 2, "inc and get do not share their upvalue over there")
  T.eq(r[7], 2, "the body does not share n with inc")
  T.eq(n, 0, "the copy over there changed this node's variable")
  lpvm.send(pid, "quit", "done_there")
  T.eq(T.exit_from(pid, 15000), "done_there")
  T.raises(function() lpvm.spawn({node = nodeb}, print) end, "cannot spawn a C function")
  T.raises(function() lpvm.spawn({node = nodeb, fn = "f"}, function() end) end,
           "option 'fn' goes with a module name")
  T.raises(function()
    local co = coroutine.create(function() end)
    lpvm.spawn({node = nodeb}, function() return co end)
  end, "upvalue 'co' cannot be sent")
end)

test("a function in a message to another lpvm node is a function there", function()
  local k = 21
  lpvm.send(nodeb_pid, "call", lpvm.self(), function() return k * 2 end)
  local r = T.recv_match(function(t) return t == "called" or t == "not_called" end, 15000)
  T.eq(r[1], "called")
  T.eq(r[2], 42)
  T.eq(r[3], nodeb)
end)

test("a ring of spawned functions crosses the nodes", function()
  local parent, k, rounds = lpvm.self(), 8, T.scaled(50, 5)
  local function member()   -- a closure (upvalue parent); the ring logic is dist_mod's
    lpvm.send(parent, "member_at", lpvm.self(), lpvm.node())
    require("dist_mod").ring(parent)
  end
  local members = {}
  for i = 1, k do
    members[i] = assert(i % 2 == 0 and lpvm.spawn({node = nodeb}, member) or lpvm.spawn(member))
  end
  local where = {}
  for _ = 1, k do
    local r = T.recv_match(function(t) return t == "member_at" end, 15000)
    where[r[2]] = r[3]
  end
  for i = 1, k do T.eq(where[members[i]], i % 2 == 0 and nodeb or me) end
  for i = 1, k do lpvm.send(members[i], "next", members[i % k + 1]) end
  lpvm.send(members[1], "token", k * rounds)
  T.eq(T.recv_match(function(t) return t == "done" end, 30000)[2], me)
  for i = 1, k do lpvm.send(members[i], "stop") end
end)

test("a node started with --no-remote-code refuses functions, with the reason", function()
  local portc, nodec_pid, nodec = start_b("lpvmc" .. tag, "--no-remote-code")
  local pid, why = lpvm.spawn({node = nodec}, function() end)
  T.eq(pid, nil)
  T.eq(why, "remote_code_refused")
  T.recv_match(function(t, p, text)
    return t == "data" and p == portc and text:find("refused: this node takes no code", 1, true)
  end, 15000)
  -- a message holding a function arrives as plain data: the graph's tuples as tables
  lpvm.send(nodec_pid, "call", lpvm.self(), function() return 1 end)
  local r = T.recv_match(function(t) return t == "called" or t == "graph_as_data" end, 15000)
  T.eq(r[1], "graph_as_data")
  T.eq(r[2][1], "call")
  T.eq(r[2][3][1], "lpvm_fun")
  T.eq(type(r[2][3][2]), "string", "the bytecode arrives as a string")
  -- spawning by module name still works there
  T.ok(lpvm.spawn({node = nodec}, "dist_mod", lpvm.self()))
  T.eq(T.recv_match(function(t) return t == "started" end, 15000)[3], nodec)
  lpvm.monitor_node(nodec)
  lpvm.send(nodec_pid, "stop")
  T.recv_match(function(t, n) return t == "nodedown" and n == nodec end, 15000)
  lpvm.port_close(portc)
end)

test("many senders over one connection: nothing lost, each sender's order kept", function()
  local senders, each = 16, T.scaled(2000, 100)
  local coll = assert(lpvm.spawn({node = nodeb, fn = "collect"}, "dist_mod", lpvm.self(),
                                 senders * each))
  for s = 1, senders do
    lpvm.spawn(function(to, who, n)
      for i = 1, n do lpvm.send(to, "m", who, i) end
    end, coll, s, each)
  end
  local r = T.recv_match(function(t) return t == "collected" end, 60000)
  T.eq(r[2], true, "a sender's messages arrived out of order")
  T.eq(r[3], senders * each)
end)

test("disconnect, then racing senders reconnect once and lose nothing", function()
  T.eq(lpvm.disconnect(nodeb), true)
  T.ok(T.wait_until(function()
    for _, n in ipairs(lpvm.nodes()) do if n == nodeb then return false end end
    return true
  end, 5000), "still connected after disconnect")
  local me, k = lpvm.self(), 8
  for i = 1, k do
    lpvm.spawn(function() lpvm.send(nodeb_pid, "echo", me, i) end)
  end
  local got = {}
  for _ = 1, k do
    local r = T.recv_match(function(t) return t == "echo_b" end, 15000)
    got[r[2]] = true
  end
  for i = 1, k do T.ok(got[i], "echo " .. i .. " lost") end
  T.eq(#lpvm.nodes(), 1)
end)

-- docs/distribution.md, simultaneous connects: both nodes send at the same moment with
-- no connection up, so each starts one; the node with the greater name keeps its own
-- and nothing queued in either is lost. Before the fix about half the rounds lost one.
test("both nodes connect to each other at the same moment: nothing lost, 20 rounds",
  function()
  for k = 1, 20 do
    local at = lpvm.now() + 150
    lpvm.send(nodeb_pid, "race", lpvm.self(), {k, at})
    T.recv_match(function(t, kk) return t == "race_ready" and kk == k end, 15000)
    -- The connection ends when its task takes the disconnect, and B connects back at
    -- its deadline: on a loaded machine that can be before a poll of lpvm.nodes()
    -- saw it gone (one failure in a full run at load 16), so the drop is waited for
    -- by its nodedown, which cannot be missed.
    lpvm.monitor_node(nodeb)
    T.eq(lpvm.disconnect(nodeb), true)
    T.ok(lpvm.receive(function(t, n) return t == "nodedown" and n == nodeb end, 5000),
         "still connected after disconnect")
    local wait = at + (k * 7) % 4 - lpvm.now()
    if wait > 0 then lpvm.sleep(wait) end
    lpvm.send(nodeb_pid, "race_ping", k)
    T.recv_match(function(t, kk) return t == "race_ping" and kk == k end, 15000)
    local r = T.recv_match(function(t, kk) return t == "race_done" and kk == k end, 20000)
    T.eq(r[3], true, "round " .. k .. ": node B never got our message")
  end
end)

test("gen_server.call to a server on the other node (alias reply)", function()
  local holder = assert(lpvm.spawn({node = nodeb, fn = "start_adder"}, "dist_mod",
                                   lpvm.self(), 100))
  local srv = T.recv_match(function(t) return t == "adder" end)[2]
  local gs = require("gen_server")
  T.eq(gs.call(srv, 5), 105)
  T.eq(gs.call(srv, -1), 99)
  T.no_msg(100)   -- no stray reply or DOWN left behind
  lpvm.send(holder, "stop")
end)

test("links and monitors across lpvm nodes", function()
  lpvm.trap_exit(true)
  local p = assert(lpvm.spawn({node = nodeb, link = true}, "dist_mod", lpvm.self()))
  T.recv_match(function(t) return t == "started" end)
  local ref = lpvm.monitor(p)
  lpvm.exit(p, "stopped")
  T.eq(T.exit_from(p), "stopped")
  T.eq(select(2, T.down(ref)), "stopped")
end)

test("node down: noconnection, nodedown, and no spawn there", function()
  lpvm.trap_exit(true)
  local p = assert(lpvm.spawn({node = nodeb}, "dist_mod", lpvm.self()))
  T.recv_match(function(t) return t == "started" end)
  lpvm.link(p)
  local ref = lpvm.monitor(p)
  local ref_named = lpvm.monitor({"nodeb", nodeb})   -- by name on another lpvm node
  lpvm.monitor_node(nodeb)
  lpvm.sleep(100)
  os.execute("kill -9 " .. ospid_b)
  T.eq(T.exit_from(p, 15000), "noconnection")
  T.eq(select(2, T.down(ref, 15000)), "noconnection")
  local who, why = T.down(ref_named, 15000)
  T.eq(why, "noconnection")
  T.eq(who[1], "nodeb"); T.eq(who[2], nodeb)
  T.recv_match(function(t, n) return t == "nodedown" and n == nodeb end, 15000)
  local again = lpvm.receive(function(t, x)
    return (t == "EXIT" and x == p) or (t == "DOWN" and x == ref) or t == "nodedown"
  end, 500)
  T.eq(again, nil)
  local pid, why = lpvm.spawn({node = nodeb}, "dist_mod", lpvm.self())
  T.eq(pid, nil)
  T.eq(why, "noconnection")
  lpvm.monitor_node(nodeb)   -- no connection can be made: nodedown at once
  T.recv_match(function(t, n) return t == "nodedown" and n == nodeb end, 15000)
end)

T.run()
