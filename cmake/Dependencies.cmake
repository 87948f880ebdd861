# Finds basin's dependencies. Required ones stop the configure with a clear message;
# optional ones (LLVM, CUDA, XGBoost, ONNX, MPI) are on by default where found, and
# one line says what was enabled.

find_package(Threads REQUIRED)
find_package(Torch REQUIRED)          # libtorch-dev: the reference executor, later the MLP
find_package(CLI11 REQUIRED)          # libcli11-dev
find_package(nlohmann_json REQUIRED)  # nlohmann-json3-dev
find_package(fmt REQUIRED)            # libfmt-dev
find_package(Boost 1.74 REQUIRED)     # libboost-graph-dev: the network graph (header-only)
find_package(GTest)                   # libgtest-dev

# Torch's exported flags include warnings we do not control; its headers are system headers.
add_library(basin_torch INTERFACE)
target_link_libraries(basin_torch INTERFACE ${TORCH_LIBRARIES})
target_include_directories(basin_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})

# basin_optional(NAME FOUND_VAR "find_package(...)"): option BASIN_WITH_NAME (on by
# default) and BASIN_HAVE_NAME, true when enabled and found.
macro(basin_optional NAME VAR CALL)
  option(BASIN_WITH_${NAME} "Build with ${NAME} (on where found)" ON)
  set(BASIN_HAVE_${NAME} OFF)
  if(BASIN_WITH_${NAME})
    cmake_language(EVAL CODE "${CALL}")
    if(${VAR})
      set(BASIN_HAVE_${NAME} ON)
    endif()
  endif()
endmacro()

basin_optional(LLVM LLVM_FOUND "find_package(LLVM 16 CONFIG QUIET HINTS /usr/lib/llvm-16/lib/cmake/llvm)")
basin_optional(CUDA CUDAToolkit_FOUND "find_package(CUDAToolkit QUIET)")
# Debian's xgboost CMake config insists on the xgboost CLI binary; the C API is all we
# use, so find the library and header directly.
basin_optional(XGBOOST XGBOOST_FOUND [=[
  find_library(XGBOOST_LIBRARY xgboost)
  find_path(XGBOOST_INCLUDE_DIR xgboost/c_api.h)
  if(XGBOOST_LIBRARY AND XGBOOST_INCLUDE_DIR)
    set(XGBOOST_FOUND ON)
  endif()
]=])
basin_optional(ONNX ONNX_FOUND "find_package(ONNX QUIET)")
basin_optional(MPI MPI_CXX_FOUND "find_package(MPI QUIET COMPONENTS CXX)")

set(_basin_on "")
set(_basin_off "")
foreach(dep LLVM CUDA XGBOOST ONNX MPI)
  if(BASIN_HAVE_${dep})
    list(APPEND _basin_on ${dep})
  else()
    list(APPEND _basin_off ${dep})
  endif()
endforeach()
string(REPLACE ";" " " _basin_on "${_basin_on}")
string(REPLACE ";" " " _basin_off "${_basin_off}")
message(STATUS "basin: enabled [${_basin_on}] disabled [${_basin_off}] (LibTorch ${Torch_VERSION})")
