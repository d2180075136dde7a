#!/bin/sh
# cg_ets.sh [LPVM] -- instructions per ETS operation from Lua, load-independent:
# callgrind counts two runs of estone/bench_ets.lua (N1 and N2 operations, 1 process,
# 1 worker) and divides the difference by N2 - N1, which cancels start-up and the
# table's fill. Needs valgrind.
#   sh estone/cg_ets.sh build/lpvm            -- 1,000 objects
#   CG_OBJECTS=1000000 sh estone/cg_ets.sh    -- a million
LPVM=${1:-build/lpvm}
HERE=$(cd "$(dirname "$0")" && pwd)
N=${CG_OBJECTS:-1000}
N1=${CG_N1:-20000}
N2=${CG_N2:-70000}
command -v valgrind >/dev/null || { echo "cg_ets.sh: valgrind not installed"; exit 1; }
tmp=$(mktemp -d)
irs() {
  ETS_BENCH_OPS=$2 valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" \
    "$LPVM" --workers 1 "$HERE/bench_ets.lua" "$1" "$N" 1 >/dev/null 2>"$tmp/err"
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/err" | head -1
}
printf '%-15s %9s %12s\n' op objects instr_per_op
for op in ${CG_OPS:-insert lookup update_counter next}; do
  a=$(irs "$op" "$N1"); b=$(irs "$op" "$N2")
  printf '%-15s %9s %12s\n' "$op" "$N" "$(( (b - a) / (N2 - N1) ))"
done
rm -rf "$tmp"
