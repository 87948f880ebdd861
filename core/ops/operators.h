// The operator library at the tensor-expression level: functions from tensors (and
// typed parameters) to tensors. The registry (registry.h) wraps each one for the CLI
// and tests; the graph layer composes them into fused tasks. Every function validates
// its inputs and throws OpError naming the operator, attribute and value.
#pragma once

#include <string>
#include <vector>

#include "core/ir/ndarray.h"
#include "core/te/tensor.h"

namespace basin::ops {

using te::Tensor;

// ---- linear (linear.cc) ----
Tensor dense(const Tensor& x, const Tensor& w);         // x[M,K] w[N,K] -> [M,N]
Tensor matmul(const Tensor& a, const Tensor& b);        // a[M,K] b[K,N] -> [M,N]
Tensor batch_matmul(const Tensor& a, const Tensor& b);  // a[B,M,K] b[B,K,N] -> [B,M,N]
// softmax(q[B,L,D] k[B,D,S] * scale + mask) v[B,S,E] -> [B,L,E]. The mask (optional) is
// added in the view [batch_shape..., L, S] of the scores (batch_shape factors B; empty:
// {B}) and broadcasts against it.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask, double scale,
                 const std::vector<int64_t>& batch_shape);

// ---- convolution (conv.cc) ----
struct ConvParams {
  std::vector<int64_t> stride, padding, dilation;  // one value per spatial dimension
  int64_t groups = 1;
  // The padding's value: 0, or for integer inputs a value of their type (a quantized
  // input's zero point, the integer that stands for 0).
  int64_t pad_value = 0;
};
// x[N, C, S...] w[OC, C/groups, K...] -> [N, OC, O...]; 1 to 3 spatial dimensions.
Tensor conv(const Tensor& x, const Tensor& w, const ConvParams& p, const std::string& op = "conv");
struct ConvTransposeParams {
  std::vector<int64_t> stride, padding, output_padding, dilation;
  int64_t groups = 1;
  // The output's width in stride-phase-major order, [N, OC, OH, S, OW/S] (S the width's
  // stride; needs dilation 1 and S dividing OW): column S*q + p at [.., p, q]. Each
  // phase's row is then a plain convolution along q, which a schedule vectorizes
  // with contiguous loads; a transpose of the last two axes gives [N, OC, OH, OW].
  bool width_phases = false;
};
class Attrs;
// The parameters of a conv2d_transpose from its attributes (stride, padding,
// output_padding, dilation, groups, width_phases), each checked.
ConvTransposeParams conv_transpose_params(const Attrs& a);
// x[N, IC, H, W] w[IC, OC/groups, KH, KW] -> [N, OC, OH, OW] ([N, OC, OH, S, OW/S]
// with width_phases)
Tensor conv2d_transpose(const Tensor& x, const Tensor& w, const ConvTransposeParams& p);

// ---- the blocked channel layout NCHWc (blocked.cc) ----
// x[N, C, S...] -> [N, C/block, S..., block]
Tensor to_nchwc(const Tensor& x, int64_t block);
// x[N, C/b, S..., b] -> [N, C, S...]
Tensor from_nchwc(const Tensor& x);
// x[N, C/bi, H, W, bi] w[OC/bo, C/bi, KH, KW, bi, bo] -> [N, OC/bo, OH, OW, bo]; groups 1,
// or the channels (depthwise: weight [C/b, 1, KH, KW, 1, b], bi == bo).
Tensor conv2d_nchwc(const Tensor& x, const Tensor& w, const ConvParams& p);
// A conv2d weight [OC, C/groups, KH, KW] in conv2d_nchwc's layout.
NDArray pack_conv_weight_nchwc(const NDArray& w, int64_t groups, int64_t in_block, int64_t out_block);

// ---- Winograd's F(m x m, 3 x 3) in the blocked layout (winograd.cc) ----
// x[N, C/b, H, W, b] -> V[A, A, N, C/b, T, b]: each tile of (m+2) x (m+2) inputs (the
// convolution's padding `pad` and zeros past the last tile included), B^T d B; A = m + 2,
// T the tiles of m x m outputs, row-major. m is 2 or 4.
Tensor winograd_input(const Tensor& x, int64_t m, int64_t pad);
// V[A, A, N, C/bi, T, bi] U[A, A, OC/bo, C/bi, bi, bo] -> [A, A, N, OC/bo, T, bo]:
// one GEMM per tile position.
Tensor winograd_gemm(const Tensor& v, const Tensor& u);
// [A, A, N, OC/b, T, b] -> [N, OC/b, height, width, b]: A^T M A per tile.
Tensor winograd_output(const Tensor& m, int64_t tile, int64_t height, int64_t width);
// A 3x3 weight [OC, C, 3, 3] transformed (G g G^T, in double) in winograd_gemm's layout.
NDArray winograd_weight(const NDArray& w, int64_t m, int64_t in_block, int64_t out_block);
// The transform matrices, row-major: 'B' B^T (A x A), 'G' G (A x 3), 'A' A^T (m x A).
std::vector<double> winograd_matrix(int64_t m, char which);

// ---- pooling (pool.cc) ----
struct PoolParams {
  std::vector<int64_t> kernel, stride, padding, dilation;
  bool count_include_pad = true;
  // Output extents rounded up: a last, partial window where it starts inside the input
  // or its leading padding (PyTorch's and ONNX's rule).
  bool ceil_mode = false;
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

// ---- comparisons, logic, where, mod, cast (logic.cc) ----
enum class CompareOp { Equal, Less, LessEqual, Greater, GreaterEqual };
Tensor compare(CompareOp op, const Tensor& a, const Tensor& b);  // -> bool, broadcasting
// "logical_and", "logical_or", "logical_xor" of bool tensors, broadcasting.
Tensor logical(const std::string& op, const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);
Tensor is_nan(const Tensor& x);
Tensor is_inf(const Tensor& x, bool positive, bool negative);
Tensor where(const Tensor& cond, const Tensor& x, const Tensor& y);
// fmod: the dividend's sign (C); otherwise the divisor's (Python; integers only). An
// integer divisor of 0 gives 0.
Tensor mod(const Tensor& a, const Tensor& b, bool fmod);
// Integers from floats truncate toward zero and saturate (NaN gives 0); bool is x != 0.
Tensor cast_to(const Tensor& x, DType to);

// ---- linear quantization (quantize.cc) ----
// ONNX QuantizeLinear: saturate(round(x / scale) + zero_point) to [qmin, qmax], ties to
// even, NaN to qmin (as ONNX Runtime); float32 x, out of quantized_type(qmin, qmax). scale
// (float32) and zero_point (int32) are per tensor (shape [] or [1]) or per index of
// `axis` ([x.shape[axis]]).
Tensor quantize_linear(const Tensor& x, const Tensor& scale, const Tensor& zero_point, int64_t axis, int64_t qmin,
                       int64_t qmax);
// The type of quantized values in [qmin, qmax]: uint8, int8, else int32.
DType quantized_type(int64_t qmin, int64_t qmax);
// ONNX DequantizeLinear: (x - zero_point) * scale of an int32, int8 or uint8 x, float32 out.
Tensor dequantize_linear(const Tensor& x, const Tensor& scale, const Tensor& zero_point, int64_t axis);
// dequantize_linear(quantize_linear(x)) with the same parameters, in float32 throughout:
// (saturate(round(x / scale) + zero_point) - zero_point) * scale, NaN quantized to qmin,
// the zero point clamped to [qmin, qmax] (a quantized type's own are): equal to the pair
// on every input; float32 x and out.
Tensor fake_quantize(const Tensor& x, const Tensor& scale, const Tensor& zero_point, int64_t axis, int64_t qmin,
                     int64_t qmax);

// ---- normalization (normalization.cc) ----
Tensor batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean, const Tensor& var,
                  double epsilon);
Tensor softmax(const Tensor& x, int64_t axis, bool log);
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int64_t axis, double epsilon);
Tensor rms_norm(const Tensor& x, const Tensor& gamma, int64_t axis, double epsilon);

// ---- reductions (reduction.cc) ----
// kind: "sum", "mean", "max", "min"; empty axes reduce every axis.
Tensor reduce(const std::string& kind, const Tensor& x, const std::vector<int64_t>& axes, bool keepdims);

// Running sum along an axis, ONNX CumSum's exclusive and reverse flags.
Tensor cumsum(const Tensor& x, int64_t axis, bool exclusive, bool reverse);

// ---- data movement (transform.cc) ----
Tensor reshape(const Tensor& x, std::vector<int64_t> new_shape, const std::string& op = "reshape");
Tensor transpose(const Tensor& x, std::vector<int64_t> perm);
Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim);
Tensor concat(const std::vector<Tensor>& xs, int64_t axis);
std::vector<Tensor> split(const Tensor& x, int64_t axis, const std::vector<int64_t>& sizes);
// ONNX Slice's rule along one axis of extent n: negative start and end count from the
// end; a positive step clamps both to [0, n], a negative one the start to [0, n - 1]
// and the end to [-1, n - 1]. The first index taken and how many (0: empty).
struct SliceRange {
  int64_t first = 0, count = 0;
};
SliceRange slice_range(int64_t start, int64_t end, int64_t step, int64_t n);
// A slice of an input of `shape` (ONNX Slice's attributes, checked: empty axes are
// 0.., empty steps 1): per axis, the first index taken, the step and the extent taken.
struct SliceBounds {
  std::vector<int64_t> begin, step, shape;
};
SliceBounds slice_bounds(const std::vector<int64_t>& shape, const std::vector<int64_t>& starts,
                         const std::vector<int64_t>& ends, const std::vector<int64_t>& axes,
                         const std::vector<int64_t>& steps);
Tensor slice(const Tensor& x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
             const std::vector<int64_t>& axes, const std::vector<int64_t>& steps);
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, double value, const std::string& mode);
Tensor gather(const Tensor& x, const Tensor& indices, int64_t axis, const std::string& op = "gather");
// out[i] = x[i with i[axis] replaced by indices[i]] (ONNX GatherElements); indices of
// x's rank, negative ones counting from the end, out-of-range ones clamped.
Tensor gather_elements(const Tensor& x, const Tensor& indices, int64_t axis);
// ONNX GatherND: x's slices at the index tuples of the indices' last axis, after
// batch_dims leading axes shared by both; out-of-range indices clamped.
Tensor gather_nd(const Tensor& x, const Tensor& indices, int64_t batch_dims);
Tensor broadcast_to(const Tensor& x, const std::vector<int64_t>& shape);
Tensor squeeze(const Tensor& x, const std::vector<int64_t>& axes);
Tensor unsqueeze(const Tensor& x, const std::vector<int64_t>& axes);
// x[N, C, H, W] -> [N, C, out_h, out_w]; mode "nearest" or "bilinear".
Tensor resize(const Tensor& x, int64_t out_h, int64_t out_w, const std::string& mode, bool align_corners);
// ONNX Resize of NCHW's H and W. mode: nearest, linear (bilinear) or cubic. coord:
// half_pixel, pytorch_half_pixel, align_corners, asymmetric, half_pixel_symmetric, or
// empty for PyTorch's own conventions (legacy nearest; bilinear by align_corners).
// nearest_mode: floor, ceil, round_prefer_floor, round_prefer_ceil. scale_h/scale_w:
// the scales the coordinates use (0: out / in).
struct ResizeParams {
  int64_t out_h = 1, out_w = 1;
  std::string mode = "nearest", coord, nearest_mode = "floor";
  bool align_corners = false;
  double cubic_a = -0.75, scale_h = 0, scale_w = 0;
  bool exclude_outside = false;
};
Tensor resize(const Tensor& x, const ResizeParams& p);

}  // namespace basin::ops
