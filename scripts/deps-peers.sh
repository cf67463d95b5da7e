#!/bin/sh
# Install the Debian packages the benchmark peers need (bench/peers/), then
# optionally build them. Idempotent: packages already installed are not asked for.
#
#   scripts/deps-peers.sh            install only
#   scripts/deps-peers.sh --build [DIR]   install, then bench/peers/build.sh DIR
#
# Packages: golang-go (Go peer), libtbb-dev (oneTBB), libboost-fiber-dev and
# libboost-context-dev (Boost.Fiber), g++ (C++ peers, OpenMP via libgomp),
# librust-tokio-dev (Tokio sources in /usr/share/cargo/registry for an offline
# cargo build; cargo itself is not taken from Debian when one is on PATH).
# The real clients and servers of `usched bench tbench|pgbench|redis|http`:
# dbench (tbench, tbench_srv), postgresql-15 and postgresql-client-15
# (postgres, initdb, pgbench, psql), redis-server and redis-tools, wrk and
# nginx-light; strace for bench/net-syscalls.sh.
set -eu

PKGS="golang-go libtbb-dev libboost-fiber-dev libboost-context-dev g++ librust-tokio-dev
      dbench postgresql-15 postgresql-client-15 redis-server redis-tools wrk nginx-light strace"
# cargo: use the one on PATH (e.g. rustup's); otherwise Debian's.
command -v cargo >/dev/null 2>&1 || PKGS="$PKGS cargo"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
		missing="$missing $p"
	fi
done

if [ -n "$missing" ]; then
	echo "deps-peers: installing:$missing" >&2
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO="sudo"
	export DEBIAN_FRONTEND=noninteractive
	# wait for another apt-get or dpkg (a shared machine) instead of failing
	lock="-o DPkg::Lock::Timeout=600"
	# shellcheck disable=SC2086
	if ! $SUDO apt-get $lock install -y -q --no-install-recommends $missing; then
		$SUDO apt-get $lock update -q
		# shellcheck disable=SC2086
		$SUDO apt-get $lock install -y -q --no-install-recommends $missing
	fi
else
	echo "deps-peers: all packages present" >&2
fi

if [ "${1:-}" = "--build" ]; then
	here=$(cd "$(dirname "$0")/.." && pwd)
	exec "$here/bench/peers/build.sh" "${2:-$here/build/peers}"
fi
