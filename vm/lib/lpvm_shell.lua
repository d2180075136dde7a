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

-- Tab's candidates: every global name, and name.field for the fields of global
-- tables (lpvm's functions included), sent with each request: only this process
-- can read its globals, the reader (on its own thread) completes from the list.
local function completions()
  local out = {}
  for k, v in pairs(_G) do
    if type(k) == "string" then
      out[#out + 1] = k
      if type(v) == "table" and k ~= "_G" then
        for f in pairs(v) do
          if type(f) == "string" and f:match("^[%a_][%w_]*$") then out[#out + 1] = k .. "." .. f end
        end
      end
    end
  end
  -- the standard libraries and lpvm, even before their first use opens them
  for _, k in ipairs({"string", "table", "math", "io", "os", "utf8", "coroutine", "debug",
                      "package", "lpvm", "require", "assert", "collectgarbage", "dofile",
                      "error", "getmetatable", "ipairs", "load", "loadfile", "next",
                      "pairs", "pcall", "print", "rawequal", "rawget", "rawlen", "rawset",
                      "select", "setmetatable", "tonumber", "tostring", "type", "xpcall",
                      "warn"}) do
    if rawget(_G, k) == nil then out[#out + 1] = k end
  end
  table.sort(out)
  return concat(out, "\n")
end

-- The next line, or nil at the end of input; nil, why after a Ctrl-C at the prompt
-- (why: "cleared" when a line was typed, "interrupt" at an empty prompt, "quit" for
-- a second one there).
local function readline(prompt, tty)
  -- a remote shell's process is not started again if it ends (vm/shell.c)
  lpvm.send(READER, M.remote and "read_remote" or "read", prompt, tty and completions() or "")
  while true do
    local ok, _, line, why = pcall(lpvm.receive, function(tag) return tag == TAG end)
    if ok then return line or nil, why end
    -- a Ctrl-C that raced this request (it meant the evaluation that just ended)
    if not tostring(_):find("interrupted!", 1, true) then error(_, 0) end
  end
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

M.compile = compile

local function handler(e)
  local msg = type(e) == "string" and e or show(e, 0, {})
  local tb = debug.traceback(msg, 2)
  local cut = tb:find("\n%s*%[C%]: in [^\n]*'xpcall'")
  return cut and tb:sub(1, cut - 1) or tb
end

M.handler = handler

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

local HELP = [[
Shell commands:
  help()        this text
  q()           quit (stops the VM with status 0); also Ctrl-D, or Ctrl-C twice
                at an empty prompt
  =expr         print expr (a line is tried as an expression first anyway)
Keys: Up/Down history (~/.lpvm_history), Tab completes globals and fields,
Ctrl-C interrupts the evaluation running, or drops the line being typed.
The shell is a process: lpvm.self() is its pid, lpvm.receive() reads its mailbox.
The lpvm module:]]

local function help()
  local names = {}
  for k, v in pairs(lpvm) do
    if type(v) == "function" then names[#names + 1] = k end
  end
  table.sort(names)
  write(HELP, "\n")
  local line = " "
  for _, n in ipairs(names) do
    if #line + #n + 2 > 78 then write(line, "\n"); line = " " end
    line = line .. " lpvm." .. n
  end
  write(line, "\n", "See docs/lua-api.md (or man lpvm).\n")
end

-- One chunk: its lines (more while it is incomplete), then its results. Returns
-- false at the end of input or on quit.
local function one(tty)
  local line, why = readline("> ", tty)
  if why == "quit" then return false end
  if why == "interrupt" then write("(Ctrl-C again at an empty prompt, Ctrl-D or q() quits)\n") end
  if why then return true end
  if not line then return false end
  local src = line:gsub("^=", "return ")
  local f, err = compile(src)
  while not f and err:sub(-5) == "<eof>" do
    local more
    more, why = readline(">> ", tty)
    if why == "quit" then return false end
    if not more then return why ~= nil end   -- Ctrl-C drops the chunk
    src = src .. "\n" .. more
    f, err = compile(src)
  end
  if f and M.evaluator then return M.remote_eval(src)
  elseif f then report(xpcall(f, handler))
  elseif src:find("%S") then io.stderr:write(err, "\n") end
  return true
end

-- The remote shell (lpvm --remsh node): chunks are evaluated by a process on that
-- node (vm/lib/lpvm/remsh.lua), which sends back what it prints and the results.
-- Returns false when the node went away.
function M.remote_eval(src)
  lpvm.send(M.evaluator, "eval", src)
  while true do
    local tag, a, b = lpvm.receive(function(t, r)
      return t == "$remsh_out" or t == "$remsh_result" or (t == "DOWN" and r == M.evmon)
    end)
    if tag == "$remsh_out" then write(a)
    elseif tag == "$remsh_result" then
      if a then
        if b ~= "" then write(b, "\n") end
      else
        io.stderr:write(b, "\n")
      end
      io.stdout:flush()
      return true
    else
      io.stderr:write("remote shell: the connection to ", M.remote, " is lost\n")
      return false
    end
  end
end

-- Attach to M.remote: start the evaluator there.
local function attach(tty)
  local ev, why = lpvm.spawn({node = M.remote, fn = "main"}, "lpvm.remsh", lpvm.self())
  if not ev then
    io.stderr:write("remote shell: cannot reach ", M.remote, ": ", tostring(why), "\n")
    lpvm.halt(1)
    return
  end
  M.evaluator, M.evmon = ev, lpvm.monitor(ev)
  if tty then write("remote shell on ", M.remote, " (Ctrl-D detaches)\n") end
end

-- How the shell's previous process ended, as Erlang's shell says it; the reader
-- (vm/shell.c) starts this process with that process's DOWN when it ended while the
-- shell was in use.
local function ended(old, reason)
  local why = type(reason) == "string" and reason or show(reason, 0, {})
  write("** exception exit: ", why, "\n")
  write("(the shell's process ", tostring(old), " ended; the shell goes on in ",
        tostring(lpvm.self()), ", whose globals start afresh)\n")
  io.stdout:flush()
end

-- run(tty, version [, "DOWN", ref, "process", old, reason]): read, evaluate, print
-- until the end of input (or q()); then halt the VM with 0. tty: stdin is a terminal
-- (a banner; the reader prompts). The DOWN: this process replaces the shell's
-- previous one, which ended while in use.
function M.run(tty, version, down, _, _, old, reason)
  -- The shell runs on a private thread, where no user process can starve it: the
  -- workers serve priorities strictly, so a few spinners at priority 0 would
  -- otherwise keep it (and with it Ctrl-D and lpvm.halt typed here) from ever
  -- running again. Its children still start on the workers.
  pcall(lpvm.migrate, "thread")
  if rawget(_G, "q") == nil then _G.q = function() lpvm.halt(0) end end
  if rawget(_G, "help") == nil then _G.help = help end
  if down == "DOWN" then
    ended(old, reason)
  elseif tty then
    write("lpvm ", version or "", " (", _VERSION, ") shell. help() lists the commands; ",
          "Ctrl-D quits.\n")
  end
  if M.remote then attach(tty) end
  while true do
    local ok, more = pcall(one, tty)
    if not ok then
      io.stderr:write(tostring(more), "\n")   -- a Ctrl-C between two steps, say
    elseif not more then
      break
    end
  end
  if tty then write("\n") end
  io.stdout:flush()
  lpvm.halt(0)
end

return M
