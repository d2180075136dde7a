-- test_stdlibs.lua -- the lazy standard libraries are invisible to require, so
-- Debian's Lua 5.4 modules (lua-socket, lua-cjson, lua-lpeg) load in any process.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

local NAMES = {"string", "table", "math", "io", "os", "utf8", "coroutine", "debug",
               "package", "_G"}

test("require of a standard library name returns it, before and after the global", function()
  local me = lpvm.self()
  -- a fresh process, where nothing has been touched yet: require first
  lpvm.spawn(function(parent, names)
    local got = {}
    for _, n in ipairs(names) do got[n] = require(n) end
    local same = {}
    for _, n in ipairs(names) do same[#same + 1] = (got[n] == _G[n]) and n or ("!" .. n) end
    lpvm.send(parent, table.concat(same, " "), (got.string.format("%d", 7)),
              ("x"):rep(3), "10" + 1)
  end, me, NAMES)
  T.eqv(T.recv(), table.pack(table.concat(NAMES, " "), "7", "xxx", 11))
  -- and in this process, where the globals have been used already
  for _, n in ipairs(NAMES) do T.ok(require(n) == _G[n], n) end
  T.ok(package.loaded.string == string)
end)

test("require 'lpvm' first thing: the module, ':preload:', package.loaded and the global", function()
  local me = lpvm.self()
  lpvm.spawn(function(parent)
    local m, how = require "lpvm"
    local global = rawget(_G, "lpvm")   -- set by require, not by the lazy global
    local again = require "lpvm"
    local names = 0
    for k, v in pairs(m) do if type(v) == "function" then names = names + 1 end end
    m.send(parent, type(m), how, global == m, again == m, package.loaded.lpvm == m,
           m.self == m.self and type(m.receive) == "function", m.nosuchfn == nil,
           m["receive\0x"] == nil, m[1] == nil, names > 40, type(m.ets.new))
  end, me)
  T.eqv(T.recv(), table.pack("table", ":preload:", true, true, true, true, true, true, true,
                             true, "function"))
end)

-- The globals and strings share one lazy metatable until Lua code can reach it
-- (vm/llibs.c): reached, they are two tables, as in lua5.4; changing the string
-- metatable (a common idiom) leaves the lazy globals alone; arithmetic with _G fails
-- as lua5.4's does (less the variable's name), before and after the string library.
test("the lazy metatables: one until reached, two after; _G in arithmetic fails", function()
  local me = lpvm.self()
  lpvm.spawn(function(parent)
    local l = require "lpvm"
    local errs = {}   -- no string method here: the idiom below replaces them
    local function err(f)
      local ok, e = pcall(f)
      errs[#errs + 1] = ok and "no error" or e
    end
    err(function() return _G + 1 end)
    err(function() return 1 - _G end)
    err(function() return "10" * _G end)
    err(function() return -_G end)
    local coerce = "10" + 1                       -- the stand-in's arithmetic
    local gmt, smt = getmetatable(_G), getmetatable("")
    local two = gmt ~= smt and type(gmt.__index) == "function" and gmt.__add == nil
    local keys = 0
    for _ in pairs(smt) do keys = keys + 1 end
    local sub = string.sub
    getmetatable("").__index = function(s, i) return sub(s, i, i) end   -- the idiom
    local idx = ("abc")[2]
    err(function() return "10" + _G end)          -- the string library is open now
    l.send(parent, errs, coerce, two, keys, idx, type(print), type(os.time),
           type(string.rep))
  end, me)
  local errs, coerce, two, keys, idx, tp, tos, trep = table.unpack(T.recv(), 1, 8)
  for i, e in ipairs(errs) do errs[i] = tostring(e):gsub("^[^:]*:%d+: ", "") end
  T.eq(table.concat(errs, "; "), "attempt to perform arithmetic on a table value; " ..
       "attempt to perform arithmetic on a table value; attempt to mul a 'string' with a " ..
       "'table'; attempt to perform arithmetic on a table value; attempt to add a 'string' " ..
       "with a 'table'")
  T.eq(coerce, 11)
  T.eq(two, true, "getmetatable(_G) and getmetatable('') are two tables")
  T.eq(keys, 9, "the string stand-in's fields")
  T.eq(idx, "b")
  T.eq(tp, "function", "lazy globals after the string metatable changed")
  T.eq(tos, "function")
  T.eq(trep, "function")
end)

-- Each worker process requires the three modules and uses them for real: a TCP
-- round trip over loopback with lua-socket, a JSON round trip with lua-cjson, a
-- grammar with lua-lpeg. Worker-mode and thread-mode processes, many at once.
local function use_modules(parent, k)
  local ok, err = pcall(function()
    local socket = require("socket")
    local cjson = require("cjson")
    local lpeg = require("lpeg")
    local server = assert(socket.bind("127.0.0.1", 0))
    local ip, port = server:getsockname()
    local client = assert(socket.connect(ip, port))
    local conn = assert(server:accept())
    local doc = cjson.encode({k = k, list = {1, 2, 3}})
    assert(client:send(doc .. "\n"))
    local line = assert(conn:receive("*l"))
    client:close(); conn:close(); server:close()
    local back = cjson.decode(line)
    local digits = lpeg.C(lpeg.R("09") ^ 1) / tonumber
    local list = lpeg.Ct(digits * ("," * digits) ^ 0)
    local nums = list:match(line:match("%[(.-)%]"))   -- "1,2,3"
    lpvm.send(parent, "done", math.tointeger(back.k), nums[1] + nums[2] + nums[3],
              type(socket.gettime()))
  end)
  if not ok then lpvm.send(parent, "failed", k, tostring(err)) end
end

test("lua-socket, lua-cjson and lua-lpeg work in many processes on several threads", function()
  local me = lpvm.self()
  local n = T.scaled(24, 6)
  for k = 1, n do
    lpvm.spawn({thread = (k % 4 == 0)}, use_modules, me, k)
  end
  local seen = {}
  for _ = 1, n do
    local r = T.recv()
    T.eq(r[1], "done", T.show(r))
    T.eq(r[3], 6)
    T.eq(r[4], "number")
    seen[r[2]] = true
  end
  for k = 1, n do T.ok(seen[k], "process " .. k .. " answered") end
end)

test("the modules are loaded once per process and shared with package.loaded", function()
  local socket = require("socket")
  T.ok(package.loaded.socket == socket)
  T.ok(require("socket") == socket)
  T.ok(package.loaded["socket.core"], "socket.core (a C module) is loaded")
end)

-- lsys.c: os.execute and io.popen without system()/popen(): lua5.4's results.
test("os.execute gives lua5.4's results", function()
  T.eqv(table.pack(os.execute("exit 0")), table.pack(true, "exit", 0))
  T.eqv(table.pack(os.execute("exit 3")), table.pack(nil, "exit", 3))
  T.eqv(table.pack(os.execute("kill -TERM $$")), table.pack(nil, "signal", 15))
  T.eq(os.execute(), true)
  -- the child's signals are at their defaults (the VM ignores SIGPIPE)
  -- (SigIgn, SigBlk: bit n-1 is signal n; SIGINT 2, SIGQUIT 3, SIGPIPE 13, SIGTERM 15)
  local f = io.popen("grep -E 'Sig(Ign|Blk)' /proc/self/status")
  local out = f:read("a")
  f:close()
  local ign, blk = out:match("SigIgn:%s*(%x+)"), out:match("SigBlk:%s*(%x+)")
  T.ok(ign and blk, out)
  T.eq(tonumber(ign, 16) & 0x5006, 0, "signals ignored in the child: " .. out)
  T.eq(tonumber(blk, 16) & 0x5006, 0, "signals blocked in the child: " .. out)
end)

test("io.popen reads and writes; close gives the exit status", function()
  local f = assert(io.popen("echo one; echo two"))
  T.eq(f:read("l"), "one")
  T.eq(f:read("l"), "two")
  T.eqv(table.pack(f:close()), table.pack(true, "exit", 0))
  local tmp = os.tmpname()
  local w = assert(io.popen("cat > " .. tmp, "w"))
  w:write("written")
  T.eqv(table.pack(w:close()), table.pack(true, "exit", 0))
  local r = io.open(tmp)
  T.eq(r:read("a"), "written")
  r:close()
  os.remove(tmp)
  T.eqv(table.pack(io.popen("exit 7"):close()), table.pack(nil, "exit", 7))
  T.eq(io.type(io.popen("true")), "file")
  for line in io.popen("printf 'a\\nb\\n'"):lines() do T.ok(line == "a" or line == "b") end
  T.raises(function() io.popen("true", "rw") end, "bad argument #2", "invalid mode")
  T.raises(function() io.popen() end, "bad argument #1")
  -- a pipe left to the garbage collector is closed and its child reaped
  for _ = 1, 20 do io.popen("true") end
  collectgarbage()
  collectgarbage()
end)

test("os.execute and io.popen in many processes at once", function()
  local me = lpvm.self()
  local n = T.scaled(16, 4)
  for k = 1, n do
    lpvm.spawn({thread = (k % 2 == 0)}, function(parent, i)
      local ok, how, code = os.execute("exit " .. (i % 5))
      local f = io.popen("echo " .. i)
      local echoed = f:read("n")
      f:close()
      lpvm.send(parent, i, code, echoed)
    end, me, k)
  end
  for _ = 1, n do
    local r = T.recv()
    T.eq(r[2], r[1] % 5)
    T.eq(r[3], r[1])
  end
end)

T.run()
