#!/bin/sh
# CC, CXX and the flag variables are split into words on purpose.
# shellcheck disable=SC2086
# Builds every benchmark peer whose toolchain and packages are present into
# DIR (default: build/peers under the repository) as DIR/peer-<system>, and
# prints which were built and which were skipped, and why.
#
#   bench/peers/build.sh [DIR]
#
# Install the packages first with scripts/deps-peers.sh. Exits non-zero only
# if a peer whose prerequisites are present fails to build.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$root/build/peers}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)

CC=${CC:-gcc}
CXX=${CXX:-g++}
CFLAGS=${CFLAGS:--O2 -g}
CXXFLAGS=${CXXFLAGS:--O2 -g}
WARN="-Wall -Wextra -Werror"

built=""
skipped=""
failed=""
log="$out/build.log"
: >"$log"

ok()   { built="$built $1"; echo "built:   $1 -> $out/peer-$1"; }
skip() { skipped="$skipped $1"; echo "skipped: $1 ($2)"; }
fail() { failed="$failed $1"; echo "FAILED:  $1 (see $log)"; }

have() { command -v "$1" >/dev/null 2>&1; }
# hdr FILE: whether the C++ compiler finds the header
hdr() { echo "#include <$1>" | $CXX -x c++ -std=c++17 -E - >/dev/null 2>&1; }

# step NAME CMD...: runs CMD with output to the log; reports built or failed
step() {
	name=$1
	shift
	echo "== $name: $*" >>"$log"
	if "$@" >>"$log" 2>&1; then ok "$name"; else fail "$name"; fi
}

# ---- C and C++ peers ------------------------------------------------------
if have "$CC"; then
	step pthreads $CC -std=gnu11 $CFLAGS $WARN -o "$out/peer-pthreads" \
		"$here/pthreads/peer_pthreads.c" -pthread
	if echo 'int main(void){return 0;}' | $CC -fopenmp -x c - -o "$out/.omp-probe" >/dev/null 2>&1; then
		step omp $CC -std=gnu11 $CFLAGS $WARN -fopenmp -o "$out/peer-omp" "$here/omp/peer_omp.c"
	else
		skip omp "$CC has no working -fopenmp"
	fi
	rm -f "$out/.omp-probe"
else
	skip pthreads "no C compiler ($CC)"
	skip omp "no C compiler ($CC)"
fi

if ! have "$CXX"; then
	skip tbb "no C++ compiler ($CXX): apt-get install g++"
	skip boostfiber "no C++ compiler ($CXX): apt-get install g++"
else
	if hdr oneapi/tbb/task_group.h; then
		step tbb $CXX -std=c++17 $CXXFLAGS $WARN -o "$out/peer-tbb" "$here/tbb/peer_tbb.cpp" -ltbb -pthread
	else
		skip tbb "oneTBB headers missing: apt-get install libtbb-dev"
	fi
	if hdr boost/fiber/all.hpp; then
		step boostfiber $CXX -std=c++17 $CXXFLAGS $WARN -o "$out/peer-boostfiber" \
			"$here/boostfiber/peer_boostfiber.cpp" -lboost_fiber -lboost_context -pthread
	else
		skip boostfiber "Boost.Fiber headers missing: apt-get install libboost-fiber-dev"
	fi
fi

# ---- Go -----------------------------------------------------------------------
if have go; then
	gocache=${GOCACHE:-$out/go-cache}
	if (cd "$here/go" && GOPROXY=off GOFLAGS=-mod=mod GOCACHE=$gocache \
		go build -o "$out/peer-go" . >>"$log" 2>&1); then ok go; else fail go; fi
	# the servers of `usched bench tbench|pgbench|redis|http --peers`
	if (cd "$here/goserve" && GOPROXY=off GOFLAGS=-mod=mod GOCACHE=$gocache \
		go build -o "$out/peer-goserve" . >>"$log" 2>&1); then ok goserve; else fail goserve; fi
else
	skip go "no go toolchain: apt-get install golang-go"
	skip goserve "no go toolchain: apt-get install golang-go"
fi

# ---- Tokio (offline, Debian's vendored crates) --------------------------------
cargo=""
if have cargo; then
	cargo=cargo
elif [ -x "${CARGO_HOME:-${HOME:-/root}/.cargo}/bin/cargo" ]; then
	cargo="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin/cargo"
fi
if [ -z "$cargo" ]; then
	skip tokio "no cargo: install rustup's or apt-get install cargo"
elif [ ! -d /usr/share/cargo/registry ] || ! ls -d /usr/share/cargo/registry/tokio-1.* >/dev/null 2>&1; then
	skip tokio "tokio sources missing: apt-get install librust-tokio-dev"
else
	# .cargo/config.toml (source replacement) is found from the working directory
	if (cd "$here/tokio" && "$cargo" build --release --offline --target-dir "$out/tokio-target" \
		>>"$log" 2>&1 && cp "$out/tokio-target/release/peer-tokio" "$out/peer-tokio"); then
		ok tokio
	else
		fail tokio
	fi
fi

echo "peers built:${built:- none}"
echo "peers skipped:${skipped:- none}"
if [ -n "$failed" ]; then
	echo "peers FAILED:$failed (log: $log)"
	exit 1
fi
exit 0
