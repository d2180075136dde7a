#!/bin/sh
# cli_test.sh LPVM -- the `lpvm` binary: options, exit statuses, errors, signals,
# the shell over a pipe, the examples. Prints one line per check and
# "N passed, M failed" last; exits 1 on any failure.
LPVM=${1:?usage: cli_test.sh path/to/lpvm}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -n "$2" ] && printf '     %s\n' "$2"; }

# check NAME EXPECTED_STATUS CMD...: run, capture stdout/stderr, compare the status.
check() {
  name=$1 want=$2
  shift 2
  "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
  got=$?
  if [ "$got" = "$want" ]; then ok "$name"; return 0; fi
  bad "$name" "status $got, expected $want; stderr: $(head -c 300 "$TMP/err")"
  return 1
}

out_has() {  # NAME TEXT: stdout of the last check contains TEXT
  if grep -qF -- "$2" "$TMP/out"; then ok "$1"; else bad "$1" "stdout: $(head -c 300 "$TMP/out")"; fi
}
err_lines() {  # NAME N: stderr of the last check has exactly N lines
  n=$(wc -l <"$TMP/err")
  if [ "$n" -eq "$2" ]; then ok "$1"; else bad "$1" "stderr has $n lines: $(head -c 300 "$TMP/err")"; fi
}
err_has() {
  if grep -qF -- "$2" "$TMP/err"; then ok "$1"; else bad "$1" "stderr: $(head -c 300 "$TMP/err")"; fi
}

# ---- options -------------------------------------------------------------------
check "--version exits 0" 0 "$LPVM" --version
out_has "--version prints the version" "lpvm 0."
check "--help exits 0" 0 "$LPVM" --help
out_has "--help lists --workers" "--workers"
check "unknown option: status 1" 1 "$LPVM" --frobnicate
err_lines "unknown option: one line" 1
check "--workers without a number: status 1" 1 "$LPVM" --workers
check "--workers 0: status 1" 1 "$LPVM" --workers 0 -e "x=1"
check "--reductions abc: status 1" 1 "$LPVM" --reductions abc -e "x=1"
check "--max-heap bad: status 1" 1 "$LPVM" --max-heap 12q -e "x=1"
check "-e without code: status 1" 1 "$LPVM" -e

# ---- running code --------------------------------------------------------------
check "-e runs code" 0 "$LPVM" -e 'print(1 + 1)'
out_has "-e prints" "2"
check "-e with an error: status 1" 1 "$LPVM" -e 'error("boom")'
err_has "-e error is reported" "boom"
check "-e syntax error: status 1" 1 "$LPVM" -e 'x = = 1'
err_lines "-e syntax error: one line" 1
check "halt(7) gives status 7" 7 "$LPVM" -e 'lpvm.halt(7)'
check "halt() gives status 0" 0 "$LPVM" -e 'lpvm.spawn(function() lpvm.receive() end) lpvm.halt()'
check "halt(0) with live processes: status 0" 0 "$LPVM" -e 'lpvm.spawn(function() lpvm.receive() end) lpvm.halt(0)'
check "halt(3) from another process" 3 "$LPVM" -e 'lpvm.spawn(function() lpvm.sleep(10) lpvm.halt(3) end) lpvm.receive()'

printf 'print("from file", ...)\nprint(arg[0], arg[1], arg[2], #arg)\n' >"$TMP/args.lua"
check "script with arguments" 0 "$LPVM" "$TMP/args.lua" one two
out_has "script gets ... = its arguments" "from file	one	two"
out_has "arg[0] is the script, arg[1..] the arguments" "$TMP/args.lua	one	two	2"
check "options before the script" 0 "$LPVM" --workers 1 --reductions 500 --no-worker-cache "$TMP/args.lua" --not-an-option
out_has "arguments after the script are not options" "--not-an-option"

printf 'x = = 1\n' >"$TMP/syntax.lua"
check "syntax error in a file: status 1" 1 "$LPVM" "$TMP/syntax.lua"
err_lines "syntax error in a file: one line" 1
err_has "syntax error names the file" "syntax.lua"
check "missing file: status 1" 1 "$LPVM" "$TMP/does-not-exist.lua"
err_lines "missing file: one line" 1
err_has "missing file is named" "does-not-exist.lua"

check "boot process crashes: status 1" 1 "$LPVM" -e 'lpvm.spawn(function() lpvm.sleep(20) end) error("boot dies")'
check "boot ends normally, others go on, then status 0" 0 "$LPVM" -e '
  lpvm.spawn(function() lpvm.sleep(50) print("late child") end)'
out_has "the VM waits for every process" "late child"
check "boot ok, another process crashes: status 0" 0 "$LPVM" -e 'lpvm.spawn(function() error("child dies") end) lpvm.sleep(20)'
err_has "an unlinked crash is logged to stderr" "child dies"
check "exit(reason) in the boot process: status 1" 1 "$LPVM" -e 'lpvm.exit("shutdown")'
check "exit('normal') in the boot process: status 0" 0 "$LPVM" -e 'lpvm.exit("normal")'

# ---- the boot script's folder, whole error reasons -------------------------------
mkdir -p "$TMP/app"
printf 'return function(parent) lpvm.send(parent, "sibling ran") end\n' >"$TMP/app/sib.lua"
printf 'x = = 1\n' >"$TMP/app/badmod.lua"
printf 'local x = 1\n' >"$TMP/app/nothing.lua"
printf 'lpvm.spawn("sib", lpvm.self()) print(lpvm.receive(5000))\nprint(require("sib") ~= nil)\n' >"$TMP/app/main.lua"
check "spawn by name finds the script's sibling from another folder" 0 "$LPVM" "$TMP/app/main.lua"
out_has "the sibling module ran in a spawned process" "sibling ran"
printf 'lpvm.spawn("badmod") lpvm.sleep(100)\n' >"$TMP/app/spawnbad.lua"
check "spawn of a module with a syntax error" 0 "$LPVM" "$TMP/app/spawnbad.lua"
err_has "the error log keeps the location and message" "badmod.lua:1: unexpected symbol near '='"
printf 'lpvm.spawn("no_such_mod") lpvm.sleep(100)\n' >"$TMP/app/spawnmissing.lua"
check "spawn of a module that does not exist" 0 "$LPVM" "$TMP/app/spawnmissing.lua"
err_has "module not found lists the places searched" "no file '$TMP/app/no_such_mod.lua'"
printf 'lpvm.spawn("nothing") lpvm.sleep(100)\n' >"$TMP/app/spawnnothing.lua"
check "spawn of a module that returns nothing" 0 "$LPVM" "$TMP/app/spawnnothing.lua"
err_has "the module is named" "module 'nothing' returned boolean"

printf 'print("stdin script")\n' >"$TMP/stdin.lua"
if "$LPVM" - <"$TMP/stdin.lua" >"$TMP/out" 2>"$TMP/err"; then ok "script from stdin (-)"; else bad "script from stdin (-)" "$(cat "$TMP/err")"; fi
out_has "stdin script ran" "stdin script"

check "--threads mode" 0 "$LPVM" --threads -e '
  local me = lpvm.self()
  for i = 1, 20 do lpvm.spawn(function(p, k) lpvm.send(p, k) end, me, i) end
  local s = 0
  for i = 1, 20 do s = s + lpvm.receive() end
  assert(s == 210)
  assert(lpvm.info(lpvm.self()).mode == "thread")'
check "--max-heap kills a greedy boot process: status 1" 1 "$LPVM" --max-heap 1m -e '
  local t = {} for i = 1, 1e8 do t[i] = ("x"):rep(50) .. i end'
check "--max-heap leaves a small process alone" 0 "$LPVM" --max-heap 4M -e 'local t = {1, 2, 3}'
check "--recycle" 0 "$LPVM" --recycle 100 -e '
  for i = 1, 50 do local _, r = lpvm.spawn_monitor(function() end) lpvm.receive() end'

# ---- signals -------------------------------------------------------------------
sig_check() {  # NAME SIGNAL CODE: status must be 128 + the signal's number
  # the code prints "ready" once running: the handler is installed by then
  "$LPVM" -e "print('ready') io.stdout:flush() $3" >"$TMP/out" 2>"$TMP/err" </dev/null &
  pid=$!
  i=0
  while ! grep -q ready "$TMP/out" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
  sleep 0.1
  kill -"$2" "$pid" 2>/dev/null
  i=0
  while kill -0 "$pid" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid"
    bad "$1" "still running 30 s after SIG$2"
    return
  fi
  wait "$pid"
  st=$?
  case $2 in INT) want=130 ;; TERM) want=143 ;; esac
  if [ "$st" -eq "$want" ]; then ok "$1 (status $st)"
  else bad "$1" "status $st, expected $want; stderr: $(head -c 300 "$TMP/err")"; fi
}
sig_check "SIGTERM stops a VM of sleeping processes" TERM '
  for i = 1, 100 do lpvm.spawn(function() lpvm.receive() end) end
  while true do lpvm.sleep(1000) end'
sig_check "SIGINT stops a VM of endless loops" INT '
  for i = 1, 4 do lpvm.spawn(function() while true do end end) end
  while true do end'
sig_check "SIGTERM stops a VM with thread-mode processes" TERM '
  for i = 1, 4 do lpvm.spawn({thread = true}, function() lpvm.receive() end) end
  lpvm.receive()'

# ---- the shell -----------------------------------------------------------------
shell() {  # INPUT: run the shell with INPUT on a pipe
  printf "$1" | "$LPVM" >"$TMP/out" 2>"$TMP/err"
}
if shell '1+1\nlpvm.self()\n'; then ok "shell over a pipe exits 0 at EOF"; else bad "shell over a pipe exits 0 at EOF" "$(cat "$TMP/err")"; fi
out_has "shell evaluates expressions" "2"
if [ "$(wc -l <"$TMP/out")" -eq 2 ]; then ok "shell prints one line per result"; else bad "shell prints one line per result" "$(cat "$TMP/out")"; fi
shell 'x = 40\nx + 2\nfor i = 1, 2 do\nprint("loop", i)\nend\n"multi", 3\n'
out_has "shell keeps globals" "42"
out_has "shell reads multi-line chunks" "loop	2"
out_has "shell prints several results" '"multi"	3'
shell 'error("shell boom")\n1 + 2\n'
err_has "shell reports errors" "shell boom"
out_has "shell survives errors" "3"
shell 'p = lpvm.spawn(function() lpvm.receive() end)\n#lpvm.processes() >= 2\nlpvm.info(p).status\n'
out_has "shell: processes() works" "true"
out_has "shell: info(pid) works" '"waiting"'
shell 'lpvm.send(lpvm.self(), "hi")\nlpvm.receive(100)\n'
out_has "shell: its own mailbox receives user messages" '"hi"'
shell 'lpvm.spawn(function() while true do lpvm.sleep(1000) end end)\n'
if [ $? -eq 0 ]; then ok "shell: EOF ends the VM even with live processes"; else bad "shell: EOF ends the VM even with live processes"; fi
shell 'lpvm.halt(5)\n'
if [ $? -eq 5 ]; then ok "shell: halt(5) gives status 5"; else bad "shell: halt(5) gives status 5"; fi
shell 'x = = 1\n"after"\n'
out_has "shell: a syntax error does not end the shell" '"after"'

# ---- examples ------------------------------------------------------------------
check "examples/boot.lua runs" 0 "$LPVM" "$ROOT/examples/boot.lua"
check "examples/ring.lua runs" 0 "$LPVM" "$ROOT/examples/ring.lua" 100 3
out_has "ring prints microseconds per hop" "hop"
check "examples/pingpong.lua runs" 0 "$LPVM" "$ROOT/examples/pingpong.lua" 1000
check "examples/supervisor.lua runs" 0 "$LPVM" "$ROOT/examples/supervisor.lua"
out_has "the supervisor restarts its worker" "restart"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
