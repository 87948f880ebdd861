// libFuzzer target: basin's .npy reader (basin run --input). Any bytes either read as
// an array whose size matches its header or are refused with basin::Error.
#include <cstdint>

#include "core/ir/npy.h"
#include "core/util/error.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = basin::fuzz::write_input("input.npy", data, size);
  try {
    basin::NDArray a = basin::read_npy(path);
    // The array's bytes all lie in the file after its header.
    if (static_cast<size_t>(a.nbytes()) > size) __builtin_trap();
  } catch (const basin::Error& e) {
    basin::fuzz::refused(e);
  }
  return 0;
}
