// The discrete neighbourhood of the fastest programs (sources.h): one prime factor
// moved between tiling levels, or the unroll depth changed. These are steps that
// rounding a descent's point rarely takes; they are ranked with the descent's points.
#include <algorithm>

#include "search/sources/source.h"

namespace basin::search::detail {

namespace {

struct LocalMoveOptions {
  int parents = 4;
  int moves = 16;
};

void local_moves(SearchState& state, const std::vector<const Measured*>& good, const LocalMoveOptions& opt,
                 std::map<std::string, Candidate>& pool) {
  for (int i = 0; i < std::min(static_cast<int>(good.size()), opt.parents); ++i)
    for (int k = 0; k < opt.moves; ++k) {
      Candidate c;
      if (state.space.mutate(good[i]->candidate, state.rng, &c) && !state.measured.count(c.json))
        pool.emplace(c.json, std::move(c));
    }
}

// Into the ranked pool: `local_moves` mutations of each of the `local_parents` fastest
// programs.
class LocalMoves final : public ProposalSource {
 public:
  std::string name() const override { return "local_moves"; }
  std::vector<OptionField> fields() override {
    return {{"local_parents", &opt_.parents, nullptr, 0, 1e4, "the fastest programs whose mutations are ranked"},
            {"local_moves", &opt_.moves, nullptr, 0, 1e5, "mutations drawn per parent"}};
  }
  void add_to_pool(SourceContext& ctx, std::map<std::string, Candidate>& pool) override {
    local_moves(ctx.state, ctx.good, opt_, pool);
  }

 private:
  LocalMoveOptions opt_;
};

}  // namespace

BASIN_REGISTER_SOURCE("local_moves", 0, LocalMoves);

}  // namespace basin::search::detail
