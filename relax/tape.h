// A compiled, batched evaluator of expressions over a few input variables, with its own
// reverse mode. The expression DAG (shared subexpressions once) becomes a flat tape of
// operations over double columns of the batch; forward() fills the columns, backward()
// propagates adjoints from output gradients to the inputs.
//
// Two modes. Exact: the IR's semantics at integer points (floor division, comparisons
// as 0/1), which reproduces core/expr/evaluate on every expression the features use.
// Relaxed: smooth surrogates for the relaxation (DESIGN.md, "Smoothing"): comparisons
// and selects through a sigmoid of temperature `tau`, floor division and ceil by the
// exact quotient, floormod and min/max by their subgradients.
#pragma once

#include <unordered_map>
#include <vector>

#include "core/expr/expr.h"

namespace basin::relax {

enum class TapeMode { Exact, Relaxed };

class Tape {
 public:
  Tape(const std::vector<Expr>& outputs, const std::vector<Var>& inputs, TapeMode mode, double tau = 0.5);

  int num_inputs() const { return n_inputs_; }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  int size() const { return static_cast<int>(ops_.size()); }

  // x: [batch][num_inputs] row-major; y: [batch][num_outputs].
  void forward(const double* x, int batch, double* y);
  // After forward: grad_y [batch][num_outputs] -> grad_x [batch][num_inputs].
  void backward(const double* grad_y, double* grad_x);
  // forward() without its state for backward(): the batch in chunks of `kChunk` rows
  // through one buffer that every tape of the calling thread shares, so that ranking
  // thousands of programs over many tapes touches little memory (session 47: a tape per
  // sketch and task, each grown to its largest batch, faulted in fresh pages for a fifth
  // of a network tuner's proposals). Safe on several threads at once.
  void evaluate(const double* x, int batch, double* y) const;
  static constexpr int kChunk = 256;

 private:
  enum class Op : uint8_t {
    Const, Input, Add, Sub, Mul, Div, FloorDiv, FloorMod, Min, Max,
    LT, LE, EQ, And, Or, Not, Select, Exp, Log, Sqrt, Pow, Floor, Ceil, Abs
  };
  struct Node {
    Op op;
    int a = -1, b = -1, c = -1;
    double value = 0;  // Const; Input: the input index
  };
  // The nodes compiled so far, by expression: a DAG's shared parts compile once.
  using Memo = std::unordered_map<const ExprNode*, int>;
  int compile(const Expr& e, Memo& memo);
  int push(Node n);
  // The forward pass over `batch` rows into `val` ([node][batch]).
  void run(const double* x, int batch, double* val, double* y) const;

  TapeMode mode_;
  double tau_;
  int n_inputs_;
  std::vector<Node> ops_;
  std::vector<int> outputs_;
  std::vector<int64_t> input_ids_;
  int batch_ = 0;
  std::vector<double> val_, adj_;  // [node][batch]
};

}  // namespace basin::relax
