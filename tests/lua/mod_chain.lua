-- mod_chain.lua -- lpvm.spawn("mod_chain", parent, n): a chain of n processes, each
-- spawning the next by module name; the last sends "bottom", 0 to parent.
local function main(parent, n)
  if n == 0 then
    lpvm.send(parent, "bottom", 0)
  else
    lpvm.spawn("mod_chain", parent, n - 1)
  end
end
if type((...)) ~= "string" then return main(...) end
return main
