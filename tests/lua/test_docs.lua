-- test_docs.lua -- the documentation holds together: every relative link in a *.md
-- file resolves inside the repository (no paths to files that are not in it), and
-- the binary has one spelling (build/lpvm, never its path inside build/vm/).
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

local here = arg[0]:match("^(.*)/") or "."
local root = io.popen("cd '" .. here .. "/../..' && pwd"):read("l")

local function markdown_files()
  local list = {}
  local p = io.popen("cd '" .. root .. "' && find . -name '*.md' -not -path './build*' " ..
                     "-not -path './.git/*' | sort")
  for f in p:lines() do list[#list + 1] = f:sub(3) end
  p:close()
  return list
end

local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end

test("every relative link in the docs resolves inside the repository", function()
  local files, bad = markdown_files(), {}
  T.ok(#files > 5, "found the docs: " .. #files)
  for _, file in ipairs(files) do
    local text = io.open(root .. "/" .. file):read("a")
    text = text:gsub("```.-```", ""):gsub("`[^`\n]*`", "")   -- code is not a link
    local dir = file:match("^(.*)/") or "."
    for target in text:gmatch("%]%(([^)%s]+)%)") do
      if not target:match("^%a[%w+.-]*:") and not target:match("^#") then
        local path = target:gsub("#.*$", "")
        if not exists(root .. "/" .. dir .. "/" .. path) then
          bad[#bad + 1] = file .. ": " .. target
        end
      end
    end
  end
  T.eq(bad, {}, "links to nowhere")
end)

test("one spelling of the binary: build/lpvm", function()
  local p = io.popen("cd '" .. root .. "' && grep -rln 'build/vm/lpv[m]' --include='*.md' " ..
                     "--include='*.sh' --include='*.lua' --include=Makefile . | grep -v '^./build'")
  local found = p:read("a")
  p:close()
  T.eq(found, "", "files that name the binary by its path inside build/vm/")
end)

-- The ```lua block of `file` that contains `marker` (plain text), as written.
local function doc_block(file, marker)
  local text = io.open(root .. "/" .. file):read("a")
  for code in text:gmatch("```lua\n(.-)```") do
    if code:find(marker, 1, true) then return code end
  end
  error(file .. ": no lua block containing " .. marker)
end

-- Run `code` as a script with this very binary, from a scratch folder: its output
-- (stdout and stderr) and whether it exited 0. A crash report is on stderr.
local exe = arg[-1]          -- this binary, as the test was started (lowest index)
do local i = -1 while arg[i - 1] do i = i - 1 end exe = arg[i] end
exe = io.popen("readlink -f '" .. exe .. "'"):read("l")

local function run_example(code)
  local dir = io.popen("mktemp -d /tmp/lpvm-docs.XXXXXX"):read("l")
  local f = assert(io.open(dir .. "/example.lua", "w"))
  f:write(code)
  f:close()
  local p = io.popen("cd " .. dir .. " && timeout 60 '" .. exe .. "' example.lua 2>&1")
  local out = p:read("a")
  local ok = p:close()
  os.execute("rm -rf " .. dir)
  return out, ok
end

-- The values a block says it prints: its `--> x` comments, in order.
local function promised(code)
  local want = {}
  for v in code:gmatch("%-%->%s*([^\n]-)%s*\n") do
    want[#want + 1] = v:gsub("%s+%(.*%)$", "")     -- "--> v   (ours now)": v
  end
  return table.concat(want, "\n") .. "\n"
end

test("doc examples run as shown and print what they promise", function()
  -- ets.md's first example ended its owner before the process it spawned wrote to
  -- the table: a new user got "no such table" and a crash report
  for _, ex in ipairs({
    { "docs/ets.md", 'local users = ets.new("users"' },
    { "docs/ets.md", 'heir = me, heir_data = "cache"' },   -- had no `ets`: hung
  }) do
    local code = doc_block(ex[1], ex[2])
    local out, ok = run_example(code)
    T.eq(ok, true, ex[1] .. ": " .. out)
    T.eq(out, promised(code), ex[1])
  end
  -- README's hello.lua: three greetings, in any order
  local out, ok = run_example(doc_block("README.md", "hello.lua"))
  T.eq(ok, true, out)
  local lines = {}
  for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
  table.sort(lines)
  T.eq(lines, { "hello from\t1", "hello from\t2", "hello from\t3" })
end)

T.run()
