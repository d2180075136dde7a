-- lpvm.eval(pid, fn | chunk [, timeout_ms]) -- run code inside another live process at
-- its next safe point (vm/leval.c; docs/code.md).
--   true, results...   the code ran and returned them
--   false, message     the code raised (the target goes on)
--   nil, "noproc"      no such process, or it died before answering
--   nil, "timeout"     no answer in time (default 5000 ms; the request may still run)
local ev = require "lpvm.evalserver"
local lpvm = require "lpvm"

return function(pid, what, timeout)
  if type(pid) ~= "userdata" or not tostring(pid):match("^<") then
    error("bad argument #1 to 'eval' (pid expected, got " .. type(pid) .. ")", 2)
  end
  local ty = type(what)
  if ty ~= "function" and ty ~= "string" then
    error("bad argument #2 to 'eval' (function or string expected, got " .. ty .. ")", 2)
  end
  -- (timeout ~= timeout: NaN, which "< 0" lets through, and receive would refuse
  -- after the request had gone out)
  if timeout ~= nil and (type(timeout) ~= "number" or timeout < 0 or timeout ~= timeout) then
    error("bad argument #3 to 'eval' (timeout must be a number >= 0)", 2)
  end
  if pid == lpvm.self() then   -- no message to oneself: run it here
    local f, err = what, nil
    if ty == "string" then f, err = load(what, "=eval", "t") end
    if not f then return false, err end
    return pcall(f)
  end
  local mref = lpvm.monitor(pid)
  local sent, why = ev.request(pid, mref, what)
  if not sent then
    lpvm.demonitor(mref)
    return nil, why
  end
  local r = table.pack(lpvm.receive(function(tag, ref)
    return (tag == "$lpvm_eval_reply" or tag == "DOWN") and ref == mref
  end, timeout or 5000))
  ev.done()
  lpvm.demonitor(mref, "flush")
  if r[1] == nil then return nil, "timeout" end
  if r[1] == "DOWN" then return nil, "noproc" end
  return table.unpack(r, 3, r.n)
end
