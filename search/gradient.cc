// The gradient search (DESIGN.md, "Proposal"; the Felix paper). The first batch, with
// nothing measured, gives every sketch the same number of programs, each sketch's
// best predicted among random ones (first_batch). Then: seeds in each sketch's
// polytope (uniform samples, and points of the best measured programs, overall and of
// each sketch, with a little noise), Adam on the exponents minimizing the
// differentiable estimator's score of the relaxed features plus the constraint penalty
// (its gradient scaled against the score's), a projection back into the polytope after
// each step; every visited point is rounded to a valid configuration, measured and
// repeated programs are dropped, the rest are ranked by the estimator on their own
// exact features (a prediction stays with its configuration) together with mutations
// of the fastest measured programs, and the best are measured with a few random ones,
// the best-predicted program of two sketches in turn, the fastest programs' tilings in
// two sibling sketches, the fastest programs with two other unroll depths, with two
// other factors of a one-level split (a reduction's block) and with two other
// register tiles, another sketch's fastest program with another register tile
// (the sketches close to the best in turn), and a follow-up of a register tile close
// to the best, and two sketches' fastest programs with a register tile that fills the
// vector registers (in the first batch, one such program per sketch); the sketches
// whose measured programs are all far slower than the best share two ranked places
// per batch.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <set>

#include "core/util/error.h"
#include "core/util/host.h"
#include "core/util/parallel.h"
#include "relax/relaxed_sketch.h"
#include "relax/torch_bridge.h"
#include "search/strategy.h"

namespace basin::search::detail {

namespace {

struct GradientOptions {
  int first_draws = 32;  // the first batch: per sketch, the best predicted of this many random programs
  int seeds = 32;
  int steps = 32;
  double learning_rate = 0.22;
  double penalty_weight = 1.0;
  double best_share = 0.25;  // seeds started at the best measured programs
  double seed_noise = 0.5;   // their Gaussian noise, in exponent units
  double epsilon = 0.1;
  int sketch_slots = 2;       // per batch, the best-predicted program of sketches in turn
  int local_parents = 4;      // the fastest measured programs whose mutations join the pool
  int local_moves = 16;       // mutations drawn per parent
  int sibling_slots = 2;      // per batch, the fastest programs' tilings in other sketches
  int sibling_parents = 4;    // ... of the fastest this many programs, in order
  int unroll_slots = 2;       // per batch, the fastest programs with another unroll depth
  int block_slots = 2;        // per batch, the fastest programs with another one-level split factor
  int tile_slots = 2;         // per batch, the fastest programs with another register tile
  int tile_followups = 8;     // programs a register tile close to the best gets (one a batch)
  double tile_margin = 0.03;  // ... close: its best within this share of the best of all
  // Per batch, other sketches' fastest programs with another register tile, one place
  // each (like the follow-up, none when tile_slots is 0: that turns every register-tile
  // place off). Two since session 47: with one, resnet18-c12 held `vec=w` programs 20%
  // behind annealing's best for 300 trials on seeds 1 to 4, and with two it left them on
  // seeds 1 to 3; C2 and C6 were as fast or faster (docs/PERFORMANCE.md@6bf7154).
  int tile_sketch_slots = 2;
  double tile_sketch_margin = 0.5;  // its sketches: those whose best is within this share of the best
  // Every visited point also rounded to its nearest tilings (KnobSpace::round_to_tilings):
  // rounding each prime's exponent alone turns a tile of 2^2 * 7^0.29 = 7 into 4, and on
  // resnet18-c10 the gradient search measured 26 programs with the whole 7-wide row in
  // the register tile where annealing measured 405, and annealing's were the fastest
  // (session 41; docs/PERFORMANCE.md@6bf7154).
  int nearest_tilings = 1;
  // Register-filling tiles (docs/search.md): per batch, the fastest program of
  // `fill_slots` sketches in turn with a register tile of accumulators that fills the
  // vector registers; with `fill_first`, every sketch's first program in the first
  // batch is the best predicted of its random draws given such a tile. fill_registers:
  // the registers the tile may take (0: the host's vector registers less 4).
  int fill_slots = 2;
  int fill_first = 1;
  int fill_registers = 0;
  // With fill_first, every sketch's second program in the first batch has the fullest
  // register-filling tile with no partial tile (factors that divide their extents):
  // on AVX2 (session 56, resnet18-c10 and -c12) the fastest programs' 1 x 7 tiles
  // were never the fullest, and guarded tiles of 12 ran 10 to 20% slower.
  int fill_whole = 1;
  // Sketches measured slow: see cap_losing_sketches (negative places turn it off).
  SketchCap cap;
};

std::vector<OptionField> fields(GradientOptions& o) {
  return {
      {"first_draws", &o.first_draws, nullptr, 0, 1e5,
       "the first batch: per sketch, the best predicted of this many random programs (0: a descent instead)"},
      {"seeds", &o.seeds, nullptr, 0, 1e5, "descent seeds per batch"},
      {"steps", &o.steps, nullptr, 0, 1e4, "Adam steps per descent"},
      {"learning_rate", nullptr, &o.learning_rate, 1e-6, 100, "Adam's step, in exponent units"},
      {"penalty_weight", nullptr, &o.penalty_weight, 0, 1e6, "the constraint penalty's gradient against the score's"},
      {"best_share", nullptr, &o.best_share, 0, 1, "share of the seeds started at the best measured programs"},
      {"seed_noise", nullptr, &o.seed_noise, 0, 100, "their Gaussian noise, in exponent units"},
      {"epsilon", nullptr, &o.epsilon, 0, 1, "share of each batch that is random"},
      {"sketch_slots", &o.sketch_slots, nullptr, 0, 1e4, "per batch, the best-predicted program of sketches in turn"},
      {"local_parents", &o.local_parents, nullptr, 0, 1e4, "the fastest programs whose mutations are ranked"},
      {"local_moves", &o.local_moves, nullptr, 0, 1e5, "mutations drawn per parent"},
      {"sibling_slots", &o.sibling_slots, nullptr, 0, 1e4,
       "per batch, the fastest programs' tilings in other sketches"},
      {"sibling_parents", &o.sibling_parents, nullptr, 0, 1e4, "the fastest programs the sibling slots draw on"},
      {"unroll_slots", &o.unroll_slots, nullptr, 0, 1e4, "per batch, the fastest programs at other unroll depths"},
      {"block_slots", &o.block_slots, nullptr, 0, 1e4,
       "per batch, the fastest programs with another factor of a one-level split (a reduction's block)"},
      {"tile_slots", &o.tile_slots, nullptr, 0, 1e4, "per batch, the fastest programs with other register tiles"},
      {"tile_followups", &o.tile_followups, nullptr, 0, 1e5, "programs a register tile close to the best gets"},
      {"tile_margin", nullptr, &o.tile_margin, 0, 10, "close: its best within this share of the best of all"},
      {"tile_sketch_slots", &o.tile_sketch_slots, nullptr, 0, 1e4,
       "per batch, another sketch's fastest program with another register tile (none when tile_slots is 0)"},
      {"tile_sketch_margin", nullptr, &o.tile_sketch_margin, 0, 100,
       "... of the sketches whose best is within this share of the best of all"},
      {"nearest_tilings", &o.nearest_tilings, nullptr, 0, 1,
       "1: every visited point also rounded to the tilings nearest its continuous tile sizes"},
      {"fill_slots", &o.fill_slots, nullptr, 0, 1e4,
       "per batch, a sketch's fastest program with a register tile filling the vector registers (sketches in turn)"},
      {"fill_first", &o.fill_first, nullptr, 0, 1,
       "1: each sketch's first program in the first batch has a register-filling tile"},
      {"fill_registers", &o.fill_registers, nullptr, 0, 1024,
       "vector registers a register-filling tile may take (0: the host's, less 4)"},
      {"fill_whole", &o.fill_whole, nullptr, 0, 1,
       "1 (with fill_first): each sketch's second program in the first batch has the fullest filling tile "
       "with no partial tile"},
      {"cap_places", &o.cap.places, nullptr, -1, 1e4,
       "ranked places per batch shared by the sketches measured slow (-1: no cap)"},
      {"cap_evidence", &o.cap.evidence, nullptr, 1, 1e5, "programs a sketch needs measured before it can be capped"},
      {"cap_margin", nullptr, &o.cap.margin, 0, 100,
       "how much slower than the best a capped sketch's best is, at first"},
      {"cap_margin_floor", nullptr, &o.cap.margin_floor, 0, 100, "the margin's floor as the sketch's programs grow"},
  };
}

// Back into the polytope: into the box, then each violated row of A x <= b (whose
// coefficients are non-negative) scaled down onto its bound.
void project(const relax::KnobSpace& space, double* x) {
  const int nv = space.num_vars();
  for (int v = 0; v < nv; ++v) x[v] = std::clamp(x[v], 0.0, space.upper()(v));
  const Eigen::MatrixXd& A = space.A();
  for (int r = 0; r < A.rows(); ++r) {
    double ax = 0;
    for (int v = 0; v < nv; ++v) ax += A(r, v) * x[v];
    if (ax <= space.b()(r) || ax <= 0) continue;
    const double f = space.b()(r) / ax;
    for (int v = 0; v < nv; ++v)
      if (A(r, v) != 0) x[v] *= f;
  }
}

class Gradient final : public Strategy {
 public:
  explicit Gradient(const StrategyOptions& set) : name_(spec_of("gradient", set)) {
    set_options("gradient", fields(opt_), set);
  }
  std::string name() const override { return name_; }
  std::vector<StrategyOption> options() const override {
    GradientOptions o = opt_;
    return describe_options(fields(o));
  }
  bool needs_gradients() const override { return true; }

  std::vector<Candidate> propose(SearchState& state, int n) override {
    if (!guided(state)) return random_batch(state, n);
    auto* est = dynamic_cast<models::DifferentiableEstimator*>(state.estimator);
    if (!est)
      throw Error("the gradient strategy needs a differentiable estimator (mlp or a TorchScript file), not " +
                  state.estimator->kind());
    // Every sketch's evaluators at once, on the helper threads: the first batch ranks
    // every sketch's programs, and the descents start from every sketch.
    state.space.build_evaluators(/*relaxed=*/true);
    if (state.history.empty() && opt_.first_draws > 0) return first_batch(state, n);
    TaskSpace& space = state.space;
    std::mt19937_64& rng = state.rng;
    const int n_sketches = static_cast<int>(space.sketches().size());

    // Seeds, per sketch: the best measured programs' points with noise, then uniform.
    std::vector<std::vector<Eigen::VectorXd>> seeds(n_sketches);
    std::vector<const Measured*> good;
    for (const Measured& m : state.history)
      if (m.ok()) good.push_back(&m);
    std::sort(good.begin(), good.end(),
              [](const Measured* a, const Measured* b) { return a->latency_us < b->latency_us; });
    const int n_best = std::min(static_cast<int>(good.size()), static_cast<int>(opt_.best_share * opt_.seeds));
    std::normal_distribution<double> noise(0, opt_.seed_noise);
    for (const Measured* m : best_seeds(good, n_best)) {
      const Candidate& c = m->candidate;
      const relax::KnobSpace& ks = space.relaxed(c.sketch).space();
      Eigen::VectorXd x = ks.point_of(c.config);
      for (int v = 0; v < x.size(); ++v) x(v) += noise(rng);
      project(ks, x.data());
      seeds[c.sketch].push_back(x);
    }
    std::vector<int> uniform(n_sketches, 0);
    for (int i = n_best; i < opt_.seeds; ++i) ++uniform[std::uniform_int_distribution<int>(0, n_sketches - 1)(rng)];
    for (int s = 0; s < n_sketches; ++s)
      if (uniform[s] > 0)
        for (Eigen::VectorXd& x : space.relaxed(s).space().sample(uniform[s], rng, 20, 5))
          seeds[s].push_back(std::move(x));

    std::map<std::string, Candidate> visited;
    descend(space, seeds, *est, state, visited);
    // The discrete neighbourhood of the fastest programs (one prime factor moved between
    // tiling levels, or the unroll depth changed): steps that rounding a descent's point
    // rarely takes, ranked with the rest.
    for (int i = 0; i < std::min(static_cast<int>(good.size()), opt_.local_parents); ++i)
      for (int k = 0; k < opt_.local_moves; ++k) {
        Candidate c;
        if (space.mutate(good[i]->candidate, rng, &c) && !state.measured.count(c.json))
          visited.emplace(c.json, std::move(c));
      }

    std::vector<Candidate> ranked;
    for (auto& [json, c] : visited) ranked.push_back(std::move(c));
    space.predict(*state.estimator, ranked);
    std::vector<Candidate> explore = sketch_picks(state, ranked, n);
    std::vector<Candidate> siblings = sibling_picks(state, good, explore, n);
    explore.insert(explore.begin(), std::make_move_iterator(siblings.begin()), std::make_move_iterator(siblings.end()));
    std::vector<Candidate> unrolls = unroll_picks(state, good, explore, n);
    explore.insert(explore.begin(), std::make_move_iterator(unrolls.begin()), std::make_move_iterator(unrolls.end()));
    std::vector<Candidate> blocks = block_picks(state, good, explore, n);
    explore.insert(explore.begin(), std::make_move_iterator(blocks.begin()), std::make_move_iterator(blocks.end()));
    std::vector<Candidate> tiles = tile_picks(state, good, explore, n);
    explore.insert(explore.begin(), std::make_move_iterator(tiles.begin()), std::make_move_iterator(tiles.end()));
    std::vector<Candidate> fills = fill_picks(state, good, explore, n);
    explore.insert(explore.begin(), std::make_move_iterator(fills.begin()), std::make_move_iterator(fills.end()));
    cap_losing_sketches(state, ranked);
    std::vector<Candidate> out =
        select_batch(state, std::move(ranked), n - static_cast<int>(explore.size()), opt_.epsilon, explore);
    for (Candidate& c : explore) out.push_back(std::move(c));
    return out;
  }

 private:
  // The first batch, before anything is measured: the sketches in turn (in a random
  // order), each sketch's best-predicted programs among `first_draws` random ones.
  // The estimator is trained on random programs and orders those of one sketch well;
  // its order across sketches, and of the points a descent reaches, can be far off on
  // a task (Zen 5, resnet18-c6 and -c12: the shipped ensemble sent 85 to 95% of the
  // programs to the `vec=w` sketches, and its best-predicted packed programs measured
  // 3 times slower than annealing's random packed ones, where both strategies' best
  // programs were). So the first measurements compare every sketch on equal terms, and
  // the search then follows the fastest programs.
  std::vector<Candidate> first_batch(SearchState& state, int n) const {
    TaskSpace& space = state.space;
    const int n_sketches = static_cast<int>(space.sketches().size());
    std::vector<int> order(static_cast<size_t>(n_sketches));
    for (int s = 0; s < n_sketches; ++s) order[static_cast<size_t>(s)] = s;
    std::shuffle(order.begin(), order.end(), state.rng);
    std::vector<Candidate> all;
    std::set<std::string> drawn;
    for (int s : order) {
      int drawn_here = 0;
      for (int k = 0; k < 4 * opt_.first_draws && drawn_here < opt_.first_draws; ++k) {
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
    if (opt_.fill_first) {
      const std::vector<Candidate> fills = first_fills(state, per, drawn);
      for (auto c = fills.rbegin(); c != fills.rend(); ++c) per[static_cast<size_t>(c->sketch)].push_back(*c);
    }
    std::vector<Candidate> out;
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

  // The places a batch of n gives a kind of pick that asks for `want`: at most a
  // quarter of the batch each.
  static size_t slot_count(int want, int n) { return static_cast<size_t>(std::max(0, std::min(want, n / 4))); }

  // The best predicted of `cs` (not empty), whose predictions it fills.
  static Candidate& best_predicted(SearchState& state, std::vector<Candidate>& cs) {
    state.space.predict(*state.estimator, cs);
    return *std::min_element(cs.begin(), cs.end(),
                             [](const Candidate& a, const Candidate& b) { return a.predicted < b.predicted; });
  }

  // The register tile holds the accumulators: one that fills the vector registers
  // loads each input value once for the most arithmetic, the micro-kernel shape of BLIS
  // (on resnet18-c12 and -c9, Zen 4, session 54: 28 of 32 AVX-512 registers, in an
  // unpacked sketch). A sketch's random programs mostly have small tiles, so a sketch
  // that is fastest with a full one can measure among the slowest at first: on C12
  // the best family's random programs were, the estimator ranked its fast programs at
  // chance, and 2 of 8 gradient runs (no annealing run) found it, the register tile
  // growing a reshape at a time (7 accumulators, 3861 us; 14, 2687; 28, 2297).
  // This host's vector width, and the registers a filling tile may take: the register
  // file less the relaxation's reserve for operands (relax::CpuTarget, the same file
  // its register-tile penalty counts).
  VectorFile fill_file() const {
    const relax::CpuTarget t = relax::CpuTarget::host();
    return {opt_.fill_registers > 0 ? opt_.fill_registers : t.vector_registers - t.reserved_registers, t.vector_bytes};
  }
  // Keeps the first of `cs` (filled tiles, fullest first and of those the fewest loads
  // first) and those as full with as few loads.
  static void keep_leanest_fullest(const SearchState& state, std::vector<Candidate>& cs, int vector_bytes) {
    if (cs.empty()) return;
    const TaskSpace& space = state.space;
    const int64_t registers = space.tile_registers(cs[0], vector_bytes), loads = space.tile_loads(cs[0], vector_bytes);
    cs.erase(std::remove_if(cs.begin(), cs.end(),
                            [&](const Candidate& c) {
                              return space.tile_registers(c, vector_bytes) != registers ||
                                     space.tile_loads(c, vector_bytes) != loads;
                            }),
             cs.end());
  }
  // Per sketch, its random draws `per` given the fullest register-filling tile with the
  // fewest loads (one drawn at random among those of each draw), the best predicted; with
  // fill_whole, then the same among the tiles with no partial tile. In that order per
  // sketch; none in `drawn`, which gains them.
  std::vector<Candidate> first_fills(SearchState& state, const std::vector<std::vector<Candidate>>& per,
                                     std::set<std::string>& drawn) const {
    std::vector<Candidate> out;
    const VectorFile file = fill_file();
    for (const std::vector<Candidate>& draws : per)
      for (bool whole : {false, true}) {
        if (whole && !opt_.fill_whole) break;
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

  // Per batch, `fill_slots` sketches in turn (round robin over the rounds), each its
  // fastest program with the fullest register-filling tile that no measured program of
  // the sketch has, of those the fewest loads, the best predicted among equal ones.
  // Not in `taken`.
  std::vector<Candidate> fill_picks(SearchState& state, const std::vector<const Measured*>& good,
                                    const std::vector<Candidate>& taken, int n) const {
    std::vector<Candidate> out;
    const size_t slots = slot_count(opt_.fill_slots, n);
    if (slots == 0) return out;
    const int n_sketches = static_cast<int>(state.space.sketches().size());
    std::vector<const Measured*> fastest(static_cast<size_t>(n_sketches), nullptr);
    for (const Measured* m : good)  // fastest first
      if (!fastest[static_cast<size_t>(m->candidate.sketch)]) fastest[static_cast<size_t>(m->candidate.sketch)] = m;
    std::set<Tile> seen;
    std::set<std::string> used;
    taken_tiles(state, taken, &seen, &used);
    const VectorFile file = fill_file();
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

  // The seeds' starting programs among the measured ones (fastest first): half are the
  // fastest programs, the rest the fastest of each other sketch in the order of their
  // best, so that a sketch the estimator ranks second keeps being refined.
  static std::vector<const Measured*> best_seeds(const std::vector<const Measured*>& good, int n) {
    const size_t n_global = std::min(good.size(), static_cast<size_t>(n + 1) / 2);
    std::vector<const Measured*> out(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n_global));
    std::vector<bool> used(good.size(), false);
    std::fill(used.begin(), used.begin() + static_cast<std::ptrdiff_t>(n_global), true);
    // The first (fastest) program of each sketch but the fastest one's.
    std::set<int> seen;
    for (size_t i = 0; i < good.size() && static_cast<int>(out.size()) < n; ++i)
      if (seen.insert(good[i]->candidate.sketch).second && i > 0 && !used[i]) {
        out.push_back(good[i]);
        used[i] = true;
      }
    for (size_t i = 0; i < good.size() && static_cast<int>(out.size()) < n; ++i)
      if (!used[i]) out.push_back(good[i]);
    return out;
  }

  // Sketch exploration: the estimator orders programs of one sketch better than it
  // orders sketches, and a sketch whose random programs were slow may hold the task's
  // best (resnet18-c12: the packed-weight sketches). Each batch measures the
  // best-predicted program of `sketch_slots` sketches in turn (round robin over the
  // rounds, so every sketch is revisited), taken out of `ranked` (unmeasured programs).
  std::vector<Candidate> sketch_picks(const SearchState& state, std::vector<Candidate>& ranked, int n) const {
    const int n_sketches = static_cast<int>(state.space.sketches().size());
    const int slots = std::min({opt_.sketch_slots, n_sketches - 1, n / 4});
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

  // Sibling sketches: a task's anchor sketches share their splits and differ in the
  // vector axis, packing, accumulator level and producer placement, and the estimator
  // orders programs of one sketch better than it orders sketches. On resnet18-c2, -c6
  // and -c9 (session 24) the sketch of the final best was a sibling of the one the
  // search settled on first (another accumulator level or producer placement), and it
  // took 150 to 250 trials to move there. Each batch measures the fastest programs'
  // own tilings in `sibling_slots` other sketches: the nearest sketches first
  // (TaskSpace::sketch_distance), then the best predicted; the fastest program's
  // siblings first, the next program's once those are all measured. Not in `taken`.
  std::vector<Candidate> sibling_picks(SearchState& state, const std::vector<const Measured*>& good,
                                       const std::vector<Candidate>& taken, int n) const {
    std::vector<Candidate> out;
    const size_t slots = slot_count(opt_.sibling_slots, n);
    std::set<std::string> used;
    for (const Candidate& c : taken) used.insert(c.json);
    const int n_sketches = static_cast<int>(state.space.sketches().size());
    const size_t parents = std::min(good.size(), static_cast<size_t>(std::max(opt_.sibling_parents, 0)));
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

  // The unroll depth: a knob of five values whose effect the estimator learns from the
  // programs measured, and those are confounded with their tilings. On resnet18-c6
  // (seed 1) the first batch's unroll-64 programs had slow tilings, and from the
  // second batch on 90% of the programs had unroll 16, 15% slower than the best
  // unroll-64 programs other runs found. Each batch measures the fastest programs'
  // own configurations with `unroll_slots` other unroll depths: the nearest depths
  // in the sketch's menu first, then the best predicted; the fastest program's first.
  // Not in `taken`.
  std::vector<Candidate> unroll_picks(SearchState& state, const std::vector<const Measured*>& good,
                                      const std::vector<Candidate>& taken, int n) const {
    std::vector<Candidate> out;
    const size_t slots = slot_count(opt_.unroll_slots, n);
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
        if (!state.measured.count(c.json) && !used.count(c.json))
          others.emplace_back(std::abs(it - here), std::move(c));
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

  using Tile = std::pair<int, std::vector<int64_t>>;  // a sketch and a register tile
  struct TileGroup {
    int count = 0;                   // measured programs with the tile
    const Measured* best = nullptr;  // the fastest of them
  };
  static Tile tile_of(const SearchState& state, const Candidate& c) { return {c.sketch, state.space.register_tile(c)}; }
  // Into `seen` the tiles of the measured programs and of `taken`, into `used` the
  // programs of `taken`.
  static void taken_tiles(const SearchState& state, const std::vector<Candidate>& taken, std::set<Tile>* seen,
                          std::set<std::string>* used) {
    for (const Measured& m : state.history) seen->insert(tile_of(state, m.candidate));
    for (const Candidate& c : taken) {
      seen->insert(tile_of(state, c));
      used->insert(c.json);
    }
  }

  // One-level splits (a reduction's block: k of a GEMM, rc of a convolution): the
  // estimator's preference among their factors comes from the machines it was trained
  // on. On gemm-1024 (session 49, an Intel host) the gradient search measured 441 of
  // its 8x32-tile programs with k blocks of 256 to 1024 and none below 16, while
  // annealing's best, 11% faster, had a k block of 16; on resnet18-c2 its programs had
  // rc blocks of 8 to 64 and annealing's best 2. Each batch measures `block_slots`
  // programs that are the fastest program's configuration with another factor of one
  // such split: the factor farthest (in the split's sorted factors) from every factor
  // measured with that sketch and register tile, so that a few probes span the range;
  // the best predicted among equals; the fastest program's first. Not in `taken`.
  std::vector<Candidate> block_picks(SearchState& state, const std::vector<const Measured*>& good,
                                     const std::vector<Candidate>& taken, int n) const {
    std::vector<Candidate> out;
    const size_t slots = slot_count(opt_.block_slots, n);
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

  // The register tile (the innermost factors of the multi-level splits) sets how many
  // accumulators a program keeps in registers and how many loads feed them; the
  // latency is far from monotone in it, and one-factor moves cross slow tiles between
  // two fast ones. On gemm-1024 (seeds 1 and 2, session 27) the search stayed with an
  // 8x16 tile and never measured 4x64, 4% faster, three one-factor moves away, with
  // 8x32 and 4x32 between them slower than both. Each batch measures `tile_slots`
  // reshapes of the fastest program's tile (TaskSpace::reshaped_tiles: one or two
  // splits' innermost factors changed), the best predicted of those whose tile no
  // measured program of the sketch has; the fastest program's first. A follow-up
  // (tile_followup) has a place of its own besides: sharing one with the reshapes
  // (session 28), gemm-1024 seed 2 measured its 4x64 tile only at trial 378, as other
  // close tiles took the shared place. Not in `taken`.
  std::vector<Candidate> tile_picks(SearchState& state, const std::vector<const Measured*>& good,
                                    const std::vector<Candidate>& taken, int n) const {
    std::vector<Candidate> out;
    const size_t slots = slot_count(opt_.tile_slots, n);
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
    if (tile_followup(state, good, groups, used, &out)) used.insert(out.back().json);
    const size_t places = out.size() + slots;  // the follow-up's place is its own
    for (size_t p = 0; p < good.size() && out.size() < places; ++p) reshape(state, *good[p], places, seen, used, &out);
    // Other sketches' fastest programs, in places of their own.
    const std::vector<const Measured*> others = other_sketch_parents(state, good, n);
    const size_t more = out.size() + slot_count(opt_.tile_sketch_slots, n);
    for (size_t p = 0; p < others.size() && out.size() < more; ++p)
      reshape(state, *others[p], out.size() + 1, seen, used, &out);  // one place each
    return out;
  }

  // Appends to `out`, up to `places` in all, the best-predicted reshapes of `parent`'s
  // register tile into tiles not in `seen` (which gains them).
  void reshape(SearchState& state, const Measured& parent, size_t places, std::set<Tile>& seen,
               const std::set<std::string>& used, std::vector<Candidate>* out) const {
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
  // resnet18-c12 (session 43's run, seed 1) the unpacked-weight sketch was fastest with a 2x7 tile of
  // output rows (2652 us) and the packed one with 1x7 (2671 us). The gradient search
  // held the packed 1x7 program and measured its tiling in the unpacked sketch (3310
  // us, a sibling pick) and its 2x7 reshape in the packed sketch (2829 us), but never
  // both moves at once; the estimator, retrained on the new code generation too,
  // ranked the unpacked 1x7 programs above the 2x7 ones. The parents of the other
  // sketches' reshapes: the fastest program of each sketch but the fastest program's
  // whose best is within `tile_sketch_margin` of the best of all, starting with a
  // sketch that changes each round (every such sketch in turn) and then the rest in
  // order of their sketch.
  std::vector<const Measured*> other_sketch_parents(const SearchState& state, const std::vector<const Measured*>& good,
                                                    int n) const {
    std::vector<const Measured*> firsts;  // `good` is fastest first
    std::set<int> seen;
    if (!good.empty()) seen.insert(good[0]->candidate.sketch);
    for (const Measured* m : good)
      if (m->latency_us <= good[0]->latency_us * (1 + opt_.tile_sketch_margin) &&
          seen.insert(m->candidate.sketch).second)
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
  // (session 28): the first 4x64 program (k tile 1) was 0.7% behind the 8x16 best, and
  // nothing measured that tile again; annealing's 4x64 programs with a k tile of 512
  // were 3% faster than both. A tile other than the fastest program's whose best is
  // within `tile_margin` of the best of all, with fewer than `tile_followups` programs,
  // gets one place (appended to `out`; false when none): the best-predicted unmeasured
  // mutation of its best program that keeps the tile, the closest such tile first.
  bool tile_followup(SearchState& state, const std::vector<const Measured*>& good,
                     const std::map<Tile, TileGroup>& groups, const std::set<std::string>& used,
                     std::vector<Candidate>* out) const {
    if (good.empty()) return false;
    const Tile top = tile_of(state, good[0]->candidate);
    std::vector<std::pair<const Tile*, const TileGroup*>> close;
    for (const auto& [tile, g] : groups)
      if (tile != top && g.best && g.count < opt_.tile_followups &&
          g.best->latency_us <= good[0]->latency_us * (1 + opt_.tile_margin))
        close.emplace_back(&tile, &g);
    std::sort(close.begin(), close.end(),
              [](const auto& a, const auto& b) { return a.second->best->latency_us < b.second->best->latency_us; });
    for (const auto& [tile, g] : close) {
      std::map<std::string, Candidate> moves;
      for (int k = 0; k < 2 * opt_.local_moves; ++k) {
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

  // The estimator's order across sketches can stay wrong for hundreds of trials after
  // the measurements have settled it (resnet18-c12: 300 of the first 600 trials went
  // to `vec=w` sketches whose best was 40% slower than the packed ones'). A sketch
  // with at least `cap.evidence` measured programs whose best is more than a margin
  // slower than the best of all is capped: the capped sketches share `cap.places`
  // places, their best-predicted candidates, in the ranked part of the batch. The
  // margin is `cap.margin` at `cap.evidence` programs and shrinks in proportion as a
  // sketch's programs grow, to `cap.margin_floor`: the more a sketch has been
  // measured, the less doubt its best leaves (session 25: on C12 four `vec=w`
  // sketches 12% behind the packed ones, with 60 to 170 programs each, took a quarter
  // of the trials after 300, two capped places each). The sketch slots still revisit
  // a capped sketch in turn, so one whose new program is fast loses its cap.
  void cap_losing_sketches(const SearchState& state, std::vector<Candidate>& ranked) const {
    if (opt_.cap.places < 0) return;
    cap_ranked(ranked, capped_sketches(state.history, state.space.sketches().size(), opt_.cap), opt_.cap.places);
  }

  // One sketch's seeds under descent.
  struct Group {
    int sketch;
    relax::RelaxedSketch* rs;
    int batch, vars;
    std::vector<double> x, m, v;
    // A step's: the features and constraints at x, and the gradients of the score and
    // of the penalty (the latter only when `violated`).
    std::vector<double> f, c, grad_cost, grad_penalty;
    bool violated = false;
  };

  // Whether some seed's penalty (its squared violations, summed) is positive. None when
  // a penalty is NaN: as autograd's maximum over the seeds was, NaN.
  static bool violates(const std::vector<double>& c, int batch) {
    if (c.empty()) return false;
    const size_t nc = c.size() / static_cast<size_t>(batch);
    bool any = false;
    for (int b = 0; b < batch; ++b) {
      double p = 0;
      for (size_t i = 0; i < nc; ++i) {
        const double r = std::max(c[b * nc + i], 0.0);
        p += std::isnan(c[b * nc + i]) ? c[b * nc + i] : r * r;
      }
      if (std::isnan(p)) return false;
      any = any || p > 0;
    }
    return any;
  }

  // Adam from the seeds of every sketch at once (one estimator call per step over all
  // of them, stores padded and masked), every visited point rounded into `visited`.
  void descend(TaskSpace& space, const std::vector<std::vector<Eigen::VectorXd>>& seeds,
               models::DifferentiableEstimator& est, SearchState& state, std::map<std::string, Candidate>& visited) {
    std::vector<Group> groups;
    int stores = 0;
    for (size_t s = 0; s < seeds.size(); ++s) {
      if (seeds[s].empty()) continue;
      Group g;
      g.sketch = static_cast<int>(s);
      g.rs = &space.relaxed(g.sketch);
      g.batch = static_cast<int>(seeds[s].size());
      g.vars = g.rs->num_vars();
      for (const Eigen::VectorXd& p : seeds[s]) g.x.insert(g.x.end(), p.data(), p.data() + g.vars);
      g.m.assign(g.x.size(), 0.0);
      g.v.assign(g.x.size(), 0.0);
      stores = std::max(stores, g.rs->num_stores());
      groups.push_back(std::move(g));
    }
    std::vector<torch::Tensor> masks;
    for (const Group& g : groups) {
      torch::Tensor mk = torch::zeros({g.batch, stores}, torch::kFloat32);
      mk.narrow(1, 0, g.rs->num_stores()).fill_(1);
      masks.push_back(mk);
    }
    const torch::Tensor mask = torch::cat(masks, 0);
    auto round_all = [&] {
      for (const Group& g : groups)
        for (int b = 0; b < g.batch; ++b) {
          Eigen::Map<const Eigen::VectorXd> p(g.x.data() + static_cast<size_t>(b) * g.vars, g.vars);
          auto visit = [&](const sched::Config& config) {
            Candidate c = space.make(g.sketch, config);
            if (!state.measured.count(c.json)) visited.emplace(c.json, std::move(c));
          };
          visit(g.rs->space().round(p));
          if (opt_.nearest_tilings) visit(g.rs->space().round_to_tilings(p));
        }
    };
    round_all();
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    const int nf = groups.empty() ? 0 : groups[0].rs->num_features();  // one feature set per task
    const int rows = static_cast<int>(mask.size(0));
    std::vector<int> first_row(groups.size(), 0);  // each group's first row in the estimator's batch
    for (size_t k = 1; k < groups.size(); ++k) first_row[k] = first_row[k - 1] + groups[k - 1].batch;
    for (int step = 1; step <= opt_.steps; ++step) {
      // Each sketch's tape on a thread of its own (the tapes are the step's largest
      // part, and each group has its own): the features and the constraints.
      parallel_for(static_cast<int>(groups.size()), [&](int k) {
        Group& g = groups[static_cast<size_t>(k)];
        g.f.resize(static_cast<size_t>(g.batch) * g.rs->num_stores() * nf);
        g.c.resize(static_cast<size_t>(g.batch) * g.rs->num_constraints());
        g.rs->forward(g.x.data(), g.batch, g.f.data(), g.c.data());
      });
      // One estimator call over every seed, stores padded and masked: d cost / d features.
      torch::Tensor feats = torch::zeros({rows, stores, nf}, torch::kFloat32);
      float* fp = feats.data_ptr<float>();
      for (size_t k = 0; k < groups.size(); ++k) {
        const Group& g = groups[k];
        const size_t per_row = static_cast<size_t>(g.rs->num_stores()) * nf;
        for (int b = 0; b < g.batch; ++b)
          std::transform(g.f.begin() + static_cast<std::ptrdiff_t>(b * per_row),
                         g.f.begin() + static_cast<std::ptrdiff_t>((b + 1) * per_row),
                         fp + static_cast<size_t>(first_row[k] + b) * stores * nf,
                         [](double v) { return static_cast<float>(v); });
      }
      feats.requires_grad_(true);
      torch::Tensor cost = est.forward(feats, mask).to(torch::kFloat64);
      torch::Tensor gf;
      try {
        gf = torch::autograd::grad({cost.sum()}, {feats}, {}, /*retain_graph=*/false, false,
                                   /*allow_unused=*/true)[0];
      } catch (const c10::Error& e) {
        const std::string why = e.what_without_backtrace();
        throw Error("the estimator's scores have no gradient in the features, which the gradient search needs (" +
                    why.substr(0, why.find('\n')) + ")");
      }
      gf = gf.defined() ? gf.contiguous() : torch::zeros_like(feats);
      const float* gfp = gf.data_ptr<float>();
      // Back through each tape, again a thread per sketch: the score's gradient, and the
      // penalty's (the sum of the squared violations) only where some seed violates a
      // constraint (a few percent of the points): elsewhere it is zero, and its backward
      // pass through the tape would cost as much as the score's.
      parallel_for(static_cast<int>(groups.size()), [&](int k) {
        Group& g = groups[static_cast<size_t>(k)];
        const size_t per_row = static_cast<size_t>(g.rs->num_stores()) * nf;
        std::vector<double> grad_f(g.f.size());
        for (int b = 0; b < g.batch; ++b)
          std::copy(gfp + static_cast<size_t>(first_row[static_cast<size_t>(k)] + b) * stores * nf,
                    gfp + static_cast<size_t>(first_row[static_cast<size_t>(k)] + b) * stores * nf + per_row,
                    grad_f.begin() + static_cast<std::ptrdiff_t>(b * per_row));
        g.grad_cost.resize(g.x.size());
        g.rs->backward(grad_f.data(), g.grad_cost.data());
        g.violated = violates(g.c, g.batch);
        if (!g.violated) return;
        std::vector<double> grad_c(g.c.size());
        for (size_t i = 0; i < g.c.size(); ++i) grad_c[i] = g.c[i] > 0 ? 2 * g.c[i] : 0.0;
        std::fill(grad_f.begin(), grad_f.end(), 0.0);
        g.grad_penalty.resize(g.x.size());
        g.rs->backward(grad_f.data(), g.grad_penalty.data(), grad_c.data());
      });
      const double c1 = 1 - std::pow(b1, step), c2 = 1 - std::pow(b2, step);
      std::vector<double> dir;
      for (size_t k = 0; k < groups.size(); ++k) {
        Group& g = groups[k];
        dir.resize(g.x.size());
        if (!g.violated) {
          std::copy(g.grad_cost.begin(), g.grad_cost.end(), dir.begin());
        } else {
          relax::scale_penalty_gradient(g.grad_cost.data(), g.grad_penalty.data(), g.batch, g.vars, opt_.penalty_weight,
                                        dir.data());
        }
        for (size_t i = 0; i < g.x.size(); ++i) {
          g.m[i] = b1 * g.m[i] + (1 - b1) * dir[i];
          g.v[i] = b2 * g.v[i] + (1 - b2) * dir[i] * dir[i];
          g.x[i] -= opt_.learning_rate * (g.m[i] / c1) / (std::sqrt(g.v[i] / c2) + eps);
        }
        for (int b = 0; b < g.batch; ++b) project(g.rs->space(), g.x.data() + static_cast<size_t>(b) * g.vars);
      }
      round_all();
    }
  }

  std::string name_;
  GradientOptions opt_;
};

}  // namespace

std::unique_ptr<Strategy> make_gradient(const StrategyOptions& set) { return std::make_unique<Gradient>(set); }

}  // namespace basin::search::detail
