# The README's two commands are `make demo` and `make check`; both install what they need.
# Other targets: build, test, sanitize (ASan+UBSan unit+integration tests; the virtual-lab
# end-to-end tests, which boot QEMU guests, run once, in `make check`), fuzz-smoke /
# fuzz (libFuzzer targets for FUZZ_SECONDS each), bench, format.

BUILD        ?= build
ASAN_BUILD   ?= build-asan
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 10
LAUNCHER     := $(shell command -v ccache >/dev/null 2>&1 && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
CMAKE_GEN    := -G Ninja $(LAUNCHER)

.PHONY: all deps build test check demo sanitize fuzz-build fuzz fuzz-smoke bench format clean

all: build

deps:
	@scripts/install-deps

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD)

test: build
	ctest --test-dir $(BUILD) --output-on-failure --timeout 600

check: test

# The main job: boots the default 4-host virtual lab (left running; `build/bin/ocslab vlab down
# four-hosts` stops it), 10 reconfigurations between two rail mappings, results/demo-<time>/.
demo: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) --target ocslab ocslab-agent
	$(BUILD)/bin/ocslab run experiments/specs/demo.yaml

sanitize: deps
	cmake -S . -B $(ASAN_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DOCSLAB_SANITIZE=ON
	cmake --build $(ASAN_BUILD)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure --timeout 900 --label-exclude vlab

fuzz-build: deps
	cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOCSLAB_FUZZ=ON
	cmake --build $(FUZZ_BUILD) --target fuzzers

# Both run every fuzz target on a scratch copy of its seed corpus (the repository is never
# written): fuzz-smoke for FUZZ_SECONDS each (CI), fuzz for the full 60 s each.
fuzz-smoke: fuzz-build
	scripts/run-fuzzers $(FUZZ_BUILD)/fuzz tests/fuzz/corpus $(FUZZ_SECONDS)

fuzz: fuzz-build
	scripts/run-fuzzers $(FUZZ_BUILD)/fuzz tests/fuzz/corpus 60

bench: build
	scripts/run-benchmarks $(BUILD)/bench

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
