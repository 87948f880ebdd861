// The LibTorch executor for single operators: runs an operator of basin's library with
// LibTorch's own kernels (oneDNN, the system BLAS). It is the numerical reference that
// every operator is tested against, and the peer that benchmarks time. LibTorch
// headers stay inside torch_reference.cc.
#pragma once

#include <string>
#include <vector>

#include "codegen/timing.h"
#include "core/ir/ndarray.h"
#include "core/ops/registry.h"

namespace basin::codegen {

// True if `op` has a LibTorch reference.
bool has_torch_reference(const std::string& op);

// Outputs of g's operator on `inputs` (in g.inputs order), computed by LibTorch.
// Throws basin::Error if the operator has no reference.
std::vector<NDArray> torch_reference(const ops::OpGraph& g, const std::vector<NDArray>& inputs);

// Times LibTorch's kernel for g's operator on `inputs` (converted once, outside the
// timed region): the peer of a benchmark, measured in the same run.
Timing time_torch_reference(const ops::OpGraph& g, const std::vector<NDArray>& inputs,
                            const TimingOptions& opt = TimingOptions::full());

// BENCHMARKS.md: the peer runs on basin's threads. Sets LibTorch's thread count to
// the one basin's kernels use (runtime_threads: BASIN_NUM_THREADS, else every core)
// and returns it.
int match_torch_threads();

}  // namespace basin::codegen
