// The gradient search (DESIGN.md, "Proposal"; the Felix paper): the Felix descent
// (search/descent.h) and the proposal sources (search/sources/sources.h), composed into
// one batch by Gradient::propose. How a batch is made, in one place:
//
//   first batch (nothing measured):  every sketch on equal terms, each its best
//                                    predicted random programs (first_batch)
//   later batches:
//     the ranked pool                the descent's rounded points and the fastest
//                                    programs' local moves, ranked by the estimator
//     places of their own            register-filling tiles, other register tiles,
//                                    other reduction blocks, other unroll depths,
//                                    sibling sketches' tilings, and one sketch's best
//                                    predicted program in turn: each at most a quarter
//                                    of the batch, none repeating another's
//     the ranked places              the pool's best predicted, the sketches measured
//                                    slow sharing a few (the cap), and an epsilon of
//                                    random programs
#include <algorithm>
#include <iterator>
#include <map>

#include "core/util/error.h"
#include "models/estimator.h"
#include "search/descent.h"
#include "search/sources/source.h"
#include "search/sources/sources.h"
#include "search/strategy.h"

namespace basin::search::detail {

namespace {

// The strategy's own options: the first batch, the descent, the random share, the cap;
// each proposal source has its own (source.h).
struct GradientOptions {
  FirstBatchOptions first;
  DescentOptions descent;
  double epsilon = 0.1;  // share of each batch that is random
  SketchCap cap;         // the sketches measured slow (negative places turn it off)
  int sources = 1;       // 0: the descent alone, no proposal source (the fair grid's "no sources")
};

std::vector<OptionField> own_fields(GradientOptions& o) {
  return {
      {"first_draws", &o.first.draws, nullptr, 0, 1e5,
       "the first batch: per sketch, the best predicted of this many random programs (0: a descent instead)"},
      {"seeds", &o.descent.seeds, nullptr, 0, 1e5, "descent seeds per batch"},
      {"steps", &o.descent.steps, nullptr, 0, 1e4, "Adam steps per descent"},
      {"learning_rate", nullptr, &o.descent.learning_rate, 1e-6, 100, "Adam's step, in exponent units"},
      {"penalty_weight", nullptr, &o.descent.penalty_weight, 0, 1e6,
       "the constraint penalty's gradient against the score's"},
      {"best_share", nullptr, &o.descent.best_share, 0, 1, "share of the seeds started at the best measured programs"},
      {"seed_noise", nullptr, &o.descent.seed_noise, 0, 100, "their Gaussian noise, in exponent units"},
      {"epsilon", nullptr, &o.epsilon, 0, 1, "share of each batch that is random"},
      {"nearest_tilings", &o.descent.nearest_tilings, nullptr, 0, 1,
       "1: every visited point also rounded to the tilings nearest its continuous tile sizes"},
      {"fill_first", &o.first.fill, nullptr, 0, 1,
       "1: each sketch's first program in the first batch has a register-filling tile"},
      {"fill_whole", &o.first.whole, nullptr, 0, 1,
       "1 (with fill_first): each sketch's second program in the first batch has the fullest filling tile "
       "with no partial tile"},
      {"cap_places", &o.cap.places, nullptr, -1, 1e4,
       "ranked places per batch shared by the sketches measured slow (-1: no cap)"},
      {"cap_evidence", &o.cap.evidence, nullptr, 1, 1e5, "programs a sketch needs measured before it can be capped"},
      {"cap_margin", nullptr, &o.cap.margin, 0, 100,
       "how much slower than the best a capped sketch's best is, at first"},
      {"cap_margin_floor", nullptr, &o.cap.margin_floor, 0, 100, "the margin's floor as the sketch's programs grow"},
      {"sources", &o.sources, nullptr, 0, 1,
       "0: no proposal source adds programs after the first batch (the descent and the ranked places alone)"},
  };
}

class Gradient final : public Strategy {
 public:
  explicit Gradient(const StrategyOptions& set) : name_(spec_of("gradient", set)) {
    set_options("gradient", fields(), set);
  }
  std::string name() const override { return name_; }
  std::vector<StrategyOption> options() const override {
    GradientOptions o = opt_;
    return sources_.describe_after(describe_options(own_fields(o)));
  }
  bool needs_gradients() const override { return true; }

  std::vector<Candidate> propose(SearchState& state, int n) override {
    if (!guided(state)) return random_batch(state, n);
    auto* est = dynamic_cast<models::DifferentiableEstimator*>(state.estimator);
    if (!est)
      throw Error(
          "the gradient strategy needs a differentiable estimator (mlp, ensemble, a TorchScript file, or one of its "
          "own with a gradient), not " +
          state.estimator->kind());
    // Every sketch's evaluators at once, on the helper threads: the first batch ranks
    // every sketch's programs, and the descents start from every sketch.
    state.space.build_evaluators(/*relaxed=*/true);
    if (state.history.empty() && opt_.first.draws > 0)
      return first_batch(state, n, opt_.first, static_cast<int>(option("fill_registers")));

    const std::vector<const Measured*> good = SourceSet::fastest(state);

    // The ranked pool: the descent's points, then the sources' in their order.
    SourceContext ctx{state, good, n, nullptr, [this](const std::string& key) { return option(key); }};
    std::map<std::string, Candidate> pool;
    descend(state, *est, good, opt_.descent, pool);
    if (opt_.sources) sources_.add_to_pool(ctx, pool);
    std::vector<Candidate> ranked;
    for (auto& [json, c] : pool) ranked.push_back(std::move(c));
    state.space.predict(*state.estimator, ranked);

    // Places of their own (source.h): each source skipping what the ones before it
    // took, the batch listing the last source's first.
    ctx.ranked = &ranked;
    std::vector<Candidate> own = opt_.sources ? sources_.places(ctx) : std::vector<Candidate>{};

    // The ranked places.
    cap_losing_sketches(state, ranked);
    std::vector<Candidate> out =
        select_batch(state, std::move(ranked), n - static_cast<int>(own.size()), opt_.epsilon, own);
    for (Candidate& c : own) out.push_back(std::move(c));
    return out;
  }

 private:
  // The estimator's order across sketches can stay wrong for hundreds of trials after
  // the measurements have settled it (resnet18-c12: 300 of the first 600 trials went
  // to `vec=w` sketches whose best was 40% slower than the packed ones'). A sketch
  // with at least `cap.evidence` measured programs whose best is more than a margin
  // slower than the best of all is capped: the capped sketches share `cap.places`
  // places, their best-predicted candidates, in the ranked part of the batch. The
  // margin is `cap.margin` at `cap.evidence` programs and shrinks in proportion as a
  // sketch's programs grow, to `cap.margin_floor`: the more a sketch has been
  // measured, the less doubt its best leaves (on C12 four `vec=w` sketches 12% behind
  // the packed ones, with 60 to 170 programs each, took a quarter of the trials after
  // 300, two capped places each). The sketch slots still revisit a capped sketch in
  // turn, so one whose new program is fast loses its cap.
  void cap_losing_sketches(const SearchState& state, std::vector<Candidate>& ranked) const {
    if (opt_.cap.places < 0) return;
    cap_ranked(ranked, capped_sketches(state.history, state.space.sketches().size(), opt_.cap), opt_.cap.places);
  }

  // The strategy's own options, then each source's in their order.
  std::vector<OptionField> fields() { return sources_.fields_after(own_fields(opt_)); }
  // An option's value by key (SourceContext::option).
  double option(const std::string& key) { return option_value(fields(), key, "gradient"); }

  std::string name_;
  GradientOptions opt_;
  SourceSet sources_;
};

}  // namespace

std::unique_ptr<Strategy> make_gradient(const StrategyOptions& set) { return std::make_unique<Gradient>(set); }

}  // namespace basin::search::detail

namespace basin::search {
BASIN_REGISTER_STRATEGY("gradient", 0, detail::make_gradient);
}  // namespace basin::search
