# Debian packages with CPack (make deb): one package per install component
# (cmake/install.cmake):
#   libusched0     lib    the shared library
#   libusched-dev  dev    headers, static library, usched.pc, CMake package,
#                         man pages of sections 3 and 7
#   usched-tools   tools  the usched CLI (linked statically with libusched)
#                         and usched(1)
# Configure with -DCMAKE_INSTALL_PREFIX=/usr so that GNUInstallDirs picks
# Debian's multiarch library folder (the Makefile's deb target does).
# Dependencies are written out, not computed with dpkg-shlibdeps, so that
# `make deb` needs no more than the build does: glibc 2.34 is the newest
# symbol version libusched and usched use (objdump -T), hwloc's runtime is
# libhwloc15 (hwloc 2.x), libxml2's is libxml2 (hwloc XML topology files).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME usched)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "usched maintainers <usched@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_COMPONENTS_ALL lib dev tools)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_OUTPUT_FILE_PREFIX ${PROJECT_BINARY_DIR}/deb)

set(_usched_deb_version "${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}")
set(_usched_about
  "usched runs fibers (user-level threads) on one worker thread per CPU with
per-CPU run queues, and places them by the machine's topology (SMT, caches,
packages, NUMA nodes, read by hwloc) with a selectable policy taken from
real kernels (Linux, FreeBSD ULE, DragonFly bsd4, 4.4BSD) or its own.")

set(CPACK_DEBIAN_LIB_PACKAGE_NAME libusched0)
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIB_PACKAGE_DEPENDS "libc6 (>= 2.34), libhwloc15, libxml2")
set(CPACK_COMPONENT_LIB_DESCRIPTION "topology-aware user-space fiber scheduler (shared library)\n${_usched_about}")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libusched-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libusched0 (= ${_usched_deb_version}), libhwloc-dev, libxml2-dev, pkg-config")
set(CPACK_COMPONENT_DEV_DESCRIPTION "topology-aware user-space fiber scheduler (development files)\n${_usched_about}\n\nThis package holds the headers, the static library, usched.pc, the CMake\npackage and the manual pages of the API.")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME usched-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "libc6 (>= 2.34), libhwloc15, libxml2")
set(CPACK_COMPONENT_TOOLS_DESCRIPTION "topology-aware user-space fiber scheduler (command-line tool)\n${_usched_about}\n\nThis package holds the usched command (usched topo, policies, knobs and\nbench) and its manual page.")

# The shared library's package runs ldconfig through dpkg's trigger, as
# Debian's library packages do.
file(WRITE ${PROJECT_BINARY_DIR}/deb-lib/triggers "activate-noawait ldconfig\n")
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA ${PROJECT_BINARY_DIR}/deb-lib/triggers)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

include(CPack)
