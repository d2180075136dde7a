#!/bin/sh
# bench_dist.sh [LPVM] -- distribution over one connection on this machine: round-trip
# latency and one-way throughput of 10-byte messages, lpvm <-> lpvm against erl <-> erl
# (erlang-nox). One worker / +S 1 per node, so the figures compare the runtimes.
#   LPVM_BENCH_QUICK=1 sh estone/bench_dist.sh    -- smaller sizes
LPVM=${1:-build/lpvm}
HERE=$(cd "$(dirname "$0")" && pwd)
[ -x "$LPVM" ] || { echo "bench_dist.sh: no $LPVM (build first)"; exit 1; }
if [ -n "$LPVM_BENCH_QUICK" ]; then N=2000; M=20000; else N=20000; M=200000; fi
field() { printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

l=$("$LPVM" --workers 1 "$HERE/bench_dist.lua" client $N $M 2>/dev/null | tail -1)
e="-"
if command -v erl >/dev/null; then
  T=$(mktemp -d)
  erlc -o "$T" "$HERE/bench_dist.erl"
  c="bench$$"
  host=$(hostname -s)
  erl +S 1 -pa "$T" -sname "ea$$" -setcookie "$c" -noshell \
    -eval "bench_dist:client('eb$$@$host', $N, $M), init:stop()." > "$T/out" 2>&1 &
  a=$!
  sleep 1
  erl +S 1 -pa "$T" -sname "eb$$" -setcookie "$c" -noshell \
    -eval "bench_dist:server([\"ea$$@$host\"])." > /dev/null 2>&1 &
  wait $a
  e=$(tail -1 "$T/out")
  rm -rf "$T"
fi
echo "distribution, one connection on loopback ($(nproc) CPUs, $("$LPVM" --version))"
printf '%-34s %12s %12s %8s\n' case lpvm erl ratio
a=$(field rt_us "$l"); b=$(field rt_us "$e")
printf '%-34s %12s %12s %8s\n' "round trip, 10 bytes (us)" "$a" "$b" "$(ratio "$a" "$b")"
a=$(field msgs_per_s "$l"); b=$(field msgs_per_s "$e")
printf '%-34s %12s %12s %8s\n' "one-way, 10 bytes (msgs/s)" "$a" "$b" "$(ratio "$a" "$b")"
