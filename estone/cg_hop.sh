#!/bin/sh
# cg_hop.sh [LPVM] -- cache misses per ring hop, load-independent: cachegrind
# simulates the caches over two runs of examples/ring.lua with N processes (L1 and L2
# laps, one worker) and divides the difference by N * (L2 - L1) hops, which cancels
# the start-up and the spawning of the ring. A hop's cost at 10,000 processes and more
# is its cache misses (every process's state is cold when its turn comes), and this
# counts them deterministically where wall-clock times on a shared machine cannot.
#
#   sh estone/cg_hop.sh build/lpvm                 -- 10,000 processes, 2 vs 6 laps
#   CG_N=100000 CG_L1=1 CG_L2=2 sh estone/cg_hop.sh build/lpvm
#   CG_TOP=30 CG_LINES=1 sh estone/cg_hop.sh ...   -- more functions, and by source line
#
# Prints per hop: instructions (Ir), first-level data read/write misses (D1mr, D1mw)
# and last-level ones (DLmr, DLmw), in all and by function (the largest CG_TOP by
# D1mr + D1mw), and with CG_LINES=1 by source line. The caches simulated are fixed
# (not the host's, so figures compare between machines): L1d 32 KB 8-way, LL 1 MB
# 8-way (an L2 of this size: the ring's states overflow it at 10,000 processes), all
# with 64-byte lines. Cachegrind does not model prefetching, hardware or
# __builtin_prefetch: a build with -DLPVM_CG_PREFETCH (tasks/signal.c) makes the
# runtime's prefetches loads, so their misses show where they are asked for
# (sig_push, task_claim) instead of where the lines are used: what they cover.
#   cmake -S . -B build-cg -DCMAKE_C_FLAGS=-DLPVM_CG_PREFETCH && cmake --build build-cg --target lpvm
#   sh estone/cg_hop.sh build-cg/lpvm
# Needs valgrind.
LPVM=${1:-build/lpvm}
HERE=$(cd "$(dirname "$0")" && pwd)
RING=${CG_RING:-$HERE/compare/lpvm/ring.lua}
N=${CG_N:-10000}
L1=${CG_L1:-2}
L2=${CG_L2:-6}
TOP=${CG_TOP:-15}
command -v valgrind >/dev/null || { echo "cg_hop.sh: valgrind not installed"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for laps in "$L1" "$L2"; do
  valgrind --tool=cachegrind --cache-sim=yes --I1=32768,8,64 --D1=32768,8,64 \
    --LL=1048576,8,64 --cachegrind-out-file="$tmp/cg.$laps" \
    "$LPVM" --workers 1 "$RING" "$N" "$laps" >/dev/null 2>"$tmp/err.$laps" ||
    { echo "cg_hop.sh: ring.lua $N $laps failed:"; cat "$tmp/err.$laps"; exit 1; }
done
HOPS=$((N * (L2 - L1)))
echo "ring.lua $N processes, $L1 vs $L2 laps: per hop ($HOPS hops differenced)"
# cachegrind.out: "events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw", then "fl=", "fn="
# and "line counts..." lines. Sum by function and by line, the long run minus the
# short one.
awk -v hops="$HOPS" -v top="$TOP" -v lines="${CG_LINES:-0}" '
  FNR == 1 { sign = (FILENAME ~ /cg\.'"$L1"'$/) ? -1 : 1 }
  /^events:/ { for (i = 2; i <= NF; i++) col[$i] = i - 1; next }
  /^fl=/ { fl = substr($0, 4); sub(/.*\//, "", fl); next }
  /^fn=/ { fn = substr($0, 4); next }
  /^[0-9]/ {
    k = fn; kl = fl ":" $1
    for (e in col) { v = sign * $(col[e] + 1); F[k, e] += v; T[e] += v; if (lines) Ln[kl, e] += v }
    fns[k] = 1; if (lines) lns[kl] = 1
  }
  function row(name, A, key) {
    printf "%-34s %8.1f %6.2f %6.2f %6.2f %6.2f\n", name, A[key, "Ir"] / hops,
      A[key, "D1mr"] / hops, A[key, "D1mw"] / hops, A[key, "DLmr"] / hops, A[key, "DLmw"] / hops
  }
  function list(A, set, n,   k, c, i, j, best, keys, m) {
    m = 0; for (k in set) { c = A[k, "D1mr"] + A[k, "D1mw"]; if (c > 0) { m++; keys[m] = k; cnt[m] = c } }
    for (i = 1; i <= m && i <= n; i++) {     # selection of the n largest
      best = i; for (j = i + 1; j <= m; j++) if (cnt[j] > cnt[best]) best = j
      k = keys[i]; keys[i] = keys[best]; keys[best] = k
      c = cnt[i]; cnt[i] = cnt[best]; cnt[best] = c
      row(substr(keys[i], 1, 34), A, keys[i])
    }
  }
  END {
    printf "%-34s %8s %6s %6s %6s %6s\n", "", "Ir", "D1mr", "D1mw", "DLmr", "DLmw"
    printf "%-34s %8.1f %6.2f %6.2f %6.2f %6.2f\n", "total", T["Ir"] / hops,
      T["D1mr"] / hops, T["D1mw"] / hops, T["DLmr"] / hops, T["DLmw"] / hops
    print "by function:"; list(F, fns, top)
    if (lines) { print "by source line:"; list(Ln, lns, top * 2) }
  }' "$tmp/cg.$L1" "$tmp/cg.$L2"
