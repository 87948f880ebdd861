#include "codegen/cuda.h"

#include <dlfcn.h>
#include <nvrtc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "core/util/error.h"
#include "core/util/host.h"

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

// The driver API's types, as the ABI has them (cuda.h is not included: the binary must
// not depend on the driver at link time).
using CUresult = int;
using CUdeviceptr = unsigned long long;
using Handle = void*;
constexpr int kAttrMajor = 75, kAttrMinor = 76, kAttrL2 = 38;  // CU_DEVICE_ATTRIBUTE_*

// Set once cuInit has been called in this process (cuda_driver_initialized_here).
std::atomic<bool> g_driver_initialized{false};

// The driver entry points used, resolved from libcuda.so.1 at run time.
struct Driver {
  void* lib = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*device_count)(int*) = nullptr;
  CUresult (*device_get)(int*, int) = nullptr;
  CUresult (*device_attr)(int*, int, int) = nullptr;
  CUresult (*device_name)(char*, int, int) = nullptr;
  CUresult (*primary_retain)(Handle*, int) = nullptr;
  CUresult (*ctx_set_current)(Handle) = nullptr;
  CUresult (*ctx_synchronize)() = nullptr;
  CUresult (*module_load_data)(Handle*, const void*) = nullptr;
  CUresult (*module_unload)(Handle) = nullptr;
  CUresult (*module_get_function)(Handle*, Handle, const char*) = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*mem_free)(CUdeviceptr) = nullptr;
  CUresult (*memcpy_htod)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*memcpy_dtoh)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*memset_d8)(CUdeviceptr, unsigned char, size_t) = nullptr;
  CUresult (*launch)(Handle, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, Handle, void**,
                     void**) = nullptr;
  CUresult (*event_create)(Handle*, unsigned) = nullptr;
  CUresult (*event_record)(Handle, Handle) = nullptr;
  CUresult (*event_synchronize)(Handle) = nullptr;
  CUresult (*event_elapsed)(float*, Handle, Handle) = nullptr;
  CUresult (*event_destroy)(Handle) = nullptr;
  CUresult (*error_string)(CUresult, const char**) = nullptr;
  std::string error;  // empty when usable

  template <typename F>
  bool bind(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(lib, name));
    return f != nullptr;
  }

  Driver() {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      error = "no NVIDIA driver here (libcuda.so.1 cannot be loaded)";
      return;
    }
    bool ok = bind(init, "cuInit") && bind(device_count, "cuDeviceGetCount") && bind(device_get, "cuDeviceGet") &&
              bind(device_attr, "cuDeviceGetAttribute") && bind(device_name, "cuDeviceGetName") &&
              bind(primary_retain, "cuDevicePrimaryCtxRetain") && bind(ctx_set_current, "cuCtxSetCurrent") &&
              bind(ctx_synchronize, "cuCtxSynchronize") && bind(module_load_data, "cuModuleLoadData") &&
              bind(module_unload, "cuModuleUnload") && bind(module_get_function, "cuModuleGetFunction") &&
              bind(mem_alloc, "cuMemAlloc_v2") && bind(mem_free, "cuMemFree_v2") &&
              bind(memcpy_htod, "cuMemcpyHtoD_v2") && bind(memcpy_dtoh, "cuMemcpyDtoH_v2") &&
              bind(memset_d8, "cuMemsetD8_v2") && bind(launch, "cuLaunchKernel") &&
              bind(event_create, "cuEventCreate") && bind(event_record, "cuEventRecord") &&
              bind(event_synchronize, "cuEventSynchronize") && bind(event_elapsed, "cuEventElapsedTime") &&
              bind(event_destroy, "cuEventDestroy_v2") && bind(error_string, "cuGetErrorString");
    if (!ok) {
      error = "libcuda.so.1 lacks the driver API entry points basin needs";
      return;
    }
    g_driver_initialized.store(true, std::memory_order_relaxed);  // cuInit ran in this process
    if (CUresult rc = init(0); rc != 0) {
      error = "the NVIDIA driver did not initialize (cuInit error " + std::to_string(rc) + ")";
      return;
    }
    int n = 0;
    if (device_count(&n) != 0 || n == 0) error = "the NVIDIA driver sees no GPU";
  }
};

const Driver& driver() {
  static const Driver d;
  return d;
}

// Errors after which the context is unusable (CUDA's "sticky" errors).
bool sticky(CUresult rc) {
  switch (rc) {
    case 700:  // CUDA_ERROR_ILLEGAL_ADDRESS
    case 701:  // CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES is not sticky, but leaves nothing to time
    case 702:  // CUDA_ERROR_LAUNCH_TIMEOUT
    case 714:  // CUDA_ERROR_HARDWARE_STACK_ERROR
    case 715:  // CUDA_ERROR_ILLEGAL_INSTRUCTION
    case 716:  // CUDA_ERROR_MISALIGNED_ADDRESS
    case 717:  // CUDA_ERROR_INVALID_ADDRESS_SPACE
    case 718:  // CUDA_ERROR_INVALID_PC
    case 719:  // CUDA_ERROR_LAUNCH_FAILED
      return true;
    default:
      return false;
  }
}

void check(CUresult rc, const char* what) {
  if (rc == 0) return;
  const char* msg = nullptr;
  driver().error_string(rc, &msg);
  throw CudaError(
      std::string("CUDA error in ") + what + ": " + (msg ? msg : "unknown") + " (" + std::to_string(rc) + ")",
      sticky(rc));
}

// The process's context on device 0, made current once.
void use_device() {
  static std::once_flag once;
  static std::string failed;
  std::call_once(once, [] {
    const Driver& d = driver();
    if (!d.error.empty()) {
      failed = d.error;
      return;
    }
    int dev = 0;
    Handle ctx = nullptr;
    if (d.device_get(&dev, 0) != 0 || d.primary_retain(&ctx, dev) != 0 || d.ctx_set_current(ctx) != 0)
      failed = "cannot create a context on GPU 0";
  });
  if (!failed.empty()) throw Error("the cuda target is unavailable: " + failed);
}

// The probe's answer: "ok\tARCH\tNAME\tL2" or "no\tWHY".
std::string probe_here() {
  const Driver& d = driver();
  if (!d.error.empty()) return "no\t" + d.error;
  int dev = 0, major = 0, minor = 0, l2 = 0;
  char name[256] = {0};
  if (d.device_get(&dev, 0) != 0 || d.device_attr(&major, kAttrMajor, dev) != 0 ||
      d.device_attr(&minor, kAttrMinor, dev) != 0)
    return "no\tcannot read the compute capability of GPU 0";
  d.device_attr(&l2, kAttrL2, dev);
  d.device_name(name, sizeof name - 1, dev);
  return "ok\tsm_" + std::to_string(major) + std::to_string(minor) + "\t" + name + "\t" + std::to_string(l2);
}

struct Probe {
  bool ok = false;
  std::string why;
  CudaDeviceInfo info;
};

// Runs probe_here in a child process, so that this one never initializes the driver.
const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    std::string answer;
    int fd[2];
    if (pipe(fd) != 0) {
      answer = probe_here();  // no pipe: ask here
    } else {
      std::fflush(nullptr);
      pid_t pid = fork();
      if (pid == 0) {
        ::close(fd[0]);
        std::string a = probe_here();
        ssize_t w = ::write(fd[1], a.data(), a.size());
        (void)w;
        _exit(0);
      }
      ::close(fd[1]);
      char buf[512];
      ssize_t n;
      while ((n = ::read(fd[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
        if (n > 0) answer.append(buf, static_cast<size_t>(n));
      ::close(fd[0]);
      int status = 0;
      if (pid > 0) ::waitpid(pid, &status, 0);
      if (pid < 0 || answer.empty()) answer = "no\tthe GPU probe process failed";
    }
    std::vector<std::string> f;
    size_t at = 0;
    for (size_t tab; (tab = answer.find('\t', at)) != std::string::npos; at = tab + 1)
      f.push_back(answer.substr(at, tab - at));
    f.push_back(answer.substr(at));
    r.ok = f[0] == "ok" && f.size() == 4;
    if (r.ok) {
      r.info.arch = f[1];
      r.info.name = f[2];
      r.info.l2_bytes = std::stoll(f[3]);
    } else {
      r.why = f.size() > 1 ? f[1] : answer;
    }
    return r;
  }();
  return p;
}

}  // namespace

bool cuda_available(std::string* why) {
  const Probe& p = probe();
  if (why) *why = p.why;
  return p.ok;
}

CudaDeviceInfo cuda_device_info() {
  const Probe& p = probe();
  if (!p.ok) throw Error("the cuda target is unavailable: " + p.why);
  return p.info;
}

std::string cuda_device_arch() { return cuda_device_info().arch; }

namespace {
// Records of the cuda target name GPU 0 (basin::machine_description): its name and
// architecture, "" where there is none.
std::string describe_gpu() {
  const Probe& p = probe();
  return p.ok ? p.info.name + " (" + p.info.arch + ")" : std::string();
}
[[maybe_unused]] const bool g_gpu_describer_set = (set_gpu_describer(describe_gpu), true);
}  // namespace

bool cuda_driver_initialized_here() { return g_driver_initialized.load(std::memory_order_relaxed); }

struct CudaProgram::Impl {
  Handle module = nullptr;
  std::vector<Handle> functions;
  std::vector<GpuLaunch> launches;
  std::vector<CUdeviceptr> allocations;
  std::vector<void*> params;  // cuLaunchKernel's argument pointers, reused by every launch

  ~Impl() {
    const Driver& d = driver();
    for (CUdeviceptr b : allocations) d.mem_free(b);
    if (module) d.module_unload(module);
  }
};

CudaProgram::CudaProgram(const CudaBinary& binary, const std::vector<std::pair<std::string, GpuLaunch>>& kernels)
    : impl_(std::make_unique<Impl>()) {
  use_device();
  const Driver& d = driver();
  Impl& m = *impl_;
  if (!kernels.empty()) check(d.module_load_data(&m.module, binary.cubin.data()), "cuModuleLoadData");
  for (const auto& [name, launch] : kernels) {
    Handle fn = nullptr;
    check(d.module_get_function(&fn, m.module, name.c_str()), ("cuModuleGetFunction(" + name + ")").c_str());
    m.functions.push_back(fn);
    m.launches.push_back(launch);
  }
}

CudaProgram::~CudaProgram() = default;

uint64_t CudaProgram::alloc(size_t bytes) {
  CUdeviceptr p = 0;
  check(driver().mem_alloc(&p, std::max<size_t>(bytes, 4)), "cuMemAlloc");
  impl_->allocations.push_back(p);
  return p;
}

void CudaProgram::upload(uint64_t dst, const void* src, size_t bytes) {
  if (bytes) check(driver().memcpy_htod(dst, src, bytes), "cuMemcpyHtoD");
}

void CudaProgram::download(void* dst, uint64_t src, size_t bytes) {
  if (bytes) check(driver().memcpy_dtoh(dst, src, bytes), "cuMemcpyDtoH");
}

void CudaProgram::launch(int kernel, const std::vector<uint64_t>& args) {
  Impl& m = *impl_;
  const GpuLaunch& l = m.launches.at(static_cast<size_t>(kernel));
  // The driver reads each argument (a device address) through its pointer at launch.
  static_assert(sizeof(uint64_t) == sizeof(CUdeviceptr));
  m.params.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i) m.params[i] = const_cast<uint64_t*>(&args[i]);
  check(driver().launch(m.functions[kernel], static_cast<unsigned>(l.grid[0]), static_cast<unsigned>(l.grid[1]),
                        static_cast<unsigned>(l.grid[2]), static_cast<unsigned>(l.block[0]),
                        static_cast<unsigned>(l.block[1]), static_cast<unsigned>(l.block[2]), 0, nullptr,
                        m.params.data(), nullptr),
        "cuLaunchKernel");
}

void CudaProgram::synchronize() { check(driver().ctx_synchronize(), "a kernel"); }

struct CudaKernel::Impl {
  std::unique_ptr<CudaProgram> program;
  std::vector<uint64_t> buffers;
  std::vector<size_t> bytes;
  std::vector<int> outputs;  // parameter indices
  uint64_t flush = 0;
  size_t flush_bytes = 0;
};

CudaKernel::CudaKernel(const CudaBinary& binary, const LoweredFunc& f) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.outputs = f.output_params;
  for (const Buffer& b : f.params) {
    int64_t n = b->dtype.bytes();
    for (const Expr& e : b->shape) {
      int64_t v = 0;
      if (!is_const_int(e, &v)) throw Error("parameter '" + b->name + "' has a size unknown at compile time");
      n *= v;
    }
    m.bytes.push_back(static_cast<size_t>(n));
  }
  m.program = std::make_unique<CudaProgram>(
      binary, std::vector<std::pair<std::string, GpuLaunch>>{{cuda_kernel_name(f), gpu_launch(f)}});
  for (size_t b : m.bytes) m.buffers.push_back(m.program->alloc(b));
}

CudaKernel::~CudaKernel() = default;

void CudaKernel::run(const std::vector<NDArray*>& args) {
  Impl& m = *impl_;
  if (args.size() != m.buffers.size())
    throw Error("kernel takes " + std::to_string(m.buffers.size()) + " arguments, got " + std::to_string(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i]->nbytes() != m.bytes[i]) throw Error("argument " + std::to_string(i) + " has the wrong size");
    m.program->upload(m.buffers[i], args[i]->data(), m.bytes[i]);
  }
  m.program->launch(0, m.buffers);
  m.program->synchronize();
  for (int o : m.outputs) m.program->download(args.at(o)->data(), m.buffers.at(o), m.bytes.at(o));
}

Timing CudaKernel::time(const TimingOptions& opt, bool flush_l2, std::vector<double>* rounds) {
  const Driver& d = driver();
  Impl& m = *impl_;
  if (flush_l2 && !m.flush) {
    m.flush_bytes = static_cast<size_t>(std::max<int64_t>(2 * probe().info.l2_bytes, 8 << 20));
    m.flush = m.program->alloc(m.flush_bytes);
  }
  Handle start = nullptr, stop = nullptr;
  check(d.event_create(&start, 0), "cuEventCreate");
  std::unique_ptr<void, std::function<void(void*)>> free_start(start, [&](void* e) { d.event_destroy(e); });
  check(d.event_create(&stop, 0), "cuEventCreate");
  std::unique_ptr<void, std::function<void(void*)>> free_stop(stop, [&](void* e) { d.event_destroy(e); });
  // Milliseconds of `n` launches (with a flush, the sum of each launch's own span).
  auto span = [&](int64_t n) {
    double total = 0;
    for (int64_t i = 0; i < (flush_l2 ? n : 1); ++i) {
      if (flush_l2) check(d.memset_d8(m.flush, static_cast<unsigned char>(i), m.flush_bytes), "cuMemsetD8");
      check(d.event_record(start, nullptr), "cuEventRecord");
      for (int64_t j = 0; j < (flush_l2 ? 1 : n); ++j) m.program->launch(0, m.buffers);
      check(d.event_record(stop, nullptr), "cuEventRecord");
      check(d.event_synchronize(stop), "the kernel");
      float ms = 0;
      check(d.event_elapsed(&ms, start, stop), "cuEventElapsedTime");
      total += ms;
    }
    return total;
  };
  for (int i = 0; i < opt.warmup; ++i) span(1);
  double one = std::max(span(1), 1e-4);
  int64_t n = std::max<int64_t>(1, static_cast<int64_t>(opt.min_round_seconds * 1e3 / one));
  n = std::min<int64_t>(n, flush_l2 ? 1000 : 100000);
  std::vector<double> per_call;
  for (int r = 0; r < std::max(1, opt.rounds); ++r) per_call.push_back(span(n) * 1e3 / static_cast<double>(n));
  if (rounds) *rounds = per_call;
  return summarize_rounds(std::move(per_call), n * static_cast<int64_t>(per_call.size()));
}

}  // namespace basin::codegen
