-- dist_mod.lua -- a module the distribution tests run on other nodes: by remote
-- spawn from lpvm, by erlang:spawn and rpc:call from erl.
local M = {}

function M.main(parent)
  lpvm.send(parent, "started", lpvm.self(), lpvm.node())
  lpvm.receive()
end

function M.add(a, b) return a + b end

function M.fail() error("deliberate") end

function M.hello(to) lpvm.send(to, "hello_from_spawned", lpvm.self(), lpvm.node()) end

-- A ring member: learns the next member, then passes the token on until it is 0.
function M.ring(parent)
  local r = table.pack(lpvm.receive(function(t) return t == "next" end))
  local nxt = r[2]
  while true do
    local t, n = lpvm.receive()
    if t == "token" then
      if n == 0 then lpvm.send(parent, "done", lpvm.node())
      else lpvm.send(nxt, "token", n - 1) end
    elseif t == "stop" then
      return
    end
  end
end

-- Collects `total` messages {"m", sender, seq}; checks each sender's order; answers
-- parent "collected", in_order, count.
function M.collect(parent, total)
  local last, ok = {}, true
  for _ = 1, total do
    local _, who, seq = lpvm.receive(function(t) return t == "m" end)
    if seq ~= (last[who] or 0) + 1 then ok = false end
    last[who] = seq
  end
  lpvm.send(parent, "collected", ok, total)
end

-- Starts a dist_adder gen_server here and tells parent its pid; lives until "stop".
function M.start_adder(parent, base)
  local gs = require("gen_server")
  local pid = assert(gs.start("dist_adder", base))
  lpvm.send(parent, "adder", pid)
  lpvm.receive(function(t) return t == "stop" end)
end

return M
