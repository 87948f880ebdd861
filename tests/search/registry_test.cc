// A proposal source and a strategy added as a researcher adds them: each one class and
// one registration line in a file of its own (this one), nothing else edited. The
// gradient strategy then takes the source's options and gives it places, the driver
// holding it to a quarter of the batch and dropping what was measured or repeated;
// make_strategy and strategy_names know the strategy.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/util/error.h"
#include "models/estimator.h"
#include "search/sources/source.h"
#include "search/space.h"
#include "search/strategy.h"

using namespace basin;

namespace {

// Asks for `toy_slots` places and returns twice as many programs, the first a measured
// one and the second a repeat of the third: the driver must cut and filter them.
class ToySource final : public search::ProposalSource {
 public:
  static std::set<std::string>& proposed() {
    static std::set<std::string> p;
    return p;
  }
  std::string name() const override { return "toy"; }
  std::vector<search::detail::OptionField> fields() override {
    return {{"toy_slots", &slots_, nullptr, 0, 100, "places the toy source asks for"}};
  }
  std::vector<int> places_wanted() const override { return {slots_}; }
  std::vector<search::Candidate> propose(search::SourceContext& ctx, const std::vector<search::Candidate>&,
                                         const std::vector<int>& places) override {
    EXPECT_LE(places[0], ctx.n / 4);
    std::vector<search::Candidate> out;
    out.push_back(ctx.state.history.front().candidate);  // measured
    while (static_cast<int>(out.size()) < 2 * slots_ + 2) {
      search::Candidate c = ctx.state.space.random(ctx.state.rng);
      out.push_back(c);
      if (out.size() == 2) out.push_back(c);  // a repeat
    }
    for (const search::Candidate& c : out) proposed().insert(c.json);
    return out;
  }

 private:
  int slots_ = 2;
};
BASIN_REGISTER_SOURCE("toy", 100, ToySource);

// Proposes the first n random programs it draws that are not measured.
class ToyStrategy final : public search::Strategy {
 public:
  explicit ToyStrategy(const search::StrategyOptions& set) : name_(search::detail::spec_of("toy", set)) {
    search::detail::set_options("toy", {{"toy_draws", &draws_, nullptr, 1, 1000, "draws per program"}}, set);
  }
  std::string name() const override { return name_; }
  std::vector<search::Candidate> propose(search::SearchState& state, int n) override {
    std::vector<search::Candidate> out;
    std::set<std::string> seen;
    for (int i = 0; i < n * draws_ * 10 && static_cast<int>(out.size()) < n; ++i) {
      search::Candidate c = state.space.random(state.rng);
      if (!state.measured.count(c.json) && seen.insert(c.json).second) out.push_back(c);
    }
    return out;
  }
  std::string default_estimator() const override { return ""; }

 private:
  std::string name_;
  int draws_ = 1;
};
BASIN_REGISTER_STRATEGY("toy", 100, [](const search::StrategyOptions& set) {
  return std::unique_ptr<search::Strategy>(new ToyStrategy(set));
});

struct Fixture {
  ops::OpGraph g = ops::build_op("matmul", {{"M", "64"}, {"N", "64"}, {"K", "64"}});
  search::TaskSpace space{g};
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  Fixture() {
    std::mt19937_64 r0(5);
    for (int i = 0; i < 24; ++i) {
      search::Candidate c = space.random(r0);
      if (measured.insert(c.json).second) history.push_back({c, 100.0 + i});
    }
  }
};

TEST(Registry, ANewSourceTakesOptionsAndAtMostAQuarterOfTheBatch) {
  const std::vector<std::string> names = search::source_names();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.back(), "toy");  // registered last in order
  EXPECT_EQ(names.front(), "local_moves");
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  ASSERT_TRUE(mlp->ready()) << "the pretrained CPU MLP is missing";
  Fixture f;
  // The other sources off, so that the toy's grant is all it is held to.
  const std::string others = ":sketch_slots=0:sibling_slots=0:unroll_slots=0:block_slots=0:tile_slots=0:fill_slots=0";
  for (int slots : {1, 10}) {
    std::unique_ptr<search::Strategy> s = search::make_strategy("gradient:toy_slots=" + std::to_string(slots) + others);
    bool listed = false;
    for (const search::StrategyOption& o : s->options())
      if (o.key == "toy_slots") {
        listed = true;
        EXPECT_EQ(o.source, "toy");
        EXPECT_EQ(o.value, std::to_string(slots));
      }
    EXPECT_TRUE(listed);
    ToySource::proposed().clear();
    std::mt19937_64 rng(3);
    search::SearchState state{f.space, mlp.get(), f.history, f.measured, rng};
    const std::vector<search::Candidate> got = s->propose(state, 16);
    ASSERT_EQ(got.size(), 16u);
    int toys = 0;
    std::set<std::string> distinct;
    for (const search::Candidate& c : got) {
      EXPECT_FALSE(f.measured.count(c.json));
      EXPECT_TRUE(distinct.insert(c.json).second);
      toys += ToySource::proposed().count(c.json) ? 1 : 0;
    }
    // The places of their own end the batch: the toy's, cut to its grant (it returned
    // 2 x slots + 2, a measured one and a repeat among them).
    const int granted = std::min(slots, 16 / 4);
    EXPECT_GE(toys, granted) << slots;
    for (int i = 16 - granted; i < 16; ++i)
      EXPECT_TRUE(ToySource::proposed().count(got[static_cast<size_t>(i)].json)) << slots << " " << i;
    EXPECT_FALSE(ToySource::proposed().count(got[static_cast<size_t>(15 - granted)].json)) << slots;
  }
  // With every source on and the toy asking for more than a quarter, the sources' places
  // stop short of the batch: 16 programs, distinct, none measured.
  {
    std::unique_ptr<search::Strategy> s = search::make_strategy("gradient:toy_slots=10");
    std::mt19937_64 rng(4);
    search::SearchState state{f.space, mlp.get(), f.history, f.measured, rng};
    const std::vector<search::Candidate> got = s->propose(state, 16);
    ASSERT_EQ(got.size(), 16u);
    std::set<std::string> distinct;
    for (const search::Candidate& c : got) {
      EXPECT_FALSE(f.measured.count(c.json));
      EXPECT_TRUE(distinct.insert(c.json).second);
    }
  }
  // Its option's range is checked like any other.
  EXPECT_THROW(search::make_strategy("gradient:toy_slots=1000"), ParseError);
}

TEST(Registry, ANewStrategyIsMadeByNameAndListed) {
  const std::vector<std::string> names = search::strategy_names();
  ASSERT_GE(names.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 4),
            (std::vector<std::string>{"gradient", "annealing", "evolutionary", "random"}));
  EXPECT_EQ(names.back(), "toy");
  std::unique_ptr<search::Strategy> s = search::make_strategy("toy:toy_draws=2");
  EXPECT_EQ(s->name(), "toy:toy_draws=2");
  Fixture f;
  std::mt19937_64 rng(1);
  search::SearchState state{f.space, nullptr, f.history, f.measured, rng};
  EXPECT_EQ(s->propose(state, 8).size(), 8u);
  EXPECT_THROW(search::make_strategy("toy:draws=2"), ParseError);
  try {
    search::make_strategy("no_such");
    FAIL() << "an unknown strategy was made";
  } catch (const NotFoundError& e) {
    EXPECT_NE(std::string(e.what()).find("toy"), std::string::npos) << e.what();
  }
}

}  // namespace
