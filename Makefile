# Thin driver over CMake. `make run` and `make test` work on a fresh Debian 12 machine.
BUILD   ?= build
JOBS    ?= 2
CMAKEFLAGS ?=
DEB_PKGS = liblua5.4-dev lua5.4 libjemalloc-dev libcriterion-dev pkg-config cmake gcc make
# Only the tests need these: a real Erlang checks our term encodings; Debian's Lua
# modules prove that require works in processes (tests/lua/test_stdlibs.lua).
TEST_PKGS = erlang-nox lua-socket lua-cjson lua-lpeg
# Only the benchmarks need these: the HTTP server is measured with wrk, ETS beside BEAM's.
BENCH_PKGS = wrk erlang-nox

.PHONY: all deps test-deps bench-deps install-pkgs configure build run test bench estone fuzz soak clean

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

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

run: build
	@if [ -x $(BUILD)/lpvm ]; then $(BUILD)/lpvm examples/boot.lua; \
	else $(BUILD)/examples/xmpldemo; fi

test: test-deps build
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS) --timeout 300

bench: bench-deps build
	@for b in $(BUILD)/estone/bench_*; do [ -x $$b ] && $$b; done; true
	@if [ -x $(BUILD)/vm/lpvm ]; then sh estone/bench_lua.sh $(BUILD)/vm/lpvm; fi
	@if [ -x $(BUILD)/vm/lpvm ]; then sh estone/bench_luaproc.sh $(BUILD)/vm/lpvm; fi
	@if [ -x $(BUILD)/vm/lpvm ]; then sh estone/bench_http.sh $(BUILD)/vm/lpvm; fi
	@if [ -x $(BUILD)/vm/lpvm ]; then sh estone/bench_ets.sh $(BUILD)/vm/lpvm; fi
	@if [ -x $(BUILD)/vm/lpvm ]; then sh estone/bench_otp.sh $(BUILD)/vm/lpvm; fi

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
	@$(BUILD)/vm/lpvm estone/soak.lua $(SOAK_MINUTES)

clean:
	rm -rf $(BUILD) build-asan build-tsan

# The EStone suite and the seed papers' benchmarks in every configuration (~10 min);
# writes estone/results/ (JSON, SVG charts, summary.md). See docs/estone.md.
estone: build
	@sh estone/run_estone.sh $(BUILD)/vm/lpvm
