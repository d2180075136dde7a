-- bif_dispatch: calls to cheap built-ins, 12 rounds of disp() a loop. Each Erlang BIF
-- has a Lua/lpvm counterpart of the same kind:
--   self()            lpvm.self()          make_ref()          setmetatable({}, REF)
--   atom_to_list('')  tostring("")         list_to_atom([])    table.concat({})
--   tuple_to_list({}) {table.unpack({})}   list_to_tuple([])   table.pack()
--   element(1, T)     rawget(T, 1)         setelement(1, T, k) table.move copy + set
--   date(), time()    os.date("*t"), os.time()
--   put/get/erase     rawset/rawget on a per-process table (the process dictionary)
--   hd(L), tl(L)      rawget(L, 1), {table.unpack(L, 2)}
--   length(L), size(T) rawlen              node(), node(S)     select("#"), type(S)
--   whereis(code_server)  lpvm.whereis(name) of a registered process
local self, whereis = lpvm.self, lpvm.whereis
local rawget, rawset, rawlen, select, type = rawget, rawset, rawlen, select, type
local tostring, setmetatable = tostring, setmetatable
local concat, unpack, pack, move = table.concat, table.unpack, table.pack, table.move
local date, time = os.date, os.time
local REF, EMPTY = {}, {}
local dict = {}

local function setelement(i, t, v)
  local c = move(t, 1, rawlen(t), 1, {})
  c[i] = v
  return c
end

local function disp()
  local tup = { "a" }
  local l = { "x" }
  self(); self(); self(); self(); self(); self(); self(); self(); self()
  local _ = setmetatable({}, REF)
  _ = tostring("")
  _ = concat(EMPTY)
  _ = { unpack(EMPTY) }
  _ = pack()
  _ = rawget(tup, 1); _ = rawget(tup, 1); _ = rawget(tup, 1); _ = rawget(tup, 1)
  _ = rawget(tup, 1); _ = rawget(tup, 1); _ = rawget(tup, 1); _ = rawget(tup, 1)
  _ = rawget(tup, 1); _ = rawget(tup, 1); _ = rawget(tup, 1); _ = rawget(tup, 1)
  _ = rawget(tup, 1); _ = rawget(tup, 1); _ = rawget(tup, 1); _ = rawget(tup, 1)
  _ = setelement(1, tup, "k"); _ = setelement(1, tup, "k"); _ = setelement(1, tup, "k")
  _ = setelement(1, tup, "k"); _ = setelement(1, tup, "k"); _ = setelement(1, tup, "k")
  _ = setelement(1, tup, "k"); _ = setelement(1, tup, "k"); _ = setelement(1, tup, "k")
  _ = setelement(1, tup, "k"); _ = setelement(1, tup, "k"); _ = setelement(1, tup, "k")
  _ = setelement(1, tup, "k")
  _ = date("*t"); _ = time()
  rawset(dict, "a", 1)
  _ = rawget(dict, "a")
  rawset(dict, "a", nil)
  _ = rawget(l, 1)
  _ = { unpack(l, 2) }
  _ = rawlen(l); _ = rawlen(l); _ = rawlen(l); _ = rawlen(l)
  _ = select("#"); _ = select("#"); _ = select("#"); _ = select("#")
  _ = select("#"); _ = select("#"); _ = select("#"); _ = select("#")
  local s = self()
  _ = type(s); _ = type(s); _ = type(s)
  _ = rawlen(tup)
  _ = whereis("estone_code_server"); _ = whereis("estone_code_server")
  _ = whereis("estone_code_server"); _ = whereis("estone_code_server")
  _ = whereis("estone_code_server"); _ = whereis("estone_code_server")
  return whereis("estone_code_server")
end

return function(loops)
  -- Erlang asks for code_server, which always exists; here this process stands in.
  lpvm.register("estone_code_server")
  for _ = 1, loops do
    disp(); disp(); disp(); disp(); disp(); disp()
    disp(); disp(); disp(); disp(); disp(); disp()
  end
  lpvm.unregister("estone_code_server")
  return 0
end
