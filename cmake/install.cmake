# Installation: the shared and static library, the include/ tree, a
# pkg-config file (usched.pc), a CMake package (find_package(usched)
# giving usched::usched and usched::usched_static) and the manual.
# Components, one per Debian package (cmake/package.cmake):
#   lib    the shared library (libusched0)
#   dev    headers, static library, .so link, usched.pc, CMake package,
#          section 3 and 7 pages (libusched-dev)
#   tools  the usched CLI and usched(1) (usched-tools; rule in CMakeLists.txt)
include(CMakePackageConfigHelpers)

set(USCHED_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/usched)
set(USCHED_PKGCONFIGDIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(TARGETS usched usched_static
  EXPORT usched-targets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lib NAMELINK_COMPONENT dev
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT lib
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev
  FILES_MATCHING PATTERN "*.h")
# The manual: man/man3/<function>.3 for every exported function (a page or a
# one-line .so link to its group's page), usched(1), usched-policies(7).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/man/man3 ${PROJECT_SOURCE_DIR}/man/man7
  DESTINATION ${CMAKE_INSTALL_MANDIR} COMPONENT dev)

install(EXPORT usched-targets
  NAMESPACE usched::
  FILE usched-targets.cmake
  DESTINATION ${USCHED_CMAKEDIR} COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/usched-config.cmake.in
  ${PROJECT_BINARY_DIR}/usched-config.cmake
  INSTALL_DESTINATION ${USCHED_CMAKEDIR})
# 0.x: a minor release may break the API, so only the same minor matches.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/usched-config-version.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/usched-config.cmake
  ${PROJECT_BINARY_DIR}/usched-config-version.cmake
  DESTINATION ${USCHED_CMAKEDIR} COMPONENT dev)

# The .pc file finds the prefix from its own place (${pcfiledir}), so it stays
# right under `cmake --install --prefix`, DESTDIR and a moved tree.
file(RELATIVE_PATH USCHED_PC_TO_PREFIX
  ${CMAKE_INSTALL_PREFIX}/${USCHED_PKGCONFIGDIR} ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" USCHED_PC_TO_PREFIX "${USCHED_PC_TO_PREFIX}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/usched.pc.in ${PROJECT_BINARY_DIR}/usched.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/usched.pc DESTINATION ${USCHED_PKGCONFIGDIR} COMPONENT dev)
