// The knob space of the relaxation: configurations map to exact integer points and
// back, hit-and-run samples stay in the polytope and spread uniformly, and rounding
// any point of it gives a valid configuration.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/ops/registry.h"
#include "relax/knob_space.h"
#include "tests/ops/op_cases.h"

namespace basin {
namespace {

std::vector<sched::Sketch> suite_sketches() {
  std::vector<sched::Sketch> all;
  for (const char* spec : {"conv2d in_channels=16 out_channels=32 height=14 width=14",
                           "depthwise_conv2d channels=24 height=28 width=28", "dense M=128 K=768 N=3072",
                           "batch_matmul B=12 M=128 K=64 N=128", "softmax shape=12,197", "layer_norm shape=197,768",
                           "matmul M=257 K=64 N=96"}) {
    std::string s(spec);
    std::string op = s.substr(0, s.find(' '));
    for (const sched::Sketch& sk : sched::cpu_sketches(ops::build_op(op, parse(s.substr(op.size())))))
      all.push_back(sk);
  }
  return all;
}

TEST(KnobSpace, Factorize) {
  EXPECT_EQ(relax::factorize(56), (std::vector<std::pair<int64_t, int>>{{2, 3}, {7, 1}}));
  EXPECT_EQ(relax::factorize(197), (std::vector<std::pair<int64_t, int>>{{197, 1}}));
  EXPECT_TRUE(relax::factorize(1).empty());
}

TEST(KnobSpace, ConfigurationsAreExactIntegerPointsAndRoundTrip) {
  std::mt19937_64 rng(4);
  for (const sched::Sketch& s : suite_sketches()) {
    relax::KnobSpace space(s);
    for (int t = 0; t < 20; ++t) {
      sched::Config c = sched::random_config(s, rng);
      Eigen::VectorXd x = space.point_of(c);
      ASSERT_TRUE(space.contains(x)) << s.name;
      for (int i = 0; i < space.unroll_var(); ++i) EXPECT_EQ(x(i), std::round(x(i))) << space.var_names()[i];
      EXPECT_NEAR(space.unroll(x), static_cast<double>(c.unroll), 1e-9);
      std::vector<std::vector<double>> f = space.factors(x);
      for (size_t i = 0; i < f.size(); ++i)
        for (size_t l = 0; l < f[i].size(); ++l) EXPECT_NEAR(f[i][l], c.factors[i][l], 1e-9);
      sched::Config back = space.round(x);
      EXPECT_EQ(back.factors, c.factors) << s.name;
      EXPECT_EQ(back.unroll, c.unroll) << s.name;
    }
  }
}

TEST(KnobSpace, SamplesStayInsideAndRoundToValidConfigurations) {
  std::mt19937_64 rng(5);
  for (const sched::Sketch& s : suite_sketches()) {
    relax::KnobSpace space(s);
    ASSERT_TRUE(space.contains(space.center()));
    for (const Eigen::VectorXd& x : space.sample(50, rng)) {
      ASSERT_TRUE(space.contains(x, 1e-7)) << s.name;
      EXPECT_EQ(sched::invalid_reason(s, space.round(x)), "") << s.name;
    }
  }
}

TEST(KnobSpace, RoundingRepairsPointsOutsideThePolytope) {
  ops::OpGraph g = ops::build_op("matmul", parse("M=64 K=64 N=64"));
  const sched::Sketch s = sched::cpu_sketches(g)[0];
  relax::KnobSpace space(s);
  Eigen::VectorXd x = Eigen::VectorXd::Constant(space.num_vars(), 5.0);  // every level asks for 2^5
  x(space.unroll_var()) = 5.8;  // nearest menu entry in log2(1 + u) space: 64 (6.02)
  sched::Config c = space.round(x);
  EXPECT_EQ(sched::invalid_reason(s, c), "");
  for (size_t i = 0; i < c.factors.size(); ++i) {
    int64_t prod = 1;
    for (int64_t f : c.factors[i]) prod *= f;
    EXPECT_EQ(64 % prod, 0);  // repaired into the polytope: the product divides the extent
  }
  EXPECT_EQ(c.unroll, 64);
}

TEST(KnobSpace, HitAndRunIsUniformOnAnInterval) {
  // One split of 2^8 with one level: x in [0, 8] and z in [0, log2(1025)]; a uniform sample
  // puts about a quarter of x in each quarter of [0, 8].
  sched::Sketch s;
  s.rule = sched::SketchRule::Generic;
  s.splits = {{"st0.v", 256, 1}};
  relax::KnobSpace space(s);
  ASSERT_EQ(space.num_vars(), 2);
  std::mt19937_64 rng(6);
  std::vector<int> bins(4);
  const int n = 4000;
  for (const Eigen::VectorXd& x : space.sample(n, rng, 50, 5)) bins[std::min(3, static_cast<int>(x(0) / 2))]++;
  for (int b : bins) EXPECT_NEAR(b, n / 4, n * 0.05) << "bins " << bins[0] << " " << bins[1] << " " << bins[2] << " " << bins[3];
}

TEST(KnobSpace, LargePrimeExtentsHaveOnlyTheirTwoDivisors) {
  ops::OpGraph g = ops::build_op("softmax", parse("shape=12,197"));
  const sched::Sketch s = sched::cpu_sketches(g)[0];
  relax::KnobSpace space(s);
  // st0.v (197) and st0.r (197) ... each one exponent of 197 in [0, 1].
  for (int i = 0; i + 1 < space.num_vars(); ++i) EXPECT_EQ(space.upper()(i), 1.0) << space.var_names()[i];
}

}  // namespace
}  // namespace basin
