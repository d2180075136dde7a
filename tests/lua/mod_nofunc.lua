-- mod_nofunc.lua -- a module for lpvm.spawn("mod_nofunc") that returns no function:
-- the process fails naming the module (test_args.lua).
return 42
