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
  Tensor r = te::reduce(kind == "mean" ? "mean_sum" : kind, out, rext, rk,
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
  return te::compute("mean", out, [&](const std::vector<Var>& i) { return r.read(as_exprs(i)) / make_const(x.dtype(), n); },
                     te::OpPattern::Elementwise, "mean");
}

void register_reduction_ops(std::vector<OpDef>& r) {
  for (const char* name : {"sum", "mean", "max", "min"}) {
    r.push_back({name, "reduction", std::string(name) + " over the given axes (all axes when none are given)",
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
