#!/bin/sh
# term_check.sh TERM_DUMP -- cross-check lpvm's term codec against a real Erlang.
#
# TERM_DUMP is the built tests/erl/term_dump. term_check.erl (beside this script) is
# compiled into a scratch directory and run by erl: it decodes every term lpvm encodes
# and compares it with the term expected, then has term_dump decode terms erl encoded
# and compares lpvm's rendering and re-encoding with erl's. Prints one FAIL line per
# mismatch and "N passed, M failed"; exits nonzero on any failure, 77 (ctest's skip
# code, if the test sets SKIP_RETURN_CODE) when erl is missing.
set -eu

dump=${1:?usage: term_check.sh path/to/term_dump}
here=$(cd "$(dirname "$0")" && pwd)
command -v erl >/dev/null 2>&1 || { echo "term_check: erl not found"; exit 77; }
command -v erlc >/dev/null 2>&1 || { echo "term_check: erlc not found"; exit 77; }
dump=$(cd "$(dirname "$dump")" && pwd)/$(basename "$dump")
[ -x "$dump" ] || { echo "term_check: $dump is not executable"; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
erlc -o "$tmp" "$here/term_check.erl"
erl -noshell -pa "$tmp" -eval "term_check:main([\"$dump\", \"$tmp\"])"
