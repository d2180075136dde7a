#!/bin/sh
# cg_sup.sh [LPVM] -- instructions per simple_one_for_one child start and stop,
# load-independent: callgrind counts two runs of `estone/bench_otp.lua sup K` (K1 and
# K2 children, 1 worker), dumping its counts at the bench's phase marks (a call of
# lpvm.registered() before and after the starts and after the stop), and divides each
# phase's difference by K2 - K1. Needs valgrind.
#   sh estone/cg_sup.sh build/lpvm
#   CG_K1=1000 CG_K2=3000 sh estone/cg_sup.sh
LPVM=${1:-build/lpvm}
HERE=$(cd "$(dirname "$0")" && pwd)
K1=${CG_K1:-100}
K2=${CG_K2:-300}
command -v valgrind >/dev/null || { echo "cg_sup.sh: valgrind not installed"; exit 1; }
tmp=$(mktemp -d)
# phase N's instruction count (1: start-up, 2: the starts, 3: the stop) for K children
phase() {
  sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$tmp/cg.$1.$2" | head -1
}
for k in "$K1" "$K2"; do
  valgrind --tool=callgrind --dump-before=lmod_registered --callgrind-out-file="$tmp/cg.$k" \
    "$LPVM" --workers 1 "$HERE/bench_otp.lua" sup "$k" >/dev/null 2>&1
done
printf '%-8s %12s %12s\n' children start_instr stop_instr
printf '%-8s %12s %12s\n' "$K1-$K2" \
  "$(( ($(phase "$K2" 2) - $(phase "$K1" 2)) / (K2 - K1) ))" \
  "$(( ($(phase "$K2" 3) - $(phase "$K1" 3)) / (K2 - K1) ))"
rm -rf "$tmp"
