#!/bin/sh
# cg_msg.sh [LPVM] -- instructions per operation of the message path's benchmarks,
# load-independent: callgrind counts two run lengths of each (1 worker) and divides
# the difference by the operations between them, which cancels start-up:
#   msg10    estone/compare/lpvm/msgsize.lua 10 N: a burst of 10-byte strings to
#            another process; 20,000 vs 60,000, per message
#   generic  EStone's generic micro (estone/micros/generic.lua through cg_micro.lua):
#            a call to a server, selective receive of the reply under a timeout;
#            200 vs 600 loops of 22 calls, per call
#   timer    EStone's timer micro: a send to oneself and a receive(ms); 100 vs 300
#            loops of 100, per send + receive
# With CG_TOP=N (default 12) it also prints the N functions with the most self
# instructions per operation (the long run less the short one).
#   sh estone/cg_msg.sh build/lpvm
#   CG_ONLY="generic timer" CG_TOP=25 sh estone/cg_msg.sh build/lpvm
# Needs valgrind.
LPVM=${1:-build/lpvm}
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=${CG_TOP:-12}
command -v valgrind >/dev/null || { echo "cg_msg.sh: valgrind not installed"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# run NAME N ARGS...: one callgrind run into $tmp/cg.NAME.N, its status in rc.NAME.N
run() {
  name=$1; n=$2; shift 2
  valgrind --tool=callgrind --compress-strings=no --compress-pos=no \
    --callgrind-out-file="$tmp/cg.$name.$n" "$LPVM" --workers 1 "$@" \
    >/dev/null 2>"$tmp/err.$name.$n"
  echo $? >"$tmp/rc.$name.$n"
}
# bench NAME N1 N2 OPS_PER_N: the two runs at once (each is one thread under
# valgrind), then the per-operation difference, in all and by function (self cost)
bench() {
  name=$1; n1=$2; n2=$3; per=$4
  case $name in
    msg10) a1="$HERE/compare/lpvm/msgsize.lua 10 $n1"; a2="$HERE/compare/lpvm/msgsize.lua 10 $n2" ;;
    *) a1="$HERE/cg_micro.lua $name $n1"; a2="$HERE/cg_micro.lua $name $n2" ;;
  esac
  # shellcheck disable=SC2086
  run "$name" "$n1" $a1 & run "$name" "$n2" $a2 & wait
  for n in "$n1" "$n2"; do
    [ "$(cat "$tmp/rc.$name.$n")" = 0 ] ||
      { echo "cg_msg.sh: $name $n failed:"; cat "$tmp/err.$name.$n"; exit 1; }
  done
  ops=$(( (n2 - n1) * per ))
  # callgrind.out without compression: "fn=NAME" starts a function's self costs
  # ("LINE IR" lines); "calls=..." is followed by one line of a callee's inclusive
  # cost, which is not the caller's own.
  awk -v ops="$ops" -v top="$TOP" -v name="$name" -v n1="$n1" -v n2="$n2" '
    FNR == 1 { sign = (FILENAME ~ ("cg\\." name "\\." n1 "$")) ? -1 : 1; skip = 0 }
    /^summary:/ { T += sign * $2; next }
    /^fn=/ { fn = substr($0, 4); sub(/\047[0-9]+$/, "", fn); next }
    /^calls=/ { skip = 1; next }
    /^[0-9+-]/ { if (skip) { skip = 0; next } F[fn] += sign * $2; next }
    END {
      printf "%-8s %d vs %d: %.0f instructions per operation\n", name, n1, n2, T / ops
      m = 0; for (k in F) { m++; keys[m] = k; c[m] = F[k] }
      for (i = 1; i <= m && i <= top; i++) {
        b = i; for (j = i + 1; j <= m; j++) if (c[j] > c[b]) b = j
        t = keys[i]; keys[i] = keys[b]; keys[b] = t; t = c[i]; c[i] = c[b]; c[b] = t
        printf "  %8.1f  %s\n", c[i] / ops, substr(keys[i], 1, 60)
      }
    }' "$tmp/cg.$name.$n1" "$tmp/cg.$name.$n2"
}
for b in ${CG_ONLY:-msg10 generic timer}; do
  case $b in
    msg10) bench msg10 20000 60000 1 ;;
    generic) bench generic 200 600 22 ;;
    timer) bench timer 100 300 100 ;;
    *) echo "cg_msg.sh: unknown benchmark '$b' (msg10, generic, timer)"; exit 1 ;;
  esac
done
