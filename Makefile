# Convenience front end to CMake. Each target does its own set-up:
#   make run       deps, configure build/, build, run `usched bench` (or `usched topo`
#                  until the CLI has bench)
#   make test      deps (test set), configure build/, build, the whole suite
#   make asan      the suite under AddressSanitizer+UndefinedBehaviorSanitizer (build-asan/)
#   make tsan      the suite under ThreadSanitizer (build-tsan/)
#   make install   install into PREFIX (default /usr/local; DESTDIR honoured)
#   make clean     remove the build folders
BUILD ?= build
PREFIX ?= /usr/local
JOBS ?= 2
CMAKE_FLAGS ?=
# Stress sizes under sanitizers, in percent (read by test_scale() in tests/test.h).
SAN_SCALE ?= 10

CTEST = ctest --output-on-failure --no-tests=error -j$(JOBS)

.PHONY: all deps test-deps configure build run test asan tsan install clean

all: build

deps:
	sh scripts/deps.sh

test-deps:
	sh scripts/deps.sh test

configure:
	cmake -S . -B $(BUILD) -DUSCHED_WERROR=ON $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

run: deps build
	@if ./$(BUILD)/usched bench --help >/dev/null 2>&1; then \
		echo "./$(BUILD)/usched bench"; ./$(BUILD)/usched bench; \
	else \
		echo "./$(BUILD)/usched topo  (usched bench is not there yet)"; ./$(BUILD)/usched topo; \
	fi

test: test-deps build
	cd $(BUILD) && $(CTEST)

asan: test-deps
	cmake -S . -B build-asan -DUSCHED_WERROR=ON -DUSCHED_SANITIZE=address,undefined $(CMAKE_FLAGS)
	cmake --build build-asan -j$(JOBS)
	cd build-asan && USCHED_STRESS_SCALE=$(SAN_SCALE) \
		ASAN_OPTIONS=detect_leaks=1 \
		UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		$(CTEST)

tsan: test-deps
	cmake -S . -B build-tsan -DUSCHED_WERROR=ON -DUSCHED_SANITIZE=thread $(CMAKE_FLAGS)
	cmake --build build-tsan -j$(JOBS)
	cd build-tsan && USCHED_STRESS_SCALE=$(SAN_SCALE) \
		TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
		$(CTEST)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) build-asan build-tsan
