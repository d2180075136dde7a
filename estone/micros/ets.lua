-- ets: Erlang's micro inserts, matches, deletes and walks two ETS tables (a set and a
-- bag) a loop. lpvm has no shared-table facility (no ETS equivalent: processes share
-- nothing), so this micro is not run and is left out of the total.
return {
  available = function() return false end,
  why_not = "lpvm has no shared-table facility (no ETS); not run, left out of the total",
  run = function() error("ets: not available") end,
}
