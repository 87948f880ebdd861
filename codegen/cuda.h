// The CUDA target's compiler and device (DESIGN.md, "Codegen and measurement"): CUDA C
// (print_cuda, c_printer.h) compiled by NVRTC to a cubin for one GPU architecture,
// which works without a GPU, and the driver API, opened at run time with
// dlopen("libcuda.so.1") so that basin runs, and the target says it is unavailable, on
// machines without an NVIDIA driver.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/c_printer.h"
#include "codegen/timing.h"
#include "core/ir/ndarray.h"
#include "core/util/error.h"

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
// there is a device. When not, `why` says which step failed, in one line. Asked of a
// short-lived child process, once: a process that initializes the driver cannot fork
// workers that use it, and the tuner forks its measuring workers.
bool cuda_available(std::string* why = nullptr);
// Device 0: its architecture ("sm_90"), name and L2 size; throws basin::Error when no
// GPU is available.
struct CudaDeviceInfo {
  std::string arch, name;
  int64_t l2_bytes = 0;
};
CudaDeviceInfo cuda_device_info();
std::string cuda_device_arch();
// Whether this process has loaded and initialized the driver (it ran or loaded a kernel
// here). After that, a forked child cannot use the GPU: the measurer refuses to fork
// its workers then, with a clear error, rather than have every measurement fail.
bool cuda_driver_initialized_here();

// A driver call that failed. `poisoned`: the error is sticky (an illegal address, a
// launch failure): the process's context is unusable and the process must be replaced.
class CudaError : public Error {
 public:
  CudaError(const std::string& what, bool poisoned) : Error(what), poisoned_(poisoned) {}
  bool poisoned() const { return poisoned_; }

 private:
  bool poisoned_;
};

// Kernels of one cubin loaded on device 0, and device memory (a compiled network's GPU
// side). Launches are asynchronous on the default stream; synchronize() waits and
// reports a kernel's failure. Memory from alloc() lives as long as the program. Like
// CudaKernel, only in a process that will not fork afterwards.
class CudaProgram {
 public:
  CudaProgram(const CudaBinary& binary, const std::vector<std::pair<std::string, GpuLaunch>>& kernels);
  ~CudaProgram();
  CudaProgram(const CudaProgram&) = delete;
  CudaProgram& operator=(const CudaProgram&) = delete;

  uint64_t alloc(size_t bytes);  // a device address
  void upload(uint64_t dst, const void* src, size_t bytes);
  void download(void* dst, uint64_t src, size_t bytes);
  // Kernel `kernel` (its index in the constructor's list) with these device addresses.
  void launch(int kernel, const std::vector<uint64_t>& args);
  void synchronize();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One kernel loaded on device 0 (in this process's primary context, created on first
// use: call it only in a process that will not fork afterwards, such as a measuring
// worker), with device buffers for its arguments.
class CudaKernel {
 public:
  // f's kernel (named cuda_kernel_name(f) in the binary, launched as gpu_launch(f)),
  // with a device buffer for each of f's parameters.
  CudaKernel(const CudaBinary& binary, const LoweredFunc& f);
  ~CudaKernel();
  CudaKernel(const CudaKernel&) = delete;
  CudaKernel& operator=(const CudaKernel&) = delete;

  // Copies every argument (in the order of f's parameters) to the GPU, launches once,
  // waits, and copies f's outputs back.
  void run(const std::vector<NDArray*>& args);
  // Times launches with CUDA events: warm-up, then rounds of launches lasting at least
  // opt.min_round_seconds; each round's time per launch into `rounds`. With flush_l2,
  // a buffer twice the L2's size is written before each launch, outside the timed span.
  Timing time(const TimingOptions& opt, bool flush_l2, std::vector<double>* rounds = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace basin::codegen
