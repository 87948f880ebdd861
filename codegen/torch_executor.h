// The LibTorch executor of whole networks (DESIGN.md, "Codegen and measurement"): runs
// a Graph node by node with LibTorch's own kernels (oneDNN and the system BLAS), the
// constants converted once. It is the numerical reference of a compiled network and
// the PyTorch peer that `basin compare` and bench/networks time in the same run.
#pragma once

#include <memory>
#include <vector>

#include "codegen/timing.h"
#include "core/graph/graph.h"
#include "core/ir/ndarray.h"

namespace basin::codegen {

class TorchExecutor {
 public:
  // Throws basin::Error naming the first node whose operator LibTorch cannot run.
  explicit TorchExecutor(const graph::Graph& g);
  ~TorchExecutor();
  TorchExecutor(const TorchExecutor&) = delete;
  TorchExecutor& operator=(const TorchExecutor&) = delete;

  // Outputs in the graph's output order, for inputs in its input order.
  std::vector<NDArray> run(const std::vector<NDArray>& inputs) const;
  Timing time(const std::vector<NDArray>& inputs, const TimingOptions& opt = TimingOptions::full()) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace basin::codegen
