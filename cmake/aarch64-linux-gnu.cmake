# Cross-building usched and its whole test suite for aarch64 on an x86-64
# Debian host, the tests running under qemu-aarch64 (`make aarch64` does all
# of it):
#   sh scripts/deps.sh aarch64
#   sh scripts/aarch64-sysroot.sh build-aarch64/sysroot
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
#         -DUSCHED_AARCH64_HWLOC=$PWD/build-aarch64/sysroot
# The C library is the cross toolchain's (libc6-dev-arm64-cross, under
# /usr/aarch64-linux-gnu); hwloc is Debian's arm64 package unpacked into
# USCHED_AARCH64_HWLOC (scripts/aarch64-sysroot.sh says why not multiarch).
# Tests run under CMAKE_CROSSCOMPILING_EMULATOR; tests that start programs
# themselves get it as USCHED_TEST_EMULATOR (tests/run.h), since without
# binfmt_misc the host kernel cannot start an aarch64 binary directly.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_ASM_COMPILER aarch64-linux-gnu-gcc)

set(USCHED_AARCH64_HWLOC "" CACHE PATH "Root holding Debian's arm64 hwloc (scripts/aarch64-sysroot.sh)")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES USCHED_AARCH64_HWLOC)
if(NOT USCHED_AARCH64_HWLOC OR NOT EXISTS "${USCHED_AARCH64_HWLOC}/usr/lib/aarch64-linux-gnu/pkgconfig/hwloc.pc")
  message(FATAL_ERROR "cmake/aarch64-linux-gnu.cmake: USCHED_AARCH64_HWLOC='${USCHED_AARCH64_HWLOC}' "
                      "holds no arm64 hwloc: run 'sh scripts/aarch64-sysroot.sh DIR' and configure "
                      "with -DUSCHED_AARCH64_HWLOC=DIR (make aarch64 does both)")
endif()
set(_hw "${USCHED_AARCH64_HWLOC}")
set(_hwlib "${_hw}/usr/lib/aarch64-linux-gnu")

set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu "${_hw}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config reports the arm64 hwloc, with its paths under the root.
set(ENV{PKG_CONFIG_LIBDIR} "${_hwlib}/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${_hw}")
# hwloc's arch-specific header (hwloc/autogen/config.h) and, at link time,
# what libhwloc.so needs (libudev) and what libxml2.so needs (libicu under
# /usr/lib, zlib and liblzma under /lib: Debian 12's packages still ship
# them there).
set(_hwlib2 "${_hw}/lib/aarch64-linux-gnu")
set(CMAKE_C_FLAGS_INIT "-isystem ${_hw}/usr/include/aarch64-linux-gnu")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,-rpath-link,${_hwlib} -Wl,-rpath-link,${_hwlib2}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-Wl,-rpath-link,${_hwlib} -Wl,-rpath-link,${_hwlib2}")
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=${_hwlib}:${_hwlib2})
