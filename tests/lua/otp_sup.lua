-- otp_sup.lua -- a supervisor callback module for test_supervisor.lua.
local sup = {}
function sup.init(a)
  if a == "ignore" then return "ignore" end
  return "ok", { strategy = a.strategy or "one_for_one", intensity = a.intensity, period = a.period },
    a.children
end
return sup
