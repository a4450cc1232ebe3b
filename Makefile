# The README's two commands are `make demo` and `make check`; both install what they need.
# Other targets: build, test, instrumented (one clang build with ASan + UBSan + libFuzzer
# coverage, only what the sanitizer tests and fuzz targets need), sanitize (the unit and
# integration tests on it; the virtual-lab tests, which boot QEMU guests, run once, in `make
# check`), fuzz-smoke / fuzz (every libFuzzer target for FUZZ_SECONDS, FUZZ_JOBS at a time),
# bench, format, deb (the Debian packages, docs/install.md). docs/testing.md says which build and
# which stage runs what.

BUILD        ?= build
INSTR_BUILD  ?= build-instr
FUZZ_SECONDS ?= 10
FUZZ_JOBS    ?= 2
CTEST_JOBS   ?= 2
# The release build is RelWithDebInfo (-O2 -g). CI (.ci/run) sets DEBUG_INFO=no: the same -O2 and
# warnings without -g, which doubles the compile time and which no test reads. (CMake's Release
# is -O3, where g++ 12 raises false -Wrestrict errors inside std::string.)
DEBUG_INFO   ?= yes
BUILD_FLAGS  := $(if $(filter no,$(DEBUG_INFO)),-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG")
# ctest keeps the tail of each test's output (a failed Catch2 binary ends with its failure recap,
# tests/catch_main.cpp); the whole output is in BUILD/Testing/Temporary/LastTest.log.
CTEST_OUTPUT := --test-output-size-passed 4096 --test-output-size-failed 8192 --test-output-truncation tail
LAUNCHER     := $(shell command -v ccache >/dev/null 2>&1 && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# ccache keys on relative paths below the checkout, so a second clone or worktree (CI's fresh
# clone, a helper's worktree) reuses what the first one compiled.
export CCACHE_BASEDIR ?= $(CURDIR)
CMAKE_GEN    := -G Ninja $(LAUNCHER)

.PHONY: all deps deps-build build test check check-under-load demo instrumented sanitize fuzz fuzz-smoke bench format deb package clean fault-matrix failure-cost opus-eval torch-vlab outages-vlab firmware-study

all: build

# Packages (scripts/install-deps, docs/install.md): `make deps` installs the DEPS profiles, by
# default test, everything CI needs (check, demo and the instrumented build depend on it);
# `make build` needs only the build profile. Either is silent when the packages are present,
# and as a user other than root names the missing ones instead of installing them.
DEPS ?= test
deps:
	@scripts/install-deps $(DEPS)

deps-build:
	@scripts/install-deps build

$(BUILD)/build.ninja: | deps-build
	cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOCSLAB_WERROR=ON $(BUILD_FLAGS)

build: deps-build $(BUILD)/build.ninja
	cmake --build $(BUILD)

# Tests that share no state run CTEST_JOBS at a time; the virtual-lab tests run alone (RUN_SERIAL:
# they share the lab cache and their timing checks want the CPU). Two on two cores: -j4 was
# faster (most integration entries wait: at -j2 the unit, integration and lint entries kept the
# CPU 43 % busy, 280 s against 227 s at -j4; make sanitize 279-290 s against 321 s), but the
# contention surfaced a timing race in each of two fresh-clone runs (both fixed, 2026-11-29), so
# it stays at two until runs show no others (docs/testing.md). Ends with the ten slowest tests
# and the Catch2 totals (scripts/test-summary).
test: deps build
	ctest --test-dir $(BUILD) --output-on-failure --timeout 600 -j$(CTEST_JOBS) \
	  $(CTEST_OUTPUT) \
	  --output-junit $(CURDIR)/$(BUILD)/ctest-junit.xml; rc=$$?; \
	  scripts/test-summary $(BUILD)/ctest-junit.xml; exit $$rc

check: test

# The unit and integration tests of each build in LOAD_BUILDS while stress-ng keeps every core
# and some memory busy, LOAD_REPS times (docs/testing.md, "Under load"): every failed entry with
# its failed cases and the load, then one summary line per repetition and build. LOAD_TESTS: a
# ctest -R regex to narrow the entries (one flaky entry, again and again).
LOAD_REPS   ?= 1
LOAD_BUILDS ?= release instrumented
LOAD_TESTS  ?=
check-under-load: deps $(if $(filter release,$(LOAD_BUILDS)),build) $(if $(filter instrumented,$(LOAD_BUILDS)),instrumented)
	scripts/check-under-load --reps $(LOAD_REPS) --builds "$(LOAD_BUILDS)" --jobs $(CTEST_JOBS) \
	  --release-dir $(BUILD) --instr-dir $(INSTR_BUILD) --tests "$(LOAD_TESTS)"

# The main job: boots the default 4-host virtual lab (left running; `build/bin/ocslab vlab down
# four-hosts` stops it), 10 reconfigurations between two rail mappings, results/demo-<time>/.
demo: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) --target ocslab ocslab-agent
	$(BUILD)/bin/ocslab run experiments/specs/demo.yaml

# One instrumented build for the sanitizer tests and the fuzz targets (cmake/OcslabHelpers.cmake):
# clang, -O1 with line tables (what ASan's reports need), no benchmarks, no NCCL, no vlab tools.
# -O0 compiles in half the time but the sanitizer tests then take 534 s instead of about 150 s
# (docs/testing.md).
$(INSTR_BUILD)/build.ninja: | deps
	cmake -S . -B $(INSTR_BUILD) $(CMAKE_GEN) -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DCMAKE_BUILD_TYPE=Instrumented -DOCSLAB_WERROR=ON -DCMAKE_CXX_FLAGS_INSTRUMENTED="-O1 -gline-tables-only" \
	  -DCMAKE_C_FLAGS_INSTRUMENTED="-O1 -gline-tables-only" -DOCSLAB_SANITIZE=ON -DOCSLAB_FUZZ=ON -DOCSLAB_NCCL=OFF

instrumented: deps $(INSTR_BUILD)/build.ninja
	cmake --build $(INSTR_BUILD) --target instrumented

sanitize: instrumented
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(INSTR_BUILD) --output-on-failure --timeout 900 -j$(CTEST_JOBS) -L 'unit|integration' \
	  $(CTEST_OUTPUT) \
	  --output-junit $(CURDIR)/$(INSTR_BUILD)/ctest-junit.xml; rc=$$?; \
	  scripts/test-summary $(INSTR_BUILD)/ctest-junit.xml; exit $$rc

# The fault matrix (docs/guarantees.md): a hidden virtual-lab case, about 15 minutes on the shared
# four-host lab (booted when not up, left up: `build/bin/ocslab vlab down vlab-test-four`).
fault-matrix: deps build
	OCSLAB_BIN_DIR=$(CURDIR)/$(BUILD)/bin OCSLAB_TEST_BIN_DIR=$(CURDIR)/$(BUILD)/tests OCSLAB_SOURCE_DIR=$(CURDIR) \
	  $(BUILD)/tests/vlab_e2e "[.fault-matrix]" --durations yes

# What a failure costs a phase workload (docs/experiments.md): a hidden virtual-lab case, about 4
# minutes on the shared phase lab (booted when not up, left up), printing the failure-cost table.
failure-cost: deps build
	OCSLAB_BIN_DIR=$(CURDIR)/$(BUILD)/bin OCSLAB_TEST_BIN_DIR=$(CURDIR)/$(BUILD)/tests OCSLAB_SOURCE_DIR=$(CURDIR) \
	  $(BUILD)/tests/vlab_e2e "[.failure-cost]" --durations yes

# The Opus evaluation (docs/experiments.md): a hidden virtual-lab case, about 10 minutes on the
# shared phase lab (booted when not up, left up: `build/bin/ocslab vlab down phase-four`).
opus-eval: deps build
	OCSLAB_BIN_DIR=$(CURDIR)/$(BUILD)/bin OCSLAB_TEST_BIN_DIR=$(CURDIR)/$(BUILD)/tests OCSLAB_SOURCE_DIR=$(CURDIR) \
	  $(BUILD)/tests/vlab_e2e "[.opus-eval]" --durations yes

# The example PyTorch job under phase control (docs/experiments.md, "A PyTorch job"): a hidden
# virtual-lab case, about 6 minutes on the shared phase lab (booted when not up, left up): natively,
# on demand and provisioning, the losses of every mode a plain gloo run's.
torch-vlab: deps build
	OCSLAB_BIN_DIR=$(CURDIR)/$(BUILD)/bin OCSLAB_TEST_BIN_DIR=$(CURDIR)/$(BUILD)/tests OCSLAB_SOURCE_DIR=$(CURDIR) \
	  $(BUILD)/tests/vlab_e2e "[.torch-vlab]" --durations yes

# experiments/specs/outages-vlab.yaml whole (ten outages of each length on every host, about
# 2 minutes) on the four-host test lab; CI's vlab_outages runs three of each.
outages-vlab: deps build
	OCSLAB_BIN_DIR=$(CURDIR)/$(BUILD)/bin OCSLAB_TEST_BIN_DIR=$(CURDIR)/$(BUILD)/tests OCSLAB_SOURCE_DIR=$(CURDIR) \
	  $(BUILD)/tests/vlab_e2e "[.outages-vlab]" --durations yes

# The firmware link-up study (docs/experiments.md, "The firmware link-up study"):
# experiments/specs/firmware-study-vlab.yaml whole, the ConnectX-6 Dx presets at 5, 10 and 20 s,
# about 6 minutes on the shared ring lab (booted when not up, left up); CI's vlab_firmware_study
# runs faster models of its own.
firmware-study: deps build
	OCSLAB_BIN_DIR=$(CURDIR)/$(BUILD)/bin OCSLAB_TEST_BIN_DIR=$(CURDIR)/$(BUILD)/tests OCSLAB_SOURCE_DIR=$(CURDIR) \
	  $(BUILD)/tests/vlab_e2e "[.firmware-study-full]" --durations yes

# Both run every fuzz target on a scratch copy of its seed corpus (the repository is never
# written), FUZZ_JOBS targets at a time: fuzz-smoke for FUZZ_SECONDS each (CI), fuzz for 60 s each.
fuzz-smoke: instrumented
	scripts/run-fuzzers $(INSTR_BUILD)/fuzz tests/fuzz/corpus $(FUZZ_SECONDS) $(FUZZ_JOBS)

fuzz: instrumented
	scripts/run-fuzzers $(INSTR_BUILD)/fuzz tests/fuzz/corpus 60 $(FUZZ_JOBS)

bench: deps build
	scripts/run-benchmarks $(BUILD)/bench

# The three Debian packages (ocslab, ocslab-agent, libocs-dev) in $(BUILD)/packages/, made by
# CPack from the release build (docs/install.md). `make deb BUILD=build-agent` after an agent-only
# configure makes ocslab-agent and libocs-dev alone.
deb package: build
	rm -rf $(BUILD)/packages
	cd $(BUILD) && cpack -G DEB -B $(CURDIR)/$(BUILD)/packages
	rm -rf $(BUILD)/packages/_CPack_Packages
	@ls -1 $(BUILD)/packages/*.deb

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf $(BUILD) $(INSTR_BUILD)
