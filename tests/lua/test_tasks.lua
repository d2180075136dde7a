-- test_tasks.lua -- C task types from Lua: load_tasks and spawn_task.
-- The library (tests/lua/tasklib.c) is built by CMake; its path comes in
-- LPVM_TEST_TASKLIB. Without it, only the error cases run.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "harness.lua")
local lib = os.getenv("LPVM_TEST_TASKLIB")

test("load_tasks of a missing library returns nil and the reason", function()
  local n, err = lpvm.load_tasks("/nonexistent/libnothing.so")
  T.eq(n, nil)
  T.ok(T.mentions(err, "libnothing"), T.show(err))
end)

test("load_tasks and spawn_task: bad arguments", function()
  T.raises(function() lpvm.load_tasks() end, "bad argument #1")
  T.raises(function() lpvm.spawn_task() end, "bad argument #1")
  T.raises(function() lpvm.spawn_task("no_such_task_type") end, "no_such_task_type")
end)

if lib then
  test("load_tasks registers the library's task types", function()
    T.eq(lpvm.load_tasks(lib), 2)   -- echo_task, deep_task
  end)

  test("spawn_task starts a C task that talks with Lua", function()
    local pid = lpvm.spawn_task("echo_task", { tag = "t1" })
    T.ok(pid)
    lpvm.send(pid, "hello")
    T.eqv(T.recv(), table.pack("echo", { tag = "t1" }, "hello"))
    lpvm.send(pid, "several", 2, { 3 })
    T.eqv(T.recv(), table.pack("echo", { tag = "t1" }, { "several", 2, { 3 } }))
    local ref = lpvm.monitor(pid)
    lpvm.send(pid, "stop")
    local _, reason = T.down(ref)
    T.eq(reason, "normal")
  end)

  test("a C task reads a shared binary and splices it flattened: the bytes come back", function()
    local pid = lpvm.spawn_task("echo_task", 0)
    local big = lpvm.binary(string.rep("0123456789", 1000))
    lpvm.send(pid, big, big:sub(2, 4))
    local r = T.recv()
    T.eq(r[1], "echo")
    T.eq(type(r[3][1]), "string")
    T.eq(r[3][1] == tostring(big), true)
    T.eq(r[3][2], "123")
    local ref = lpvm.monitor(pid)
    lpvm.send(pid, lpvm.binary("stop"))   -- read with lpvm_get_bytes
    local _, reason = T.down(ref)
    T.eq(reason, "normal")
  end)

  test("a C task can be linked, monitored and killed like a process", function()
    local pid = lpvm.spawn_task("echo_task", 1)
    lpvm.trap_exit(true)
    lpvm.link(pid)
    lpvm.exit(pid, "kill")
    T.eq(T.exit_from(pid), "killed")
  end)

  test("info and processes see C tasks", function()
    local pid = lpvm.spawn_task("echo_task", 0)
    local i = lpvm.info(pid)
    T.eq(i.type, "echo_task")
    local found = false
    for _, p in ipairs(lpvm.processes()) do found = found or p == pid end
    T.ok(found)
    lpvm.send(pid, "stop")
  end)

  -- A C task builds its terms itself: a list 201 deep reached a Lua mailbox and raised
  -- "message nested too deep" in every receive that met it (a predicate's receive
  -- could never pass it). It is dropped on arrival now; 200 deep still decodes.
  test("a message from a C task nested deeper than Lua reads is dropped, not raised", function()
    local pid = lpvm.spawn_task("deep_task", 0)
    local me = lpvm.self()
    lpvm.send(pid, 201)
    lpvm.send(pid, 5000)
    lpvm.send(pid, 200)   -- answered after the two deep ones: it marks their arrival
    local got = T.recv_match(function(x) return type(x) == "table" end)[1]
    local d = 0
    while type(got) == "table" do got, d = got[1], d + 1 end
    T.eq(d, 200)
    T.eq(got, 7)
    lpvm.send(me, "after")
    T.eq(lpvm.receive(function(x) return x == "after" end, 5000), "after")
    T.eqv(table.pack(lpvm.receive(0)), table.pack(nil, "timeout"))
    local mref = lpvm.monitor(pid)
    lpvm.send(pid, "stop")
    T.down(mref)
  end)

  test("spawn_task(type) without an argument gives init nil", function()
    local pid = lpvm.spawn_task("deep_task")
    T.ok(pid)
    local mref = lpvm.monitor(pid)
    lpvm.send(pid, "stop")
    T.down(mref)
  end)

  test("loading the same library twice does not register twice", function()
    local n, err = lpvm.load_tasks(lib)
    T.ok(n == nil or n == 0, "second load: " .. tostring(n) .. " " .. tostring(err))
  end)
end

T.run()
