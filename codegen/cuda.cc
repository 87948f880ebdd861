#include "codegen/cuda.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include <memory>
#include <vector>

#include "core/util/error.h"

namespace basin::codegen {

bool nvrtc_enabled() { return true; }

CudaBinary compile_cuda(const std::string& source, const std::string& name, const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0) throw Error("CUDA architecture '" + arch + "': expected sm_XY (sm_80, sm_90)");
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr) != NVRTC_SUCCESS)
    throw Error("NVRTC cannot create a program for '" + name + "'");
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> guard(&prog, [](nvrtcProgram* p) { nvrtcDestroyProgram(p); });
  const std::string arch_opt = "--gpu-architecture=" + arch;
  std::vector<const char*> opts = {arch_opt.c_str(), "--std=c++17", "-default-device"};
  nvrtcResult r = nvrtcCompileProgram(prog, static_cast<int>(opts.size()), opts.data());
  CudaBinary b;
  b.arch = arch;
  size_t n = 0;
  nvrtcGetProgramLogSize(prog, &n);
  b.log.resize(n);
  if (n > 0) nvrtcGetProgramLog(prog, b.log.data());
  while (!b.log.empty() && (b.log.back() == '\0' || b.log.back() == '\n')) b.log.pop_back();
  if (r != NVRTC_SUCCESS)
    throw Error("NVRTC could not compile '" + name + "' for " + arch + " (" + nvrtcGetErrorString(r) + "): " + b.log);
  if (nvrtcGetCUBINSize(prog, &n) != NVRTC_SUCCESS || n == 0)
    throw Error("NVRTC produced no cubin for '" + name + "' (" + arch + " is not a real architecture?)");
  b.cubin.resize(n);
  nvrtcGetCUBIN(prog, b.cubin.data());
  return b;
}

namespace {

// The few driver entry points used, resolved from libcuda.so.1 at run time.
struct Driver {
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  using DeviceFn = int (*)(int*, int);
  using AttrFn = int (*)(int*, int, int);
  void* lib = nullptr;
  InitFn init = nullptr;
  CountFn count = nullptr;
  DeviceFn device = nullptr;
  AttrFn attr = nullptr;
  std::string error;  // empty when usable

  Driver() {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      error = "no NVIDIA driver here (libcuda.so.1 cannot be loaded)";
      return;
    }
    init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
    count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
    device = reinterpret_cast<DeviceFn>(dlsym(lib, "cuDeviceGet"));
    attr = reinterpret_cast<AttrFn>(dlsym(lib, "cuDeviceGetAttribute"));
    if (!init || !count || !device || !attr) {
      error = "libcuda.so.1 lacks the driver API entry points basin needs";
      return;
    }
    if (int rc = init(0); rc != 0) {
      error = "the NVIDIA driver did not initialize (cuInit error " + std::to_string(rc) + ")";
      return;
    }
    int n = 0;
    if (count(&n) != 0 || n == 0) error = "the NVIDIA driver sees no GPU";
  }
};

const Driver& driver() {
  static const Driver d;
  return d;
}

}  // namespace

bool cuda_available(std::string* why) {
  const Driver& d = driver();
  if (why) *why = d.error;
  return d.error.empty();
}

std::string cuda_device_arch() {
  std::string why;
  if (!cuda_available(&why)) throw Error("the cuda target is unavailable: " + why);
  const Driver& d = driver();
  int dev = 0, major = 0, minor = 0;
  constexpr int kMajor = 75, kMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
  if (d.device(&dev, 0) != 0 || d.attr(&major, kMajor, dev) != 0 || d.attr(&minor, kMinor, dev) != 0)
    throw Error("cannot read the compute capability of GPU 0");
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

}  // namespace basin::codegen
