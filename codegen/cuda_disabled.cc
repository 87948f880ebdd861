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

CudaDeviceInfo cuda_device_info() {
  throw Error("the cuda target is unavailable: basin was built without the CUDA toolkit");
}
std::string cuda_device_arch() { return cuda_device_info().arch; }
bool cuda_driver_initialized_here() { return false; }

struct CudaProgram::Impl {};
CudaProgram::CudaProgram(const CudaBinary&, const std::vector<std::pair<std::string, GpuLaunch>>&) {
  throw Error("the cuda target is unavailable: basin was built without the CUDA toolkit");
}
CudaProgram::~CudaProgram() = default;
uint64_t CudaProgram::alloc(size_t) { return 0; }
void CudaProgram::upload(uint64_t, const void*, size_t) {}
void CudaProgram::download(void*, uint64_t, size_t) {}
void CudaProgram::launch(int, const std::vector<uint64_t>&) {}
void CudaProgram::synchronize() {}

struct CudaKernel::Impl {};
CudaKernel::CudaKernel(const CudaBinary&, const LoweredFunc&) {
  throw Error("the cuda target is unavailable: basin was built without the CUDA toolkit");
}
CudaKernel::~CudaKernel() = default;
void CudaKernel::run(const std::vector<NDArray*>&) {}
Timing CudaKernel::time(const TimingOptions&, bool, std::vector<double>*) { return {}; }

}  // namespace basin::codegen
