-- embed_worker.lua -- spawned from C by tests/embed/embed_test.c: adds 1..n to `to`.
return function(n, to)
  for i = 1, n do lpvm.send(to, "add", i) end
  lpvm.send(to, "stop")
end
