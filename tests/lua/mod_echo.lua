-- mod_echo.lua -- a module for lpvm.spawn("mod_echo", parent, ...): sends back
-- "mod_echo" and the other arguments. Works whether spawn runs the chunk with the
-- arguments or requires it and calls the function it returns.
local function main(parent, ...)
  lpvm.send(parent, "mod_echo", ...)
end
if type((...)) ~= "string" then return main(...) end
return main
