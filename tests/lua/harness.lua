-- harness.lua -- a tiny test framework for Lua tests run by `lpvm`.
--
--   local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
--   test("name", function() T.eq(1 + 1, 2) end)
--   T.run()
--
-- Tests run one after another in the boot process, each under pcall. Between tests
-- the harness drops leftover messages and turns trap_exit off, so one test's
-- processes cannot disturb the next. The last line printed is "N passed, M failed";
-- the VM then halts with status 1 if anything failed, 0 otherwise.
--
-- Tests run on a loaded 2-core machine with 2 workers (CI, other builds beside): a
-- child may have run, or died, before the next line of its parent. Watch a child
-- from its spawn (spawn_monitor, spawn_link), wait for the event itself (a "ready"
-- message, T.wait_until on its status) rather than a sleep, give every wait a
-- generous bound (T.WAIT or more), and assert no upper bound on a time.
local T = {}
local tests = {}
local only = os.getenv("LPVM_TEST_ONLY")   -- run just the tests whose name has this

function test(name, fn)
  tests[#tests + 1] = { name = name, fn = fn }
end

-- Stress sizes shrink under sanitizers (LPVM_STRESS_SCALE, e.g. 0.1).
local scale = tonumber(os.getenv("LPVM_STRESS_SCALE") or "") or 1
-- How long a test waits for an expected message by default: sanitizer builds run
-- many times slower, so they wait longer (a wait only ends early on success). 5 s
-- was too short on a loaded 2-core machine (a 20,000-round loop in test_alloc missed
-- it at load 20); a passing test never waits it out, a failing one fails later.
local WAIT = scale < 1 and 60000 or 30000
T.WAIT = WAIT
-- "address" or "thread" in a sanitizer build, else nil: their allocators keep freed
-- memory aside (ASan's quarantine), so a test of RSS growth means nothing there.
T.SANITIZE = (os.getenv("LPVM_SANITIZE") or "") ~= "" and os.getenv("LPVM_SANITIZE") or nil
function T.scaled(n, min)
  local v = math.floor(n * scale)
  if min and v < min then v = min end
  return v
end

-- ---- values --------------------------------------------------------------------

local function show(v, depth)
  depth = depth or 0
  if type(v) == "string" then return (string.format("%q", v):gsub("\\\n", "\\n")) end
  if type(v) ~= "table" or depth > 3 then return tostring(v) end
  local mt = getmetatable(v)
  if mt and mt.__tostring then return tostring(v) end
  local parts = {}
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    if type(a) ~= type(b) then return type(a) < type(b) end
    if type(a) == "number" or type(a) == "string" then return a < b end
    return tostring(a) < tostring(b)
  end)
  for _, k in ipairs(keys) do
    parts[#parts + 1] = "[" .. show(k, depth + 1) .. "]=" .. show(v[k], depth + 1)
    if #parts > 20 then parts[#parts + 1] = "..."; break end
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end
T.show = show

-- Deep equality: tables by content, floats by value (NaN equals NaN), integer and
-- float subtypes must agree.
local function same(a, b, seen)
  if type(a) ~= type(b) then return false end
  if type(a) == "number" then
    if math.type(a) ~= math.type(b) then return false end
    if a ~= a and b ~= b then return true end
    return a == b
  end
  if type(a) ~= "table" then return a == b end
  if a == b then return true end
  local ma = getmetatable(a)
  if ma and ma.__eq then return a == b end
  seen = seen or {}
  if seen[a] == b then return true end
  seen[a] = b
  for k, v in pairs(a) do
    if not same(v, b[k], seen) then return false end
  end
  for k in pairs(b) do
    if a[k] == nil then return false end
  end
  return true
end
T.same_value = same

local function fail(msg, level)
  error(msg, (level or 1) + 2)
end

function T.ok(v, msg)
  if not v then fail(msg or "expected a true value, got " .. show(v)) end
  return v
end

function T.eq(got, want, msg)
  if not same(got, want) then
    fail((msg and msg .. ": " or "") .. "expected " .. show(want) .. ", got " .. show(got))
  end
end

function T.ne(got, other, msg)
  if same(got, other) then
    fail((msg and msg .. ": " or "") .. "expected something other than " .. show(other))
  end
end

-- Compare two packed value lists (table.pack results), including their n.
function T.eqv(got, want, msg)
  T.eq(got.n, want.n, (msg and msg .. ": " or "") .. "value count")
  for i = 1, want.n do
    if not same(got[i], want[i]) then
      fail((msg and msg .. ": " or "") .. "value " .. i .. ": expected " .. show(want[i]) ..
           ", got " .. show(got[i]))
    end
  end
end

-- fn(...) must raise an error whose message contains every plain string given.
function T.raises(fn, ...)
  local ok, err = pcall(fn)
  if ok then fail("expected an error, got none") end
  err = tostring(err)
  for i = 1, select("#", ...) do
    local want = select(i, ...)
    if not err:find(want, 1, true) then
      fail("error " .. show(err) .. " does not mention " .. show(want))
    end
  end
  return err
end

-- A reason (string, table, or anything) mentions `pat` (plain text).
function T.mentions(reason, pat)
  if type(reason) == "table" then
    for _, v in pairs(reason) do
      if T.mentions(v, pat) then return true end
    end
    return false
  end
  return tostring(reason):find(pat, 1, true) ~= nil
end

-- ---- processes -----------------------------------------------------------------

-- The next message's values, packed; fails after `ms` (default 5 s).
function T.recv(ms)
  local r = table.pack(lpvm.receive(ms or WAIT))
  if r.n == 2 and r[1] == nil and r[2] == "timeout" then
    fail("no message within " .. (ms or WAIT) .. " ms", 1)
  end
  return r
end

-- The next message that pred(...) accepts, packed; fails after `ms`.
function T.recv_match(pred, ms)
  local r = table.pack(lpvm.receive(pred, ms or WAIT))
  if r.n == 2 and r[1] == nil and r[2] == "timeout" then
    fail("no matching message within " .. (ms or WAIT) .. " ms", 1)
  end
  return r
end

-- Fails if a message arrives within `ms`.
function T.no_msg(ms)
  local r = table.pack(lpvm.receive(ms or 50))
  if not (r.n == 2 and r[1] == nil and r[2] == "timeout") then
    local vals = {}
    for i = 1, r.n do vals[i] = show(r[i]) end
    fail("unexpected message: " .. table.concat(vals, ", "), 1)
  end
end

-- Drop every queued message; returns how many. (The sleep(0) first lets messages
-- still on their way into the mailbox, e.g. sent to self just now, arrive.)
function T.flush()
  pcall(lpvm.sleep, 0)
  local n = 0
  while true do
    local r = table.pack(lpvm.receive(0))
    if r.n == 2 and r[1] == nil and r[2] == "timeout" then return n end
    n = n + 1
  end
end

-- Wait for the DOWN notice of monitor `ref`; returns pid, reason.
function T.down(ref, ms)
  local r = T.recv_match(function(tag, r2) return tag == "DOWN" and r2 == ref end, ms)
  T.eq(r[3], "process", "DOWN notice's third value")
  return r[4], r[5]
end

-- Wait for an EXIT message from `pid` (trap_exit must be on); returns the reason.
function T.exit_from(pid, ms)
  local r = T.recv_match(function(tag, p) return tag == "EXIT" and p == pid end, ms)
  return r[3]
end

-- Spawn fn(...) monitored and wait until it ends; returns its exit reason.
function T.run_proc(fn, ...)
  local pid, ref = lpvm.spawn_monitor(fn, ...)
  local _, reason = T.down(ref)
  return reason, pid
end

-- Poll `cond` (every ms) until true or `ms` total; returns its last value.
function T.wait_until(cond, ms)
  local deadline = lpvm.now() + (ms or WAIT)
  while true do
    local v = cond()
    if v or lpvm.now() >= deadline then return v end
    lpvm.sleep(5)
  end
end

-- ---- running -------------------------------------------------------------------

function T.run()
  local passed, failed, skipped = 0, 0, 0
  local t0 = lpvm.now()
  for _, t in ipairs(tests) do
    if only and not t.name:find(only, 1, true) then
      skipped = skipped + 1
    else
      local start = lpvm.now()
      local ok, err = xpcall(t.fn, function(e)
        return debug.traceback(type(e) == "string" and e or show(e), 2)
      end)
      pcall(lpvm.trap_exit, false)
      T.flush()
      if ok then
        passed = passed + 1
        print(string.format("ok   %-50s %5d ms", t.name, lpvm.now() - start))
      else
        failed = failed + 1
        print(string.format("FAIL %s\n     %s", t.name, tostring(err):gsub("\n", "\n     ")))
      end
      io.stdout:flush()
    end
  end
  print(string.format("%s: %d ms", arg and arg[0] or "tests", lpvm.now() - t0))
  print(string.format("%d passed, %d failed", passed, failed))
  io.stdout:flush()
  lpvm.halt(failed > 0 and 1 or 0)
end

return T
