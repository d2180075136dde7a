-- test_refs.lua -- make_ref, is_alive, registered, receive_ref, aliases.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

test("make_ref: unique, equal to itself, a table key, travels in messages", function()
  local a, b = lpvm.make_ref(), lpvm.make_ref()
  T.ok(a ~= b, "two refs differ")
  T.ok(a == a)
  T.eq(type(a), "userdata")
  T.ok(tostring(a):match("^#Ref<"), tostring(a))
  local t = { [a] = 1 }
  local echo = lpvm.spawn(function(parent) lpvm.send(parent, lpvm.receive()) end, lpvm.self())
  lpvm.send(echo, a)
  local back = lpvm.receive(T.WAIT)
  T.ok(back == a, "the same ref comes back")
  T.eq(t[back], 1, "and keys the same table slot")
  -- the same userdata type as a monitor ref
  local m = lpvm.monitor(echo)
  T.eq(getmetatable(m), getmetatable(a))
  lpvm.demonitor(m)
end)

test("references among scalars travel as themselves, before and after a table", function()
  -- a message of scalars and references takes the encoder's and decoder's plain path
  -- (vm/lterm.c), one with a table the general one: both give the interned reference
  local a, b = lpvm.make_ref(), lpvm.make_ref()
  local keys = { [a] = "a", [b] = "b" }
  local echo = lpvm.spawn(function(parent)
    while true do lpvm.send(parent, lpvm.receive()) end
  end, lpvm.self())
  lpvm.send(echo, 1, a, "x", b, a, nil, true, 2.5)
  local r = table.pack(lpvm.receive(T.WAIT))
  T.eq(r.n, 8)
  T.eq(r[1], 1); T.eq(r[3], "x"); T.eq(r[6], nil); T.eq(r[7], true); T.eq(r[8], 2.5)
  T.ok(rawequal(r[2], a) and rawequal(r[5], a) and rawequal(r[4], b), "the same userdata")
  T.eq(keys[r[2]], "a"); T.eq(keys[r[4]], "b")
  lpvm.send(echo, a, { b })
  local x, t = lpvm.receive(T.WAIT)
  T.ok(rawequal(x, a) and rawequal(t[1], b))
  -- a reference first, as a reply's tag: receive_ref returns it, a reply to an alias
  -- gives what comes after it
  local c = lpvm.make_ref()
  lpvm.send(echo, c, a, 7)
  local r2 = table.pack(lpvm.receive_ref(c, T.WAIT))
  T.eq(r2.n, 3); T.ok(rawequal(r2[1], c) and rawequal(r2[2], a)); T.eq(r2[3], 7)
  local m = lpvm.monitor(echo, "alias")
  lpvm.send_alias(lpvm.self(), m, b, "v")
  local r3 = table.pack(lpvm.receive_ref(m, T.WAIT))
  T.eq(r3.n, 3); T.ok(rawequal(r3[1], m) and rawequal(r3[2], b)); T.eq(r3[3], "v")
  lpvm.demonitor(m, "flush")
  -- a reference made by another process comes back as the one first decoded here
  lpvm.spawn(function(p) local r = lpvm.make_ref(); lpvm.send(p, r, 1); lpvm.send(p, 2, r) end,
    lpvm.self())
  local r4, one = lpvm.receive(T.WAIT)
  local two, r5 = lpvm.receive(T.WAIT)
  T.eq(one, 1); T.eq(two, 2); T.ok(rawequal(r4, r5))
  lpvm.exit(echo, "kill")
end)

test("a reference is a value apart from pids: tostring, errors, keys, ETS, timers", function()
  -- references and pids are both light userdata (vm/lmod.c), told apart by a tag
  local me, r = lpvm.self(), lpvm.make_ref()
  T.eq(type(r), "userdata")
  T.ok(r ~= me and not rawequal(r, me))
  T.ok(tostring(r):match("^#Ref<0%.%d+%.%d+>$"), tostring(r))
  T.ok(tostring(me):match("^<0%.%d+%.%d+>$"), tostring(me))
  for _, mk in ipairs({ lpvm.alias, function() return lpvm.send_after(60000, me, "x") end,
                        function() return lpvm.monitor(me) end }) do
    local x = mk()
    T.ok(tostring(x):match("^#Ref<"), tostring(x))
    T.ok(x ~= r and x ~= me)
  end
  -- a reference is no pid, a pid no reference
  T.raises(function() lpvm.is_alive(r) end, "bad argument #1", "pid expected, got reference")
  T.raises(function() lpvm.link(r) end, "bad argument #1", "pid expected, got reference")
  T.raises(function() lpvm.send(r, 1) end, "bad argument #1", "pid expected, got reference")
  T.raises(function() lpvm.receive_ref(me, 0) end, "bad argument #1",
    "reference expected, got pid")
  T.raises(function() lpvm.cancel_timer(me) end, "bad argument #1", "reference expected")
  -- keys by value, through a message and a collection
  local keys = { [r] = "r", [me] = "me" }
  lpvm.send(me, r, { r, { r }, k = r }, { [r] = "v" })
  collectgarbage(); collectgarbage()
  local back, t, map = lpvm.receive(T.WAIT)
  T.ok(rawequal(back, r) and rawequal(t[1], r) and rawequal(t[2][1], r) and
    rawequal(t.k, r))
  T.eq(map[r], "v")
  T.eq(keys[back], "r"); T.eq(keys[me], "me")
  -- an ETS key and value: the same reference finds it, another does not
  local ets = require "ets"
  local tab = ets.new("refs_test", { "set" })
  ets.insert(tab, { r, me })
  ets.insert(tab, { me, r })
  T.ok(rawequal(ets.lookup(tab, r)[1][2], me))
  T.ok(rawequal(ets.lookup(tab, me)[1][2], r))
  T.eq(#ets.lookup(tab, lpvm.make_ref()), 0)
  T.eq(ets.info(tab, "size"), 2)
  T.ok(tostring(tab):match("^#Ref<"), "a table id is a reference too")
  ets.delete(tab)
end)

test("make_ref: unique across processes", function()
  local me, seen = lpvm.self(), {}
  local n = T.scaled(20, 4)
  for _ = 1, n do
    lpvm.spawn(function(p) for _ = 1, 100 do lpvm.send(p, lpvm.make_ref()) end end, me)
  end
  for _ = 1, n * 100 do
    local r = lpvm.receive(T.WAIT)
    T.ok(not seen[r], "duplicate ref " .. tostring(r))
    seen[r] = true
  end
end)

test("is_alive follows a process's life", function()
  T.eq(lpvm.is_alive(lpvm.self()), true)
  local pid, ref = lpvm.spawn_monitor(function() lpvm.receive() end)
  T.eq(lpvm.is_alive(pid), true)
  lpvm.send(pid, "go")
  T.down(ref)
  T.eq(lpvm.is_alive(pid), false)
  T.raises(function() lpvm.is_alive("x") end, "bad argument #1", "pid expected")
end)

test("registered lists the names", function()
  local pid = lpvm.spawn(function() lpvm.receive() end)
  lpvm.register("refs_test_a", pid)
  lpvm.register("refs_test_b")
  local names = {}
  for _, n in ipairs(lpvm.registered()) do names[n] = true end
  T.ok(names.refs_test_a and names.refs_test_b, T.show(names))
  lpvm.send(pid, "go")
  lpvm.unregister("refs_test_b")
  T.wait_until(function() return not lpvm.whereis("refs_test_a") end)
  names = {}
  for _, n in ipairs(lpvm.registered()) do names[n] = true end
  T.ok(not names.refs_test_a and not names.refs_test_b, T.show(names))
end)

test("receive_ref takes the message whose first value is the ref, leaves the rest", function()
  local me = lpvm.self()
  local ref = lpvm.make_ref()
  lpvm.send(me, "before")
  lpvm.spawn(function(p, r) lpvm.send(p, "other", 1); lpvm.send(p, r, "answer", 42) end, me, ref)
  local r = table.pack(lpvm.receive_ref(ref, T.WAIT))
  T.eq(r.n, 3)
  T.ok(r[1] == ref)
  T.eq(r[2], "answer")
  T.eq(r[3], 42)
  T.eq(lpvm.receive(T.WAIT), "before", "older messages stay, in order")
  T.eq(lpvm.receive(T.WAIT), "other")
  -- a bare ref is a message whose first value is the ref
  lpvm.send(me, ref)
  T.ok(lpvm.receive_ref(ref, T.WAIT) == ref)
end)

test("receive_ref also takes the DOWN of the ref's monitor", function()
  local pid = lpvm.spawn(function() lpvm.receive(); error("gone") end)
  local ref = lpvm.monitor(pid)
  lpvm.send(pid, "go")
  local tag, r, kind, who, reason = lpvm.receive_ref(ref, T.WAIT)
  T.eq(tag, "DOWN")
  T.ok(r == ref and who == pid)
  T.eq(kind, "process")
  T.ok(T.mentions(reason, "gone"))
end)

test("receive_ref times out, polls with 0, checks its arguments", function()
  local ref = lpvm.make_ref()
  lpvm.send(lpvm.self(), "x")
  local t0 = lpvm.now()
  local a, b = lpvm.receive_ref(ref, 30)
  T.eq(a, nil); T.eq(b, "timeout")
  T.ok(lpvm.now() - t0 >= 29)
  T.eq(select(2, lpvm.receive_ref(ref, 0)), "timeout")
  T.eq(lpvm.receive(0), "x")
  T.raises(function() lpvm.receive_ref("r") end, "bad argument #1", "reference expected")
  T.raises(function() lpvm.receive_ref(ref, -1) end, "timeout must be >= 0")
  T.raises(function() lpvm.receive_ref(ref, 1, 2) end, "bad argument #3")
end)

test("receive_ref(0) sees a reply sent to self in this step", function()
  local ref = lpvm.make_ref()
  lpvm.send(lpvm.self(), ref, "mine")
  local _, v = lpvm.receive_ref(ref, 0)
  T.eq(v, "mine")
end)

test("the mark survives takes before the receive_ref", function()
  local me = lpvm.self()
  lpvm.send(me, "a")
  lpvm.send(me, "b")
  lpvm.sleep(0)
  local ref = lpvm.make_ref()      -- marks after "b"
  T.eq(lpvm.receive(T.WAIT), "a")
  T.eq(lpvm.receive(T.WAIT), "b")  -- the marked message itself is gone
  lpvm.send(me, "c")
  lpvm.send(me, ref, 1)
  local _, v = lpvm.receive_ref(ref, T.WAIT)
  T.eq(v, 1)
  T.eq(lpvm.receive(T.WAIT), "c")
  -- a ref made earlier, waited for after other refs were made
  local old = lpvm.make_ref()
  lpvm.send(me, old, "old")
  local newer = lpvm.make_ref()
  lpvm.send(me, newer, "newer")
  T.eq(select(2, lpvm.receive_ref(old, T.WAIT)), "old")
  T.eq(select(2, lpvm.receive_ref(newer, T.WAIT)), "newer")
end)

test("alias: replies land while active, are dropped unseen after unalias", function()
  local me = lpvm.self()
  local a = lpvm.alias()
  lpvm.send_alias(me, a, "first")
  T.eq(select(2, lpvm.receive_ref(a, T.WAIT)), "first")
  T.eq(lpvm.unalias(a), true)
  T.eq(lpvm.unalias(a), false, "already inactive")
  lpvm.send_alias(me, a, "late")
  lpvm.send(me, "plain")
  T.eq(lpvm.receive(T.WAIT), "plain", "the late reply was never seen")
  T.no_msg(30)
  -- a predicate receive never sees it either
  lpvm.send_alias(me, a, "late2")
  local got = lpvm.receive(function() return true end, 30)
  T.eq(got, nil)
end)

test("monitor alias: a late reply after demonitor never lands", function()
  local me = lpvm.self()
  local srv = lpvm.spawn(function()
    local from, tag, req = lpvm.receive()
    lpvm.sleep(100)
    lpvm.send_alias(from, tag, "reply", req)
    lpvm.receive()
  end)
  local m = lpvm.monitor(srv, "alias")
  lpvm.send(srv, me, m, "q")
  T.eq(select(2, lpvm.receive_ref(m, 10)), "timeout")
  lpvm.demonitor(m, "flush")
  lpvm.sleep(200)
  T.no_msg(30)
  lpvm.send(srv, "stop")
  T.raises(function() lpvm.monitor(srv, "other") end, "bad argument #2", "'alias' or nil expected")
end)

test("monitor alias: the DOWN ends it; a reply that came before the DOWN stays", function()
  -- Erlang's {alias, demonitor}: the alias is deactivated when the DOWN is delivered
  local me = lpvm.self()
  local srv = lpvm.spawn(function()
    local from, tag = lpvm.receive()
    lpvm.send_alias(from, tag, "before")
  end)   -- it ends after its reply: the DOWN comes after the reply
  local m = lpvm.monitor(srv, "alias")
  lpvm.send(srv, me, m)
  -- take the DOWN first, leaving the reply before it in the mailbox
  local tag, ref = lpvm.receive(function(a) return a == "DOWN" end, T.WAIT)
  T.eq(tag, "DOWN")
  T.ok(ref == m)
  lpvm.send_alias(me, m, "after")
  lpvm.send(me, "plain")
  T.eq(select(2, lpvm.receive_ref(m, T.WAIT)), "before", "delivered before the DOWN: kept")
  T.eq(lpvm.receive(T.WAIT), "plain", "the reply after the DOWN was dropped unseen")
  T.no_msg(30)
  T.eq(lpvm.unalias(m), false, "the DOWN ended the alias")
  -- an alias of its own (lpvm.alias) is not ended by a DOWN
  local a = lpvm.alias()
  local _, mref = lpvm.spawn_monitor(function() end)
  T.eq(lpvm.receive(T.WAIT), "DOWN")
  T.ok(mref)
  lpvm.send_alias(me, a, "still")
  T.eq(select(2, lpvm.receive_ref(a, T.WAIT)), "still")
  T.eq(lpvm.unalias(a), true)
end)

test("alias: a message that arrived while active stays after unalias (Erlang: at arrival)", function()
  -- erl: A = alias(), spawn(fun() -> A ! one, Self ! sent end), receive sent -> ok end,
  -- unalias(A), receive one -> ok after 100 -> timeout end  gives ok
  local me = lpvm.self()
  local a = lpvm.alias()
  lpvm.spawn(function() lpvm.send_alias(me, a, "one"); lpvm.send(me, "sent") end)
  -- "sent" came after "one" from the same sender: "one" is in the mailbox now
  T.eq(lpvm.receive(function(x) return x == "sent" end, T.WAIT), "sent")
  T.eq(lpvm.unalias(a), true)
  lpvm.send_alias(me, a, "late")   -- arrives after the unalias: dropped
  lpvm.send(me, "plain")
  local r, v = lpvm.receive_ref(a, T.WAIT)
  T.ok(r == a, "the message that arrived before the unalias")
  T.eq(v, "one")
  T.eq(lpvm.receive(T.WAIT), "plain", "the one sent after the unalias was dropped unseen")
  T.no_msg(30)
  -- to itself: a poll brings it into the mailbox (the brief's sleep(10) does the same)
  local b = lpvm.alias()
  lpvm.send_alias(me, b, "two")
  T.eq(lpvm.receive(function() return false end, 0), nil)
  lpvm.unalias(b)
  r, v = lpvm.receive(function(x) return x == b end, T.WAIT)
  T.ok(r == b)
  T.eq(v, "two")
end)

test("monitor alias: demonitor keeps what arrived, flush removes it; a DOWN queued ends it there", function()
  local me = lpvm.self()
  local srv = lpvm.spawn(function()
    while true do
      local from, tag, what = lpvm.receive()
      if from == "stop" then return end
      lpvm.send_alias(from, tag, what)
      lpvm.send(from, "sent")
    end
  end)
  -- demonitor without flush: the reply that arrived stays (erl {alias, demonitor}: ok)
  local m = lpvm.monitor(srv, "alias")
  lpvm.send(srv, me, m, "kept")
  T.eq(lpvm.receive(function(x) return x == "sent" end, T.WAIT), "sent")
  lpvm.demonitor(m)
  T.eq(lpvm.unalias(m), false, "demonitor ended the alias")
  lpvm.send_alias(me, m, "late")
  local r, v = lpvm.receive_ref(m, T.WAIT)
  T.ok(r == m)
  T.eq(v, "kept")
  T.no_msg(30)
  -- with flush the reply goes too: nothing of the exchange stays behind
  m = lpvm.monitor(srv, "alias")
  lpvm.send(srv, me, m, "flushed")
  T.eq(lpvm.receive(function(x) return x == "sent" end, T.WAIT), "sent")
  lpvm.demonitor(m, "flush")
  T.no_msg(30)
  -- the DOWN already in the mailbox (no receive has met it) ended the alias there:
  -- unalias says so, and a message that came after the DOWN is dropped
  m = lpvm.monitor(srv, "alias")
  lpvm.send(srv, me, m, "before")
  T.eq(lpvm.receive(function(x) return x == "sent" end, T.WAIT), "sent")
  local pid2, ref2 = lpvm.spawn_monitor(function() end)
  T.eq(lpvm.receive_ref(ref2, T.WAIT), "DOWN")
  lpvm.send(srv, "stop")
  -- "before" counts from its send, the DOWN once it is in the mailbox; no receive
  -- meets the DOWN before the unalias
  T.wait_until(function() return lpvm.info().message_queue_len >= 2 end)
  T.ok(pid2)
  lpvm.send_alias(me, m, "after")
  T.eq(lpvm.unalias(m), false, "the DOWN had ended it")
  r, v = lpvm.receive_ref(m, T.WAIT)
  T.ok(r == m)
  T.eq(v, "before")
  T.eq(lpvm.receive_ref(m, T.WAIT), "DOWN")
  T.no_msg(30)
end)

test("demonitor flush removes the DOWN, not a message whose first value is the ref", function()
  -- erl: demonitor(Ref, [flush]) removes {_, Ref, _, _, _} only
  local me = lpvm.self()
  local pid, ref = lpvm.spawn_monitor(function(parent) lpvm.send(parent, lpvm.receive(), "mine") end, me)
  T.ok(pid)
  lpvm.send(pid, ref)
  -- "mine" counts from its send, the DOWN (after it) once it is in the mailbox
  T.wait_until(function() return lpvm.info().message_queue_len >= 2 end)
  lpvm.demonitor(ref, "flush")
  local r, v = lpvm.receive(T.WAIT)
  T.ok(r == ref)
  T.eq(v, "mine")
  T.no_msg(30)
end)

test("demonitor flush removes a DOWN already queued", function()
  local pid, ref = lpvm.spawn_monitor(function() end)
  lpvm.sleep(50)
  lpvm.send(lpvm.self(), "keep")
  T.wait_until(function() return lpvm.info().message_queue_len >= 2 end)
  lpvm.demonitor(ref, "flush")
  T.eq(lpvm.receive(T.WAIT), "keep")
  T.no_msg(30)
  T.ok(pid)
end)

test("demonitor flush inside a receive predicate", function()
  local me = lpvm.self()
  -- the DOWN the predicate is looking at, flushed from inside it: the receive, which
  -- holds it, still takes it (it was freed under the receive)
  local _, ref = lpvm.spawn_monitor(function() end)
  local tag, r = lpvm.receive(function(t, x)
    if t == "DOWN" then lpvm.demonitor(x, "flush") end
    return t == "DOWN"
  end, T.WAIT)
  T.eq(tag, "DOWN")
  T.ok(r == ref)
  -- left by the predicate after its own flush: it stays for the next receive
  local _, ref1 = lpvm.spawn_monitor(function() end)
  T.eq(lpvm.receive(function(t, x)
    if t == "DOWN" then lpvm.demonitor(x, "flush") end
    return false
  end, 0), nil)
  tag, r = lpvm.receive(T.WAIT)
  T.eq(tag, "DOWN")
  T.ok(r == ref1)
  -- a DOWN the scan passed, flushed while the predicate looks at a later message
  local _, ref2 = lpvm.spawn_monitor(function() end)
  T.wait_until(function() return lpvm.info().message_queue_len >= 1 end)
  lpvm.send(me, "y")
  lpvm.send(me, "z")
  T.eq(lpvm.receive(function(t)
    if t == "y" then lpvm.demonitor(ref2, "flush") end
    return t == "z"
  end, T.WAIT), "z")
  T.eq(lpvm.receive(T.WAIT), "y")
  T.no_msg(30)
end)

test("a ref-receive with 10,000 queued messages only looks at new ones", function()
  local me = lpvm.self()
  local n = T.scaled(10000, 500)
  for i = 1, n do lpvm.send(me, "junk", i) end
  local srv = lpvm.spawn(function()
    while true do
      local from, tag = lpvm.receive()
      if from == "stop" then return end
      lpvm.send_alias(from, tag, "ok")
    end
  end)
  for _ = 1, 200 do
    local m = lpvm.monitor(srv, "alias")
    lpvm.send(srv, me, m)
    T.eq(select(2, lpvm.receive_ref(m, T.WAIT)), "ok")
    lpvm.demonitor(m, "flush")
  end
  lpvm.send(srv, "stop")
  T.eq(lpvm.info().message_queue_len, n, "the junk is all still there")
  local _, first = lpvm.receive(0)
  T.eq(first, 1, "in order")
  T.flush()
end)

test("refs across many request/replies: equal, the same key, kept while held", function()
  -- make_ref and a decode must give the one value of a reference (a light userdata,
  -- vm/lmod.c), through collections
  local srv = lpvm.spawn(function()
    while true do
      local from, ref, k = lpvm.receive()
      if from == "stop" then return end
      lpvm.send(from, ref, k)
    end
  end)
  local me, held, n = lpvm.self(), {}, T.scaled(3000, 300)
  for k = 1, n do
    local ref = lpvm.make_ref()
    lpvm.send(srv, me, ref, k)
    local r, v = lpvm.receive(T.WAIT)
    T.ok(r == ref and rawequal(r, ref) and v == k, "the reply carries the same ref")
    if k % 10 == 0 then held[ref] = k end
    if k % 500 == 0 then collectgarbage() end
  end
  collectgarbage(); collectgarbage()
  local count = 0
  for ref, k in pairs(held) do
    count = count + 1
    lpvm.send(srv, me, ref, k)
    local r, v = lpvm.receive(T.WAIT)
    T.ok(rawequal(r, ref), "a held ref decodes to its own userdata after a collection")
    T.eq(held[r], k); T.eq(v, k)
    T.ok(r ~= me and r ~= k and r ~= tostring(r), "a ref equals no pid, number or string")
    T.ok(lpvm.is_ref == nil or lpvm.is_ref(r))
  end
  T.eq(count, n // 10)
  lpvm.send(srv, "stop")
end)

test("a million refs made and dropped hold no memory after a collection", function()
  -- a reference is a light userdata: making one allocates nothing, so nothing can
  -- stay (kept alive, n full userdata would take over 40 bytes each, 4 MB at TSan's
  -- 100,000; the bound leaves room for the collector's own pace)
  local function churn(k)
    for _ = 1, k do lpvm.make_ref() end
    collectgarbage(); collectgarbage()
    return collectgarbage("count")
  end
  local n = T.scaled(1000000, 20000)
  local keep = lpvm.make_ref()
  local small = churn(n // 20)
  local big = churn(n)
  T.ok(big - small < 1024, string.format("%.1f KB after %d refs, %.1f KB after %d", small,
    n // 20, big, n))
  local echo = lpvm.spawn(function(parent) lpvm.send(parent, lpvm.receive()) end, lpvm.self())
  lpvm.send(echo, keep)
  T.ok(rawequal(lpvm.receive(T.WAIT), keep), "the held one still the same value")
  -- and without a collection: made, compared and dropped, they take no memory at all
  collectgarbage("stop")
  local before = collectgarbage("count")
  for _ = 1, n // 10 do T.ok(lpvm.make_ref() ~= keep) end
  local after = collectgarbage("count")
  collectgarbage("restart")
  T.ok(after - before < 1, string.format("%.1f KB for %d references", after - before, n // 10))
end)

T.run()
