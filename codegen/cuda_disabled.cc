// The CUDA target when basin is built without the CUDA toolkit: NVRTC is missing, and
// the driver is never looked for.
#include "codegen/cuda.h"
#include "core/util/error.h"

namespace basin::codegen {

bool nvrtc_enabled() { return false; }

CudaBinary compile_cuda(const std::string&, const std::string& name, const std::string&) {
  throw Error("cannot compile '" + name + "' for the cuda target: basin was built without the CUDA toolkit (NVRTC)");
}

bool cuda_available(std::string* why) {
  if (why) *why = "basin was built without the CUDA toolkit";
  return false;
}

std::string cuda_device_arch() { throw Error("the cuda target is unavailable: basin was built without the CUDA toolkit"); }

}  // namespace basin::codegen
