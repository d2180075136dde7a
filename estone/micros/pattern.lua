-- pattern: typical protocol pattern matching. Lua has no patterns on terms, so each
-- Erlang clause becomes a test on the head cells of a list. Lists here are Erlang's
-- cons cells, {Head, Tail} pairs (nil = []), so matching [_, X, Y, 3 | T] walks 4
-- cells and rebuilding [0, X, Y, 3 | T] makes 4 new ones, as on BEAM.
-- Per loop: 5 loops of 100 matches each over [0,1,2,3,4,5 | "aaabbaaababba"].

local function cons(h, t) return { h, t } end

local function list(arr, tail)
  local l = tail
  for i = #arr, 1, -1 do l = { arr[i], l } end
  return l
end

-- pat_loop1: [_, X, Y, 0|_] | [_, X, Y, 1|_] | [_, X, Y, 2|_] -> ok; [_, X, Y, 3|T] -> again
local function pat_loop1(i, l)
  while i > 0 do
    local c2 = l[2]; local c3 = c2[2]; local c4 = c3[2]
    local four = c4[1]
    if four == 0 or four == 1 or four == 2 then return "ok" end
    if four ~= 3 then error("pat_loop1: no clause") end
    l = cons(0, cons(c2[1], cons(c3[1], cons(3, c4[2]))))
    i = i - 1
  end
  return "ok"
end

-- pat_loop2: [_, Y|_] when Y bsl 1 == 0 | when Y bsl 2 == 0 -> ok; [X, Y|T] when Y bsl 2 == 4 -> again
local function pat_loop2(i, l)
  while i > 0 do
    local x, c2 = l[1], l[2]
    local y = c2[1]
    if y << 1 == 0 then return "ok" end
    if y << 2 == 0 then return "ok" end
    if y << 2 ~= 4 then error("pat_loop2: no clause") end
    l = cons(x, cons(y, c2[2]))
    i = i - 1
  end
  return "ok"
end

-- pat_loop3: a mix of type tests, atoms, [] and guards, then [0, 1|T] -> again
local function pat_loop3(i, l)
  while i > 0 do
    if l == nil then return "ok" end
    local x, c2 = l[1], l[2]
    if type(x) == "table" and x[1] == "c" and x[2] == "h" and x[3] == nil then return "ok" end
    local y = c2 and c2[1]
    if x == 1 and y == 0 then return "ok" end
    if c2 and type(x) == "string" and #x == 1 then return "ok" end
    if c2 and x == "no" then return "ok" end
    if c2 and x ~= 0 then return "ok" end
    if x == 2 and y == 3 then return "ok" end
    if x == 1 and y == 2 and c2[2] == nil then return "ok" end
    if not (x == 0 and y == 1) then error("pat_loop3: no clause") end
    l = cons(0, cons(1, c2[2]))
    i = i - 1
  end
  return "ok"
end

-- pat_loop4: 26 clauses on the head integer, then [0|T] -> again
local function pat_loop4(i, l)
  while i > 0 do
    local h = l[1]
    if h == 20 or h == 219 or h == 18 or h == 17 or h == 16 or h == 15 or h == 14
      or h == 13 or h == 12 or h == 11 or h == 10 or h == 9 or h == 8 or h == 7
      or h == 6 or h == 5 or h == 4 or h == 3 or h == 1 or h == 21 or h == 22
      or h == 23 or h == 24 or h == 25 or h == 26 or h == 27 then
      return "ok"
    end
    if h ~= 0 then error("pat_loop4: no clause") end
    l = cons(0, l[2])
    i = i - 1
  end
  return "ok"
end

-- pat_loop5: 15 clauses on [0, N|_], then [0, 1|T] -> again
local function pat_loop5(i, l)
  while i > 0 do
    local h, c2 = l[1], l[2]
    local y = c2 and c2[1]
    if h == 0 then
      if y == 20 or y == 19 or y == 18 or y == 17 or y == 16 or y == 15 or y == 14
        or y == 13 or y == 12 or y == 11 or y == 10 or y == 9 or y == 8 or y == 7
        or y == 6 then
        return "ok"
      end
    end
    if not (h == 0 and y == 1) then error("pat_loop5: no clause") end
    l = cons(0, cons(1, c2[2]))
    i = i - 1
  end
  return "ok"
end

return function(loops)
  local tail = list({ ("aaabbaaababba"):byte(1, -1) })
  for _ = 1, loops do
    local p1 = list({ 0, 1, 2, 3, 4, 5 }, tail)
    pat_loop1(100, p1)
    pat_loop2(100, p1)
    pat_loop3(100, p1)
    pat_loop4(100, p1)
    pat_loop5(100, p1)
  end
  return 0
end
