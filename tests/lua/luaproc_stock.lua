-- luaproc_stock.lua -- build/vm/luaproc.so in the stock lua5.4 interpreter: the
-- paper's programs and the host's own blocking calls. Run from the source tree:
--
--   LUA_CPATH='build/vm/?.so;;' lua5.4 tests/lua/luaproc_stock.lua
--
-- (ctest: luaproc_stock_lua.) The main chunk is the *host*: no lpvm process, so its
-- send, receive and wait block this OS thread while the processes run on lpvm's
-- workers. Prints one line per check and "N passed, M failed"; exits 1 on failure.
local luaproc = require "luaproc"
local passed, failed = 0, 0
print("package.cpath = " .. package.cpath)

local function check(name, ok, detail)
  if ok then
    passed = passed + 1
    print("ok   " .. name)
  else
    failed = failed + 1
    print("FAIL " .. name .. (detail and ("\n     " .. tostring(detail)) or ""))
  end
  io.stdout:flush()
end

-- ---- in this interpreter -------------------------------------------------------------

luaproc.setnumworkers(3)   -- before any process: the VM restarts with 3 workers
check("setnumworkers before the first process sets the count", luaproc.getnumworkers() == 3,
      luaproc.getnumworkers())
check("the global luaproc is the module", _G.luaproc == luaproc)

luaproc.newchannel("main")
luaproc.newproc([[ luaproc.send("main", "hello world", 42, true, nil, 1.5) ]])
local r = table.pack(luaproc.receive("main"))
check("the host receives a process's message",
      r.n == 5 and r[1] == "hello world" and r[2] == 42 and r[3] == true and r[4] == nil
        and r[5] == 1.5, table.concat({ tostring(r[1]), tostring(r[2]) }, ","))

luaproc.newproc([[
  local v = luaproc.receive("main")
  luaproc.send("main", "got " .. v)
]])
check("the host's send returns once received", luaproc.send("main", "ping") == true)
check("... and the process answered", luaproc.receive("main") == "got ping")

local ok, err = luaproc.receive("main", true)
check("async receive from the host never blocks", ok == nil and err:find("no senders", 1, true), err)
ok, err = luaproc.send("missing", 1)
check("send to a missing channel: nil and a message", ok == nil and err:find("does not exist", 1, true), err)

luaproc.newchannel("doomed")
luaproc.newproc([[
  for _ = 1, 1e6 do end        -- let the host block first (no harm if it did not)
  luaproc.delchannel("doomed")
]])
ok, err = luaproc.receive("doomed")
check("delchannel wakes the blocked host with an error", ok == nil and tostring(err):find("deleted", 1, true)
      or (ok == nil and tostring(err):find("does not exist", 1, true)), err)

luaproc.newchannel("many")
local n = 2000
for i = 1, n do luaproc.newproc(string.format("luaproc.send('many', %d)", i)) end
local sum = 0
for _ = 1, n do sum = sum + luaproc.receive("many") end
check(n .. " processes on one channel", sum == n * (n + 1) // 2, sum)

luaproc.recycle(10)
for i = 1, 100 do luaproc.newproc(string.format("luaproc.send('many', %d)", i)) end
sum = 0
for _ = 1, 100 do sum = sum + luaproc.receive("many") end
check("recycling", sum == 5050, sum)

luaproc.newproc([[ for _ = 1, 2e6 do end; luaproc.newchannel("late") ]])
luaproc.wait()
check("wait returns after every process ended", luaproc.delchannel("late") == true)

-- ---- the paper's programs, each in its own interpreter -------------------------------

local function run(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  local okc, _, code = p:close()
  return out, okc and code == 0
end

-- Under ThreadSanitizer (ctest preloads its runtime) /bin/sh crashes, so popen
-- cannot run the examples: they are left to the other builds.
if (os.getenv("LD_PRELOAD") or ""):find("tsan", 1, true) then
  print("skip the examples in child interpreters (popen under a preloaded TSan)")
  print(string.format("%d passed, %d failed", passed, failed))
  os.exit(failed == 0 and 0 or 1, true)
end

local lua = arg[-1] or "lua5.4"
local out, fine = run(lua .. " examples/luaproc_hello.lua")
check("Listing 1 (examples/luaproc_hello.lua) prints hello world", fine and out == "hello world\n", out)

local files = { "vm/luaproc.c", "vm/luaproc_chan.c", "docs/lua-api.md", "README.md" }
local want, wantfiles = 0, {}
for _, f in ipairs(files) do
  local c = 0
  for line in io.lines(f) do if line:find("luaproc", 1, true) then c = c + 1 end end
  want = want + c
  wantfiles[#wantfiles + 1] = string.format("%6d  %s", c, f)
end
table.sort(files)
out, fine = run(lua .. " examples/luaproc_search.lua luaproc " .. table.concat(files, " "))
local total = tonumber(out:match("(%d+) lines with"))
check("parallel string search: the same counts as a serial search", fine and total == want,
      out .. " (want " .. want .. ")")
for _, l in ipairs(wantfiles) do
  check("search: " .. l:gsub("^%s+", ""), out:find(l, 1, true) ~= nil, out)
end

print(string.format("%d passed, %d failed", passed, failed))
os.exit(failed == 0 and 0 or 1, true)   -- close the state: the VM stops cleanly
