#!/bin/sh
# bench_otp.sh [LPVM] -- OTP benchmarks against BEAM on the same machine: a call by
# hand with receive_ref (0 and 10,000 unrelated messages queued in the caller's
# mailbox), gen_server.call, and a simple_one_for_one supervisor starting and
# stopping 10,000 children. BEAM runs estone/bench_otp.escript (escript, erlang-nox).
# One worker / one scheduler each, so the figures compare the runtimes, not the cores.
#   LPVM_BENCH_QUICK=1 sh estone/bench_otp.sh    -- smaller sizes
LPVM=${1:-build/lpvm}
HERE=$(cd "$(dirname "$0")" && pwd)
B="$HERE/bench_otp.lua"
E="$HERE/bench_otp.escript"
[ -x "$LPVM" ] || { echo "bench_otp.sh: no $LPVM (build first)"; exit 1; }
if [ -n "$LPVM_BENCH_QUICK" ]; then N=20000; K=2000; else N=200000; K=10000; fi

field() { printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
lp() { "$LPVM" --workers 1 "$B" "$@" 2>&1 | tail -1; }
be() { if command -v escript >/dev/null; then ERL_FLAGS="+S 1" escript "$E" "$@" 2>&1 | tail -1; else echo "no escript"; fi; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

echo "lpvm OTP benchmarks vs BEAM ($(nproc) CPUs, $("$LPVM" --version), 1 worker / +S 1)"
printf '%-34s %12s %12s %8s\n' case lpvm BEAM ratio
for q in 0 10000; do
  l=$(lp refcall $q $N); e=$(be refcall $q $N)
  a=$(field ns_per_call "$l"); b=$(field ns_per_call "$e")
  printf '%-34s %12s %12s %8s\n' "call by hand, $q queued (ns)" "$a" "$b" "$(ratio "$a" "$b")"
done
for q in 0 10000; do
  l=$(lp gs_call $q $N); e=$(be gs_call $q $N)
  a=$(field ns_per_call "$l"); b=$(field ns_per_call "$e")
  printf '%-34s %12s %12s %8s\n' "gen_server call, $q queued (ns)" "$a" "$b" "$(ratio "$a" "$b")"
done
l=$(lp sup $K); e=$(be sup $K)
for f in start_us_per_child stop_us_per_child; do
  a=$(field $f "$l"); b=$(field $f "$e")
  printf '%-34s %12s %12s %8s\n' "simple_one_for_one $K: $f" "$a" "$b" "$(ratio "$a" "$b")"
done
