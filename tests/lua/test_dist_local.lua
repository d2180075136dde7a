-- test_dist_local.lua -- distribution calls made on one node, with no peer: net_start's
-- argument checks, send({name, node}) where the node is this one or cannot be reached,
-- monitor_node of this node (docs/distribution.md). Found by probing these calls with
-- odd arguments against erl's answers. Needs epmd (Debian's erlang-base): skipped
-- (passes) without it; loopback only.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

if not os.execute("command -v epmd >/dev/null 2>&1") then
  print("skip: epmd not installed (Debian: erlang-base)")
  lpvm.halt(0)
  return
end

local tag = tostring(io.open("/proc/self/stat"):read("n"))   -- unique on this host

test("send to {name, node} before net_start: dropped, true (erl: {x, 'a@b'} ! 1 is 1)", function()
  T.eq(lpvm.node(), "nonode@nohost")
  T.eq(lpvm.send({"nobody", "other" .. tag .. "@nohost"}, 1), true)
  T.eq(lpvm.send({"nobody", "nonode@nohost"}, 1), true)
end)

test("send to {name, node}: a name lpvm could not register or a node without '@' raises", function()
  T.raises(function() lpvm.send({"", "a@b"}, 1) end, "name must be 1..255 bytes")
  T.raises(function() lpvm.send({string.rep("n", 256), "a@b"}, 1) end, "name must be 1..255 bytes")
  T.raises(function() lpvm.send({"a\0b", "a@b"}, 1) end, "without NUL")
  T.raises(function() lpvm.send({"x", "nohost"}, 1) end, "name@host")
end)

test("monitor({name, node}) before net_start raises, as erl's monitor is badarg there", function()
  T.raises(function() lpvm.monitor({"x", "a@b"}) end, "bad argument #1", "not distributed")
  T.raises(function() lpvm.monitor({"", "a@b"}) end, "name must be 1..255 bytes")
  T.raises(function() lpvm.monitor({"x", 7}) end, "{name, node} expected")
end)

test("net_start raises on a name no peer could reach, a bad cookie, an unknown option", function()
  T.raises(function() lpvm.net_start("a@b@c") end, "bad argument #1", "one '@'")
  T.raises(function() lpvm.net_start("") end, "bad argument #1")
  T.raises(function() lpvm.net_start("@host") end, "bad argument #1")
  T.raises(function() lpvm.net_start("name@") end, "bad argument #1")
  T.raises(function() lpvm.net_start("a\0b") end, "bad argument #1", "NUL")
  T.raises(function() lpvm.net_start("ok", {bogus = 1}) end, "bad argument #2", "bogus")
  T.raises(function() lpvm.net_start("ok", {max_message = 0}) end, "bad argument #2",
           "max_message")
  T.raises(function() lpvm.net_start("ok", {max_message = "x"}) end, "bad argument #2")
  T.raises(function() lpvm.net_start("ok", {ticktime = "x"}) end, "bad argument #2",
           "ticktime")
  T.raises(function() lpvm.net_start("ok", {cookie = string.rep("c", 256)}) end,
           "bad argument #2", "cookie")
  T.eq(lpvm.node(), "nonode@nohost", "none of them started the node")
end)

-- tests run in order, at T.run(): the node starts here, after the checks above
local me
test("net_start starts the node", function()
  T.ok(lpvm.net_start("lpvml" .. tag, {cookie = "lpvmltest" .. tag}))
  me = lpvm.node()
  T.ok(me:find("^lpvml" .. tag .. "@"), me)
end)

test("send to {name, this node}: a free name drops the message (erl does not raise)", function()
  T.eq(lpvm.send({"nobody" .. tag, me}, "lost"), true)
  lpvm.register("dl_self" .. tag)
  T.eq(lpvm.send({"dl_self" .. tag, me}, "found"), true)
  T.eq(T.recv()[1], "found")
  lpvm.unregister("dl_self" .. tag)
end)

test("send to {name, node} of a node that cannot be reached: dropped, true", function()
  T.eq(lpvm.send({"x", "nosuchnode" .. tag .. "@localhost"}, 1), true)
end)

test("monitor_node of this node sends no nodedown (erl sends none)", function()
  T.eq(lpvm.monitor_node(me, true), true)
  lpvm.send(lpvm.self(), "marker")
  -- a refused subscription is answered before monitor_node returns: a nodedown would
  -- be ahead of the marker
  T.eq(T.recv()[1], "marker")
  T.eq(lpvm.monitor_node(me, false), true)
  -- another node that cannot be reached still answers nodedown at once
  local other = "nosuchnode" .. tag .. "@localhost"
  lpvm.monitor_node(other, true)
  local r = T.recv_match(function(t) return t == "nodedown" end)
  T.eq(r[2], other)
end)

test("net_start while started: already_started, and remote_code is left alone", function()
  local r = table.pack(lpvm.net_start("again" .. tag, {remote_code = false}))
  T.eq(r[1], nil); T.eq(r[2], "already_started")
end)

T.run()
