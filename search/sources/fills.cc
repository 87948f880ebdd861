// Register-filling tiles (sources.h; docs/search.md).
#include <algorithm>
#include <iterator>
#include <map>
#include <random>
#include <set>

#include "search/sources/common.h"
#include "search/sources/source.h"

namespace basin::search::detail {

// Per batch, `fill_slots` sketches in turn (round robin over the rounds), each its
// fastest program with the fullest register-filling tile that no measured program of
// the sketch has, of those the fewest loads, the best predicted among equal ones.
// Not in `taken`.
namespace {

struct FillOptions {
  int slots = 2;
  int registers = 0;
};

std::vector<Candidate> fill_picks(SearchState& state, const std::vector<const Measured*>& good,
                                  const std::vector<Candidate>& taken, int n, size_t slots, const FillOptions& opt) {
  std::vector<Candidate> out;
  if (slots == 0) return out;
  const int n_sketches = static_cast<int>(state.space.sketches().size());
  std::vector<const Measured*> fastest(static_cast<size_t>(n_sketches), nullptr);
  for (const Measured* m : good)  // fastest first
    if (!fastest[static_cast<size_t>(m->candidate.sketch)]) fastest[static_cast<size_t>(m->candidate.sketch)] = m;
  std::set<Tile> seen;
  std::set<std::string> used;
  taken_tiles(state, taken, &seen, &used);
  const VectorFile file = fill_file(opt.registers);
  const int round = static_cast<int>(state.history.size()) / std::max(n, 1);
  for (int i = 0; i < n_sketches && out.size() < slots; ++i) {
    const Measured* parent = fastest[static_cast<size_t>((round * static_cast<int>(slots) + i) % n_sketches)];
    if (!parent) continue;
    std::vector<Candidate> cs;
    for (Candidate& c : state.space.filled_tiles(parent->candidate, file.registers, file.bytes))
      if (!seen.count(tile_of(state, c)) && !used.count(c.json)) cs.push_back(std::move(c));
    if (cs.empty()) continue;
    keep_leanest_fullest(state, cs, file.bytes);
    Candidate& best = best_predicted(state, cs);
    seen.insert(tile_of(state, best));
    used.insert(best.json);
    out.push_back(std::move(best));
  }
  return out;
}

// Register-filling tiles: `fill_slots` sketches in turn, each its fastest program with
// a register tile that fills the vector registers; `fill_registers` it may take (0: the
// host's file, the operand values it keeps live counted; the first batch's filling tiles too).
class Fills final : public ProposalSource {
 public:
  std::string name() const override { return "fills"; }
  std::vector<OptionField> fields() override {
    return {{"fill_slots", &opt_.slots, nullptr, 0, 1e4,
             "per batch, a sketch's fastest program with a register tile filling the vector registers (sketches in "
             "turn)"},
            {"fill_registers", &opt_.registers, nullptr, 0, 1024,
             "vector registers a register-filling tile may take with the operands it keeps live (0: the host's file)"}};
  }
  std::vector<int> places_wanted() const override { return {opt_.slots}; }
  std::vector<Candidate> propose(SourceContext& ctx, const std::vector<Candidate>& taken,
                                 const std::vector<int>& places) override {
    return fill_picks(ctx.state, ctx.good, taken, ctx.n, static_cast<size_t>(places[0]), opt_);
  }

 private:
  FillOptions opt_;
};

}  // namespace

BASIN_REGISTER_SOURCE("fills", 60, Fills);

}  // namespace basin::search::detail
