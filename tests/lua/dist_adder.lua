-- dist_adder.lua -- a gen_server callback module for test_dist2.lua: calls across
-- nodes. State: a base number; call(x) -> base + x.
return {
  init = function(base) return "ok", base end,
  handle_call = function(x, _, base) return "reply", base + x, base end,
}
