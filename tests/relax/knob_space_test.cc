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
  for (const char* spec :
       {"conv2d in_channels=16 out_channels=32 height=14 width=14", "depthwise_conv2d channels=24 height=28 width=28",
        "dense M=128 K=768 N=3072", "batch_matmul B=12 M=128 K=64 N=128", "softmax shape=12,197",
        "layer_norm shape=197,768", "matmul M=257 K=64 N=96"}) {
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
      sched::Config nearest = space.round_to_tilings(x);
      EXPECT_EQ(nearest.factors, c.factors) << s.name;
      EXPECT_EQ(nearest.unroll, c.unroll) << s.name;
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
      EXPECT_EQ(sched::invalid_reason(s, space.round_to_tilings(x)), "") << s.name;
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
  for (int b : bins)
    EXPECT_NEAR(b, n / 4, n * 0.05) << "bins " << bins[0] << " " << bins[1] << " " << bins[2] << " " << bins[3];
}

TEST(KnobSpace, AwkwardExtentsAreGuarded) {
  for (int64_t n : {5, 7, 49, 97, 197, 257}) EXPECT_TRUE(sched::awkward_extent(n)) << n;
  for (int64_t n : {1, 3, 4, 8, 14, 56, 768, 1000}) EXPECT_FALSE(sched::awkward_extent(n)) << n;
}

TEST(KnobSpace, GuardedSplitsTakeNonDivisorTilesUpToTheExtent) {
  ops::OpGraph g = ops::build_op("softmax", parse("shape=12,197"));
  const sched::Sketch s = sched::cpu_sketches(g)[0];
  relax::KnobSpace space(s);
  int first = -1;  // the first split over the 197 columns
  for (size_t i = 0; i < s.splits.size(); ++i) {
    const sched::SplitSpec& sp = s.splits[i];
    EXPECT_EQ(sp.guarded, sp.extent == 197) << sp.name;
    if (!sp.guarded) continue;
    if (first < 0) first = static_cast<int>(i);
    EXPECT_EQ(sched::factor_primes(sp), (std::vector<int64_t>{2, 3, 197}));
  }
  ASSERT_GE(first, 0);
  // Each guarded split's exponents: 2 up to 7 (128 <= 197), 3 up to 4 (81), 197 up to 1.
  for (int i = 0; i + 1 < space.num_vars(); ++i) {
    const auto& pv = space.exponent_vars()[i];
    if (!s.splits[pv.split].guarded) continue;
    EXPECT_EQ(space.upper()(i), pv.prime == 2 ? 7.0 : pv.prime == 3 ? 4.0 : 1.0) << space.var_names()[i];
  }
  // 8 and 12 lanes do not divide 197 and are configurations; 5 is not built from the
  // split's primes, and 256 exceeds the extent.
  sched::Config c = sched::default_config(s);
  for (size_t i = 0; i < s.splits.size(); ++i)
    if (s.splits[i].guarded) c.factors[i] = {8};
  c.factors[first] = {12};
  ASSERT_EQ(sched::invalid_reason(s, c), "");
  Eigen::VectorXd x = space.point_of(c);
  EXPECT_TRUE(space.contains(x));
  EXPECT_EQ(space.round(x).factors, c.factors);
  c.factors[first] = {5};
  EXPECT_NE(sched::invalid_reason(s, c).find("products of 2, 3 and the primes of 197"), std::string::npos);
  c.factors[first] = {256};
  EXPECT_NE(sched::invalid_reason(s, c).find("above its extent"), std::string::npos);
  // Rounding a point past the bound (2^7.9 > 197) repairs it below; a vector split
  // rounds to its 64 lanes.
  Eigen::VectorXd far = space.center();
  for (int i = 0; i + 1 < space.num_vars(); ++i)
    if (const sched::SplitSpec& sp = s.splits[space.exponent_vars()[i].split]; sp.guarded)
      far(i) = space.exponent_vars()[i].prime == 2 ? (sp.vectorized ? 6.2 : 7.9) : 0.0;
  sched::Config r = space.round(far);
  ASSERT_EQ(sched::invalid_reason(s, r), "");
  for (size_t i = 0; i < s.splits.size(); ++i) {
    if (!s.splits[i].guarded) continue;
    EXPECT_EQ(r.factors[i][0], s.splits[i].vectorized ? 64 : 128) << s.splits[i].name;
  }
}

// resnet18-c10's output row of 7 (a guarded split, primes 2, 3 and 7): a point on the
// group's bound with 2^2 * 7^0.29 (a tile of 7.0) in the register tile. Rounding each
// exponent gives 4; the nearest tiling keeps 7 (before nearest tilings, the gradient search
// measured 2 programs with the whole row in the register tile, annealing 395, and
// annealing's were the fastest).
TEST(KnobSpace, TheNearestTilingKeepsATileThatIsAProductOfPrimes) {
  ops::OpGraph g =
      ops::build_op("conv2d", parse("in_channels=256 out_channels=512 height=14 width=14 stride=2 padding=1"));
  for (const sched::Sketch& s : sched::cpu_sketches(g)) {
    if (s.name != "tile.vec=c.pack.acc2.stage") continue;
    relax::KnobSpace space(s);
    Eigen::VectorXd x = space.point_of(sched::default_config(s));
    int w = -1;
    for (size_t i = 0; i < s.splits.size(); ++i)
      if (s.splits[i].name == "w") w = static_cast<int>(i);
    ASSERT_GE(w, 0);
    ASSERT_TRUE(s.splits[static_cast<size_t>(w)].guarded);
    const int inner = s.splits[static_cast<size_t>(w)].parts - 1;
    for (int i = 0; i < space.unroll_var(); ++i) {
      const auto& pv = space.exponent_vars()[static_cast<size_t>(i)];
      if (pv.split != w) continue;
      x(i) = pv.level != inner ? 0.0
             : pv.prime == 2   ? 2.0
             : pv.prime == 7   ? std::log2(7.0 / 4.0) / std::log2(7.0)
                               : 0.0;
    }
    ASSERT_TRUE(space.contains(x, 1e-9));
    EXPECT_NEAR(space.factors(x)[static_cast<size_t>(w)][static_cast<size_t>(inner)], 7.0, 1e-9);
    EXPECT_EQ(space.round(x).factors[static_cast<size_t>(w)][static_cast<size_t>(inner)], 4);
    sched::Config c = space.round_to_tilings(x);
    EXPECT_EQ(sched::invalid_reason(s, c), "");
    EXPECT_EQ(c.factors[static_cast<size_t>(w)], (std::vector<int64_t>{1, 1, 7}));
    return;
  }
  FAIL() << "no tile.vec=c.pack.acc2.stage sketch";
}

TEST(KnobSpace, GuardedFactorizationsAreEveryTupleWithinTheExtent) {
  sched::SplitSpec sp = sched::make_split("x", 13, 2);
  ASSERT_TRUE(sp.guarded);
  const auto& all = sched::split_factorizations(sp);
  // Factors from {1, 2, 3, 4, 6, 8, 9, 12, 13} with a product of at most 13.
  int expected = 0;
  const std::vector<int64_t> smooth = {1, 2, 3, 4, 6, 8, 9, 12, 13};
  for (int64_t a : smooth)
    for (int64_t b : smooth) expected += a * b <= 13;
  EXPECT_EQ(static_cast<int>(all.size()), expected);
  for (const auto& t : all) EXPECT_LE(t[0] * t[1], 13);
}

}  // namespace
}  // namespace basin
