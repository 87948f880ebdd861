#include "codegen/op_check.h"

#include <chrono>

#include "codegen/torch_reference.h"
#include "core/ir/interpreter.h"
#include "core/ir/lower.h"
#include "core/util/error.h"

namespace basin::codegen {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

std::vector<NDArray> random_inputs(const ops::OpGraph& g, uint64_t seed) {
  std::vector<NDArray> in;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const ops::InputRange& r = g.ranges.at(i);
    in.push_back(NDArray::random(g.inputs[i].dtype(), g.inputs[i].shape(), r.lo, r.hi, seed * 7919 + i));
  }
  return in;
}

std::vector<NDArray> fresh_outputs(const ops::OpGraph& g) {
  std::vector<NDArray> out;
  for (const te::Tensor& t : g.outputs) out.emplace_back(t.dtype(), t.shape());
  return out;
}

std::vector<NDArray*> program_args(std::vector<NDArray>& inputs, std::vector<NDArray>& outputs) {
  std::vector<NDArray*> args;
  for (NDArray& a : inputs) args.push_back(&a);
  for (NDArray& a : outputs) args.push_back(&a);
  return args;
}

std::vector<NDArray> interpret_outputs(const LoweredFunc& f, const ops::OpGraph& g, std::vector<NDArray>& inputs) {
  std::vector<NDArray> out = fresh_outputs(g);
  interpret(f, program_args(inputs, out));
  return out;
}

OpCheck check_against_torch(const ops::OpGraph& g, uint64_t seed) {
  OpCheck c;
  c.func = lower_default(g.op, g.inputs, g.outputs);
  c.inputs = random_inputs(g, seed);
  c.outputs = fresh_outputs(g);
  std::vector<NDArray*> args = program_args(c.inputs, c.outputs);
  Interpreter interp(c.func);
  auto t0 = std::chrono::steady_clock::now();
  interp.run(args);
  c.interpret_seconds = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  c.reference = torch_reference(g, c.inputs);
  c.torch_seconds = seconds_since(t0);
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    if (c.outputs[i].shape() != c.reference[i].shape())
      throw Error("operator '" + g.op + "' output " + std::to_string(i) + " has shape " +
                  shape_str(c.outputs[i].shape()) + ", LibTorch's " + shape_str(c.reference[i].shape()));
    ErrorStats s = compare_arrays(c.outputs[i], c.reference[i]);
    c.max_abs_error = std::max(c.max_abs_error, s.max_abs);
    c.max_rel_error = std::max(c.max_rel_error, s.max_rel);
  }
  return c;
}

}  // namespace basin::codegen
