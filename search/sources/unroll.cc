// Other unroll depths of the fastest programs (sources.h).
#include <algorithm>
#include <iterator>
#include <map>
#include <random>
#include <set>

#include "search/sources/common.h"
#include "search/sources/source.h"

namespace basin::search::detail {

// The unroll depth: a knob of five values whose effect the estimator learns from the
// programs measured, and those are confounded with their tilings. On resnet18-c6
// (seed 1) the first batch's unroll-64 programs had slow tilings, and from the
// second batch on 90% of the programs had unroll 16, 15% slower than the best
// unroll-64 programs other runs found. Each batch measures the fastest programs'
// own configurations with `unroll_slots` other unroll depths: the nearest depths
// in the sketch's menu first, then the best predicted; the fastest program's first.
// Not in `taken`.
namespace {

std::vector<Candidate> unroll_picks(SearchState& state, const std::vector<const Measured*>& good,
                                    const std::vector<Candidate>& taken, size_t slots) {
  std::vector<Candidate> out;
  std::set<std::string> used;
  for (const Candidate& c : taken) used.insert(c.json);
  for (size_t p = 0; p < good.size() && out.size() < slots; ++p) {
    const Candidate& parent = good[p]->candidate;
    const std::vector<int64_t>& menu = state.space.sketches()[static_cast<size_t>(parent.sketch)].unroll_menu;
    const auto here = std::find(menu.begin(), menu.end(), parent.config.unroll);
    if (here == menu.end()) continue;
    std::vector<std::pair<std::ptrdiff_t, Candidate>> others;
    for (auto it = menu.begin(); it != menu.end(); ++it) {
      if (it == here) continue;
      sched::Config config = parent.config;
      config.unroll = *it;
      Candidate c = state.space.make(parent.sketch, std::move(config));
      if (!state.measured.count(c.json) && !used.count(c.json)) others.emplace_back(std::abs(it - here), std::move(c));
    }
    if (others.empty()) continue;
    std::vector<Candidate> cs;
    for (auto& [d, c] : others) cs.push_back(c);
    state.space.predict(*state.estimator, cs);
    for (size_t i = 0; i < cs.size(); ++i) others[i].second.predicted = cs[i].predicted;
    std::stable_sort(others.begin(), others.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second.predicted < b.second.predicted;
    });
    for (auto& [d, c] : others) {
      if (out.size() >= slots) break;
      used.insert(c.json);
      out.push_back(std::move(c));
    }
  }
  return out;
}

class Unroll final : public ProposalSource {
 public:
  std::string name() const override { return "unroll"; }
  std::vector<OptionField> fields() override {
    return {{"unroll_slots", &slots_, nullptr, 0, 1e4, "per batch, the fastest programs at other unroll depths"}};
  }
  std::vector<int> places_wanted() const override { return {slots_}; }
  std::vector<Candidate> propose(SourceContext& ctx, const std::vector<Candidate>& taken,
                                 const std::vector<int>& places) override {
    return unroll_picks(ctx.state, ctx.good, taken, static_cast<size_t>(places[0]));
  }

 private:
  int slots_ = 2;
};

}  // namespace

BASIN_REGISTER_SOURCE("unroll", 30, Unroll);

}  // namespace basin::search::detail
