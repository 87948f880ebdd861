#include "codegen/torch_reference.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>

#include "codegen/cpu_runtime.h"
#include "codegen/torch_executor.h"
#include "core/ops/node_ops.h"
#include "core/ops/operators.h"
#include "core/ops/subgraph.h"
#include "core/util/blas.h"
#include "core/util/error.h"

namespace basin::codegen {

namespace {

using TT = torch::Tensor;
using Fn = std::function<std::vector<TT>(const ops::Attrs&, const std::vector<TT>&)>;

torch::Dtype torch_dtype(DType t) {
  if (t == DType::f32()) return torch::kFloat32;
  if (t == DType::f64()) return torch::kFloat64;
  if (t == DType::i32()) return torch::kInt32;
  if (t == DType::i64()) return torch::kInt64;
  if (t.is_bool()) return torch::kBool;
  if (t == DType::i8()) return torch::kInt8;
  if (t == DType::u8()) return torch::kUInt8;
  if (t.is_bf16()) return torch::kBFloat16;
  throw Error("no LibTorch dtype for " + t.str());
}

TT to_torch(const NDArray& a) {
  std::vector<int64_t> shape = a.shape();
  return torch::from_blob(const_cast<void*>(a.data()), shape, torch::TensorOptions().dtype(torch_dtype(a.dtype())))
      .clone();
}

NDArray from_torch(const TT& t, DType want) {
  TT c = t.contiguous().to(torch_dtype(want));
  std::vector<int64_t> shape(c.sizes().begin(), c.sizes().end());
  NDArray a(want, shape);
  if (a.nbytes()) std::memcpy(a.data(), c.data_ptr(), a.nbytes());
  return a;
}

// A node's arguments as its operator reads them: bfloat16 (a stored activation) as
// float32, but for the views (ops::apply_node).
std::vector<TT> read_args(const std::string& op, std::vector<TT> args) {
  if (ops::is_view_node(op)) return args;
  for (TT& t : args)
    if (t.scalar_type() == torch::kBFloat16) t = t.to(torch::kFloat32);
  return args;
}

std::vector<int64_t> per_dim(const ops::Attrs& a, const std::string& name, size_t rank) {
  std::vector<int64_t> v = a.ints(name);
  if (v.size() == 1) v.assign(rank, v[0]);
  return v;
}

std::vector<TT> one(TT t) { return {std::move(t)}; }

// A quantization scale or zero point broadcast against x: per tensor as it is, per axis
// (one value per index of `axis`) as [1, ..., C, ..., 1].
TT quant_param(const TT& p, const TT& x, int64_t axis) {
  if (p.numel() == 1) return p.reshape({});
  std::vector<int64_t> s(static_cast<size_t>(x.dim()), 1);
  s[static_cast<size_t>(axis < 0 ? axis + x.dim() : axis)] = p.numel();
  return p.reshape(s);
}

Fn unary(std::function<TT(const TT&)> f) {
  return [f](const ops::Attrs&, const std::vector<TT>& in) { return one(f(in[0])); };
}
Fn binary(std::function<TT(const TT&, const TT&)> f) {
  return [f](const ops::Attrs&, const std::vector<TT>& in) { return one(f(in[0], in[1])); };
}

// 8-bit integers as int32: basin's products sum them so (LibTorch multiplies no int8).
TT wide(const TT& t) {
  return t.scalar_type() == torch::kInt8 || t.scalar_type() == torch::kUInt8 ? t.to(torch::kInt32) : t;
}

// A convolution's input padded by its pad_value (then its padding 0), where that is not
// 0 (the operator library's conv2d, which shares this reference, has none).
TT pad_by_value(const ops::Attrs& a, const TT& x, std::vector<int64_t>& p) {
  const int64_t v = a.has("pad_value") ? a.i("pad_value") : 0;
  if (v == 0) return x;
  std::vector<int64_t> pads;
  for (size_t d = p.size(); d-- > 0;) {
    pads.push_back(p[d]);
    pads.push_back(p[d]);
    p[d] = 0;
  }
  return torch::constant_pad_nd(x, pads, static_cast<double>(v));
}

Fn conv_nd(int rank) {
  return [rank](const ops::Attrs& a, const std::vector<TT>& in) {
    auto s = per_dim(a, "stride", rank), p = per_dim(a, "padding", rank), d = per_dim(a, "dilation", rank);
    int64_t g = a.i("groups");
    const TT x = pad_by_value(a, wide(in[0]), p), w = wide(in[1]);
    if (rank == 1) return one(torch::conv1d(x, w, {}, s, p, d, g));
    if (rank == 2) return one(torch::conv2d(x, w, {}, s, p, d, g));
    return one(torch::conv3d(x, w, {}, s, p, d, g));
  };
}

// Pads one axis with LibTorch's own 1-D edge or reflect padding kernels.
TT pad_axis(const TT& x, int64_t dim, int64_t before, int64_t after, const std::string& mode) {
  if (before == 0 && after == 0) return x;
  TT y = x.movedim(dim, -1).contiguous();
  std::vector<int64_t> shape(y.sizes().begin(), y.sizes().end());
  int64_t n = shape.back();
  TT z = y.reshape({1, -1, n});
  z = mode == "reflect" ? torch::reflection_pad1d(z, {before, after}) : torch::replication_pad1d(z, {before, after});
  shape.back() = n + before + after;
  return z.reshape(shape).movedim(-1, dim);
}

std::vector<int64_t> all_dims(const TT& x) {
  std::vector<int64_t> d;
  for (int64_t i = 0; i < x.dim(); ++i) d.push_back(i);
  return d;
}

// A rows x cols matrix of doubles as an f32 tensor.
TT matrix(const std::vector<double>& v, int64_t rows, int64_t cols) {
  std::vector<float> f(v.begin(), v.end());
  return torch::tensor(f).reshape({rows, cols});
}

// The blocked layout [N, C/b, S..., b] and back.
TT unblock(const TT& x) {
  std::vector<int64_t> perm = {0, 1, x.dim() - 1};
  for (int64_t d = 2; d + 1 < x.dim(); ++d) perm.push_back(d);
  TT y = x.permute(perm);
  std::vector<int64_t> shape(y.sizes().begin(), y.sizes().end());
  shape[1] *= shape[2];
  shape.erase(shape.begin() + 2);
  return y.reshape(shape);
}
TT block(const TT& x, int64_t b) {
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape[1] /= b;
  shape.insert(shape.begin() + 2, b);
  std::vector<int64_t> perm = {0, 1};
  for (int64_t d = 3; d < static_cast<int64_t>(shape.size()); ++d) perm.push_back(d);
  perm.push_back(2);
  return x.reshape(shape).permute(perm).contiguous();
}
// A pooling kernel of NCHW applied to an input in NCHW or in the blocked layout.
Fn any_layout(Fn f) {
  return [f](const ops::Attrs& a, const std::vector<TT>& in) {
    if (in[0].dim() != 5) return f(a, in);
    std::vector<TT> plain = in;
    plain[0] = unblock(in[0]);
    std::vector<TT> out = f(a, plain);
    out[0] = block(out[0], in[0].size(4));
    return out;
  };
}

const std::map<std::string, Fn>& references() {
  static const std::map<std::string, Fn> m = {
      {"dense", binary([](const TT& x, const TT& w) { return torch::linear(wide(x), wide(w)); })},
      {"matmul", binary([](const TT& a, const TT& b) { return torch::mm(wide(a), wide(b)); })},
      {"batch_matmul", binary([](const TT& a, const TT& b) { return torch::bmm(wide(a), wide(b)); })},
      {"attention", [](const ops::Attrs& a, const std::vector<TT>& in) {
         // The unfused composition: the scores viewed as [batch_shape..., L, S] for the mask.
         TT s = torch::bmm(in[0], in[1]) * a.f("scale");
         std::vector<int64_t> view;
         if (a.has("batch_shape")) view = a.ints("batch_shape");                // the graph operator
         else if (a.has("heads")) view = {a.i("batch"), a.i("heads")};           // the registry operator
         if (view.empty()) view.push_back(s.size(0));
         view.push_back(s.size(1));
         view.push_back(s.size(2));
         if (in.size() > 3) s = (s.reshape(view) + in[3]).reshape(s.sizes());
         return one(torch::bmm(torch::softmax(s, -1), in[2]));
       }},
      {"conv2d_bias_relu", [](const ops::Attrs& a, const std::vector<TT>& in) {
         return one(torch::relu(torch::conv2d(in[0], in[1], in[2], per_dim(a, "stride", 2), per_dim(a, "padding", 2))));
       }},
      {"dense_bias_gelu", [](const ops::Attrs&, const std::vector<TT>& in) {
         return one(torch::gelu(torch::linear(in[0], in[1], in[2])));
       }},
      {"conv1d", conv_nd(1)},
      {"conv2d", conv_nd(2)},
      {"conv3d", conv_nd(3)},
      {"depthwise_conv2d", [](const ops::Attrs& a, const std::vector<TT>& in) {
         return one(torch::conv2d(in[0], in[1], {}, per_dim(a, "stride", 2), per_dim(a, "padding", 2),
                                  per_dim(a, "dilation", 2), a.i("channels")));
       }},
      {"conv2d_transpose", [](const ops::Attrs& a, const std::vector<TT>& in) {
         TT y = torch::conv_transpose2d(in[0], in[1], {}, per_dim(a, "stride", 2), per_dim(a, "padding", 2),
                                        per_dim(a, "output_padding", 2), a.i("groups"), per_dim(a, "dilation", 2));
         if (!a.has("width_phases") || a.i("width_phases") == 0) return one(y);
         // [N, OC, OH, OW] -> [N, OC, OH, OW/S, S] -> [N, OC, OH, S, OW/S]
         const int64_t s = per_dim(a, "stride", 2)[1];
         TT split = y.reshape({y.size(0), y.size(1), y.size(2), y.size(3) / s, s});
         return one(split.permute({0, 1, 2, 4, 3}).contiguous());
       }},
      {"conv2d_nchwc", [](const ops::Attrs& a, const std::vector<TT>& in) {
         // The weight [OC/bo, C/bi, KH, KW, bi, bo] as [OC, C/groups, KH, KW].
         const TT& w = in[1];
         TT wt = wide(w).permute({0, 5, 1, 4, 2, 3})
                     .reshape({w.size(0) * w.size(5), w.size(1) * w.size(4), w.size(2), w.size(3)});
         auto p = per_dim(a, "padding", 2);
         const TT x = pad_by_value(a, wide(unblock(in[0])), p);
         return one(block(torch::conv2d(x, wt, {}, per_dim(a, "stride", 2), p, per_dim(a, "dilation", 2), a.i("groups")),
                          w.size(5)));
       }},
      {"winograd_input", [](const ops::Attrs& a, const std::vector<TT>& in) {
         // Overlapping tiles of A x A inputs at steps of m (unfold), then B^T d B.
         const int64_t m = a.i("m"), p = a.i("padding"), al = m + 2;
         const TT& x = in[0];
         const int64_t th = (x.size(2) + 2 * p - 2 + m - 1) / m, tw = (x.size(3) + 2 * p - 2 + m - 1) / m;
         TT xp = torch::constant_pad_nd(x, {0, 0, p, tw * m + 2 - p - x.size(3), p, th * m + 2 - p - x.size(2)});
         TT d = xp.unfold(2, al, m).unfold(3, al, m);  // [N, C/b, TH, TW, b, A, A]
         TT bt = matrix(ops::winograd_matrix(m, 'B'), al, al);
         TT v = torch::einsum("ur,vs,nchwbrs->uvnchwb", {bt, bt, d});
         return one(v.reshape({al, al, x.size(0), x.size(1), th * tw, x.size(4)}).contiguous());
       }},
      {"winograd_gemm", binary([](const TT& v, const TT& u) { return torch::einsum("uvnctx,uvkcxy->uvnkty", {v, u}); })},
      {"winograd_output", [](const ops::Attrs& a, const std::vector<TT>& in) {
         const int64_t m = a.i("m"), h = a.i("height"), w = a.i("width"), al = m + 2;
         const int64_t th = (h + m - 1) / m, tw = (w + m - 1) / m;
         const TT& mt = in[0];
         TT at = matrix(ops::winograd_matrix(m, 'A'), m, al);
         TT y = torch::einsum("iu,jv,uvnktb->nktijb", {at, at, mt});  // [N, C/b, T, m, m, b]
         y = y.reshape({mt.size(2), mt.size(3), th, tw, m, m, mt.size(5)}).permute({0, 1, 2, 4, 3, 5, 6});
         y = y.reshape({mt.size(2), mt.size(3), th * m, tw * m, mt.size(5)});
         return one(y.slice(2, 0, h).slice(3, 0, w).contiguous());
       }},
      {"to_nchwc", [](const ops::Attrs& a, const std::vector<TT>& in) { return one(block(in[0], a.i("block"))); }},
      {"from_nchwc", unary([](const TT& x) { return unblock(x).contiguous(); })},
      {"max_pool2d", any_layout([](const ops::Attrs& a, const std::vector<TT>& in) {
         // 8-bit inputs pooled in float32 (exact) and stored back.
         const TT x = in[0].is_floating_point() ? in[0] : in[0].to(torch::kFloat32);
         const TT y = torch::max_pool2d(x, per_dim(a, "kernel", 2), per_dim(a, "stride", 2), per_dim(a, "padding", 2),
                                        per_dim(a, "dilation", 2), a.i("ceil_mode") != 0);
         return one(y.to(in[0].scalar_type()));
       })},
      {"avg_pool2d", any_layout([](const ops::Attrs& a, const std::vector<TT>& in) {
         return one(torch::avg_pool2d(in[0], per_dim(a, "kernel", 2), per_dim(a, "stride", 2), per_dim(a, "padding", 2),
                                      a.i("ceil_mode") != 0, a.i("count_include_pad") == 1));
       })},
      {"global_avg_pool2d", any_layout(unary([](const TT& x) { return torch::adaptive_avg_pool2d(x, {1, 1}); }))},
      {"global_max_pool2d", any_layout(unary([](const TT& x) { return torch::amax(x, {2, 3}, true); }))},
      {"add", binary([](const TT& a, const TT& b) { return torch::add(a, b); })},
      {"sub", binary([](const TT& a, const TT& b) { return torch::sub(a, b); })},
      {"mul", binary([](const TT& a, const TT& b) { return torch::mul(a, b); })},
      {"div", binary([](const TT& a, const TT& b) { return torch::div(a, b); })},
      {"maximum", binary([](const TT& a, const TT& b) { return torch::maximum(a, b); })},
      {"minimum", binary([](const TT& a, const TT& b) { return torch::minimum(a, b); })},
      {"pow", binary([](const TT& a, const TT& b) { return torch::pow(a, b); })},
      {"relu", unary([](const TT& x) { return torch::relu(x); })},
      {"relu6", unary([](const TT& x) { return torch::hardtanh(x, 0.0, 6.0); })},
      {"clip", [](const ops::Attrs& a, const std::vector<TT>& in) { return one(torch::clamp(in[0], a.f("min"), a.f("max"))); }},
      {"leaky_relu", [](const ops::Attrs& a, const std::vector<TT>& in) { return one(torch::leaky_relu(in[0], a.f("alpha"))); }},
      {"sigmoid", unary([](const TT& x) { return torch::sigmoid(x); })},
      {"tanh", unary([](const TT& x) { return torch::tanh(x); })},
      {"gelu", unary([](const TT& x) { return torch::gelu(x); })},
      {"silu", unary([](const TT& x) { return torch::silu(x); })},
      // ONNX's x * hardsigmoid(x): torch::hardswish's x * relu6(x + 3) / 6 overflows
      // above about 5.7e37, where the product is finite.
      {"hardswish", unary([](const TT& x) { return x * torch::hardsigmoid(x); })},
      {"hardsigmoid", unary([](const TT& x) { return torch::hardsigmoid(x); })},
      {"floor", unary([](const TT& x) { return torch::floor(x); })},
      {"ceil", unary([](const TT& x) { return torch::ceil(x); })},
      {"round", unary([](const TT& x) { return torch::round(x); })},  // ties to even
      {"sign", unary([](const TT& x) { return torch::sign(x); })},
      {"softplus", unary([](const TT& x) { return torch::softplus(x, 1, 1e30); })},  // (no linear threshold)
      {"elu", [](const ops::Attrs& a, const std::vector<TT>& in) {
         return one(torch::where(in[0] > 0, in[0], a.f("alpha") * torch::expm1(in[0])));
       }},
      {"selu", [](const ops::Attrs& a, const std::vector<TT>& in) {
         return one(a.f("gamma") * torch::where(in[0] > 0, in[0], a.f("alpha") * torch::expm1(in[0])));
       }},
      {"exp", unary([](const TT& x) { return torch::exp(x); })},
      {"log", unary([](const TT& x) { return torch::log(x); })},
      {"sqrt", unary([](const TT& x) { return torch::sqrt(x); })},
      {"rsqrt", unary([](const TT& x) { return torch::rsqrt(x); })},
      {"erf", unary([](const TT& x) { return torch::erf(x); })},
      {"neg", unary([](const TT& x) { return torch::neg(x); })},
      {"abs", unary([](const TT& x) { return torch::abs(x); })},
      {"sin", unary([](const TT& x) { return torch::sin(x); })},
      {"cos", unary([](const TT& x) { return torch::cos(x); })},
      {"equal", binary([](const TT& a, const TT& b) { return torch::eq(a, b); })},
      {"less", binary([](const TT& a, const TT& b) { return torch::lt(a, b); })},
      {"less_equal", binary([](const TT& a, const TT& b) { return torch::le(a, b); })},
      {"greater", binary([](const TT& a, const TT& b) { return torch::gt(a, b); })},
      {"greater_equal", binary([](const TT& a, const TT& b) { return torch::ge(a, b); })},
      {"logical_and", binary([](const TT& a, const TT& b) { return torch::logical_and(a, b); })},
      {"logical_or", binary([](const TT& a, const TT& b) { return torch::logical_or(a, b); })},
      {"logical_xor", binary([](const TT& a, const TT& b) { return torch::logical_xor(a, b); })},
      {"logical_not", unary([](const TT& x) { return torch::logical_not(x); })},
      {"isnan", unary([](const TT& x) { return torch::isnan(x); })},
      {"isinf", [](const ops::Attrs& a, const std::vector<TT>& in) {
         bool p = a.i("detect_positive") != 0, n = a.i("detect_negative") != 0;
         if (p && n) return one(torch::isinf(in[0]));
         if (p) return one(torch::isposinf(in[0]));
         if (n) return one(torch::isneginf(in[0]));
         return one(torch::zeros_like(in[0], torch::kBool));
       }},
      {"where", [](const ops::Attrs&, const std::vector<TT>& in) { return one(torch::where(in[0], in[1], in[2])); }},
      {"mod", [](const ops::Attrs& a, const std::vector<TT>& in) {
         return one(a.i("fmod") != 0 ? torch::fmod(in[0], in[1]) : torch::remainder(in[0], in[1]));
       }},
      {"cast", [](const ops::Attrs& a, const std::vector<TT>& in) { return one(in[0].to(torch_dtype(DType::parse(a.s("to"))))); }},
      {"quantize_linear", [](const ops::Attrs& a, const std::vector<TT>& in) {
         const TT s = quant_param(in[1], in[0], a.i("axis")), zp = quant_param(in[2], in[0], a.i("axis"));
         TT v = torch::round(in[0] / s) + zp.to(torch::kFloat32);  // torch::round: ties to even
         const torch::Dtype out = torch_dtype(ops::quantized_type(a.i("qmin"), a.i("qmax")));
         TT q = torch::clamp(v, static_cast<double>(a.i("qmin")), static_cast<double>(a.i("qmax"))).to(out);
         // NaN: the least value.
         return one(torch::where(torch::isnan(v), torch::full_like(q, a.i("qmin")), q));
       }},
      {"fake_quantize", [](const ops::Attrs& a, const std::vector<TT>& in) {
         const TT s = quant_param(in[1], in[0], a.i("axis"));
         const TT zp = torch::clamp(quant_param(in[2], in[0], a.i("axis")), a.i("qmin"), a.i("qmax"));
         const TT v = torch::round(in[0] / s) + zp.to(torch::kFloat32);
         TT q = torch::clamp(v, static_cast<double>(a.i("qmin")), static_cast<double>(a.i("qmax")));
         q = torch::where(torch::isnan(v), torch::full_like(q, static_cast<double>(a.i("qmin"))), q);
         return one((q - zp.to(torch::kFloat32)) * s);
       }},
      {"dequantize_linear", [](const ops::Attrs& a, const std::vector<TT>& in) {
         const TT s = quant_param(in[1], in[0], a.i("axis")), zp = quant_param(in[2], in[0], a.i("axis"));
         return one((wide(in[0]) - zp).to(torch::kFloat32) * s);
       }},
      {"batch_norm", [](const ops::Attrs& a, const std::vector<TT>& in) {
         return one(torch::batch_norm(in[0], in[1], in[2], in[3], in[4], false, 0.1, a.f("epsilon"), false));
       }},
      {"softmax", [](const ops::Attrs& a, const std::vector<TT>& in) { return one(torch::softmax(in[0], a.i("axis"))); }},
      {"log_softmax", [](const ops::Attrs& a, const std::vector<TT>& in) { return one(torch::log_softmax(in[0], a.i("axis"))); }},
      {"layer_norm", [](const ops::Attrs& a, const std::vector<TT>& in) {
         std::vector<int64_t> norm(in[1].sizes().begin(), in[1].sizes().end());
         return one(torch::layer_norm(in[0], norm, in[1], in[2], a.f("epsilon")));
       }},
      {"rms_norm", [](const ops::Attrs& a, const std::vector<TT>& in) {
         // LibTorch 1.13 has no rms_norm: composed from its kernels in float64.
         TT x = in[0].to(torch::kFloat64);
         std::vector<int64_t> dims;
         for (int64_t d = x.dim() - in[1].dim(); d < x.dim(); ++d) dims.push_back(d);
         TT ms = (x * x).mean(dims, true);
         return one((x * torch::rsqrt(ms + a.f("epsilon")) * in[1].to(torch::kFloat64)).to(torch::kFloat32));
       }},
      {"sum", [](const ops::Attrs& a, const std::vector<TT>& in) {
         auto ax = a.ints("axes").empty() ? all_dims(in[0]) : a.ints("axes");
         return one(torch::sum(in[0], ax, a.i("keepdims") == 1));
       }},
      {"mean", [](const ops::Attrs& a, const std::vector<TT>& in) {
         auto ax = a.ints("axes").empty() ? all_dims(in[0]) : a.ints("axes");
         return one(torch::mean(in[0], ax, a.i("keepdims") == 1));
       }},
      {"max", [](const ops::Attrs& a, const std::vector<TT>& in) {
         auto ax = a.ints("axes").empty() ? all_dims(in[0]) : a.ints("axes");
         return one(torch::amax(in[0], ax, a.i("keepdims") == 1));
       }},
      {"min", [](const ops::Attrs& a, const std::vector<TT>& in) {
         auto ax = a.ints("axes").empty() ? all_dims(in[0]) : a.ints("axes");
         return one(torch::amin(in[0], ax, a.i("keepdims") == 1));
       }},
      {"reshape", [](const ops::Attrs& a, const std::vector<TT>& in) { return one(in[0].reshape(a.ints("new_shape"))); }},
      {"transpose", [](const ops::Attrs& a, const std::vector<TT>& in) {
         std::vector<int64_t> perm = a.ints("perm");
         if (perm.empty())
           for (int64_t d = in[0].dim() - 1; d >= 0; --d) perm.push_back(d);
         return one(in[0].permute(perm));
       }},
      {"flatten", [](const ops::Attrs& a, const std::vector<TT>& in) { return one(torch::flatten(in[0], a.i("start_dim"), a.i("end_dim"))); }},
      {"concat", [](const ops::Attrs& a, const std::vector<TT>& in) { return one(torch::cat(in, a.i("axis"))); }},
      {"split", [](const ops::Attrs& a, const std::vector<TT>& in) { return torch::split_with_sizes(in[0], a.ints("sizes"), a.i("axis")); }},
      {"slice", [](const ops::Attrs& a, const std::vector<TT>& in) {
         TT x = in[0];
         const auto& st = a.ints("starts");
         const auto& en = a.ints("ends");
         for (size_t k = 0; k < st.size(); ++k) {
           int64_t axis = a.ints("axes").empty() ? static_cast<int64_t>(k) : a.ints("axes")[k];
           int64_t step = a.ints("steps").empty() ? 1 : a.ints("steps")[k];
           if (step > 0) {
             x = x.slice(axis, st[k], en[k], step);
             continue;
           }
           // LibTorch slices take no negative step: the indices, by ONNX's clamping rule.
           const int64_t n = x.size(axis);
           int64_t s = st[k] < 0 ? st[k] + n : st[k], e = en[k] < 0 ? en[k] + n : en[k];
           s = std::clamp<int64_t>(s, 0, n - 1);
           e = std::clamp<int64_t>(e, -1, n - 1);
           x = x.index_select(axis, torch::arange(s, e, step, torch::kInt64));
         }
         return one(x);
       }},
      {"pad", [](const ops::Attrs& a, const std::vector<TT>& in) {
         const auto& pads = a.ints("pads");
         int64_t r = in[0].dim();
         if (a.s("mode") == "constant") {
           std::vector<int64_t> tp;  // LibTorch order: last axis first, (before, after) pairs
           for (int64_t d = r - 1; d >= 0; --d) {
             tp.push_back(pads[d]);
             tp.push_back(pads[r + d]);
           }
           return one(torch::constant_pad_nd(in[0], tp, a.f("value")));
         }
         TT x = in[0];
         for (int64_t d = 0; d < r; ++d) x = pad_axis(x, d, pads[d], pads[r + d], a.s("mode"));
         return one(x);
       }},
      {"gather", [](const ops::Attrs& a, const std::vector<TT>& in) {
         int64_t axis = a.i("axis");
         if (axis < 0) axis += in[0].dim();
         std::vector<int64_t> shape(in[0].sizes().begin(), in[0].sizes().begin() + axis);
         shape.insert(shape.end(), in[1].sizes().begin(), in[1].sizes().end());
         shape.insert(shape.end(), in[0].sizes().begin() + axis + 1, in[0].sizes().end());
         return one(torch::index_select(in[0], axis, in[1].flatten()).reshape(shape));
       }},
      {"gather_elements", [](const ops::Attrs& a, const std::vector<TT>& in) {
         return one(torch::gather(in[0], a.i("axis"), in[1]));
       }},
      {"gather_nd", [](const ops::Attrs& a, const std::vector<TT>& in) {
         // Advanced indexing over the batch axes (aranges) and the tuples' components.
         const int64_t b = a.i("batch_dims"), k = in[1].size(-1), q = in[1].dim();
         std::vector<torch::indexing::TensorIndex> idx;
         for (int64_t d = 0; d < b; ++d) {
           std::vector<int64_t> view(static_cast<size_t>(q - 1), 1);
           view[static_cast<size_t>(d)] = in[0].size(d);
           idx.push_back(torch::arange(in[0].size(d), torch::kInt64).view(view));
         }
         for (int64_t j = 0; j < k; ++j) idx.push_back(in[1].select(-1, j));
         return one(in[0].index(idx));
       }},
      {"cumsum", [](const ops::Attrs& a, const std::vector<TT>& in) {
         int64_t axis = a.i("axis");
         TT x = a.i("reverse") ? in[0].flip({axis}) : in[0];
         TT y = torch::cumsum(x, axis, x.scalar_type());
         if (a.i("exclusive")) y = y - x;
         return one(a.i("reverse") ? y.flip({axis}) : y);
       }},
      {"embedding", binary([](const TT& w, const TT& idx) { return torch::embedding(w, idx); })},
      {"broadcast_to", [](const ops::Attrs& a, const std::vector<TT>& in) { return one(in[0].expand(a.ints("new_shape")).contiguous()); }},
      {"squeeze", [](const ops::Attrs& a, const std::vector<TT>& in) {
         if (a.ints("axes").empty()) return one(in[0].squeeze());
         std::vector<int64_t> axes = a.ints("axes");
         for (auto& x : axes)
           if (x < 0) x += in[0].dim();
         std::sort(axes.rbegin(), axes.rend());
         TT x = in[0];
         for (int64_t d : axes) x = x.squeeze(d);
         return one(x);
       }},
      {"unsqueeze", [](const ops::Attrs& a, const std::vector<TT>& in) {
         std::vector<int64_t> axes = a.ints("axes");
         int64_t r = in[0].dim() + static_cast<int64_t>(axes.size());
         for (auto& x : axes)
           if (x < 0) x += r;
         std::sort(axes.begin(), axes.end());
         TT x = in[0];
         for (int64_t d : axes) x = x.unsqueeze(d);
         return one(x);
       }},
      {"resize", [](const ops::Attrs& a, const std::vector<TT>& in) {
         // LibTorch's resizes are the ONNX modes they equal; the others have no reference.
         std::vector<int64_t> size = {a.i("out_height"), a.i("out_width")};
         const std::string& mode = a.s("mode");
         const std::string& coord = a.s("coord");
         const std::string& nm = a.s("nearest_mode");
         bool ac = a.i("align_corners") == 1 || coord == "align_corners";
         if (mode == "nearest" && coord.empty())
           return one(torch::upsample_nearest2d(in[0], size, c10::nullopt, c10::nullopt));
         if (mode == "nearest" && coord == "half_pixel" && nm == "round_prefer_ceil")
           return one(torch::_upsample_nearest_exact2d(in[0], size, c10::nullopt, c10::nullopt));
         if ((mode == "bilinear" || mode == "linear") && (coord.empty() || coord == "pytorch_half_pixel" || coord == "align_corners"))
           return one(torch::upsample_bilinear2d(in[0], size, ac, c10::nullopt, c10::nullopt));
         if (mode == "cubic" && a.i("exclude_outside") == 0 && a.f("cubic_a") == -0.75 &&
             (coord.empty() || coord == "half_pixel" || coord == "align_corners"))
           return one(torch::upsample_bicubic2d(in[0], size, ac, c10::nullopt, c10::nullopt));
         throw Error("resize mode " + mode + " with coord '" + coord + "' and nearest_mode " + nm + " has no LibTorch equivalent");
       }},
      {"subgraph", [](const ops::Attrs& a, const std::vector<TT>& in) {
         // A fused task: its nodes one by one, each with the kernel of its operator.
         ops::SubgraphSpec spec = ops::parse_subgraph(a.s("graph"));
         std::map<std::string, TT> env;
         for (size_t i = 0; i < spec.inputs.size() && i < in.size(); ++i) env[spec.inputs[i].name] = in[i];
         TT last;
         for (const auto& n : spec.nodes) {
           std::vector<TT> args;
           for (const std::string& x : n.inputs) args.push_back(env.at(x));
           auto it = references().find(n.op);
           if (it == references().end()) throw Error("operator '" + n.op + "' has no LibTorch reference");
           last = it->second(n.attrs, read_args(n.op, std::move(args))).at(0);
           env[n.name] = last;
         }
         return one(last);
       }},
  };
  return m;
}

}  // namespace

bool has_torch_reference(const std::string& op) { return references().count(op) != 0; }

std::vector<NDArray> torch_reference(const ops::OpGraph& g, const std::vector<NDArray>& inputs) {
  auto it = references().find(g.op);
  if (it == references().end()) throw Error("operator '" + g.op + "' has no LibTorch reference");
  if (inputs.size() != g.inputs.size())
    throw Error("operator '" + g.op + "' takes " + std::to_string(g.inputs.size()) + " inputs, got " +
                std::to_string(inputs.size()));
  torch::NoGradGuard no_grad;
  std::vector<TT> in;
  for (const NDArray& a : inputs) in.push_back(to_torch(a));
  std::vector<TT> out;
  try {
    out = it->second(g.attrs, in);
  } catch (const c10::Error& e) {
    throw Error("LibTorch rejected operator '" + g.op + "': " + e.what_without_backtrace());
  }
  if (out.size() != g.outputs.size())
    throw Error("LibTorch's '" + g.op + "' gave " + std::to_string(out.size()) + " outputs, basin " +
                std::to_string(g.outputs.size()));
  std::vector<NDArray> res;
  for (size_t i = 0; i < out.size(); ++i) res.push_back(from_torch(out[i], g.outputs[i].dtype()));
  return res;
}

Timing time_torch_reference(const ops::OpGraph& g, const std::vector<NDArray>& inputs, const TimingOptions& opt) {
  auto it = references().find(g.op);
  if (it == references().end()) throw Error("operator '" + g.op + "' has no LibTorch reference");
  torch::NoGradGuard no_grad;
  std::vector<TT> in;
  for (const NDArray& a : inputs) in.push_back(to_torch(a));
  const Fn& fn = it->second;
  BlasThreads peer(torch::get_num_threads());  // the peer's BLAS on the peer's threads
  return time_function([&] { fn(g.attrs, in); }, opt);
}

int match_torch_threads() {
  const int n = runtime_threads();
  torch::set_num_threads(n);
  return n;
}

struct TorchExecutor::Impl {
  const graph::Graph* g = nullptr;
  std::vector<int> order;
  std::vector<const Fn*> fns;  // per node index
  std::vector<TT> constants;   // per value (defined for constants)
  std::vector<TT> eval(const std::vector<TT>& inputs) const {
    std::vector<TT> vals = constants;
    for (size_t i = 0; i < inputs.size(); ++i) vals[g->inputs()[i]] = inputs[i];
    for (int n : order) {
      const graph::Node& nd = g->node(n);
      std::vector<TT> args;
      args.reserve(nd.inputs.size());
      for (int v : nd.inputs) args.push_back(vals[v]);
      try {
        vals[nd.output] = (*fns[n])(nd.attrs, read_args(nd.op, std::move(args))).at(0);
      } catch (const c10::Error& e) {
        throw Error("LibTorch rejected node '" + nd.name + "' (" + nd.op + "): " + e.what_without_backtrace());
      }
    }
    std::vector<TT> out;
    for (int v : g->outputs()) out.push_back(vals[v]);
    return out;
  }
  std::vector<TT> convert(const std::vector<NDArray>& inputs) const {
    if (inputs.size() != g->inputs().size())
      throw Error("network '" + g->name + "' takes " + std::to_string(g->inputs().size()) + " inputs, got " +
                  std::to_string(inputs.size()));
    std::vector<TT> in;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const graph::Value& v = g->value(g->inputs()[i]);
      if (inputs[i].shape() != v.shape || inputs[i].dtype() != v.dtype)
        throw Error("input '" + v.name + "' expects " + v.dtype.str() + " " + shape_str(v.shape) + ", got " +
                    inputs[i].dtype().str() + " " + shape_str(inputs[i].shape()));
      in.push_back(to_torch(inputs[i]));
    }
    return in;
  }
};

TorchExecutor::TorchExecutor(const graph::Graph& g) : impl_(std::make_unique<Impl>()) {
  impl_->g = &g;
  impl_->order = g.topo_order();
  impl_->fns.resize(g.nodes().size());
  for (size_t n = 0; n < g.nodes().size(); ++n) {
    auto it = references().find(g.node(n).op);
    if (it == references().end())
      throw Error("node '" + g.node(n).name + "': operator '" + g.node(n).op + "' has no LibTorch kernel");
    impl_->fns[n] = &it->second;
  }
  impl_->constants.resize(g.values().size());
  for (size_t v = 0; v < g.values().size(); ++v)
    if (g.values()[v].constant) impl_->constants[v] = to_torch(g.values()[v].data);
}

TorchExecutor::~TorchExecutor() = default;

std::vector<NDArray> TorchExecutor::run(const std::vector<NDArray>& inputs) const {
  torch::NoGradGuard no_grad;
  std::vector<TT> out = impl_->eval(impl_->convert(inputs));
  std::vector<NDArray> res;
  for (size_t i = 0; i < out.size(); ++i)
    res.push_back(from_torch(out[i], impl_->g->value(impl_->g->outputs()[i]).dtype));
  return res;
}

Timing TorchExecutor::time(const std::vector<NDArray>& inputs, const TimingOptions& opt) const {
  torch::NoGradGuard no_grad;
  std::vector<TT> in = impl_->convert(inputs);
  BlasThreads peer(torch::get_num_threads());
  return time_function([&] { impl_->eval(in); }, opt);
}

}  // namespace basin::codegen
