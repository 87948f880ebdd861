// Simulated annealing over discrete configurations with the estimator as energy, as
// AutoTVM's model-based tuner runs it (the AutoTVM paper's Algorithm 1): parallel
// chains that persist from one round to the next, a temperature falling linearly from
// 1 to 0, a neighbour that changes one knob; the best programs the chains visited
// are then picked for diversity (a greedy cover of knob values over the 2n best) and
// a share epsilon of the batch is random (epsilon-greedy). As in AutoTVM, one search
// plans `plan_size` programs (64), which the following batches measure, and the
// tuning loop retrains the estimator once per plan (Strategy::plan_size).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "search/sources/source.h"
#include "search/strategy.h"

namespace basin::search::detail {

namespace {

struct AnnealingOptions {
  int plan_size = 64;  // AutoTVM's
  int chains = 128;
  int steps = 120;      // per round (the chains persist across rounds)
  int early_stop = 30;  // steps without a new program among the 2n best
  double diversity_ratio = 2;
  double epsilon = 0.05;
  int sources = 0;  // 1: the proposal sources' places of their own too
};

std::vector<OptionField> fields(AnnealingOptions& o) {
  return {
      {"plan_size", &o.plan_size, nullptr, 1, 1e6,
       "programs one search plans; the estimator is retrained once per plan"},
      {"chains", &o.chains, nullptr, 1, 1e5, "parallel annealing chains"},
      {"steps", &o.steps, nullptr, 0, 1e5, "annealing steps per search"},
      {"early_stop", &o.early_stop, nullptr, 1, 1e5, "steps without a new program among the best that end a search"},
      {"diversity_ratio", nullptr, &o.diversity_ratio, 1, 100, "the diverse cover picks from this many times the plan"},
      {"epsilon", nullptr, &o.epsilon, 0, 1, "share of each plan that is random"},
      {"sources", &o.sources, nullptr, 0, 1,
       "1: the gradient search's proposal sources take places of their own in each batch (their options below)"},
  };
}

class Annealing final : public Strategy {
 public:
  explicit Annealing(const StrategyOptions& set) : name_(spec_of("annealing", set)) {
    set_options("annealing", all_fields(), set);
  }
  std::string name() const override { return name_; }
  std::vector<StrategyOption> options() const override {
    AnnealingOptions o = opt_;
    return sources_.describe_after(describe_options(fields(o)));
  }
  std::string default_estimator() const override { return "gbt"; }
  int plan_size() const override { return opt_.plan_size; }

  std::vector<Candidate> propose(SearchState& state, int n) override {
    if (!guided(state)) {
      plan_.clear();
      return random_batch(state, n);
    }
    // The rest of the current plan first; a new search when it runs short.
    std::vector<Candidate> out;
    auto take = [&] {
      size_t used = 0;
      while (used < plan_.size() && static_cast<int>(out.size()) < n) {
        Candidate& c = plan_[used++];
        if (!state.measured.count(c.json)) out.push_back(std::move(c));
      }
      plan_.erase(plan_.begin(), plan_.begin() + static_cast<std::ptrdiff_t>(used));
    };
    take();
    if (static_cast<int>(out.size()) < n) {
      plan_ = search(state, std::max(opt_.plan_size, n));
      // Programs already taken from the old plan are not measured yet: drop repeats.
      std::set<std::string> have;
      for (const Candidate& c : out) have.insert(c.json);
      plan_.erase(
          std::remove_if(plan_.begin(), plan_.end(), [&](const Candidate& c) { return have.count(c.json) > 0; }),
          plan_.end());
      take();
    }
    if (opt_.sources) with_sources(state, n, out);
    return out;
  }

 private:
  // The sources' places of their own (source.h) end the batch, the plan's programs they
  // displace back at its front for the next batch; the sketch slots take from the plan.
  void with_sources(SearchState& state, int n, std::vector<Candidate>& out) {
    const std::vector<const Measured*> good = SourceSet::fastest(state);
    SourceContext ctx{state, good, n, &plan_, [this](const std::string& key) { return option(key); }};
    std::vector<Candidate> own = sources_.places(ctx);
    std::set<std::string> mine;
    for (const Candidate& c : own) mine.insert(c.json);
    std::vector<Candidate> kept;
    for (Candidate& c : out)
      if (!mine.count(c.json)) kept.push_back(std::move(c));
    while (!kept.empty() && kept.size() + own.size() > static_cast<size_t>(n)) {
      plan_.insert(plan_.begin(), std::move(kept.back()));
      kept.pop_back();
    }
    for (Candidate& c : own) kept.push_back(std::move(c));
    out = std::move(kept);
  }
  std::vector<OptionField> all_fields() { return sources_.fields_after(fields(opt_)); }
  double option(const std::string& key) { return option_value(all_fields(), key, "annealing"); }

  // One annealing search: n candidates, the best first, then the random share.
  std::vector<Candidate> search(SearchState& state, int n) {
    TaskSpace& space = state.space;
    std::mt19937_64& rng = state.rng;
    // The chains start where the last round's ended, topped up with random points.
    std::vector<Candidate> points = std::move(points_);
    while (static_cast<int>(points.size()) < opt_.chains) points.push_back(space.random(rng));
    space.predict(*state.estimator, points);
    const double scale = prediction_spread(points);  // energies in units of their spread

    const size_t keep = static_cast<size_t>(opt_.diversity_ratio * n);
    std::map<std::string, Candidate> visited;       // every unmeasured program visited
    std::set<std::pair<double, std::string>> best;  // the `keep` best of them
    auto visit = [&](const Candidate& c) {
      if (state.measured.count(c.json) || !visited.emplace(c.json, c).second) return false;
      best.emplace(c.predicted, c.json);
      if (best.size() > keep) {
        auto last = std::prev(best.end());
        bool evicted_self = last->second == c.json;
        best.erase(last);
        return !evicted_self;
      }
      return true;
    };
    for (const Candidate& c : points) visit(c);
    std::uniform_real_distribution<double> unit;
    int quiet = 0;
    std::vector<Candidate> next(points.size());
    for (int step = 0; step < opt_.steps && quiet < opt_.early_stop; ++step) {
      const double t = 1.0 - static_cast<double>(step) / opt_.steps;
      for (size_t i = 0; i < points.size(); ++i)
        if (!space.neighbor(points[i], rng, &next[i])) next[i] = space.random(rng);
      space.predict(*state.estimator, next);
      bool improved = false;
      for (size_t i = 0; i < points.size(); ++i) {
        improved |= visit(next[i]);
        double delta = (next[i].predicted - points[i].predicted) / scale;
        if (delta <= 0 || unit(rng) < std::exp(-delta / (t + 1e-5))) points[i] = next[i];
      }
      quiet = improved ? 0 : quiet + 1;
    }
    points_ = points;

    // Diversity-aware selection over the `keep` best, then the random share.
    std::vector<Candidate> pool;
    for (const auto& [score, json] : best) pool.push_back(visited.at(json));
    const int n_random = static_cast<int>(std::floor(opt_.epsilon * n + 0.5));
    std::vector<Candidate> out = diverse_cover(std::move(pool), n - n_random);
    fill_random(state, n, out);
    return out;
  }

  std::string name_;
  AnnealingOptions opt_;
  SourceSet sources_;
  std::vector<Candidate> points_;
  std::vector<Candidate> plan_;  // planned, not yet proposed
};

}  // namespace

std::unique_ptr<Strategy> make_annealing(const StrategyOptions& set) { return std::make_unique<Annealing>(set); }

}  // namespace basin::search::detail

namespace basin::search {
BASIN_REGISTER_STRATEGY("annealing", 10, detail::make_annealing);
}  // namespace basin::search
