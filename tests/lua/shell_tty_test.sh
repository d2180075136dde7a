#!/bin/sh
# shell_tty_test.sh LPVM -- the shell on a real terminal (a tmux pseudo-terminal):
# line editing, Tab completion, history in ~/.lpvm_history, Ctrl-C interrupting an
# evaluation (the shell and the VM go on), Ctrl-C twice or q() quitting, help().
# Every wait is bounded. Exits 77 (skipped) when tmux is missing.
LPVM=${1:?usage: shell_tty_test.sh path/to/lpvm}
command -v tmux >/dev/null 2>&1 || { echo "tmux not installed: skipped"; exit 77; }
TMP=$(mktemp -d)
# one tmux server (socket) per shell started, so none waits for another to go
n_start=0
T="tmux -L lpvm_tty_test_$$_0"
trap '$T kill-server 2>/dev/null; rm -rf "$TMP"' EXIT
trap 'exit 1' INT TERM   # a stopped run (ctest interrupted) still ends its tmux server
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -n "$2" ] && printf '     %s\n' "$2"; }
# sanitizer builds are many times slower
LIMIT=100
case "${LPVM_STRESS_SCALE:-1}" in 1) ;; *) LIMIT=600 ;; esac

start() {  # start the shell in a fresh tmux server
  $T kill-server 2>/dev/null
  n_start=$((n_start + 1))
  seen=0
  T="tmux -L lpvm_tty_test_$$_$n_start"
  $T new-session -d -s t -x 150 -y 50 \
    "HOME='$TMP' '$LPVM' 2>&1; echo EXITED=\$?; sleep 60"
}
screen() { $T capture-pane -t t -p -S -5000 2>/dev/null; }
# wait_for NAME TEXT: until the screen shows TEXT (bounded)
wait_for() {
  i=0
  while ! screen | grep -qF -- "$2"; do
    i=$((i + 1))
    if [ $i -gt $LIMIT ]; then bad "$1" "screen: $(screen | grep -v '^$' | tail -8)"; return 1; fi
    sleep 0.1
  done
  ok "$1"
}
# wait_prompt NAME: until the last line on the screen is a fresh, empty prompt
wait_prompt() {
  i=0
  while [ "$(screen | grep -v '^$' | tail -1)" != ">" ]; do
    i=$((i + 1))
    if [ $i -gt $LIMIT ]; then bad "$1" "screen: $(screen | grep -v '^$' | tail -4)"; return 1; fi
    sleep 0.1
  done
  ok "$1"
}
# type KEYS... at the next fresh prompt: libedit drops what was typed before the
# prompt appeared, so wait for a prompt newer than the one the last type_ used
prompts() { screen | grep -c '^>'; }
seen=0
type_() {
  i=0
  while { [ "$(screen | grep -v '^$' | tail -1)" != ">" ] || [ "$(prompts)" -le "$seen" ]; } &&
        [ $i -lt $LIMIT ]; do
    i=$((i + 1)); sleep 0.1
  done
  seen=$(prompts)
  keys "$@"
}
count() { screen | grep -cF -- "$1"; }
keys() { $T send-keys -t t "$@" 2>/dev/null; }

start
wait_for "the banner" "shell. help() lists the commands"
type_ 'x = 40' Enter
type_ 'x + 2' Enter
wait_for "an expression prints its value" "42"
type_ 'lpvm.spawn_mo' Tab
wait_for "Tab completes a field of lpvm" "> lpvm.spawn_monitor"
keys C-u 'xy' Tab
keys C-u 'zebra_long_name = 1' Enter
type_ 'zebra_l' Tab
wait_for "Tab completes a global defined in the shell" "> zebra_long_name"
keys C-u 'p = lpvm.spawn(function() lpvm.receive() end)' Enter
# Ctrl-C goes once the code runs: each line prints a word first (joined at run time,
# so the echo of the typed line does not show it); a fixed sleep let a loaded machine
# send Ctrl-C before the shell had read the line
type_ 'print("loop" .. "ing") while true do end' Enter
wait_for "the loop runs" "looping"
sleep 0.2
keys C-c
wait_for "Ctrl-C interrupts a running loop" "interrupted!"
type_ 'x + 1' Enter
wait_for "the shell goes on after the interrupt" "41"
type_ 'print("recei" .. "ving") lpvm.receive()' Enter
wait_for "the receive runs" "receiving"
sleep 0.2
keys C-c
wait_for "Ctrl-C interrupts a blocked receive" "in function 'lpvm.receive'"
type_ 'print("slee" .. "ping") lpvm.sleep(math.huge)' Enter
wait_for "the sleep runs" "sleeping"
sleep 0.2
keys C-c
wait_for "Ctrl-C interrupts a sleep" "in function 'lpvm.sleep'"
type_ '"alive: " .. tostring(lpvm.is_alive(p))' Enter
wait_for "processes spawned before survive the interrupts" '"alive: true"'
type_ Up Enter
i=0
while [ "$(count '"alive: true"')" -lt 2 ] && [ $i -lt $LIMIT ]; do i=$((i + 1)); sleep 0.1; done
if [ "$(count '"alive: true"')" -ge 2 ]; then ok "Up recalls the history"
else bad "Up recalls the history" "$(screen | grep -v '^$' | tail -8)"; fi
type_ 'help()' Enter
wait_for "help() lists the lpvm calls" "lpvm.spawn_monitor"
type_ 'abc'
wait_for "typed text is echoed" "> abc"
keys C-c
type_ C-c
wait_for "Ctrl-C at an empty prompt says how to quit" "Ctrl-C again at an empty prompt"
type_ C-c
wait_for "a second Ctrl-C at an empty prompt quits with status 0" "EXITED=0"
if grep -q 'x\\040+\\0402' "$TMP/.lpvm_history" 2>/dev/null; then ok "history is saved in ~/.lpvm_history"
else bad "history is saved in ~/.lpvm_history" "$(cat "$TMP/.lpvm_history" 2>&1)"; fi

start
wait_for "the shell starts again" "shell. help() lists the commands"
type_ Up
wait_for "history comes back from ~/.lpvm_history" "> help()"
keys C-u 'q()' Enter
wait_for "q() quits with status 0" "EXITED=0"

start
wait_for "a third shell" "shell. help() lists the commands"
type_ 'for i = 1, 2 do' Enter
wait_for "an incomplete chunk asks for more" ">>"
keys C-c
wait_prompt "Ctrl-C in a chunk gives a fresh prompt"
type_ '7 * 6' Enter
wait_for "Ctrl-C drops an incomplete chunk" "42"
# the shell's process killed while it waits at the prompt: a new one prompts, reads
# on, and is the one a Ctrl-C interrupts
type_ 'lpvm.spawn(function(p) lpvm.receive(300) lpvm.exit(p, "kill") end, lpvm.self())' Enter
wait_for "a kill at the prompt is reported" "** exception exit: killed"
type_ '6 * 7 + 1000' Enter
wait_for "the new shell process reads on" "1042"
type_ 'print("spin" .. "ning") while true do end' Enter
wait_for "a loop runs in the new process" "spinning"
sleep 0.2
keys C-c
wait_for "Ctrl-C interrupts the new process" "interrupted!"
type_ C-d   # at the prompt after interrupted!: sent before it, libedit dropped it (TSan, loaded)
wait_for "Ctrl-D quits with status 0" "EXITED=0"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
