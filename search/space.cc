#include "search/space.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <set>
#include <tuple>

#include "core/util/error.h"
#include "core/util/parallel.h"
#include "relax/cpu_tiles.h"
#include "relax/features.h"
#include "relax/relaxed_sketch.h"
#include "relax/tape.h"

namespace basin::search {

namespace {

constexpr int kMoveAttempts = 24;

template <class T>
T pick(const std::vector<T>& v, std::mt19937_64& rng) {
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}

int64_t product(const std::vector<int64_t>& f) {
  int64_t p = 1;
  for (int64_t v : f) p *= v;
  return p;
}

// f (a split's factors, innermost last) with its innermost factor set to `inner`.
std::vector<int64_t> with_innermost(std::vector<int64_t> f, int64_t inner) {
  const int64_t old = f.back(), g = std::gcd(old, inner);
  int64_t gain = inner / g;
  f.back() = inner;
  f[f.size() - 2] *= old / g;
  for (size_t l = f.size() - 1; l-- > 0 && gain > 1;) {
    const int64_t t = std::gcd(f[l], gain);
    f[l] /= t;
    gain /= t;
  }
  return f;  // what is left of gain comes from the outermost level
}

// The innermost factors near v: one or two prime steps from it (v times or over p or
// p * q), and the two nearest in size on each side among the split's factors (the
// extent's divisors, or with a guard the products of its primes up to the extent).
// Prime steps alone keep tiles of neighbouring size apart where the extent mixes
// primes: 4 and 7 of 56 are three steps apart (over 2, over 2, times 7). On
// resnet18-c2 (an Intel host) the gradient search held a 16x2x4 register
// tile for 230 trials, and annealing's best tile, 16x2x7, was not among its reshapes.
std::vector<int64_t> innermost_steps(const sched::SplitSpec& sp, int64_t v) {
  const std::vector<int64_t> primes = sched::factor_primes(sp);
  std::set<int64_t> out;
  for (int64_t p : primes) {
    out.insert(v * p);
    if (v % p == 0) out.insert(v / p);
    for (int64_t q : primes) {
      out.insert(v * p * q);
      if (v % (p * q) == 0) out.insert(v / (p * q));
    }
  }
  const std::vector<int64_t> factors = sched::split_factors(sp);
  const auto below = std::lower_bound(factors.begin(), factors.end(), v);  // the first not below v
  const auto above = std::upper_bound(factors.begin(), factors.end(), v);  // the first above v
  for (std::ptrdiff_t k = 1; k <= 2; ++k) {
    if (below - factors.begin() >= k) out.insert(*(below - k));
    if (factors.end() - above >= k) out.insert(*(above + (k - 1)));
  }
  out.erase(v);
  return {out.begin(), out.end()};
}

}  // namespace

TaskSpace::TaskSpace(ops::OpGraph task, const std::string& target, const std::string& precision)
    : task_(std::move(task)), key_(sched::task_key(task_)), sketches_(sched::sketches_for(task_, target, precision)) {
  if (sketches_.empty()) throw Error("task " + key_ + " has no " + target + " sketch");
  exact_.resize(sketches_.size());
  relaxed_.resize(sketches_.size());
}

TaskSpace::~TaskSpace() = default;

int TaskSpace::sketch_index(const std::string& name) const {
  const sched::Sketch& s = sched::find_sketch(sketches_, name);
  return static_cast<int>(&s - sketches_.data());
}

Candidate TaskSpace::make(int sketch, sched::Config config) const {
  Candidate c;
  c.sketch = sketch;
  c.json = sched::config_to_json(sketches_[sketch], config);
  c.config = std::move(config);
  return c;
}

Candidate TaskSpace::random(std::mt19937_64& rng) const {
  int s = std::uniform_int_distribution<int>(0, static_cast<int>(sketches_.size()) - 1)(rng);
  return make(s, sched::random_config(sketches_[s], rng));
}

bool TaskSpace::neighbor(const Candidate& c, std::mt19937_64& rng, Candidate* out) const {
  const sched::Sketch& s = sketches_[c.sketch];
  const int knobs = static_cast<int>(s.splits.size()) + 1;
  for (int attempt = 0; attempt < kMoveAttempts; ++attempt) {
    int k = std::uniform_int_distribution<int>(0, knobs - 1)(rng);
    sched::Config n = c.config;
    if (k == knobs - 1) {
      if (s.unroll_menu.size() < 2) continue;
      n.unroll = pick(s.unroll_menu, rng);
    } else {
      const auto& tilings = sched::split_factorizations(s.splits[k]);
      if (tilings.size() < 2) continue;
      n.factors[k] = pick(tilings, rng);
    }
    if (n.factors == c.config.factors && n.unroll == c.config.unroll) continue;
    if (!sched::invalid_reason(s, n).empty()) continue;
    *out = make(c.sketch, std::move(n));
    return true;
  }
  return false;
}

bool TaskSpace::mutate(const Candidate& c, std::mt19937_64& rng, Candidate* out) const {
  const sched::Sketch& s = sketches_[c.sketch];
  for (int attempt = 0; attempt < kMoveAttempts; ++attempt) {
    sched::Config n = c.config;
    bool unroll = s.splits.empty() || std::uniform_real_distribution<double>()(rng) < 0.1;
    if (unroll) {
      if (s.unroll_menu.size() < 2) continue;
      n.unroll = pick(s.unroll_menu, rng);
    } else {
      int k = std::uniform_int_distribution<int>(0, static_cast<int>(s.splits.size()) - 1)(rng);
      const sched::SplitSpec& sp = s.splits[k];
      std::vector<int64_t>& f = n.factors[k];
      const int levels = sp.parts + 1;  // level 0 is the outermost one, extent / prod(f)
      if (levels < 2) continue;
      int from = std::uniform_int_distribution<int>(0, levels - 1)(rng);
      int to = std::uniform_int_distribution<int>(0, levels - 2)(rng);
      if (to >= from) ++to;
      const std::vector<int64_t> primes = sched::factor_primes(sp);
      if (primes.empty()) continue;  // an extent of 1
      int64_t p = pick(primes, rng);
      int64_t prod = product(f);
      if (from == 0) {
        // Take p from the outermost level: the tiles must still fit the extent.
        if (sp.guarded ? prod * p > sp.extent : (sp.extent / prod) % p != 0) continue;
      } else {
        if (f[from - 1] % p != 0) continue;
        f[from - 1] /= p;
      }
      if (to > 0) f[to - 1] *= p;
    }
    if (n.factors == c.config.factors && n.unroll == c.config.unroll) continue;
    if (!sched::invalid_reason(s, n).empty()) continue;
    *out = make(c.sketch, std::move(n));
    return true;
  }
  return false;
}

bool TaskSpace::crossover(const Candidate& a, const Candidate& b, std::mt19937_64& rng, Candidate* out) const {
  if (a.sketch != b.sketch) return false;
  const sched::Sketch& s = sketches_[a.sketch];
  std::bernoulli_distribution coin(0.5);
  for (int attempt = 0; attempt < 4; ++attempt) {
    sched::Config n = a.config;
    for (size_t k = 0; k < n.factors.size(); ++k)
      if (coin(rng)) n.factors[k] = b.config.factors[k];
    if (coin(rng)) n.unroll = b.config.unroll;
    if (!sched::invalid_reason(s, n).empty()) continue;
    *out = make(a.sketch, std::move(n));
    return true;
  }
  return false;
}

bool TaskSpace::transplant(const Candidate& c, int sketch, Candidate* out) const {
  if (sketch == c.sketch || sketch < 0 || sketch >= static_cast<int>(sketches_.size())) return false;
  const sched::Sketch& from = sketches_[c.sketch];
  const sched::Sketch& to = sketches_[sketch];
  if (from.splits.size() != to.splits.size()) return false;
  for (size_t k = 0; k < to.splits.size(); ++k) {
    const sched::SplitSpec &a = from.splits[k], &b = to.splits[k];
    if (a.name != b.name || a.extent != b.extent || a.parts != b.parts || a.guarded != b.guarded) return false;
  }
  if (!sched::invalid_reason(to, c.config).empty()) return false;
  *out = make(sketch, c.config);
  return true;
}

std::vector<int64_t> TaskSpace::register_tile(const Candidate& c) const {
  return relax::register_tile(sketches_[c.sketch], c.config);
}

std::vector<Candidate> TaskSpace::reshaped_tiles(const Candidate& c) const {
  const sched::Sketch& s = sketches_[c.sketch];
  std::vector<std::vector<std::vector<int64_t>>> steps(s.splits.size());  // per split, its new factors
  for (size_t k = 0; k < s.splits.size(); ++k)
    if (s.splits[k].parts >= 2)
      for (int64_t v : innermost_steps(s.splits[k], c.config.factors[k].back()))
        steps[k].push_back(with_innermost(c.config.factors[k], v));
  std::vector<Candidate> out;
  auto add = [&](sched::Config n) {
    if (sched::invalid_reason(s, n).empty()) out.push_back(make(c.sketch, std::move(n)));
  };
  for (size_t a = 0; a < steps.size(); ++a)
    for (const std::vector<int64_t>& fa : steps[a]) {
      sched::Config n = c.config;
      n.factors[a] = fa;
      add(n);
      for (size_t b = a + 1; b < steps.size(); ++b)
        for (const std::vector<int64_t>& fb : steps[b]) {
          n.factors[b] = fb;
          add(n);
          n.factors[b] = c.config.factors[b];
        }
    }
  return out;
}

int64_t TaskSpace::tile_registers(const Candidate& c, int vector_bytes) const {
  return relax::tile_registers(sketches_[c.sketch], c.config, vector_bytes);
}

int64_t TaskSpace::tile_loads(const Candidate& c, int vector_bytes) const {
  return relax::tile_loads(sketches_[c.sketch], c.config, vector_bytes);
}

int64_t TaskSpace::live_registers(const Candidate& c, int vector_bytes) const {
  return relax::live_registers(sketches_[c.sketch], c.config, vector_bytes);
}

std::vector<Candidate> TaskSpace::filled_tiles(const Candidate& c, int registers, int vector_bytes, bool fullest_only,
                                               bool whole_only) const {
  const sched::Sketch& s = sketches_[c.sketch];
  if (registers < 1 || vector_bytes < 4 || tile_registers(c, vector_bytes) == 0) return {};
  // Per split of two or more levels, the innermost factors it may take, in increasing
  // order, and what each costs in registers.
  struct Choices {
    size_t split;
    std::vector<int64_t> values, cost;
  };
  std::vector<Choices> choices;
  const int64_t lanes = vector_bytes / 4;
  for (size_t k = 0; k < s.splits.size(); ++k) {
    const sched::SplitSpec& sp = s.splits[k];
    if (sp.parts < 2) continue;
    Choices ch{k, {}, {}};
    int64_t part = 0;  // the widest part of a vector: a power of two, half or more
    for (int64_t v : sched::split_factors(sp)) {
      if (whole_only && sp.extent % v != 0) continue;
      if (sp.vectorized && v % lanes != 0) {
        if (2 * v >= lanes && v < lanes && (v & (v - 1)) == 0) part = v;
        continue;
      }
      ch.values.push_back(v);
      ch.cost.push_back(sp.vectorized ? v / lanes : v);
    }
    // No whole vector fits the extent: half of one where it fits (8 lanes of 56 for
    // AVX-512: resnet18-c2's fastest tile), else c's own lanes.
    if (ch.values.empty()) {
      const int64_t own = c.config.factors[k].back();
      ch.values.push_back(part > 0 ? part : own);
      ch.cost.push_back(part > 0 ? 1 : (own + lanes - 1) / lanes);
    }
    choices.push_back(std::move(ch));
  }
  // The splits the vectorized operand's reads use (the others': the broadcast operand's).
  const std::vector<bool> operand = sched::vector_operand_splits(s);
  struct Tile {
    int64_t registers, loads;
    double pace;
    std::vector<int64_t> inner;  // innermost factors, per choice
  };
  // The order's first key, ahead of fullness: a step's arithmetic against what it waits
  // for, its vector multiply-adds against its loads (as many issue per cycle, two of
  // each on x86) and against 8, the multiply-adds in flight that hide their latency (2
  // pipes, 4 cycles). A tile that uses each operand value once is bound by its loads
  // however many accumulators it holds: resnet18-c2's 1 x 28 x 8 along the width (28
  // accumulators, 29 loads a step) ran at 2831 us, 4 x 4 x 8 (16 and 8) at 1345 (Zen 4).
  auto pace = [](int64_t registers, int64_t loads) {
    return static_cast<double>(registers) / static_cast<double>(std::max<int64_t>({registers, loads, 8}));
  };
  std::vector<Tile> tiles;
  std::vector<int64_t> pick(choices.size());
  // Beside its accumulators a tile keeps the operands' values live that its loop order
  // reuses (relax::operand_registers): a conv vectorized along its output channels keeps
  // a broadcast per pixel across its channel blocks, so on AVX2 4 blocks by 3 pixels
  // (12 + 4) fit the 16 registers and 2 by 6 (12 + 7) spill. Without them, on AVX-512,
  // resnet18-c2's tiles vectorized along the width of 4 channels by 7 rows (28
  // accumulators, 7 input vectors) ran 1.6 times slower than 4 by 4.
  std::vector<int64_t> inner(s.splits.size(), 0);  // pick, per split (for step_loads)
  std::function<void(size_t, int64_t)> walk = [&](size_t i, int64_t count) {
    if (i == choices.size()) {
      // At least half full: half the registers left beside 4 operand values (AVX2's
      // fastest C10 and C12 tiles hold 7 accumulators of 16 registers).
      if (2 * count < registers - 4) return;
      for (size_t j = 0; j < choices.size(); ++j) inner[choices[j].split] = pick[j];
      if (relax::live_registers(s, operand, inner, count, vector_bytes) > registers) return;
      const int64_t loads = relax::step_loads(s, operand, inner, vector_bytes);
      tiles.push_back({count, loads, pace(count, loads), pick});
      return;
    }
    for (size_t j = 0; j < choices[i].values.size() && count * choices[i].cost[j] <= registers; ++j) {
      pick[i] = choices[i].values[j];
      walk(i + 1, count * choices[i].cost[j]);
    }
  };
  walk(0, 1);
  // The fastest paced first; of equally paced and full tiles, the fewest loads per
  // step: each accumulator's update then takes the fewest loads (BLIS's micro-kernel shape). On gemm-1024 (AVX-512)
  // the 16-accumulator tiles of 4 x 64 load 8 values a step and 16 x 16 load 17 (rows
  // of A 4 KB apart); with the same outer splits 16 x 16 ran at 40 ms, 4 x 64 and
  // 8 x 32 at 19.
  std::stable_sort(tiles.begin(), tiles.end(), [](const Tile& a, const Tile& b) {
    if (a.pace != b.pace) return a.pace > b.pace;
    return a.registers != b.registers ? a.registers > b.registers : a.loads < b.loads;
  });
  // An accumulator at level 1 covers the S2 x S3 tiles: its S2 factors go out a level,
  // so that it is the register tile.
  auto fold_s2 = [&](std::vector<int64_t>& f) {
    if (s.acc_level != 1) return;
    if (f.size() >= 3) f[f.size() - 3] *= f[f.size() - 2];  // else to the outermost level
    f[f.size() - 2] = 1;
  };
  std::vector<Candidate> out;
  const Tile* first = nullptr;  // the first valid tile
  for (const Tile& tile : tiles) {
    const int64_t count = tile.registers;
    const std::vector<int64_t>& inner = tile.inner;
    if (fullest_only && first && (tile.pace < first->pace || count < first->registers)) break;
    sched::Config n = c.config;
    int64_t steps = 1;  // the register tile's loop steps (the vector loop one)
    for (size_t i = 0; i < choices.size(); ++i) {
      std::vector<int64_t>& f = n.factors[choices[i].split];
      fold_s2(f);
      f = with_innermost(f, inner[i]);
      fold_s2(f);
      // Where the levels outside could not give the factor (7 of a guarded 7, for a
      // tile of 4), they are all 1.
      const sched::SplitSpec& sp = s.splits[choices[i].split];
      const int64_t product = std::accumulate(f.begin(), f.end(), int64_t{1}, std::multiplies<>());
      if (sp.guarded ? product > sp.extent : sp.extent % product != 0) {
        std::fill(f.begin(), f.end() - 1, 1);
        f.back() = inner[i];
      }
      if (!s.splits[choices[i].split].vectorized) steps *= inner[i];
    }
    // An unroll depth that unrolls the register tile's loops, so that its accumulators
    // can live in registers: the smallest of the menu at least its steps.
    if (n.unroll < steps) {
      int64_t depth = -1;
      for (int64_t u : s.unroll_menu)
        if (u >= steps && (depth < 0 || u < depth)) depth = u;
      if (depth >= 0) n.unroll = depth;
    }
    if (!sched::invalid_reason(s, n).empty()) continue;
    out.push_back(make(c.sketch, std::move(n)));
    if (!first) first = &tile;
  }
  return out;
}

int TaskSpace::sketch_distance(int a, int b) const {
  const sched::Sketch &x = sketches_.at(static_cast<size_t>(a)), &y = sketches_.at(static_cast<size_t>(b));
  if (x.rule != y.rule) return 10;
  return (x.vec_axis != y.vec_axis) + (x.pack != y.pack) + (x.acc_level != y.acc_level) +
         (x.inline_producers != y.inline_producers) + (x.prefix != y.prefix) + (x.tile_rows != y.tile_rows) +
         (x.warp_shuffle != y.warp_shuffle) + std::abs(x.mma_stages - y.mma_stages);
}

relax::RelaxedSketch& TaskSpace::exact(int sketch) {
  if (!exact_.at(static_cast<size_t>(sketch))) build_evaluators(/*relaxed=*/false, {sketch});
  return *exact_[static_cast<size_t>(sketch)];
}

relax::RelaxedSketch& TaskSpace::relaxed(int sketch) {
  if (!relaxed_.at(static_cast<size_t>(sketch))) build_evaluators(/*relaxed=*/true, {sketch});
  return *relaxed_[static_cast<size_t>(sketch)];
}

void TaskSpace::build_evaluators(bool relaxed, const std::vector<int>& sketches) {
  std::vector<int> todo;  // the sketches missing an evaluator asked for
  auto want = [&](int s) {
    if (!exact_.at(static_cast<size_t>(s)) || (relaxed && !relaxed_.at(static_cast<size_t>(s)))) todo.push_back(s);
  };
  if (sketches.empty()) {
    for (size_t s = 0; s < sketches_.size(); ++s) want(static_cast<int>(s));
  } else {
    for (int s : sketches) want(s);
  }
  // A sketch per thread. The expression nodes' ids come from one atomic counter, and
  // everything else a derivation touches is its own: the evaluators are those built
  // one by one.
  parallel_for(static_cast<int>(todo.size()), [&](int i) {
    const size_t s = static_cast<size_t>(todo[static_cast<size_t>(i)]);
    std::unique_ptr<relax::RelaxedSketch>& e = exact_[s];
    std::unique_ptr<relax::RelaxedSketch>& r = relaxed_[s];
    if (relaxed && !e && !r) {
      std::tie(e, r) = relax::RelaxedSketch::exact_and_relaxed(task_, sketches_[s]);
    } else {
      if (!e) e = std::make_unique<relax::RelaxedSketch>(task_, sketches_[s], relax::TapeMode::Exact);
      if (relaxed && !r) r = std::make_unique<relax::RelaxedSketch>(task_, sketches_[s], relax::TapeMode::Relaxed);
    }
  });
}

models::FeatureBatch TaskSpace::features(const std::vector<Candidate>& cs) {
  models::FeatureBatch b;
  b.batch = static_cast<int>(cs.size());
  // One feature set per task: its sketches (never none) are all CPU or all GPU ones.
  b.features = relax::num_features(relax::feature_set_of(sketches_[0]));
  std::vector<std::vector<int>> by_sketch(sketches_.size());
  for (int i = 0; i < b.batch; ++i) by_sketch.at(cs[i].sketch).push_back(i);
  // The tapes are made here, before the sketches' threads below, which only read them.
  std::vector<int> used;  // the sketches with programs here
  for (size_t s = 0; s < sketches_.size(); ++s)
    if (!by_sketch[s].empty()) used.push_back(static_cast<int>(s));
  build_evaluators(/*relaxed=*/false, used);
  std::vector<relax::RelaxedSketch*> tapes(sketches_.size(), nullptr);
  for (int s : used) {
    tapes[static_cast<size_t>(s)] = &exact(s);
    b.stores = std::max(b.stores, tapes[static_cast<size_t>(s)]->num_stores());
  }
  const size_t row = static_cast<size_t>(b.stores) * b.features;
  b.values.assign(row * b.batch, 0.0f);
  b.mask.assign(static_cast<size_t>(b.stores) * b.batch, 0.0f);
  // Each sketch's programs on a thread of their own (evaluate() is const, with buffers
  // per thread).
  parallel_for(static_cast<int>(used.size()), [&](int u) {
    const size_t s = static_cast<size_t>(used[static_cast<size_t>(u)]);
    const std::vector<int>& idx = by_sketch[s];
    const relax::RelaxedSketch& rs = *tapes[s];
    const int nv = rs.num_vars(), stores = rs.num_stores();
    std::vector<double> x, f;
    // In chunks, so that x and f stay small and warm however many programs are ranked.
    for (size_t start = 0; start < idx.size(); start += relax::Tape::kChunk) {
      const int n = static_cast<int>(std::min<size_t>(relax::Tape::kChunk, idx.size() - start));
      x.resize(static_cast<size_t>(n) * nv);
      for (int i = 0; i < n; ++i) {
        Eigen::VectorXd p = rs.space().point_of(cs[idx[start + i]].config);
        std::copy(p.data(), p.data() + nv, x.begin() + static_cast<size_t>(i) * nv);
      }
      f.resize(static_cast<size_t>(n) * stores * b.features);
      rs.evaluate(x.data(), n, f.data());
      for (int i = 0; i < n; ++i) {
        const size_t at = static_cast<size_t>(idx[start + i]);
        std::copy(f.begin() + static_cast<size_t>(i) * stores * b.features,
                  f.begin() + static_cast<size_t>(i + 1) * stores * b.features, b.values.begin() + at * row);
        std::fill(b.mask.begin() + at * b.stores, b.mask.begin() + at * b.stores + stores, 1.0f);
      }
    }
  });
  return b;
}

std::vector<models::Sample> TaskSpace::samples(const std::vector<Candidate>& cs) {
  const models::FeatureBatch b = features(cs);
  const size_t row = static_cast<size_t>(b.stores) * b.features;
  std::vector<models::Sample> out(cs.size());
  for (size_t i = 0; i < cs.size(); ++i) {
    models::Sample& s = out[i];
    s.task = key_;
    s.sketch = sketches_[cs[i].sketch].name;
    s.config = cs[i].json;
    // The row's own stores come first; the padding after them is dropped.
    s.stores = exact(cs[i].sketch).num_stores();
    s.features.assign(
        b.values.begin() + static_cast<std::ptrdiff_t>(i * row),
        b.values.begin() + static_cast<std::ptrdiff_t>(i * row + static_cast<size_t>(s.stores) * b.features));
  }
  return out;
}

void TaskSpace::predict(models::Estimator& est, std::vector<Candidate>& cs) {
  if (scored_by_ != &est) {
    scores_.clear();
    scored_by_ = &est;
  }
  std::vector<Candidate> misses;
  std::unordered_map<std::string, int> pending;
  for (Candidate& c : cs) {
    auto it = scores_.find(c.json);
    if (it != scores_.end()) {
      c.predicted = it->second;
    } else if (pending.emplace(c.json, static_cast<int>(misses.size())).second) {
      misses.push_back(c);
    }
  }
  if (!misses.empty()) {
    std::vector<double> s = est.predict(features(misses));
    if (s.size() != misses.size())
      throw Error("the " + est.kind() + " estimator returned " + std::to_string(s.size()) + " scores for " +
                  std::to_string(misses.size()) + " programs");
    predictions_ += static_cast<int64_t>(misses.size());
    for (size_t i = 0; i < misses.size(); ++i) scores_[misses[i].json] = s[i];
    for (Candidate& c : cs) c.predicted = scores_.at(c.json);
  }
}

}  // namespace basin::search
