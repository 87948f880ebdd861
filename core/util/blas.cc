#include "core/util/blas.h"

#include <dlfcn.h>
#include <strings.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>

#include "core/util/host.h"

namespace basin {

namespace {

// OpenBLAS's controls, looked up in the process (LibTorch loads the library); null
// without OpenBLAS, and basin links no BLAS itself.
struct OpenBlas {
  int (*get)() = nullptr;
  void (*set)(int) = nullptr;
  char* (*core)() = nullptr;
  OpenBlas() {
    core = reinterpret_cast<char* (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
    get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    set = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
    if (!get || !set) get = nullptr, set = nullptr;
  }
};

const OpenBlas& openblas() {
  static const OpenBlas b;
  return b;
}

// One BLAS thread from the start, in every program that links this file.
const int kOneThreadAtStart = set_blas_threads(1);

}  // namespace

std::string blas_core() {
  const char* name = openblas().core ? openblas().core() : nullptr;
  return name ? name : "";
}

int blas_threads() { return openblas().get ? openblas().get() : 0; }

int set_blas_threads(int n) {
  const OpenBlas& b = openblas();
  if (!b.get || n < 1) return 0;
  const int previous = b.get();
  if (previous != n) b.set(n);
  return previous;
}

void exec_with_torch_settings(char** argv, bool peer) {
  bool again = false;
  if (peer && !std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    again = true;
  }
  const std::string& isa = this_host().vector_isa;
  const bool narrowed = isa != cpu_vector_isa();  // BASIN_VECTOR_ISA
  if (!std::getenv("OPENBLAS_CORETYPE") && (narrowed || strcasecmp(blas_core().c_str(), "prescott") == 0)) {
    const char* core = isa == "avx512" ? "SkylakeX" : isa == "avx2" ? "Haswell" : narrowed ? "Nehalem" : nullptr;
    if (core) {
      setenv("OPENBLAS_CORETYPE", core, 1);
      again = true;
    }
  }
  // The peer held to the same vector instructions as basin's kernels: oneDNN's
  // convolutions and ATen's own vectorized kernels.
  if (narrowed) {
    const bool avx2 = isa == "avx2";
    for (const auto& [var, value] : {std::pair<const char*, const char*>{"ONEDNN_MAX_CPU_ISA", avx2 ? "AVX2" : "SSE41"},
                                     {"DNNL_MAX_CPU_ISA", avx2 ? "AVX2" : "SSE41"},
                                     {"ATEN_CPU_CAPABILITY", avx2 ? "avx2" : "default"}}) {
      if (std::getenv(var)) continue;
      setenv(var, value, 1);
      again = true;
    }
  }
  if (again) execv("/proc/self/exe", argv);  // returns only on failure: go on as we are
}

}  // namespace basin
