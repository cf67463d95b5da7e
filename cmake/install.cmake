# Installation: the shared and static library, the include/ tree, a
# pkg-config file (usched.pc) and a CMake package (find_package(usched)
# giving usched::usched and usched::usched_static).
include(CMakePackageConfigHelpers)

set(USCHED_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/usched)
set(USCHED_PKGCONFIGDIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(TARGETS usched usched_static
  EXPORT usched-targets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")

install(EXPORT usched-targets
  NAMESPACE usched::
  FILE usched-targets.cmake
  DESTINATION ${USCHED_CMAKEDIR})
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
  DESTINATION ${USCHED_CMAKEDIR})

# The .pc file finds the prefix from its own place (${pcfiledir}), so it stays
# right under `cmake --install --prefix`, DESTDIR and a moved tree.
file(RELATIVE_PATH USCHED_PC_TO_PREFIX
  ${CMAKE_INSTALL_PREFIX}/${USCHED_PKGCONFIGDIR} ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" USCHED_PC_TO_PREFIX "${USCHED_PC_TO_PREFIX}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/usched.pc.in ${PROJECT_BINARY_DIR}/usched.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/usched.pc DESTINATION ${USCHED_PKGCONFIGDIR})
