// The differentiable evaluator of a sketch's features: in exact mode at a
// configuration's integer point it gives the configuration's features; in relaxed
// mode its gradients agree with central finite differences, and it is finite
// everywhere in the polytope, corners included.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "core/expr/evaluate.h"
#include "core/ops/registry.h"
#include "core/schedule/lower_sketch.h"
#include "relax/features.h"
#include "relax/relaxed_sketch.h"
#include "relax/tape.h"
#include "tests/ops/op_cases.h"

namespace basin {
namespace {

struct Task {
  std::string op, params;
};
std::vector<Task> suite() {
  return {{"conv2d", "in_channels=8 out_channels=16 height=10 width=12 kernel=3 padding=1"},
          {"depthwise_conv2d", "channels=16 height=10 width=10"},
          {"dense", "M=12 K=40 N=32"},
          {"batch_matmul", "B=3 M=8 K=12 N=16"},
          {"softmax", "shape=6,40"},
          {"layer_norm", "shape=4,48"},
          {"conv2d_bias_relu", "in_channels=8 out_channels=16 height=8 width=8 kernel=3 padding=1"},
          // Awkward extents: guarded splits.
          {"dense", "M=37 K=10 N=23"},
          {"matmul", "M=257 K=16 N=8"},
          {"softmax", "shape=4,197"}};
}

// The tape compiles a subexpression built twice once, folds constant ones in its own
// mode (floor division and comparisons exact or relaxed), and keeps no constant that
// only a folded node read: (4x + y)(4x + y) + 7 // 2 + (1 < 2 ? 10 : 0) is ten nodes,
// whose values and gradients are the expression's.
TEST(Tape, EqualSubexpressionsCompileOnceAndConstantsFoldInTheTapesMode) {
  Var x("x"), y("y");
  auto k = [](int64_t v) { return int_imm(DType::index(), v); };
  auto part = [&] { return x * k(4) + y; };  // a new expression at each call
  const Expr out = part() * part() + floordiv(k(7), k(2)) + select(lt(k(1), k(2)), k(10), k(0));
  const double in[] = {1, 2, 0, 1};             // two rows: (x, y) = (1, 2), (0, 1)
  const double sig = 1 / (1 + std::exp(-2.0));  // the relaxed 1 < 2 at tau 0.5
  for (relax::TapeMode mode : {relax::TapeMode::Exact, relax::TapeMode::Relaxed}) {
    const bool exact = mode == relax::TapeMode::Exact;
    relax::Tape tape({out}, {x, y}, mode, 0.5);
    EXPECT_EQ(tape.size(), 10);
    double val[2], grad[4];
    tape.forward(in, 2, val);
    EXPECT_DOUBLE_EQ(val[0], 36 + (exact ? 3 : 3.5) + (exact ? 10 : 10 * sig));
    EXPECT_DOUBLE_EQ(val[1], 1 + (exact ? 3 : 3.5) + (exact ? 10 : 10 * sig));
    const double ones[] = {1, 1};
    tape.backward(ones, grad);
    EXPECT_DOUBLE_EQ(grad[0], 48);  // d/dx 2 (4x + y) 4
    EXPECT_DOUBLE_EQ(grad[1], 12);  // d/dy 2 (4x + y)
    EXPECT_DOUBLE_EQ(grad[2], 8);
    EXPECT_DOUBLE_EQ(grad[3], 2);
  }
}

// Every math function compiles (a feature may hold any: a quantization's NaN test of a
// layer norm's value holds rsqrt), with the value of core/expr/evaluate and the
// derivative of central differences.
TEST(Tape, EveryMathFunctionHasAValueAndADerivative) {
  Var x("x");
  const Expr xf = cast(DType::f64(), x) * make_const(DType::f64(), 0.25);
  for (int f = 0; f <= static_cast<int>(MathFn::bf16); ++f) {
    const MathFn fn = static_cast<MathFn>(f);
    const Expr out = math_fn_arity(fn) == 2 ? call(fn, {xf, make_const(DType::f64(), 2.0)}) : call(fn, {xf});
    relax::Tape tape({out}, {x}, relax::TapeMode::Relaxed, 0.5);
    const double in = 3.0, h = 1e-4;
    double v = 0, grad = 0, up = 0, down = 0;
    tape.forward(&in, 1, &v);
    const double one = 1;
    tape.backward(&one, &grad);
    const bool rounding = fn == MathFn::floor || fn == MathFn::ceil || fn == MathFn::rint || is_rounding(fn);
    if (!rounding)
      EXPECT_NEAR(v, evaluate(out, {{x.id(), Value::of_int(DType::index(), 3)}}).f, 1e-9) << math_fn_name(fn);
    const double lo = in - h, hi = in + h;
    tape.forward(&hi, 1, &up);
    tape.forward(&lo, 1, &down);
    EXPECT_NEAR(grad, (up - down) / (2 * h), 1e-5) << math_fn_name(fn);
  }
}

TEST(RelaxedSketch, ExactModeAtAConfigurationGivesItsFeatures) {
  std::mt19937_64 rng(11);
  for (const Task& t : suite()) {
    ops::OpGraph g = ops::build_op(t.op, parse(t.params));
    for (const sched::Sketch& s : sched::cpu_sketches(g)) {
      relax::RelaxedSketch rs(g, s, relax::TapeMode::Exact);
      for (int i = 0; i < 4; ++i) {
        sched::Config c = sched::random_config(s, rng);
        Eigen::VectorXd x = rs.space().point_of(c);
        std::vector<double> got(static_cast<size_t>(rs.num_stores()) * rs.num_features());
        rs.forward(x.data(), 1, got.data());
        auto want = relax::evaluate_features(
            relax::extract_features(sched::lower_sketch_structure(g, s, sched::concrete_knobs(c))), {});
        ASSERT_EQ(static_cast<int>(want.size()), rs.num_stores());
        for (int st = 0; st < rs.num_stores(); ++st)
          for (int f = 0; f < rs.num_features(); ++f)
            EXPECT_NEAR(got[st * rs.num_features() + f], want[st][f], 1e-6)
                << t.op << " " << s.name << " " << relax::feature_names()[f];
      }
    }
  }
}

// The loss sum(w * features) for fixed random weights.
double loss(relax::RelaxedSketch& rs, const Eigen::VectorXd& x, const std::vector<double>& w) {
  std::vector<double> f(w.size());
  rs.forward(x.data(), 1, f.data());
  double l = 0;
  for (size_t i = 0; i < w.size(); ++i) l += w[i] * f[i];
  return l;
}

TEST(RelaxedSketch, GradientsAgreeWithCentralFiniteDifferences) {
  std::mt19937_64 rng(12);
  std::normal_distribution<double> normal;
  int checked = 0, agreed = 0;
  for (const Task& t : suite()) {
    ops::OpGraph g = ops::build_op(t.op, parse(t.params));
    for (const sched::Sketch& s : sched::cpu_sketches(g)) {
      relax::RelaxedSketch rs(g, s);
      size_t n = static_cast<size_t>(rs.num_stores()) * rs.num_features();
      std::vector<double> w(n);
      for (double& v : w) v = normal(rng);
      for (const Eigen::VectorXd& x : rs.space().sample(3, rng)) {
        std::vector<double> f(n), gx(rs.num_vars());
        rs.forward(x.data(), 1, f.data());
        rs.backward(w.data(), gx.data());
        for (int v = 0; v < rs.num_vars(); ++v) {
          const double h = 1e-5;
          Eigen::VectorXd xp = x, xm = x;
          xp(v) += h;
          xm(v) -= h;
          double fd = (loss(rs, xp, w) - loss(rs, xm, w)) / (2 * h);
          double scale = std::max({1.0, std::abs(fd), std::abs(gx[v])});
          // A kink of min/max (a subgradient) can sit within h of a sample: a step a
          // hundred times smaller then no longer straddles it.
          if (std::abs(fd - gx[v]) / scale >= 1e-3) {
            const double h2 = h / 100;
            xp = x;
            xm = x;
            xp(v) += h2;
            xm(v) -= h2;
            fd = (loss(rs, xp, w) - loss(rs, xm, w)) / (2 * h2);
            scale = std::max({1.0, std::abs(fd), std::abs(gx[v])});
          }
          ++checked;
          if (std::abs(fd - gx[v]) / scale < 1e-3) ++agreed;
          else
            ADD_FAILURE() << t.op << " " << s.name << " " << rs.space().var_names()[v] << ": analytic " << gx[v]
                          << ", finite differences " << fd;
        }
      }
    }
  }
  EXPECT_GT(checked, 200);
  EXPECT_EQ(agreed, checked);
}

TEST(RelaxedSketch, FiniteEverywhereInThePolytopeIncludingCorners) {
  std::mt19937_64 rng(13);
  for (const Task& t : suite()) {
    ops::OpGraph g = ops::build_op(t.op, parse(t.params));
    for (const sched::Sketch& s : sched::cpu_sketches(g)) {
      relax::RelaxedSketch rs(g, s);
      const relax::KnobSpace& sp = rs.space();
      std::vector<Eigen::VectorXd> points = sp.sample(20, rng);
      // Corners: each row's whole bound on one of its variables (or on none), z at an end.
      for (int corner = 0; corner < 20; ++corner) {
        Eigen::VectorXd x = Eigen::VectorXd::Zero(sp.num_vars());
        for (int r = 0; r < sp.A().rows(); ++r) {
          std::vector<int> members;
          for (int v = 0; v < sp.num_vars(); ++v)
            if (sp.A()(r, v) != 0) members.push_back(v);
          int pick = std::uniform_int_distribution<int>(-1, static_cast<int>(members.size()) - 1)(rng);
          if (pick >= 0) x(members[pick]) = std::min(sp.b()(r) / sp.A()(r, members[pick]), sp.upper()(members[pick]));
        }
        x(sp.unroll_var()) = corner % 2 ? sp.upper()(sp.unroll_var()) : 0.0;
        ASSERT_TRUE(sp.contains(x));
        points.push_back(x);
      }
      int batch = static_cast<int>(points.size());
      Eigen::MatrixXd xs(sp.num_vars(), batch);
      for (int b = 0; b < batch; ++b) xs.col(b) = points[b];
      size_t n = static_cast<size_t>(rs.num_stores()) * rs.num_features();
      std::vector<double> f(n * batch), ones(n * batch, 1.0), gx(static_cast<size_t>(batch) * rs.num_vars());
      rs.forward(xs.data(), batch, f.data());  // column-major [vars][batch] = row-major [batch][vars]
      rs.backward(ones.data(), gx.data());
      for (double v : f) ASSERT_TRUE(std::isfinite(v)) << t.op << " " << s.name;
      for (double v : gx) ASSERT_TRUE(std::isfinite(v)) << t.op << " " << s.name;
    }
  }
}

// evaluate() is forward() in chunks through buffers each thread shares with every
// sketch: the same features and constraints to the bit over a batch of several
// chunks, on two threads at once, in both modes, and it leaves the state of the last
// forward() (which backward() reads) alone.
TEST(RelaxedSketch, EvaluateInChunksEqualsForwardOnSeveralThreads) {
  std::mt19937_64 rng(14);
  int checked = 0;
  for (const Task& t : suite()) {
    ops::OpGraph g = ops::build_op(t.op, parse(t.params));
    for (const sched::Sketch& s : sched::cpu_sketches(g)) {
      for (relax::TapeMode mode : {relax::TapeMode::Exact, relax::TapeMode::Relaxed}) {
        relax::RelaxedSketch rs(g, s, mode);
        const int batch = 2 * relax::Tape::kChunk + 37;
        const size_t nf = static_cast<size_t>(rs.num_stores()) * rs.num_features(), nc = rs.num_constraints();
        std::vector<double> x;
        for (const Eigen::VectorXd& p : rs.space().sample(batch, rng)) x.insert(x.end(), p.data(), p.data() + p.size());
        std::vector<double> f(nf * batch), c(nc * batch);
        rs.forward(x.data(), batch, f.data(), c.data());
        // A backward() after evaluate() is the one after forward(): same gradient.
        std::vector<double> ones(nf * batch, 1.0), g_before(x.size()), g_after(x.size());
        rs.backward(ones.data(), g_before.data());
        std::vector<std::vector<double>> ef(2, std::vector<double>(nf * batch)), ec(2, std::vector<double>(nc * batch));
        std::vector<std::thread> threads;
        for (int k = 0; k < 2; ++k)
          threads.emplace_back([&, k] { rs.evaluate(x.data(), batch, ef[k].data(), ec[k].data()); });
        for (std::thread& th : threads) th.join();
        rs.backward(ones.data(), g_after.data());
        // Within rounding: a row's position in a vectorized loop decides whether a
        // vector or a scalar exp() computes it, and chunks move the rows. (The exact
        // mode at these real points, off the configurations, can give NaN: so must
        // evaluate().)
        auto near = [&](const std::vector<double>& got, const std::vector<double>& want) {
          for (size_t i = 0; i < want.size(); ++i) {
            if (std::isnan(want[i])) {
              ASSERT_TRUE(std::isnan(got[i])) << t.op << " " << s.name << " at " << i;
              continue;
            }
            ASSERT_NEAR(got[i], want[i], 1e-12 * std::max(1.0, std::abs(want[i])))
                << t.op << " " << s.name << " at " << i;
          }
        };
        for (int k = 0; k < 2; ++k) {
          near(ef[k], f);
          near(ec[k], c);
        }
        ASSERT_EQ(g_after, g_before) << t.op << " " << s.name;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 10);
}

}  // namespace
}  // namespace basin
