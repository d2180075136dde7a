-- test_args.lua -- bad arguments from Lua: strings that reach C (huge, or with a
-- NUL inside), wrong kinds of ports, and the rule that a programmer's mistake raises
-- naming the argument while a runtime condition returns nil, reason.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")

local BIG = string.rep("x", 10000000)   -- 10 MB: larger than a worker's stack

-- An error message quotes a bad value cut short, never the whole value.
local function short(err) T.ok(#err < 400, "error message of " .. #err .. " bytes") end

-- ---- strings that reach libc ----------------------------------------------------------

test("load_tasks of a 10 MB path is nil and a reason, not a crash in dlopen", function()
  local n, err = lpvm.load_tasks(BIG)   -- no '/': glibc would search the library path
  T.eq(n, nil)
  T.ok(err:find("file name too long", 1, true), err)
  short(err)
  n, err = lpvm.load_tasks("/" .. BIG)
  T.eq(n, nil)
  T.ok(err:find("file name too long", 1, true), err)
end)

test("load_tasks of a path with a NUL raises", function()
  T.raises(function() lpvm.load_tasks("./libtasks.so\0junk") end, "#1", "NUL")
end)

test("package.loadlib of a 10 MB path is nil, reason, 'open'; a NUL raises", function()
  local f, err, where = package.loadlib(BIG, "luaopen_x")
  T.eq(f, nil)
  T.ok(err:find("file name too long", 1, true), err)
  T.eq(where, "open")
  T.raises(function() package.loadlib("/lib\0x.so", "f") end, "#1", "NUL")
  T.raises(function() package.loadlib("/lib.so", "f\0g") end, "#2", "NUL")
  -- an ordinary miss still answers as Lua's loadlib does
  f, err, where = package.loadlib("/nonexistent/lib.so", "f")
  T.eq(f, nil)
  T.eq(where, "open")
end)

test("spawn_task quotes a bad type cut short; a NUL in the type is no type", function()
  short(T.raises(function() lpvm.spawn_task(BIG) end, "#1", "unknown task type", "10000000 bytes"))
  T.raises(function() lpvm.spawn_task("echo\0junk") end, "#1", "unknown task type 'echo\\x00junk'")
end)

test("file_open: a NUL in the path or the mode raises; a long path is enametoolong", function()
  T.raises(function() lpvm.file_open("/tmp\0/x") end, "#1", "NUL")
  T.raises(function() lpvm.file_open("/tmp/x", "r\0+") end, "#2", "invalid mode")
  short(T.raises(function() lpvm.file_open("/tmp/x", BIG) end, "#2", "invalid mode"))
  T.eqv(table.pack(lpvm.file_open("/" .. BIG)), table.pack(nil, "enametoolong"))
end)

test("open_port: NULs in the program, arguments, cwd or env raise", function()
  T.raises(function() lpvm.open_port("echo a\0b") end, "#1", "NUL")
  T.raises(function() lpvm.open_port({ "/bin/echo", "a\0b" }) end, "#1", "NUL")
  T.raises(function() lpvm.open_port({ "/bin/true" }, { cwd = "/\0tmp" }) end, "#2", "NUL")
  T.raises(function() lpvm.open_port({ "/bin/true" }, { env = { ["A\0B"] = "1" } }) end, "#2", "NUL")
  T.raises(function() lpvm.open_port({ "/bin/true" }, { env = { A = "1\0" } }) end, "#2", "NUL")
  T.raises(function() lpvm.open_port({ "/bin/true" }, { env = { ["A=B"] = "1" } }) end, "#2", "'='")
  T.raises(function() lpvm.open_port({ "/bin/true" }, { env = { [""] = "1" } }) end, "#2", "non-empty")
  T.raises(function() lpvm.open_port({ "/bin/true" }, { cwd = 1 }) end, "#2", "cwd")
  -- sizes the OS refuses are its answer, not a crash
  T.eqv(table.pack(lpvm.open_port({ BIG })), table.pack(nil, "enametoolong"))
  T.eqv(table.pack(lpvm.open_port({ "/bin/true" }, { cwd = "/" .. BIG })),
        table.pack(nil, "enametoolong"))
  short(T.raises(function() lpvm.open_port({ "/bin/true" }, { [BIG] = 1 }) end, "#2", "unknown option"))
end)

test("tcp: a NUL in the host raises; a 10 MB host is einval", function()
  T.raises(function() lpvm.tcp_listen("127.0.0.1\0evil", 0) end, "#1", "NUL")
  T.raises(function() lpvm.tcp_connect("localhost\0x", 1) end, "#1", "NUL")
  T.eqv(table.pack(lpvm.tcp_connect(BIG, 80)), table.pack(nil, "einval"))
  T.eqv(table.pack(lpvm.tcp_listen(BIG, 0)), table.pack(nil, "einval"))
end)

test("a luaproc channel name with a NUL raises; messages quote the name cut short", function()
  local luaproc = require("luaproc")
  T.raises(function() luaproc.newchannel("a\0b") end, "#1", "NUL")
  local ok, err = luaproc.send(BIG, 1)
  T.eq(ok, nil)
  T.ok(err:find("does not exist", 1, true), err)
  short(err)
end)

test("migrate quotes a bad mode cut short", function()
  short(T.raises(function() lpvm.migrate(BIG) end, "#1", "invalid option", "10000000 bytes"))
end)

test("sending to a name with a NUL never reaches the name before it", function()
  T.ok(lpvm.register("args_a"))
  T.raises(function() lpvm.send("args_a\0b", 1) end, "no process registered as 'args_a\\x00b'")
  short(T.raises(function() lpvm.send(BIG, 1) end, "no process registered"))
  T.no_msg(50)
  lpvm.unregister("args_a")
end)

test("a module that returns no function fails naming it", function()
  local reason = T.run_proc(function() lpvm.spawn_link("mod_nofunc"); lpvm.receive() end)
  T.ok(T.mentions(reason, "module 'mod_nofunc' returned number"), T.show(reason))
end)

T.run()
