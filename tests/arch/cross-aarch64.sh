#!/bin/sh
# Cross-compiles the aarch64 context switch, fctx and the switch tests, and
# runs them under qemu-user (binfmt may be absent, so qemu is called
# explicitly).
#   cross-aarch64.sh <source dir> <build dir> <aarch64 gcc> <qemu-aarch64>
# Exits 77 (CTest: skipped) when the compiler or qemu is missing.
set -eu
src=$1 out=$2 cc=${3:-} qemu=${4:-}
case "$cc" in ''|*NOTFOUND) echo "aarch64-linux-gnu-gcc not found: skipped"; exit 77 ;; esac
case "$qemu" in ''|*NOTFOUND) echo "qemu-aarch64 not found: skipped"; exit 77 ;; esac
sysroot=/usr/aarch64-linux-gnu
mkdir -p "$out"
flags="-std=gnu11 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -I$src/src -I$src/tests"
arch="$src/src/arch/aarch64/switch.S $src/src/arch/aarch64/ctx.c"
"$cc" $flags -o "$out/arch_switch" "$src/tests/arch/switch.c" \
    "$src/tests/arch/regs_aarch64.S" $arch -lm
"$cc" $flags -o "$out/arch_fctx" "$src/tests/arch/fctx.c" \
    "$src/src/core/fctx.c" $arch -lpthread
for t in arch_switch arch_fctx; do
    echo "== $t (aarch64, qemu)"
    "$qemu" -L "$sysroot" "$out/$t"
done
