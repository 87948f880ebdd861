// A compiled, batched evaluator of expressions over a few input variables, with its own
// reverse mode. The expression DAG becomes a flat tape of operations over double
// columns of the batch, each distinct operation once: shared subexpressions and equal
// ones built apart compile to one node, and operations on constants fold to constants
// in the tape's mode (a sketch's feature expressions were about 9000 nodes, a third of
// them separately built constants; they are now about 2400). forward() fills the
// columns, backward() propagates adjoints from output gradients to the inputs.
//
// Two modes. Exact: the IR's semantics at integer points (floor division, comparisons
// as 0/1), which reproduces core/expr/evaluate on every expression the features use.
// Relaxed: smooth surrogates for the relaxation (DESIGN.md, "Smoothing"): comparisons
// and selects through a sigmoid of temperature `tau`, floor division and ceil by the
// exact quotient, floormod and min/max by their subgradients.
#pragma once

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
  // thousands of programs over many tapes touches little memory (a tape per
  // sketch and task, each grown to its largest batch, faulted in fresh pages for a fifth
  // of a network tuner's proposals). Safe on several threads at once.
  void evaluate(const double* x, int batch, double* y) const;
  static constexpr int kChunk = 256;

 private:
  enum class Op : uint8_t {
    Const,
    Input,
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    FloorMod,
    Min,
    Max,
    LT,
    LE,
    EQ,
    And,
    Or,
    Not,
    Select,
    Exp,
    Log,
    Sqrt,
    Pow,
    Floor,
    Ceil,
    Abs,
    Erf,
    Sin,
    Cos
  };
  struct Node {
    Op op;
    int a = -1, b = -1, c = -1;
    double value = 0;  // Const; Input: the input index
  };
  // The state of a compilation: the nodes compiled so far by expression (a DAG's shared
  // parts compile once) and by content (equal nodes of different expressions, such as
  // the thousands of separately built integer constants, become one).
  struct Compiling;
  int compile(const Expr& e, Compiling& cx);
  // Appends `n`, folded to a constant when its operands are constants, unless an equal
  // node exists; returns its index.
  int push(Node n, Compiling& cx);
  // One operation over `batch` rows: out[k] from its operands' columns (x: the inputs,
  // [batch][num_inputs], for Input).
  void apply(const Node& n, const double* x, const double* a, const double* b, const double* c, double* out,
             int batch) const;
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
