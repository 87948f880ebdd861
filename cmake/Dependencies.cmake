# Finds basin's dependencies. Required ones stop the configure with a clear message;
# optional ones (LLVM, CUDA, XGBoost, ONNX, MPI) are on by default where found, and
# one line says what was enabled.

find_package(Threads REQUIRED)

# LibTorch (the reference executor, the estimators): Debian's libtorch-dev, unless the
# Python environment basin is built for carries its own (a torch wheel from PyPI). A
# process holds one LibTorch only (two versions' static registrations collide), so the
# Python package links the torch its users import. BASIN_TORCH_PYTHON: the interpreter
# whose torch to ask (`pip install .` asks the one installing; empty: none).
if(SKBUILD AND NOT DEFINED BASIN_TORCH_PYTHON)
  set(BASIN_TORCH_PYTHON "${Python_EXECUTABLE}")
endif()
set(BASIN_TORCH_PACKAGE "")
if(BASIN_TORCH_PYTHON)
  # pip's build isolation hides the environment's own packages: ask without it.
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env --unset=PYTHONPATH --unset=PYTHONNOUSERSITE --unset=PYTHONHOME
            ${BASIN_TORCH_PYTHON} -c "import os, torch; print(os.path.dirname(torch.__file__))"
    OUTPUT_VARIABLE _torch_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _torch_rc)
  if(_torch_rc EQUAL 0 AND EXISTS "${_torch_dir}/lib/libtorch_cpu.so")
    file(REAL_PATH "${_torch_dir}/lib/libtorch_cpu.so" _torch_lib)
    string(FIND "${_torch_lib}" "${_torch_dir}/" _at)
    if(_at EQUAL 0)  # its own libraries, not links to the system's
      set(BASIN_TORCH_PACKAGE "${_torch_dir}")  # found by the RPATH of what links it (INSTALL_RPATH_USE_LINK_PATH)
    endif()
  endif()
endif()
if(BASIN_TORCH_PACKAGE)
  message(STATUS "basin: LibTorch of the Python environment: ${BASIN_TORCH_PACKAGE}")
  add_library(basin_torch INTERFACE)
  # The CPU libraries only: libtorch.so would bring the wheel's CUDA libraries in.
  target_link_libraries(basin_torch INTERFACE ${BASIN_TORCH_PACKAGE}/lib/libtorch_cpu.so
                        ${BASIN_TORCH_PACKAGE}/lib/libc10.so)
  target_include_directories(basin_torch SYSTEM INTERFACE ${BASIN_TORCH_PACKAGE}/include
                             ${BASIN_TORCH_PACKAGE}/include/torch/csrc/api/include)
  # torch 2.x's headers need C++20; basin's code is C++17 that also compiles as C++20.
  set(CMAKE_CXX_STANDARD 20)
  set(Torch_VERSION "of ${BASIN_TORCH_PACKAGE}")
else()
  find_package(Torch REQUIRED)  # libtorch-dev
  # Torch's exported flags include warnings we do not control; its headers are system headers.
  add_library(basin_torch INTERFACE)
  target_link_libraries(basin_torch INTERFACE ${TORCH_LIBRARIES})
  target_include_directories(basin_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
endif()
find_package(CLI11 REQUIRED)          # libcli11-dev
find_package(nlohmann_json REQUIRED)  # nlohmann-json3-dev
find_package(fmt REQUIRED)            # libfmt-dev
find_package(Boost 1.74 REQUIRED)     # libboost-graph-dev: the network graph (header-only)
find_package(GTest)                   # libgtest-dev


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
# ONNX's CMake config names protobuf::libprotobuf without finding it (Debian's
# LibTorch config finds it; a torch wheel's is not read).
basin_optional(ONNX ONNX_FOUND "find_package(Protobuf QUIET)\nfind_package(ONNX QUIET)")
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
