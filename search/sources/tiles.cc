// Other register tiles of the fastest programs (source.h).
#include <algorithm>
#include <iterator>
#include <map>
#include <random>
#include <set>

#include "search/sources/common.h"
#include "search/sources/source.h"

namespace basin::search::detail {

namespace {

// Register tiles: `slots` reshapes of the fastest programs' tiles, a follow-up of a
// tile close to the best (within `margin`, fewer than `followups` programs), and
// `sketch_slots` other sketches' fastest programs reshaped (those within
// `sketch_margin` of the best). The follow-up draws 2 x the local moves' mutations. Two
// other sketches' places: with one, resnet18-c12 held `vec=w` programs 20% behind
// annealing's best for 300 trials on seeds 1 to 4, with two on none but seed 4; C2
// and C6 were as fast or faster.
struct TileOptions {
  int slots = 2;
  int followups = 8;
  double margin = 0.03;
  int sketch_slots = 2;
  double sketch_margin = 0.5;
};

// Appends to `out`, up to `places` in all, the best-predicted reshapes of `parent`'s
// register tile into tiles not in `seen` (which gains them).
void reshape(SearchState& state, const Measured& parent, size_t places, std::set<Tile>& seen,
             const std::set<std::string>& used, std::vector<Candidate>* out) {
  std::vector<Candidate> cs;
  for (Candidate& c : state.space.reshaped_tiles(parent.candidate))
    if (!seen.count(tile_of(state, c)) && !used.count(c.json)) cs.push_back(std::move(c));
  if (cs.empty()) return;
  state.space.predict(*state.estimator, cs);
  std::sort(cs.begin(), cs.end(), [](const Candidate& a, const Candidate& b) { return a.predicted < b.predicted; });
  for (Candidate& c : cs) {
    if (out->size() >= places) break;
    if (seen.insert(tile_of(state, c)).second) out->push_back(std::move(c));
  }
}

// A sketch's own best register tile can differ from the fastest program's. On
// resnet18-c12 (seed 1) the unpacked-weight sketch was fastest with a 2x7 tile of
// output rows (2652 us) and the packed one with 1x7 (2671 us). The gradient search
// held the packed 1x7 program and measured its tiling in the unpacked sketch (3310
// us, a sibling pick) and its 2x7 reshape in the packed sketch (2829 us), but never
// both moves at once; the estimator, retrained on the new code generation too,
// ranked the unpacked 1x7 programs above the 2x7 ones. The parents of the other
// sketches' reshapes: the fastest program of each sketch but the fastest program's
// whose best is within `margin` (TileOptions::sketch_margin) of the best of all, starting with a
// sketch that changes each round (every such sketch in turn) and then the rest in
// order of their sketch.
std::vector<const Measured*> other_sketch_parents(const SearchState& state, const std::vector<const Measured*>& good,
                                                  int n, double margin) {
  std::vector<const Measured*> firsts;  // `good` is fastest first
  std::set<int> seen;
  if (!good.empty()) seen.insert(good[0]->candidate.sketch);
  for (const Measured* m : good)
    if (m->latency_us <= good[0]->latency_us * (1 + margin) && seen.insert(m->candidate.sketch).second)
      firsts.push_back(m);
  std::sort(firsts.begin(), firsts.end(),
            [](const Measured* a, const Measured* b) { return a->candidate.sketch < b->candidate.sketch; });
  if (firsts.empty()) return firsts;
  const size_t round = state.history.size() / static_cast<size_t>(std::max(n, 1));
  std::rotate(firsts.begin(), firsts.begin() + static_cast<std::ptrdiff_t>(round % firsts.size()), firsts.end());
  return firsts;
}

// Follow-ups: a tile's first program has the outer levels, reduction tile and unroll
// depth of the program it was reshaped from, which may not suit it. gemm-1024, seed 2
// (before follow-ups): the first 4x64 program (k tile 1) was 0.7% behind the 8x16 best, and
// nothing measured that tile again; annealing's 4x64 programs with a k tile of 512
// were 3% faster than both. A tile other than the fastest program's whose best is
// within `margin` of the best of all, with fewer than `followups` programs,
// gets one place (appended to `out`; false when none): the best-predicted unmeasured
// mutation of its best program that keeps the tile, the closest such tile first.
bool tile_followup(SearchState& state, const std::vector<const Measured*>& good,
                   const std::map<Tile, TileGroup>& groups, const std::set<std::string>& used, const TileOptions& opt,
                   int mutations, std::vector<Candidate>* out) {
  if (good.empty()) return false;
  const Tile top = tile_of(state, good[0]->candidate);
  std::vector<std::pair<const Tile*, const TileGroup*>> close;
  for (const auto& [tile, g] : groups)
    if (tile != top && g.best && g.count < opt.followups &&
        g.best->latency_us <= good[0]->latency_us * (1 + opt.margin))
      close.emplace_back(&tile, &g);
  std::sort(close.begin(), close.end(),
            [](const auto& a, const auto& b) { return a.second->best->latency_us < b.second->best->latency_us; });
  for (const auto& [tile, g] : close) {
    std::map<std::string, Candidate> moves;
    for (int k = 0; k < 2 * mutations; ++k) {
      Candidate c;
      if (state.space.mutate(g->best->candidate, state.rng, &c) && tile_of(state, c) == *tile &&
          !state.measured.count(c.json) && !used.count(c.json))
        moves.emplace(c.json, std::move(c));
    }
    if (moves.empty()) continue;
    std::vector<Candidate> cs;
    for (auto& [json, c] : moves) cs.push_back(std::move(c));
    out->push_back(std::move(best_predicted(state, cs)));
    return true;
  }
  return false;
}

// The register tile (the innermost factors of the multi-level splits) sets how many
// accumulators a program keeps in registers and how many loads feed them; the
// latency is far from monotone in it, and one-factor moves cross slow tiles between
// two fast ones. On gemm-1024 (seeds 1 and 2) the search stayed with an
// 8x16 tile and never measured 4x64, 4% faster, three one-factor moves away, with
// 8x32 and 4x32 between them slower than both. Each batch measures `tile_slots`
// reshapes of the fastest program's tile (TaskSpace::reshaped_tiles: one or two
// splits' innermost factors changed), the best predicted of those whose tile no
// measured program of the sketch has; the fastest program's first. A follow-up
// (tile_followup) has a place of its own besides: sharing one with the reshapes
// (a first version), gemm-1024 seed 2 measured its 4x64 tile only at trial 378, as other
// close tiles took the shared place. Not in `taken`.
// `places`: the follow-up's, the reshapes', the other sketches' (as granted).
std::vector<Candidate> tile_picks(SearchState& state, const std::vector<const Measured*>& good,
                                  const std::vector<Candidate>& taken, int n, const std::vector<int>& places_granted,
                                  const TileOptions& opt, int moves) {
  std::vector<Candidate> out;
  const size_t slots = static_cast<size_t>(places_granted[1]);
  if (slots == 0) return out;
  std::map<Tile, TileGroup> groups;  // the measured tiles
  for (const Measured& m : state.history) {
    TileGroup& g = groups[tile_of(state, m.candidate)];
    ++g.count;
    if (m.ok() && (!g.best || m.latency_us < g.best->latency_us)) g.best = &m;
  }
  std::set<Tile> seen;
  std::set<std::string> used;
  taken_tiles(state, taken, &seen, &used);
  if (places_granted[0] > 0 && tile_followup(state, good, groups, used, opt, moves, &out)) used.insert(out.back().json);
  const size_t places = out.size() + slots;  // the follow-up's place is its own
  for (size_t p = 0; p < good.size() && out.size() < places; ++p) reshape(state, *good[p], places, seen, used, &out);
  // Other sketches' fastest programs, in places of their own.
  const std::vector<const Measured*> others = other_sketch_parents(state, good, n, opt.sketch_margin);
  const size_t more = out.size() + static_cast<size_t>(places_granted[2]);
  for (size_t p = 0; p < others.size() && out.size() < more; ++p)
    reshape(state, *others[p], out.size() + 1, seen, used, &out);  // one place each
  return out;
}

class Tiles final : public ProposalSource {
 public:
  std::string name() const override { return "tiles"; }
  std::vector<OptionField> fields() override {
    return {
        {"tile_slots", &opt_.slots, nullptr, 0, 1e4, "per batch, the fastest programs with other register tiles"},
        {"tile_followups", &opt_.followups, nullptr, 0, 1e5, "programs a register tile close to the best gets"},
        {"tile_margin", nullptr, &opt_.margin, 0, 10, "close: its best within this share of the best of all"},
        {"tile_sketch_slots", &opt_.sketch_slots, nullptr, 0, 1e4,
         "per batch, another sketch's fastest program with another register tile (none when tile_slots is 0)"},
        {"tile_sketch_margin", nullptr, &opt_.sketch_margin, 0, 100,
         "... of the sketches whose best is within this share of the best of all"},
    };
  }
  // The follow-up's place, the reshapes', the other sketches'.
  std::vector<int> places_wanted() const override { return {opt_.slots > 0 ? 1 : 0, opt_.slots, opt_.sketch_slots}; }
  std::vector<Candidate> propose(SourceContext& ctx, const std::vector<Candidate>& taken,
                                 const std::vector<int>& places) override {
    return tile_picks(ctx.state, ctx.good, taken, ctx.n, places, opt_, static_cast<int>(ctx.option("local_moves")));
  }

 private:
  TileOptions opt_;
};

}  // namespace

BASIN_REGISTER_SOURCE("tiles", 50, Tiles);
}  // namespace basin::search::detail
