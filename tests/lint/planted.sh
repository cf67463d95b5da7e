#!/bin/sh
# The dependency checkers (scripts/check-includes.sh, check-calls.sh and
# check-floors.sh) find what they exist to find: a tree with planted
# violations must fail each check with one line per violation, and the same
# tree without them must pass.
#
#   sh tests/lint/planted.sh REPOSITORY
set -eu
root=$(cd "${1:?usage: planted.sh REPOSITORY}" && pwd)
cc=${CC:-cc}
t=$(mktemp -d "${TMPDIR:-/tmp}/usched-planted.XXXXXX")
trap 'rm -rf "$t"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_exit CODE OUTFILE COMMAND...: runs COMMAND, output to OUTFILE
expect_exit() {
    want=$1 out=$2
    shift 2
    rc=0
    "$@" >"$out" 2>&1 || rc=$?
    [ "$rc" -eq "$want" ] || { fail "$* exited $rc, not $want:"; cat "$out"; }
}
# expect_line OUTFILE PATTERN: a line of OUTFILE matches the grep -E PATTERN
expect_line() {
    grep -Eq "$2" "$1" || { fail "no line matching '$2' in:"; cat "$1"; }
}

# ---- includes ----
mkdir -p "$t/tree/src/base" "$t/tree/src/core" "$t/tree/src/io" "$t/tree/src/sync" \
         "$t/tree/include" "$t/tree/servers" "$t/tree/tools/bench" "$t/tree/tools/usched"
cd "$t/tree"
printf 'int usched__core_fn(void);\n' > src/core/x.h
printf 'int usched__io_fn(void);\n' > src/io/y.h
printf '#include <stdio.h>\n#include "../base/b.h"\n' > src/core/ok.c
printf 'int usched__base_fn(void);\n' > src/base/b.h
printf '#include <stdint.h>\n' > include/pub.h
printf 'int bench_run(void);\n' > tools/bench/bench.h
printf '#include "bench.h"\n' > tools/usched/cmd.c            # the CLI on the harness (its include path)
expect_exit 0 "$t/out" sh "$root/scripts/check-includes.sh" .
printf '#include "core/x.h"\n' > src/base/a.c                  # quoted, upward
printf '#include <io/y.h>\n' > src/sync/b.c                    # angle brackets, upward
printf '#include "../src/core/x.h"\n' > include/leak.h         # a public header on src/
printf '#include "core/x.h"\n' > tools/bench/h.c               # the benchmark harness on the core
expect_exit 1 "$t/out" sh "$root/scripts/check-includes.sh" .
expect_line "$t/out" '^src/base/a.c:1: #include core/x.h: base may not include core'
expect_line "$t/out" '^src/sync/b.c:1: #include io/y.h: sync may not include io'
expect_line "$t/out" '^include/leak.h:1: #include \.\./src/core/x.h: include may not include core'
expect_line "$t/out" '^tools/bench/h.c:1: #include core/x.h: bench may not include core'
[ "$(grep -c 'may not include' "$t/out")" -eq 4 ] || { fail "not exactly 4 include violations:"; cat "$t/out"; }

# ---- calls ----
mkdir -p "$t/obj/src/base" "$t/obj/src/core" "$t/obj/src/io"
printf 'int usched__core_fn(void);\nint usched__base_fn(void) { return usched__core_fn(); }\n' > "$t/b.c"
printf 'int usched__base_fn(void);\nint usched_public(void);\nint usched__core_fn(void) { return usched__base_fn() + usched_public(); }\n' > "$t/c.c"
printf 'int usched__core_fn(void);\nint usched_public(void) { return usched__core_fn(); }\n' > "$t/i.c"
"$cc" -c -o "$t/obj/src/base/b.c.o" "$t/b.c"
"$cc" -c -o "$t/obj/src/core/c.c.o" "$t/c.c"
"$cc" -c -o "$t/obj/src/io/i.c.o" "$t/i.c"
objs="$t/obj/src/base/b.c.o $t/obj/src/core/c.c.o $t/obj/src/io/i.c.o"
: > "$t/known"
# shellcheck disable=SC2086
expect_exit 1 "$t/out" sh "$root/scripts/check-calls.sh" "$root/scripts/check-includes.sh" "$t/known" $objs
expect_line "$t/out" '^src/base/b.c: uses usched__core_fn \(src/core/c.c, core\): base may not call core'
[ "$(grep -c 'may not call' "$t/out")" -eq 1 ] || { fail "not exactly 1 call violation:"; cat "$t/out"; }
echo 'base core usched__core_fn  # planted' > "$t/known"
# shellcheck disable=SC2086
expect_exit 0 "$t/out" sh "$root/scripts/check-calls.sh" "$root/scripts/check-includes.sh" "$t/known" $objs
echo 'core io usched__io_fn  # gone' >> "$t/known"
# shellcheck disable=SC2086
expect_exit 1 "$t/out" sh "$root/scripts/check-calls.sh" "$root/scripts/check-includes.sh" "$t/known" $objs
expect_line "$t/out" 'core io usched__io_fn" is listed as a known crossing but no object makes it'

# ---- floors of the core ----
# high.c on floor 3, mid.c on 1, low.c and low2.c on 0: a clean tree, then an
# upward call (low.c -> high.c), an upward include (low2.c of high.h), a
# circle on one floor (low.c <-> low2.c) and a file without a floor.
f=$t/floors
mkdir -p "$f/src/core" "$f/obj/src/core" "$f/obj/src/base"
printf '3 high.c high.h\n1 mid.c\n0 low.c low.h low2.c\n' > "$f/table"
printf 'int usched__high_fn(void);\n' > "$f/src/core/high.h"
printf 'int usched__low_fn(void);\n' > "$f/src/core/low.h"
printf '#include "core/low.h"\nint usched__high_fn(void) { return 3; }\n' > "$f/src/core/high.c"
printf '#include "core/low.h"\nint usched__mid_fn(void) { return usched__low_fn(); }\n' > "$f/src/core/mid.c"
printf 'int usched__low_fn(void) { return 0; }\n' > "$f/src/core/low.c"
printf 'int usched__low2_fn(void) { return 0; }\n' > "$f/src/core/low2.c"
printf 'int usched__high_fn(void);\nint usched__base_fn(void) { return usched__high_fn(); }\n' > "$f/b.c"
floors_build() {
    for c in high mid low low2; do
        "$cc" -c -I "$f/src" -o "$f/obj/src/core/$c.c.o" "$f/src/core/$c.c"
    done
    "$cc" -c -o "$f/obj/src/base/b.c.o" "$f/b.c"     # another area: check-calls.sh's
}
fobjs="$f/obj/src/core/high.c.o $f/obj/src/core/mid.c.o $f/obj/src/core/low.c.o $f/obj/src/core/low2.c.o $f/obj/src/base/b.c.o"
floors_build
: > "$t/known"
# shellcheck disable=SC2086
expect_exit 0 "$t/out" sh "$root/scripts/check-floors.sh" "$f/table" "$t/known" "$f" $fobjs
printf 'int usched__high_fn(void);\nint usched__low2_fn(void);\n' > "$f/src/core/low.c"
printf 'int usched__low_fn(void) { return usched__high_fn() + usched__low2_fn(); }\n' >> "$f/src/core/low.c"
printf '#include "core/high.h"\n#include "core/low.h"\n' > "$f/src/core/low2.c"
printf 'int usched__low2_fn(void) { return usched__low_fn(); }\n' >> "$f/src/core/low2.c"
floors_build
# shellcheck disable=SC2086
expect_exit 1 "$t/out" sh "$root/scripts/check-floors.sh" "$f/table" "$t/known" "$f" $fobjs
expect_line "$t/out" '^src/core/low.c: uses usched__high_fn \(src/core/high.c\): low.c \(floor 0\) may not call high.c \(floor 3\)'
expect_line "$t/out" '^src/core/low2.c:1: #include core/high.h: low2.c \(floor 0\) may not include high.h \(floor 3\)'
expect_line "$t/out" '^src/core: low.c low2.c call each other in a circle'
[ "$(grep -c 'may not' "$t/out")" -eq 2 ] || { fail "not exactly 2 floor violations:"; cat "$t/out"; }
[ "$(grep -c 'circle' "$t/out")" -eq 1 ] || { fail "not exactly 1 circle:"; cat "$t/out"; }
printf 'call low.c high.c usched__high_fn  # planted\ninclude low2.c high.h  # planted\ncircle low2.c low.c  # planted\n' > "$t/known"
# shellcheck disable=SC2086
expect_exit 0 "$t/out" sh "$root/scripts/check-floors.sh" "$f/table" "$t/known" "$f" $fobjs
echo 'call mid.c high.c usched__high_fn  # gone' >> "$t/known"
# shellcheck disable=SC2086
expect_exit 1 "$t/out" sh "$root/scripts/check-floors.sh" "$f/table" "$t/known" "$f" $fobjs
expect_line "$t/out" 'call mid.c high.c usched__high_fn" is listed as a known exception but is not found'
printf 'int usched__new_fn(void);\n' > "$f/src/core/new.h"
# shellcheck disable=SC2086
expect_exit 1 "$t/out" sh "$root/scripts/check-floors.sh" "$f/table" "$t/known" "$f" $fobjs
expect_line "$t/out" '^src/core/new.h: has no floor in '

[ "$fails" -eq 0 ] || { echo "planted: $fails check(s) failed"; exit 1; }
echo "planted: the include, call and floors checkers find every planted violation"
