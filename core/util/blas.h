// The system BLAS's own threads (OpenBLAS, which Debian's LibTorch calls for matrix
// products). OpenBLAS's workers busy-wait, yielding in a loop, for a while after each
// call; with the estimator's small products between compilations and measurements,
// they took a core from the compiler and the measured kernel. In 200-trial gradient
// runs on two cores (resnet18-c6, three of each, in turn) one BLAS thread took the
// compile time from 14.3-19.8 s to 12.3-13.0 s and the run from 23.9-28.6 s to
// 21.0-22.3 s. basin keeps BLAS on the calling thread, and gives it the peer's threads
// only while LibTorch is timed as a peer (codegen/torch_reference.h).
#pragma once

#include <string>

namespace basin {

// The kernel family OpenBLAS chose for this CPU ("SkylakeX", "Haswell", ...); "" without
// OpenBLAS. OpenBLAS 0.3.21 does not know newer CPUs (Intel model 207) and falls back
// to "Prescott", SSE3 kernels 4.6x slower on a 1024 GEMM; `basin` then runs a peer
// with OPENBLAS_CORETYPE set from the CPU's vector instructions (tools/basin_main.cc).
std::string blas_core();

// For a program about to run LibTorch: sets what LibTorch's libraries read when they
// load, unless the user set it, and runs the program again (execv of /proc/self/exe
// with argv) when anything changed; returns only when nothing changed or the exec
// failed. Where OpenBLAS fell back to its SSE3 kernels on a CPU with AVX2 or AVX-512:
// OPENBLAS_CORETYPE Haswell or SkylakeX. Under BASIN_VECTOR_ISA (HostInfo::vector_isa),
// the peer keeps to the same set: OPENBLAS_CORETYPE Haswell or Nehalem,
// ONEDNN_MAX_CPU_ISA (and DNNL_MAX_CPU_ISA) AVX2 or SSE41, ATEN_CPU_CAPABILITY avx2 or
// default. With `peer` (LibTorch is about to be timed as the peer), also
// OMP_WAIT_POLICY=PASSIVE (docs/networks.md: OpenMP's spinning
// threads took the cores from the GEMMs of a network run op by op).
void exec_with_torch_settings(char** argv, bool peer);

// The BLAS's thread count; 0 when no BLAS whose threads can be set is loaded.
int blas_threads();
// Sets it (no effect without such a BLAS); returns the previous count (0 without).
int set_blas_threads(int n);

// The BLAS's threads set to n for a scope, then restored.
class BlasThreads {
 public:
  explicit BlasThreads(int n) : previous_(set_blas_threads(n)) {}
  ~BlasThreads() {
    if (previous_ > 0) set_blas_threads(previous_);
  }
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;

 private:
  int previous_;
};

}  // namespace basin
