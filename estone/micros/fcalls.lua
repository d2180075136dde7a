-- fcalls: function calls. Per loop, 400-deep recursions of six kinds: local tail
-- calls, local body calls (1 + f(N-1)), "remote" calls through the module table
-- (Erlang's ?MODULE:f), and apply (a name looked up in the module table, arguments
-- in a list, as apply(M, F, [N-1])).
local M = {}
local unpack = table.unpack

local function local0(n) if n == 0 then return 0 end return local0(n - 1) end
local function local1(n) if n == 0 then return 0 end return 1 + local1(n - 1) end
function M.remote0(n) if n == 0 then return 0 end return M.remote0(n - 1) end
function M.remote1(n) if n == 0 then return 0 end return 1 + M.remote1(n - 1) end
local function apply(mod, f, args) return mod[f](unpack(args)) end
function M.app0(n) if n == 0 then return 0 end return apply(M, "app0", { n - 1 }) end
function M.app1(n) if n == 0 then return 0 end return 1 + apply(M, "app1", { n - 1 }) end

return function(loops)
  for _ = 1, loops do
    local0(400); M.remote0(400); M.app0(400)
    local1(400); M.remote1(400); M.app1(400)
  end
  return 0
end
