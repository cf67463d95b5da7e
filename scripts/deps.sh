#!/bin/sh
# Installs the Debian packages usched needs that are missing, and nothing else.
#   scripts/deps.sh         to build and run: compiler, make, cmake, pkg-config, hwloc,
#                           libxml2, jansson
#   scripts/deps.sh test    also what the test suite needs
#   scripts/deps.sh aarch64 what the aarch64 cross build and its suite under
#                           qemu need (make aarch64; hwloc for arm64 comes
#                           from scripts/aarch64-sysroot.sh)
# Idempotent and quick when all is there: one dpkg-query, no apt-get at all.
# apt-get update runs only when something is missing. Needs root (or sudo).
set -eu

# libxml2-dev: the topology loader reads hwloc XML files with libxml2
#   (src/topo/xmlcheck.c);
# libjansson-dev: `usched top --json` writes its JSON with jansson (and its tests read it).
base="make gcc libc6-dev cmake pkg-config hwloc libhwloc-dev libxml2-dev libjansson-dev"
# gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user: the aarch64 context
#   switch test, cross-built and run under qemu-aarch64;
# valgrind: <valgrind/valgrind.h> for stack registration;
# bzip2: tar xjf of the captured topologies in tests/data/topologies;
# libudev-dev: `pkg-config --static --libs usched` names -ludev (hwloc's
#   Libs.private), zlib1g-dev and liblzma-dev (-lz, -llzma: libxml2's),
#   used by the install test's static link.
# clang: CI's Release build with clang (-Wall -Wextra -Werror);
# libclang-rt-14-dev: libFuzzer and clang's sanitizer runtimes (scripts/fuzz.sh);
# groff-base, man-db: the man_pages test renders every page (groff, man -l);
# spin: the model checker of model/ (make model, the model stage of CI);
# python3: tests/trace/check_trace.py reads trace files and SVGs (json, xml);
# tmux: tests/top runs `usched top` in a real terminal and reads its screen;
# dbench (tbench), postgresql-client-15 (pgbench, psql), redis-tools
#   (redis-benchmark, redis-cli), wrk: the real clients the server tests
#   (tests/servers) drive usched's servers with.
test_extra="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user valgrind bzip2 libudev-dev zlib1g-dev liblzma-dev clang libclang-rt-14-dev groff-base man-db spin python3 tmux
            dbench postgresql-client-15 redis-tools wrk"

aarch64_extra="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user bzip2"

case "${1:-}" in
"") want=$base ;;
test) want="$base $test_extra" ;;
aarch64) want="$base $aarch64_extra" ;;
*) echo "deps.sh: unknown set '$1' (use no argument, 'test' or 'aarch64')" >&2; exit 2 ;;
esac

# One query for all: a line "<name> <status>" for each package dpkg knows.
# shellcheck disable=SC2086
installed=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' $want 2>/dev/null || true)
nl='
'
missing=
for p in $want; do
    case "$nl$installed$nl" in
    *"$nl$p installed$nl"*) ;;
    *) missing="$missing $p" ;;
    esac
done
if [ -z "$missing" ]; then
    echo "deps.sh: all present ($want)"
    exit 0
fi

echo "deps.sh: installing:$missing"
if [ "$(id -u)" -eq 0 ]; then
    sudo=
elif command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
else
    echo "deps.sh: missing packages:$missing; run as root (or install sudo)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
# shellcheck disable=SC2086
$sudo apt-get install -y -q --no-install-recommends $missing </dev/null
