-- micros/common.lua -- data and helpers shared by the EStone micros (estone/micros/).
--
-- Erlang terms map to Lua as lpvm's messages map them: a tuple or a list is an array
-- table, an atom is a string, a pid is a pid. Erlang strings are lists of integers;
-- here they stay Lua strings (a Lua program would not explode them), except where a
-- micro works on list elements (lists, pattern), where they are arrays of bytes.
local M = {}

-- very_big(I): Erlang's nested term, I levels deep, each level 16 elements:
-- {1,2,3,a,v,f,r,t,y,u,self(),self(),self(),"22222222222222222",{{"234",self()}},[[very_big(I-1)]]}
local function very_big(i)
  if i == 0 then return {} end
  local s = lpvm.self()
  return { 1, 2, 3, "a", "v", "f", "r", "t", "y", "u", s, s, s,
           "22222222222222222", { { "234", s } }, { { very_big(i - 1) } } }
end
M.very_big = very_big

-- small() = {self(), true}
function M.small() return { lpvm.self(), true } end

-- big() = {self(), funky_stuff, baby, {1, [123, true, []], "abcdef"}}
function M.big() return { lpvm.self(), "funky_stuff", "baby", { 1, { 123, true, {} }, "abcdef" } } end

-- do_trav: count the integers in a term (tuples and lists alike are tables).
local mtype = math.type
local function do_trav(t)
  local n = 0
  for i = 1, #t do
    local x = t[i]
    if type(x) == "table" then n = n + do_trav(x)
    elseif mtype(x) == "integer" then n = n + 1 end
  end
  return n
end
M.do_trav = do_trav

-- trav(I): build very_big(10) and traverse it I times.
function M.trav(loops)
  local x = very_big(10)
  local n = 0
  for _ = 1, loops do n = do_trav(x) end
  return n
end

-- lists(I): per loop, reverse a 39-element list 10 times and append a 10-element
-- list to it 10 times (each makes a new table, as Erlang makes new cells).
local function reverse(l)
  local n, r = #l, {}
  for i = 1, n do r[i] = l[n - i + 1] end
  return r
end
local function append(a, b)
  local r, n = {}, #a
  for i = 1, n do r[i] = a[i] end
  for i = 1, #b do r[n + i] = b[i] end
  return r
end
local function bytes(s) return { s:byte(1, -1) } end
M.reverse, M.append, M.bytes = reverse, append, bytes

function M.lists(loops)
  local l1 = bytes(string.rep("x", 39))
  local l2 = bytes(string.rep("a", 10))
  for _ = 1, loops do
    for _ = 1, 10 do reverse(l1) end
    for _ = 1, 10 do append(l1, l2) end
  end
  return 0
end

-- The clock. EStone counts microseconds: lpvm.now_us, the monotonic clock the timer
-- wheel uses, in microseconds (lpvm.now() gives milliseconds).
M.clock_name, M.clock_us = "lpvm.now_us", lpvm.now_us

-- start(): a timestamp at which to start timing.
function M.start()
  return lpvm.now_us()
end

-- tc(f, ...): microseconds f(...) took, and its first result (timer:tc).
function M.tc(f, ...)
  local t0 = lpvm.now_us()
  local r = f(...)
  return lpvm.now_us() - t0, r
end

-- Wait for a {Pid, Result} reply from each pid, in order (wait_for_pids).
function M.wait_for_pids(pids)
  for i = 1, #pids do
    local want = pids[i]
    lpvm.receive(function(p) return p == want end)
  end
end

function M.send_procs(pids, ...)
  for i = 1, #pids do lpvm.send(pids[i], ...) end
end

-- Memory figures of this OS process, in kB, from /proc/self/status.
function M.status_kb(field)
  local f = io.open("/proc/self/status")
  if not f then return 0 end
  local s = f:read("a")
  f:close()
  return tonumber(s:match(field .. ":%s*(%d+)")) or 0
end

return M
