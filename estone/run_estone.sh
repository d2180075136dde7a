#!/bin/sh
# run_estone.sh [LPVM] -- `make estone`: the EStone suite and the seeds' benchmarks in
# every configuration; writes estone/results/ (JSON, SVG charts, a Markdown summary).
#
#   configurations: workers  = default (one worker thread per CPU)
#                   threads  = --threads (a private OS thread per process)
#                   workers1 = --workers 1
#                   workers2 = --workers 2 (the parallelism case only)
#
#   ESTONE_REPEAT=N   runs of each micro, the fastest scored (default 3)
#   ESTONE_QUICK=1    everything small (--quick suite, small seeds): a smoke test
#   ESTONE_OUT=DIR    where to write (default estone/results)
#
# Big runs (1M processes, the largest ring) are bounded: they stop spawning when the
# VM's RSS would leave less than 4 GB of the machine's available memory, or after
# 300 s, and say so.
set -u
LPVM=${1:-build/lpvm}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${ESTONE_OUT:-$HERE/results}
REPEAT=${ESTONE_REPEAT:-3}
[ -x "$LPVM" ] || { echo "run_estone.sh: no $LPVM (build first)"; exit 1; }
mkdir -p "$OUT"
SEEDS="$OUT/seeds.jsonl"
: > "$SEEDS"
status=0
T0=$(date +%s)

avail_kb() { sed -n 's/^MemAvailable:[[:space:]]*\([0-9]*\).*/\1/p' /proc/meminfo; }
# a bound on the VM's RSS: what is available now less 4 GB (at least 1 GB)
max_kb() { a=$(avail_kb); b=$((a - 4 * 1024 * 1024)); [ $b -lt 1048576 ] && b=1048576; echo $b; }

vmopts() {  # CONFIG -> lpvm options
  case $1 in threads) echo "--threads" ;; workers1) echo "--workers 1" ;;
    workers2) echo "--workers 2" ;; *) echo "" ;; esac
}

seed() {  # CONFIG CASE ARGS...: one seeds.lua run; its JSON line goes to seeds.jsonl
  cfg=$1; shift
  out=$("$LPVM" $(vmopts "$cfg") "$HERE/seeds.lua" "$@" --config "$cfg" 2>&1)
  rc=$?
  printf '%s\n' "$out" | grep -v '^JSON ' | sed "s/^/  [$cfg] /"
  line=$(printf '%s\n' "$out" | sed -n 's/^JSON //p' | tail -1)
  if [ $rc -ne 0 ] || [ -z "$line" ]; then
    echo "  [$cfg] seeds.lua $* FAILED (status $rc)"
    printf '{"case": "%s", "config": "%s", "failed": true, "args": "%s"}\n' "$1" "$cfg" "$*" >> "$SEEDS"
    status=1
  else
    printf '%s\n' "$line" >> "$SEEDS"
  fi
}

echo "lpvm EStone run: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $("$LPVM" --version)"
echo "load before: $(cat /proc/loadavg)"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)

if [ -n "${ESTONE_QUICK:-}" ]; then
  QUICK=--quick; REPEAT=1
  PROCS="10000"; RINGS="10000"; REC_K=10000; PAR_ITER=300000; MSG_N=100; FIG3_REP="1 20"
else
  QUICK=; PROCS="10000 100000 1000000"; RINGS="10000 100000 1000000"
  REC_K=100000; PAR_ITER=6000000; MSG_N=1000; FIG3_REP="3 1"
fi

echo
echo "== EStone suite (repeat $REPEAT, fastest run scored)"
for cfg in workers threads workers1; do
  echo "-- $cfg: lpvm $(vmopts $cfg) estone/estone.lua"
  "$LPVM" $(vmopts $cfg) "$HERE/estone.lua" $QUICK --repeat "$REPEAT" --config "$cfg" \
    --json "$OUT/estone_$cfg.json" 2>/dev/null | sed -n '/ESTONES =/p;/not run/p;/FAILED/p;/failed/p'
  [ -s "$OUT/estone_$cfg.json" ] || { echo "   estone ($cfg) FAILED"; status=1; }
done

echo
echo "== thesis figure 3: small / medium / large messages, gs timeout, timeout"
for cfg in workers threads workers1; do seed $cfg fig3 $FIG3_REP; done

echo
echo "== thesis figure 4: parallelism, 1..6 compute-bound processes"
for cfg in workers2 workers1 threads; do seed $cfg parallel 6 $PAR_ITER; done

echo
echo "== luaproc figure 3: message sizes ($MSG_N messages each)"
for cfg in workers threads; do seed $cfg msgsize $MSG_N 5; done

echo
echo "== luaproc figure 4: recycling ($REC_K short processes)"
for lim in 0 10 100 1000; do seed workers recycle $REC_K $lim; done

echo
echo "== luaproc figures 1-2: N idle processes (creation time, bytes per process)"
for n in $PROCS; do seed workers procs $n "$(max_kb)" 300; done

echo
echo "== Armstrong's ring"
for n in $RINGS; do
  laps=$((10000000 / n)); [ $laps -gt 100 ] && laps=100; [ $laps -lt 3 ] && laps=3
  seed workers ring $n $laps "$(max_kb)" 300
done
if [ -z "${ESTONE_QUICK:-}" ]; then
  # The largest ring: 2.5M processes if the memory is there, else the largest multiple
  # of 100,000 that fits in what is available less 4 GB (per-process bytes from 1M).
  bpp=$(sed -n 's/.*"case": "ring".*"made": 1000000,.*"rss_bytes_per_process": \([0-9.]*\).*/\1/p' "$SEEDS" | tail -1)
  [ -n "$bpp" ] || bpp=9000
  fit=$(awk -v a="$(avail_kb)" -v b="$bpp" 'BEGIN { n = (a - 4*1024*1024) * 1024 / (b * 1.1);
        n = int(n / 100000) * 100000; if (n > 2500000) n = 2500000; print n }')
  echo "  largest ring: $(avail_kb) kB available, ~$bpp B a process -> trying $fit (2.5M wanted)"
  if [ "$fit" -gt 1000000 ]; then
    seed workers ring "$fit" 1 "$(max_kb)" 300
  else
    echo "  not enough memory for a ring above 1M processes: skipped"
    printf '{"case": "ring_largest_skipped", "config": "workers", "avail_kb": %s, "bytes_per_process": %s}\n' \
      "$(avail_kb)" "$bpp" >> "$SEEDS"
  fi
fi

LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
T1=$(date +%s)
cat > "$OUT/meta.json" <<EOF
{"date": "$(date -u '+%Y-%m-%dT%H:%M:%SZ')", "lpvm": "$("$LPVM" --version)", "cpus": $(nproc),
 "kernel": "$(uname -sr)", "mem_total_kb": $(sed -n 's/^MemTotal:[[:space:]]*\([0-9]*\).*/\1/p' /proc/meminfo),
 "load_before": "$LOAD_BEFORE", "load_after": "$LOAD_AFTER", "seconds": $((T1 - T0)),
 "repeat": $REPEAT, "quick": $([ -n "${ESTONE_QUICK:-}" ] && echo true || echo false)}
EOF

echo
echo "== charts"
"$LPVM" "$HERE/chart.lua" "$OUT" || status=1
echo "load after: $(cat /proc/loadavg); $((T1 - T0)) s in all"
exit $status
