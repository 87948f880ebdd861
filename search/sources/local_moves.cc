// The discrete neighbourhood of the fastest programs (sources.h): one prime factor
// moved between tiling levels, or the unroll depth changed. These are steps that
// rounding a descent's point rarely takes; they are ranked with the descent's points.
#include <algorithm>

#include "search/sources/sources.h"

namespace basin::search::detail {

void local_moves(SearchState& state, const std::vector<const Measured*>& good, const LocalMoveOptions& opt,
                 std::map<std::string, Candidate>& pool) {
  for (int i = 0; i < std::min(static_cast<int>(good.size()), opt.parents); ++i)
    for (int k = 0; k < opt.moves; ++k) {
      Candidate c;
      if (state.space.mutate(good[i]->candidate, state.rng, &c) && !state.measured.count(c.json))
        pool.emplace(c.json, std::move(c));
    }
}

}  // namespace basin::search::detail
