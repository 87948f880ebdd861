// Search strategies behind one interface (DESIGN.md, "Search"): the state of a task's
// tuning in (its space, the estimator, what was measured), the next batch of
// candidates out. Four strategies:
//  - "gradient": the relaxation (Felix): seeds in each sketch's polytope, Adam on the
//    exponents against the differentiable estimator plus the constraint penalty,
//    every visited point rounded, filtered, deduplicated, ranked, the best measured
//    with a few random ones;
//  - "annealing": batched simulated-annealing chains with the estimator as energy,
//    then diversity-aware, epsilon-greedy selection (AutoTVM's Algorithm 1);
//  - "evolutionary": a population from random samples and the best measured programs,
//    tile-size and unroll mutation, crossover, selection by the estimator (Ansor);
//  - "random": uniform over valid configurations.
// Strategies are deterministic given the rng: one seed makes a run reproducible.
// Each takes options by name ("gradient:tile_slots=0"), for ablations and for two
// variants of one strategy tuned side by side (docs/search.md, "Strategy options").
#pragma once

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "search/space.h"

namespace basin::search {

// A measured program of the task.
struct Measured {
  Candidate candidate;
  double latency_us = 0;  // 0 for a program that failed
  bool ok() const { return latency_us > 0; }
};

struct SearchState {
  TaskSpace& space;
  // Null, or not ready(): the model-guided strategies propose random configurations.
  models::Estimator* estimator = nullptr;
  const std::vector<Measured>& history;             // oldest first
  const std::unordered_set<std::string>& measured;  // the json of every measured program
  std::mt19937_64& rng;
};

// One option of a strategy: its key, the value it has, and what it sets.
struct StrategyOption {
  std::string key, value, help;
  std::string source;  // the proposal source that owns it (search/sources/source.h); "": the strategy's own
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  // The strategy's spec: its name, with the options it was made with
  // ("gradient:tile_slots=0"), so that two variants keep apart in runs and reports.
  virtual std::string name() const = 0;
  // Its options, with the values it runs with.
  virtual std::vector<StrategyOption> options() const { return {}; }
  // Up to n candidates not measured yet and distinct, best first where ranked (fewer
  // only when the space has fewer unmeasured programs left).
  virtual std::vector<Candidate> propose(SearchState& state, int n) = 0;
  // The estimator kind used when none is given: "gbt" for annealing (as AutoTVM),
  // "ensemble" for gradient and evolutionary (the shipped MLP and trees on the CPU;
  // it descends on the MLP and ranks with both), "" for random.
  virtual std::string default_estimator() const { return "ensemble"; }
  // True if the strategy needs a models::DifferentiableEstimator.
  virtual bool needs_gradients() const { return false; }
  // New measurements between two estimator updates: the tuning loop updates a ready
  // estimator once at least this many programs were measured since its last update
  // (0: after every batch). Annealing plans this many programs per search, as
  // AutoTVM's plan_size.
  virtual int plan_size() const { return 0; }
};

// Options set on a strategy, in the order written: (key, value as written).
using StrategyOptions = std::vector<std::pair<std::string, std::string>>;

// A strategy by its spec, "NAME" or "NAME:KEY=VALUE[:KEY=VALUE...]": NAME one of
// strategy_names(), each KEY one of its options() (gradient:tile_slots=0:epsilon=0.2).
// NotFoundError for an unknown name; ParseError for an unknown or repeated key, or a
// value that is not a number in the option's range (the message lists the options).
std::unique_ptr<Strategy> make_strategy(const std::string& spec);
// The registered strategies' names in order: "gradient", "annealing", "evolutionary",
// "random", then any other registered.
std::vector<std::string> strategy_names();

// Strategies register themselves: one file, a class implementing Strategy and one
// BASIN_REGISTER_STRATEGY line (docs/search.md, "Adding a strategy"). `order` places it
// in strategy_names() (lower first); a repeated name is an error at start-up.
using StrategyFactory = std::function<std::unique_ptr<Strategy>(const StrategyOptions&)>;
struct StrategyRegistration {
  StrategyRegistration(const std::string& name, int order, StrategyFactory make);
};

namespace detail {
// True when the state's estimator can guide a search (present and ready()).
bool guided(const SearchState& state);
// n distinct unmeasured random candidates (fewer in a small space).
std::vector<Candidate> random_batch(SearchState& state, int n);
// The standard deviation of the candidates' predictions (at least 1e-9): the scale of
// scores in the annealing temperature and the evolutionary fitness.
double prediction_spread(const std::vector<Candidate>& cs);
// Fills `out` (already holding chosen candidates) up to n with distinct unmeasured
// random candidates, none of them in `reserved`; gives up after many duplicates in a
// row (a small space).
void fill_random(SearchState& state, int n, std::vector<Candidate>& out, const std::vector<Candidate>& reserved = {});
// The final batch of a model-guided strategy: `ranked` (any order; sorted here by
// prediction) with measured and repeated programs dropped, the best n - n_random of
// them, then random ones (epsilon-greedy exploration) up to n. Neither part repeats a
// program of `reserved`, which the caller adds after the batch.
std::vector<Candidate> select_batch(SearchState& state, std::vector<Candidate> ranked, int n, double epsilon,
                                    const std::vector<Candidate>& reserved = {});
// AutoTVM's diversity-aware selection: up to n of `pool` (best first), each the
// candidate covering the most knob values (sketch, knob, value) not covered by those
// chosen before it, ties to the earlier (better) one.
std::vector<Candidate> diverse_cover(std::vector<Candidate> pool, int n);
// Sketches measured slow (the gradient strategy's cap, docs/search.md): a sketch with
// at least `evidence` measured programs whose best is more than a margin slower than
// the best of all. The margin is `margin` at `evidence` programs and shrinks in
// proportion as the sketch's programs grow, to `margin_floor`.
struct SketchCap {
  int evidence = 8;
  double margin = 0.25;
  double margin_floor = 0.05;
  int places = 2;  // ranked places per batch, shared by all capped sketches
};
std::vector<bool> capped_sketches(const std::vector<Measured>& history, size_t n_sketches, const SketchCap& cap);
// `ranked`, sorted by prediction, with the capped sketches' candidates cut to the
// `places` best predicted among them.
void cap_ranked(std::vector<Candidate>& ranked, const std::vector<bool>& capped, int places);
// One option a strategy takes: its key, the field it sets (an integer or a real
// number), the values allowed and what it sets.
struct OptionField {
  std::string key;
  int* integer = nullptr;
  double* real = nullptr;
  double lo = 0, hi = 0;
  std::string help;
};
// Sets the fields `set` names (errors as make_strategy says); `strategy` names it in them.
void set_options(const std::string& strategy, const std::vector<OptionField>& fields, const StrategyOptions& set);
// The fields as options, with the values they hold now.
std::vector<StrategyOption> describe_options(const std::vector<OptionField>& fields);
// The value of the field named `key` (Error naming `strategy` where none is).
double option_value(const std::vector<OptionField>& fields, const std::string& key, const std::string& strategy);
// The spec make_strategy reads back: the name, then ":key=value" per option set.
std::string spec_of(const std::string& name, const StrategyOptions& set);
std::unique_ptr<Strategy> make_random(const StrategyOptions& set = {});
std::unique_ptr<Strategy> make_annealing(const StrategyOptions& set = {});
std::unique_ptr<Strategy> make_evolutionary(const StrategyOptions& set = {});
std::unique_ptr<Strategy> make_gradient(const StrategyOptions& set = {});
}  // namespace detail

}  // namespace basin::search

#define BASIN_STRATEGY_CONCAT2(a, b) a##b
#define BASIN_STRATEGY_CONCAT(a, b) BASIN_STRATEGY_CONCAT2(a, b)
// BASIN_REGISTER_STRATEGY("name", order, factory): factory(const StrategyOptions&)
// makes the strategy with the options set.
#define BASIN_REGISTER_STRATEGY(name, order, factory)                                                              \
  static const ::basin::search::StrategyRegistration BASIN_STRATEGY_CONCAT(basin_strategy_, __LINE__)(name, order, \
                                                                                                      factory)
