#!/bin/sh
# cg_terms.sh [LPVM] -- instructions per message of EStone's message shapes (msgp's
# small, msgp_medium's big, msgp_huge's very_big(15)), load-independent: callgrind
# counts two runs of estone/bench_terms.lua (N1 and N2 round trips, 1 worker) and
# divides the difference by 2 (N2 - N1) messages, which cancels start-up. Each message
# is {self(), "message", M}: encoded by the sender, decoded by the receiver, plus the
# hop itself (the shape "none", M = nil, is that floor). Needs valgrind.
#   sh estone/cg_terms.sh build/lpvm
LPVM=${1:-build/lpvm}
HERE=$(cd "$(dirname "$0")" && pwd)
command -v valgrind >/dev/null || { echo "cg_terms.sh: valgrind not installed"; exit 1; }
tmp=$(mktemp -d)
irs() {
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" \
    "$LPVM" --workers 1 "$HERE/bench_terms.lua" "$1" "$2" >/dev/null 2>"$tmp/err"
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/err" | head -1
}
printf '%-6s %12s\n' shape instr_per_msg
for shape in ${CG_SHAPES:-none small big huge}; do
  if [ "$shape" = huge ]; then n1=200; n2=600; else n1=2000; n2=6000; fi
  a=$(irs "$shape" "$n1"); b=$(irs "$shape" "$n2")
  printf '%-6s %12s\n' "$shape" "$(( (b - a) / (2 * (n2 - n1)) ))"
done
rm -rf "$tmp"
