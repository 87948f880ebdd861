// Other blocks of a reduction (sources.h).
#include <algorithm>
#include <iterator>
#include <map>
#include <random>
#include <set>

#include "search/sources/common.h"
#include "search/sources/source.h"

namespace basin::search::detail {

// One-level splits (a reduction's block: k of a GEMM, rc of a convolution): the
// estimator's preference among their factors comes from the machines it was trained
// on. On gemm-1024 (an Intel host) the gradient search measured 441 of
// its 8x32-tile programs with k blocks of 256 to 1024 and none below 16, while
// annealing's best, 11% faster, had a k block of 16; on resnet18-c2 its programs had
// rc blocks of 8 to 64 and annealing's best 2. Each batch measures `block_slots`
// programs that are the fastest program's configuration with another factor of one
// such split: the factor farthest (in the split's sorted factors) from every factor
// measured with that sketch and register tile, so that a few probes span the range;
// the best predicted among equals; the fastest program's first. Not in `taken`.
namespace {

std::vector<Candidate> block_picks(SearchState& state, const std::vector<const Measured*>& good,
                                   const std::vector<Candidate>& taken, size_t slots) {
  std::vector<Candidate> out;
  if (slots == 0) return out;
  std::set<std::string> used;
  for (const Candidate& c : taken) used.insert(c.json);
  for (size_t p = 0; p < good.size() && out.size() < slots; ++p) {
    const Candidate& parent = good[p]->candidate;
    const sched::Sketch& s = state.space.sketches()[static_cast<size_t>(parent.sketch)];
    // The measured programs of the parent's sketch and tile (the parent among them),
    // found once for all of its splits.
    const Tile tile = tile_of(state, parent);
    std::vector<const sched::Config*> family;
    for (const Measured& m : state.history)
      if (m.candidate.sketch == parent.sketch && tile_of(state, m.candidate) == tile)
        family.push_back(&m.candidate.config);
    for (size_t k = 0; k < s.splits.size() && out.size() < slots; ++k) {
      if (s.splits[k].parts != 1) continue;
      const std::vector<int64_t> values = sched::split_factors(s.splits[k]);
      // The factors measured with this sketch and tile (and the parent's own).
      std::vector<bool> tried(values.size(), false);
      auto mark = [&](int64_t v) {
        auto it = std::lower_bound(values.begin(), values.end(), v);
        if (it != values.end() && *it == v) tried[static_cast<size_t>(it - values.begin())] = true;
      };
      mark(parent.config.factors[k][0]);
      for (const sched::Config* c : family) mark(c->factors[k][0]);
      std::vector<Candidate> cs;
      std::vector<size_t> at;
      for (size_t i = 0; i < values.size(); ++i) {
        if (tried[i]) continue;
        sched::Config config = parent.config;
        config.factors[k] = {values[i]};
        if (!sched::invalid_reason(s, config).empty()) continue;
        Candidate c = state.space.make(parent.sketch, std::move(config));
        if (state.measured.count(c.json) || used.count(c.json)) continue;
        cs.push_back(std::move(c));
        at.push_back(i);
      }
      if (cs.empty()) continue;
      state.space.predict(*state.estimator, cs);
      std::vector<bool> taken_here(cs.size(), false);
      while (out.size() < slots) {  // the farthest from every tried factor, then the best predicted
        size_t pick = cs.size();
        int pick_gap = -1;
        for (size_t j = 0; j < cs.size(); ++j) {
          if (taken_here[j]) continue;
          int gap = static_cast<int>(values.size());
          for (size_t i = 0; i < values.size(); ++i)
            if (tried[i]) gap = std::min(gap, std::abs(static_cast<int>(i) - static_cast<int>(at[j])));
          if (gap > pick_gap || (gap == pick_gap && cs[j].predicted < cs[pick].predicted)) {
            pick = j;
            pick_gap = gap;
          }
        }
        if (pick == cs.size()) break;
        taken_here[pick] = true;
        tried[at[pick]] = true;
        used.insert(cs[pick].json);
        out.push_back(std::move(cs[pick]));
      }
    }
  }
  return out;
}

class Blocks final : public ProposalSource {
 public:
  std::string name() const override { return "blocks"; }
  std::vector<OptionField> fields() override {
    return {{"block_slots", &slots_, nullptr, 0, 1e4,
             "per batch, the fastest programs with another factor of a one-level split (a reduction's block)"}};
  }
  std::vector<int> places_wanted() const override { return {slots_}; }
  std::vector<Candidate> propose(SourceContext& ctx, const std::vector<Candidate>& taken,
                                 const std::vector<int>& places) override {
    return block_picks(ctx.state, ctx.good, taken, static_cast<size_t>(places[0]));
  }

 private:
  int slots_ = 2;
};

}  // namespace

BASIN_REGISTER_SOURCE("blocks", 40, Blocks);

}  // namespace basin::search::detail
