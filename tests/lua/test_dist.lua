-- test_dist.lua -- distribution against a real erl node (docs/distribution.md):
-- the handshake and net_adm:ping, sends both ways by pid and by registered name,
-- links and monitors both ways, noconnection when the erl OS process is killed,
-- and a wrong cookie refused. Loopback only: epmd and erl are started here and
-- every wait is bounded. Skipped (passes) where erl is not installed.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

if not os.execute("command -v erl >/dev/null 2>&1") then
  print("skip: erl not installed (Debian: erlang-nox)")
  lpvm.halt(0)
  return
end

local tag = tostring(io.open("/proc/self/stat"):read("n"))   -- unique on this host
local cookie = "lpvmtest" .. tag
local host
do
  local f = io.popen("hostname -s")
  host = f:read("l")
  f:close()
end

T.ok(lpvm.net_start("lpvmt" .. tag, {cookie = cookie}))
local me = lpvm.node()
T.eq(me, "lpvmt" .. tag .. "@" .. host)
lpvm.register("lpvm_test", lpvm.self())

local HERE = (arg[0]:match("^(.*/)") or "./")

-- An erl peer running dist_peer.erl; returns its port, node name and, once it said
-- hello (having pinged us), the agent's pid and OS pid.
local function start_peer(name, ck)
  local eval = string.format(
    "{ok,M,B}=compile:file(\"%sdist_peer.erl\",[binary,report]), " ..
    "code:load_binary(M,\"dist_peer.erl\",B), dist_peer:main([\"%s\"]).", HERE, me)
  local port = assert(lpvm.open_port({"erl", "-sname", name, "-setcookie", ck,
                                      "-noshell", "-hidden", "-eval", eval},
                                     {stderr = "stdout"}))
  return port, name .. "@" .. host
end

local port, peer = start_peer("erlt" .. tag, cookie)
-- erl starts and compiles dist_peer.erl first: on a loaded machine that took over
-- 30 s. A peer that never says hello ends the run with status 1 at once: an error
-- here would end the boot process only, and the distribution's tasks kept the VM
-- alive until ctest's timeout.
local hello = table.pack(lpvm.receive(function(t) return t == "hello" end, 90000))
if hello[1] ~= "hello" then
  io.stderr:write("test_dist: the erl peer did not say hello within 90 s\n")
  lpvm.halt(1)
end
local agent, pong, os_pid = hello[2], hello[3], hello[4]

test("net_adm:ping from erl answers pong; its pid is remote", function()
  T.eq(pong, "pong")
  T.eq(type(agent), "userdata")
  T.ok(tostring(agent):match("^<%d+%.%d+%.%d+>$"), tostring(agent))
  T.ok(tostring(agent):sub(1, 3) ~= "<0.", "a remote pid does not print as local")
  local found = false
  for _, n in ipairs(lpvm.nodes()) do found = found or n == peer end
  T.ok(found, "nodes() lists the erl peer")
end)

test("send to an erl pid and to {name, node}; replies by pid and by name", function()
  lpvm.send(agent, "echo", lpvm.self(), "by pid")
  local r = T.recv_match(function(t) return t == "echo_reply" end)
  T.eq(r[2], agent)
  T.eq(r[3], "by pid")
  lpvm.send({"peer", peer}, "echo", lpvm.self(), {1, 2.5, x = true})
  r = T.recv_match(function(t) return t == "echo_reply" end)
  T.eq(r[3][1], 1); T.eq(r[3][2], 2.5); T.eq(r[3].x, true)
  -- erl sends to {lpvm_test, Node}: a registered name of this node
  lpvm.send(agent, "echo_name", "lpvm_test", me, "by name")
  r = T.recv_match(function(t) return t == "echo_reply" end)
  T.eq(r[3], "by name")
end)

test("a binary leaves as an Erlang binary (bytes and all) and comes back a string", function()
  local big = lpvm.binary(string.rep("0123456789", 10000))
  -- by pid (the router flattens the message) and by {name, node} (send flattens it)
  lpvm.send(agent, "echo", lpvm.self(), {big, big:sub(3, 5), "s"})
  local r = T.recv_match(function(t) return t == "echo_reply" end)
  T.eq(type(r[3][1]), "string")
  T.eq(r[3][1] == tostring(big), true)
  T.eq(r[3][2], "234")
  T.eq(r[3][3], "s")
  lpvm.send({"peer", peer}, "echo", lpvm.self(), big:sub(-4))
  r = T.recv_match(function(t) return t == "echo_reply" end)
  T.eq(r[3], "6789")
  local ref = lpvm.send_after(1, agent, "echo", lpvm.self(), big:sub(1, 2))
  T.ok(ref)
  r = T.recv_match(function(t) return t == "echo_reply" end)
  T.eq(r[3], "01")
  -- a long Lua string, zeros inside, in a map by the general encoder: there and back
  local s = ("\0x\255"):rep(350000)
  lpvm.send(agent, "echo", lpvm.self(), {k = s, s, 7})
  r = T.recv_match(function(t) return t == "echo_reply" end)
  T.eq(r[3].k == s and r[3][1] == s, true)
  T.eq(r[3][2], 7)
end)

-- erl sends a message as one packet, with no limit; lpvm closed the connection on a
-- packet over 64 MB before (docs/distribution.md, Limits).
test("a 72 MB binary from erl arrives whole; the connection stays", function()
  local n = 72 * 1024 * 1024
  lpvm.send(agent, "long", lpvm.self(), n)
  local r = T.recv_match(function(t) return t == "long" or t == "long_done" end, 60000)
  T.eq(r[1], "long", "the long message was lost")
  T.eq(#r[2], n)
  T.eq(r[2]:sub(1, 16), "0123456789abcdef")
  T.eq(r[2]:sub(-16), "0123456789abcdef")
  r = nil
  collectgarbage()
  T.eq(T.recv_match(function(t) return t == "long_done" end, 60000)[2], n)
  local found = false
  for _, node in ipairs(lpvm.nodes()) do found = found or node == peer end
  T.ok(found, "the connection to erl was closed")
end)

test("integers past 64 bits arrive as the nearest float (erl's own), math.huge past the range",
  function()
  lpvm.send(agent, "bigs", lpvm.self())
  local r = T.recv_match(function(t) return t == "bigs" end)
  local bigs, floats = r[2], r[3]
  for i = 1, 5 do
    T.eq(math.type(bigs[i]), "float")
    T.eq(bigs[i], floats[i], "big integer " .. i .. " as erl's float(X)")
  end
  T.eq(bigs[6], math.huge)
  T.eq(bigs[7], -math.huge)
end)

test("a NaN, an infinity or equal map keys are not sent to erl (it would close the connection)", function()
  lpvm.trap_exit(true)
  lpvm.monitor_node(peer)
  lpvm.send(agent, "echo", lpvm.self(), { 1, math.huge })
  lpvm.send({"peer", peer}, "echo", lpvm.self(), 0/0)
  -- two distinct tables of equal contents as keys: both are [] to erl, a map it refuses
  lpvm.send(agent, "echo", lpvm.self(), { [{}] = 1, [{}] = 2 })
  lpvm.send(agent, "echo", lpvm.self(), { [{ 1 }] = "a", [{ 2 }] = "b", [{ x = 1 }] = "c" })
  local r = T.recv_match(function(t) return t == "echo_reply" end)
  local n = 0
  for k, v in pairs(r[3]) do
    n = n + 1
    T.eq(v, k[1] == 1 and "a" or k[1] == 2 and "b" or k.x == 1 and "c" or "?")
  end
  T.eq(n, 3, "a map of distinct table keys goes")
  lpvm.send(agent, "echo", lpvm.self(), "after")
  r = T.recv_match(function(t) return t == "echo_reply" end)
  T.eq(r[3], "after", "the three messages erl cannot decode were dropped, not delivered")
  -- an exit reason holding one reaches a linked erl process as its rendering
  local victim = lpvm.spawn(function() lpvm.receive() lpvm.exit({ "bad", -math.huge }) end)
  lpvm.send(agent, "link_to", lpvm.self(), victim)
  T.recv_match(function(t) return t == "link_ready" end)
  lpvm.send(victim, "die")
  r = T.recv_match(function(t) return t == "erl_saw_exit" end)
  T.eq(r[2], victim)
  T.eq(r[3], "[<<\"bad\">>,-inf]")
  T.eq(lpvm.receive(function(t) return t == "nodedown" end, 300), nil, "the connection stayed up")
  lpvm.monitor_node(peer, false)
end)

local function erl_idle()
  lpvm.send(agent, "spawn_idle", lpvm.self())
  return T.recv_match(function(t) return t == "idle" end)[2]
end

test("a message from erl nested deeper than a Lua value is dropped; the mailbox lives", function()
  -- {deep, N, L}: L at depth 1, its innermost [] at N + 1; lpvm's decoder holds 200.
  -- Delivered, the 200-deep one would raise in every receive that met it.
  lpvm.send(agent, "deep", lpvm.self(), 199)
  lpvm.send(agent, "deep", lpvm.self(), 200)
  lpvm.send(agent, "deep", lpvm.self(), 5000)
  lpvm.send(agent, "echo", lpvm.self(), "after")
  local r = T.recv_match(function(t) return t == "deep" end)
  T.eq(r[2], 199)
  local l, levels = r[3], 1
  while l[1] do l, levels = l[1], levels + 1 end
  T.eq(levels, 200)   -- 199 lists around the innermost [] (an empty table)
  T.eq(T.recv_match(function(t) return t == "echo_reply" end)[3], "after")
  T.eq(lpvm.receive(function(t) return t == "deep" end, 300), nil)
  -- an exit reason that deep arrives as its rendering
  lpvm.trap_exit(true)
  lpvm.send(agent, "die_deep", lpvm.self(), 1000)
  local linked = T.recv_match(function(t) return t == "deep_linked" end)[2]
  lpvm.send(linked, "go")
  local reason = T.exit_from(linked, 15000)
  T.eq(type(reason), "string")
  T.eq(reason:sub(1, 5), "[[[[[")
  lpvm.trap_exit(false)
end)

test("a binary sent alone to an erl process arrives as that binary", function()
  -- lpvm.send(pid, b) builds its message without the encoder (lpvm_msg_new_bin):
  -- the router flattens it as any other; erl's process waits for exactly <<"go">>
  lpvm.trap_exit(true)
  lpvm.send(agent, "die_deep", lpvm.self(), 3)
  local linked = T.recv_match(function(t) return t == "deep_linked" end)[2]
  lpvm.send(linked, lpvm.binary("xgox"):sub(2, 3))
  local reason = T.exit_from(linked, 15000)
  T.eq(type(reason[1][1][1]), "table", "nest(3): [[[[]]]], the exit after <<\"go\">>")
  T.eq(next(reason[1][1][1]), nil)
  lpvm.trap_exit(false)
end)

test("link to an erl process: its exit reaches us; ours reaches it", function()
  lpvm.trap_exit(true)
  local p = erl_idle()
  lpvm.link(p)
  lpvm.sleep(100)   -- the LINK travels first
  lpvm.send(agent, "exit_with", p, "boom")
  T.eq(T.exit_from(p), "boom")
  -- erl links to a Lua process that then dies
  local victim = lpvm.spawn(function() lpvm.receive() error("lua-side") end)
  lpvm.send(agent, "link_to", lpvm.self(), victim)
  T.recv_match(function(t) return t == "link_ready" end)
  lpvm.send(victim, "die")
  local r = T.recv_match(function(t) return t == "erl_saw_exit" end)
  T.eq(r[2], victim)
  T.ok(tostring(r[3]):find("lua-side", 1, true), T.show(r[3]))
end)

test("monitor an erl process and be monitored from erl", function()
  local p = erl_idle()
  local ref = lpvm.monitor(p)
  lpvm.send(agent, "exit_with", p, "gone")
  local who, reason = T.down(ref)
  T.eq(who, p)
  T.eq(reason, "gone")
  local victim = lpvm.spawn(function() lpvm.receive() end)
  lpvm.send(agent, "monitor", lpvm.self(), victim)
  T.recv_match(function(t) return t == "mon_ready" end)
  lpvm.exit(victim, "bye")
  local r = T.recv_match(function(t) return t == "erl_saw_down" end)
  T.eq(r[2], victim)
  T.eq(r[3], "bye")
  -- a monitor of a dead erl pid answers noproc
  local ref2 = lpvm.monitor(p)
  T.eq(select(2, T.down(ref2)), "noproc")
  -- erl's monitor by {Name, Node}: its DOWN names {Name, Node}, as between erl nodes
  -- (lpvm's MONITOR_P_EXIT carried the pid: a DOWN matched on {Name, Node} never came)
  local named = lpvm.spawn(function() lpvm.register("dl_named"); lpvm.receive() end)
  T.wait_until(function() return lpvm.whereis("dl_named") == named end)
  lpvm.send(agent, "monitor_name", lpvm.self(), "dl_named")
  T.recv_match(function(t) return t == "mon_ready" end)
  lpvm.exit(named, "bye")
  r = T.recv_match(function(t) return t == "erl_saw_down_name" end)
  T.eq(type(r[2]), "table", T.show(r[2]))
  T.eq(r[2][1], "dl_named"); T.eq(r[2][2], me)
  T.eq(r[3], "bye")
end)

-- erl's monitor(process, {Name, Node}) from lpvm: MONITOR_P names the process, and the
-- DOWN names {Name, Node}, as erl's does (before: the table was refused as not a pid)
test("monitor an erl process by {name, node}: DOWN {name, node}, noproc, demonitor", function()
  lpvm.send(agent, "spawn_named", lpvm.self(), "dl_erl_named")
  local p = T.recv_match(function(t) return t == "named" end)[2]
  local ref = lpvm.monitor({"dl_erl_named", peer})
  local ref_off = lpvm.monitor({"dl_erl_named", peer})
  lpvm.demonitor(ref_off)
  lpvm.send(agent, "exit_with", p, "gone")
  local who, reason = T.down(ref)
  T.eq(type(who), "table", T.show(who))
  T.eq(who[1], "dl_erl_named"); T.eq(who[2], peer)
  T.eq(reason, "gone")
  ref = lpvm.monitor({"dl_no_such_name", peer})   -- erl answers at once: noproc
  who, reason = T.down(ref)
  T.eq(who[1], "dl_no_such_name"); T.eq(who[2], peer)
  T.eq(reason, "noproc")
  -- the demonitored one said nothing, and {name, this node} is the local name's
  local named = lpvm.spawn(function() lpvm.register("dl_here"); lpvm.receive() end)
  T.wait_until(function() return lpvm.whereis("dl_here") == named end)
  ref = lpvm.monitor({"dl_here", me})
  lpvm.exit(named, "bye")
  who, reason = T.down(ref)
  T.eq(who[1], "dl_here"); T.eq(who[2], me); T.eq(reason, "bye")
  T.eq(lpvm.receive(function(t, r2) return t == "DOWN" and r2 == ref_off end, 200), nil)
  T.raises(function() lpvm.monitor({"x"}) end, "bad argument #1")
  T.raises(function() lpvm.monitor({"x", "nohost"}) end, "bad argument #1", "node name")
end)

test("rpc:call into lpvm runs require(M)[F](A...) and returns its result", function()
  lpvm.send(agent, "rpc", lpvm.self(), "dist_mod", "add", {2, 40})
  local r = T.recv_match(function(t) return t == "rpc_result" end, 15000)
  T.eq(r[2], 42)
  lpvm.send(agent, "rpc", lpvm.self(), "dist_mod", "fail", {})
  r = T.recv_match(function(t) return t == "rpc_result" end, 15000)
  T.eq(r[2][1], "badrpc")      -- {badrpc, {'EXIT', {Message, []}}}
  T.ok(tostring(r[2][2][2][1]):find("deliberate", 1, true), T.show(r[2]))
  lpvm.send(agent, "rpc", lpvm.self(), "no_such_module", "f", {})
  r = T.recv_match(function(t) return t == "rpc_result" end, 15000)
  T.eq(r[2][1], "badrpc")
  -- rpc:cast spawns erpc:execute_cast(M, F, A) (before: "module 'erpc' not found",
  -- a crash report, and the function never ran)
  lpvm.send(agent, "rpc_cast", lpvm.self(), "dist_mod", "hello", {lpvm.self()})
  r = T.recv_match(function(t) return t == "hello_from_spawned" end, 15000)
  T.eq(r[3], me)
end)

test("references cross to erl and back: ours stay ours, erl's are values", function()
  -- ours are light userdata (vm/lmod.c), erl's keep their exact bytes (vm/lterm.c)
  local ours = lpvm.make_ref()
  lpvm.send(agent, "refs", lpvm.self(), ours)
  local r = T.recv_match(function(t) return t == "refs" end, 15000)
  local theirs = r[2]
  T.eq(r[4], true, "erl sees a reference")
  T.eq(type(theirs), "userdata")
  T.ok(tostring(theirs):match("^#Ref<"), tostring(theirs))
  T.ok(rawequal(r[3][1], theirs), "erl's reference is one value")
  T.ok(rawequal(r[3][2], ours), "ours comes back as itself")
  T.ok(theirs ~= ours and theirs ~= agent)
  local keys = {[theirs] = 1, [ours] = 2}
  T.eq(keys[r[3][1]], 1); T.eq(keys[r[3][2]], 2)
  lpvm.send(agent, "back", theirs, ours)
  local b = T.recv_match(function(t) return t == "back" end, 15000)
  T.eq(b[2], true, "erl's reference goes back unchanged")
  T.eq(b[3], true, "ours is the same reference to erl")
end)

test("a fun, a bitstring, a port, an improper list from erl arrive as documented", function()
  -- docs/lua-api.md, "How Lua values travel" (probed: nothing crashes, each arrives so)
  lpvm.send(agent, "odd_terms", lpvm.self())
  local r = T.recv_match(function(t) return t == "odd_terms" end)
  T.eq(r[2], "#Fun<>")
  T.eq(r[3], "fun lists:map/2")
  T.eq(r[4], "<<1:3>>")
  T.eq(#r[5], 1, "the improper tail is dropped"); T.eq(r[5][1], 1)
  T.ok(type(r[6]) == "string" and r[6]:match("^#Port<.+%.%d+>$"), T.show(r[6]))
  T.eq(table.concat(r[7], ","), "97,98,99")
end)

test("erlang:spawn(LpvmNode, M, F, A) starts a Lua process here", function()
  lpvm.send(agent, "spawn_on", lpvm.self(), "dist_mod", "hello", {lpvm.self()})
  local sp = T.recv_match(function(t) return t == "spawned" end, 15000)
  local r = T.recv_match(function(t) return t == "hello_from_spawned" end, 15000)
  T.eq(r[2], sp[2])
  T.eq(r[3], me)
end)

test("a damaged function term from a peer reads as data; its spawn dies, the VM lives", function()
  lpvm.send(agent, "forged_fun", lpvm.self())
  -- the receive that meets it does not raise: the graph arrives as plain data
  local r = T.recv_match(function(t) return t == "lpvm_graph" end, 15000)
  T.eq(r[2][1], "forged")
  T.eq(r[2][2][1], "lpvm_fun")
  local sp = T.recv_match(function(t) return t == "forged_spawned" end, 15000)
  T.eq(type(sp[2]), "userdata")
  T.ok(T.wait_until(function() return lpvm.info(sp[2]) == nil end, 5000),
       "the spawned process with a damaged function still runs")
  lpvm.send(agent, "echo", lpvm.self(), "after")
  T.eq(T.recv_match(function(t) return t == "echo_reply" end, 15000)[3], "after")
end)

test("a wrong cookie is refused both ways", function()
  local bad, badnode = start_peer("erlbad" .. tag, "wrong" .. cookie)
  -- its ping fails, so it never says hello; we refuse it and log why
  T.no_msg(3000)
  T.eq(lpvm.connect(badnode), false)
  local ok = true
  for _, n in ipairs(lpvm.nodes()) do ok = ok and n ~= badnode end
  T.ok(ok, "the wrong-cookie node is not connected")
  lpvm.port_close(bad)
end)

test("noconnection exactly once when the erl OS process is killed", function()
  lpvm.trap_exit(true)
  local p1, p2 = erl_idle(), erl_idle()
  lpvm.link(p1)
  local ref = lpvm.monitor(p2)
  local ref_agent = lpvm.monitor(agent)
  local ref_named = lpvm.monitor({"peer", peer})   -- the agent, by name
  lpvm.monitor_node(peer)
  lpvm.sleep(200)
  os.execute("kill -9 " .. os_pid)
  T.eq(T.exit_from(p1, 15000), "noconnection")
  T.eq(select(2, T.down(ref, 15000)), "noconnection")
  T.eq(select(2, T.down(ref_agent, 15000)), "noconnection")
  local who, why = T.down(ref_named, 15000)
  T.eq(why, "noconnection")
  T.eq(who[1], "peer"); T.eq(who[2], peer)
  T.recv_match(function(t, n) return t == "nodedown" and n == peer end, 15000)
  -- and nothing twice
  local again = lpvm.receive(function(t, x)
    return (t == "EXIT" and x == p1) or (t == "DOWN" and (x == ref or x == ref_agent)) or
           t == "nodedown"
  end, 500)
  T.eq(again, nil)
  -- signals to a node that is gone: a link answers noconnection, sends are dropped
  lpvm.send(p1, "lost")
  local ref3 = lpvm.monitor(p1)
  T.eq(select(2, T.down(ref3, 15000)), "noconnection")
  for _, n in ipairs(lpvm.nodes()) do T.ok(n ~= peer, "peer still listed") end
end)

test("the erl node restarted under its name: old pids are noproc, sends to them dropped", function()
  -- a new incarnation (another creation) of the same name: erl answers a link or a
  -- monitor of a pid of the old one with noproc and drops a message to it
  lpvm.trap_exit(true)
  local port2 = start_peer("erlt" .. tag, cookie)
  local hello2 = table.pack(lpvm.receive(function(t) return t == "hello" end, 90000))
  T.eq(hello2[1], "hello", "the restarted peer said hello")
  local agent2 = hello2[2]
  T.ok(agent2 ~= agent, "a pid of the new incarnation is another pid")
  -- the old agent's ID and Serial are most likely the new agent's: a stale send that
  -- reached the new node would come back before the reply to the fresh one
  lpvm.send(agent, "echo", lpvm.self(), "stale")
  lpvm.send(agent2, "echo", lpvm.self(), "fresh")
  local r = T.recv_match(function(t) return t == "echo_reply" end)
  T.eq(r[3], "fresh")
  lpvm.link(agent)
  T.eq(T.exit_from(agent, 15000), "noproc")
  local ref = lpvm.monitor(agent)
  T.eq(select(2, T.down(ref, 15000)), "noproc")
  local found = false
  for _, n in ipairs(lpvm.nodes()) do found = found or n == peer end
  T.ok(found, "the new incarnation stays connected")
  lpvm.send(agent2, "echo", lpvm.self(), "after")
  T.eq(T.recv_match(function(t) return t == "echo_reply" end)[3], "after")
  T.eq(lpvm.receive(function(t) return t == "echo_reply" end, 300), nil)
  os.execute("kill -9 " .. hello2[4])
  lpvm.port_close(port2)
end)

T.run()
