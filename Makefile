# Thin driver over CMake. `make run` and `make test` work on a fresh Debian 12 machine.
BUILD   ?= build
JOBS    ?= 2
CMAKEFLAGS ?=
DEB_PKGS = liblua5.4-dev lua5.4 libjemalloc-dev libcriterion-dev libedit-dev nettle-dev pkg-config cmake gcc make
# Only the tests need these: a real Erlang checks our term encodings; Debian's Lua
# modules prove that require works in processes (tests/lua/test_stdlibs.lua); tmux
# gives the shell's test a terminal (tests/lua/shell_tty_test.sh); wrk drives the HTTP
# rows of make compare's smoke test (tests/compare_quick_check.lua).
TEST_PKGS = erlang-nox lua-socket lua-cjson lua-lpeg tmux wrk
# Only the benchmarks need these: the HTTP server is measured with wrk, ETS beside BEAM's,
# instructions per ETS operation with valgrind (estone/cg_ets.sh).
BENCH_PKGS = wrk erlang-nox valgrind

# make install [PREFIX=/usr/local] [DESTDIR=]: a Release build of its own (build-install)
# whose compiled-in Lua library folder is the installed one; make uninstall [DESTDIR=]
# removes what that install wrote (its install_manifest.txt).
PREFIX ?= /usr/local
DESTDIR ?=
INSTALL_BUILD ?= build-install

.PHONY: all deps test-deps bench-deps install-pkgs configure build run test bench compare estone fuzz soak clean install uninstall

all: build

# Install the Debian packages that are missing (only as root; silent when all are there).
deps:
	@$(MAKE) --no-print-directory install-pkgs PKGS="$(DEB_PKGS)"

test-deps:
	@$(MAKE) --no-print-directory install-pkgs PKGS="$(DEB_PKGS) $(TEST_PKGS)"

bench-deps:
	@$(MAKE) --no-print-directory install-pkgs PKGS="$(DEB_PKGS) $(BENCH_PKGS)"

install-pkgs:
	@missing=$$(for p in $(PKGS); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:" $$missing; \
	    (apt-get install -y --no-install-recommends $$missing >/dev/null 2>&1 || \
	     (apt-get update >/dev/null && apt-get install -y --no-install-recommends $$missing >/dev/null)) || exit 1; \
	  else echo "missing Debian packages: $$missing (run as root, or install them)"; exit 1; fi; \
	fi

configure: deps
	@cmake -S . -B $(BUILD) $(CMAKEFLAGS) >/dev/null

# cmake's own make runs below this one: without this every one of its steps says
# "gmake[N]: Entering directory" (one line each way, dozens of them)
MAKEFLAGS += --no-print-directory
export MAKEFLAGS

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

# The tour, and only the tour: the build's output goes to a log shown on failure.
run: deps
	@cmake -S . -B $(BUILD) $(CMAKEFLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS) >$(BUILD)/build.log 2>&1 || { cat $(BUILD)/build.log; exit 1; }
	@if [ -x $(BUILD)/lpvm ]; then $(BUILD)/lpvm examples/boot.lua; \
	else $(BUILD)/examples/xmpldemo; fi

test: test-deps build
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS) --timeout 300

bench: bench-deps build
	@for b in $(BUILD)/estone/bench_*; do [ -x $$b ] && $$b; done; true
	@if [ -x $(BUILD)/lpvm ]; then sh estone/bench_lua.sh $(BUILD)/lpvm; fi
	@if [ -x $(BUILD)/lpvm ]; then sh estone/bench_luaproc.sh $(BUILD)/lpvm; fi
	@if [ -x $(BUILD)/lpvm ]; then sh estone/bench_http.sh $(BUILD)/lpvm; fi
	@if [ -x $(BUILD)/lpvm ]; then sh estone/bench_ets.sh $(BUILD)/lpvm; fi
	@if [ -x $(BUILD)/lpvm ]; then sh estone/bench_otp.sh $(BUILD)/lpvm; fi

# The fuzz targets (fuzz/fuzz_*.c) for FUZZ_TIME seconds each under ASan+UBSan, from
# their seed corpora (fuzz/corpus/<name>/). See docs/fuzzing.md. CI runs it for 60 s.
FUZZ_TIME ?= 60
FUZZ_BUILD ?= build-asan
fuzz:
	@$(MAKE) --no-print-directory build BUILD=$(FUZZ_BUILD) \
	  CMAKEFLAGS="-DLPVM_SANITIZE=address -DLPVM_STRESS_SCALE=0.25"
	@for f in $(FUZZ_BUILD)/fuzz/fuzz_*; do \
	  [ -x $$f ] || continue; name=$${f##*/fuzz_}; \
	  $$f -max_total_time=$(FUZZ_TIME) fuzz/corpus/$$name || exit 1; \
	done

# Mixed load for SOAK_MINUTES (spawn/exit churn, floods, kill storms, port churn),
# printing RSS, descriptors, processes and lost messages every minute. Not in CI.
# A 10-minute run is in docs/reliability.md.
SOAK_MINUTES ?= 10
soak: build
	@$(BUILD)/lpvm estone/soak.lua $(SOAK_MINUTES)

clean:
	rm -rf $(BUILD) build-asan build-tsan $(INSTALL_BUILD)

install: deps
	@cmake -S . -B $(INSTALL_BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX) \
	  -DLPVM_LIBDIR=$(PREFIX)/share/lpvm/lua >/dev/null
	@cmake --build $(INSTALL_BUILD) -j$(JOBS) --target lpvm lpvm_shared lpvm_static luaproc >/dev/null
	@DESTDIR=$(DESTDIR) cmake --install $(INSTALL_BUILD) | sed -n 's/^-- Installing: /installed /p'

uninstall:
	@m=$(INSTALL_BUILD)/install_manifest.txt; \
	if [ ! -f $$m ]; then echo "nothing to uninstall: no $$m (make install writes it)"; exit 1; fi; \
	d="$(DESTDIR)"; sed "s|^$${d:+$$d}||; s|^|$$d|" $$m >$$m.paths; \
	while read -r f || [ -n "$$f" ]; do rm -f "$$f" && echo "removed $$f"; done <$$m.paths; \
	sed 's|/[^/]*$$||' $$m.paths | grep '/lpvm\(/\|$$\)' | sort -ru | while read -r d || [ -n "$$d" ]; do rmdir "$$d" 2>/dev/null; done; \
	rmdir "$$(dirname "$$(dirname "$$(grep -m1 '/share/lpvm/' $$m.paths)")")" 2>/dev/null; \
	rm -f $$m $$m.paths

# lpvm beside BEAM (estone/compare/compare.lua): every workload of issue 17's table and
# the thesis's figure 4, with 1 and 2 workers, medians of COMPARE_RUNS alternating runs;
# the table goes to the terminal and $(BUILD)/compare.md, every figure to
# $(BUILD)/compare.json. Without escript (erlang-nox) lpvm runs alone and one line says
# BEAM was skipped; without wrk the HTTP rows are skipped. COMPARE_ARGS adds options or
# selects rows, e.g. COMPARE_ARGS="--workers 2 ring10k chain". See docs/performance.md.
COMPARE_RUNS ?= 3
COMPARE_ARGS ?=
compare: build
	@$(BUILD)/lpvm estone/compare/compare.lua --lpvm $(BUILD)/lpvm --runs $(COMPARE_RUNS) \
	  --json $(BUILD)/compare.json --md $(BUILD)/compare.md $(COMPARE_ARGS)

# The EStone suite and the seed papers' benchmarks in every configuration (~10 min);
# writes estone/results/ (JSON, SVG charts, summary.md). See docs/estone.md.
estone: build
	@sh estone/run_estone.sh $(BUILD)/lpvm
