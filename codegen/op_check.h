// End-to-end check of one operator instance: lower it with the default schedule, run
// the interpreter on random inputs, run LibTorch's kernel on the same inputs, compare.
// Shared by `basin op` and the operator tests.
#pragma once

#include <cstdint>
#include <vector>

#include "core/ir/ndarray.h"
#include "core/ir/stmt.h"
#include "core/ops/registry.h"

namespace basin::codegen {

// Random inputs in each input's declared range, deterministic in `seed`.
std::vector<NDArray> random_inputs(const ops::OpGraph& g, uint64_t seed);

// g's outputs, fresh, and the argument list of a program of g: the inputs, then them.
std::vector<NDArray> fresh_outputs(const ops::OpGraph& g);
std::vector<NDArray*> program_args(std::vector<NDArray>& inputs, std::vector<NDArray>& outputs);
// f, a program of g, run by the interpreter on `inputs`: its outputs.
std::vector<NDArray> interpret_outputs(const LoweredFunc& f, const ops::OpGraph& g, std::vector<NDArray>& inputs);

struct OpCheck {
  LoweredFunc func;
  std::vector<NDArray> inputs;
  std::vector<NDArray> outputs;    // the interpreter's
  std::vector<NDArray> reference;  // LibTorch's
  double max_abs_error = 0;
  double max_rel_error = 0;  // max |basin - torch| / max |torch|, over every output
  double interpret_seconds = 0;
  double torch_seconds = 0;
};

OpCheck check_against_torch(const ops::OpGraph& g, uint64_t seed);

}  // namespace basin::codegen
