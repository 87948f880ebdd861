// Shared by the fuzz targets: the input written to a file in a folder of its own (the
// readers under test take paths), and the rule that a basin::Error is a clean refusal.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/ir/ndarray.h"

namespace basin::fuzz {

// A folder of this process under the temporary directory, created once and removed
// when the process exits normally. Every target asks for it first, so its first call
// also sets the largest tensor the readers may build to 256 MiB: libFuzzer reports an
// allocation over its 4 GB limit as a bug, and a model may legitimately ask for a
// tensor that this machine's memory holds (core/ir/ndarray.h).
inline const std::filesystem::path& work_dir() {
  static const std::filesystem::path dir = [] {
    basin::set_max_tensor_bytes(int64_t{256} << 20);
    std::filesystem::path d = std::filesystem::temp_directory_path() / ("basin_fuzz_" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(work_dir(), ec);
    });
    return d;
  }();
  return dir;
}

inline std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = (work_dir() / name).string();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  f.close();
  if (!f) std::abort();  // the fuzzer's own disk is full: nothing to learn from here
  return path;
}

// A clean refusal: printed when BASIN_FUZZ_VERBOSE is set (replaying one input shows
// why it was refused), silent otherwise.
inline void refused(const std::exception& e) {
  static const bool verbose = std::getenv("BASIN_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "refused: %s\n", e.what());
}

}  // namespace basin::fuzz
