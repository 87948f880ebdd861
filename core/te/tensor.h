// Tensor expressions: a DAG of operations. A placeholder is an input tensor; a compute
// defines an output tensor by its shape and an expression of its index variables; a
// reduction adds reduction axes and a combiner (sum, max, min). Operations are
// immutable once built; a Tensor is a handle to the operation that produces it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/expr/expr.h"

namespace basin::te {

struct IterVar {
  Var var;
  int64_t extent;
};

enum class ReduceKind : uint8_t { None, Sum, Max, Min };
const char* reduce_kind_name(ReduceKind k);

// How an operation relates outputs to inputs; fusion (later) and sketches read it.
enum class OpPattern : uint8_t {
  Placeholder,
  Elementwise,  // out[i] depends on in[i] of same-shaped inputs
  Broadcast,    // elementwise with broadcasting
  Injective,    // each output element reads a fixed set of input elements (data movement)
  Reduction,    // a reduction (softmax parts, norms, sum/mean/max)
  Anchor,       // a compute-heavy reduction worth tiling (conv, dense, matmul)
};
const char* pattern_name(OpPattern p);

struct OpNode;
using Op = std::shared_ptr<const OpNode>;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Op op) : op_(std::move(op)) {}

  const Op& op() const { return op_; }
  const Buffer& buffer() const;
  const std::string& name() const;
  DType dtype() const;
  const std::vector<int64_t>& shape() const;
  int ndim() const { return static_cast<int>(shape().size()); }
  int64_t numel() const;
  bool defined() const { return op_ != nullptr; }

  // A read of this tensor at the given indices (one per dimension).
  Expr read(std::vector<Expr> indices) const;
  template <typename... I>
  Expr operator()(I&&... idx) const {
    return read(std::vector<Expr>{Expr(std::forward<I>(idx))...});
  }

 private:
  Op op_;
};

struct OpNode {
  bool is_placeholder = false;
  std::string name;
  Buffer buffer;
  std::vector<int64_t> shape;
  std::vector<IterVar> axes;         // one per output dimension
  std::vector<IterVar> reduce_axes;  // empty unless a reduction
  ReduceKind reduce = ReduceKind::None;
  Expr body;                   // value (reduce: the value combined per reduction point)
  std::vector<Tensor> inputs;  // tensors the body reads, in first-read order
  OpPattern pattern = OpPattern::Placeholder;
  std::string tag;  // the operator family that built it ("conv2d", ...)
};

Tensor placeholder(std::string name, std::vector<int64_t> shape, DType t = DType::f32());

// out[axes] = f(axes)
Tensor compute(std::string name, std::vector<int64_t> shape, const std::function<Expr(const std::vector<Var>&)>& f,
               OpPattern pattern = OpPattern::Injective, std::string tag = "");

// out[axes] = combine over reduce axes r of f(axes, r), starting from the identity.
Tensor reduce(std::string name, std::vector<int64_t> shape, std::vector<int64_t> reduce_extents, ReduceKind kind,
              const std::function<Expr(const std::vector<Var>&, const std::vector<Var>&)>& f,
              OpPattern pattern = OpPattern::Reduction, std::string tag = "");

// Identity and combiner of a reduction.
Expr reduce_identity(ReduceKind k, DType t);
Expr reduce_combine(ReduceKind k, const Expr& acc, const Expr& value);

// Every operation reachable from `outputs`, producers before consumers.
std::vector<Op> topo_order(const std::vector<Tensor>& outputs);

}  // namespace basin::te
