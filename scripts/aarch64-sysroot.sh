#!/bin/sh
# Unpacks Debian's arm64 hwloc (libhwloc15, libhwloc-dev) and what it links
# with (libudev1), libxml2 (libxml2, libxml2-dev: the topology loader reads
# hwloc XML files with it) and what it links with (libicu72, liblzma5,
# zlib1g), and jansson (libjansson4, libjansson-dev: the CLI writes
# JSON for usched top with it) into DIR, for the aarch64 cross build (make aarch64,
# cmake/aarch64-linux-gnu.cmake -DUSCHED_AARCH64_HWLOC=DIR).
#   scripts/aarch64-sysroot.sh DIR
# The packages come from the machine's Debian mirror through apt-get, with a
# private package list (DIR.apt/): the machine's dpkg gets no arm64
# architecture. Installing them through multiarch (libhwloc-dev:arm64) would
# pull in libc6:arm64, whose loader paths then shadow those of the cross
# toolchain's libc (libc6-arm64-cross, another build) under qemu-aarch64 -L,
# and a program mixing the two hangs. Idempotent: does nothing when DIR has
# hwloc already.
set -eu
dir=${1:?usage: aarch64-sysroot.sh DIR}
pkgs="libhwloc15 libhwloc-dev libudev1 libxml2 libxml2-dev libicu72 liblzma5 zlib1g libjansson4 libjansson-dev"
pc=$dir/usr/lib/aarch64-linux-gnu/pkgconfig
if [ -f "$pc/hwloc.pc" ] && [ -f "$pc/libxml-2.0.pc" ] && [ -f "$pc/jansson.pc" ]; then
    echo "aarch64-sysroot: $dir has hwloc, libxml2 and jansson already"
    exit 0
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
apt=$dir.apt
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs"
# A private list of the machine's sources for arm64 only; no lock on the
# machine's own apt state.
set -- -q -o APT::Architectures::=arm64 -o APT::Architecture=arm64 \
    -o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" \
    -o Dir::State::Status=/dev/null -o Debug::NoLocking=1 -o APT::Sandbox::User=root
echo "aarch64-sysroot: apt-get update (arm64 list in $apt)"
apt-get "$@" update >"$apt/update.log" 2>&1 || { cat "$apt/update.log"; exit 1; }
cd "$apt/debs"
# shellcheck disable=SC2046
apt-get "$@" download $(for p in $pkgs; do printf '%s:arm64 ' "$p"; done)
for deb in ./*.deb; do
    echo "aarch64-sysroot: unpacking $(basename "$deb")"
    dpkg-deb -x "$deb" "$dir"
done
rm -rf "$apt"
for f in hwloc libxml-2.0 jansson; do
    test -f "$dir/usr/lib/aarch64-linux-gnu/pkgconfig/$f.pc" ||
        { echo "aarch64-sysroot: $f.pc missing after unpacking" >&2; exit 1; }
done
echo "aarch64-sysroot: hwloc, libxml2 and jansson for arm64 in $dir"
