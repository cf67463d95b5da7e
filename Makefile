# Convenience front end to CMake. Each target does its own set-up (scripts/deps.sh
# installs missing Debian packages), and each is safe under make -j:
#   make run       deps, configure build/, build the CLI, run `usched bench`
#                  (`usched topo` until the CLI has bench)
#   make test      deps (test set), configure build/, build, the whole suite
#   make asan      the suite under AddressSanitizer+UndefinedBehaviorSanitizer (build-asan/)
#   make tsan      the suite under ThreadSanitizer (build-tsan/)
#   make soak      tests/soak/soak.c at SOAK_SCALE percent (default 100: 10^8
#                  channel messages, 10^7 spawns, ... on every policy, long)
#   make install   install into PREFIX (default /usr/local; DESTDIR honoured)
#   make deb       Debian packages libusched0, libusched-dev, usched-tools
#                  (build-deb/deb/*.deb; Release, prefix /usr)
#   make aarch64   cross-build the library and the suite for aarch64 and run
#                  it under qemu-aarch64 (build-aarch64/; AARCH64_LABELS
#                  picks a subset, e.g. AARCH64_LABELS='unit|sync')
#   make model     check the park/wake protocol's model with SPIN, then each
#                  mutant (model/run.sh; docs/model.md)
#   make clean     remove the build folders
BUILD ?= build
PREFIX ?= /usr/local
DESTDIR ?=
JOBS ?= 2
CMAKE_FLAGS ?=
# Stress sizes under sanitizers, in percent (read by test_scale() in tests/test.h).
SAN_SCALE ?= 10
# Soak size in percent (CTest runs it at 1, label soak).
SOAK_SCALE ?= 100

MAKEFLAGS += --no-print-directory
, := ,
CTEST = ctest --output-on-failure --no-tests=error -j$(JOBS)

# $(call configure,FOLDER,EXTRA CMAKE FLAGS)
configure = cmake -S . -B $(1) -DUSCHED_WERROR=ON $(2) $(CMAKE_FLAGS)

# The per-policy reruns of the io and servers suites (policy_<policy>_io_*,
# ..._servers_*, ..._serve_*) run in `make test`; the sanitized suites run
# those suites under the default policy only, which keeps CI in its budget.
SAN_EXCLUDE = ^policy_(usched|linux|ule|bsd4|global)_(io|servers|serve)_

# $(call sanitized_suite,FOLDER,SANITIZERS,RUNTIME OPTIONS)
define sanitized_suite
	sh scripts/deps.sh test
	$(call configure,$(1),-DUSCHED_SANITIZE=$(2))
	cmake --build $(1) -j$(JOBS)
	cd $(1) && USCHED_STRESS_SCALE=$(SAN_SCALE) $(3) $(CTEST) -E '$(SAN_EXCLUDE)'
endef

.PHONY: all build run test asan tsan soak install deb aarch64 model clean

all: build

build:
	$(call configure,$(BUILD))
	cmake --build $(BUILD) -j$(JOBS)

run:
	sh scripts/deps.sh
	$(call configure,$(BUILD))
	cmake --build $(BUILD) -j$(JOBS) --target usched_cli
	@if ./$(BUILD)/usched bench --help >/dev/null 2>&1; then \
		echo "./$(BUILD)/usched bench"; ./$(BUILD)/usched bench; \
	else \
		echo "./$(BUILD)/usched topo  (usched bench is not there yet)"; ./$(BUILD)/usched topo; \
	fi

test:
	sh scripts/deps.sh test
	$(call configure,$(BUILD))
	cmake --build $(BUILD) -j$(JOBS)
	cd $(BUILD) && $(CTEST)

asan:
	$(call sanitized_suite,build-asan,address$(,)undefined,\
		ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1)

tsan:
	$(call sanitized_suite,build-tsan,thread,\
		TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1")

model:
	sh scripts/deps.sh test
	sh model/labels.sh .
	sh model/run.sh

soak:
	sh scripts/deps.sh test
	$(call configure,$(BUILD))
	cmake --build $(BUILD) -j$(JOBS) --target soak
	./$(BUILD)/tests/soak/soak --scale $(SOAK_SCALE)

install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

deb:
	sh scripts/deps.sh
	$(call configure,build-deb,-DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
		-DBUILD_TESTING=OFF -DUSCHED_BUILD_BENCH=OFF -DUSCHED_BUILD_EXAMPLES=OFF)
	cmake --build build-deb -j$(JOBS)
	rm -rf build-deb/deb
	cd build-deb && cpack -G DEB
	@ls -1 build-deb/deb/*.deb

# Stress sizes of the aarch64 suite under qemu, in percent, and a label
# regular expression restricting it (empty: the whole suite).
AARCH64_SCALE ?= 10
AARCH64_LABELS ?=

aarch64:
	sh scripts/deps.sh aarch64
	sh scripts/aarch64-sysroot.sh build-aarch64/sysroot
	$(call configure,build-aarch64,-DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
		-DUSCHED_AARCH64_HWLOC=$(CURDIR)/build-aarch64/sysroot -DUSCHED_BUILD_BENCH=OFF)
	cmake --build build-aarch64 -j$(JOBS)
	cd build-aarch64 && USCHED_STRESS_SCALE=$(AARCH64_SCALE) \
		$(CTEST) $(if $(AARCH64_LABELS),-L '$(AARCH64_LABELS)')

clean:
	rm -rf $(BUILD) build-asan build-tsan build-deb build-aarch64
