// Helpers shared by the operator family files: attribute validation that throws
// OpError naming the operator, attribute and value; parameter-spec shorthands; index
// arithmetic for broadcasting and axes.
#pragma once

#include <string>
#include <vector>

#include "core/ops/registry.h"
#include "core/util/error.h"

namespace basin::ops {

inline ParamSpec p_int(std::string name, int64_t def, std::string doc) {
  return {std::move(name), ParamType::Int, def, std::move(doc)};
}
inline ParamSpec p_ints(std::string name, std::vector<int64_t> def, std::string doc) {
  return {std::move(name), ParamType::Ints, std::move(def), std::move(doc)};
}
inline ParamSpec p_float(std::string name, double def, std::string doc) {
  return {std::move(name), ParamType::Float, def, std::move(doc)};
}
inline ParamSpec p_str(std::string name, std::string def, std::string doc) {
  return {std::move(name), ParamType::String, std::move(def), std::move(doc)};
}

std::string ints_str(const std::vector<int64_t>& v);

// Validation against one operator.
class Check {
 public:
  explicit Check(std::string op) : op_(std::move(op)) {}
  const std::string& op() const { return op_; }
  void that(bool cond, const std::string& attr, const std::string& msg) const {
    if (!cond) throw OpError(op_, attr, msg);
  }
  // An integer attribute that must be >= min.
  int64_t at_least(const Attrs& a, const std::string& name, int64_t min) const;
  // A shape: at least min_rank extents, each positive.
  std::vector<int64_t> shape(const Attrs& a, const std::string& name, size_t min_rank = 1) const;
  // A per-dimension list given as one value (broadcast) or exactly `rank` values, each >= min.
  std::vector<int64_t> per_dim(const Attrs& a, const std::string& name, size_t rank, int64_t min) const;
  // An axis in [-rank, rank), returned normalized to [0, rank).
  int axis(int64_t axis, int rank, const std::string& name) const;
  // Distinct axes, normalized and sorted.
  std::vector<int> axes(const std::vector<int64_t>& axes, int rank, const std::string& name) const;

 private:
  std::string op_;
};

// numpy broadcasting of two shapes; throws OpError naming both shapes.
std::vector<int64_t> broadcast_shapes(const Check& c, const std::vector<int64_t>& a, const std::vector<int64_t>& b);
// The indices into a tensor of shape `in` (right-aligned against the output's shape
// `out` and indices) that read its broadcast element: 0 along an axis it is broadcast
// over, the output's index elsewhere, extent-1 axes of both included (so that an
// operand of the output's own shape is read at the output's own indices, which is what
// fusion's epilogue analysis looks for).
std::vector<Expr> broadcast_index(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                                  const std::vector<Var>& out_idx);

int64_t product(const std::vector<int64_t>& v);
std::vector<Expr> as_exprs(const std::vector<Var>& v);

// A factor of a product: an 8-bit integer (a storage type) as int32, anything else as
// it is. The integer anchors (convolutions, matrix products) sum 8-bit products in int32.
inline Expr widened(const Expr& v) { return v.dtype().is_byte() ? cast(DType::i32(), v) : v; }

struct ConvParams;
// Refuses a convolution's pad_value that is not 0 or a value of x's integer type.
void check_pad_value(Check& c, const te::Tensor& x, const ConvParams& p);

// x padded with zeros (or `value`: a quantized input's zero point), lo[d] before and
// hi[d] after dimension 2 + d; the dimensions after those (a blocked layout's channels)
// are carried. x itself when nothing is padded.
te::Tensor zero_pad(const te::Tensor& x, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi,
                    const std::string& name, int64_t value = 0);

}  // namespace basin::ops
