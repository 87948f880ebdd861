// dense, matmul, batch_matmul.
#include "core/ops/op_util.h"
#include "core/ops/operators.h"

namespace basin::ops {

namespace {
void check_rank(const Check& c, const Tensor& t, int rank, const char* what) {
  c.that(t.ndim() == rank, what, "expected rank " + std::to_string(rank) + ", got shape " + ints_str(t.shape()));
}
}  // namespace

Tensor dense(const Tensor& x, const Tensor& w) {
  Check c("dense");
  check_rank(c, x, 2, "x");
  check_rank(c, w, 2, "w");
  c.that(x.shape()[1] == w.shape()[1], "K",
         "x " + ints_str(x.shape()) + " and w " + ints_str(w.shape()) + " disagree on K");
  return te::reduce(
      "dense", {x.shape()[0], w.shape()[0]}, {x.shape()[1]}, te::ReduceKind::Sum,
      [&](const std::vector<Var>& i, const std::vector<Var>& r) {
        return widened(x(i[0], r[0])) * widened(w(i[1], r[0]));
      },
      te::OpPattern::Anchor, "dense");
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  Check c("matmul");
  check_rank(c, a, 2, "a");
  check_rank(c, b, 2, "b");
  c.that(a.shape()[1] == b.shape()[0], "K",
         "a " + ints_str(a.shape()) + " and b " + ints_str(b.shape()) + " disagree on K");
  return te::reduce(
      "matmul", {a.shape()[0], b.shape()[1]}, {a.shape()[1]}, te::ReduceKind::Sum,
      [&](const std::vector<Var>& i, const std::vector<Var>& r) {
        return widened(a(i[0], r[0])) * widened(b(r[0], i[1]));
      },
      te::OpPattern::Anchor, "matmul");
}

Tensor batch_matmul(const Tensor& a, const Tensor& b) {
  Check c("batch_matmul");
  check_rank(c, a, 3, "a");
  check_rank(c, b, 3, "b");
  c.that(a.shape()[0] == b.shape()[0], "B",
         "batch sizes differ: " + ints_str(a.shape()) + " and " + ints_str(b.shape()));
  c.that(a.shape()[2] == b.shape()[1], "K",
         "a " + ints_str(a.shape()) + " and b " + ints_str(b.shape()) + " disagree on K");
  return te::reduce(
      "batch_matmul", {a.shape()[0], a.shape()[1], b.shape()[2]}, {a.shape()[2]}, te::ReduceKind::Sum,
      [&](const std::vector<Var>& i, const std::vector<Var>& r) {
        return widened(a(i[0], i[1], r[0])) * widened(b(i[0], r[0], i[2]));
      },
      te::OpPattern::Anchor, "batch_matmul");
}

void register_linear_ops(std::vector<OpDef>& r) {
  r.push_back({"dense",
               "nn",
               "y[M,N] = x[M,K] * w[N,K]^T (a fully connected layer)",
               {p_int("M", 16, "rows of x"), p_int("K", 32, "reduction extent"), p_int("N", 24, "rows of w")},
               [](const Attrs& a) {
                 Check c("dense");
                 int64_t m = c.at_least(a, "M", 1), k = c.at_least(a, "K", 1), n = c.at_least(a, "N", 1);
                 Tensor x = te::placeholder("x", {m, k}), w = te::placeholder("w", {n, k});
                 OpGraph g;
                 g.inputs = {x, w};
                 g.outputs = {dense(x, w)};
                 g.ranges = {{}, {}};
                 g.flops = 2.0 * m * n * k;
                 return g;
               }});
  r.push_back({"matmul",
               "nn",
               "c[M,N] = a[M,K] * b[K,N]",
               {p_int("M", 16, "rows of a"), p_int("K", 32, "reduction extent"), p_int("N", 24, "columns of b")},
               [](const Attrs& a) {
                 Check c("matmul");
                 int64_t m = c.at_least(a, "M", 1), k = c.at_least(a, "K", 1), n = c.at_least(a, "N", 1);
                 Tensor x = te::placeholder("a", {m, k}), y = te::placeholder("b", {k, n});
                 OpGraph g;
                 g.inputs = {x, y};
                 g.outputs = {matmul(x, y)};
                 g.ranges = {{}, {}};
                 g.flops = 2.0 * m * n * k;
                 return g;
               }});
  r.push_back({"batch_matmul",
               "nn",
               "c[B,M,N] = a[B,M,K] * b[B,K,N]",
               {p_int("B", 2, "batch"), p_int("M", 16, "rows of a"), p_int("K", 32, "reduction extent"),
                p_int("N", 24, "columns of b")},
               [](const Attrs& a) {
                 Check c("batch_matmul");
                 int64_t b = c.at_least(a, "B", 1), m = c.at_least(a, "M", 1), k = c.at_least(a, "K", 1),
                         n = c.at_least(a, "N", 1);
                 Tensor x = te::placeholder("a", {b, m, k}), y = te::placeholder("b", {b, k, n});
                 OpGraph g;
                 g.inputs = {x, y};
                 g.outputs = {batch_matmul(x, y)};
                 g.ranges = {{}, {}};
                 g.flops = 2.0 * b * m * n * k;
                 return g;
               }});
}

}  // namespace basin::ops
