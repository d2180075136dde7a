-- test_codecache.lua -- modules compile once per VM (vm/lcode.c): a cached module
-- behaves as a compiled one, an edited file is compiled again once reloaded, errors
-- keep their file and line.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir))
-- written aside and renamed over, as editors save: a loader reading the file at the
-- same moment sees the old version or the new one, never a half-written (or empty) one
local function write(name, src)
  local path = dir .. "/" .. name .. ".lua"
  local f = assert(io.open(path .. ".tmp", "w"))
  f:write(src)
  f:close()
  assert(os.rename(path .. ".tmp", path))
end

-- require `name` in a new process (with dir on its path); its result or error
local function load_in_process(name)
  local me = lpvm.self()
  lpvm.spawn(function(parent, d, n)
    package.path = d .. "/?.lua;" .. package.path
    local ok, v = pcall(require, n)
    lpvm.send(parent, ok, ok and v.value or v, ok and debug.getinfo(v.where, "S").short_src)
  end, me, dir, name)
  return T.recv()
end

test("the same module in many processes; an edit is seen", function()
  write("cc_mod", "return { value = 1, where = function() end }\n")
  for _ = 1, 5 do
    local r = load_in_process("cc_mod")
    T.eq(r[1], true); T.eq(r[2], 1)
    T.ok(r[3]:find("cc_mod.lua", 1, true), "debug info kept: " .. tostring(r[3]))
  end
  -- An edit is a new version only when loaded (Erlang's rule, docs/code.md): until
  -- then every process gets the same code.
  write("cc_mod", "return { value = 22, where = function() end }\n")
  T.eq(load_in_process("cc_mod")[2], 1, "the loaded version until a reload")
  T.eqv(table.pack(table.unpack(lpvm.code.modified())), table.pack("cc_mod"))
  T.eq(lpvm.code.reload_changed().cc_mod, 2)
  local r = load_in_process("cc_mod")
  T.eq(r[2], 22, "compiled again after the reload")
  T.ok(r[3]:find("cc_mod.lua (v2)", 1, true), "debug info names the version: " .. r[3])
end)

test("stress: many processes load and edit-reload modules at once", function()
  local me, n = lpvm.self(), T.scaled(60, 8)
  for k = 1, 4 do write("cc_par" .. k, "return { value = " .. k .. ", where = function() end }\n") end
  for i = 1, n do
    lpvm.spawn(function(parent, d, k)
      package.path = d .. "/?.lua;" .. package.path
      local sum = 0
      for j = 1, 4 do sum = sum + require("cc_par" .. j).value end
      lpvm.send(parent, "sum", sum, require("gen_server") ~= nil)
    end, me, dir, i)
    if i == n // 2 then write("cc_par4", "return { value = 40, where = function() end }\n") end
  end
  for _ = 1, n do
    local r = T.recv()
    T.ok(r[2] == 10 or r[2] == 46, "a whole version of each module: " .. tostring(r[2]))
    T.eq(r[3], true)
  end
end)

test("a module with a syntax error still names its file and line", function()
  write("cc_bad", "local x = = 1\n")
  local r = load_in_process("cc_bad")
  T.eq(r[1], false)
  T.ok(T.mentions(r[2], "cc_bad.lua:1:"), T.show(r[2]))
  T.ok(T.mentions(r[2], "error loading module 'cc_bad'"), T.show(r[2]))
end)

test("a runtime error in a cached module has its line in the traceback", function()
  write("cc_err", "local M = {}\nfunction M.boom()\n  error('cached boom')\nend\nreturn M\n")
  local me = lpvm.self()
  for _ = 1, 2 do
    lpvm.spawn(function(parent, d)
      package.path = d .. "/?.lua;" .. package.path
      lpvm.send(parent, select(2, pcall(require("cc_err").boom)))
    end, me, dir)
    T.ok(T.mentions(T.recv()[1], "cc_err.lua:3: cached boom"))
  end
  os.execute("rm -rf " .. dir)
end)

T.run()
