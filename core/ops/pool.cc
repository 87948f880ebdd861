// max_pool2d, avg_pool2d, global_avg_pool2d, global_max_pool2d: NCHW, or the blocked
// layout NCHWc ([N, C/b, H, W, b], blocked.cc), whose last axis is carried.
#include <limits>

#include "core/ops/op_util.h"
#include "core/ops/operators.h"

namespace basin::ops {

namespace {

std::vector<int64_t> pooled_shape(const Check& c, const Tensor& x, const PoolParams& p) {
  c.that(x.ndim() == 4 || x.ndim() == 5, "x", "expected [N, C, H, W] or [N, C/b, H, W, b], got " + ints_str(x.shape()));
  std::vector<int64_t> out = {x.shape()[0], x.shape()[1]};
  for (int d = 0; d < 2; ++d) {
    c.that(p.kernel[d] >= 1, "kernel", "must be positive, got " + ints_str(p.kernel));
    c.that(p.stride[d] >= 1, "stride", "must be positive, got " + ints_str(p.stride));
    c.that(p.dilation[d] >= 1, "dilation", "must be positive, got " + ints_str(p.dilation));
    int64_t eff = p.dilation[d] * (p.kernel[d] - 1) + 1;
    c.that(p.padding[d] >= 0 && 2 * p.padding[d] <= eff, "padding",
           "must be between 0 and half the kernel, got " + ints_str(p.padding));
    int64_t span = x.shape()[2 + d] + 2 * p.padding[d] - eff;
    c.that(span >= 0, "kernel",
           "kernel " + ints_str(p.kernel) + " is larger than the padded input " + ints_str(x.shape()));
    int64_t n = (p.ceil_mode ? (span + p.stride[d] - 1) / p.stride[d] : span / p.stride[d]) + 1;
    if (p.ceil_mode && (n - 1) * p.stride[d] >= x.shape()[2 + d] + p.padding[d]) --n;
    out.push_back(n);
  }
  if (x.ndim() == 5) out.push_back(x.shape()[4]);
  return out;
}

// x at (i[0], i[1], y, z), and the blocked layout's channel i[4] where it has one.
Expr read_at(const Tensor& x, const std::vector<Var>& i, const Expr& y, const Expr& z) {
  std::vector<Expr> idx = {i[0], i[1], y, z};
  if (x.ndim() == 5) idx.push_back(i[4]);
  return x.read(idx);
}

}  // namespace

Tensor max_pool2d(const Tensor& x, const PoolParams& p) {
  Check c("max_pool2d");
  c.that(x.dtype() == DType::f32() || x.dtype().is_byte(), "x",
         "must be float32, uint8 or int8, got " + x.dtype().str());
  std::vector<int64_t> out = pooled_shape(c, x, p);
  int64_t h = x.shape()[2], w = x.shape()[3];
  // 8-bit values (a quantized model's) are compared as int32 and stored back.
  const bool byte = x.dtype().is_byte();
  const DType t = byte ? DType::i32() : x.dtype();
  // Padding never wins: -inf, or the 8-bit type's least value.
  const Expr pad = byte ? make_const(t, x.dtype().is_uint() ? 0.0 : -128.0)
                        : make_const(t, -std::numeric_limits<double>::infinity());
  Tensor red = te::reduce(
      byte ? "max_pool2d_i32" : "max_pool2d", out, {p.kernel[0], p.kernel[1]}, te::ReduceKind::Max,
      [&](const std::vector<Var>& i, const std::vector<Var>& r) {
        Expr y = i[2] * p.stride[0] + r[0] * p.dilation[0] - p.padding[0];
        Expr z = i[3] * p.stride[1] + r[1] * p.dilation[1] - p.padding[1];
        Expr in = logical_and(logical_and(ge(y, Expr(0)), lt(y, Expr(h))), logical_and(ge(z, Expr(0)), lt(z, Expr(w))));
        return select(in, widened(read_at(x, i, y, z)), pad);
      },
      te::OpPattern::Reduction, "max_pool2d");
  if (!byte) return red;
  return te::compute(
      "max_pool2d", out, [&](const std::vector<Var>& i) { return cast(x.dtype(), red.read(as_exprs(i))); },
      te::OpPattern::Elementwise, "max_pool2d");
}

Tensor avg_pool2d(const Tensor& x, const PoolParams& p) {
  Check c("avg_pool2d");
  c.that(p.dilation[0] == 1 && p.dilation[1] == 1, "dilation", "average pooling has no dilation");
  std::vector<int64_t> out = pooled_shape(c, x, p);
  int64_t h = x.shape()[2], w = x.shape()[3];
  Tensor sum = te::reduce(
      "avg_pool2d_sum", out, {p.kernel[0], p.kernel[1]}, te::ReduceKind::Sum,
      [&](const std::vector<Var>& i, const std::vector<Var>& r) {
        Expr y = i[2] * p.stride[0] + r[0] - p.padding[0];
        Expr z = i[3] * p.stride[1] + r[1] - p.padding[1];
        Expr in = logical_and(logical_and(ge(y, Expr(0)), lt(y, Expr(h))), logical_and(ge(z, Expr(0)), lt(z, Expr(w))));
        return select(in, read_at(x, i, y, z), make_const(x.dtype(), 0));
      },
      te::OpPattern::Reduction, "avg_pool2d");
  return te::compute(
      "avg_pool2d", out,
      [&](const std::vector<Var>& i) {
        Expr count;
        if (p.count_include_pad && !p.ceil_mode) {
          count = Expr(p.kernel[0] * p.kernel[1]);
        } else if (p.count_include_pad) {
          // A ceil-mode window past the padded input counts only up to its end.
          Expr y0 = i[2] * p.stride[0] - p.padding[0], z0 = i[3] * p.stride[1] - p.padding[1];
          count = (min(y0 + p.kernel[0], Expr(h + p.padding[0])) - y0) *
                  (min(z0 + p.kernel[1], Expr(w + p.padding[1])) - z0);
        } else {
          Expr y0 = i[2] * p.stride[0] - p.padding[0], z0 = i[3] * p.stride[1] - p.padding[1];
          Expr hc = min(y0 + p.kernel[0], Expr(h)) - max(y0, Expr(0));
          Expr wc = min(z0 + p.kernel[1], Expr(w)) - max(z0, Expr(0));
          count = hc * wc;
        }
        return sum.read(as_exprs(i)) / cast(x.dtype(), count);
      },
      te::OpPattern::Elementwise, "avg_pool2d");
}

Tensor global_pool2d(const Tensor& x, bool average) {
  const char* name = average ? "global_avg_pool2d" : "global_max_pool2d";
  Check c(name);
  c.that(x.ndim() == 4 || x.ndim() == 5, "x", "expected [N, C, H, W] or [N, C/b, H, W, b], got " + ints_str(x.shape()));
  std::vector<int64_t> out = {x.shape()[0], x.shape()[1], 1, 1};
  if (x.ndim() == 5) out.push_back(x.shape()[4]);
  Tensor red = te::reduce(
      average ? std::string(name) + "_sum" : std::string(name), out, {x.shape()[2], x.shape()[3]},
      average ? te::ReduceKind::Sum : te::ReduceKind::Max,
      [&](const std::vector<Var>& i, const std::vector<Var>& r) { return read_at(x, i, r[0], r[1]); },
      te::OpPattern::Reduction, name);
  if (!average) return red;
  double inv = static_cast<double>(x.shape()[2] * x.shape()[3]);
  return te::compute(
      name, out, [&](const std::vector<Var>& i) { return red.read(as_exprs(i)) / make_const(x.dtype(), inv); },
      te::OpPattern::Elementwise, name);
}

namespace {

OpDef pool_def(const std::string& name, bool is_max) {
  std::vector<ParamSpec> params = {p_int("batch", 1, "N"),
                                   p_int("channels", 4, "C"),
                                   p_int("height", 12, "H"),
                                   p_int("width", 11, "W"),
                                   p_ints("kernel", {3}, "KH,KW"),
                                   p_ints("stride", {2}, "stride"),
                                   p_ints("padding", {1}, "zero/neg-inf padding")};
  if (is_max) {
    params.push_back(p_ints("dilation", {1}, "window dilation"));
    params.push_back(p_str("dtype", "float32", "x's type: float32, uint8 or int8 (a quantized model's)"));
  } else params.push_back(p_int("count_include_pad", 1, "1: divide by the window size; 0: by the valid elements"));
  params.push_back(p_int("ceil_mode", 0, "1: output extents rounded up (a last, partial window)"));
  return {
      name, "nn", is_max ? "2-D max pooling (NCHW)" : "2-D average pooling (NCHW)", params,
      [name, is_max](const Attrs& a) {
        Check c(name);
        DType xt = DType::f32();
        if (is_max) {
          const std::string t = a.s("dtype");
          c.that(t == "float32" || t == "uint8" || t == "int8", "dtype", "'" + t + "' is not float32, uint8 or int8");
          xt = DType::parse(t);
        }
        Tensor x = te::placeholder("x",
                                   {c.at_least(a, "batch", 1), c.at_least(a, "channels", 1), c.at_least(a, "height", 1),
                                    c.at_least(a, "width", 1)},
                                   xt);
        PoolParams p{c.per_dim(a, "kernel", 2, 1), c.per_dim(a, "stride", 2, 1), c.per_dim(a, "padding", 2, 0),
                     is_max ? c.per_dim(a, "dilation", 2, 1) : std::vector<int64_t>{1, 1}, true};
        int64_t ceil_mode = a.i("ceil_mode");
        c.that(ceil_mode == 0 || ceil_mode == 1, "ceil_mode", "must be 0 or 1, got " + std::to_string(ceil_mode));
        p.ceil_mode = ceil_mode == 1;
        if (!is_max) {
          int64_t cip = a.i("count_include_pad");
          c.that(cip == 0 || cip == 1, "count_include_pad", "must be 0 or 1, got " + std::to_string(cip));
          p.count_include_pad = cip == 1;
        }
        OpGraph g;
        g.inputs = {x};
        g.outputs = {is_max ? max_pool2d(x, p) : avg_pool2d(x, p)};
        g.ranges = {xt == DType::u8() ? InputRange{0, 256} : xt == DType::i8() ? InputRange{-128, 128} : InputRange{}};
        g.flops = static_cast<double>(g.outputs[0].numel()) * p.kernel[0] * p.kernel[1];
        return g;
      }};
}

OpDef global_def(const std::string& name, bool average) {
  return {name,
          "nn",
          average ? "mean over H and W, keeping [N, C, 1, 1]" : "max over H and W, keeping [N, C, 1, 1]",
          {p_int("batch", 1, "N"), p_int("channels", 4, "C"), p_int("height", 7, "H"), p_int("width", 7, "W")},
          [name, average](const Attrs& a) {
            Check c(name);
            Tensor x = te::placeholder("x", {c.at_least(a, "batch", 1), c.at_least(a, "channels", 1),
                                             c.at_least(a, "height", 1), c.at_least(a, "width", 1)});
            OpGraph g;
            g.inputs = {x};
            g.outputs = {global_pool2d(x, average)};
            g.ranges = {{}};
            g.flops = static_cast<double>(x.numel());
            return g;
          }};
}

}  // namespace

void register_pool_ops(std::vector<OpDef>& r) {
  r.push_back(pool_def("max_pool2d", true));
  r.push_back(pool_def("avg_pool2d", false));
  r.push_back(global_def("global_avg_pool2d", true));
  r.push_back(global_def("global_max_pool2d", false));
}

}  // namespace basin::ops
