// attention: softmax(q k * scale + mask) v in one operator, the fused form of a
// transformer's scaled dot-product attention (the graph pass fuse_attention in
// core/graph/passes.cc recognises it in imported models).
//
// Stages, every one a row (b, l) of the queries: the scores row (a reduction over the
// head dimension), its maximum, the exponentials (materialized: the output reduction
// reads each one once per value column), their sum, the weighted sum of the values,
// and the division by the sum. The generic sketch computes them row by row, so that
// the scores never leave the core.
#include <cmath>

#include "core/ops/op_util.h"
#include "core/ops/operators.h"

namespace basin::ops {

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask, double scale,
                 const std::vector<int64_t>& batch_shape_attr) {
  Check c("attention");
  c.that(q.ndim() == 3, "q", "expected [B, L, D], got " + ints_str(q.shape()));
  c.that(k.ndim() == 3, "k", "expected [B, D, S] (the keys transposed), got " + ints_str(k.shape()));
  c.that(v.ndim() == 3, "v", "expected [B, S, E], got " + ints_str(v.shape()));
  int64_t B = q.shape()[0], L = q.shape()[1], D = q.shape()[2], S = k.shape()[2], E = v.shape()[2];
  c.that(k.shape()[0] == B && v.shape()[0] == B, "k",
         "batch sizes differ: q " + ints_str(q.shape()) + ", k " + ints_str(k.shape()) + ", v " + ints_str(v.shape()));
  c.that(k.shape()[1] == D, "k", "q " + ints_str(q.shape()) + " and k " + ints_str(k.shape()) + " disagree on D");
  c.that(v.shape()[1] == S, "v", "k " + ints_str(k.shape()) + " and v " + ints_str(v.shape()) + " disagree on S");
  c.that(q.dtype().is_float() && k.dtype() == q.dtype() && v.dtype() == q.dtype(), "q",
         "q, k and v must be floating point of one dtype");
  c.that(std::isfinite(scale), "scale", "must be finite");
  std::vector<int64_t> batch_shape = batch_shape_attr.empty() ? std::vector<int64_t>{B} : batch_shape_attr;
  for (int64_t d : batch_shape) c.that(d >= 1, "batch_shape", "extents must be positive: " + ints_str(batch_shape));
  c.that(product(batch_shape) == B, "batch_shape",
         ints_str(batch_shape) + " does not factor the batch of " + std::to_string(B));
  // The view the mask is added in: [batch_shape..., L, S].
  std::vector<int64_t> view = batch_shape;
  view.push_back(L);
  view.push_back(S);
  if (mask) {
    c.that(mask->dtype() == q.dtype(), "mask", "must have q's dtype");
    c.that(mask->ndim() <= static_cast<int>(view.size()), "mask",
           "rank " + std::to_string(mask->ndim()) + " exceeds the scores' " + ints_str(view));
    for (int j = 0; j < mask->ndim(); ++j) {
      int64_t m = mask->shape()[j], w = view[view.size() - mask->shape().size() + j];
      c.that(m == 1 || m == w, "mask", ints_str(mask->shape()) + " does not broadcast to the scores " + ints_str(view));
    }
  }
  Expr scale_e = make_const(q.dtype(), scale);
  // The scores row with scale and mask: an expression in (b, l, s), inlined where read.
  Tensor sc = te::reduce(
      "attention_scores", {B, L, S}, {D}, te::ReduceKind::Sum,
      [&](const std::vector<Var>& i, const std::vector<Var>& r) { return q(i[0], i[1], r[0]) * k(i[0], r[0], i[2]); },
      te::OpPattern::Reduction, "attention");
  Tensor t = te::compute(
      "attention_logits", {B, L, S},
      [&](const std::vector<Var>& i) {
        Expr x = sc(i[0], i[1], i[2]);
        if (scale != 1) x = x * scale_e;
        if (!mask) return x;
        // The batch index unflattened over batch_shape, then broadcast against the mask.
        std::vector<Expr> full;
        int64_t stride = B;
        for (int64_t d : batch_shape) {
          stride /= d;
          full.push_back(d == 1 ? Expr(0) : floormod(floordiv(Expr(i[0]), Expr(stride)), Expr(d)));
        }
        full.push_back(i[1]);
        full.push_back(i[2]);
        std::vector<Expr> mi;
        size_t off = full.size() - mask->shape().size();
        for (size_t j = 0; j < mask->shape().size(); ++j) mi.push_back(mask->shape()[j] == 1 ? Expr(0) : full[off + j]);
        return x + mask->read(mi);
      },
      te::OpPattern::Broadcast, "attention");
  Tensor mx = te::reduce(
      "attention_max", {B, L, 1}, {S}, te::ReduceKind::Max,
      [&](const std::vector<Var>& i, const std::vector<Var>& r) { return t(i[0], i[1], r[0]); },
      te::OpPattern::Reduction, "attention");
  // Materialized (a Reduction-pattern stage, never inlined): each exponential is read
  // by the sum and once per value column by the output reduction.
  Tensor e = te::compute(
      "attention_exp", {B, L, S},
      [&](const std::vector<Var>& i) { return call(MathFn::exp, {t(i[0], i[1], i[2]) - mx(i[0], i[1], Expr(0))}); },
      te::OpPattern::Reduction, "attention");
  Tensor sum = te::reduce(
      "attention_sum", {B, L, 1}, {S}, te::ReduceKind::Sum,
      [&](const std::vector<Var>& i, const std::vector<Var>& r) { return e(i[0], i[1], r[0]); },
      te::OpPattern::Reduction, "attention");
  Tensor o = te::reduce(
      "attention_values", {B, L, E}, {S}, te::ReduceKind::Sum,
      [&](const std::vector<Var>& i, const std::vector<Var>& r) { return e(i[0], i[1], r[0]) * v(i[0], r[0], i[2]); },
      te::OpPattern::Reduction, "attention");
  return te::compute(
      "attention", {B, L, E}, [&](const std::vector<Var>& i) { return o(i[0], i[1], i[2]) / sum(i[0], i[1], Expr(0)); },
      te::OpPattern::Broadcast, "attention");
}

void register_attention_ops(std::vector<OpDef>& r) {
  r.push_back(
      {"attention",
       "nn",
       "softmax(q[B,L,D] k[B,D,S] * scale + mask) v[B,S,E], B = batch * heads; mask: none, padding ([batch,1,1,S]), "
       "causal ([1,1,L,S]) or full ([batch,heads,L,S])",
       {p_int("batch", 1, "sequences"), p_int("heads", 2, "heads per sequence"), p_int("queries", 16, "L"),
        p_int("keys", 16, "S"), p_int("head_dim", 8, "D"), p_int("value_dim", 8, "E"),
        p_float("scale", 0.35355339059327373, "factor of the scores (1/sqrt(D) in transformers)"),
        p_str("mask", "none", "none, padding, causal or full")},
       [](const Attrs& a) {
         Check c("attention");
         int64_t b = c.at_least(a, "batch", 1), h = c.at_least(a, "heads", 1), l = c.at_least(a, "queries", 1),
                 s = c.at_least(a, "keys", 1), d = c.at_least(a, "head_dim", 1), e = c.at_least(a, "value_dim", 1);
         std::string m = a.s("mask");
         c.that(m == "none" || m == "padding" || m == "causal" || m == "full", "mask",
                "expected none, padding, causal or full, got '" + m + "'");
         Tensor q = te::placeholder("q", {b * h, l, d}), k = te::placeholder("k", {b * h, d, s}),
                v = te::placeholder("v", {b * h, s, e});
         OpGraph g;
         g.inputs = {q, k, v};
         g.ranges = {{}, {}, {}};
         Tensor mask;
         if (m != "none") {
           std::vector<int64_t> ms = m == "padding"  ? std::vector<int64_t>{b, 1, 1, s}
                                     : m == "causal" ? std::vector<int64_t>{1, 1, l, s}
                                                     : std::vector<int64_t>{b, h, l, s};
           mask = te::placeholder("mask", ms);
           g.inputs.push_back(mask);
           InputRange mr;
           mr.lo = -4;
           mr.hi = 0;
           g.ranges.push_back(mr);
         }
         g.outputs = {attention(q, k, v, m == "none" ? nullptr : &mask, a.f("scale"), {b, h})};
         g.flops = 2.0 * b * h * l * s * (d + e) + 4.0 * b * h * l * s;
         return g;
       }});
}

}  // namespace basin::ops
