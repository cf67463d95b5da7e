# Cross-building for aarch64 on an x86-64 Debian host:
#   cmake -S . -B build-a64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
# Tests then run under qemu-aarch64 (CMAKE_CROSSCOMPILING_EMULATOR). Needs
# gcc-aarch64-linux-gnu and qemu-user (scripts/deps.sh test) and an arm64
# hwloc: dpkg --add-architecture arm64 && apt-get update &&
# apt-get install libhwloc-dev:arm64. Without it, use usched_add_qemu_test
# (tests/CMakeLists.txt), which needs no hwloc. CI does not use this file.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_ASM_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
# pkg-config must report the arm64 hwloc, not the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
