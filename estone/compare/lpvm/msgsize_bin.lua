-- msgsize.lua with the message an lpvm.binary (as ../erlang/msgsize.escript's binary,
-- reference-counted too): each send passes a reference, not the bytes
-- (docs/binaries.md). usage: lpvm msgsize_bin.lua Size K
MSGSIZE_BINARY = true
dofile((arg[0]:match("^(.*/)") or "") .. "msgsize.lua")
