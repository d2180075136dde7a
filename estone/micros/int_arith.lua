-- int_arith: small integer arithmetic. Per loop, 9 x do_arith, each 7 x do_arith2.
-- Erlang's precedence is kept: bsl/bsr bind like +, so X bsl 4 * 2 bsl 2 is
-- (X bsl 8) bsl 2. The dead `_Y = 789 + I` is left out, as BEAM's compiler drops it.
local function do_arith2(i)
  local x = 23
  local z = i + 1
  local u = ((((x << 1) >> i) * x) // 2) >> 4
  local u1 = ((z + z + z + z + x) << 8) << 2
  return z - u + u1 // 2
end

local function do_arith(i)
  return do_arith2(i) - do_arith2(i) - do_arith2(i) - do_arith2(i) - do_arith2(i)
    - do_arith2(i) - do_arith2(i) - 99
end

return function(loops)
  local r
  for i = loops, 1, -1 do
    r = do_arith(i) + do_arith(i) + do_arith(i) + do_arith(i) + do_arith(i)
      + do_arith(i) + do_arith(i) + do_arith(i) + do_arith(i) + 66
  end
  assert(math.type(r) == "integer")
  return 0
end
