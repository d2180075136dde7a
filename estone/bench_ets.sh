#!/bin/sh
# bench_ets.sh [LPVM] -- ETS from Lua (lpvm) beside ETS from Erlang (BEAM) on this
# machine: insert, lookup, update_counter and an ordered_set next-walk, in ns per
# operation of one process, with 1 and 2 processes at once and 1,000 and 1,000,000
# objects. Both sides: a public table with read_concurrency and write_concurrency,
# keys visited with the same stride (estone/bench_ets.lua, estone/bench_ets.escript).
#   ETS_BENCH_OPS=100000 sh estone/bench_ets.sh   -- fewer operations, a quick look
LPVM=${1:-build/lpvm}
HERE=$(cd "$(dirname "$0")" && pwd)
[ -x "$LPVM" ] || { echo "bench_ets.sh: no $LPVM (build first)"; exit 1; }
ERL=$(command -v escript || true)

field() { printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

echo "ETS: ns per operation; lower is better. wall: the slowest process's wall time /"
echo "its operations; cpu: the VM's CPU time / all operations (steadier on a busy machine)"
printf '%-15s %9s %6s %10s %10s %10s %10s\n' op objects procs lpvm_wall beam_wall \
  lpvm_cpu beam_cpu
for op in insert lookup update_counter next; do
  for n in 1000 1000000; do
    for p in 1 2; do
      l=$("$LPVM" --workers 2 "$HERE/bench_ets.lua" $op $n $p 2>&1 | tail -1)
      e="no_erl"
      [ -n "$ERL" ] && e=$(escript "$HERE/bench_ets.escript" $op $n $p 2>&1 | tail -1)
      printf '%-15s %9s %6s %10s %10s %10s %10s\n' $op $n $p \
        "$(field ns_per_op "$l")" "$(field ns_per_op "$e")" \
        "$(field cpu_ns_per_op "$l")" "$(field cpu_ns_per_op "$e")"
    done
  done
done
