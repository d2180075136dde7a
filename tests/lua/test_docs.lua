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

T.run()
