// Sketch exploration (sources.h).
#include <algorithm>
#include <iterator>
#include <map>
#include <random>
#include <set>

#include "search/sources/common.h"
#include "search/sources/source.h"

namespace basin::search::detail {

// Sketch exploration: the estimator orders programs of one sketch better than it
// orders sketches, and a sketch whose random programs were slow may hold the task's
// best (resnet18-c12: the packed-weight sketches). Each batch measures the
// best-predicted program of `sketch_slots` sketches in turn (round robin over the
// rounds, so every sketch is revisited), taken out of `ranked` (unmeasured programs).
namespace {

std::vector<Candidate> sketch_picks(const SearchState& state, std::vector<Candidate>& ranked, int n, int granted) {
  const int n_sketches = static_cast<int>(state.space.sketches().size());
  const int slots = std::min(granted, n_sketches - 1);
  std::vector<Candidate> out;
  if (slots <= 0) return out;
  const int round = static_cast<int>(state.history.size()) / std::max(n, 1);
  for (int k = 0; k < slots; ++k) {
    const int s = (round * slots + k) % n_sketches;
    auto best = ranked.end();
    for (auto it = ranked.begin(); it != ranked.end(); ++it)
      if (it->sketch == s && (best == ranked.end() || it->predicted < best->predicted)) best = it;
    if (best == ranked.end()) continue;
    out.push_back(std::move(*best));
    ranked.erase(best);
  }
  return out;
}

class SketchSlots final : public ProposalSource {
 public:
  std::string name() const override { return "sketch_slots"; }
  std::vector<OptionField> fields() override {
    return {{"sketch_slots", &slots_, nullptr, 0, 1e4, "per batch, the best-predicted program of sketches in turn"}};
  }
  std::vector<int> places_wanted() const override { return {slots_}; }
  std::vector<Candidate> propose(SourceContext& ctx, const std::vector<Candidate>&,
                                 const std::vector<int>& places) override {
    return sketch_picks(ctx.state, *ctx.ranked, ctx.n, places[0]);
  }

 private:
  int slots_ = 2;
};

}  // namespace

BASIN_REGISTER_SOURCE("sketch_slots", 10, SketchSlots);

}  // namespace basin::search::detail
