-- test_recycle.lua -- a recycled Lua state is indistinguishable from a new one
-- (lpvm.recycle, vm/lproc_pool.c clean_cf): recycling is on by default, so every short
-- process may run in a state another process used before.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

-- Everything a process can see of its state: sorted, addresses left out.
local function fingerprint(parent)
  local l = require "lpvm"
  -- every global it uses is fetched first: a lazy global added while keys() walks
  -- the globals table would make the walk undefined
  local next, type, tostring, table, _G = next, type, tostring, table, _G
  local out = {}
  local function keys(t)
    if t == nil then return "none" end
    local ks = {}
    for k, v in next, t do
      local kt = type(k)
      ks[#ks + 1] = (kt == "string" or kt == "number" or kt == "boolean") and
        (kt .. ":" .. tostring(k) .. "=" .. type(v)) or (kt .. "=" .. type(v))
    end
    table.sort(ks)
    return table.concat(ks, ",")
  end
  out.globals = keys(_G)
  out.globals_mt = keys(getmetatable(_G))
  local reg = debug.getregistry()
  out.registry = keys(reg)
  out.loaded = keys(reg._LOADED)
  out.mt_nil = keys(debug.getmetatable(nil))
  out.mt_bool = keys(debug.getmetatable(true))
  out.mt_number = keys(debug.getmetatable(0))
  out.mt_string = keys(debug.getmetatable(""))
  out.mt_function = keys(debug.getmetatable(print))
  out.mt_thread = keys(debug.getmetatable(coroutine.create(print)))
  out.string_index = type(getmetatable("").__index)
  out.method = ("abc"):upper()        -- the stand-in opens the string library
  out.coerce = "10" + 1
  -- a previous owner's Lua hook must not show; lpvm's own slice hook (a C hook, armed
  -- by the ticker's signal when a slice is over, vm/lproc_slice.c) may, at any call of
  -- a C function such as debug.gethook: on a loaded machine a slice ends anywhere
  local hook = debug.gethook()
  out.hook = hook == "external hook" and "nil" or tostring(hook)
  out.gc_running = collectgarbage("isrunning")
  out.gc_mode = collectgarbage("incremental")        -- the mode it was in
  out.gc_pause = collectgarbage("setpause", 200)     -- the pause it had
  out.gc_stepmul = collectgarbage("setstepmul", 100)
  out.undefined = tostring(undefined_global_xyz)
  out.leaked = tostring(rawget(_G, "leaked"))
  collectgarbage()   -- the heap compared below is what is live, not garbage
  collectgarbage()
  local info = l.info(l.self())
  out.heap_limit = info.heap_limit
  out.big = #string.rep("x", 1 << 20)                -- no heap limit of its predecessor
  l.send(parent, out, info.recycled, info.memory, info.stock)
end

-- Changes everything a process can change in its state, then ends normally.
local function dirty(parent)
  local l = require "lpvm"
  leaked = "secret"
  getmetatable("").__index = function() return "stale string stand-in" end
  getmetatable("").__add = function() return "stale" end
  local mt = { __index = function() return "stale metatable" end }
  debug.setmetatable(nil, mt)
  debug.setmetatable(true, mt)
  debug.setmetatable(0, mt)
  debug.setmetatable(print, mt)
  debug.setmetatable(coroutine.create(print), mt)
  package.loaded.leaky = { 1 }
  local reg = debug.getregistry()
  reg.leak = true
  reg[4242] = true
  reg[mt] = mt
  collectgarbage("generational")
  collectgarbage("setpause", 1000)
  collectgarbage("setstepmul", 400)
  collectgarbage("stop")
  debug.sethook(function() end, "l")
  warn("@on")
  -- a finalizer runs while the state is cleaned, and tries to leave a metatable
  -- behind without making an object (one that does is closed: see below)
  setmetatable({}, { __gc = function() debug.setmetatable(nil, mt) end })
  local t = {}
  for i = 1, 100 do t[i] = "string " .. i end   -- the string table grows
  setmetatable(_G, { __index = function() return "leaky" end })
  l.send(parent, "dirty")
end

local function run(fn, opts, ...)
  local pid, ref = lpvm.spawn_monitor(opts or {}, fn, lpvm.self(), ...)
  local got = T.recv()
  T.down(ref)
  return got, pid
end

test("a recycled state is a fresh one: globals, registry, metatables, loaded, GC, hook, limits", function()
  local old = lpvm.recycle(0)
  local fresh = run(fingerprint)
  T.eq(fresh[2], false, "recycle(0): a new state")
  lpvm.recycle(1)
  T.eq(run(dirty, { max_heap = 4 << 20 })[1], "dirty")
  local rec = run(fingerprint)
  T.eq(rec[2], true, "the dirty process's state was recycled")
  for k, v in pairs(fresh[1]) do T.eq(rec[1][k], v, "recycled state differs in " .. k) end
  for k in pairs(rec[1]) do T.ok(fresh[1][k] ~= nil, "recycled state has " .. k) end
  -- Live bytes (the fingerprint collects first): a recycled state keeps at most
  -- what LPROC_POOL_SLACK lets a pooled state keep of its predecessor's growth.
  T.ok(rec[3] <= fresh[3] + 1500, "heap " .. rec[3] .. " vs a new state's " .. fresh[3])
  lpvm.recycle(old)
end)

-- The cleaning keeps the lazy globals' metatable and the string stand-in when the
-- owner could not reach them (no getmetatable, debug or package: llibs.c `exposed`),
-- and makes them anew otherwise. Each case: the next state is still a fresh one.
local function same_as_fresh(dirtier, what)
  local old = lpvm.recycle(0)
  local fresh = run(fingerprint)
  lpvm.recycle(1)
  T.eq(run(dirtier)[1], "dirty", what)
  local rec = run(fingerprint)
  T.eq(rec[2], true, what .. ": recycled")
  for k, v in pairs(fresh[1]) do T.eq(rec[1][k], v, what .. ": differs in " .. k) end
  lpvm.recycle(old)
end

test("the lazy tables kept: an owner that never reached them", function()
  same_as_fresh(function(parent)
    local l = require "lpvm"
    leaked = "secret"
    rawset(_G, "raw", true)
    collectgarbage("setpause", 1000)
    warn("@on")
    local co = coroutine.wrap(function() return select("#", 1, 2) end)
    kept_ref = { co() }
    -- unreachable only once the state is cleaned: its finalizer runs then
    finalized = setmetatable({}, { __gc = function() rawset(_G, "late", true) end })
    l.send(parent, "dirty")
  end, "untouched")
end)

test("the lazy tables made anew: _G's metatable replaced, the string library opened", function()
  same_as_fresh(function(parent)
    local l = require "lpvm"
    setmetatable(_G, { __index = function() return "leaky" end })
    local up = ("abc"):upper()   -- the stand-in gives way to the string library
    l.send(parent, "dirty", up, "10" + 1)
  end, "replaced")
end)

test("the lazy tables made anew: a finalizer reaches them while the state is cleaned", function()
  same_as_fresh(function(parent)
    local l = require "lpvm"
    -- getmetatable is looked up and called only in the finalizer, which changes
    -- both tables without making an object (a state whose finalizer makes one is
    -- closed, not recycled)
    finalized = setmetatable({}, { __gc = function()
      getmetatable("").__index = rawequal
      getmetatable(_G).__index = rawequal
    end })
    l.send(parent, "dirty")
  end, "finalizer")
end)

-- An owner with no finalizer left to run (none set, or all run in its life) is cleaned
-- without a collection (lproc_pool.c clean_quick, vm/lraw.h): its garbage stays
-- until the next owner's collections, out of that owner's reach.
test("no finalizer pending: garbage left behind, and nothing of it shows", function()
  same_as_fresh(function(parent)
    local l = require "lpvm"
    leaked = "secret"
    local weak = setmetatable({}, { __mode = "k" })
    for i = 1, 50 do weak[{ i }] = "v" .. i end
    debug.getregistry().weak = weak
    local ran = false
    setmetatable({}, { __gc = function() ran = true end })
    collectgarbage()   -- its finalizer runs now, in the owner's life
    collectgarbage()
    kept_ref = { ran, coroutine.create(print), function() return weak end }
    l.send(parent, "dirty")
  end, "no finalizer pending")
end)

-- An owner that touched no library and read no global leaves a bare registry and the
-- lazy tables in place: the cleaning reads that in place and makes nothing again
-- (lproc_pool.c clean_bare, llibs.c llibs_in_place), keeping the globals table only
-- if it is empty as a new one (no array, no hash part). Owners that end normally,
-- write globals, or write and clear one: the next state is a fresh one.
test("a bare owner: the globals table kept only when empty", function()
  local owners = {
    { "computes", function(n) local t = {} for i = 1, n do t[i] = i * i end return #t end, 100 },
    { "writes a global", function() leaked = "secret" end },
    { "writes and clears a global", function() leaked = "secret" leaked = nil end },
    { "writes globals into the array part", function() _ENV[1] = "one" _ENV[2] = "two" end },
  }
  local old = lpvm.recycle(0)
  local fresh = run(fingerprint)
  lpvm.recycle(1)
  for _, o in ipairs(owners) do
    local _, ref = lpvm.spawn_monitor(o[2], o[3])
    T.down(ref)
    local rec = run(fingerprint)
    T.eq(rec[2], true, o[1] .. ": recycled")
    for k, v in pairs(fresh[1]) do T.eq(rec[1][k], v, o[1] .. ": differs in " .. k) end
  end
  lpvm.recycle(old)
end)

-- A state made ahead by the maker thread (vm/lproc_maker.c) is a new state: the same
-- as one made on the spot, which a process with a heap limit always gets (so the
-- limit sees each allocation). With LPVM_STOCK=0 no process gets one.
test("a state from the maker's stock is a fresh one", function()
  local old = lpvm.recycle(0)
  local spot = run(fingerprint, { max_heap = 64 << 20 })
  T.eq(spot[2], false, "recycle(0): not recycled")
  T.eq(spot[4], false, "a heap limit: made on the spot")
  local off = (tonumber(os.getenv("LPVM_STOCK")) or 32) == 0
  local stock
  -- the maker starts once 32 spawns found no state (LPROC_MAKER_AFTER, counted from
  -- the VM's start); with it on, after that many tries each next one once the stock
  -- holds a state (lpvm.stock), until a deadline: the maker runs at idle priority, and
  -- a busy machine may give it no core for seconds
  local tries, deadline = 0, lpvm.now() + 60000
  repeat
    local got = run(fingerprint)
    T.eq(got[2], false, "recycle(0): not recycled")
    if got[4] then stock = got break end
    tries = tries + 1
    if not off and tries >= 32 then
      while lpvm.stock() == 0 and lpvm.now() <= deadline do lpvm.sleep(5) end
    end
  until (off and tries >= 5) or (not off and lpvm.now() > deadline)
  if off then
    T.eq(stock, nil, "LPVM_STOCK=0: no state from the stock")
  else
    T.ok(stock, "a process got a state from the stock (" .. tries .. " tries, "
      .. lpvm.stock() .. " in stock)")
    for k, v in pairs(spot[1]) do
      if k ~= "heap_limit" then T.eq(stock[1][k], v, "stock state differs in " .. k) end
    end
    for k in pairs(stock[1]) do T.ok(spot[1][k] ~= nil, "stock state has " .. k) end
    T.eq(stock[1].heap_limit, 0, "no heap limit")
    -- the same objects: only the string table's and collector's timing may differ
    T.ok(math.abs(stock[3] - spot[3]) <= 256, "heap " .. stock[3] .. " vs " .. spot[3])
  end
  lpvm.recycle(old)
end)

test("no finalizer pending: a garbage-heavy owner still gives back a small state", function()
  local old = lpvm.recycle(0)
  local fresh = run(fingerprint)
  lpvm.recycle(1)
  T.eq(run(function(parent)
    local t = {}
    for i = 1, 300 do t[i] = { tostring(i) } end   -- garbage over the pool's slack
    t = nil
    require("lpvm").send(parent, "dirty")
  end)[1], "dirty")
  local rec = run(fingerprint)
  T.eq(rec[2], true, "recycled")
  for k, v in pairs(fresh[1]) do T.eq(rec[1][k], v, "differs in " .. k) end
  T.ok(rec[3] <= fresh[3] + 1500, "heap " .. rec[3] .. " vs a new state's " .. fresh[3])
  lpvm.recycle(old)
end)

-- A body of more than 1 KB in memory that reached the lpvm module (EStone's chain
-- process): the pool allows for the kept function and the module's garbage
-- (lproc_pool.c pool_max_bytes), and the state the next process gets is still a new
-- one in all it can see.
test("no finalizer pending: a big body that reached lpvm gives its state back", function()
  local old = lpvm.recycle(0)
  local fresh = run(fingerprint)
  lpvm.recycle(1)
  local function big(parent, a, b, c)
    local me = lpvm.self()
    local t = { alpha = a, beta = b, gamma = c, delta = "delta", epsilon = "epsilon" }
    for i = 1, 3 do
      if t.alpha == i then t.beta = (t.beta or 0) + i elseif t.gamma == i then
        t.gamma = tostring(i) .. "zeta" elseif t.delta == "eta" then t.delta = "theta"
      else t.epsilon = string.format("%d-%s", i, tostring(t.epsilon)) end
    end
    lpvm.send(parent, "dirty", me ~= nil and t.epsilon ~= nil)
  end
  T.eq(run(big)[1], "dirty")
  local rec = run(fingerprint)
  T.eq(rec[2], true, "the big body's state was recycled")
  for k, v in pairs(fresh[1]) do T.eq(rec[1][k], v, "differs in " .. k) end
  lpvm.recycle(old)
end)

-- The quick cleaning leaves the old owner's garbage (up to the pool's 8 KB allowance);
-- a process with a heap limit must not count it against its limit (vm/lproc.c
-- lproc_newstate collects it first).
test("no finalizer pending: a process with max_heap does not pay its predecessor's garbage", function()
  local old = lpvm.recycle()
  local function owner()   -- about 1.5 KB of garbage, under the pool's allowance
    local t = {}
    for i = 1, 20 do t[i] = { i } end
    -- old before it is garbage: two collections while it lives (generational mode),
    -- so the next owner's first minor collection, which runs or not as the set-up's
    -- bytes happen to fall, does not free it before the probe reads its heap
    collectgarbage("step")
    collectgarbage("step")
    return #t
  end
  local function probe(parent)
    local heap = collectgarbage("count") * 1024   -- before it makes anything
    local l = require "lpvm"
    l.send(parent, heap, l.info(l.self()).recycled)
  end
  local function after_owner(opts)
    lpvm.recycle(0)   -- the pool emptied: the owner runs in a new state
    lpvm.recycle(1)
    local _, ref = lpvm.spawn_monitor(owner)
    T.down(ref)
    return run(probe, opts)
  end
  local plain = after_owner()
  local limited = after_owner({ max_heap = 4 << 20 })
  T.eq(plain[2], true, "recycled")
  T.eq(limited[2], true, "recycled")
  -- The quick cleaning reads Lua's finalizer lists in place (vm/lraw.h): with the
  -- mirror refused (LPVM_NO_LRAW) every state is collected, no owner's garbage is left
  -- for anyone, and both processes start the same.
  local off = os.getenv("LPVM_NO_LRAW")
  if off and off ~= "" and off ~= "0" then
    T.ok(math.abs(limited[1] - plain[1]) <= 128,
         "no garbage left: with max_heap " .. limited[1] .. " B, without " .. plain[1] .. " B")
  else
    T.ok(limited[1] + 128 <= plain[1],
         "with max_heap " .. limited[1] .. " B, without " .. plain[1] .. " B (the garbage counted)")
  end
  lpvm.recycle(old)
end)

test("recycling is on by default", function()
  T.ok(lpvm.recycle() > 0, "default pool bound " .. tostring(lpvm.recycle()))
end)

test("a finalizer that makes objects while its state is cleaned: the state is closed", function()
  local old = lpvm.recycle(0)
  lpvm.recycle(1)
  local me = lpvm.self()
  run(function(parent)
    local l = require "lpvm"
    -- at cleaning this makes a new object with a finalizer of its own, which would
    -- run in the next owner's life: that state must not be reused
    setmetatable({}, { __gc = function()
      setmetatable({}, { __gc = function() l.send(me, "leak", l.self()) end })
    end })
    l.send(parent, "armed")
  end)
  local rec, pid = run(fingerprint)
  T.eq(rec[2], false, "not recycled")
  T.no_msg(100)
  collectgarbage()
  T.ok(pid)
  lpvm.recycle(old)
end)

-- A finalizer that gives its own object its metatable again makes nothing new: the
-- object waits for finalization once more after the cleaning's last collection, and
-- its finalizer would run in the next owner's life, as the next owner (lpvm.self,
-- send, exit, register). Such a state is closed (lproc_pool.c clean_cf).
test("a finalizer that rearms itself while its state is cleaned: the state is closed", function()
  local old = lpvm.recycle(0)
  lpvm.recycle(1)
  for round = 1, 3 do
    run(function(parent)
      local l = require "lpvm"
      local sm, pc = setmetatable, pcall
      local mt, n = {}, 0
      -- (rearmed first: a send while the state is cleaned, nobody's, ends the finalizer)
      mt.__gc = function(o) n = n + 1; sm(o, mt); if n > 2 then pc(l.send, parent, "ghost", l.self()) end end
      sm({}, mt)
      l.send(parent, "armed")
    end)
    -- the observer collects (a pending finalizer would run now) and then reports:
    -- its messages come in the order it sent them, so a ghost would come first
    local pid, ref = lpvm.spawn_monitor(function(parent)
      local l = require "lpvm"
      for _ = 1, 4 do collectgarbage() end
      l.send(parent, "observer", l.self(), l.info(l.self()).recycled)
    end, lpvm.self())
    local m = T.recv()
    T.eq(m[1], "observer", "round " .. round .. ": " .. tostring(m[1]) .. " " .. tostring(m[2]))
    T.eq(m[2], pid)
    T.down(ref)
  end
  lpvm.recycle(old)
end)

-- Lua seeds a state's generator (and math.randomseed()) from the time in seconds and
-- the state's address: a recycled state keeps its address, so processes started in
-- one second drew the same numbers (new states too, at a freed state's address).
-- Each process draws its own (llibs.c open_math), as each Erlang process seeds rand
-- its own way; an explicit seed still gives Lua's sequence for it.
test("math.random: each process, recycled or new, draws its own numbers", function()
  local old = lpvm.recycle()
  local seen, n = {}, 0
  local function draw(parent, reseed)
    local l = require "lpvm"
    if reseed == "none" then math.randomseed() elseif reseed then math.randomseed(reseed) end
    l.send(parent, math.random(0) .. " " .. math.random(0), l.info(l.self()).recycled)
  end
  for _, bound in ipairs { 1, 0 } do   -- recycled states, then new ones
    lpvm.recycle(bound)
    for i = 1, 6 do
      local reseed = i % 3 == 2 and "none" or nil
      local got = run(draw, nil, reseed)
      if bound == 1 and i > 1 then T.eq(got[2], true, "recycled") end
      T.eq(seen[got[1]], nil, "the same numbers twice: " .. got[1])
      seen[got[1]] = true
      n = n + 1
    end
  end
  T.eq(n, 12)
  -- a seed given: the same numbers in every process, and the next one its own again
  lpvm.recycle(1)
  local a = run(draw, nil, 42)[1]
  T.eq(run(draw, nil, 42)[1], a, "randomseed(42) twice")
  T.ok(run(draw)[1] ~= a, "after randomseed(42), the next process's own seed")
  lpvm.recycle(old)
end)

test("many recycled processes in a row, some failing, some killed", function()
  local n = T.scaled(400, 40)
  local me = lpvm.self()
  for i = 1, n do
    local k = i % 4
    local pid, ref = lpvm.spawn_monitor(function(parent, k2, i2)
      local l = require "lpvm"
      assert(rawget(_G, "mark") == nil, "a previous owner's global")
      mark = i2
      if k2 == 1 then error("fails " .. i2) end
      if k2 == 2 then l.receive() end
      l.send(parent, i2)
    end, me, k, i)
    if k == 2 then lpvm.exit(pid, "kill") end
    local _, reason = T.down(ref)
    if k == 0 or k == 3 then
      T.eq(reason, "normal")
      T.eq(T.recv()[1], i)
    elseif k == 1 then
      T.ok(T.mentions(reason, "fails " .. i), T.show(reason))
    else
      T.eq(reason, "killed")
    end
  end
end)

-- C finalizers look their metatable up in the registry (luaL_checkudata): an open
-- file of a recycled process is closed (and flushed) while its state is cleaned.
test("a C finalizer finds its metatable while the state is cleaned: io files close", function()
  local old = lpvm.recycle(0)
  lpvm.recycle(1)
  local name = os.tmpname()
  T.eq(run(function(parent, file)
    local f = assert(io.open(file, "w"))
    f:write("flushed by __gc")          -- left in the buffer: only fclose writes it
    require("lpvm").send(parent, "open")
  end, nil, name)[1], "open")
  -- the same file from a process that gets the state next
  local rec = run(fingerprint)
  T.eq(rec[2], true, "the io process's state was recycled")
  local f = assert(io.open(name))
  T.eq(f:read("a"), "flushed by __gc")
  f:close()
  os.remove(name)
  lpvm.recycle(old)
end)

-- An owner killed at max_heap leaves finalizers that the emergency collection
-- separated and did not run: what they reach (its globals, a file there) lives
-- through the cleaning's first collection, and was finalized only after its C
-- library's metatable was gone from the registry: the file stayed open, unflushed.
test("killed at max_heap with finalizers pending: its files are still closed and flushed", function()
  local old = lpvm.recycle(0)
  lpvm.recycle(4)
  local name = os.tmpname()
  local pid, ref = lpvm.spawn_monitor({ max_heap = 1 << 20 }, function(file)
    kept_file = assert(io.open(file, "w"))
    kept_file:write("flushed by __gc")   -- left in the buffer: only fclose writes it
    setmetatable({}, { __gc = function() touched = kept_file end })   -- reaches _ENV
    collectgarbage("stop")   -- its only collection is the emergency one
    local t = {}
    for i = 1, 1e7 do t[i] = ("x"):rep(100) .. i end
  end, name)
  local _, reason = T.down(ref)
  T.eq(reason, "max_heap")
  -- the state is cleaned (then closed: a heap limit was hit) after the DOWN is sent
  local got = T.wait_until(function()
    local f = assert(io.open(name))
    local s = f:read("a")
    f:close()
    return s ~= "" and s
  end)
  T.eq(got, "flushed by __gc")
  os.remove(name)
  T.ok(pid)
  lpvm.recycle(old)
end)

-- The pool is shared by every worker: spawners on all of them take and give back
-- states at once (a stress test for ThreadSanitizer).
test("concurrent spawners share the pool", function()
  local k, m = 8, T.scaled(300, 30)
  local me = lpvm.self()
  for s = 1, k do
    lpvm.spawn(function(parent, s2, m2)
      local l = require "lpvm"
      local self = l.self()
      for i = 1, m2 do
        l.spawn(function(p, tag)
          local l2 = require "lpvm"
          if rawget(_G, "owner") ~= nil then l2.send(p, "dirty", owner) end
          owner = tag
          l2.send(p, "ok")
        end, self, s2 * 100000 + i)
      end
      for _ = 1, m2 do
        local r = l.receive()
        if r ~= "ok" then l.send(parent, "dirty") return end
      end
      l.send(parent, "done", s2)
    end, me, s, m)
  end
  for _ = 1, k do T.eq(T.recv()[1], "done") end
end)

-- warn's switch lives in the state: a predecessor's warn("@on") must not show.
-- Needs a child VM (stderr); /bin/sh under a preloaded TSan runtime crashes.
test("warnings: a recycled state starts with them off", function()
  if os.getenv("LPVM_SANITIZE") == "thread" then return end
  local code = [[
    local l = require "lpvm"
    l.recycle(1)
    local pid, ref = l.spawn_monitor(function() warn("@on") end)
    l.receive(function(m) return m == "DOWN" end)
    local pid2, ref2 = l.spawn_monitor(function() warn("should not show") end)
    l.receive(function(m) return m == "DOWN" end)
    print("done")
  ]]
  local file = os.tmpname()
  local w = assert(io.open(file, "w"))
  w:write(code)
  w:close()
  local f = io.popen(string.format("'%s' '%s' 2>&1", arg[-1], file))
  local out = f:read("a")
  f:close()
  os.remove(file)
  T.ok(out:find("done"), out)
  T.ok(not out:find("should not show"), out)
end)

-- A recycled state keeps its owner's function (lproc_pool.c): the next spawn of the
-- same function takes it instead of loading its bytecode, with the new spawn's
-- upvalues and arguments and nothing of the old ones.
local function kept_maker(tag)
  local secret = { tag }
  return function(parent, arg2)
    local l = require "lpvm"
    local seen = secret[1]
    secret[1] = "changed by " .. tostring(tag)      -- the upvalue's table, this copy's
    l.send(parent, seen, arg2, rawget(_G, "mark"), l.info(l.self()).recycled)
    mark = tag
  end
end

test("the kept function: the next spawn of it has its own upvalues, arguments, globals", function()
  local old = lpvm.recycle(0)
  lpvm.recycle(1)
  local f = kept_maker("first")
  local a = run(f, nil, 1)
  T.eq(a[1], "first")
  T.eq(a[2], 1)
  for i = 2, 4 do   -- the same closure again: a copy of its upvalues each time
    local b = run(f, nil, i)
    T.eq(b[1], "first", "upvalue of spawn " .. i)
    T.eq(b[2], i)
    T.eq(b[3], nil, "a previous owner's global")
    T.eq(b[4], true, "recycled")
  end
  local g = kept_maker("second")   -- same prototype, other upvalues
  local c = run(g, nil, 5)
  T.eq(c[1], "second")
  T.eq(c[4], true)
  T.eq(run(fingerprint)[2], true, "another function in the same state")
  lpvm.recycle(old)
end)

-- A function whose only upvalue is the globals carries its bytecode's number from the
-- spawner's dump cache (lfun.c): the same number, the kept function is taken without
-- comparing its dump. Two bodies of one length alternate in one pooled state, and
-- the same body comes from two spawners (two numbers for the same bytes).
test("the kept function: numbered bytecode, bodies alternating, two spawners", function()
  local old = lpvm.recycle(0)
  lpvm.recycle(1)
  -- (small: a state that keeps a function stays within the pool's bound)
  local one = function(parent) require("lpvm").send(parent, "one") end
  local two = function(parent) require("lpvm").send(parent, "two") end
  for i, f in ipairs({ one, one, two, one, two, two, one }) do
    T.eq(run(f)[1], f == one and "one" or "two", "spawn " .. i)
  end
  -- the same body spawned by another process: its own dump, another number
  local me = lpvm.self()
  local _, ref = lpvm.spawn_monitor(function(parent, f)
    local l = require "lpvm"
    l.spawn(f, parent)
  end, me, one)
  T.down(ref)
  T.eq(T.recv()[1], "one", "from another spawner")
  T.eq(run(two)[1], "two", "after it")
  lpvm.recycle(old)
end)

test("the kept function: joined upvalues, and an owner's finalizer still sees its upvalues", function()
  local old = lpvm.recycle(0)
  lpvm.recycle(1)
  local me = lpvm.self()
  local x, y = "x", "y"
  local function joined(parent)
    local l = require "lpvm"
    l.send(parent, x, y)
    -- its two upvalues made one variable: the next owner must not get them so
    local f = debug.getinfo(1, "f").func
    local ix, iy
    for i = 1, 3 do
      local n = debug.getupvalue(f, i)
      if n == "x" then ix = i elseif n == "y" then iy = i end
    end
    debug.upvaluejoin(f, ix, f, iy)
  end
  for i = 1, 3 do
    local r = run(joined)
    T.eq(r[1], "x", "run " .. i)
    T.eq(r[2], "y", "run " .. i)
  end
  -- the owner's finalizer runs while the state is cleaned (no process then: it
  -- writes a file), and still finds the upvalue (name) it shares with the kept function
  local name = os.tmpname()
  T.eq(run(function(parent)
    local l, open = require "lpvm", io.open
    setmetatable({}, { __gc = function()
      local f = open(name, "w")
      f:write(name == nil and "lost" or "found")
      f:close()
    end })
    l.send(parent, "armed")
  end)[1], "armed")
  run(fingerprint)   -- the state was cleaned by then
  local f = assert(io.open(name))
  T.eq(f:read("a"), "found", "the finalizer's upvalue")
  f:close()
  os.remove(name)
  lpvm.recycle(old)
end)

T.run()
