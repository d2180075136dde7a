#!/bin/sh
# bench_ets.sh [LPVM] -- ETS from Lua (lpvm) beside ETS from Erlang (BEAM) on this
# machine: insert, lookup, update_counter and an ordered_set next-walk, in ns per
# operation of one process, with 1 and 2 processes at once and 1,000 and 1,000,000
# objects. Both sides: a public table with read_concurrency and write_concurrency,
# keys visited with the same stride (estone/bench_ets.lua, estone/bench_ets.escript).
#   ETS_BENCH_OPS=100000 sh estone/bench_ets.sh   -- fewer operations, a quick look
#   ETS_BENCH_RUNS=5 sh estone/bench_ets.sh       -- five runs a side per row
# Each row runs ETS_BENCH_RUNS times a side (default 3), lpvm and BEAM alternating
# (lpvm, BEAM, lpvm, BEAM, ...), so a burst of load on a shared machine falls on both
# sides alike; each column is the median of its side's runs, each column taken on its
# own (a run's wall and cpu figures are not kept together). A column keeps its single
# run's meaning: lpvm_wall / beam_wall the slowest process's wall time / its
# operations, lpvm_cpu / beam_cpu the VM's CPU time (all its threads) / all
# operations. ETS_BENCH_RUNS=1 is the old single run per side.
LPVM=${1:-build/lpvm}
HERE=$(cd "$(dirname "$0")" && pwd)
[ -x "$LPVM" ] || { echo "bench_ets.sh: no $LPVM (build first)"; exit 1; }
ERL=$(command -v escript || true)
RUNS=${ETS_BENCH_RUNS:-3}
case $RUNS in ''|*[!0-9]*|0) echo "bench_ets.sh: ETS_BENCH_RUNS must be a positive integer, not '$RUNS'"; exit 1;; esac

field() { printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
# one run's figure, "x" when the run printed none (it failed)
fig() { v=$(field "$1" "$2"); echo "${v:-x}"; }
# median of the numbers given (blank for none; the mean of the two middle ones, rounded,
# for an even count); a failed run's "x" makes it "-"
median() {
  [ $# -eq 0 ] && return
  for v in "$@"; do case $v in ''|*[!0-9.]*) echo "-"; return;; esac; done
  printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 }
    END { if (NR % 2) printf "%d\n", v[(NR + 1) / 2];
          else printf "%.0f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "ETS: ns per operation; lower is better. wall: the slowest process's wall time /"
echo "its operations; cpu: the VM's CPU time / all operations (steadier on a busy machine)."
echo "Each figure the median of $RUNS run(s) a side, lpvm and BEAM alternating."
printf '%-15s %9s %6s %10s %10s %10s %10s\n' op objects procs lpvm_wall beam_wall \
  lpvm_cpu beam_cpu
for op in insert lookup update_counter next; do
  for n in 1000 1000000; do
    for p in 1 2; do
      lw="" lc="" ew="" ec="" r=0
      while [ $r -lt "$RUNS" ]; do
        l=$("$LPVM" --workers 2 "$HERE/bench_ets.lua" $op $n $p 2>&1 | tail -1)
        lw="$lw $(fig ns_per_op "$l")" lc="$lc $(fig cpu_ns_per_op "$l")"
        if [ -n "$ERL" ]; then
          e=$(escript "$HERE/bench_ets.escript" $op $n $p 2>&1 | tail -1)
          ew="$ew $(fig ns_per_op "$e")" ec="$ec $(fig cpu_ns_per_op "$e")"
        fi
        r=$((r + 1))
      done
      # shellcheck disable=SC2086 # the lists split into their numbers
      bw=$(median $ew) bc=$(median $ec)
      [ -z "$ERL" ] && bw=no_erl bc=no_erl
      # shellcheck disable=SC2086
      printf '%-15s %9s %6s %10s %10s %10s %10s\n' $op $n $p \
        "$(median $lw)" "$bw" "$(median $lc)" "$bc"
    done
  done
done
