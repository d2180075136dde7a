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
  T.raises(function() lpvm.open_port({ "/bin/true" }, { env = { ["A\0B"] = "1" } }) end,
           "#2", "NUL")
  T.raises(function() lpvm.open_port({ "/bin/true" }, { env = { A = "1\0" } }) end, "#2", "NUL")
  T.raises(function() lpvm.open_port({ "/bin/true" }, { env = { ["A=B"] = "1" } }) end, "#2", "'='")
  T.raises(function() lpvm.open_port({ "/bin/true" }, { env = { [""] = "1" } }) end,
           "#2", "non-empty")
  T.raises(function() lpvm.open_port({ "/bin/true" }, { cwd = 1 }) end, "#2", "cwd")
  -- sizes the OS refuses are its answer, not a crash
  T.eqv(table.pack(lpvm.open_port({ BIG })), table.pack(nil, "enametoolong"))
  T.eqv(table.pack(lpvm.open_port({ "/bin/true" }, { cwd = "/" .. BIG })),
        table.pack(nil, "enametoolong"))
  short(T.raises(function() lpvm.open_port({ "/bin/true" }, { [BIG] = 1 }) end,
                 "#2", "unknown option"))
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

test("os.execute and io.popen: a NUL in the command raises (sh would run its head)", function()
  T.raises(function() os.execute("true\0; echo no") end, "#1", "NUL")
  T.raises(function() io.popen("true\0; echo no") end, "#1", "NUL")
end)

test("a log level with a NUL is no level; a bad level is quoted cut short", function()
  T.raises(function() lpvm.log_level("error\0x") end, "#1", "log level expected", "'error\\x00x'")
  short(T.raises(function() lpvm.log(BIG, "x") end, "#1", "log level expected", "10000000 bytes"))
end)

test("an option name with a NUL is an unknown option, not the name before it", function()
  T.raises(function() lpvm.spawn({ ["link\0x"] = true }, function() end) end, "#1",
           "unknown spawn option 'link\\x00x'")
  T.raises(function() lpvm.open_port({ "cat" }, { ["active\0"] = true }) end, "#2",
           "unknown option 'active\\x00'")
end)

test("spawn options of a wrong type or out of place raise naming the option", function()
  local f = function() end
  T.raises(function() lpvm.spawn({ fn = 5 }, f) end, "#1", "option 'fn' must be a string, got number")
  T.raises(function() lpvm.spawn({ fn = "main" }, f) end, "#1", "option 'fn' goes with 'node'")
  T.raises(function() lpvm.spawn({ fn = "main", node = lpvm.node() }, "mod_echo") end, "#1",
           "option 'fn' goes with 'node'")
  T.raises(function() lpvm.spawn({ node = 1 }, f) end, "#1", "option 'node' must be a string")
  T.raises(function() lpvm.spawn({ link = 1 }, f) end, "#1", "option 'link' must be a boolean, got number")
  T.raises(function() lpvm.spawn({ thread = "yes" }, f) end, "#1", "option 'thread' must be a boolean")
  T.raises(function() lpvm.spawn_link({ monitor = {} }, f) end, "#1", "option 'monitor' must be a boolean")
  T.raises(function() lpvm.spawn({ [1] = true }, f) end, "#1", "unknown spawn option")
  -- the documented ones still go, false as nil
  local pid, ref = lpvm.spawn({ link = false, thread = false, monitor = true, priority = 20,
                                max_heap = 0, max_mailbox = 0, node = lpvm.node() }, f)
  T.ok(pid)
  T.eq(T.down(ref, T.WAIT), pid)
  T.no_msg(30)
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

test("spawn of a 10 MB or empty module name raises in the caller; so does a NUL", function()
  -- before: the child's require built a 190 MB reason out of the name (7 s, 760 MB)
  short(T.raises(function() lpvm.spawn(BIG) end, "#1", "module name of 1..4095 bytes"))
  T.raises(function() lpvm.spawn("") end, "#1", "module name of 1..4095 bytes")
  T.raises(function() lpvm.spawn_monitor("mod_echo\0x") end, "#1", "NUL")
  T.raises(function() lpvm.spawn({ link = true }, BIG) end, "#2", "module name")
end)

test("a module that returns no function fails naming it", function()
  local reason = T.run_proc(function() lpvm.spawn_link("mod_nofunc"); lpvm.receive() end)
  T.ok(T.mentions(reason, "module 'mod_nofunc' returned number"), T.show(reason))
end)

-- ---- registered names (issue 10 item 9) and the argument rule (item 10) ---------------

test("a registered name with a NUL raises; it never answers to the name before it", function()
  T.raises(function() lpvm.register("a\0b") end, "#1", "'register'", "NUL")
  T.eq(lpvm.whereis("a"), nil, "register('a\\0b') registered nothing")
  T.raises(function() lpvm.whereis("a\0b") end, "#1", "NUL")
  T.raises(function() lpvm.unregister("a\0b") end, "#1", "NUL")
  T.ok(lpvm.register("a"))
  T.raises(function() lpvm.whereis("a\0b") end, "#1", "NUL")
  T.eq(lpvm.whereis("a"), lpvm.self())
  lpvm.unregister("a")
end)

test("register('') and a name over 255 bytes raise; a taken name is nil, reason", function()
  T.raises(function() lpvm.register("") end, "#1", "'register'", "name of 1..255 bytes")
  T.raises(function() lpvm.register(string.rep("n", 256)) end, "#1", "name of 1..255 bytes")
  T.raises(function() lpvm.whereis("") end, "#1", "name of 1..255 bytes")
  T.raises(function() lpvm.unregister("") end, "#1", "name of 1..255 bytes")
  T.ok(lpvm.register(string.rep("n", 255)))
  local other = lpvm.spawn(function() lpvm.receive() end)
  T.eqv(table.pack(lpvm.register(string.rep("n", 255), other)),
        table.pack(nil, "already_registered"))
  T.eqv(table.pack(lpvm.unregister("never_registered")), table.pack(nil, "noproc"))
  lpvm.unregister(string.rep("n", 255))
  lpvm.exit(other, "kill")
end)

test("fd_port refuses descriptors that do not fit an int (2^32+1 is not fd 1)", function()
  T.raises(function() lpvm.fd_port(2 ^ 32 + 1) end, "#1", "descriptor expected")
  T.raises(function() lpvm.fd_port(math.tointeger(2 ^ 32 + 1)) end, "#1", "descriptor expected")
  T.raises(function() lpvm.fd_port(nil, 2 ^ 31) end, "#2", "descriptor expected")
  T.raises(function() lpvm.fd_port(-2) end, "#1", "descriptor expected")
  T.raises(function() lpvm.fd_port() end, "#1", "at least one descriptor")
  T.eqv(table.pack(lpvm.fd_port(987654)), table.pack(nil, "ebadf"), "not an open descriptor")
  local p = assert(lpvm.fd_port(nil, 2))
  lpvm.port_close(p)
end)

test("recv(port, n) over the port's max_packet raises; within it, it reads", function()
  local p = assert(lpvm.open_port({ "cat" }, { active = false, max_packet = 1000 }))
  T.raises(function() lpvm.recv(p, 1001, 100) end, "#2", "'recv'", "over the port's max_packet")
  T.raises(function() lpvm.recv(p, 2 ^ 40, 100) end, "#2", "over the port's max_packet")
  T.raises(function() lpvm.recv(p, -1, 100) end, "#2", ">= 0")
  lpvm.port_send(p, string.rep("z", 1000))
  T.eq(lpvm.recv(p, 1000, 5000), string.rep("z", 1000))
  lpvm.port_close(p, 0)
end)

-- ---- every port call checks the port's kind ------------------------------------------

-- One port of each kind, owned by the caller; closed by the returned function.
local function ports()
  local path = os.tmpname()
  local P = {}
  P["program port"] = assert(lpvm.open_port({ "cat" }, { active = false }))
  P["fd port"] = assert(lpvm.fd_port(nil, 2))
  local port
  P["tcp listener"], port = lpvm.tcp_listen("127.0.0.1", 0, { active = false })
  P["tcp connection"] = assert(lpvm.tcp_connect("127.0.0.1", port, { active = false }))
  P["file port"] = assert(lpvm.file_open(path, "w+"))
  return P, function()
    for _, p in pairs(P) do lpvm.port_close(p, 0) end
    os.remove(path)
  end
end

local function kinds_except(P, ok)
  local t = {}
  for kind, p in pairs(P) do if not ok[kind] then t[kind] = p end end
  return t
end

test("file calls on any other port raise 'file port expected, got <kind>'", function()
  local P, close = ports()
  for kind, p in pairs(kinds_except(P, { ["file port"] = true })) do
    T.raises(function() lpvm.file_read(p, 1) end, "#1", "'file_read'",
             "file port expected, got " .. kind)
    T.raises(function() lpvm.file_write(p, "x") end, "#1", "file port expected, got " .. kind)
    T.raises(function() lpvm.file_seek(p, "set", 0) end, "#1", "file port expected, got " .. kind)
  end
  T.eq(lpvm.file_write(P["file port"], "ok"), true)
  close()
end)

test("tcp_accept on anything but a listener raises 'tcp listener expected'", function()
  local P, close = ports()
  for kind, p in pairs(kinds_except(P, { ["tcp listener"] = true })) do
    T.raises(function() lpvm.tcp_accept(p, 10) end, "#1", "tcp listener expected, got " .. kind)
    T.raises(function() lpvm.tcp_accept(p, lpvm.self()) end, "#1", "tcp listener expected")
  end
  local conn, err = lpvm.tcp_accept(P["tcp listener"], 5000)   -- the connection made above
  T.ok(lpvm.is_port(conn), err)
  lpvm.port_close(conn, 0)
  close()
end)

test("stream calls on a listener or a file port raise 'stream port expected'", function()
  local P, close = ports()
  for _, kind in ipairs({ "tcp listener", "file port" }) do
    local p = P[kind]
    local want = "stream port expected, got " .. kind
    T.raises(function() lpvm.recv(p, 0, 10) end, "#1", "'recv'", want)
    T.raises(function() lpvm.set_active(p, true) end, "#1", want)
    T.raises(function() lpvm.set_packet(p, "line") end, "#1", want)
    T.raises(function() lpvm.shutdown(p) end, "#1", want)
    T.raises(function() lpvm.port_send(p, "x") end, "#1", want)
  end
  T.raises(function() lpvm.controlling_process(P["file port"], lpvm.self()) end, "#1",
           "stream port or tcp listener expected, got file port")
  -- the stream kinds take them
  for _, kind in ipairs({ "program port", "fd port", "tcp connection" }) do
    T.eq(lpvm.set_packet(P[kind], "raw"), true, kind)
    T.eq(lpvm.set_active(P[kind], false), true, kind)
  end
  T.eq(lpvm.port_send(P["program port"], "hi\n"), true)
  T.eq(lpvm.recv(P["program port"], 3, 5000), "hi\n")
  T.eq(lpvm.shutdown(P["program port"]), true)
  T.eq(lpvm.controlling_process(P["tcp listener"], lpvm.self()), true)
  close()
end)

test("a closed port of the right kind answers closed, not an error", function()
  local f = assert(lpvm.file_open("/dev/null"))
  lpvm.port_close(f)
  T.eqv(table.pack(lpvm.file_read(f, 1)), table.pack(nil, "closed"))
end)

test("port_close(p, 0) of a fresh port never kills its owner and leaves no message", function()
  -- Not trapping exits. Before, the port linked to its owner asynchronously, so the
  -- owner's unlink before the kill could miss the link and the kill's exit signal
  -- (killed) took the owner along; and a DOWN or {closed} came after port_close.
  for _ = 1, T.scaled(300, 30) do
    lpvm.port_close(assert(lpvm.file_open("/dev/null")), 0)
    lpvm.port_close(assert(lpvm.tcp_listen("127.0.0.1", 0)), 0)
    lpvm.port_close(assert(lpvm.open_port({ "cat" })), 0)
  end
  T.no_msg(100)
end)

test("port_close(c, 0) of a connection just accepted never kills its owner", function()
  -- The listener spawns the accepted port, which links to its owner in its own setup:
  -- the LINK may still be on its way when the owner unlinks and kills. Erlang's
  -- unlink guarantee (lpvm_unlink's ACK) makes that old link void.
  local l, port = lpvm.tcp_listen("127.0.0.1", 0)
  T.ok(l, port)
  for _ = 1, T.scaled(300, 30) do
    local c = assert(lpvm.tcp_connect("127.0.0.1", port))
    local a = assert(lpvm.tcp_accept(l, 5000))
    lpvm.port_close(a, 0)
    lpvm.port_close(c, 0)
  end
  lpvm.port_close(l, 0)
  T.no_msg(100)
end)

T.run()
