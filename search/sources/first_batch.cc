// The first batch, before anything is measured (sources.h).
#include <algorithm>
#include <iterator>
#include <map>
#include <random>
#include <set>

#include "search/sources/common.h"
#include "search/sources/sources.h"

namespace basin::search::detail {

namespace {

// Per sketch, its random draws `per` given the fullest register-filling tile with the
// fewest loads (one drawn at random among those of each draw), the best predicted; with
// fill_whole, then the same among the tiles with no partial tile. In that order per
// sketch; none in `drawn`, which gains them.
std::vector<Candidate> first_fills(SearchState& state, const std::vector<std::vector<Candidate>>& per,
                                   std::set<std::string>& drawn, const FirstBatchOptions& opt, int fill_registers) {
  std::vector<Candidate> out;
  const VectorFile file = fill_file(fill_registers);
  for (const std::vector<Candidate>& draws : per)
    for (bool whole : {false, true}) {
      if (whole && !opt.whole) break;
      std::vector<Candidate> cs;
      for (const Candidate& d : draws) {
        std::vector<Candidate> full =
            state.space.filled_tiles(d, file.registers, file.bytes, /*fullest_only=*/true, whole);
        keep_leanest_fullest(state, full, file.bytes);
        if (full.empty()) continue;
        Candidate& c = full[std::uniform_int_distribution<size_t>(0, full.size() - 1)(state.rng)];
        if (!state.measured.count(c.json) && !drawn.count(c.json)) cs.push_back(std::move(c));
      }
      if (cs.empty()) continue;
      Candidate& best = best_predicted(state, cs);
      drawn.insert(best.json);
      out.push_back(std::move(best));
    }
  return out;
}

}  // namespace

// The first batch, before anything is measured: the sketches in turn (in a random
// order), each sketch's best-predicted programs among `first_draws` random ones.
// The estimator is trained on random programs and orders those of one sketch well;
// its order across sketches, and of the points a descent reaches, can be far off on
// a task (Zen 5, resnet18-c6 and -c12: the shipped ensemble sent 85 to 95% of the
// programs to the `vec=w` sketches, and its best-predicted packed programs measured
// 3 times slower than annealing's random packed ones, where both strategies' best
// programs were). So the first measurements compare every sketch on equal terms, and
// the search then follows the fastest programs.
std::vector<Candidate> first_batch(SearchState& state, int n, const FirstBatchOptions& opt, int fill_registers) {
  TaskSpace& space = state.space;
  const int n_sketches = static_cast<int>(space.sketches().size());
  std::vector<int> order(static_cast<size_t>(n_sketches));
  for (int s = 0; s < n_sketches; ++s) order[static_cast<size_t>(s)] = s;
  std::shuffle(order.begin(), order.end(), state.rng);
  // The untuned program (the default sketch's default configuration: what a network
  // compiled without records runs, on AMX tiles where the CPU has them) leads, one
  // program besides every sketch's turns, and the default sketch takes the first turn:
  // a task whose first batch is smaller than its sketches (a network's 256 first
  // programs shared by 34 tasks of a dozen sketches each) still measures the program
  // and the sketch an untuned compile trusts.
  std::vector<Candidate> all;
  std::set<std::string> drawn;
  std::vector<Candidate> out;
  if (n_sketches > 0) {
    const int d = static_cast<int>(sched::default_sketch(space.sketches()));
    const auto at = std::find(order.begin(), order.end(), d);
    std::rotate(order.begin(), at, at + 1);
    Candidate c = space.make(d, sched::default_config(space.sketches()[static_cast<size_t>(d)]));
    if (n > 0 && !state.measured.count(c.json) && drawn.insert(c.json).second) out.push_back(std::move(c));
  }
  for (int s : order) {
    int drawn_here = 0;
    for (int k = 0; k < 4 * opt.draws && drawn_here < opt.draws; ++k) {
      Candidate c = space.make(s, sched::random_config(space.sketches()[static_cast<size_t>(s)], state.rng));
      if (!state.measured.count(c.json) && drawn.insert(c.json).second) {
        all.push_back(std::move(c));
        ++drawn_here;
      }
    }
  }
  // One estimator call for every sketch's draws (a score does not depend on the
  // batch), then each sketch's best predicted last.
  space.predict(*state.estimator, all);
  std::vector<std::vector<Candidate>> per(static_cast<size_t>(n_sketches));
  for (Candidate& c : all) per[static_cast<size_t>(c.sketch)].push_back(std::move(c));
  for (std::vector<Candidate>& cs : per)
    std::stable_sort(cs.begin(), cs.end(),
                     [](const Candidate& a, const Candidate& b) { return a.predicted > b.predicted; });
  // Each sketch's first picks: its draws with a register-filling tile, the best
  // predicted (taken from the back: the fullest tile's first, then the whole one's).
  if (opt.fill) {
    const std::vector<Candidate> fills = first_fills(state, per, drawn, opt, fill_registers);
    for (auto c = fills.rbegin(); c != fills.rend(); ++c) per[static_cast<size_t>(c->sketch)].push_back(*c);
  }
  for (bool any = true; any && static_cast<int>(out.size()) < n;) {
    any = false;
    for (int s : order) {
      std::vector<Candidate>& cs = per[static_cast<size_t>(s)];
      if (cs.empty() || static_cast<int>(out.size()) >= n) continue;
      out.push_back(std::move(cs.back()));  // the best predicted left
      cs.pop_back();
      any = true;
    }
  }
  fill_random(state, n, out);
  return out;
}

}  // namespace basin::search::detail
