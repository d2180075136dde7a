#!/bin/sh
# bench_lua.sh [LPVM] -- Lua-process benchmarks: ring, spawn rate, bytes per idle
# process, message sizes; in worker mode and in --threads mode (smaller sizes: one OS
# thread per process). Each case runs in a fresh VM (peak RSS is per case).
#   LPVM_BENCH_QUICK=1 sh estone/bench_lua.sh    -- smaller sizes, for a quick look
LPVM=${1:-build/lpvm}
HERE=$(cd "$(dirname "$0")" && pwd)
B="$HERE/bench_lua.lua"
[ -x "$LPVM" ] || { echo "bench_lua.sh: no $LPVM (build first)"; exit 1; }

if [ -n "$LPVM_BENCH_QUICK" ]; then
  RING_W="1000 10000 100000"; RING_T="100 1000"
  SPAWN_W=20000; SPAWN_T=1000; IDLE_W=10000; IDLE_T=500; ROUNDS=2000
else
  RING_W="1000 10000 100000 1000000"; RING_T="100 1000 5000"
  SPAWN_W=200000; SPAWN_T=5000; IDLE_W=100000; IDLE_T=2000; ROUNDS=20000
fi

# field NAME LINE: the value of NAME=... in LINE
field() { printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

run() {  # MODE ARGS...: run one case, print its result line (or an error line)
  mode=$1; shift
  if [ "$mode" = thread ]; then out=$("$LPVM" --threads "$B" "$@" 2>&1 | tail -1)
  else out=$("$LPVM" "$B" "$@" 2>&1 | tail -1); fi
  printf '%s\n' "$out"
}

echo "lpvm Lua-process benchmarks ($(nproc) CPUs, $("$LPVM" --version))"
echo
echo "ring (Armstrong): N processes, a token round M laps"
printf '%-7s %9s %6s %11s %13s %10s %11s\n' mode N laps create_ms ns/spawn ns/hop peak_RSS_MB
for mode in worker thread; do
  if [ $mode = worker ]; then sizes=$RING_W; else sizes=$RING_T; fi
  for n in $sizes; do
    laps=$((1000000 / n)); [ $laps -lt 1 ] && laps=1; [ $laps -gt 100 ] && laps=100
    [ $mode = thread ] && laps=$(( (100000 / n) > 0 ? 100000 / n : 1 ))
    l=$(run $mode ring $n $laps)
    case $l in ring*) ;; *) printf '%-7s %9s  error: %s\n' $mode $n "$l"; continue ;; esac
    printf '%-7s %9s %6s %11s %13s %10s %11s\n' $mode $n $laps "$(field create_ms "$l")" \
      "$(field ns_per_spawn "$l")" "$(field ns_per_hop "$l")" $(( $(field rss_kb "$l") / 1024 ))
  done
done

echo
echo "spawn rate: K processes that end at once (batches of 1000)"
printf '%-7s %9s %8s %12s %12s\n' mode K recycle ns/spawn spawns/s
for mode in worker thread; do
  if [ $mode = worker ]; then k=$SPAWN_W; else k=$SPAWN_T; fi
  for rec in 0 1000; do
    l=$(run $mode spawn $k $rec)
    case $l in spawn*) ;; *) printf '%-7s %9s  error: %s\n' $mode $k "$l"; continue ;; esac
    printf '%-7s %9s %8s %12s %12s\n' $mode $k $rec "$(field ns_per_spawn "$l")" "$(field spawns_per_s "$l")"
  done
done

echo
echo "idle processes: K processes blocked in receive"
printf '%-7s %9s %16s %16s\n' mode K RSS_B/proc LuaHeap_B/proc
for mode in worker thread; do
  if [ $mode = worker ]; then k=$IDLE_W; else k=$IDLE_T; fi
  l=$(run $mode idle $k)
  case $l in idle*) ;; *) printf '%-7s %9s  error: %s\n' $mode $k "$l"; continue ;; esac
  printf '%-7s %9s %16s %16s\n' $mode $k "$(field rss_bytes_per_proc "$l")" "$(field heap_bytes_per_proc "$l")"
done

echo
echo "message size: ping-pong of a string between two processes"
printf '%-7s %9s %8s %10s %9s\n' mode bytes rounds ns/msg MB/s
for mode in worker thread; do
  for size in 10 100 1000 10000 100000; do
    r=$ROUNDS; [ $size -ge 10000 ] && r=$((ROUNDS / 4))
    l=$(run $mode msg $size $r)
    case $l in msg*) ;; *) printf '%-7s %9s  error: %s\n' $mode $size "$l"; continue ;; esac
    printf '%-7s %9s %8s %10s %9s\n' $mode $size $r "$(field ns_per_msg "$l")" "$(field mb_per_s "$l")"
  done
done
