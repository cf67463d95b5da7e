#!/bin/sh
# Usage: run.sh BUILD_DIR THIS_DIR CC LIBDIR CFLAGS
# Installs BUILD_DIR into a temporary prefix, then builds and runs hello.c
# against the installed copy four ways: pkg-config shared, pkg-config static,
# find_package shared, find_package static.
set -eu
build=$1 here=$2 cc=$3 libdir=$4 cflags=$5

tmp=$(mktemp -d "${TMPDIR:-/tmp}/usched-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

fail() { echo "install test: $*" >&2; exit 1; }
step() { echo "== $*"; }

step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; fail "cmake --install failed"; }
for f in "$libdir/libusched.so" "$libdir/libusched.a" include/usched.h \
         "$libdir/pkgconfig/usched.pc" "$libdir/cmake/usched/usched-config.cmake" \
         "$libdir/cmake/usched/usched-config-version.cmake" "$libdir/cmake/usched/usched-targets.cmake"; do
    [ -e "$prefix/$f" ] || fail "$f is missing from the installed tree"
done
# The manual: every page of man/ is installed, and the CLI reports the
# library's and hwloc's versions.
(cd "$here/../../man" && find . -name '*.[137]') | while read -r m; do
    [ -e "$prefix/share/man/$m" ] || fail "man page $m is not installed (share/man/$m)"
done
if [ -x "$prefix/bin/usched" ]; then
    v=$("$prefix/bin/usched" --version) || fail "usched --version failed"
    echo "usched --version: $v"
    case "$v" in *"library "[0-9]*", hwloc "[0-9]*) ;; *) fail "usched --version: '$v' lacks the library or hwloc version";; esac
fi
# The whole include/ tree is installed (usched/policy.h once it exists).
(cd "$here/../../include" && find . -name '*.h') | while read -r h; do
    [ -e "$prefix/include/$h" ] || fail "include/$h is not installed"
done

# Thread-locals are initial-exec (USCHED_TLS, src/base/export.h): no
# general-dynamic TLS relocation (DTPMOD, TLSDESC) in the shared library,
# whose worker lookups would then each call __tls_get_addr.
if command -v readelf >/dev/null 2>&1; then
    gd=$(readelf -rW "$prefix/$libdir/libusched.so" | grep -E 'DTPMOD|TLSDESC') &&
        fail "libusched.so has general-dynamic TLS relocations (declare thread-locals USCHED_TLS): $gd"
fi

# ---- pkg-config ----------------------------------------------------------------
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
pc_cflags=$(pkg-config --cflags usched) || fail "pkg-config --cflags usched failed"
pc_libs=$(pkg-config --libs usched)
pc_static=$(pkg-config --static --libs usched)
echo "pkg-config --cflags: $pc_cflags"
echo "pkg-config --libs: $pc_libs"
echo "pkg-config --static --libs: $pc_static"
case " $pc_libs " in *" -lhwloc "*) fail "--libs exposes hwloc, a private dependency of the shared library";; esac
case " $pc_static " in *" -lhwloc "*) ;; *) fail "--static --libs lacks -lhwloc (Requires.private)";; esac

step "pkg-config, shared"
# shellcheck disable=SC2086
$cc $cflags "$here/hello.c" $pc_cflags $pc_libs -o "$tmp/hello_pc_shared"
LD_LIBRARY_PATH="$prefix/$libdir" "$tmp/hello_pc_shared"
LD_LIBRARY_PATH="$prefix/$libdir" ldd "$tmp/hello_pc_shared" | grep -q "$prefix/$libdir/libusched.so" ||
    fail "hello_pc_shared does not load the installed libusched.so"

step "pkg-config, static"
# -l:libusched.a picks the archive where -lusched would pick the .so.
pc_static_a=$(echo " $pc_static " | sed 's/ -lusched / -l:libusched.a /')
# shellcheck disable=SC2086
$cc $cflags "$here/hello.c" $pc_cflags $pc_static_a -o "$tmp/hello_pc_static"
"$tmp/hello_pc_static"
if ldd "$tmp/hello_pc_static" | grep -q libusched; then
    fail "hello_pc_static loads a shared libusched"
fi

step "examples/pipeline.c, pkg-config, shared"
# shellcheck disable=SC2086
$cc $cflags "$here/../../examples/pipeline.c" $pc_cflags $pc_libs -o "$tmp/pipeline"
LD_LIBRARY_PATH="$prefix/$libdir" "$tmp/pipeline" 1000

# ---- find_package ----------------------------------------------------------------
step "find_package(usched)"
cmake -S "$here/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$cflags" -DHELLO_SOURCE="$here/hello.c" \
      >"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; fail "configuring the consumer failed"; }
cmake --build "$tmp/consumer" >>"$tmp/consumer.log" 2>&1 ||
    { cat "$tmp/consumer.log"; fail "building the consumer failed"; }
step "find_package, usched::usched"
"$tmp/consumer/hello_shared"
ldd "$tmp/consumer/hello_shared" | grep -q "$prefix/$libdir/libusched.so" ||
    fail "hello_shared does not load the installed libusched.so"
step "find_package, usched::usched_static"
"$tmp/consumer/hello_static"
if ldd "$tmp/consumer/hello_static" | grep -q libusched; then
    fail "hello_static loads a shared libusched"
fi
echo "install test: all four ways built and ran"
