// Sibling sketches (sources.h).
#include <algorithm>
#include <iterator>
#include <map>
#include <random>
#include <set>

#include "search/sources/common.h"
#include "search/sources/source.h"

namespace basin::search::detail {

// Sibling sketches: a task's anchor sketches share their splits and differ in the
// vector axis, packing, accumulator level and producer placement, and the estimator
// orders programs of one sketch better than it orders sketches. On resnet18-c2, -c6
// and -c9 the sketch of the final best was a sibling of the one the
// search settled on first (another accumulator level or producer placement), and it
// took 150 to 250 trials to move there. Each batch measures the fastest programs'
// own tilings in `sibling_slots` other sketches: the nearest sketches first
// (TaskSpace::sketch_distance), then the best predicted; the fastest program's
// siblings first, the next program's once those are all measured. Not in `taken`.
namespace {

struct SiblingOptions {
  int slots = 2;
  int parents = 4;
};

std::vector<Candidate> sibling_picks(SearchState& state, const std::vector<const Measured*>& good,
                                     const std::vector<Candidate>& taken, size_t slots, const SiblingOptions& opt) {
  std::vector<Candidate> out;
  std::set<std::string> used;
  for (const Candidate& c : taken) used.insert(c.json);
  const int n_sketches = static_cast<int>(state.space.sketches().size());
  const size_t parents = std::min(good.size(), static_cast<size_t>(std::max(opt.parents, 0)));
  for (size_t p = 0; p < parents && out.size() < slots; ++p) {
    const Candidate& parent = good[p]->candidate;
    std::vector<Candidate> sibs;
    for (int s = 0; s < n_sketches; ++s) {
      Candidate c;
      if (state.space.transplant(parent, s, &c) && !state.measured.count(c.json) && !used.count(c.json))
        sibs.push_back(std::move(c));
    }
    if (sibs.empty()) continue;
    state.space.predict(*state.estimator, sibs);
    std::stable_sort(sibs.begin(), sibs.end(), [&](const Candidate& a, const Candidate& b) {
      const int da = state.space.sketch_distance(parent.sketch, a.sketch);
      const int db = state.space.sketch_distance(parent.sketch, b.sketch);
      return da != db ? da < db : a.predicted < b.predicted;
    });
    for (Candidate& c : sibs) {
      if (out.size() >= slots) break;
      used.insert(c.json);
      out.push_back(std::move(c));
    }
  }
  return out;
}

class Siblings final : public ProposalSource {
 public:
  std::string name() const override { return "siblings"; }
  std::vector<OptionField> fields() override {
    return {
        {"sibling_slots", &opt_.slots, nullptr, 0, 1e4, "per batch, the fastest programs' tilings in other sketches"},
        {"sibling_parents", &opt_.parents, nullptr, 0, 1e4, "the fastest programs the sibling slots draw on"}};
  }
  std::vector<int> places_wanted() const override { return {opt_.slots}; }
  std::vector<Candidate> propose(SourceContext& ctx, const std::vector<Candidate>& taken,
                                 const std::vector<int>& places) override {
    return sibling_picks(ctx.state, ctx.good, taken, static_cast<size_t>(places[0]), opt_);
  }

 private:
  SiblingOptions opt_;
};

}  // namespace

BASIN_REGISTER_SOURCE("siblings", 20, Siblings);

}  // namespace basin::search::detail
