// Loop IR as C source, for reading (`basin op ... --emit c`): one function taking its
// buffers as restrict pointers, loop kinds as pragmas (omp parallel for, omp simd,
// GCC unroll), the IR's floor division and modulo as helper functions. It compiles with
// a C99 compiler (-fopenmp for the pragmas to take effect) but is not a backend.
#pragma once

#include <string>

#include "core/ir/stmt.h"

namespace basin::codegen {

std::string print_c(const LoweredFunc& f);

// The launch of a GPU program: grid and block extents from its bound loops (each kind's
// loops must have one constant extent, starting at 0).
struct GpuLaunch {
  int64_t grid[3] = {1, 1, 1};
  int64_t block[3] = {1, 1, 1};
};
GpuLaunch gpu_launch(const LoweredFunc& f);
// The name print_cuda gives f's kernel (f.name as a C identifier).
std::string cuda_kernel_name(const LoweredFunc& f);

// The same program as one CUDA C kernel, `extern "C" __global__ void NAME(...)`, for
// NVRTC (codegen/cuda.h): bound loops become block and thread indices, vectorized and
// unrolled loops `#pragma unroll`, local and shared buffers arrays of constant size.
// Throws basin::Error for what a kernel cannot express (a parallel loop, a global
// allocation, a size unknown at compile time).
std::string print_cuda(const LoweredFunc& f);
// Several kernels as one translation unit (one NVRTC call): the prologue once, then
// each kernel; their names (f.name) must differ. Errors name the kernel.
std::string print_cuda_unit(const std::vector<LoweredFunc>& fs);

}  // namespace basin::codegen
