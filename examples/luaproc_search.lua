-- luaproc_search.lua -- the parallel string search of the luaproc paper (section
-- 4.5), a luaproc program run unchanged by lpvm:
--
--   build/lpvm examples/luaproc_search.lua [pattern [file...]]
--   LUA_CPATH='build/vm/?.so;;' lua5.4 examples/luaproc_search.lua [pattern [file...]]
--
-- As in the paper: the main script starts a coordinator and N searchers and hands
-- the coordinator the pattern and the target file names over a channel; the
-- coordinator gives one file at a time to whichever searcher is free and gathers
-- the results; each searcher counts the lines of its file that contain the pattern.
-- With no files given it searches lpvm's own sources (vm/*.c, docs/*.md) for
-- "lua_State". Prints one line per file ("count  file") in name order and a total.
local luaproc = require "luaproc"

local SEARCHERS = 4
local pattern = arg and arg[1] or "lua_State"
local files = {}
for i = 2, arg and #arg or 0 do files[#files + 1] = arg[i] end
if #files == 0 then
  local root = (arg and arg[0] or ""):match("^(.*)examples/[^/]*$") or "./"
  local ls = io.popen("ls " .. root .. "vm/*.c " .. root .. "docs/*.md 2>/dev/null")
  for name in ls:lines() do files[#files + 1] = name end
  ls:close()
end

luaproc.setnumworkers(SEARCHERS)
luaproc.newchannel("tasks")      -- main -> coordinator: pattern, file names, false
luaproc.newchannel("coord")      -- searchers -> coordinator: "ready" / "found"

-- The coordinator: hands out files, collects counts, prints the summary.
luaproc.newproc(string.format([[
  local string, table = require "string", require "table"
  local nsearchers = %d
  local pattern = luaproc.receive("tasks")
  local todo = {}
  while true do
    local f = luaproc.receive("tasks")
    if not f then break end
    todo[#todo + 1] = f
  end
  local counts, total, next, running = {}, 0, 1, nsearchers
  for i = 1, nsearchers do luaproc.send("job" .. i, pattern) end
  while running > 0 do
    local kind, id, file, count = luaproc.receive("coord")
    if kind == "found" then
      counts[#counts + 1] = { file = file, count = count }
      total = total + count
    end
    if next <= #todo then
      luaproc.send("job" .. id, todo[next])
      next = next + 1
    else
      luaproc.send("job" .. id, false)
      running = running - 1
    end
  end
  table.sort(counts, function(a, b) return a.file < b.file end)
  for _, c in ipairs(counts) do print(string.format("%%6d  %%s", c.count, c.file)) end
  print(string.format("%%d lines with %%q in %%d files (%%d searchers)",
                      total, pattern, #counts, nsearchers))
]], SEARCHERS))

-- The searchers: one file at a time, a count of the lines holding the pattern.
local searcher = [[
  local io, string = require "io", require "string"
  local pattern = luaproc.receive("job" .. id)
  luaproc.send("coord", "ready", id)
  while true do
    local file = luaproc.receive("job" .. id)
    if not file then break end
    local count, f = 0, io.open(file)
    if f then
      for line in f:lines() do
        if string.find(line, pattern, 1, true) then count = count + 1 end
      end
      f:close()
    end
    luaproc.send("coord", "found", id, file, count)
  end
]]
for i = 1, SEARCHERS do
  luaproc.newchannel("job" .. i)
  luaproc.newproc("local id = " .. i .. "\n" .. searcher)
end

luaproc.send("tasks", pattern)
for _, f in ipairs(files) do luaproc.send("tasks", f) end
luaproc.send("tasks", false)
luaproc.wait()
