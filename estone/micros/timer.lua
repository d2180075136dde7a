-- timer: jog the timer service. Per loop, the process sends itself 100 messages and
-- takes each under a timeout of 50, 50, 50, 100, 1000, 3000, 8000, 50000 or 100000
-- ms in turn; none ever fires (the message is there or on its way).
local L = { 50, 50, 50, 100, 1000, 3000, 8000, 50000, 100000 }
local send, receive, self = lpvm.send, lpvm.receive, lpvm.self
return function(loops)
  local me = self()
  local j = 0
  for _ = 1, loops do
    for _ = 1, 100 do send(me, "hi_dude") end
    for _ = 1, 100 do
      j = j % #L + 1
      if receive(L[j]) ~= "hi_dude" then
        io.stderr:write("XXXXX timer: this wasn't supposed to happen\n")
      end
    end
  end
  return 0
end
