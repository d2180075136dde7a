-- Message size with a shared binary, as /work/shared/bench/erlang/msgsize.escript bin:
-- the main process sends the same message K times to one receiver, back to back; the
-- receiver takes the time after its K-th receive. Kind:
--   bin    an lpvm.binary of Size bytes: each send passes a reference (refcount++)
--   string a Lua string of Size bytes, as shared/bench/lpvm/msgsize.lua: each send
--          copies the bytes once into the message block, the receiver once out of it
--          into its heap (lua_pushlstring)
--   list   the string in a list, {s}: written in place as a plain string is
--   map    the string in a map, {data = s}: the general encoder, its block first
--          sized for the last message, then for the string
--   deep   the string six lists down, {{{{{{s}}}}}}: the general encoder as well
--   pair   lpvm.send(pid, "data", b), b the binary of `bin` (lpvm only: msgsize.escript
--          has no such kind; for instruction counts)
--   tagged the list {"data", b}: a binary in a table, the usual shape of a message
-- (the floor under `string`, 2 x malloc + memcpy of Size bytes, is build/estone/bench_memcpy)
-- usage: lpvm estone/bench_binary.lua [bin|string|list|map|deep|pair|tagged] Size K
-- prints: RESULT test=msgsize sys=lpvm kind=.. size=.. k=.. send_loop_s=.. total_s=.. per_msg_ns=..
local lpvm = require "lpvm"
local kind, size, K = arg[1] or "bin", tonumber(arg[2]) or 100000, tonumber(arg[3]) or 20000
local str = string.rep("x", size)
local bin = lpvm.binary(str)
local msg = ({ bin = bin, string = str, list = { str }, map = { data = str },
               deep = { { { { { { str } } } } } }, pair = bin, tagged = { "data", bin } })[kind]
assert(msg, "kind: bin | string | list | map | deep | pair | tagged")
local t0, t1, t2
do
  local me = lpvm.self()
  local r = lpvm.spawn(function(parent, k)
    local l = require "lpvm"
    for _ = 1, k do l.receive() end
    l.send(parent, "done", l.now_us())
  end, me, K)
  t0 = lpvm.now_us()
  if kind == "pair" then
    for _ = 1, K do lpvm.send(r, "data", msg) end
  else
    for _ = 1, K do lpvm.send(r, msg) end
  end
  t1 = lpvm.now_us()
  local _
  _, t2 = lpvm.receive()
end
print(string.format("RESULT test=msgsize sys=lpvm kind=%s size=%d k=%d send_loop_s=%.6f total_s=%.6f per_msg_ns=%.1f",
  kind, size, K, (t1 - t0) / 1e6, (t2 - t0) / 1e6, (t2 - t0) * 1e3 / K))
