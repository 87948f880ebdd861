// The operator library at the tensor-expression level: functions from tensors (and
// typed parameters) to tensors. The registry (registry.h) wraps each one for the CLI
// and tests; the graph layer composes them into fused tasks. Every function validates
// its inputs and throws OpError naming the operator, attribute and value.
#pragma once

#include <string>
#include <vector>

#include "core/te/tensor.h"

namespace basin::ops {

using te::Tensor;

// ---- linear (linear.cc) ----
Tensor dense(const Tensor& x, const Tensor& w);         // x[M,K] w[N,K] -> [M,N]
Tensor matmul(const Tensor& a, const Tensor& b);        // a[M,K] b[K,N] -> [M,N]
Tensor batch_matmul(const Tensor& a, const Tensor& b);  // a[B,M,K] b[B,K,N] -> [B,M,N]

// ---- convolution (conv.cc) ----
struct ConvParams {
  std::vector<int64_t> stride, padding, dilation;  // one value per spatial dimension
  int64_t groups = 1;
};
// x[N, C, S...] w[OC, C/groups, K...] -> [N, OC, O...]; 1 to 3 spatial dimensions.
Tensor conv(const Tensor& x, const Tensor& w, const ConvParams& p, const std::string& op = "conv");
struct ConvTransposeParams {
  std::vector<int64_t> stride, padding, output_padding, dilation;
  int64_t groups = 1;
};
// x[N, IC, H, W] w[IC, OC/groups, KH, KW] -> [N, OC, OH, OW]
Tensor conv2d_transpose(const Tensor& x, const Tensor& w, const ConvTransposeParams& p);

// ---- pooling (pool.cc) ----
struct PoolParams {
  std::vector<int64_t> kernel, stride, padding, dilation;
  bool count_include_pad = true;
};
Tensor max_pool2d(const Tensor& x, const PoolParams& p);
Tensor avg_pool2d(const Tensor& x, const PoolParams& p);
Tensor global_pool2d(const Tensor& x, bool average);

// ---- elementwise (elementwise.cc) ----
enum class BinaryOp { Add, Sub, Mul, Div, Maximum, Minimum, Pow };
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, const std::string& name);
// Unary activations and math functions by name ("relu", "gelu", ...); `alpha` and
// `beta` are the parameters of leaky_relu (alpha) and clip (alpha=min, beta=max).
Tensor unary(const std::string& op, const Tensor& x, double alpha = 0, double beta = 0);
Expr unary_expr(const std::string& op, const Expr& x, double alpha = 0, double beta = 0);

// ---- normalization (normalization.cc) ----
Tensor batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                  const Tensor& var, double epsilon);
Tensor softmax(const Tensor& x, int64_t axis, bool log);
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int64_t axis, double epsilon);
Tensor rms_norm(const Tensor& x, const Tensor& gamma, int64_t axis, double epsilon);

// ---- reductions (reduction.cc) ----
// kind: "sum", "mean", "max", "min"; empty axes reduce every axis.
Tensor reduce(const std::string& kind, const Tensor& x, const std::vector<int64_t>& axes, bool keepdims);

// ---- data movement (transform.cc) ----
Tensor reshape(const Tensor& x, std::vector<int64_t> new_shape, const std::string& op = "reshape");
Tensor transpose(const Tensor& x, std::vector<int64_t> perm);
Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim);
Tensor concat(const std::vector<Tensor>& xs, int64_t axis);
std::vector<Tensor> split(const Tensor& x, int64_t axis, const std::vector<int64_t>& sizes);
Tensor slice(const Tensor& x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
             const std::vector<int64_t>& axes, const std::vector<int64_t>& steps);
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, double value, const std::string& mode);
Tensor gather(const Tensor& x, const Tensor& indices, int64_t axis, const std::string& op = "gather");
Tensor broadcast_to(const Tensor& x, const std::vector<int64_t>& shape);
Tensor squeeze(const Tensor& x, const std::vector<int64_t>& axes);
Tensor unsqueeze(const Tensor& x, const std::vector<int64_t>& axes);
// x[N, C, H, W] -> [N, C, out_h, out_w]; mode "nearest" or "bilinear".
Tensor resize(const Tensor& x, int64_t out_h, int64_t out_w, const std::string& mode, bool align_corners);

}  // namespace basin::ops
