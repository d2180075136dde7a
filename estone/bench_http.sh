#!/bin/sh
# bench_http.sh [LPVM] -- examples/http_server.lua under wrk: requests/s and latency
# p50/p99 at 1, 16, 64 and 256 connections, with 1 and 2 workers; then the EStone
# port i/o pattern in Lua (estone/bench_ports.lua). Loopback only (127.0.0.1).
#   LPVM_BENCH_DURATION=5   seconds per wrk point (default 5)
#   LPVM_BENCH_QUICK=1      1 s per point and fewer port round trips
LPVM=${1:-build/lpvm}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
DUR=${LPVM_BENCH_DURATION:-5}
ROUNDS=20000
[ -n "$LPVM_BENCH_QUICK" ] && { DUR=1; ROUNDS=4000; }
[ -x "$LPVM" ] || { echo "bench_http.sh: no $LPVM (build first)"; exit 1; }

echo "lpvm HTTP and port benchmarks ($(nproc) CPUs, $("$LPVM" --version))"
echo
if ! command -v wrk >/dev/null 2>&1; then
  echo "http: wrk not installed (Debian: apt-get install wrk); skipped"
else
  echo "http: examples/http_server.lua, GET / (the 5,000-number page, 44 KB), keep-alive, wrk ${DUR}s per point"
  printf '%-8s %6s %12s %10s %10s %10s\n' workers conns requests/s p50_ms p99_ms errors
  for w in 1 2; do
    log=$(mktemp)
    "$LPVM" --workers $w "$ROOT/examples/http_server.lua" --port 0 --acceptors 16 >"$log" 2>&1 &
    pid=$!
    port=""
    for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
      port=$(sed -n 's|.*http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$log")
      [ -n "$port" ] && break
      sleep 0.1
    done
    if [ -z "$port" ]; then
      echo "http: the server did not start: $(cat "$log")"; kill $pid 2>/dev/null; rm -f "$log"; continue
    fi
    for c in 1 16 64 256; do
      t=2; [ $c -lt 2 ] && t=1
      out=$(wrk -t$t -c$c -d${DUR}s --latency "http://127.0.0.1:$port/" 2>&1)
      rps=$(printf '%s\n' "$out" | sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p')
      p50=$(printf '%s\n' "$out" | awk '$1 == "50%" {print $2}')
      p99=$(printf '%s\n' "$out" | awk '$1 == "99%" {print $2}')
      err=$(printf '%s\n' "$out" | sed -n 's/.*Socket errors: \(.*\)/\1/p; s/.*Non-2xx or 3xx responses: \([0-9]*\)/non2xx \1/p' | tr '\n' ' ')
      # wrk prints us/ms/s units: convert to ms
      ms() { printf '%s\n' "$1" | awk '/us$/ {sub("us",""); printf "%.3f", $1/1000; next}
                                        /ms$/ {sub("ms",""); printf "%.2f", $1; next}
                                        /s$/  {sub("s","");  printf "%.0f", $1*1000; next}
                                        {print "?"}'; }
      printf '%-8s %6s %12s %10s %10s %10s\n' $w $c "${rps:-?}" "$(ms "$p50")" "$(ms "$p99")" "${err:-0}"
    done
    kill $pid 2>/dev/null
    wait $pid 2>/dev/null
    rm -f "$log"
  done
fi

echo
echo "estone port i/o in Lua: 5 processes x $ROUNDS round trips, 200 B / 5 B, each through its own cat"
for w in 1 2; do
  printf 'workers %s: %s\n' $w "$("$LPVM" --workers $w "$HERE/bench_ports.lua" $ROUNDS 2>&1 | tail -1)"
done
