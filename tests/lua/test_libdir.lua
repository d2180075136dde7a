-- test_libdir.lua -- the Lua libraries that ship with lpvm (vm/lib/) are found by require.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

test("vm/lib comes first on package.path in every process", function()
  local dir = package.path:match("^([^;]*)/%?%.lua;")
  T.ok(dir, "package.path starts with the library folder: " .. package.path)
  local f = io.open(dir .. "/README.md")
  T.ok(f, "the folder exists: " .. dir)
  f:close()
  local me = lpvm.self()
  lpvm.spawn(function(p) lpvm.send(p, package.path) end, me)
  T.eqv(T.recv(), table.pack(package.path))
end)

test("LPVM_LIBDIR in the environment overrides the folder", function()
  -- the shell's parent is this VM: run the same binary again
  local out = io.popen([[LPVM_LIBDIR=/nonexistent/x "$(readlink /proc/$PPID/exe)" ]] ..
                       [[-e 'print(package.path)']]):read("a")
  T.ok(out:find("^/nonexistent/x/%?%.lua;"), out)
end)

T.run()
