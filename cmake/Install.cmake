# `cmake --install` puts the `basin` command, the C++ API (libbasin.so and
# <basin/basin.h>), the pretrained estimators and a CMake package under the prefix:
# find_package(basin) then target_link_libraries(APP PRIVATE basin::basin)
# (docs/examples/CMakeLists.txt).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set_target_properties(basin PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
install(TARGETS basin RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS basin_api EXPORT basinTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_SOURCE_DIR}/api/include/basin/basin.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/basin)
# The pretrained estimators, where models::pretrained_cpu_path looks for them.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/models/weights/ DESTINATION ${CMAKE_INSTALL_DATADIR}/basin)
install(EXPORT basinTargets NAMESPACE basin:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/basin)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/basinConfig.cmake.in
  ${CMAKE_BINARY_DIR}/basinConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/basin)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/basinConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/basinConfig.cmake ${CMAKE_BINARY_DIR}/basinConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/basin)
