#!/bin/sh
# install_test.sh BUILD SRC -- `make install` into a DESTDIR, then use it as a user
# would: every file in place, an external C program built against it with pkg-config
# only and run (tests/embed/), a #!/usr/bin/env lpvm script, luaproc.so from lua5.4's
# C path, the man page; then `make uninstall` removes it all.
BUILD=${1:?usage: install_test.sh BUILD SRC}
SRC=${2:?usage: install_test.sh BUILD SRC}
BUILD=$(cd "$BUILD" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PREFIX=/opt/lpvm-test
D="$TMP/dest"
P="$D$PREFIX"
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -n "$2" ] && printf '     %s\n' "$2"; }
want() {  # NAME CMD...: the command succeeds
  name=$1; shift
  if "$@" >"$TMP/out" 2>&1; then ok "$name"; else bad "$name" "$(head -c 400 "$TMP/out")"; fi
}

# The Makefile's install step on this build folder (make install = configure a
# Release build with the installed LPVM_LIBDIR, build, this).
want "cmake --install with DESTDIR" env DESTDIR="$D" cmake --install "$BUILD" --prefix "$PREFIX"
for f in bin/lpvm lib/liblpvm.so lib/liblpvm.a include/lpvm/lpvm.h include/lpvm/lpvm_lua.h \
         include/lpvm/task.h include/lpvm/term.h lib/pkgconfig/lpvm.pc \
         share/lpvm/lua/lpvm_shell.lua lib/lua/5.4/luaproc.so share/man/man1/lpvm.1 \
         share/doc/lpvm/README.md share/doc/lpvm/LICENSE share/doc/lpvm/embedding.md; do
  if [ -e "$P/$f" ]; then ok "installed $f"; else bad "installed $f"; fi
done
v=$(ls "$P"/lib/liblpvm.so.*.*.* 2>/dev/null | head -1)
if [ -n "$v" ] && [ -L "$P/lib/liblpvm.so.0" ]; then ok "liblpvm.so is versioned (${v##*/}, soname .so.0)"
else bad "liblpvm.so is versioned"; fi
if ar t "$P/lib/liblpvm.a" | grep -q lembed; then ok "liblpvm.a holds the embedding API"; else bad "liblpvm.a holds the embedding API"; fi

# an external program, with pkg-config only (--define-prefix: the .pc is in a DESTDIR)
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
flags=$(pkg-config --define-prefix --cflags --libs lpvm)
want "pkg-config knows lpvm" pkg-config --exists lpvm
want "an external C program builds against the install" \
  cc -Wall -Werror "$SRC/tests/embed/embed_test.c" $flags -o "$TMP/embed_test"
( cd "$SRC/tests/embed" && LD_LIBRARY_PATH="$P/lib" timeout 120 "$TMP/embed_test" ) >"$TMP/out" 2>&1
if [ $? -eq 0 ] && grep -q "lua: sum	155" "$TMP/out"; then ok "the embedded VM runs Lua, gets terms from C, halts"
else bad "the embedded VM runs Lua, gets terms from C, halts" "$(cat "$TMP/out")"; fi

# #!/usr/bin/env lpvm with the installed binary and libraries
printf '#!/usr/bin/env lpvm\nprint("shebang", require("lpvm_shell") ~= nil, ...)\n' >"$TMP/script"
chmod +x "$TMP/script"
PATH="$P/bin:$PATH" LPVM_LIBDIR="$P/share/lpvm/lua" timeout 60 "$TMP/script" a1 </dev/null >"$TMP/out" 2>&1
if grep -q "shebang	true	a1" "$TMP/out"; then ok "#!/usr/bin/env lpvm scripts run"; else bad "#!/usr/bin/env lpvm scripts run" "$(cat "$TMP/out")"; fi

# luaproc.so on lua5.4's C path (where an install to /usr/local or /usr puts it)
if command -v lua5.4 >/dev/null; then
  LUA_CPATH="$P/lib/lua/5.4/?.so;;" lua5.4 -e 'local l = require "luaproc"; print("luaproc", type(l.newproc))' >"$TMP/out" 2>&1
  if grep -q "luaproc	function" "$TMP/out"; then ok "lua5.4 loads the installed luaproc.so"; else bad "lua5.4 loads the installed luaproc.so" "$(cat "$TMP/out")"; fi
fi
if command -v man >/dev/null; then
  if MANPAGER=cat PAGER=cat timeout 60 man -l "$P/share/man/man1/lpvm.1" </dev/null 2>/dev/null | grep -q "LUA_INIT"; then ok "man lpvm renders"; else bad "man lpvm renders"; fi
fi

# make uninstall reads what the install wrote
want "make uninstall" make -s -C "$SRC" uninstall INSTALL_BUILD="$BUILD" DESTDIR="$D"
left=$(find "$D" -type f | head -5)
if [ -z "$left" ]; then ok "nothing is left after uninstall"; else bad "nothing is left after uninstall" "$left"; fi
if [ ! -d "$P/include/lpvm" ] && [ ! -d "$P/share/lpvm" ] && [ ! -d "$P/share/doc/lpvm" ]; then
  ok "lpvm's own folders are gone"; else bad "lpvm's own folders are gone"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
