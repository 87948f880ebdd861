# `cmake --install` puts the libraries, the public headers and an exported CMake
# package (find_package(basin)) under the prefix.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS basin_core basin_codegen basin_warnings basin_torch EXPORT basinTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/basin)
install(TARGETS basin RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The pretrained estimators, where models::pretrained_cpu_path looks for them.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/models/weights/ DESTINATION ${CMAKE_INSTALL_DATADIR}/basin)
foreach(lib core codegen)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${lib}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/basin/${lib}
          FILES_MATCHING PATTERN "*.h")
endforeach()
install(EXPORT basinTargets NAMESPACE basin:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/basin)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/basinConfig.cmake.in
  ${CMAKE_BINARY_DIR}/basinConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/basin)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/basinConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/basinConfig.cmake ${CMAKE_BINARY_DIR}/basinConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/basin)
