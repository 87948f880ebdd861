// The CUDA target's compiler and device (DESIGN.md, "Codegen and measurement"): CUDA C
// (print_cuda, c_printer.h) compiled by NVRTC to a cubin for one GPU architecture,
// which works without a GPU, and the driver API, opened at run time with
// dlopen("libcuda.so.1") so that basin runs, and the target says it is unavailable, on
// machines without an NVIDIA driver.
#pragma once

#include <string>

namespace basin::codegen {

// True when basin was built with the CUDA toolkit's NVRTC.
bool nvrtc_enabled();

struct CudaBinary {
  std::string arch;   // "sm_90"
  std::string cubin;  // the machine code
  std::string log;    // NVRTC's messages (warnings)
};

// Compiles one translation unit for `arch` (sm_80, sm_90, ...). Throws basin::Error
// with NVRTC's log when it does not compile, and when basin has no NVRTC.
CudaBinary compile_cuda(const std::string& source, const std::string& name, const std::string& arch);

// Whether a GPU can run kernels here: the driver library loads, cuInit succeeds and
// there is a device. When not, `why` says which step failed, in one line.
bool cuda_available(std::string* why = nullptr);
// The architecture of device 0 ("sm_90"); throws basin::Error when none is available.
std::string cuda_device_arch();

}  // namespace basin::codegen
