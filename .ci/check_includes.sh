#!/bin/sh
# check_includes.sh -- the include arrows of docs/architecture.md, checked over the
# `#include` lines of the sources. Exits 1 and names each file and line that includes
# across a forbidden arrow.
#
#   check_includes.sh [ROOT]      check the tree at ROOT (default: the repository)
#   check_includes.sh --self-test prove the check fails on a forbidden include
#
# The arrows: vm -> rt/io -> {tasks, sched, timers}; tasks <-> sched only through
# tasks/task_sched.h. A folder may always include its own headers, headers of the
# same folder by bare name, and the public API (lpvm/...). Besides that, a folder may
# include exactly the narrow headers listed for it below, never another folder's
# private header. The core (everything but vm/) includes no Lua header.
set -eu

# folder: the other folders' headers it may include
allowed() {
  case "$1" in
    lpvm)     echo "" ;;
    timers)   echo "" ;;
    tasks)    echo "timers/timer.h" ;;
    sched)    echo "tasks/task_sched.h" ;;
    io)       echo "tasks/ptab.h tasks/node.h tasks/sig.h timers/timer.h" ;;
    rt)       echo "io/io.h tasks/tasks.h sched/sched.h timers/timer.h" ;;
    vm)       echo "" ;;
    examples) echo "" ;;
  esac
}

check() {
  root=$1
  bad=0
  for dir in include/lpvm timers tasks sched io rt vm examples; do
    [ -d "$root/$dir" ] || continue
    from=${dir#include/}
    ok=$(allowed "$from")
    for f in "$root/$dir"/*.c "$root/$dir"/*.h; do
      [ -f "$f" ] || continue
      rel=${f#"$root"/}
      # "N target" for each #include "target", and "N <lua...>" for a Lua header
      lines=$(grep -n '^[[:space:]]*#[[:space:]]*include' "$f" |
        sed -n -e 's/^\([0-9]*\):[^"<]*"\([^"]*\)".*/\1 \2/p' \
               -e 's/^\([0-9]*\):[^"<]*<\(lua[^>]*\|lualib[^>]*\|lauxlib[^>]*\)>.*/\1 <\2>/p') || true
      while read -r n inc; do
        [ -n "$inc" ] || continue
        case "$inc" in
          "<"*) [ "$from" = vm ] && continue
                echo "$rel:$n: includes Lua ($inc): the core has no Lua"; bad=1; continue ;;
          */*) ;;
          *) continue ;;          # a header of the same folder
        esac
        to=${inc%%/*}
        [ "$to" = "$from" ] && continue
        [ "$to" = lpvm ] && continue
        case " $ok " in *" $inc "*) continue ;; esac
        echo "$rel:$n: includes \"$inc\": $from may not include that (see .ci/check_includes.sh)"
        bad=1
      done <<EOF_LINES
$lines
EOF_LINES
    done
  done
  return $bad
}

self_test() {
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/sched" "$tmp/io" "$tmp/tasks" "$tmp/vm"
  printf '#include "sched/sched.h"\n#include "tasks/task_sched.h"\n#include <stdio.h>\n' \
    > "$tmp/sched/ok.c"
  printf '#include "lpvm/task.h"\n#include <lua.h>\n#include "vm/lproc.h"\n' > "$tmp/vm/ok.c"
  check "$tmp" >/dev/null || { echo "self-test: a clean tree failed"; return 1; }
  for case in 'sched/bad.c:#include "io/poller.h"' \
              'io/bad.c:#include "tasks/task_int.h"' \
              'tasks/bad.h:  #  include "sched/sched.h"' \
              'tasks/lua.c:#include <lauxlib.h>' \
              'vm/bad.c:#include "rt/runtime.h"'; do
    file=${case%%:*}
    printf '%s\n' "${case#*:}" > "$tmp/$file"
    if check "$tmp" >/dev/null; then
      echo "self-test: a forbidden include passed: $file: ${case#*:}"
      return 1
    fi
    rm "$tmp/$file"
  done
  echo "self-test: ok (a clean tree passes, each forbidden include fails)"
}

if [ "${1:-}" = --self-test ]; then
  self_test
else
  root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
  if check "$root"; then echo "include arrows: ok"; else exit 1; fi
fi
