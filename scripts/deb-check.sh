#!/bin/sh
# Checks the Debian packages of `make deb` on this machine, as a user would
# use them, and leaves the machine as it found it:
#   1. dpkg -i libusched0, libusched-dev and usched-tools (build-deb/deb/);
#   2. builds examples/fork_join.c with `pkg-config --cflags --libs usched`
#      and runs it (against /usr's libusched.so.0);
#   3. runs `usched --version` and `usched topo`; `man -w` finds
#      usched_spawn(3) (a .so link) and usched(1);
#   4. dpkg -r all three (also on failure) and checks that none of their
#      files is left.
# Refuses to run if one of the packages is installed already. Needs root.
set -eu
cd "$(dirname "$0")/.."
pkgs="usched-tools libusched-dev libusched0"
fail() { echo "deb-check: $*" >&2; exit 1; }

set -- build-deb/deb/libusched0_*.deb build-deb/deb/libusched-dev_*.deb build-deb/deb/usched-tools_*.deb
for d in "$@"; do [ -f "$d" ] || fail "$d is missing: run 'make deb' first"; done
for p in $pkgs; do
    if [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)" = installed ]; then
        fail "$p is installed already: remove it first (dpkg -r $p), this check installs and removes it"
    fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/usched-deb.XXXXXX")
installed=0
cleanup() {
    rc=$?
    if [ "$installed" = 1 ]; then
        echo "== dpkg -r $pkgs"
        dpkg -r $pkgs >"$tmp/remove.log" 2>&1 || { cat "$tmp/remove.log"; rc=1; }
        for p in $pkgs; do
            st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
            case "$st" in "" | not-installed | config-files) ;; *) echo "deb-check: $p is still $st" >&2; rc=1 ;; esac
        done
        while read -r f; do
            [ -f "$f" ] || [ -L "$f" ] || continue
            echo "deb-check: $f is left after dpkg -r" >&2
            rc=1
        done <"$tmp/files"
        [ "$rc" -ne 0 ] || echo "deb-check: removed, nothing left"
    fi
    rm -rf "$tmp"
    exit "$rc"
}
trap cleanup EXIT

echo "== dpkg -i $*"
installed=1
dpkg -i "$@"
for p in $pkgs; do dpkg -L "$p"; done | sort -u >"$tmp/files"
echo "$(wc -l <"$tmp/files") paths installed"

echo "== build examples/fork_join.c with pkg-config"
flags=$(pkg-config --cflags --libs usched) || fail "pkg-config does not find usched"
echo "pkg-config --cflags --libs usched: $flags"
# shellcheck disable=SC2086
cc -Wall -Wextra -Werror examples/fork_join.c $flags -o "$tmp/fork_join"
"$tmp/fork_join" 1000000
ldd "$tmp/fork_join" | grep -Eq "=> (/usr)?/lib/.*libusched.so.0" ||
    fail "fork_join does not load /usr's libusched.so.0: $(ldd "$tmp/fork_join" | grep usched)"

echo "== usched"
[ "$(command -v usched)" = /usr/bin/usched ] || fail "usched on PATH is $(command -v usched), not /usr/bin/usched"
usched --version
usched topo

echo "== man pages"
for page in 3:usched_spawn 3:usched_spawn_on 1:usched 7:usched-policies; do
    sec=${page%%:*} name=${page#*:}
    f=/usr/share/man/man$sec/$name.$sec
    if ! [ -f "$f" ] && grep -qx "$f" "$tmp/files"; then
        echo "man $sec $name: not checked, dpkg excludes /usr/share/man here (path-exclude)"
        continue
    fi
    got=$(man -w "$sec" "$name") || fail "man -w $sec $name finds no page"
    # A .so link resolves to its group's page.
    case "$got" in /usr/share/man/man"$sec"/*) ;; *) fail "man -w $sec $name gives $got, not a page under /usr/share/man/man$sec" ;; esac
    man "$sec" "$name" 2>/dev/null >"$tmp/page"
    lines=$(wc -l <"$tmp/page")
    [ "$lines" -gt 5 ] || fail "man $sec $name renders only $lines lines"
    grep -q "$name" "$tmp/page" || fail "man $sec $name does not mention $name"
    echo "man $sec $name: $got, $lines lines"
done
