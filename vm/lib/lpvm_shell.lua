-- lpvm_shell.lua -- the REPL of `lpvm` (no script, or -i), run in the boot process.
--
-- Lines come from the terminal reader (vm/shell.c), a C task on a private thread:
-- the shell asks for each line with a message and gets {TAG, line} (or {TAG, false}
-- at the end of input), so no line ever waits in this process's mailbox where the
-- user's own lpvm.receive() could take it.
local lpvm = lpvm or require("lpvm")
local M = {}

local READER, TAG = "lpvm_shell_stdin", "\1lpvm_shell"
local write, concat = io.write, table.concat

local function readline(prompt, tty)
  if tty then write(prompt); io.stdout:flush() end
  lpvm.send(READER, "read")
  local _, line = lpvm.receive(function(tag) return tag == TAG end)
  return line or nil
end

local function key_order(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then return ta < tb end
  if ta == "number" or ta == "string" then return a < b end
  return tostring(a) < tostring(b)
end

-- A value as the shell prints it: strings quoted, tables one level at a time.
local function show(v, depth, seen)
  local t = type(v)
  if t == "string" then return (string.format("%q", v):gsub("\\\n", "\\n")) end
  if t ~= "table" then return tostring(v) end
  local mt = getmetatable(v)
  if mt and mt.__tostring then return tostring(v) end
  if seen[v] then return "<cycle>" end
  if depth > 5 then return "{...}" end
  seen[v] = true
  local parts, n = {}, #v
  for i = 1, n do parts[#parts + 1] = show(v[i], depth + 1, seen) end
  local keys = {}
  for k in pairs(v) do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  table.sort(keys, key_order)
  for _, k in ipairs(keys) do
    local ks = type(k) == "string" and k:match("^[%a_][%w_]*$") and k
      or "[" .. show(k, depth + 1, seen) .. "]"
    parts[#parts + 1] = ks .. " = " .. show(v[k], depth + 1, seen)
  end
  seen[v] = nil
  if #parts > 100 then
    local more = #parts - 100
    for i = #parts, 101, -1 do parts[i] = nil end
    parts[101] = "... (" .. more .. " more)"
  end
  return "{" .. concat(parts, ", ") .. "}"
end
M.show = function(v) return show(v, 0, {}) end

local function compile(src)
  local f = load("return " .. src, "=stdin", "t")
  if f then return f end
  return load(src, "=stdin", "t")
end

local function handler(e)
  local msg = type(e) == "string" and e or show(e, 0, {})
  local tb = debug.traceback(msg, 2)
  local cut = tb:find("\n%s*%[C%]: in [^\n]*'xpcall'")
  return cut and tb:sub(1, cut - 1) or tb
end

local function report(ok, ...)
  if not ok then
    io.stderr:write((...), "\n")
  elseif select("#", ...) > 0 then
    local out = {}
    for i = 1, select("#", ...) do out[i] = show((select(i, ...)), 0, {}) end
    write(concat(out, "\t"), "\n")
  end
  io.stdout:flush()
end

-- run(tty, version): read, evaluate, print until the end of input; then halt the VM
-- with 0. tty: stdin is a terminal (a banner and prompts; over a pipe only results).
function M.run(tty, version)
  -- The shell runs on a private thread, where no user process can starve it: the
  -- workers serve priorities strictly, so a few spinners at priority 0 would
  -- otherwise keep it (and with it Ctrl-D and lpvm.halt typed here) from ever
  -- running again. Its children still start on the workers.
  pcall(lpvm.migrate, "thread")
  if tty then
    write("lpvm ", version or "", " (", _VERSION, ") shell. Ctrl-D quits. ",
          "Try lpvm.processes() or lpvm.info(lpvm.self()).\n")
  end
  while true do
    local line = readline("> ", tty)
    if not line then break end
    local src = line:gsub("^=", "return ")
    local f, err = compile(src)
    while not f and err:sub(-5) == "<eof>" do
      local more = readline(">> ", tty)
      if not more then break end
      src = src .. "\n" .. more
      f, err = compile(src)
    end
    if f then report(xpcall(f, handler))
    elseif src:find("%S") then io.stderr:write(err, "\n") end
  end
  if tty then write("\n") end
  io.stdout:flush()
  lpvm.halt(0)
end

return M
