#!/bin/sh
# check_api.sh -- the public C API is exactly what is exported, and C++ can use it.
#
#   check_api.sh SRC LPVM_BINARY [LUAPROC_SO] [CXX]
#
# 0. Every function declared in SRC/include/lpvm/*.h is marked LPVM_API.
# 1. The names marked LPVM_API in SRC/include/lpvm/*.h are exactly the lpvm symbols
#    the lpvm executable exports to C task modules (the core and vm/ are built with
#    -fvisibility=hidden), and luaproc.so exports them plus luaopen_luaproc only --
#    less lpvm_lua.h's embedding calls (lpvm_lua_*): a Lua interpreter that loads
#    luaproc.so is the embedder there, and task modules do not call them.
#    lpvm_register_tasks is the entry point a task module defines, not lpvm.
# 2. With a C++ compiler: a C++ file including every public header compiles, and it
#    refers to the API by its C names (the extern "C" guards).
set -eu
src=$1 bin=$2 so=${3:-} cxx=${4:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0

sed -n 's/^LPVM_API[^(]*[ *]\([a-z_0-9]*\)(.*/\1/p' "$src"/include/lpvm/*.h |
  grep -vx lpvm_register_tasks | sort -u > "$tmp/declared"
[ -s "$tmp/declared" ] || { echo "no LPVM_API declarations found"; exit 1; }
# A public function declared without LPVM_API would be hidden from C task modules.
if grep -nE '^[a-z][a-z_ *0-9]*[ *]lpvm_[a-z_0-9]+\(' "$src"/include/lpvm/*.h |
   grep -vE ':(static|typedef) '; then
  echo "^ public functions declared without LPVM_API"
  bad=1
fi

# Defined dynamic symbols, without what every ELF program has.
exported() {
  nm -D --defined-only "$1" | awk '{print $3}' | sed 's/@.*//' |
    grep -vxE '_start|_init|_fini|_edata|_end|__bss_start|_IO_stdin_used|__data_start|data_start|stdin|stdout|stderr' |
    grep -vE '^__(asan|ubsan|tsan|lsan|sanitizer)_' |
    sort -u
}

compare() {  # what, file with the expected names, binary
  exported "$3" > "$tmp/got"
  if ! cmp -s "$2" "$tmp/got"; then
    echo "$1: exported symbols differ from the LPVM_API declarations (< declared only, > exported only):"
    diff "$2" "$tmp/got" | grep '^[<>]' || true
    bad=1
  else
    echo "$1: exports exactly the $(wc -l < "$tmp/declared") LPVM_API functions$4"
  fi
}

compare "$(basename "$bin")" "$tmp/declared" "$bin" ""
if [ -n "$so" ]; then
  { grep -v '^lpvm_lua_' "$tmp/declared"; echo luaopen_luaproc; } | sort -u > "$tmp/declared_so"
  compare "$(basename "$so")" "$tmp/declared_so" "$so" " and luaopen_luaproc"
fi

if [ -n "$cxx" ]; then
  {
    for h in "$src"/include/lpvm/*.h; do echo "#include \"lpvm/$(basename "$h")\""; done
    echo 'int main() { lpvm_config c; lpvm_config_init(&c); return lpvm_start(&c); }'
  } > "$tmp/api.cpp"
  if ! "$cxx" -std=c++23 -Wall -Wextra -Werror -I "$src/include" -c "$tmp/api.cpp" \
       -o "$tmp/api.o"; then
    echo "C++: the public headers do not compile"; bad=1
  elif ! nm "$tmp/api.o" | grep -q ' U lpvm_config_init$'; then
    echo "C++: the API is not declared extern \"C\" (mangled names)"; bad=1
  else
    echo "C++: the public headers compile and use the C names"
  fi
fi
exit $bad
