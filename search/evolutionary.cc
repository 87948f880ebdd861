// Evolutionary search as Ansor runs it: a population from the best measured programs
// and random samples, generations of offspring by tile-size and unroll mutation and by
// crossover, parents drawn with probability by their predicted fitness; the best
// unmeasured programs seen in all generations are measured, with a share epsilon of
// random ones.
#include <algorithm>
#include <cmath>
#include <map>

#include "search/sources/source.h"
#include "search/strategy.h"

namespace basin::search::detail {

namespace {

struct EvolutionOptions {
  int population = 256;
  int generations = 4;
  double measured_share = 0.2;  // of the initial population, from the best measured programs
  double crossover = 0.15;      // probability of a crossover child (else a mutation)
  double elite = 0.1;           // share of each generation kept as it is
  double epsilon = 0.05;
  int sources = 0;  // 1: the proposal sources' places of their own and pool candidates too
};

std::vector<OptionField> fields(EvolutionOptions& o) {
  return {
      {"population", &o.population, nullptr, 1, 1e6, "programs in each generation"},
      {"generations", &o.generations, nullptr, 0, 1000, "generations per batch"},
      {"measured_share", nullptr, &o.measured_share, 0, 1,
       "share of the first population from the best measured programs"},
      {"crossover", nullptr, &o.crossover, 0, 1, "probability that a child is a crossover (else a mutation)"},
      {"elite", nullptr, &o.elite, 0, 1, "share of each generation kept as it is"},
      {"epsilon", nullptr, &o.epsilon, 0, 1, "share of each batch that is random"},
      {"sources", &o.sources, nullptr, 0, 1,
       "1: the gradient search's proposal sources add their programs (their options below)"},
  };
}

class Evolutionary final : public Strategy {
 public:
  explicit Evolutionary(const StrategyOptions& set) : name_(spec_of("evolutionary", set)) {
    set_options("evolutionary", all_fields(), set);
  }
  std::string name() const override { return name_; }
  std::vector<StrategyOption> options() const override {
    EvolutionOptions o = opt_;
    return sources_.describe_after(describe_options(fields(o)));
  }

  std::vector<Candidate> propose(SearchState& state, int n) override {
    if (!guided(state)) return random_batch(state, n);
    TaskSpace& space = state.space;
    std::mt19937_64& rng = state.rng;
    const std::vector<const Measured*> good = SourceSet::fastest(state);
    std::vector<Candidate> pop;
    for (const Measured* m : good) {
      if (static_cast<int>(pop.size()) >= opt_.measured_share * opt_.population) break;
      pop.push_back(m->candidate);
    }
    while (static_cast<int>(pop.size()) < opt_.population) pop.push_back(space.random(rng));

    std::map<std::string, Candidate> seen;  // unmeasured programs of every generation
    std::uniform_real_distribution<double> unit;
    for (int gen = 0;; ++gen) {
      space.predict(*state.estimator, pop);
      for (const Candidate& c : pop)
        if (!state.measured.count(c.json)) seen.emplace(c.json, c);
      if (gen == opt_.generations) break;
      // Fitness: exp(-(score - best) / spread), so that parents of better predictions are
      // drawn more often whatever the estimator's scale.
      double lo = pop[0].predicted;
      for (const Candidate& c : pop) lo = std::min(lo, c.predicted);
      const double spread = prediction_spread(pop);
      std::vector<double> fitness;
      for (const Candidate& c : pop) fitness.push_back(std::exp(-(c.predicted - lo) / spread));
      std::discrete_distribution<size_t> parent(fitness.begin(), fitness.end());
      // The elite survive unchanged.
      std::vector<Candidate> children = pop;
      std::stable_sort(children.begin(), children.end(),
                       [](const Candidate& x, const Candidate& y) { return x.predicted < y.predicted; });
      children.resize(static_cast<size_t>(opt_.elite * pop.size()));
      while (children.size() < pop.size()) {
        const Candidate& a = pop[parent(rng)];
        Candidate child;
        bool made = false;
        if (unit(rng) < opt_.crossover) made = space.crossover(a, pop[parent(rng)], rng, &child);
        if (!made) made = space.mutate(a, rng, &child);
        children.push_back(made ? std::move(child) : space.random(rng));
      }
      pop = std::move(children);
    }
    if (!opt_.sources) {
      std::vector<Candidate> ranked;
      for (auto& [json, c] : seen) ranked.push_back(std::move(c));
      return select_batch(state, std::move(ranked), n, opt_.epsilon);
    }
    // With the sources: their pool candidates ranked with the generations', their places
    // of their own ending the batch, as in the gradient search.
    SourceContext ctx{state, good, n, nullptr, [this](const std::string& key) { return option(key); }};
    std::map<std::string, Candidate> pool;
    sources_.add_to_pool(ctx, pool);
    std::vector<Candidate> extra;
    for (auto& [json, c] : pool)
      if (!seen.count(json)) extra.push_back(std::move(c));
    space.predict(*state.estimator, extra);
    std::vector<Candidate> ranked;
    for (auto& [json, c] : seen) ranked.push_back(std::move(c));
    for (Candidate& c : extra) ranked.push_back(std::move(c));
    ctx.ranked = &ranked;
    std::vector<Candidate> own = sources_.places(ctx);
    std::vector<Candidate> out =
        select_batch(state, std::move(ranked), n - static_cast<int>(own.size()), opt_.epsilon, own);
    for (Candidate& c : own) out.push_back(std::move(c));
    return out;
  }

 private:
  std::vector<OptionField> all_fields() { return sources_.fields_after(fields(opt_)); }
  double option(const std::string& key) { return option_value(all_fields(), key, "evolutionary"); }

  std::string name_;
  EvolutionOptions opt_;
  SourceSet sources_;
};

}  // namespace

std::unique_ptr<Strategy> make_evolutionary(const StrategyOptions& set) { return std::make_unique<Evolutionary>(set); }

}  // namespace basin::search::detail

namespace basin::search {
BASIN_REGISTER_STRATEGY("evolutionary", 20, detail::make_evolutionary);
}  // namespace basin::search
