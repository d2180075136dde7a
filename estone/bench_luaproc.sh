#!/bin/sh
# bench_luaproc.sh [LPVM] -- the luaproc paper's benchmarks (section 4) through the
# luaproc compatibility layer, in lpvm and in the stock lua5.4 with luaproc.so, next
# to the same tests written with lpvm's native API (estone/bench_luaproc.lua has
# the cases). Each case runs in a fresh VM. Figures: docs/luaproc.md.
#   LPVM_BENCH_QUICK=1 sh estone/bench_luaproc.sh build/lpvm   -- smaller sizes
LPVM=${1:-build/lpvm}
HERE=$(cd "$(dirname "$0")" && pwd)
B="$HERE/bench_luaproc.lua"
SO_DIR=$(cd "$(dirname "$LPVM")" && pwd)
[ -x "$LPVM" ] || { echo "bench_luaproc.sh: no $LPVM (build first)"; exit 1; }
LUA=$(command -v lua5.4)
[ -f "$SO_DIR/luaproc.so" ] || LUA=

if [ -n "$LPVM_BENCH_QUICK" ]; then
  CREATE="1000 10000"; RECYCLE_K=10000; REPS=5
else
  CREATE="1000 10000 100000"; RECYCLE_K=100000; REPS=20
fi

field() { printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

# run WHERE CASE ARGS...: one case in lpvm or in the stock lua; its result line
run() {
  where=$1; shift
  if [ "$where" = lua ]; then
    [ -n "$LUA" ] || { echo "skipped (no lua5.4 or luaproc.so)"; return; }
    LUA_CPATH="$SO_DIR/?.so;;" "$LUA" "$B" "$@" 2>&1 >/dev/null | tail -1
  else
    "$LPVM" "$B" "$@" 2>&1 >/dev/null | tail -1
  fi
}

echo "luaproc benchmarks ($(nproc) CPUs, $("$LPVM" --version); lua5.4 = stock interpreter + luaproc.so)"
echo
echo "creation (paper 4.1): N processes, each with its own channel, each waits for one message"
printf '%-26s %8s %10s %10s %12s\n' api N create_ms total_ms ns/process
for n in $CREATE; do
  for c in "lpvm:create:luaproc on lpvm" "lua:create:luaproc on lua5.4" "lpvm:create_native:lpvm native"; do
    where=${c%%:*}; rest=${c#*:}; cas=${rest%%:*}; label=${rest#*:}
    l=$(run "$where" "$cas" "$n")
    case $l in create*) ;; *) printf '%-26s %8s  %s\n' "$label" "$n" "$l"; continue ;; esac
    printf '%-26s %8s %10s %10s %12s\n' "$label" "$n" "$(field create_ms "$l")" \
      "$(field total_ms "$l")" "$(field ns_per_proc "$l")"
  done
done

echo
echo "communication (paper 4.3): 1,000 messages of SIZE bytes to one receiver"
printf '%-26s %8s %12s %10s\n' api bytes ms/1000msgs ns/msg
for size in 10 100 1000 10000 100000; do
  reps=$REPS; [ "$size" -ge 10000 ] && reps=$(( REPS / 4 > 0 ? REPS / 4 : 1 ))
  for c in "lpvm:msg:luaproc on lpvm" "lua:msg:luaproc on lua5.4" \
           "lpvm:msg_native_sync:lpvm native, ack each" "lpvm:msg_native:lpvm native, async"; do
    where=${c%%:*}; rest=${c#*:}; cas=${rest%%:*}; label=${rest#*:}
    l=$(run "$where" "$cas" "$size" "$reps")
    case $l in msg*) ;; *) printf '%-26s %8s  %s\n' "$label" "$size" "$l"; continue ;; esac
    printf '%-26s %8s %12s %10s\n' "$label" "$size" "$(field ms_per_1000 "$l")" "$(field ns_per_msg "$l")"
  done
done

echo
echo "recycling (paper 4.4): $RECYCLE_K processes, each prints a line (to /dev/null)"
printf '%-26s %8s %10s %12s\n' api recycle total_ms ns/process
for max in 0 10 100 1000; do
  for c in "lpvm:recycle:luaproc on lpvm" "lua:recycle:luaproc on lua5.4" "lpvm:recycle_native:lpvm native"; do
    where=${c%%:*}; rest=${c#*:}; cas=${rest%%:*}; label=${rest#*:}
    l=$(run "$where" "$cas" "$RECYCLE_K" "$max")
    case $l in recycle*) ;; *) printf '%-26s %8s  %s\n' "$label" "$max" "$l"; continue ;; esac
    printf '%-26s %8s %10s %12s\n' "$label" "$max" "$(field total_ms "$l")" "$(field ns_per_proc "$l")"
  done
done
