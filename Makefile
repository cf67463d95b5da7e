# Convenience front end to CMake. Each target does its own set-up (scripts/deps.sh
# installs missing Debian packages), and each is safe under make -j:
#   make run       deps, configure build/, build the CLI, run `usched bench`
#                  (`usched topo` until the CLI has bench)
#   make test      deps (test set), configure build/, build, the whole suite
#   make asan      the suite under AddressSanitizer+UndefinedBehaviorSanitizer (build-asan/)
#   make tsan      the suite under ThreadSanitizer (build-tsan/)
#   make install   install into PREFIX (default /usr/local; DESTDIR honoured)
#   make clean     remove the build folders
BUILD ?= build
PREFIX ?= /usr/local
DESTDIR ?=
JOBS ?= 2
CMAKE_FLAGS ?=
# Stress sizes under sanitizers, in percent (read by test_scale() in tests/test.h).
SAN_SCALE ?= 10

MAKEFLAGS += --no-print-directory
, := ,
CTEST = ctest --output-on-failure --no-tests=error -j$(JOBS)

# $(call configure,FOLDER,EXTRA CMAKE FLAGS)
configure = cmake -S . -B $(1) -DUSCHED_WERROR=ON $(2) $(CMAKE_FLAGS)

# $(call sanitized_suite,FOLDER,SANITIZERS,RUNTIME OPTIONS)
define sanitized_suite
	sh scripts/deps.sh test
	$(call configure,$(1),-DUSCHED_SANITIZE=$(2))
	cmake --build $(1) -j$(JOBS)
	cd $(1) && USCHED_STRESS_SCALE=$(SAN_SCALE) $(3) $(CTEST)
endef

.PHONY: all build run test asan tsan install clean

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

install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) build-asan build-tsan
