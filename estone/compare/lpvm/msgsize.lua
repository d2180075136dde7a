-- K sends of the same string of Size bytes to one receiver, back to back (as
-- ../erlang/msgsize.escript); the time runs until the receiver has taken the K-th.
-- usage: lpvm msgsize.lua Size K   (msgsize_bin.lua: the same with an lpvm.binary)
local size = math.tointeger(tonumber(arg[1])) or 10
local K = math.tointeger(tonumber(arg[2])) or 100000
local msg = string.rep("x", size)
if MSGSIZE_BINARY then msg = lpvm.binary(msg) end   -- set by msgsize_bin.lua
local r = lpvm.spawn(function(parent, k)
  local l = require "lpvm"
  for _ = 1, k do l.receive() end
  l.send(parent, "done", l.now_us())
end, lpvm.self(), K)
local t0 = lpvm.now_us()
for _ = 1, K do lpvm.send(r, msg) end
local _, t2 = lpvm.receive()
print(string.format("RESULT test=msgsize sys=lpvm kind=%s size=%d k=%d per_msg_ns=%.1f",
  MSGSIZE_BINARY and "binary" or "string", size, K, (t2 - t0) * 1e3 / K))
