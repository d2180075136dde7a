#!/bin/sh
# cg_terms.sh [LPVM] -- instructions per message of EStone's message shapes (msgp's
# small, msgp_medium's big, msgp_huge's very_big(15)), load-independent: callgrind
# counts two runs of estone/bench_terms.lua (N1 and N2 round trips, 1 worker) and
# divides the difference by 2 (N2 - N1) messages, which cancels start-up. Each message
# is {self(), "message", M}: encoded by the sender, decoded by the receiver, plus the
# hop itself (the shape "none", M = nil, is that floor). With CG_MICROS=1 it then
# counts EStone's three micros themselves (estone/cg_micro.lua, 1 worker), per loop:
# 100 round trips down the chain (4 processes, 2 for huge: 5 or 3 messages each) and
# the chain's spawn and stop; msgp and msgp_medium 10 vs 30 loops, msgp_huge 2 vs 6.
# Needs valgrind.
#   sh estone/cg_terms.sh build/lpvm
#   CG_SHAPES= CG_MICROS=1 sh estone/cg_terms.sh build/lpvm
LPVM=${1:-build/lpvm}
HERE=$(cd "$(dirname "$0")" && pwd)
command -v valgrind >/dev/null || { echo "cg_terms.sh: valgrind not installed"; exit 1; }
tmp=$(mktemp -d)
# irs SCRIPT ARGS...: the instructions of one run
irs() {
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" \
    "$LPVM" --workers 1 "$@" >/dev/null 2>"$tmp/err" ||
    { echo "cg_terms.sh: $* failed:" >&2; cat "$tmp/err" >&2; exit 1; }
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/err" | head -1
}
printf '%-6s %12s\n' shape instr_per_msg
for shape in ${CG_SHAPES-none small big huge}; do
  if [ "$shape" = huge ]; then n1=200; n2=600; else n1=2000; n2=6000; fi
  a=$(irs "$HERE/bench_terms.lua" "$shape" "$n1") || exit 1
  b=$(irs "$HERE/bench_terms.lua" "$shape" "$n2") || exit 1
  printf '%-6s %12s\n' "$shape" "$(( (b - a) / (2 * (n2 - n1)) ))"
done
if [ -n "$CG_MICROS" ]; then
  printf '%-12s %14s\n' micro instr_per_loop
  for micro in msgp msgp_medium msgp_huge; do
    if [ "$micro" = msgp_huge ]; then n1=2; n2=6; else n1=10; n2=30; fi
    a=$(irs "$HERE/cg_micro.lua" "$micro" "$n1") || exit 1
    b=$(irs "$HERE/cg_micro.lua" "$micro" "$n2") || exit 1
    printf '%-12s %14s\n' "$micro" "$(( (b - a) / (n2 - n1) ))"
  done
fi
rm -rf "$tmp"
