// batch_norm (inference form), layer_norm, rms_norm, softmax, log_softmax.
#include <cmath>

#include "core/ops/op_util.h"
#include "core/ops/operators.h"

namespace basin::ops {

namespace {

// Shape with dimensions [from, to) set to 1: the shape of a kept-dims reduction.
std::vector<int64_t> kept(const std::vector<int64_t>& s, int from, int to) {
  std::vector<int64_t> r = s;
  for (int d = from; d < to; ++d) r[d] = 1;
  return r;
}

// Index into a kept-dims reduction from the full index.
std::vector<Expr> kept_index(const std::vector<Var>& i, int from, int to) {
  std::vector<Expr> r;
  for (int d = 0; d < static_cast<int>(i.size()); ++d) r.push_back(d >= from && d < to ? Expr(0) : Expr(i[d]));
  return r;
}

// Full index from the kept-dims index and the reduction variables over [from, to).
std::vector<Expr> full_index(const std::vector<Var>& i, const std::vector<Var>& r, int from, int to) {
  std::vector<Expr> idx;
  for (int d = 0; d < static_cast<int>(i.size()); ++d)
    idx.push_back(d >= from && d < to ? Expr(r[d - from]) : Expr(i[d]));
  return idx;
}

std::vector<int64_t> extents(const std::vector<int64_t>& s, int from, int to) {
  return std::vector<int64_t>(s.begin() + from, s.begin() + to);
}

Tensor mean_over(const Tensor& x, int from, int to, const std::string& name, bool squares, const Tensor* center) {
  double n = static_cast<double>(product(extents(x.shape(), from, to)));
  Tensor s = te::reduce(
      name + "_sum", kept(x.shape(), from, to), extents(x.shape(), from, to), te::ReduceKind::Sum,
      [&](const std::vector<Var>& i, const std::vector<Var>& r) {
        Expr v = x.read(full_index(i, r, from, to));
        if (center) v = v - center->read(kept_index(i, from, to));
        return squares ? v * v : v;
      },
      te::OpPattern::Reduction, name);
  return te::compute(
      name + "_mean", s.shape(),
      [&](const std::vector<Var>& i) { return s.read(as_exprs(i)) / make_const(x.dtype(), n); },
      te::OpPattern::Elementwise, name);
}

void check_float(const Check& c, const Tensor& x) {
  c.that(x.dtype().is_float(), "x", "expects a float tensor, got " + x.dtype().str());
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean, const Tensor& var,
                  double epsilon) {
  Check c("batch_norm");
  check_float(c, x);
  c.that(x.ndim() >= 2, "x", "expected [N, C, ...], got " + ints_str(x.shape()));
  c.that(epsilon > 0, "epsilon", "must be positive, got " + std::to_string(epsilon));
  int64_t ch = x.shape()[1];
  for (const Tensor* t : {&gamma, &beta, &mean, &var})
    c.that(t->shape() == std::vector<int64_t>{ch}, t->name(),
           "expected shape [" + std::to_string(ch) + "], got " + ints_str(t->shape()));
  return te::compute(
      "batch_norm", x.shape(),
      [&](const std::vector<Var>& i) {
        Expr ch_i = i[1];
        Expr inv = call(MathFn::rsqrt, {var(ch_i) + make_const(x.dtype(), epsilon)});
        return (x.read(as_exprs(i)) - mean(ch_i)) * inv * gamma(ch_i) + beta(ch_i);
      },
      te::OpPattern::Broadcast, "batch_norm");
}

Tensor softmax(const Tensor& x, int64_t axis_attr, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  Check c(name);
  check_float(c, x);
  int axis = c.axis(axis_attr, x.ndim(), "axis");
  std::vector<int64_t> red = kept(x.shape(), axis, axis + 1);
  int64_t n = x.shape()[axis];
  auto along = [&](const std::vector<Var>& i, const Expr& r) {
    std::vector<Expr> idx = as_exprs(i);
    idx[axis] = r;
    return idx;
  };
  Tensor m = te::reduce(
      std::string(name) + "_max", red, {n}, te::ReduceKind::Max,
      [&](const std::vector<Var>& i, const std::vector<Var>& r) { return x.read(along(i, r[0])); },
      te::OpPattern::Reduction, name);
  Tensor e = te::compute(
      std::string(name) + "_exp", x.shape(),
      [&](const std::vector<Var>& i) { return call(MathFn::exp, {x.read(as_exprs(i)) - m.read(along(i, Expr(0)))}); },
      te::OpPattern::Broadcast, name);
  Tensor s = te::reduce(
      std::string(name) + "_sum", red, {n}, te::ReduceKind::Sum,
      [&](const std::vector<Var>& i, const std::vector<Var>& r) { return e.read(along(i, r[0])); },
      te::OpPattern::Reduction, name);
  return te::compute(
      name, x.shape(),
      [&](const std::vector<Var>& i) {
        Expr sum = s.read(along(i, Expr(0)));
        if (log) return x.read(as_exprs(i)) - m.read(along(i, Expr(0))) - call(MathFn::log, {sum});
        return e.read(as_exprs(i)) / sum;
      },
      te::OpPattern::Broadcast, name);
}

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int64_t axis_attr, double epsilon) {
  Check c("layer_norm");
  check_float(c, x);
  int axis = c.axis(axis_attr, x.ndim(), "axis");
  c.that(epsilon > 0, "epsilon", "must be positive, got " + std::to_string(epsilon));
  std::vector<int64_t> norm = extents(x.shape(), axis, x.ndim());
  c.that(gamma.shape() == norm && beta.shape() == norm, "gamma", "gamma and beta must have shape " + ints_str(norm));
  int r = x.ndim();
  Tensor mean = mean_over(x, axis, r, "layer_norm_mean", false, nullptr);
  Tensor var = mean_over(x, axis, r, "layer_norm_var", true, &mean);
  return te::compute(
      "layer_norm", x.shape(),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> k = kept_index(i, axis, r), tail(i.begin() + axis, i.end());
        Expr inv = call(MathFn::rsqrt, {var.read(k) + make_const(x.dtype(), epsilon)});
        return (x.read(as_exprs(i)) - mean.read(k)) * inv * gamma.read(tail) + beta.read(tail);
      },
      te::OpPattern::Broadcast, "layer_norm");
}

Tensor rms_norm(const Tensor& x, const Tensor& gamma, int64_t axis_attr, double epsilon) {
  Check c("rms_norm");
  check_float(c, x);
  int axis = c.axis(axis_attr, x.ndim(), "axis");
  c.that(epsilon > 0, "epsilon", "must be positive, got " + std::to_string(epsilon));
  std::vector<int64_t> norm = extents(x.shape(), axis, x.ndim());
  c.that(gamma.shape() == norm, "gamma", "gamma must have shape " + ints_str(norm));
  int r = x.ndim();
  Tensor ms = mean_over(x, axis, r, "rms_norm_ms", true, nullptr);
  return te::compute(
      "rms_norm", x.shape(),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> k = kept_index(i, axis, r), tail(i.begin() + axis, i.end());
        Expr inv = call(MathFn::rsqrt, {ms.read(k) + make_const(x.dtype(), epsilon)});
        return x.read(as_exprs(i)) * inv * gamma.read(tail);
      },
      te::OpPattern::Broadcast, "rms_norm");
}

namespace {

OpGraph norm_graph(const std::string& op, const Attrs& a) {
  Check c(op);
  std::vector<int64_t> shape = c.shape(a, "shape");
  Tensor x = te::placeholder("x", shape);
  OpGraph g;
  g.inputs = {x};
  g.ranges = {{-2, 2}};
  g.flops = 5.0 * x.numel();
  if (op == "softmax" || op == "log_softmax") {
    g.outputs = {softmax(x, a.i("axis"), op == "log_softmax")};
    return g;
  }
  double eps = a.f("epsilon");
  int axis = c.axis(a.i("axis"), static_cast<int>(shape.size()), "axis");
  std::vector<int64_t> norm(shape.begin() + axis, shape.end());
  Tensor gamma = te::placeholder("gamma", norm);
  g.inputs.push_back(gamma);
  g.ranges.push_back({0.5, 1.5});
  if (op == "rms_norm") {
    g.outputs = {rms_norm(x, gamma, axis, eps)};
    return g;
  }
  Tensor beta = te::placeholder("beta", norm);
  g.inputs.push_back(beta);
  g.ranges.push_back({-1, 1});
  g.outputs = {layer_norm(x, gamma, beta, axis, eps)};
  return g;
}

}  // namespace

void register_normalization_ops(std::vector<OpDef>& r) {
  r.push_back(
      {"batch_norm",
       "normalization",
       "(x - mean) / sqrt(var + eps) * gamma + beta per channel (axis 1), inference form",
       {p_ints("shape", {2, 4, 5, 5}, "shape of x [N, C, ...]"), p_float("epsilon", 1e-5, "added to the variance")},
       [](const Attrs& a) {
         Check c("batch_norm");
         std::vector<int64_t> shape = c.shape(a, "shape", 2);
         Tensor x = te::placeholder("x", shape);
         int64_t ch = shape[1];
         Tensor gamma = te::placeholder("gamma", {ch}), beta = te::placeholder("beta", {ch});
         Tensor mean = te::placeholder("mean", {ch}), var = te::placeholder("var", {ch});
         OpGraph g;
         g.inputs = {x, gamma, beta, mean, var};
         g.outputs = {batch_norm(x, gamma, beta, mean, var, a.f("epsilon"))};
         g.ranges = {{-2, 2}, {0.5, 1.5}, {-1, 1}, {-0.5, 0.5}, {0.5, 2}};
         g.flops = 4.0 * x.numel();
         return g;
       }});
  for (const char* name : {"softmax", "log_softmax"})
    r.push_back({name,
                 "normalization",
                 std::string(name) + " along one axis",
                 {p_ints("shape", {4, 13}, "shape of x"), p_int("axis", -1, "the axis normalized")},
                 [name](const Attrs& a) { return norm_graph(name, a); }});
  r.push_back({"layer_norm",
               "normalization",
               "normalizes over the dimensions from axis on, then scales by gamma and shifts by beta",
               {p_ints("shape", {4, 6, 10}, "shape of x"), p_int("axis", -1, "first normalized dimension"),
                p_float("epsilon", 1e-5, "added to the variance")},
               [](const Attrs& a) { return norm_graph("layer_norm", a); }});
  r.push_back({"rms_norm",
               "normalization",
               "x / sqrt(mean(x^2) + eps) * gamma over the dimensions from axis on",
               {p_ints("shape", {4, 6, 10}, "shape of x"), p_int("axis", -1, "first normalized dimension"),
                p_float("epsilon", 1e-6, "added to the mean square")},
               [](const Attrs& a) { return norm_graph("rms_norm", a); }});
}

}  // namespace basin::ops
