#!/bin/sh
# The preemption handler takes the main executable's code, less libusched's
# section usched_text, for the program's own (src/core/preempt_sig.c, P4).
# That holds only if libusched's code never runs code that the final link
# put among the program's: no direct call or jump from usched_text may land
# outside it (a PLT stub, a compiler helper from libgcc such as aarch64's
# __aarch64_cas4_acq_rel). Calls through the GOT (-fno-plt) land in shared
# objects and are not direct. Prints each offending target.
#
#   sh tests/lint/preempt_text.sh OBJDUMP EXECUTABLE
set -eu
objdump=${1:?usage: preempt_text.sh OBJDUMP EXECUTABLE}
exe=${2:?usage: preempt_text.sh OBJDUMP EXECUTABLE}
t=$(mktemp -d "${TMPDIR:-/tmp}/usched-ptext.XXXXXX")
trap 'rm -rf "$t"' EXIT

# The section's bounds: "  16 usched_text  00036a38  0000000000009630 ..."
"$objdump" -h "$exe" >"$t/h"
bounds=$(awk '$2 == "usched_text" { print $4, $3 }' "$t/h")
if [ -z "$bounds" ]; then
    echo "preempt_text: $exe has no usched_text section (is libusched linked in statically?)"
    exit 1
fi
"$objdump" -d --no-show-raw-insn -j usched_text "$exe" >"$t/d"

# GNU objdump and llvm-objdump (a clang build's CMAKE_OBJDUMP) differ in
# the spaces after an address and the 0x before a target; both are read.
# Allowed: glibc links pthread_atfork into every program (libc_nonshared.a),
# and libusched calls it once, at start, holding no usched lock (io_start in
# src/io/poller.c): a preemption in it takes nothing from libusched, and the
# stub's own jump lands in the C library, which is never interrupted.
# And libgcc's initialiser of aarch64's outline atomics (a constructor that
# asks __getauxval whether the CPU has LSE atomics) runs before main, on no
# fiber: its PLT call is never preempted.
allowed=" pthread_atfork __pthread_atfork __getauxval@plt "
# Direct branches (x86-64: call, jmp, jcc; aarch64: b, bl, b.cond, cbz,
# cbnz, tbz, tbnz) end in "TARGET <symbol>"; indirect ones (call *...,
# blr) and address computations (lea ... # X, adrp) do not count.
awk -v bounds="$bounds" -v allowed="$allowed" '
function hex(s,    i, v) {
    v = 0
    s = tolower(s)
    for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
    return v
}
BEGIN { split(bounds, b, " "); lo = hex(b[1]); hi = lo + hex(b[2]); n = 0; bad = 0 }
/^ *[0-9a-f]+:[ \t]/ {
    n++
    split($0, f, "\t")
    split(f[2], m, " ")
    op = m[1]
    if (op == "bnd" || op == "notrack" || op == "addr32") op = m[2] # prefixes; addr32: a GOT call the linker made direct
    if (op !~ /^(call|callq|jmp|jmpq|j[a-z]+|b|bl|b\.[a-z]+|cbz|cbnz|tbz|tbnz)$/) next
    if ($0 ~ /#/ || $0 !~ /[0-9a-f]+ <[^>]*>$/) next
    target = $0
    sub(/ <[^>]*>$/, "", target)
    sub(/.*[ ,\t]/, "", target)
    sub(/^0x/, "", target)
    v = hex(target)
    if (v >= lo && v < hi) next
    sym = $0
    sub(/.*</, "", sym)
    sub(/>$/, "", sym)
    if (index(allowed, " " sym " ")) next
    if (!(sym in seen)) { seen[sym] = 1; print "  " sym }
    bad++
}
END {
    if (n == 0) { print "preempt_text: no instructions disassembled in usched_text"; exit 1 }
    if (bad) {
        printf "preempt_text: %d direct calls or jumps leave usched_text for the program%s text (above): ", bad, "\047s"
        print "a preemption there would interrupt libusched (CMakeLists.txt, the static library)"
        exit 1
    }
    printf "preempt_text: %d instructions of usched_text, no direct branch out of it\n", n
}' "$t/d"
