-- test_code.lua -- hot code loading (lpvm.code, vm/lcode.c): versions, the safe point
-- update, local calls keeping old code, purge, soft_purge, check_process, modified.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local code = lpvm.code

-- A module whose f returns `tag`; loop() serves {caller} with M.f() until "stop".
local function source(tag)
  return ([[
local M = {}
function M.f() return %q end
function M.loop()
  while true do
    local from = lpvm.receive()
    if from == "stop" then return end
    lpvm.send(from, M.f())
  end
end
return M
]]):format(tag)
end

local function fresh(name, tag)
  assert(code.load(name, source(tag or "v1")))
  return name
end

local function ask(pid)
  lpvm.send(pid, lpvm.self())
  return T.recv()[1]
end

-- Run fn(dir, write) with a scratch folder first on package.path; write(text) writes
-- the module file `file` there. The folder goes afterwards.
local function with_module_file(file, fn)
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir))
  local saved = package.path
  package.path = dir .. "/?.lua;" .. package.path
  local function write(text)
    local f = assert(io.open(dir .. "/" .. file .. ".lua", "w"))
    f:write(text)
    f:close()
  end
  local ok, err = pcall(fn, dir, write)
  code.purge(file)       -- the module goes with its file: modified() forgets it
  code.delete(file)
  code.purge(file)
  package.path = saved
  os.remove(dir .. "/" .. file .. ".lua")
  os.remove(dir)
  if not ok then error(err, 0) end
end

test("load, is_loaded, which, all_loaded", function()
  local name = fresh("code_basic")
  T.eq(code.is_loaded(name), 1)
  T.eq(require(name).f(), "v1")
  T.eq(code.load(name, source("v2")), 2)
  T.eq(code.is_loaded(name), 2)
  T.eq(require(name).f(), "v2", "the caller sees the new version at once")
  T.eq(code.is_loaded("code_never_loaded"), false)
  T.eqv(table.pack(code.which("code_never_loaded")), table.pack(nil, "non_existing"))
  local found
  for _, m in ipairs(code.all_loaded()) do
    if m.module == name then found = m end
  end
  T.ok(found and found.version == 2 and found.old_version == 1)
  T.raises(function() code.load(42) end, "bad argument #1 to 'load'")
  T.raises(function() code.load("x", 42) end, "bad argument #2 to 'load'")
  -- a NUL in a module name was a module of its own ("a\0b" loaded as version 1)
  T.raises(function() code.load("a\0b", "return {}") end, "bad argument #1 to 'load'", "NUL")
  T.raises(function() code.is_loaded("a\0b") end, "bad argument #1 to 'is_loaded'", "NUL")
  -- check_process(pid, module): the module is #2 (it said #1), a non-pid is #1 (it
  -- raised "bad argument #1 to 'info'" from inside code.lua)
  T.raises(function() code.check_process(lpvm.self(), 42) end,
           "bad argument #2 to 'check_process'")
  T.raises(function() code.check_process(42, name) end,
           "bad argument #1 to 'check_process'", "pid expected")
  code.purge(name)
end)

test("a syntax error changes nothing; a second load waits for a purge", function()
  local name = fresh("code_syntax")
  local ok, err = code.load(name, "local x = ")
  T.eq(ok, nil)
  T.ok(err:find("unexpected symbol"), err)
  T.eq(code.is_loaded(name), 1)
  T.eq(require(name).f(), "v1")
  T.eq(code.load(name, source("v2")), 2)
  T.eqv(table.pack(code.load(name, source("v3"))), table.pack(nil, "not_purged"))
  T.ok(code.soft_purge(name))
  T.eq(code.load(name, source("v3")), 3)
  code.purge(name)
end)

test("processes get the new version at their next safe point, in place", function()
  local name = fresh("code_inplace")
  local me = lpvm.self()
  local p = lpvm.spawn(function()
    local M = require(name)
    local held = M.f         -- a local call: keeps the old code
    local tbl = M
    while true do
      local from = lpvm.receive()
      if from == "stop" then return end
      lpvm.send(from, M.f(), held(), tbl == require(name))
    end
  end)
  lpvm.send(p, me)
  T.eqv(T.recv(), table.pack("v1", "v1", true))
  code.load(name, source("v2"))
  lpvm.send(p, me)
  T.eqv(T.recv(), table.pack("v2", "v1", true), "M.f new, the local old, same table")
  lpvm.send(p, "stop")
  code.purge(name)
end)

test("require of a held module in a new process: as require, without the package library", function()
  local name = "code_light"
  assert(code.load(name, "local M = { args = table.pack(...) }\n"
    .. "function M.f() return 'v1' end\nreturn M"))
  assert(code.load("code_light_nil", "x_light = 1"))   -- returns nothing
  require(name)            -- compiled here: the code server keeps its bytecode
  require("code_light_nil")
  local me = lpvm.self()
  local p = lpvm.spawn(function()
    local M, where = require(name)
    local none = require("code_light_nil")
    local opened = rawget(_G, "package") ~= nil          -- before anything opens it
    local ets = require("ets")                           -- a preload entry: the C module
    lpvm.send(me, opened, M.args[1], M.args[2], M.args.n, where, none, M == require(name),
      package.loaded[name] == M, package.loaded.code_light_nil, type(ets.new))
    while lpvm.receive() ~= "stop" do lpvm.send(me, M.f(), require(name) == M) end
  end)
  T.eqv(T.recv(), table.pack(false, name, name, 2, name, true, true, true, true,
    "function"), "loaded as require does, package left closed until asked for")
  assert(code.load(name, "local M = {}\nfunction M.f() return 'v2' end\nreturn M"))
  lpvm.send(p, "again")
  T.eqv(T.recv(), table.pack("v2", true), "its version noted: the safe point updates it")
  lpvm.send(p, "stop")
  code.purge(name)
  code.delete(name)
  code.purge(name)
  code.delete("code_light_nil")
  code.purge("code_light_nil")
end)

test("a new version that fails to run keeps the old one in that process", function()
  local name = fresh("code_failing")
  local p = lpvm.spawn(function() require(name).loop() end)
  T.eq(ask(p), "v1")
  code.load(name, "error('no good')")
  T.eq(ask(p), "v1", "kept the old module table")
  lpvm.send(p, "stop")
  code.purge(name)
end)

test("check_process, soft_purge and purge: exactly the processes running old code", function()
  local name = fresh("code_purge")
  local me = lpvm.self()
  local inside = lpvm.spawn(function() require(name).loop() end)   -- old M.loop on its stack
  local user = lpvm.spawn(function()                                -- calls M.f between receives
    local M = require(name)
    while true do
      local from = lpvm.receive()
      if from == "stop" then return end
      lpvm.send(from, M.f())
    end
  end)
  local other = lpvm.spawn(function() lpvm.receive() end)
  T.eq(ask(inside), "v1")
  T.eq(ask(user), "v1")
  local refs = {}
  for _, p in ipairs({ inside, user, other }) do refs[p] = lpvm.monitor(p) end
  T.eq(code.check_process(inside, name), false, "no old code before a load")
  code.load(name, source("v2"))
  T.eq(code.check_process(inside, name), true)
  T.eq(code.check_process(user, name), false)
  T.eq(code.check_process(other, name), false)
  T.eq(ask(inside), "v2", "old loop, new M.f")
  local ok, users = code.soft_purge(name)
  T.eq(ok, false)
  T.eqv(table.pack(table.unpack(users)), table.pack(inside))
  T.eq(code.is_loaded(name), 2)
  local killed, pids = code.purge(name)
  T.eq(killed, true)
  T.eqv(table.pack(table.unpack(pids)), table.pack(inside))
  local _, ref, _, pid, why = table.unpack(T.recv())
  T.ok(ref == refs[inside] and pid == inside and why == "killed", tostring(why))
  T.eq(ask(user), "v2")
  T.eq(code.purge(name), false, "nothing old left")
  lpvm.send(user, "stop")
  lpvm.send(other, "stop")
  -- their DOWNs are taken here: left in the mailbox, one that came late (a loaded
  -- machine) was taken for another test's message ("expected up, got DOWN")
  T.eqv(table.pack(T.down(refs[user])), table.pack(user, "normal"))
  T.eqv(table.pack(T.down(refs[other])), table.pack(other, "normal"))
  T.eqv(table.pack(code.check_process(inside, name)), table.pack(nil, "noproc"))
end)

test("delete makes the current version old", function()
  local name = fresh("code_delete")
  T.eq(code.delete(name), true)
  T.eq(code.is_loaded(name), false)
  T.eq(code.delete(name), false)
  T.ok(code.soft_purge(name))
  T.eq(code.load(name, source("again")), 2)
  code.purge(name)
end)

test("a deleted module's file is loaded again by the next require", function()
  with_module_file("code_del_file", function(_, write)
    write(source("file"))
    T.eq(require("code_del_file").f(), "file")
    T.eq(code.delete("code_del_file"), true)
    package.loaded.code_del_file = nil   -- as a process that never required it
    T.eq(require("code_del_file").f(), "file")
    T.eq(code.is_loaded("code_del_file"), 2)
    T.ok(code.soft_purge("code_del_file"))
  end)
end)

test("modified and reload_changed follow the files", function()
  with_module_file("code_file_mod", function(dir, write_text)
    local function write(tag) write_text(source(tag)) end
    write("disk1")
    local M = require "code_file_mod"
    T.eq(M.f(), "disk1")
    T.eq(code.which("code_file_mod"), dir .. "/code_file_mod.lua")
    T.eqv(table.pack(table.unpack(code.modified())), table.pack())
    local p = lpvm.spawn(function() require("code_file_mod").loop() end)
    T.eq(ask(p), "disk1")
    write("disk2, longer")
    T.eqv(table.pack(table.unpack(code.modified())), table.pack("code_file_mod"))
    local res = code.reload_changed()
    T.eq(res.code_file_mod, 2)
    T.eq(M.f(), "disk2, longer")
    T.eq(ask(p), "disk2, longer")
    T.eqv(table.pack(table.unpack(code.modified())), table.pack())
    lpvm.send(p, "stop")
    code.purge("code_file_mod")
  end)
end)

test("a module file that does not compile is not registered; fixed, it loads", function()
  with_module_file("code_broken", function(_, write)
    write("local x = ")
    local ok, err = pcall(require, "code_broken")
    T.ok(not ok and err:find("error loading module 'code_broken'", 1, true), err)
    T.eq(code.is_loaded("code_broken"), false)
    write("return { v = 1 }")
    T.eq(require("code_broken").v, 1)
    T.eq(code.is_loaded("code_broken"), 1)
  end)
end)

test("a gen_server upgraded with sys: suspend, load, change_code, resume", function()
  local gen_server, sys = require "gen_server", require "sys"
  local v1 = [[
local M = {}
function M.init(n) return "ok", n end
function M.handle_call(req, _, n)
  if req == "get" then return "reply", "v1:" .. n, n end
  return "reply", "ok", n + 1
end
function M.handle_cast(_, n) return "noreply", n + 1 end
return M
]]
  local v2 = [[
local M = {}
function M.init(n) return "ok", { count = n } end
function M.handle_call(req, _, s)
  if req == "get" then return "reply", "v2:" .. s.count .. ":" .. s.note, s end
  s.count = s.count + 1
  return "reply", "ok", s
end
function M.handle_cast(_, s) s.count = s.count + 1 return "noreply", s end
function M.code_change(old_vsn, n, extra) return "ok", { count = n, note = extra .. old_vsn } end
return M
]]
  assert(code.load("code_gs", v1))
  local pid = assert(gen_server.start("code_gs", 5))
  gen_server.call(pid, "incr")
  T.eq(gen_server.call(pid, "get"), "v1:6")
  local old = code.is_loaded("code_gs")
  T.eq(sys.suspend(pid), true)
  gen_server.cast(pid, "incr")              -- waits in the mailbox while suspended
  T.eq(code.load("code_gs", v2), old + 1)
  T.eq(sys.change_code(pid, "code_gs", old, "from v"), true)
  T.eq(sys.get_state(pid).count, 6, "the state was converted; the cast still waits")
  T.eq(sys.resume(pid), true)
  T.eq(gen_server.call(pid, "get"), "v2:7:from v1")
  T.eqv(table.pack(sys.change_code(pid, "other_mod", 1, "")), table.pack(nil, "not the server's module"))
  T.ok(code.soft_purge("code_gs"), "the server left version 1")
  gen_server.stop(pid)
  T.raises(function() sys.suspend(pid) end, "noproc")
  code.purge("code_gs")
end)

test("reload while many processes call M.f: old or new, never an error, then new", function()
  local name = fresh("code_stress", "old")
  local n = T.scaled(1000, 50)
  local me = lpvm.self()
  local refs = {}
  -- The callers run one priority below this process (21, the default is 20): each
  -- time it is woken it gets a worker within a slice instead of waiting behind a round
  -- of n busy callers (~1 ms each), which made the spawns alone take ~25 s. They still
  -- call M.f while the load happens (they have the workers whenever this one waits).
  for i = 1, n do
    local pid, ref = lpvm.spawn_monitor({ priority = 21 }, function()
      local M = require(name)
      local seen_new = false
      lpvm.send(me, "up")
      for k = 1, 1e9 do
        local v = M.f()
        if v == "new" then
          if not seen_new then lpvm.send(me, "new") seen_new = true end
        elseif v ~= "old" or seen_new then
          error("bad value " .. tostring(v) .. " after new: " .. tostring(seen_new))
        end
        if seen_new and k % 64 == 0 and lpvm.receive(0) == "stop" then return end
      end
    end)
    refs[ref] = pid
  end
  -- n busy processes share the workers in ~1 ms slices, so each message this process
  -- waits for may come a whole round of them later: seconds on a loaded machine (5 s
  -- timed out). Killed if the test fails, or they starve every test after it.
  local long = 60000
  local ok, err = pcall(function()
    for _ = 1, n do T.eq(T.recv(long)[1], "up") end
    T.eq(code.load(name, source("new")), 2)
    for _ = 1, n do T.eq(T.recv_match(function(m) return m == "new" end, long)[1], "new") end
  end)
  if not ok then
    for _, pid in pairs(refs) do lpvm.exit(pid, "kill") end
    error(err, 0)
  end
  for _, pid in pairs(refs) do lpvm.send(pid, "stop") end
  for _ = 1, n do
    local m = T.recv(long)
    T.eq(m[1], "DOWN")
    T.eq(m[5], "normal")
  end
  code.purge(name)
end)

test("concurrent loads and purges while processes run the module (stress)", function()
  local name = fresh("code_churn", "v0")
  local me = lpvm.self()
  local n = T.scaled(100, 20)
  local workers = {}
  -- one priority below this process and the loaders, as in the test above: purges and
  -- loads are not queued behind a round of n busy workers
  for i = 1, n do
    workers[i] = lpvm.spawn({ priority = 21 }, function()
      local M = require(name)
      for k = 1, 1e9 do
        local v = M.f()
        if type(v) ~= "string" or not v:match("^v%d+$") then error("bad " .. tostring(v)) end
        if k % 32 == 0 and lpvm.receive(0) == "stop" then lpvm.send(me, "done") return end
      end
    end)
  end
  -- two loaders race each other: each load either wins or is refused (not_purged)
  local rounds = T.scaled(10, 3)
  for l = 1, 2 do
    lpvm.spawn(function()
      for r = 1, rounds do
        code.load(name, source("v" .. (l * 1000 + r)))
        code.purge(name)
        lpvm.sleep(1)
      end
      lpvm.send(me, "loader")
    end)
  end
  -- each purge asks every busy worker: allow a slow, loaded machine its time
  T.eq(T.recv_match(function(m) return m == "loader" end, 120000)[1], "loader")
  T.eq(T.recv_match(function(m) return m == "loader" end, 120000)[1], "loader")
  local alive = 0
  for _, pid in ipairs(workers) do
    if lpvm.send(pid, "stop") and lpvm.info(pid) then alive = alive + 1 end
  end
  -- purge may kill a worker preempted inside old M.f; every live one finishes cleanly
  for _ = 1, alive do T.recv_match(function(m) return m == "done" end, 60000) end
  code.purge(name)
end)

test("a source string is text only: bytecode needs mode 'b' (Lua does not verify it)", function()
  local bc = string.dump(load("return {f = function() return 42 end}"))
  local vsn, err = code.load("bc_refused", bc)
  T.eq(vsn, nil)
  T.eq(err, "bc_refused: attempt to load a binary chunk (mode is 't')")
  T.eq(code.is_loaded("bc_refused"), false)
  T.eq(code.load("bc_text", "return 1", "b"), nil)   -- "b" alone refuses text
  -- asked for: loaded, and a new process loads that version too
  T.ok(code.load("bc_allowed", bc, "b"))
  T.eq(require("bc_allowed").f(), 42)
  local me = lpvm.self()
  local _, ref = lpvm.spawn_monitor(function() lpvm.send(me, require("bc_allowed").f()) end)
  T.eq(T.recv()[1], 42)
  T.down(ref)
  T.ok(code.load("bc_both", "return {f = function() return 7 end}", "bt"))
  T.eq(require("bc_both").f(), 7)
  T.raises(function() code.load("bc_bad", "return 1", "x") end, "bad argument #3")
  T.raises(function() code.load("bc_bad", "return 1", "") end, "bad argument #3")
  for _, m in ipairs({"bc_allowed", "bc_both"}) do code.delete(m) code.purge(m) end
end)

T.run()
