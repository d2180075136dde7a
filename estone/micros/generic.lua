-- generic: a gen_server-style server registered as "funky"; every call sends
-- {self(), Ref, {call, Req}} to the name and waits for {funky, Ref, Reply} with a
-- selective receive and a 2000 ms timeout that never fires. 22 calls a loop.
-- gserv(Name): the server loop; handle_call is run under pcall as Erlang's catch.
local function gserv(name)
  local function handle_call(_from, state, req)
    if req[1] == "xyz" then return "reply", "xyz", {} end
    if req[1] == "abc" then
      local r = 1 + 3
      state[#state + 1] = r
      return "reply", r, state
    end
    error("handle_call: no clause")
  end
  local state = {}
  while true do
    local from, ref, call, req = lpvm.receive()
    if call ~= "call" then lpvm.exit("nodebug") end
    local ok, what, reply, state2 = pcall(handle_call, from, state, req)
    if not ok then lpvm.exit(what) end
    if what == "reply" then lpvm.send(from, name, ref, reply) end
    state = state2
  end
end

local nref, want = 0, nil
local function is_reply(name, ref) return name == "funky" and ref == want end

local ABC, XYZ = { "abc" }, { "xyz" }
local send, receive, self = lpvm.send, lpvm.receive, lpvm.self

local function req(name, r)
  nref = nref + 1          -- make_ref(): unique within this process
  want = nref
  send(name, self(), nref, "call", r)
  local _, _, reply = receive(is_reply, 2000)
  if reply == nil then lpvm.exit("timeout") end
  return reply
end

return function(loops)
  local server = lpvm.spawn(gserv, "funky")
  assert(lpvm.register("funky", server))
  for _ = 1, loops do
    req("funky", ABC); req("funky", ABC); req("funky", ABC); req("funky", ABC)
    req("funky", XYZ); req("funky", ABC); req("funky", ABC); req("funky", ABC)
    req("funky", ABC); req("funky", ABC); req("funky", ABC); req("funky", ABC)
    req("funky", ABC); req("funky", ABC); req("funky", ABC); req("funky", XYZ)
    req("funky", ABC); req("funky", ABC); req("funky", ABC); req("funky", ABC)
    req("funky", ABC); req("funky", ABC)
  end
  -- exit(whereis(funky), kill); then wait until it is gone, so that the name is
  -- free for the next run
  local ref = lpvm.monitor(server)
  lpvm.exit(lpvm.whereis("funky"), "kill")
  lpvm.receive(function(tag, r) return tag == "DOWN" and r == ref end)
  return 0
end
