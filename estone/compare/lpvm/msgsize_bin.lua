-- K sends of the same lpvm.binary of Size bytes to one receiver, back to back (as
-- ../erlang/msgsize.escript, whose binary is reference-counted too): each send passes
-- a reference, not the bytes (docs/binaries.md). The time runs until the receiver
-- has taken the K-th. usage: lpvm msgsize_bin.lua Size K
local size = math.tointeger(tonumber(arg[1])) or 100000
local K = math.tointeger(tonumber(arg[2])) or 20000
local msg = lpvm.binary(string.rep("x", size))
local r = lpvm.spawn(function(parent, k)
  local l = require "lpvm"
  for _ = 1, k do l.receive() end
  l.send(parent, "done", l.now_us())
end, lpvm.self(), K)
local t0 = lpvm.now_us()
for _ = 1, K do lpvm.send(r, msg) end
local _, t2 = lpvm.receive()
print(string.format("RESULT test=msgsize sys=lpvm kind=binary size=%d k=%d per_msg_ns=%.1f",
  size, K, (t2 - t0) * 1e3 / K))
