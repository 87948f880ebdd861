// sum, mean, max, min over a set of axes, with or without kept dimensions.
#include "core/ops/op_util.h"
#include "core/ops/operators.h"

namespace basin::ops {

Tensor reduce(const std::string& kind, const Tensor& x, const std::vector<int64_t>& axes_attr, bool keepdims) {
  Check c(kind);
  int rank = x.ndim();
  std::vector<int> axes = c.axes(axes_attr, rank, "axes");
  if (axes.empty())
    for (int d = 0; d < rank; ++d) axes.push_back(d);
  std::vector<bool> reduced(rank, false);
  for (int a : axes) reduced[a] = true;
  std::vector<int64_t> out, rext;
  for (int d = 0; d < rank; ++d) {
    if (!reduced[d]) out.push_back(x.shape()[d]);
    else if (keepdims) out.push_back(1);
    if (reduced[d]) rext.push_back(x.shape()[d]);
  }
  te::ReduceKind rk = kind == "max" ? te::ReduceKind::Max : kind == "min" ? te::ReduceKind::Min : te::ReduceKind::Sum;
  c.that(kind == "sum" || kind == "mean" || kind == "max" || kind == "min", "", "is not a reduction");
  Tensor r = te::reduce(
      kind == "mean" ? "mean_sum" : kind, out, rext, rk,
      [&](const std::vector<Var>& i, const std::vector<Var>& rv) {
        std::vector<Expr> idx;
        size_t oi = 0, ri = 0;
        for (int d = 0; d < rank; ++d) {
          if (reduced[d]) {
            idx.push_back(rv[ri++]);
            if (keepdims) ++oi;
          } else {
            idx.push_back(i[oi++]);
          }
        }
        return x.read(idx);
      },
      te::OpPattern::Reduction, kind);
  if (kind != "mean") return r;
  double n = static_cast<double>(product(rext));
  return te::compute(
      "mean", out, [&](const std::vector<Var>& i) { return r.read(as_exprs(i)) / make_const(x.dtype(), n); },
      te::OpPattern::Elementwise, "mean");
}

Tensor cumsum(const Tensor& x, int64_t axis_attr, bool exclusive, bool reverse) {
  Check c("cumsum");
  c.that(!x.dtype().is_bool(), "x", "expects numbers, got bool");
  int axis = c.axis(axis_attr, x.ndim(), "axis");
  const int64_t n = x.shape()[axis];
  // A sum over the whole axis of the elements up to (or from) each position: n^2 work,
  // which the sequence lengths of position ids keep small.
  return te::reduce(
      "cumsum", x.shape(), {n}, te::ReduceKind::Sum,
      [&](const std::vector<Var>& i, const std::vector<Var>& r) {
        std::vector<Expr> idx = as_exprs(i);
        idx[axis] = r[0];
        Expr k = r[0], at = i[axis];
        Expr in = reverse ? (exclusive ? gt(k, at) : ge(k, at)) : (exclusive ? lt(k, at) : le(k, at));
        return select(in, x.read(idx), make_const(x.dtype(), 0));
      },
      te::OpPattern::Reduction, "cumsum");
}

void register_reduction_ops(std::vector<OpDef>& r) {
  r.push_back({"cumsum",
               "reduction",
               "running sum along an axis (exclusive: without the element; reverse: from the end)",
               {p_ints("shape", {3, 5, 7}, "shape of x"), p_int("axis", 1, "axis"), p_int("exclusive", 0, "0 or 1"),
                p_int("reverse", 0, "0 or 1")},
               [](const Attrs& a) {
                 Check c("cumsum");
                 Tensor x = te::placeholder("x", c.shape(a, "shape"));
                 for (const char* f : {"exclusive", "reverse"})
                   c.that(a.i(f) == 0 || a.i(f) == 1, f, "must be 0 or 1, got " + std::to_string(a.i(f)));
                 OpGraph g;
                 g.inputs = {x};
                 g.outputs = {cumsum(x, a.i("axis"), a.i("exclusive") == 1, a.i("reverse") == 1)};
                 g.ranges = {{-2, 2}};
                 g.flops = static_cast<double>(x.numel() * x.shape()[c.axis(a.i("axis"), x.ndim(), "axis")]);
                 return g;
               }});
  for (const char* name : {"sum", "mean", "max", "min"}) {
    r.push_back({name,
                 "reduction",
                 std::string(name) + " over the given axes (all axes when none are given)",
                 {p_ints("shape", {3, 5, 7}, "shape of x"), p_ints("axes", {1}, "axes reduced (empty: all)"),
                  p_int("keepdims", 0, "1 keeps reduced axes as extent 1")},
                 [name](const Attrs& a) {
                   Check c(name);
                   Tensor x = te::placeholder("x", c.shape(a, "shape"));
                   int64_t keep = a.i("keepdims");
                   c.that(keep == 0 || keep == 1, "keepdims", "must be 0 or 1, got " + std::to_string(keep));
                   OpGraph g;
                   g.inputs = {x};
                   g.outputs = {reduce(name, x, a.ints("axes"), keep == 1)};
                   g.ranges = {{-2, 2}};
                   g.flops = static_cast<double>(x.numel());
                   return g;
                 }});
  }
}

}  // namespace basin::ops
