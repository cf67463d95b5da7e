#!/bin/sh
# Installs the Debian packages usched needs that are missing, and nothing else.
#   scripts/deps.sh         to build and run: compiler, make, cmake, pkg-config, hwloc
#   scripts/deps.sh test    also what the test suite needs
# Idempotent and quick when all is there: one dpkg-query, no apt-get at all.
# apt-get update runs only when something is missing. Needs root (or sudo).
set -eu

base="make gcc libc6-dev cmake pkg-config hwloc libhwloc-dev"
# gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user: the aarch64 context
#   switch test, cross-built and run under qemu-aarch64;
# valgrind: <valgrind/valgrind.h> for stack registration;
# bzip2: tar xjf of the captured topologies in ../shared/topologies;
# libudev-dev: `pkg-config --static --libs usched` names -ludev (hwloc's
#   Libs.private), used by the install test's static link.
test_extra="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user valgrind bzip2 libudev-dev"

case "${1:-}" in
"") want=$base ;;
test) want="$base $test_extra" ;;
*) echo "deps.sh: unknown set '$1' (use no argument, or 'test')" >&2; exit 2 ;;
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
