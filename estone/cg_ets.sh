#!/bin/sh
# cg_ets.sh [LPVM] -- instructions per ETS operation from Lua, load-independent:
# callgrind counts two runs of estone/bench_ets.lua (N1 and N2 operations, 1 process,
# 1 worker) and divides the difference by N2 - N1, which cancels start-up and the
# table's fill. Needs valgrind.
#   sh estone/cg_ets.sh build/lpvm            -- 1,000 objects
#   CG_OBJECTS=1000000 sh estone/cg_ets.sh    -- a million
#   CG_MISSES=1 CG_OBJECTS=1000000 CG_OPS="lookup insert" CG_N1=100000 CG_N2=300000 \
#     sh estone/cg_ets.sh                     -- misses per operation (below)
# CG_MISSES=1: with callgrind's cache simulation (D1 32 KiB 8-way, LL 32 MiB 16-way as
# this machine's L3; set CG_LL=size,assoc,line for another), counting only inside the
# operation's C function (l_insert, l_lookup, ...) and what it calls: instructions, D1
# read misses and LL read misses per operation of the ETS call itself.
LPVM=${1:-build/lpvm}
HERE=$(cd "$(dirname "$0")" && pwd)
N=${CG_OBJECTS:-1000}
N1=${CG_N1:-20000}
N2=${CG_N2:-70000}
command -v valgrind >/dev/null || { echo "cg_ets.sh: valgrind not installed"; exit 1; }
tmp=$(mktemp -d)
# "Ir [D1mr DLmr]" of one run
irs() {
  if [ -n "$CG_MISSES" ]; then
    fn=l_$1; [ "$1" = next ] && fn=l_next
    ETS_BENCH_OPS=$2 valgrind --tool=callgrind --cache-sim=yes --D1=32768,8,64 \
      --LL="${CG_LL:-33554432,16,64}" --toggle-collect="$fn" \
      --callgrind-out-file="$tmp/cg" "$LPVM" --workers 1 "$HERE/bench_ets.lua" "$1" "$N" 1 \
      >/dev/null 2>"$tmp/err"
    ev=$(sed -n 's/^events: //p' "$tmp/cg"); sm=$(sed -n 's/^summary: //p' "$tmp/cg")
    set -- $ev; i=1; for e in "$@"; do eval "e_$e=\$(echo $sm | cut -d' ' -f$i)"; i=$((i + 1)); done
    echo "$e_Ir $e_D1mr $e_DLmr"
  else
    ETS_BENCH_OPS=$2 valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" \
      "$LPVM" --workers 1 "$HERE/bench_ets.lua" "$1" "$N" 1 >/dev/null 2>"$tmp/err"
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/err" | head -1
  fi
}
per() { awk -v a="$1" -v b="$2" -v n="$(( N2 - N1 ))" 'BEGIN { printf "%.2f", (b - a) / n }'; }
if [ -n "$CG_MISSES" ]; then
  printf '%-15s %9s %12s %10s %10s\n' op objects instr_per_op d1_misses ll_misses
else
  printf '%-15s %9s %12s\n' op objects instr_per_op
fi
for op in ${CG_OPS:-insert lookup update_counter next}; do
  a=$(irs "$op" "$N1"); b=$(irs "$op" "$N2")
  if [ -n "$CG_MISSES" ]; then
    set -- $a; a1=$1 a2=$2 a3=$3; set -- $b
    printf '%-15s %9s %12s %10s %10s\n' "$op" "$N" "$(per "$a1" "$1")" "$(per "$a2" "$2")" \
      "$(per "$a3" "$3")"
  else
    printf '%-15s %9s %12s\n' "$op" "$N" "$(( (b - a) / (N2 - N1) ))"
  fi
done
rm -rf "$tmp"
