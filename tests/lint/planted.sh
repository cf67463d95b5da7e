#!/bin/sh
# The dependency checkers find what they exist to find: a tree with planted
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

[ "$fails" -eq 0 ] || { echo "planted: $fails check(s) failed"; exit 1; }
echo "planted: the include and call checkers find every planted violation"
