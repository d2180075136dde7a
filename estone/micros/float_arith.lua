-- float_arith: float arithmetic. Per loop, 9 x f_do_arith.
local function f_do_arith(i)
  local x = 23.4
  local z = i + 1.88
  local u = (x * 1 / i) * x / 2 * 4
  local u1 = z + z + z + z + x * 4 * 2 / 2
  return z - u + u1 / 2
end

return function(loops)
  local r
  for i = loops, 1, -1 do
    r = f_do_arith(i) + f_do_arith(i) + f_do_arith(i) + f_do_arith(i) + f_do_arith(i)
      + f_do_arith(i) + f_do_arith(i) + f_do_arith(i) + f_do_arith(i) + 66
  end
  assert(math.type(r) == "float")
  return 0
end
