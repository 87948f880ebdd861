// The search space's moves, the four strategies behind one interface, and the tuning
// loop (records, budgets, reproducibility). The resume-after-SIGKILL test runs the
// real binary: tests/tools/tune_op_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <unistd.h>

#include "codegen/version.h"
#include "core/ops/registry.h"
#include "core/ops/workloads.h"
#include "core/util/error.h"
#include "models/dataset.h"
#include "models/estimator.h"
#include "relax/features.h"
#include "relax/relaxed_sketch.h"
#include "search/records.h"
#include "core/util/host.h"
#include "search/tuner.h"
#include "tests/codegen/fault_hooks.h"

using namespace basin;

namespace {

// The tests here tell programs apart by latency: a hook slows a program 30 times and
// the tuner must see it. A kernel with a parallel loop waits on every call for the
// pool's second thread, and on a loaded machine (ctest -j2, CI) that wait is a
// scheduler time slice: milliseconds that swamp a 30 us kernel and its 30-times-slower
// twin alike (seen in CI: a program slowed 30 times measured 1.7 times slower). One
// thread per kernel keeps the factor; the measurement workers inherit the setting.
[[maybe_unused]] const bool kOneThreadPerKernel = setenv("BASIN_NUM_THREADS", "1", 1) == 0;

ops::OpGraph small_gemm() { return ops::build_op("matmul", {{"M", "64"}, {"N", "64"}, {"K", "64"}}); }

std::vector<ops::OpGraph> move_tasks() {
  return {small_gemm(),
          ops::build_op("conv2d", {{"in_channels", "16"}, {"out_channels", "32"}, {"height", "14"}, {"width", "14"},
                                   {"kernel", "3"}, {"padding", "1"}}),
          ops::build_op("dense", {{"M", "197"}, {"K", "64"}, {"N", "96"}}),
          ops::build_op("softmax", std::map<std::string, std::string>{{"shape", "12,197,197"}})};
}

// f with its body run `times` times over (a program that slows by that much).
LoweredFunc repeated(const LoweredFunc& f, int64_t times) {
  LoweredFunc slow = f;
  slow.body = make_for(Var("again"), Expr(int64_t{0}), Expr(times), ForKind::Serial, f.body);
  return slow;
}

// The program of `space` a configuration's JSON names; `s`, where given, gets its sketch.
search::Candidate parse_program(search::TaskSpace& space, const std::string& json,
                                const sched::Sketch** s = nullptr) {
  const sched::Sketch* sketch = nullptr;
  const sched::Config c = sched::config_from_json(json, space.sketches(), "test", &sketch);
  if (s) *s = sketch;
  return space.make(space.sketch_index(sketch->name), c);
}

std::string temp_db(const char* name) {
  std::string p = "/tmp/basin_tuner_" + std::string(name) + "_" + std::to_string(::getpid()) + ".db";
  std::remove(p.c_str());
  return p;
}

// n distinct random programs of `space` into history (latencies 200, 201, ...).
void measure_random(const search::TaskSpace& space, uint64_t seed, size_t n, std::vector<search::Measured>& history,
                    std::unordered_set<std::string>& measured) {
  std::mt19937_64 rng(seed);
  while (history.size() < n) {
    search::Candidate c = space.random(rng);
    if (measured.insert(c.json).second) history.push_back({c, 200.0 + history.size()});
  }
}

// The programs of `got` that are reshapes of `parent`'s register tile.
std::vector<search::Candidate> reshapes_in(const search::TaskSpace& space, const search::Candidate& parent,
                                          const std::vector<search::Candidate>& got) {
  std::set<std::string> all;
  for (const search::Candidate& r : space.reshaped_tiles(parent)) all.insert(r.json);
  std::vector<search::Candidate> out;
  for (const search::Candidate& c : got)
    if (all.count(c.json)) out.push_back(c);
  return out;
}

TEST(TaskSpace, MovesGiveValidNewConfigurations) {
  for (const ops::OpGraph& g : move_tasks()) {
    search::TaskSpace space(g);
    std::mt19937_64 rng(3);
    int neighbors = 0, mutations = 0, crossovers = 0;
    for (int i = 0; i < 60; ++i) {
      search::Candidate a = space.random(rng), b = space.random(rng), out;
      const sched::Sketch& s = space.sketches()[a.sketch];
      if (space.neighbor(a, rng, &out)) {
        ++neighbors;
        EXPECT_EQ(out.sketch, a.sketch);
        EXPECT_NE(out.json, a.json);
        EXPECT_EQ(sched::invalid_reason(s, out.config), "") << out.json;
        EXPECT_EQ(out.json, sched::config_to_json(s, out.config));
      }
      if (space.mutate(a, rng, &out)) {
        ++mutations;
        EXPECT_NE(out.json, a.json);
        EXPECT_EQ(sched::invalid_reason(s, out.config), "") << out.json;
      }
      b = space.make(a.sketch, sched::random_config(s, rng));
      if (space.crossover(a, b, rng, &out)) {
        ++crossovers;
        EXPECT_EQ(sched::invalid_reason(s, out.config), "") << out.json;
        for (size_t k = 0; k < out.config.factors.size(); ++k)
          EXPECT_TRUE(out.config.factors[k] == a.config.factors[k] || out.config.factors[k] == b.config.factors[k]);
      }
    }
    EXPECT_GT(neighbors, 40) << space.key();
    EXPECT_GT(mutations, 30) << space.key();
    EXPECT_GT(crossovers, 40) << space.key();
  }
}

// A batch of programs of sketches with different store counts: each sample has its own
// sketch's stores (no padding) and the features it has computed alone (a resumed run
// computes its records' samples in one batch).
TEST(TaskSpace, SamplesInOneBatchAreEachProgramsOwn) {
  search::TaskSpace space(move_tasks()[1]);  // the conv2d: 3 to 5 stores
  std::mt19937_64 rng(7);
  std::vector<search::Candidate> cs;
  for (int i = 0; i < 40; ++i) cs.push_back(space.random(rng));
  const std::vector<models::Sample> batch = space.samples(cs);
  ASSERT_EQ(batch.size(), cs.size());
  std::set<int> stores;
  for (size_t i = 0; i < cs.size(); ++i) {
    const models::Sample alone = space.samples({cs[i]}).at(0);
    EXPECT_EQ(batch[i].stores, alone.stores) << cs[i].json;
    EXPECT_EQ(batch[i].features, alone.features) << cs[i].json;
    EXPECT_EQ(batch[i].features.size(), static_cast<size_t>(alone.stores) * relax::num_features(relax::FeatureSet::Cpu));
    EXPECT_EQ(batch[i].config, cs[i].json);
    stores.insert(batch[i].stores);
  }
  EXPECT_GE(stores.size(), 2u) << "the batch should mix store counts";
}

// A tiling moves between sketches that share their splits (a conv's anchor sketches
// differ in vector axis, packing, accumulator level and producer placement only).
TEST(TaskSpace, TransplantsATilingIntoSiblingSketches) {
  for (const ops::OpGraph& g : move_tasks()) {
    search::TaskSpace space(g);
    std::mt19937_64 rng(7);
    int moved = 0;
    for (int i = 0; i < 20; ++i) {
      search::Candidate c = space.random(rng), out;
      EXPECT_FALSE(space.transplant(c, c.sketch, &out));
      EXPECT_FALSE(space.transplant(c, static_cast<int>(space.sketches().size()), &out));
      for (int s = 0; s < static_cast<int>(space.sketches().size()); ++s) {
        if (!space.transplant(c, s, &out)) continue;
        ++moved;
        EXPECT_EQ(out.sketch, s);
        EXPECT_EQ(out.config.factors, c.config.factors);
        EXPECT_EQ(out.config.unroll, c.config.unroll);
        EXPECT_EQ(sched::invalid_reason(space.sketches()[s], out.config), "") << out.json;
        EXPECT_GT(space.sketch_distance(c.sketch, s), 0);
        EXPECT_EQ(space.sketch_distance(c.sketch, s), space.sketch_distance(s, c.sketch));
      }
    }
    if (g.op == "conv2d" || g.op == "matmul") {
      EXPECT_GT(moved, 0) << g.op;
    }
  }
}

// Register-tile reshapes: one or two splits' innermost factors changed by one or two
// prime steps or to a neighbouring size, the other levels giving or taking the
// difference, every one valid and every tile once; gemm-1024's 8x16 tile reaches 4x64 in one reshape (the
// gradient search never measured it from there in two seeds).
TEST(TaskSpace, ReshapesTheRegisterTile) {
  for (const ops::OpGraph& g : move_tasks()) {
    search::TaskSpace space(g);
    std::mt19937_64 rng(17);
    int reshaped = 0;
    for (int i = 0; i < 20; ++i) {
      const search::Candidate c = space.random(rng);
      const sched::Sketch& s = space.sketches()[c.sketch];
      const std::vector<int64_t> tile = space.register_tile(c);
      std::set<std::vector<int64_t>> tiles;
      for (const search::Candidate& r : space.reshaped_tiles(c)) {
        ++reshaped;
        EXPECT_EQ(r.sketch, c.sketch);
        EXPECT_EQ(r.config.unroll, c.config.unroll);
        EXPECT_EQ(sched::invalid_reason(s, r.config), "") << r.json;
        const std::vector<int64_t> t = space.register_tile(r);
        EXPECT_TRUE(tiles.insert(t).second) << "a tile twice: " << r.json;
        int changed = 0;
        for (size_t k = 0; k < t.size(); ++k) {
          if (s.splits[k].parts < 2) {
            EXPECT_EQ(r.config.factors[k], c.config.factors[k]) << r.json;
          }
          if (t[k] == tile[k]) {
            EXPECT_EQ(r.config.factors[k], c.config.factors[k]) << r.json;
          } else {
            ++changed;
          }
        }
        EXPECT_GE(changed, 1);
        EXPECT_LE(changed, 2);
      }
    }
    if (g.op == "conv2d" || g.op == "matmul") {
      EXPECT_GT(reshaped, 0) << g.op;
    }
  }
  search::TaskSpace gemm(ops::build_op("matmul", {{"M", "1024"}, {"N", "1024"}, {"K", "1024"}}));
  const int s = gemm.sketch_index("tile.vec=j.pack.acc2");
  sched::Config c;
  c.factors = {{1, 1, 8}, {8, 8, 16}, {1024}};
  c.unroll = 64;
  bool found = false;
  for (const search::Candidate& r : gemm.reshaped_tiles(gemm.make(s, c)))
    found |= r.config.factors == std::vector<std::vector<int64_t>>{{1, 2, 4}, {8, 2, 64}, {1024}};
  EXPECT_TRUE(found) << "8x16 to 4x64: a factor 2 of i to the next level out, a factor 4 of j's from it";
}

// Where an extent mixes primes, a tile reaches the tiles of neighbouring size: on
// resnet18-c2 (56 = 2^3 x 7) a 16x2x4 register tile (c x h x w) reaches 16x2x7 and
// 16x2x8 in one reshape, though 4 and 7 are three prime steps apart (the
// gradient search held 16x2x4 for 230 trials; 16x2x7 was annealing's best).
TEST(TaskSpace, ReshapesReachTilesOfNeighbouringSize) {
  const ops::Workload& w = ops::find_workload("resnet18-c2");
  search::TaskSpace space(ops::build_op(w.op, w.params));
  const sched::Sketch* s = nullptr;
  const search::Candidate parent = parse_program(
      space,
      R"({"sketch":"tile.vec=c.pack.acc2.stage","splits":{"n":[1,1,1],"c":[4,1,16],"h":[2,1,2],"w":[7,1,4],)"
      R"("rc":[16],"rh":[3],"rw":[3]},"unroll":512})",
      &s);
  std::set<std::vector<int64_t>> tiles;
  for (const search::Candidate& r : space.reshaped_tiles(parent)) tiles.insert(space.register_tile(r));
  const std::vector<int64_t> tile = space.register_tile(parent);
  size_t h = 0, wi = 0, ci = 0;
  for (size_t k = 0; k < s->splits.size(); ++k) {
    if (s->splits[k].name == "h") h = k;
    if (s->splits[k].name == "w") wi = k;
    if (s->splits[k].name == "c") ci = k;
  }
  ASSERT_EQ(tile[ci], 16);
  ASSERT_EQ(tile[h], 2);
  ASSERT_EQ(tile[wi], 4);
  for (int64_t to : {7, 8, 2, 1}) {
    std::vector<int64_t> want = tile;
    want[wi] = to;
    EXPECT_TRUE(tiles.count(want)) << "w 4 to " << to;
  }
  std::vector<int64_t> h7 = tile;
  h7[h] = 7;
  EXPECT_TRUE(tiles.count(h7)) << "h 2 to 7: the second size above";
}

// The register-filling tiles (docs/search.md): resnet18-c12's fastest program on Zen 4
// had an unpacked sketch's 16x4x7 tile of c x h x w, 28 AVX-512 registers
// of accumulators, and the search's random programs mostly hold far fewer. From a
// program with a 1-register tile, the fullest tiles of 28 registers come first, that
// one among them; every tile fills 14 to 28, once, valid, only the register tile's
// splits changed; with AVX2's 32-byte vectors the vectorized factor is whole vectors.
TEST(TaskSpace, FilledTilesFillTheVectorRegisters) {
  const ops::Workload& w = ops::find_workload("resnet18-c12");
  search::TaskSpace space(ops::build_op(w.op, w.params));
  const sched::Sketch* s = nullptr;
  const search::Candidate parent = parse_program(
      space,
      R"({"sketch":"tile.vec=c.acc1.stage","splits":{"n":[1,1,1],"c":[32,1,16],"h":[7,1,1],"w":[7,1,1],)"
      R"("rc":[8],"rh":[3],"rw":[3]},"unroll":512})",
      &s);
  EXPECT_EQ(space.tile_registers(parent, 64), 1);
  EXPECT_EQ(space.tile_registers(parent, 32), 2);
  const std::vector<search::Candidate> full = space.filled_tiles(parent, 28, 64);
  ASSERT_FALSE(full.empty());
  EXPECT_EQ(space.tile_registers(full.front(), 64), 28);
  std::set<std::vector<int64_t>> tiles;
  int64_t last = 28;
  bool best_tile = false;
  for (const search::Candidate& f : full) {
    EXPECT_EQ(f.sketch, parent.sketch);
    EXPECT_EQ(f.config.unroll, parent.config.unroll);  // 512: every tile's loops unrolled
    EXPECT_EQ(sched::invalid_reason(*s, f.config), "") << f.json;
    EXPECT_TRUE(tiles.insert(space.register_tile(f)).second) << "a tile twice: " << f.json;
    const int64_t r = space.tile_registers(f, 64);
    EXPECT_LE(r, last) << "not fullest first";
    EXPECT_GE(2 * r, 28);
    last = r;
    for (size_t k = 0; k < s->splits.size(); ++k)
      if (s->splits[k].parts < 2) {
        EXPECT_EQ(f.config.factors[k], parent.config.factors[k]) << f.json;
      }
    best_tile |= space.register_tile(f) == std::vector<int64_t>{1, 16, 4, 7, 0, 0, 0};
  }
  EXPECT_TRUE(best_tile) << "no 16x4x7 tile";
  // With the accumulator at level 1 it covers the S2 x S3 tiles (a 16x4x7
  // program with S2 2 along c, 56 registers, ran 2.5 times slower than the best): a
  // filled tile has S2 1. An unroll depth below the tile's loop steps (its h x w) is
  // raised to the smallest of the menu that unrolls them.
  search::Candidate wide = parent;
  wide.config.factors[1] = {16, 2, 16};
  wide.config.unroll = 16;
  wide = space.make(parent.sketch, wide.config);
  EXPECT_EQ(space.tile_registers(wide, 64), 2);
  for (const search::Candidate& f : space.filled_tiles(wide, 28, 64)) {
    const std::vector<int64_t> t = space.register_tile(f);
    for (size_t k = 0; k < s->splits.size(); ++k)
      if (s->splits[k].parts >= 2) {
        EXPECT_EQ(f.config.factors[k][1], 1) << f.json;
      }
    EXPECT_EQ(f.config.unroll, t[2] * t[3] > 16 ? 64 : 16) << f.json;
    EXPECT_LE(space.tile_registers(f, 64), 28);
  }
  for (const search::Candidate& f : space.filled_tiles(parent, 12, 32)) {
    const int64_t r = space.tile_registers(f, 32);
    EXPECT_LE(r, 12);
    EXPECT_GE(2 * r, 12);
    EXPECT_EQ(space.register_tile(f)[1] % 8, 0) << "not whole AVX2 vectors: " << f.json;
  }
  // A tile V vectors wide also holds V - 1 more vectors of the operand it loads:
  // AVX-512's fullest tiles of 28 are one vector of 16 channels, none 2 x 14
  // or 4 x 7 (29 and 31).
  for (const search::Candidate& f : space.filled_tiles(parent, 28, 64, /*fullest_only=*/true)) {
    EXPECT_EQ(space.tile_registers(f, 64), 28);
    EXPECT_EQ(space.register_tile(f)[1], 16) << f.json;
  }
  // Whole tiles have no partial tile at an edge: on AVX2, C12's 7 x 7 output makes the
  // fullest 8 channels by a whole row or column of 7 (the fastest tile there, session
  // 56), where the fullest of all are 12 with partial tiles (4 x 3 of 7 x 7).
  const std::vector<search::Candidate> whole = space.filled_tiles(parent, 12, 32, /*fullest_only=*/true, /*whole_only=*/true);
  ASSERT_FALSE(whole.empty());
  for (const search::Candidate& f : whole) {
    const std::vector<int64_t> t = space.register_tile(f);
    EXPECT_EQ(space.tile_registers(f, 32), 7) << f.json;
    EXPECT_EQ(t[1], 8) << f.json;
    EXPECT_EQ(t[2] * t[3], 7) << f.json;
  }
  const std::vector<search::Candidate> fullest = space.filled_tiles(parent, 12, 32, /*fullest_only=*/true);
  ASSERT_FALSE(fullest.empty());
  EXPECT_EQ(space.tile_registers(fullest.front(), 32), 12);
  // The generic rule's sketches hold no register tile of accumulators.
  search::TaskSpace softmax(ops::build_op("softmax", std::map<std::string, std::string>{{"shape", "12,197,197"}}));
  std::mt19937_64 rng(3);
  const search::Candidate r = softmax.random(rng);
  EXPECT_EQ(softmax.tile_registers(r, 64), 0);
  EXPECT_TRUE(softmax.filled_tiles(r, 28, 64).empty());
}

// A tile vectorized along a conv's width holds its input's vectors of every row it
// covers (Zen 4): resnet18-c2's sketches vectorized along w read the input
// by n, h and w and the weight by c alone; with 56 pixels no whole AVX-512 vector fits,
// so the filled tiles take 8 lanes, and the fullest hold 16 accumulators: 4 channels by
// 4 rows (2020 us, the fastest measured) among them, none 4 by 7 (28 accumulators and
// 7 input vectors: 3173 us) or 2 by 14 (4141 us).
TEST(TaskSpace, FilledTilesCountTheVectorOperandsRows) {
  const ops::Workload& w = ops::find_workload("resnet18-c2");
  search::TaskSpace space(ops::build_op(w.op, w.params));
  const sched::Sketch* s = nullptr;
  const search::Candidate parent = parse_program(
      space,
      R"({"sketch":"tile.vec=w.acc1.stage","splits":{"n":[1,1,1],"c":[32,1,2],"h":[2,1,14],"w":[2,1,7],)"
      R"("rc":[16],"rh":[3],"rw":[1]},"unroll":1024})",
      &s);
  EXPECT_EQ(s->vector_operand_axes, (std::vector<int>{0, 2, 3}));  // n, h, w
  const sched::Sketch& by_c = space.sketches()[static_cast<size_t>(space.sketch_index("tile.vec=c.acc1.stage"))];
  EXPECT_EQ(by_c.vector_operand_axes, (std::vector<int>{1}));
  const std::vector<search::Candidate> fullest = space.filled_tiles(parent, 28, 64, /*fullest_only=*/true);
  ASSERT_FALSE(fullest.empty());
  std::set<std::vector<int64_t>> tiles;
  for (const search::Candidate& f : fullest) {
    const std::vector<int64_t> t = space.register_tile(f);  // n, c, h, w
    EXPECT_EQ(t[3], 8) << f.json;
    EXPECT_EQ(space.tile_registers(f, 64), 16) << f.json;
    EXPECT_LE(t[1] * t[2] + t[2] - 1, 28) << f.json;
    tiles.insert(t);
  }
  EXPECT_TRUE(tiles.count({1, 4, 4, 8, 0, 0, 0})) << "no 4x4x8 tile";
  for (const search::Candidate& f : space.filled_tiles(parent, 28, 64)) {
    const std::vector<int64_t> t = space.register_tile(f);
    EXPECT_FALSE(t[1] == 4 && t[2] == 7) << f.json;
    EXPECT_FALSE(t[1] == 2 && t[2] == 14) << f.json;
  }
  // On AVX2, 8 lanes are a whole vector.
  for (const search::Candidate& f : space.filled_tiles(parent, 12, 32, /*fullest_only=*/true)) {
    const std::vector<int64_t> t = space.register_tile(f);
    EXPECT_EQ(t[3] % 8, 0) << f.json;
    EXPECT_LE(space.tile_registers(f, 32) + t[2] * t[3] / 8 - 1, 12) << f.json;
  }
}

// Of equally full tiles, those with the fewest loads per step come first:
// gemm-1024's fullest tiles on AVX-512 hold 16 accumulators, and with the same outer
// splits 16 x 16 (1 vector and 16 broadcasts a step) ran at 40 ms where 4 x 64 (4 and
// 4) ran at 19. resnet18-c2's 4 x 4 x 8 (4 input vectors, 4 weights) comes before
// 8 x 2 and 2 x 8 (10 loads each).
TEST(TaskSpace, FilledTilesOfEqualRegistersPutTheFewestLoadsFirst) {
  const ops::Workload& w = ops::find_workload("gemm-1024");
  search::TaskSpace space(ops::build_op(w.op, w.params));
  const search::Candidate parent = parse_program(
      space, R"({"sketch":"tile.vec=j.pack.acc2","splits":{"i":[8,8,16],"j":[4,16,16],"k":[8]},"unroll":1024})");
  EXPECT_EQ(space.tile_registers(parent, 64), 16);
  EXPECT_EQ(space.tile_loads(parent, 64), 17);  // 1 vector of B, 16 values of A
  const std::vector<search::Candidate> fullest = space.filled_tiles(parent, 28, 64, /*fullest_only=*/true);
  ASSERT_GE(fullest.size(), 3u);
  EXPECT_EQ(space.register_tile(fullest.front()), (std::vector<int64_t>{4, 64, 0}));
  EXPECT_EQ(space.tile_loads(fullest.front(), 64), 8);
  int64_t loads = 0;
  for (const search::Candidate& f : fullest) {
    EXPECT_EQ(space.tile_registers(f, 64), 16) << f.json;
    EXPECT_GE(space.tile_loads(f, 64), loads) << f.json;
    loads = space.tile_loads(f, 64);
  }
  EXPECT_EQ(loads, 17);  // 16 x 16 is among them, last
  // Vectorized along i, A's rows are strided unless packed: a load per lane, and
  // 16 x 16 (16 lanes, 16 values of B) comes before 64 x 4 (64 lanes and 4 values),
  // which ran at 730 ms where 16 x 16 ran at 62. Packed, 64 x 4 first.
  const search::Candidate by_i = parse_program(
      space, R"({"sketch":"tile.vec=i.acc2","splits":{"i":[8,8,16],"j":[4,16,16],"k":[8]},"unroll":1024})");
  const search::Candidate by_i_packed = parse_program(
      space, R"({"sketch":"tile.vec=i.pack.acc2","splits":{"i":[8,8,16],"j":[4,16,16],"k":[8]},"unroll":1024})");
  EXPECT_TRUE(space.sketches()[static_cast<size_t>(by_i.sketch)].vector_operand_strided);
  EXPECT_FALSE(space.sketches()[static_cast<size_t>(by_i_packed.sketch)].vector_operand_strided);
  EXPECT_FALSE(space.sketches()[static_cast<size_t>(parent.sketch)].vector_operand_strided);
  EXPECT_EQ(space.tile_loads(by_i, 64), 32);
  EXPECT_EQ(space.tile_loads(by_i_packed, 64), 17);
  const std::vector<search::Candidate> strided = space.filled_tiles(by_i, 28, 64, /*fullest_only=*/true);
  ASSERT_FALSE(strided.empty());
  EXPECT_EQ(space.register_tile(strided.front()), (std::vector<int64_t>{16, 16, 0}));
  const std::vector<search::Candidate> packed = space.filled_tiles(by_i_packed, 28, 64, /*fullest_only=*/true);
  ASSERT_FALSE(packed.empty());
  EXPECT_EQ(space.register_tile(packed.front()), (std::vector<int64_t>{64, 4, 0}));
  // resnet18-c2 along the width: the input's rows are vectors, the weight's channels broadcasts.
  const ops::Workload& c2 = ops::find_workload("resnet18-c2");
  search::TaskSpace conv(ops::build_op(c2.op, c2.params));
  const search::Candidate by_w = parse_program(
      conv,
      R"({"sketch":"tile.vec=w.acc1.stage","splits":{"n":[1,1,1],"c":[4,1,16],"h":[56,1,1],"w":[7,1,8],)"
      R"("rc":[8],"rh":[3],"rw":[3]},"unroll":512})");
  EXPECT_EQ(conv.tile_loads(by_w, 64), 17);  // 16 x 1 x 8
  EXPECT_FALSE(conv.sketches()[static_cast<size_t>(by_w.sketch)].vector_operand_strided);
  // Along the output channels, the weight (c, rc, rh, rw) is strided unless packed.
  EXPECT_TRUE(conv.sketches()[static_cast<size_t>(conv.sketch_index("tile.vec=c.acc1.stage"))].vector_operand_strided);
  EXPECT_FALSE(
      conv.sketches()[static_cast<size_t>(conv.sketch_index("tile.vec=c.pack.acc1.stage"))].vector_operand_strided);
  const std::vector<search::Candidate> c2_fullest = conv.filled_tiles(by_w, 28, 64, /*fullest_only=*/true);
  ASSERT_FALSE(c2_fullest.empty());
  EXPECT_EQ(conv.register_tile(c2_fullest.front()), (std::vector<int64_t>{1, 4, 4, 8, 0, 0, 0}));
  EXPECT_EQ(conv.tile_loads(c2_fullest.front(), 64), 8);
  // No vectorized anchor split: no tile, no loads.
  search::TaskSpace softmax(ops::build_op("softmax", std::map<std::string, std::string>{{"shape", "12,197,197"}}));
  std::mt19937_64 rng(1);
  EXPECT_EQ(softmax.tile_loads(softmax.random(rng), 64), 0);
}

TEST(TaskSpace, CandidateFeaturesAreTheTrainingFeatures) {
  for (const ops::OpGraph& g : move_tasks()) {
    search::TaskSpace space(g);
    std::mt19937_64 rng(5);
    std::vector<search::Candidate> cs;
    for (int i = 0; i < 12; ++i) cs.push_back(space.random(rng));
    models::FeatureBatch b = space.features(cs);
    models::FeatureExtractor fx;
    for (int i = 0; i < b.batch; ++i) {
      models::Sample s = fx.features(space.key(), space.sketches()[cs[i].sketch].name, cs[i].json);
      for (int st = 0; st < b.stores; ++st) {
        EXPECT_EQ(b.mask[i * b.stores + st], st < s.stores ? 1.0f : 0.0f);
        for (int f = 0; st < s.stores && f < b.features; ++f)
          EXPECT_EQ(b.values[(static_cast<size_t>(i) * b.stores + st) * b.features + f], s.features[st * b.features + f]);
      }
    }
  }
}

// Equal, NaN equal to NaN (an exact evaluator between integer points).
bool same(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

// Every sketch's evaluators built at once on the helper threads are those built alone:
// the same features, constraints and gradients at the same points.
TEST(TaskSpace, EvaluatorsBuiltTogetherAreThoseBuiltAlone) {
  for (const ops::OpGraph& g : move_tasks()) {
    search::TaskSpace together(g);
    together.build_evaluators(/*relaxed=*/true);
    std::mt19937_64 rng(9);
    for (size_t s = 0; s < together.sketches().size(); ++s) {
      for (relax::TapeMode mode : {relax::TapeMode::Exact, relax::TapeMode::Relaxed}) {
        relax::RelaxedSketch& built = mode == relax::TapeMode::Exact ? together.exact(static_cast<int>(s))
                                                                     : together.relaxed(static_cast<int>(s));
        relax::RelaxedSketch alone(g, together.sketches()[s], mode);
        ASSERT_EQ(built.num_vars(), alone.num_vars());
        ASSERT_EQ(built.num_stores(), alone.num_stores());
        ASSERT_EQ(built.num_constraints(), alone.num_constraints());
        const int batch = 4, nv = built.num_vars();
        std::vector<double> x;
        for (const Eigen::VectorXd& p : built.space().sample(batch, rng, 20, 5)) x.insert(x.end(), p.data(), p.data() + nv);
        const size_t nf = static_cast<size_t>(batch) * built.num_stores() * built.num_features();
        const size_t nc = static_cast<size_t>(batch) * built.num_constraints();
        std::vector<double> f1(nf), f2(nf), c1(nc), c2(nc), g1(x.size()), g2(x.size()), up(nf, 1.0);
        built.forward(x.data(), batch, f1.data(), c1.data());
        alone.forward(x.data(), batch, f2.data(), c2.data());
        EXPECT_TRUE(same(f1, f2)) << g.op << " sketch " << s;
        EXPECT_TRUE(same(c1, c2)) << g.op << " sketch " << s;
        built.backward(up.data(), g1.data());
        alone.backward(up.data(), g2.data());
        EXPECT_TRUE(same(g1, g2)) << g.op << " sketch " << s;
      }
    }
  }
}

// Each strategy: n distinct, valid, unmeasured candidates; the same rng seed gives the
// same ones; the model-guided ones propose programs the estimator prefers to random ones.
TEST(Strategies, ProposeDistinctUnmeasuredCandidatesReproducibly) {
  ops::OpGraph g = ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}});
  search::TaskSpace space(g);
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  std::unique_ptr<models::Estimator> roofline = models::make_estimator("roofline");
  ASSERT_TRUE(mlp->ready()) << "the pretrained CPU MLP is missing";
  std::mt19937_64 r0(11);
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  for (int i = 0; i < 20; ++i) {
    search::Candidate c = space.random(r0);
    if (measured.insert(c.json).second) history.push_back({c, 100.0 + i});
  }
  std::vector<search::Candidate> baseline;
  for (int i = 0; i < 200; ++i) baseline.push_back(space.random(r0));
  for (const std::string& name : search::strategy_names()) {
    models::Estimator* est = name == "gradient" ? mlp.get() : name == "random" ? nullptr : roofline.get();
    std::vector<std::string> first;
    for (int rep = 0; rep < 2; ++rep) {
      std::unique_ptr<search::Strategy> s = search::make_strategy(name);
      EXPECT_EQ(s->name(), name);
      std::mt19937_64 rng(42);
      search::SearchState state{space, est, history, measured, rng};
      std::vector<search::Candidate> got = s->propose(state, 16);
      ASSERT_EQ(got.size(), 16u) << name;
      std::vector<std::string> jsons;
      std::set<std::string> distinct;
      for (const search::Candidate& c : got) {
        EXPECT_FALSE(measured.count(c.json)) << name;
        EXPECT_TRUE(distinct.insert(c.json).second) << name;
        EXPECT_EQ(sched::invalid_reason(space.sketches()[c.sketch], c.config), "") << name;
        jsons.push_back(c.json);
      }
      if (rep == 0) first = jsons;
      else EXPECT_EQ(jsons, first) << name << " is not reproducible";
      if (est) {
        std::vector<search::Candidate> base = baseline;
        space.predict(*est, base);
        space.predict(*est, got);
        double mean_base = 0, mean_got = 0;
        for (const search::Candidate& c : base) mean_base += c.predicted / base.size();
        for (int i = 0; i < 12; ++i) mean_got += got[i].predicted / 12;  // the ranked part of the batch
        EXPECT_LT(mean_got, mean_base) << name << " does not follow its estimator";
      }
    }
  }
  EXPECT_THROW(search::make_strategy("hillclimb"), NotFoundError);
}

// Options by spec: the strategy runs with them, is named by its spec, and lists the
// values it runs with; a bad spec is a ParseError naming what is wrong.
TEST(Strategies, OptionsSetBySpec) {
  auto value = [](const search::Strategy& s, const std::string& key) {
    for (const search::StrategyOption& o : s.options())
      if (o.key == key) return o.value;
    return std::string("missing");
  };
  std::unique_ptr<search::Strategy> g = search::make_strategy("gradient:tile_slots=0:epsilon=0.25");
  EXPECT_EQ(g->name(), "gradient:tile_slots=0:epsilon=0.25");
  EXPECT_EQ(value(*g, "tile_slots"), "0");
  EXPECT_EQ(value(*g, "epsilon"), "0.25");
  EXPECT_EQ(value(*g, "unroll_slots"), "2");  // not set: the default
  EXPECT_EQ(value(*search::make_strategy("gradient"), "tile_slots"), "2");
  std::unique_ptr<search::Strategy> a = search::make_strategy("annealing:plan_size=7");
  EXPECT_EQ(a->plan_size(), 7);
  EXPECT_EQ(search::make_strategy("annealing")->plan_size(), 64);
  EXPECT_EQ(value(*search::make_strategy("evolutionary:population=12"), "population"), "12");
  EXPECT_TRUE(search::make_strategy("random")->options().empty());
  for (const char* bad : {"gradient:", "gradient:tile_slots", "gradient:=1", "gradient:tile_slots=", ":tile_slots=1",
                          "gradient:tile_slot=1", "gradient:tile_slots=x", "gradient:tile_slots=1.5",
                          "gradient:tile_slots=-1", "gradient:epsilon=1.5", "gradient:epsilon=nan",
                          "gradient:tile_slots=1:tile_slots=2", "random:epsilon=0.1", "annealing:plan_size=0"})
    EXPECT_THROW(search::make_strategy(bad), ParseError) << bad;
  EXPECT_THROW(search::make_strategy("hillclimb:steps=3"), NotFoundError);
  // Options change what a strategy proposes: annealing with epsilon 1 proposes
  // random programs only, which its estimator ranks below its usual batch.
  ops::OpGraph op = ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}});
  search::TaskSpace space(op);
  std::unique_ptr<models::Estimator> roofline = models::make_estimator("roofline");
  std::mt19937_64 r0(5);
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  for (int i = 0; i < 20; ++i) {
    search::Candidate c = space.random(r0);
    if (measured.insert(c.json).second) history.push_back({c, 100.0 + i});
  }
  auto mean_predicted = [&](const std::string& spec) {
    std::mt19937_64 rng(9);
    search::SearchState state{space, roofline.get(), history, measured, rng};
    std::vector<search::Candidate> got = search::make_strategy(spec)->propose(state, 16);
    space.predict(*roofline, got);
    double mean = 0;
    for (const search::Candidate& c : got) mean += c.predicted / got.size();
    return mean;
  };
  EXPECT_LT(mean_predicted("annealing"), mean_predicted("annealing:epsilon=1"));
}

// The cuda target's space, without a GPU: GPU sketches, the GPU feature set (training
// and search features agree), an MLP trained on it, and every strategy proposing valid
// GPU configurations (the gradient search through the GPU constraints). The latencies
// are synthetic: a made-up cost of the configuration's threads and register tile.
TEST(Strategies, SearchTheGpuSpace) {
  const int gpu_features = relax::num_features(relax::FeatureSet::Gpu);
  for (const ops::OpGraph& g : {ops::build_op("dense", {{"M", "256"}, {"N", "256"}, {"K", "256"}}),
                                ops::build_op("conv2d", {{"in_channels", "16"}, {"out_channels", "32"}, {"height", "14"},
                                                         {"width", "14"}, {"kernel", "3"}, {"padding", "1"}}),
                                ops::build_op("softmax", std::map<std::string, std::string>{{"shape", "64,197"}})}) {
    search::TaskSpace space(g, "cuda");
    for (const sched::Sketch& s : space.sketches())
      EXPECT_TRUE(sched::is_gpu_rule(s.rule)) << s.name;
    std::mt19937_64 r0(2);
    std::vector<search::Candidate> cs;
    std::unordered_set<std::string> seen;
    while (cs.size() < 80) {
      search::Candidate c = space.random(r0);
      if (seen.insert(c.json).second) cs.push_back(c);
    }
    models::FeatureBatch b = space.features(cs);
    ASSERT_EQ(b.features, gpu_features);
    models::FeatureExtractor fx;
    std::vector<models::Sample> samples;
    std::vector<search::Measured> history;
    std::unordered_set<std::string> measured;
    for (int i = 0; i < b.batch; ++i) {
      models::Sample smp = fx.features(space.key(), space.sketches()[cs[i].sketch].name, cs[i].json, "cuda");
      ASSERT_EQ(smp.features.size(), static_cast<size_t>(smp.stores) * gpu_features);
      for (int st = 0; st < smp.stores; ++st)
        for (int f = 0; f < gpu_features; ++f)
          EXPECT_EQ(b.values[(static_cast<size_t>(i) * b.stores + st) * b.features + f], smp.features[st * gpu_features + f]);
      const sched::Sketch& sk = space.sketches()[cs[i].sketch];
      double threads = sk.rule == sched::SketchRule::GpuTile ? sched::gpu_tile_use(sk, cs[i].config).threads
                                                               : cs[i].config.factors[0][0];
      smp.latency_us = 10 + std::abs(std::log2(threads / 256.0)) + (i % 7) * 0.1;
      samples.push_back(smp);
      if (i < 20) {
        history.push_back({cs[i], smp.latency_us});
        measured.insert(cs[i].json);
      }
    }
    std::unique_ptr<models::Estimator> mlp = models::make_estimator("mlp");
    models::TrainOptions to;
    to.epochs = 5;
    mlp->train(samples, to);
    // A CPU estimator cannot read GPU features.
    EXPECT_THROW(models::estimator_from_spec("mlp")->predict(b), Error);
    for (const std::string& name : search::strategy_names()) {
      std::mt19937_64 rng(42);
      search::SearchState state{space, name == "random" ? nullptr : mlp.get(), history, measured, rng};
      std::vector<search::Candidate> got = search::make_strategy(name)->propose(state, 12);
      EXPECT_EQ(got.size(), 12u) << name << " " << space.key();
      std::set<std::string> distinct;
      for (const search::Candidate& c : got) {
        EXPECT_TRUE(distinct.insert(c.json).second) << name;
        EXPECT_FALSE(measured.count(c.json)) << name;
        EXPECT_EQ(sched::invalid_reason(space.sketches()[c.sketch], c.config), "") << name;
      }
    }
  }
  EXPECT_THROW(search::TaskSpace(ops::build_op("dense"), "opencl"), Error);
}

// The gradient search measures, in each batch, the best-predicted program of two
// sketches in turn, so that over a few rounds every sketch is tried with the estimator's
// choice (resnet18-c12's best sketch was missed without it).
TEST(Strategies, GradientVisitsEverySketchInTurn) {
  search::TaskSpace space(ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}}));
  const int n_sketches = static_cast<int>(space.sketches().size());
  ASSERT_GE(n_sketches, 4);
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  std::mt19937_64 r0(5);
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  std::set<int> explored;
  const int n = 16;
  // From the second batch (the first compares every sketch: the next test).
  for (int round = 1; round <= (n_sketches + 1) / 2; ++round) {
    while (static_cast<int>(history.size()) < round * n) {  // the round is the history's length in batches
      search::Candidate c = space.random(r0);
      if (measured.insert(c.json).second) history.push_back({c, 100.0 + history.size()});
    }
    std::mt19937_64 rng(round);
    search::SearchState state{space, mlp.get(), history, measured, rng};
    std::vector<search::Candidate> got = search::make_strategy("gradient")->propose(state, n);
    ASSERT_EQ(got.size(), static_cast<size_t>(n));
    for (int k = 0; k < 2; ++k) {
      const int want = (round * 2 + k) % n_sketches;
      EXPECT_EQ(got[n - 2 + k].sketch, want) << "round " << round;
      explored.insert(got[n - 2 + k].sketch);
    }
  }
  EXPECT_EQ(static_cast<int>(explored.size()), n_sketches);
}

// An MLP trained (40 epochs) on `programs` to prefer one sketch ten times over: the
// `liked` sketch's programs at 10 us, the others' at 100 us (plus 0 to 4 us).
std::unique_ptr<models::Estimator> mlp_that_prefers(const search::TaskSpace& space,
                                                    const std::vector<search::Candidate>& programs, int liked) {
  models::FeatureExtractor fx;
  std::vector<models::Sample> samples;
  for (size_t i = 0; i < programs.size(); ++i) {
    const search::Candidate& c = programs[i];
    models::Sample smp = fx.features(space.key(), space.sketches()[c.sketch].name, c.json, "llvm");
    smp.latency_us = (c.sketch == liked ? 10.0 : 100.0) + static_cast<double>(i % 5);
    samples.push_back(smp);
  }
  std::unique_ptr<models::Estimator> mlp = models::make_estimator("mlp");
  models::TrainOptions to;
  to.epochs = 40;
  mlp->train(samples, to);
  return mlp;
}

// The first batch, with nothing measured, gives every sketch the same number of
// programs (within one): the estimator picks among random programs of one sketch, not
// across sketches (Zen 5, resnet18-c6 and -c12: the shipped ensemble's order of the
// sketch families sent 85 to 95% of the programs to the `vec=w` sketches while the
// packed ones held both strategies' best). Here the MLP is trained to like one sketch
// ten times over, and the batch still compares them all; the next batch, with the
// first measured, gives it at least twice as many.
TEST(Strategies, GradientFirstBatchComparesEverySketch) {
  search::TaskSpace space(ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}}));
  const int n_sketches = static_cast<int>(space.sketches().size());
  ASSERT_GE(n_sketches, 4);
  const int liked = 1;
  std::mt19937_64 r0(9);
  std::vector<search::Candidate> train;
  std::unordered_set<std::string> seen;
  while (train.size() < 120) {
    search::Candidate c = space.random(r0);
    if (seen.insert(c.json).second) train.push_back(c);
  }
  std::unique_ptr<models::Estimator> mlp = mlp_that_prefers(space, train, liked);
  const int n = 2 * n_sketches + 3;
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  auto propose = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    search::SearchState state{space, mlp.get(), history, measured, rng};
    return search::make_strategy("gradient")->propose(state, n);
  };
  std::vector<search::Candidate> first = propose(3);
  ASSERT_EQ(first.size(), static_cast<size_t>(n));
  std::map<int, int> per_sketch;
  std::set<std::string> distinct;
  for (const search::Candidate& c : first) {
    ++per_sketch[c.sketch];
    distinct.insert(c.json);
  }
  EXPECT_EQ(distinct.size(), first.size());
  EXPECT_EQ(static_cast<int>(per_sketch.size()), n_sketches);
  for (const auto& [sketch, count] : per_sketch) {
    EXPECT_GE(count, 2) << "sketch " << sketch;
    EXPECT_LE(count, 3) << "sketch " << sketch;
  }
  std::vector<search::Candidate> again = propose(3);
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(first[i].json, again[i].json) << "not reproducible";
  // Once programs are measured, the estimator's preference ranks the batch.
  for (const search::Candidate& c : first) {
    history.push_back({c, c.sketch == liked ? 10.0 : 100.0});
    measured.insert(c.json);
  }
  int liked_next = 0;
  for (const search::Candidate& c : propose(4)) liked_next += c.sketch == liked;
  EXPECT_GE(liked_next, 2 * per_sketch[liked]) << "the trained MLP does not prefer the sketch: the test checks nothing";
}

// The gradient search measures the fastest program's tiling in its nearest sibling
// sketches (resnet18-c2, -c6 and -c9 ended in a sibling of the sketch they settled on
// first, 150 to 250 trials later), and the next program's once those are measured.
TEST(Strategies, GradientTriesTheFastestTilingInSiblingSketches) {
  search::TaskSpace space(ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}}));
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  measure_random(space, 11, 48, history, measured);
  // The fastest program: one with siblings.
  size_t fast = history.size();
  for (size_t i = 0; i < history.size() && fast == history.size(); ++i) {
    search::Candidate out;
    for (int s = 0; s < static_cast<int>(space.sketches().size()); ++s)
      if (space.transplant(history[i].candidate, s, &out)) fast = i;
  }
  ASSERT_LT(fast, history.size()) << "no program has a sibling: the test checks nothing";
  history[fast].latency_us = 50;
  const search::Candidate best = history[fast].candidate;
  auto siblings_in = [&](const std::vector<search::Candidate>& got) {
    std::vector<search::Candidate> sib;
    for (const search::Candidate& c : got)
      if (c.sketch != best.sketch && c.config.factors == best.config.factors && c.config.unroll == best.config.unroll)
        sib.push_back(c);
    return sib;
  };
  std::mt19937_64 rng(2);
  search::SearchState state{space, mlp.get(), history, measured, rng};
  const int n = 16;
  std::vector<search::Candidate> got = search::make_strategy("gradient")->propose(state, n);
  ASSERT_EQ(got.size(), static_cast<size_t>(n));
  std::vector<search::Candidate> sib = siblings_in(got);
  ASSERT_GE(sib.size(), 2u);
  // The nearest first: no sibling of the batch is farther than one left out.
  int farthest = 0;
  for (const search::Candidate& c : sib) farthest = std::max(farthest, space.sketch_distance(best.sketch, c.sketch));
  for (int s = 0; s < static_cast<int>(space.sketches().size()); ++s) {
    search::Candidate out;
    if (!space.transplant(best, s, &out) || std::any_of(sib.begin(), sib.end(), [&](const search::Candidate& c) { return c.sketch == s; }))
      continue;
    EXPECT_GE(space.sketch_distance(best.sketch, s), farthest) << space.sketches()[s].name;
  }
  // Once every sibling is measured, none is proposed again.
  for (int s = 0; s < static_cast<int>(space.sketches().size()); ++s) {
    search::Candidate out;
    if (space.transplant(best, s, &out) && measured.insert(out.json).second) history.push_back({out, 400.0});
  }
  std::mt19937_64 rng2(3);
  search::SearchState again{space, mlp.get(), history, measured, rng2};
  std::vector<search::Candidate> next = search::make_strategy("gradient")->propose(again, n);
  EXPECT_TRUE(siblings_in(next).empty());
  for (const search::Candidate& c : next) EXPECT_FALSE(measured.count(c.json)) << c.json;
}

// The gradient search measures the fastest program with other unroll depths, the
// nearest in the menu first (resnet18-c6, seed 1: after a first batch whose unroll-64
// programs had slow tilings, 90% of the programs had unroll 16, 15% behind), and the
// farther ones once those are measured.
TEST(Strategies, GradientTriesTheFastestProgramWithOtherUnrollDepths) {
  search::TaskSpace space(ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}}));
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  std::mt19937_64 r0(13);
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  while (history.size() < 48) {
    search::Candidate c = space.random(r0);
    if (c.config.unroll == 16 || !measured.insert(c.json).second) continue;
    history.push_back({c, 200.0 + history.size()});
  }
  // The fastest: a tiling measured with no other depth (history[7]'s, taken out).
  sched::Config fast_config = history[7].candidate.config;
  fast_config.unroll = 16;
  const search::Candidate fast = space.make(history[7].candidate.sketch, fast_config);
  measured.erase(history[7].candidate.json);
  history.erase(history.begin() + 7);
  const std::vector<int64_t>& menu = space.sketches()[static_cast<size_t>(fast.sketch)].unroll_menu;
  ASSERT_EQ(menu, (std::vector<int64_t>{0, 16, 64, 512, 1024})) << "the test assumes the default menu";
  ASSERT_TRUE(measured.insert(fast.json).second);
  history.push_back({fast, 50.0});
  auto depths_in = [&](const std::vector<search::Candidate>& got) {
    std::set<int64_t> d;
    for (const search::Candidate& c : got)
      if (c.sketch == fast.sketch && c.config.factors == fast.config.factors) d.insert(c.config.unroll);
    return d;
  };
  const int n = 16;
  std::mt19937_64 rng(2);
  search::SearchState state{space, mlp.get(), history, measured, rng};
  std::set<int64_t> first = depths_in(search::make_strategy("gradient")->propose(state, n));
  EXPECT_TRUE(first.count(0) && first.count(64)) << "the nearest depths, 0 and 64; got " << ::testing::PrintToString(first);
  // Those measured (slower), the farther ones follow.
  for (int64_t u : {0, 64}) {
    sched::Config c = fast.config;
    c.unroll = u;
    search::Candidate m = space.make(fast.sketch, c);
    if (measured.insert(m.json).second) history.push_back({m, 300.0});
  }
  std::mt19937_64 rng2(3);
  search::SearchState again{space, mlp.get(), history, measured, rng2};
  std::set<int64_t> next = depths_in(search::make_strategy("gradient")->propose(again, n));
  EXPECT_TRUE(next.count(512) && next.count(1024)) << "the farther depths, 512 and 1024";
  EXPECT_FALSE(next.count(0) || next.count(64)) << "measured already";
}

// The gradient search measures the fastest program with other factors of a one-level
// split (a GEMM's k block), each the farthest from the factors measured with that
// sketch and register tile (gemm-1024 on an Intel host: its programs had
// k blocks of 256 to 1024, annealing's best 16), and the gaps between them after.
TEST(Strategies, GradientProbesTheFastestProgramsReductionBlock) {
  search::TaskSpace space(ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}}));
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  std::vector<search::Measured> all;
  std::unordered_set<std::string> ignored;
  measure_random(space, 23, 48, all, ignored);
  // The fastest: a program with k block 256; nothing else of its sketch and tile.
  const sched::Sketch* sketch = nullptr;
  search::Candidate fast;
  size_t k = 0;
  for (const search::Measured& m : all) {
    const sched::Sketch& s = space.sketches()[static_cast<size_t>(m.candidate.sketch)];
    for (size_t i = 0; i < s.splits.size(); ++i)
      if (s.splits[i].parts == 1 && s.splits[i].name == "k" && !sketch) {
        sched::Config c = m.candidate.config;
        c.factors[i] = {256};
        if (!sched::invalid_reason(s, c).empty()) continue;
        sketch = &s;
        k = i;
        fast = space.make(m.candidate.sketch, c);
      }
  }
  ASSERT_TRUE(sketch) << "no program with a one-level k split";
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  for (const search::Measured& m : all)
    if ((m.candidate.sketch != fast.sketch || space.register_tile(m.candidate) != space.register_tile(fast)) &&
        m.candidate.json != fast.json && measured.insert(m.candidate.json).second)
      history.push_back(m);
  ASSERT_TRUE(measured.insert(fast.json).second);
  history.push_back({fast, 50.0});
  auto blocks_in = [&](const std::vector<search::Candidate>& got) {
    std::set<int64_t> b;
    for (const search::Candidate& c : got) {
      if (c.sketch != fast.sketch) continue;
      sched::Config same = c.config;
      same.factors[k] = fast.config.factors[k];
      if (same.factors == fast.config.factors && same.unroll == fast.config.unroll) b.insert(c.config.factors[k][0]);
    }
    return b;
  };
  const int n = 16;
  std::mt19937_64 rng(2);
  search::SearchState state{space, mlp.get(), history, measured, rng};
  std::set<int64_t> first = blocks_in(search::make_strategy("gradient")->propose(state, n));
  EXPECT_TRUE(first.count(1) && first.count(16)) << "1, the farthest from 256, then 16 between; got "
                                                 << ::testing::PrintToString(first);
  for (int64_t b : {1, 16}) {  // measured, slower
    sched::Config c = fast.config;
    c.factors[k] = {b};
    search::Candidate m = space.make(fast.sketch, c);
    if (measured.insert(m.json).second) history.push_back({m, 300.0});
  }
  std::mt19937_64 rng2(3);
  search::SearchState again{space, mlp.get(), history, measured, rng2};
  std::set<int64_t> next = blocks_in(search::make_strategy("gradient")->propose(again, n));
  EXPECT_TRUE(next.count(4) && next.count(64)) << "the middles of the gaps; got " << ::testing::PrintToString(next);
  EXPECT_FALSE(next.count(1) || next.count(16)) << "measured already";
}

// The gradient search measures the fastest program with other register tiles, tiles
// that no measured program of its sketch has (gemm-1024: the search stayed with an
// 8x16 tile in two seeds, 4% behind 4x64), and other tiles once those are measured.
TEST(Strategies, GradientTriesOtherRegisterTilesOfTheFastestProgram) {
  search::TaskSpace space(ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}}));
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  measure_random(space, 19, 48, history, measured);
  history[5].latency_us = 50;
  const search::Candidate fast = history[5].candidate;
  auto tiles_of = [&](const std::vector<search::Measured>& h) {
    std::set<std::vector<int64_t>> t;
    for (const search::Measured& m : h)
      if (m.candidate.sketch == fast.sketch) t.insert(space.register_tile(m.candidate));
    return t;
  };
  const int n = 16;
  for (int round = 0; round < 3; ++round) {
    std::mt19937_64 rng(round + 2);
    search::SearchState state{space, mlp.get(), history, measured, rng};
    std::vector<search::Candidate> got = search::make_strategy("gradient")->propose(state, n);
    ASSERT_EQ(got.size(), static_cast<size_t>(n));
    const std::set<std::vector<int64_t>> before = tiles_of(history);
    std::vector<search::Candidate> r = reshapes_in(space, fast, got);
    ASSERT_GE(r.size(), 2u) << "round " << round;
    std::set<std::vector<int64_t>> new_tiles;
    for (const search::Candidate& c : r) {
      const std::vector<int64_t> t = space.register_tile(c);
      if (!before.count(t)) new_tiles.insert(t);
    }
    EXPECT_GE(new_tiles.size(), 2u) << "round " << round << ": two tiles not measured before";
    for (const search::Candidate& c : got) {
      EXPECT_FALSE(measured.count(c.json)) << c.json;
      if (measured.insert(c.json).second) history.push_back({c, 300.0});  // all slower
    }
  }
}

// The gradient search also measures another sketch's fastest program with other
// register tiles, in a place of its own (resnet18-c12: the unpacked sketch
// was fastest with a 2x7 tile, the packed one with 1x7, and the search held the packed
// 1x7 program and never measured the unpacked 2x7). Here sketch B's fastest program is
// within the margin of the best, in another sketch, and so is sketch C's; each round
// measures a reshape of each into a tile no measured program of its sketch has (two
// places a batch: with one, resnet18-c12 held `vec=w` programs 20%
// behind for 300 trials on four seeds of four), and still two reshapes of the fastest.
TEST(Strategies, GradientTriesOtherRegisterTilesOfAnotherSketchsFastestProgram) {
  search::TaskSpace space(ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}}));
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  measure_random(space, 29, 48, history, measured);
  history[5].latency_us = 50;
  size_t b = 6;
  while (b < history.size() && history[b].candidate.sketch == history[5].candidate.sketch) ++b;
  ASSERT_LT(b, history.size());
  history[b].latency_us = 60;  // within the margin (0.5 by default); every other program is at 200 or more
  size_t c = b + 1;
  while (c < history.size() && (history[c].candidate.sketch == history[5].candidate.sketch ||
                                history[c].candidate.sketch == history[b].candidate.sketch))
    ++c;
  ASSERT_LT(c, history.size());
  history[c].latency_us = 65;
  const search::Candidate fast = history[5].candidate;
  const int n = 16;
  for (int round = 0; round < 3; ++round) {
    std::map<int, std::set<std::vector<int64_t>>> before;  // sketch -> its measured tiles
    for (const search::Measured& m : history) before[m.candidate.sketch].insert(space.register_tile(m.candidate));
    std::mt19937_64 rng(round + 7);
    search::SearchState state{space, mlp.get(), history, measured, rng};
    std::vector<search::Candidate> got = search::make_strategy("gradient")->propose(state, n);
    ASSERT_EQ(got.size(), static_cast<size_t>(n));
    for (size_t k : {b, c}) {
      const search::Candidate& other = history[k].candidate;
      int new_tiles = 0;
      for (const search::Candidate& r : reshapes_in(space, other, got))
        new_tiles += !before[other.sketch].count(space.register_tile(r));
      EXPECT_GE(new_tiles, 1) << "round " << round << ": no reshape of sketch " << other.sketch << "'s fastest program";
    }
    EXPECT_GE(reshapes_in(space, fast, got).size(), 2u) << "round " << round << ": the fastest program lost a reshape";
    for (const search::Candidate& c : got)
      if (measured.insert(c.json).second) history.push_back({c, 300.0});  // all slower
  }
}

// Register-filling tiles (docs/search.md; resnet18-c12 and -c9 on Zen 4:
// the fastest programs' tiles took 28 of 32 AVX-512 registers, in a sketch whose
// random programs measured among the slowest). The first batch gives every sketch a
// program whose tile fills at least half the registers allowed; each later batch gives
// two sketches in turn their fastest program with one of the fullest tiles that no
// measured program of the sketch has, and every sketch gets its turn.
TEST(Strategies, GradientTriesRegisterFillingTilesOfSketchesInTurn) {
  search::TaskSpace space(ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}}));
  const int n_sketches = static_cast<int>(space.sketches().size());
  ASSERT_GE(n_sketches, 4);
  const int vb = vector_file(this_host().vector_isa).bytes;
  const int registers = 12;
  const std::string spec = "gradient:fill_registers=" + std::to_string(registers);
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  {
    std::mt19937_64 rng(4);
    search::SearchState state{space, mlp.get(), history, measured, rng};
    std::map<int, int> filling;  // per sketch, its first batch's programs with a register-filling tile
    for (const search::Candidate& c : search::make_strategy(spec)->propose(state, 2 * n_sketches + 3)) {
      const int64_t r = space.tile_registers(c, vb);
      filling[c.sketch] += r <= registers && 2 * r >= registers;
    }
    ASSERT_EQ(static_cast<int>(filling.size()), n_sketches);
    for (const auto& [sketch, count] : filling)
      EXPECT_GE(count, 1) << "sketch " << sketch << ": no register-filling tile in the first batch";
  }
  measure_random(space, 31, 48, history, measured);
  const int n = 16;
  std::set<int> filled;
  for (int round = 0; round <= n_sketches / 2; ++round) {
    const int turn = static_cast<int>(history.size()) / n;
    std::mt19937_64 rng(round + 11);
    search::SearchState state{space, mlp.get(), history, measured, rng};
    const std::vector<search::Candidate> got = search::make_strategy(spec)->propose(state, n);
    ASSERT_EQ(got.size(), static_cast<size_t>(n));
    std::set<std::string> jsons;
    for (const search::Candidate& c : got) jsons.insert(c.json);
    for (int k = 0; k < 2; ++k) {
      const int sketch = (turn * 2 + k) % n_sketches;
      const search::Measured* fastest = nullptr;
      std::set<std::vector<int64_t>> tiles;  // the sketch's measured tiles
      for (const search::Measured& m : history)
        if (m.candidate.sketch == sketch) {
          tiles.insert(space.register_tile(m.candidate));
          if (!fastest || m.latency_us < fastest->latency_us) fastest = &m;
        }
      ASSERT_NE(fastest, nullptr);
      // The fullest tiles no measured program has, and of those the fewest loads.
      int64_t top = 0, leanest = 0;
      std::vector<search::Candidate> unmeasured;
      for (search::Candidate& f : space.filled_tiles(fastest->candidate, registers, vb))
        if (!tiles.count(space.register_tile(f))) unmeasured.push_back(std::move(f));
      for (const search::Candidate& f : unmeasured) top = std::max(top, space.tile_registers(f, vb));
      for (const search::Candidate& f : unmeasured)
        if (space.tile_registers(f, vb) == top && (leanest == 0 || space.tile_loads(f, vb) < leanest))
          leanest = space.tile_loads(f, vb);
      // Such a tile in the batch: the filling place's program, or, where another source
      // took a program of the sketch with that register tile first in this batch, that
      // one (the place then skips the tile: on AVX2's 16 registers the fullest tiles are
      // few and another source's reshapes reach them too).
      bool found = false;
      for (const search::Candidate& f : unmeasured) {
        if (space.tile_registers(f, vb) != top || space.tile_loads(f, vb) != leanest) continue;
        found |= jsons.count(f.json) > 0;
        for (const search::Candidate& c : got)
          found |= c.sketch == sketch && space.register_tile(c) == space.register_tile(f);
      }
      EXPECT_TRUE(found) << "round " << round << ": sketch " << sketch
                         << "'s fastest program with a full tile of the fewest loads";
      filled.insert(sketch);
    }
    for (const search::Candidate& c : got)
      if (measured.insert(c.json).second) history.push_back({c, 300.0});  // all slower
  }
  EXPECT_EQ(static_cast<int>(filled.size()), n_sketches);
}

// With fill_whole, every sketch's second program in the first batch has the fullest
// register-filling tile with no partial tile (on AVX2 the fastest 1 x 7
// tiles of resnet18-c10 and -c12 were never the fullest, 12 with partial tiles).
TEST(Strategies, GradientFirstBatchGivesEverySketchAWholeFillingTile) {
  const ops::Workload& w = ops::find_workload("resnet18-c12");
  search::TaskSpace space(ops::build_op(w.op, w.params));
  const int vb = vector_file(this_host().vector_isa).bytes;
  const int registers = 12;
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  auto whole_fills = [&](const std::string& spec) {
    std::vector<search::Measured> history;
    std::unordered_set<std::string> measured;
    std::mt19937_64 rng(5);
    search::SearchState state{space, mlp.get(), history, measured, rng};
    std::set<int> sketches;  // those with a program whose tile is the fullest whole one
    const int n = 2 * static_cast<int>(space.sketches().size());
    for (const search::Candidate& c : search::make_strategy(spec)->propose(state, n)) {
      // c's tile among the fullest whole ones its own configuration makes.
      const std::vector<search::Candidate> top = space.filled_tiles(c, registers, vb, true, /*whole_only=*/true);
      if (std::any_of(top.begin(), top.end(), [&](const search::Candidate& t) {
            return space.register_tile(t) == space.register_tile(c);
          }))
        sketches.insert(c.sketch);
    }
    return sketches;
  };
  int anchors = 0;
  for (const sched::Sketch& s : space.sketches()) anchors += s.rule == sched::SketchRule::Anchor;
  ASSERT_GE(anchors, 4);
  const std::string spec = "gradient:fill_registers=" + std::to_string(registers);
  EXPECT_EQ(static_cast<int>(whole_fills(spec).size()), anchors);
  EXPECT_LT(static_cast<int>(whole_fills(spec + ":fill_whole=0").size()), anchors);
}

// A register tile measured once, close to the best, gets follow-ups: its program with
// other outer levels, reduction tile or unroll depth (gemm-1024, seed 2: a first 4x64
// program with a k tile of 1 was 0.7% behind the best and never measured again).
TEST(Strategies, GradientFollowsUpATileCloseToTheBest) {
  search::TaskSpace space(ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}}));
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  measure_random(space, 23, 48, history, measured);
  using Tile = std::pair<int, std::vector<int64_t>>;
  auto tile_of = [&](const search::Candidate& c) { return Tile{c.sketch, space.register_tile(c)}; };
  history[3].latency_us = 50;
  // The close one: the first program with a tile no other program has.
  std::map<Tile, int> count;
  for (const search::Measured& m : history) ++count[tile_of(m.candidate)];
  size_t close = history.size();
  for (size_t i = 4; i < history.size() && close == history.size(); ++i)
    if (count[tile_of(history[i].candidate)] == 1) close = i;
  ASSERT_LT(close, history.size());
  history[close].latency_us = 50.5;
  const Tile want = tile_of(history[close].candidate);
  std::mt19937_64 rng(4);
  search::SearchState state{space, mlp.get(), history, measured, rng};
  std::vector<search::Candidate> got = search::make_strategy("gradient")->propose(state, 16);
  int follow_ups = 0;
  for (const search::Candidate& c : got) follow_ups += tile_of(c) == want;
  EXPECT_GE(follow_ups, 1) << "no new program with the close tile";
  // The follow-up has a place of its own: both reshapes of the fastest program into
  // new tiles are still there (sharing one place, and on gemm-1024 the close
  // tiles kept taking it).
  std::set<std::string> reshapes;
  for (const search::Candidate& c : space.reshaped_tiles(history[3].candidate))
    if (!count.count(tile_of(c))) reshapes.insert(c.json);
  std::set<Tile> new_tiles;
  for (const search::Candidate& c : got)
    if (reshapes.count(c.json)) new_tiles.insert(tile_of(c));
  EXPECT_GE(new_tiles.size(), 2u) << "a reshape lost its place to the follow-up";
}

// The gradient search caps a sketch whose measured programs are all much slower than
// the best, however much its estimator likes it (resnet18-c12 spent 300 trials in
// such sketches): here an MLP trained to prefer one sketch, and measurements that put
// that sketch 2x behind. With the same MLP and the sketch measured fast, the batch is
// mostly that sketch, so the cap is what keeps it out.
TEST(Strategies, GradientCapsSketchesMeasuredSlow) {
  search::TaskSpace space(ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}}));
  ASSERT_GE(space.sketches().size(), 4u);
  const int liked = 1;
  std::mt19937_64 r0(9);
  std::vector<search::Candidate> train, liked_cs, other_cs;
  std::unordered_set<std::string> seen;
  while (liked_cs.size() < 12 || other_cs.size() < 24 || train.size() < 120) {
    search::Candidate c = space.random(r0);
    if (!seen.insert(c.json).second) continue;
    if (train.size() < 120) train.push_back(c);
    else if (c.sketch == liked && liked_cs.size() < 12) liked_cs.push_back(c);
    else if (c.sketch != liked && other_cs.size() < 24) other_cs.push_back(c);
  }
  std::unique_ptr<models::Estimator> mlp = mlp_that_prefers(space, train, liked);
  auto liked_in_batch = [&](double liked_latency) {
    std::vector<search::Measured> history;
    std::unordered_set<std::string> measured;
    for (const search::Candidate& c : liked_cs) history.push_back({c, liked_latency});
    for (const search::Candidate& c : other_cs) history.push_back({c, 100.0});
    for (const search::Measured& m : history) measured.insert(m.candidate.json);
    std::mt19937_64 rng(4);
    search::SearchState state{space, mlp.get(), history, measured, rng};
    const int n = 16;
    // Without the other sketches' reshape place, which would take one of the ranked places counted here.
    std::vector<search::Candidate> got = search::make_strategy("gradient:tile_sketch_slots=0")->propose(state, n);
    EXPECT_EQ(got.size(), static_cast<size_t>(n));
    int count = 0;
    for (int i = 0; i < n - 4; ++i) count += got[i].sketch == liked;  // then two sibling and two sketch slots
    return count;
  };
  EXPECT_GE(liked_in_batch(90.0), 8) << "the trained MLP does not prefer the sketch: the test checks nothing";
  // Capped: 2 ranked, and at most the 2 random programs of the batch.
  EXPECT_LE(liked_in_batch(200.0), 4);
}

// The capped sketches share two ranked places, and the more programs a sketch has had
// measured, the smaller the margin that caps it (on resnet18-c12 four
// `vec=w` sketches 12% behind the packed ones, with 60 to 170 programs each, kept two
// ranked places each, a quarter of the trials after the first 300).
TEST(Strategies, SketchCapsShareTwoPlacesAndTheMarginShrinksWithEvidence) {
  auto program = [](int sketch, int k) {
    search::Candidate c;
    c.sketch = sketch;
    c.json = std::to_string(sketch) + "/" + std::to_string(k);
    c.predicted = k;
    return c;
  };
  // Sketch 0 the best (100 us); 1 and 2 at 112 us; 3 at 140 us; 4 failed only.
  auto history = [&](int per_sketch) {
    std::vector<search::Measured> h;
    for (int k = 0; k < per_sketch; ++k) {
      h.push_back({program(0, k), 100.0 + k});
      h.push_back({program(1, k), 112.0 + k});
      h.push_back({program(2, k), 112.0 + k});
      h.push_back({program(3, k), 140.0 + k});
      h.push_back({program(4, k), 0.0});
    }
    return h;
  };
  const search::detail::SketchCap cap;  // 25% at 8 programs, down to 5%
  using Caps = std::vector<bool>;
  // Too little evidence: nothing capped.
  EXPECT_EQ(search::detail::capped_sketches(history(7), 5, cap), Caps({false, false, false, false, false}));
  // 8 programs: the margin is 25%, only sketch 3 (40% behind) is capped.
  EXPECT_EQ(search::detail::capped_sketches(history(8), 5, cap), Caps({false, false, false, true, false}));
  // 16 programs: 12.5%, 12% behind is still within it.
  EXPECT_EQ(search::detail::capped_sketches(history(16), 5, cap), Caps({false, false, false, true, false}));
  // 20 programs: 10%, now 1 and 2 are capped too; a sketch of failures never is.
  EXPECT_EQ(search::detail::capped_sketches(history(20), 5, cap), Caps({false, true, true, true, false}));
  // The floor: 5% however many programs.
  search::detail::SketchCap close = cap;
  close.margin_floor = 0.15;
  EXPECT_EQ(search::detail::capped_sketches(history(200), 5, close), Caps({false, false, false, true, false}));

  // Two places in all for the capped sketches, their best predicted; the others keep all.
  std::vector<search::Candidate> ranked;
  for (int k = 0; k < 4; ++k)
    for (int s = 0; s < 4; ++s) ranked.push_back(program(s, 10 * k + s));
  search::detail::cap_ranked(ranked, {false, true, true, false}, 2);
  std::vector<std::string> got;
  for (const search::Candidate& c : ranked) got.push_back(c.json);
  EXPECT_EQ(got, std::vector<std::string>({"0/0", "1/1", "2/2", "3/3", "0/10", "3/13", "0/20", "3/23", "0/30", "3/33"}));
  // Nothing capped: nothing cut.
  search::detail::cap_ranked(ranked, {false, false, false, false}, 2);
  EXPECT_EQ(ranked.size(), 10u);
}

// Regression: in tiny spaces (the small CNN of the C++ example's test) the gradient
// batch's random programs repeated a sketch pick, and the tuner stopped on "strategy
// gradient proposed a measured program". Every strategy, round after round, proposes
// distinct unmeasured programs until the space runs out.
TEST(Strategies, SmallSpacesNeverRepeatAProgram) {
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  std::unique_ptr<models::Estimator> roofline = models::make_estimator("roofline");
  for (const ops::OpGraph& task :
       {ops::build_op("conv2d", {{"in_channels", "3"}, {"out_channels", "4"}, {"height", "8"}, {"width", "8"},
                                 {"kernel", "3"}, {"padding", "1"}}),
        ops::build_op("dense", {{"M", "1"}, {"K", "64"}, {"N", "10"}}),
        ops::build_op("max_pool2d", {{"channels", "4"}, {"height", "8"}, {"width", "8"}})})
  for (const std::string& name : search::strategy_names()) {
    search::TaskSpace space(task);
    models::Estimator* est = name == "gradient" ? mlp.get() : name == "random" ? nullptr : roofline.get();
    std::unique_ptr<search::Strategy> s = search::make_strategy(name);
    std::vector<search::Measured> history;
    std::unordered_set<std::string> measured;
    std::mt19937_64 rng(3);
    for (int round = 0; round < 12; ++round) {
      search::SearchState state{space, est, history, measured, rng};
      std::vector<search::Candidate> got = s->propose(state, 32);
      if (got.empty()) break;
      for (const search::Candidate& c : got) {
        ASSERT_TRUE(measured.insert(c.json).second) << name << " round " << round << " repeats " << c.json;
        history.push_back({c, 1.0 + static_cast<double>(std::hash<std::string>()(c.json) % 1000)});
      }
    }
  }
}

TEST(Strategies, UntrainedEstimatorFallsBackToRandom) {
  search::TaskSpace space(small_gemm());
  std::unique_ptr<models::Estimator> gbt = models::make_estimator("gbt");
  ASSERT_FALSE(gbt->ready());
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  for (const char* name : {"annealing", "evolutionary", "gradient"}) {
    std::mt19937_64 rng(1);
    search::SearchState state{space, gbt.get(), history, measured, rng};
    EXPECT_EQ(search::make_strategy(name)->propose(state, 8).size(), 8u) << name;
  }
}

TEST(Tuner, RecordsEveryProgramAndOneSeedReproducesTheRun) {
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  search::TuneOptions opt;
  opt.trials = 12;
  opt.batch = 5;
  opt.seed = 7;
  std::vector<std::vector<std::string>> configs;
  for (int run = 0; run < 2; ++run) {
    std::string db = temp_db(run ? "repro_b" : "repro_a");
    search::RecordStore store(db);
    std::vector<std::string> lines;
    opt.log = [&](const std::string& l) { lines.push_back(l); };
    search::TuneResult r = search::tune_task(small_gemm(), store, *random, nullptr, opt);
    EXPECT_EQ(r.trials, 12);
    EXPECT_EQ(r.measured, 12);
    EXPECT_EQ(r.resumed, 0);
    EXPECT_EQ(r.rounds, 3);
    EXPECT_EQ(lines.size(), 3u);
    EXPECT_EQ(store.count(), 12);
    ASSERT_TRUE(r.best);
    EXPECT_EQ(r.best_latency_us, r.best->latency_us());
    EXPECT_GT(r.overhead_fraction, 0.0);
    EXPECT_LT(r.overhead_fraction, 1.0);
    EXPECT_LE(r.measure_seconds, r.seconds);
    // A point per program, one per round after its confirmations, and one after the
    // fastest programs were measured again at the end (settled).
    ASSERT_EQ(r.curve.size(), 13u + 3u + r.settled);
    EXPECT_EQ(r.curve.back().trials, 12);
    for (size_t i = 1; i < r.curve.size(); ++i) {
      EXPECT_GE(r.curve[i].trials, r.curve[i - 1].trials);
      EXPECT_LE(r.curve[i].trials, r.curve[i - 1].trials + 1);
      EXPECT_GE(r.curve[i].seconds, r.curve[i - 1].seconds);
      // A new program can only lower the best; the best measured again at the end of
      // a round (the point with no new trial) can raise it.
      if (r.curve[i - 1].best_us > 0 && r.curve[i].trials > r.curve[i - 1].trials) {
        EXPECT_LE(r.curve[i].best_us, r.curve[i - 1].best_us);
      }
    }
    // The best is measured again once per round from the round after it is confirmed
    // (twice, beside challengers), and three programs twice each at the end.
    EXPECT_TRUE(r.settled);
    EXPECT_GE(r.best_remeasurements, 1 + 2 * 2);
    EXPECT_LE(r.best_remeasurements, 2 * (r.rounds - 1) + 3 * 2);
    // It is the program named the best last, and the file names it.
    int64_t last_named = 0;
    for (const search::Record& rec : store.all()) last_named = std::max(last_named, rec.best_seq);
    EXPECT_EQ(r.best->best_seq, last_named);
    EXPECT_TRUE(r.best->confirmed());
    EXPECT_EQ(store.best(r.task_key, "llvm")->config, r.best->config);
    ASSERT_FALSE(r.bests.empty());
    EXPECT_EQ(r.bests.back().config, r.best->config);
    std::vector<std::string> cs;
    for (const search::Record& rec : store.all()) cs.push_back(rec.config);
    configs.push_back(cs);
    std::remove(db.c_str());
  }
  EXPECT_EQ(configs[0], configs[1]);
}

// Annealing plans 64 programs per search and its estimator is retrained once per plan
// (AutoTVM's plan_size); the gradient search's estimator is updated after every batch.
TEST(Tuner, AnnealingRetrainsOncePerPlan) {
  for (const char* name : {"annealing", "gradient"}) {
    std::unique_ptr<search::Strategy> s = search::make_strategy(name);
    std::unique_ptr<models::Estimator> est = models::make_estimator(name == std::string("annealing") ? "gbt" : "mlp");
    std::string db = temp_db(name);
    search::RecordStore store(db);
    search::TuneOptions opt;
    const bool annealing = name == std::string("annealing");
    opt.trials = 16 * (annealing ? 10 : 4);
    opt.batch = 16;
    opt.seed = 3;
    search::TuneResult r = search::tune_task(small_gemm(), store, *s, est.get(), opt);
    EXPECT_EQ(r.measured, opt.trials) << name;
    EXPECT_EQ(r.rounds, annealing ? 10 : 4) << name;
    if (annealing) {
      EXPECT_EQ(s->plan_size(), 64);
      // First trained on the first batch (16 >= min_train_samples), then at 80 and 144.
      EXPECT_EQ(r.updates, 3);
    } else {
      EXPECT_EQ(s->plan_size(), 0);
      EXPECT_EQ(r.updates, 4);  // after every batch
    }
    std::remove(db.c_str());
  }
}

TEST(Tuner, ResumesFromItsRecordsWithoutMeasuringTwice) {
  std::string db = temp_db("resume");
  std::unique_ptr<search::Strategy> evo = search::make_strategy("evolutionary");
  std::unique_ptr<models::Estimator> est = models::make_estimator("gbt");
  search::TuneOptions opt;
  opt.trials = 10;
  opt.batch = 10;
  {
    search::RecordStore store(db);
    search::TuneResult r = search::tune_task(small_gemm(), store, *evo, est.get(), opt);
    EXPECT_EQ(r.measured, 10);
    EXPECT_TRUE(est->ready()) << "the estimator was not trained on the first batch";
  }
  opt.trials = 18;
  search::RecordStore store(db);
  search::TuneResult r = search::tune_task(small_gemm(), store, *evo, est.get(), opt);
  EXPECT_EQ(r.resumed, 10);
  EXPECT_EQ(r.measured, 8);
  EXPECT_EQ(r.trials, 18);
  std::set<std::string> distinct;
  for (const search::Record& rec : store.all()) EXPECT_TRUE(distinct.insert(rec.config).second) << rec.config;
  EXPECT_EQ(distinct.size(), 18u);
  std::remove(db.c_str());
}

// Tunes small_gemm for 6 trials into a fresh file, copies its records into a second
// file with `change` applied to each and a latency no program here has (0.001 us), and
// tunes again from the copy: the second run's result, its log lines, and the copy's
// best record.
struct CopiedRun {
  search::TuneResult first, second;
  std::vector<std::string> logs;  // the second run's
  search::Record best;
};
CopiedRun tune_from_a_changed_copy(const char* name, const std::function<void(search::Record&)>& change) {
  const std::string db = temp_db(name), copy = db + ".copy";
  std::unique_ptr<search::Strategy> rnd = search::make_strategy("random");
  search::TuneOptions opt;
  opt.trials = 6;
  opt.batch = 6;
  CopiedRun out;
  opt.log = [&](const std::string& line) { out.logs.push_back(line); };
  {
    search::RecordStore store(db);
    out.first = search::tune_task(small_gemm(), store, *rnd, nullptr, opt);
    search::RecordStore copied(copy);
    for (search::Record rec : store.all()) {
      EXPECT_EQ(rec.host, host_description());
      EXPECT_EQ(rec.codegen, codegen::codegen_version("llvm"));
      change(rec);
      rec.latencies_us = {0.001};
      copied.add(rec);
    }
  }
  out.logs.clear();
  search::RecordStore store(copy);
  out.second = search::tune_task(small_gemm(), store, *rnd, nullptr, opt);
  out.best = *store.best(search::TaskSpace(small_gemm(), "llvm").key(), "llvm");
  std::remove(db.c_str());
  std::remove(copy.c_str());
  return out;
}

TEST(Tuner, AnotherMachinesRecordsAreLeftOutAndMeasuredAgain) {
  // The same file, copied to a machine that is not this one.
  CopiedRun run = tune_from_a_changed_copy("other_host", [](search::Record& r) { r.host = "Elsewhere CPU, 8 cores, avx512"; });
  EXPECT_EQ(run.first.measured, 6);
  EXPECT_EQ(run.first.other_host, 0);
  const search::TuneResult& r = run.second;
  EXPECT_EQ(r.other_host, 6);
  EXPECT_EQ(r.resumed, 0);
  EXPECT_EQ(r.measured, 6);
  EXPECT_GT(r.best_latency_us, 0.001) << "another machine's latency became this run's best";
  ASSERT_FALSE(run.logs.empty());
  EXPECT_NE(run.logs[0].find("another machine"), std::string::npos) << run.logs[0];
  EXPECT_NE(run.logs[0].find("Elsewhere CPU"), std::string::npos) << run.logs[0];
  EXPECT_EQ(run.best.host, host_description());
}

// A records file from an older basin, whose code generation differed: its latencies
// are not this code's, so its programs are measured again and none is the best.
TEST(Tuner, AnotherCodeGenerationsRecordsAreLeftOutAndMeasuredAgain) {
  CopiedRun run = tune_from_a_changed_copy("other_codegen", [](search::Record& r) { r.codegen = "llvm 0"; });
  EXPECT_EQ(run.first.other_codegen, 0);
  const search::TuneResult& r = run.second;
  EXPECT_EQ(r.other_codegen, 6);
  EXPECT_EQ(r.other_host, 0);
  EXPECT_EQ(r.resumed, 0);
  EXPECT_EQ(r.measured, 6);
  EXPECT_GT(r.best_latency_us, 0.001) << "the old code's latency became this run's best";
  ASSERT_FALSE(run.logs.empty());
  EXPECT_NE(run.logs[0].find("another generation (llvm 0, not " + codegen::codegen_version("llvm") + ")"),
            std::string::npos)
      << run.logs[0];
  EXPECT_EQ(run.best.codegen, codegen::codegen_version("llvm"));
}

// A program that runs fast only the first time it is measured (as one can in a worker
// whose history happens to suit it: docs/PERFORMANCE.md@6bf7154) never becomes the best: the
// tuner measures a would-be best again after the round's other programs and keeps the
// median. Here every measurement after a program's first runs its body 30 times.
TEST(Tuner, AProgramFastOnlyOnceNeverBecomesTheBest) {
  auto slow_again = basin::testing::one_at_a_time([](const LoweredFunc& f) {
    static std::set<std::string> seen;  // in the measurement worker
    return seen.insert(to_string(f.body)).second ? f : repeated(f, 30);
  });
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  for (int confirm : {2, 0}) {
    std::string db = temp_db(confirm ? "confirm" : "no_confirm");
    search::TuneOptions opt;
    opt.trials = 10;
    opt.batch = 5;
    opt.seed = 5;
    opt.confirm = confirm;
    opt.program_hook = slow_again;
    opt.timeout_seconds = 600;  // a worker replaced after a timeout would forget the hook's counts
    search::TuneResult r;
    {
      search::RecordStore store(db);
      r = search::tune_task(small_gemm(), store, *random, nullptr, opt);
    }
    ASSERT_TRUE(r.best);
    EXPECT_EQ(r.measured, 10);
    if (confirm == 0) {
      EXPECT_EQ(r.confirmations, 0);
      EXPECT_FALSE(r.best->confirmed());
      EXPECT_EQ(r.best_latency_us, r.best->min_latency_us());
      std::remove(db.c_str());
      continue;
    }
    // Two rounds, up to two programs each, measured twice more.
    EXPECT_GT(r.confirmations, 0);
    EXPECT_LE(r.confirmations, 2 * 2 * 2);
    EXPECT_EQ(r.confirmations % 2, 0);
    ASSERT_TRUE(r.best->confirmed());
    // Two confirmations, and one more measurement per round it was the best at.
    ASSERT_GE(r.best->confirm_us.size(), 2u);
    ASSERT_LE(r.best->confirm_us.size(), 2u + r.best_remeasurements);
    // The median, all but one of them 30 times slower: far from the run's fastest
    // single measurement (two configurations can lower to one body, so a program's
    // first measurement may be a slow one too).
    double fastest_once = 1e300;
    std::string every;  // for the message: each program's first measurement, then the others
    for (const search::Record& rec : search::RecordStore(db).all()) {
      if (rec.ok()) fastest_once = std::min(fastest_once, rec.min_latency_us());
      every += "\n  " + std::to_string(rec.min_latency_us()) + " then " + ::testing::PrintToString(rec.confirm_us);
    }
    EXPECT_GT(r.best_latency_us, 10 * fastest_once)
        << "the best's first measurement " << r.best->min_latency_us() << " us, then "
        << ::testing::PrintToString(r.best->confirm_us) << "; every program:" << every;
    std::vector<double> all = r.best->confirm_us;
    all.push_back(r.best->min_latency_us());
    std::sort(all.begin(), all.end());
    EXPECT_EQ(r.best_latency_us, all[all.size() / 2]);
    // The file keeps the confirmations, and the best it names is the confirmed one.
    search::RecordStore store(db);
    int confirmed = 0;
    for (const search::Record& rec : store.all()) confirmed += rec.confirmed();
    EXPECT_EQ(confirmed * 2, r.confirmations);
    std::optional<search::Record> best = store.best(r.task_key, "llvm");
    ASSERT_TRUE(best);
    EXPECT_TRUE(best->confirmed());
    EXPECT_EQ(best->config, r.best->config);
    // Resumed, the same best, and nothing measured again.
    search::TuneResult again = search::tune_task(small_gemm(), store, *random, nullptr, opt);
    EXPECT_EQ(again.measured, 0);
    EXPECT_EQ(again.best_latency_us, r.best_latency_us);
    std::remove(db.c_str());
  }
}

// Every program runs its body as it is for its first three measurements and 30 times
// after. The count is kept in the measurement worker, which each tuner forks afresh.
LoweredFunc fast_three_times(const LoweredFunc& f) {
  static std::map<std::string, int> times;
  return ++times[to_string(f.body)] <= 3 ? f : repeated(f, 30);
}

// small_gemm tuned by random search into the records file `db`.
search::TuneResult tune_random(const std::string& db, const search::TuneOptions& opt) {
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  search::RecordStore store(db);
  return search::tune_task(small_gemm(), store, *random, nullptr, opt);
}

// On a shared machine a program can be fast for a while and slow later (another
// guest's cache traffic: docs/PERFORMANCE.md@6bf7154). The best is measured again every round,
// so once its median shows the slow phase, new programs challenge it side by side and
// win. Here every program is fast for its first three measurements and 30 times
// slower after: a best is measured slow three times alone (its median turns slow), then
// loses to a challenger measured fast beside it.
TEST(Tuner, ABestThatTurnsSlowGivesWay) {
  std::string db = temp_db("turns_slow");
  search::TuneOptions opt;
  opt.trials = 24;
  opt.batch = 3;
  opt.seed = 4;
  opt.program_hook = basin::testing::one_at_a_time(fast_three_times);
  opt.timeout_seconds = 600;  // a worker replaced after a timeout would forget the hook's counts
  search::TuneResult r = tune_random(db, opt);
  ASSERT_TRUE(r.best);
  EXPECT_EQ(r.rounds, 8);
  EXPECT_GE(r.best_remeasurements, 5);
  // More than one program was the best, and none kept it for more than five rounds
  // (its confirmation, three slow measurements alone, and the lost contest).
  ASSERT_GE(r.bests.size(), 2u);
  for (size_t i = 1; i < r.bests.size(); ++i) {
    EXPECT_NE(r.bests[i].record_id, r.bests[i - 1].record_id);
    EXPECT_GE(r.bests[i].trials, r.bests[i - 1].trials);
    EXPECT_LE(r.bests[i].trials - r.bests[i - 1].trials, 5 * opt.batch) << "a best measured slow stayed the best";
  }
  // The bests' measurements again are in the file.
  search::RecordStore store(db);
  int remeasured = 0;
  for (const search::Record& rec : store.all()) remeasured += rec.confirm_us.size() > 2u;
  EXPECT_GE(remeasured, 1);
  // The file names the run's best.
  EXPECT_EQ(store.best(r.task_key, "llvm")->config, r.best->config);
  std::remove(db.c_str());
}

// --stop-at-latency ends a run once the best is that fast, but a program confirmed in
// one phase must also have been measured again in a later round first. Without
// confirmation, the first program that runs stops it.
TEST(Tuner, StopsAtALatencyOnceTheBestWasMeasuredInLaterRounds) {
  for (int confirm : {2, 0}) {
    std::string db = temp_db(confirm ? "stop_at" : "stop_at_no_confirm");
    search::TuneOptions opt;
    opt.trials = 30;
    opt.batch = 3;
    opt.seed = 6;
    opt.confirm = confirm;
    opt.stop_at_us = 1e9;  // any program
    search::TuneResult r = tune_random(db, opt);
    ASSERT_TRUE(r.best);
    if (confirm == 0) {
      EXPECT_EQ(r.measured, 1);
      EXPECT_FALSE(r.settled);
    } else {
      // The first best is confirmed at the end of the first round and measured again in
      // later ones (twice in a contest, once in a round without challengers), where a
      // program confirmed then may take its place and need rounds more: whole rounds,
      // at least two, and a best measured at least twice after its confirmation.
      EXPECT_GE(r.rounds, 2);
      EXPECT_LT(r.rounds, 10);
      EXPECT_EQ(r.measured, 3 * r.rounds);
      EXPECT_GE(r.best->confirm_us.size(), 4u);
    }
    std::remove(db.c_str());
  }
}

// The lower median of the last n measurements of a record (its window in a contest).
double window_us(const search::Record& rec, size_t n) {
  std::vector<double> v(rec.confirm_us.end() - static_cast<std::ptrdiff_t>(n), rec.confirm_us.end());
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

// Regression: a contest judged each program by the upper median of its
// window, with two measurements its slower one, so one slowdown of a shared machine
// (787 us measured 2041 once) named a program 11% slower the best. The measurements
// are those of that run's settle: the best, then its two rivals.
TEST(Tuner, OneSlowMeasurementDoesNotLoseAContest) {
  EXPECT_EQ(search::contest_winner({{2041.2, 786.6}, {887.9, 849.5}, {902.0, 871.3}}), 0);
  // A program slower in both of its measurements loses.
  EXPECT_EQ(search::contest_winner({{900, 905}, {880, 890}}), 1);
  // Odd windows: the median, so one fast measurement does not win either.
  EXPECT_EQ(search::contest_winner({{500, 990, 995}, {900, 905, 2000}}), 1);
  // Empty windows (every measurement failed) never win; equals: the first.
  EXPECT_EQ(search::contest_winner({{}, {700, 710}, {700, 710}}), 1);
  EXPECT_EQ(search::contest_winner({{}, {}}), -1);
  EXPECT_EQ(search::contest_winner({}), -1);
}

// At the end of a run the best and the two fastest other confirmed programs are
// measured twice more, side by side, and the winner is the best: a program whose
// confirmation caught a fast phase meets its rivals in the same one. Here every
// measurement after a program's third is 30 times slower.
TEST(Tuner, SettlesTheBestAmongTheFastestAtTheEnd) {
  std::string db = temp_db("settle");
  search::TuneOptions opt;
  opt.trials = 9;
  opt.batch = 3;
  opt.seed = 8;
  // The first round confirms all three of its programs (none is the best yet), so the
  // settle has two others to choose from whatever later first measurements show.
  opt.confirm_programs = 3;
  opt.program_hook = basin::testing::one_at_a_time(fast_three_times);
  opt.timeout_seconds = 600;  // a worker replaced after a timeout would forget the hook's counts
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  search::TuneResult r;
  {
    search::RecordStore store(db);
    search::TaskTuner tuner(small_gemm(), store, *random, nullptr, opt);
    while (!tuner.done()) ASSERT_GT(tuner.round(opt.batch), 0);
    std::map<int64_t, size_t> before;
    for (const search::Record& rec : store.all()) before[rec.id] = rec.confirm_us.size();
    tuner.settle();
    r = tuner.result();
    ASSERT_TRUE(r.best);
    EXPECT_TRUE(r.settled);
    // The contest: the programs measured twice more.
    std::vector<search::Record> contest;
    for (const search::Record& rec : store.all())
      if (rec.confirm_us.size() == before[rec.id] + 2) contest.push_back(rec);
    ASSERT_EQ(contest.size(), 3u);
    bool best_in = false;
    for (const search::Record& rec : contest) {
      best_in |= rec.id == r.best->id;
      EXPECT_GE(window_us(rec, 2), window_us(*r.best, 2)) << "the best did not win the side-by-side measurement";
    }
    EXPECT_TRUE(best_in);
    EXPECT_EQ(r.curve.back().best_us, r.best_latency_us);
    EXPECT_EQ(r.best_latency_us, r.best->latency_us());
    EXPECT_EQ(store.best(r.task_key, "llvm")->config, r.best->config);
  }
  // Resumed with nothing left to measure: nothing is measured again, and the best is
  // the one named, not the program of lowest median.
  search::TuneResult again = tune_random(db, opt);
  EXPECT_EQ(again.measured, 0);
  EXPECT_FALSE(again.settled);
  EXPECT_EQ(again.best_remeasurements, 0);
  EXPECT_EQ(again.best->id, r.best->id);
  EXPECT_EQ(again.best_latency_us, r.best_latency_us);
  std::remove(db.c_str());
}

// Regression: a program that ran once and failed every confirmation counted at its
// first measurement, so one fast measurement made the best. Here every measurement
// after a program's first computes nothing (a wrong result): nothing is confirmed, and
// the result is the fallback, marked unconfirmed.
TEST(Tuner, AProgramThatFailsItsConfirmationsIsNotTheBest) {
  std::string db = temp_db("unconfirmable");
  search::TuneOptions opt;
  opt.trials = 6;
  opt.batch = 3;
  opt.seed = 9;
  opt.timeout_seconds = 600;  // a worker replaced after a timeout would forget the hook's counts
  opt.program_hook = basin::testing::one_at_a_time([](const LoweredFunc& f) {
    static std::set<std::string> seen;  // in the measurement worker
    if (seen.insert(to_string(f.body)).second) return f;
    LoweredFunc wrong = f;
    wrong.body = make_for(Var("never"), Expr(int64_t{0}), Expr(int64_t{0}), ForKind::Serial, f.body);
    return wrong;
  });
  search::TuneResult r = tune_random(db, opt);
  ASSERT_TRUE(r.best);
  EXPECT_GT(r.confirmations, 0);
  EXPECT_FALSE(r.best->confirmed());
  EXPECT_TRUE(r.bests.empty());
  for (const search::Record& rec : search::RecordStore(db).all()) EXPECT_FALSE(rec.confirmed());
  std::remove(db.c_str());
}

// Regression: the network scheduler asks for the result in the middle of a round (its
// stop callback). The fastest program then shows as the best before it is confirmed,
// and the round's confirmation skipped it, as no program beat it: the run ended with
// an unconfirmed best.
TEST(Tuner, AResultAskedForMidRoundStillConfirmsTheBest) {
  std::string db = temp_db("mid_round");
  search::RecordStore store(db);
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  search::TuneOptions opt;
  opt.trials = 4;
  opt.seed = 2;
  // The first program measured is the fastest: every later one runs its body 30 times.
  opt.program_hook = basin::testing::one_at_a_time([](const LoweredFunc& f) {
    static int programs = 0;  // in the measurement worker
    return programs++ == 0 ? f : repeated(f, 30);
  });
  search::TaskTuner tuner(small_gemm(), store, *random, nullptr, opt);
  int asked = 0;
  EXPECT_EQ(tuner.round(4, [&] {
    ++asked;
    tuner.result();
    return false;
  }),
            4);
  EXPECT_GT(asked, 0);
  const search::TuneResult& r = tuner.result();
  ASSERT_TRUE(r.best);
  EXPECT_TRUE(r.best->confirmed());
  EXPECT_GT(r.confirmations, 0);
  std::remove(db.c_str());
}

TEST(Tuner, StopsOnItsTimeBudget) {
  std::string db = temp_db("budget");
  search::RecordStore store(db);
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  search::TuneOptions opt;
  opt.budget_seconds = 1.0;
  opt.batch = 4;
  search::TuneResult r = search::tune_task(small_gemm(), store, *random, nullptr, opt);
  EXPECT_GT(r.measured, 0);
  EXPECT_LT(r.seconds, 6.0);  // the budget, one candidate's timeout at most
  std::remove(db.c_str());
}

// A batch far larger than the budget allows: compiled a slice at a time, so the budget
// stops the round after one slice, not after the whole batch is compiled.
TEST(Tuner, ABudgetStopsARoundMidBatch) {
  std::string db = temp_db("budget_batch");
  search::RecordStore store(db);
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  search::TuneOptions opt;
  opt.budget_seconds = 1.0;
  opt.batch = 1000;
  search::TuneResult r = search::tune_task(small_gemm(), store, *random, nullptr, opt);
  EXPECT_GT(r.measured, 0);
  EXPECT_LT(r.measured, 1000);
  EXPECT_LT(r.seconds, 15.0);  // the budget and one slice of 16 programs, not 1000
  std::remove(db.c_str());
}

// Each round's batch, and each contest's measurements, are compiled ahead on two
// threads and measured from there; one compile thread compiles each program just
// before it runs. The records are alike.
// A random search of small_gemm() from a fresh records file: `trials` trials in
// batches of `batch`, the options set by `adjust`; its result and its records.
struct RandomRun {
  search::TuneResult result;
  std::vector<search::Record> records;
};
RandomRun random_run(const char* name, int trials, int batch, const std::function<void(search::TuneOptions&)>& adjust) {
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  std::string db = temp_db(name);
  RandomRun run;
  {
    search::RecordStore store(db);
    search::TuneOptions opt;
    opt.trials = trials;
    opt.batch = batch;
    adjust(opt);
    run.result = search::tune_task(small_gemm(), store, *random, nullptr, opt);
    run.records = store.all();
  }
  std::remove(db.c_str());
  return run;
}

TEST(Tuner, CompilesEachBatchAheadOfItsMeasurement) {
  for (int threads : {2, 1}) {
    auto [r, records] = random_run(threads == 2 ? "ahead" : "not_ahead", 10, 5,
                                   [&](search::TuneOptions& opt) { opt.compile_threads = threads; });
    EXPECT_EQ(r.measured, 10);
    EXPECT_EQ(r.errors, 0);
    if (threads == 1) {
      EXPECT_EQ(r.measured_ahead, 0);
    } else {
      // The batches', and the contests' (confirmations and the best's measurements in
      // them; a round without a challenger measures the best alone, not ahead).
      EXPECT_GE(r.measured_ahead, 10 + r.confirmations);
      EXPECT_LE(r.measured_ahead, 10 + r.confirmations + r.best_remeasurements);
    }
    for (const search::Record& rec : records) EXPECT_GT(rec.compile_seconds, 0);
  }
}

// The tuner's instruction limit reaches its measurer: with a limit smaller than any
// program every trial is a recorded "too large to compile" error, and there is no best;
// with none (0) the same programs run.
TEST(Tuner, ProgramsOverItsInstructionLimitAreRecordedErrors) {
  for (int64_t limit : {int64_t{1}, int64_t{0}}) {
    auto [r, records] = random_run(limit ? "too_large" : "no_limit", 6, 3,
                                   [&](search::TuneOptions& opt) { opt.max_instructions = limit; });
    EXPECT_EQ(r.measured, 6);
    EXPECT_EQ(r.errors, limit ? 6 : 0);
    EXPECT_EQ(r.best.has_value(), limit == 0);
    for (const search::Record& rec : records)
      EXPECT_EQ(rec.error.rfind("too large to compile", 0) == 0, limit != 0) << rec.error;
  }
}

// A new program slower than slow_factor times the fastest so far is timed briefly (one
// round: TuneOptions::slow_factor); the first program, and every program with the
// factor 0, gets the full rounds.
TEST(Tuner, ProgramsFarSlowerThanTheFastestAreTimedBriefly) {
  for (double factor : {1.0, 0.0}) {
    auto [r, records] = random_run(factor > 0 ? "brief" : "not_brief", 12, 6,
                                   [&](search::TuneOptions& opt) { opt.slow_factor = factor; });
    EXPECT_EQ(r.measured, 12);
    int brief = 0;
    double fastest = std::numeric_limits<double>::infinity();
    for (const search::Record& rec : records) {
      ASSERT_TRUE(rec.ok()) << rec.error;
      if (rec.latencies_us.size() == 1) {
        ++brief;
        EXPECT_GT(rec.latencies_us[0], factor * fastest);  // slower than the bound when measured
      } else {
        EXPECT_EQ(rec.latencies_us.size(), 3u);
      }
      fastest = std::min(fastest, rec.latency_us());
    }
    ASSERT_FALSE(records.empty());
    EXPECT_EQ(records.front().latencies_us.size(), 3u);
    EXPECT_EQ(r.brief, brief);
    if (factor > 0) {
      EXPECT_GT(brief, 0);
    } else {
      EXPECT_EQ(brief, 0);
    }
  }
}

// A tuner's clock runs only in its own work (constructor, rounds, settle): a network's
// tasks and interleaved strategies take turns, and each counts its own time.
TEST(Tuner, ATunersClockStopsBetweenItsRounds) {
  std::string db = temp_db("clock");
  search::RecordStore store(db);
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  search::TuneOptions opt;
  opt.trials = 8;
  auto t0 = std::chrono::steady_clock::now();
  search::TaskTuner tuner(small_gemm(), store, *random, nullptr, opt);
  ASSERT_EQ(tuner.round(4), 4);
  const double after_one = tuner.result().seconds;
  ::usleep(1500 * 1000);  // another tuner's round
  EXPECT_DOUBLE_EQ(tuner.result().seconds, after_one);
  ASSERT_EQ(tuner.round(4), 4);
  tuner.settle();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const search::TuneResult& r = tuner.result();
  EXPECT_GT(r.seconds, after_one);
  EXPECT_LT(r.seconds, wall - 1.4);
  EXPECT_LE(r.curve.back().seconds, r.seconds);
  EXPECT_GE(r.overhead_fraction, 0.0);
  std::remove(db.c_str());
}

// Strategies tuned at once take a round each in turn, each with its own records and
// clock, so that both meet the same phases of a shared machine.
TEST(Tuner, InterleavedStrategiesTakeTurnsRoundByRound) {
  std::string db_a = temp_db("turns_a"), db_b = temp_db("turns_b");
  search::RecordStore a(db_a), b(db_b);
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  std::unique_ptr<search::Strategy> annealing = search::make_strategy("annealing");
  std::unique_ptr<models::Estimator> gbt = models::make_estimator("gbt");
  search::TuneOptions opt;
  opt.trials = 12;
  opt.batch = 4;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<search::TuneResult> rs =
      search::tune_interleaved(small_gemm(), {{random.get(), nullptr, &a}, {annealing.get(), gbt.get(), &b}}, opt);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].strategy, "random");
  EXPECT_EQ(rs[1].strategy, "annealing");
  for (const search::TuneResult& r : rs) {
    EXPECT_EQ(r.trials, 12);
    EXPECT_EQ(r.rounds, 3);
    EXPECT_TRUE(r.best.has_value());
  }
  // Each clock counts its own rounds: together no more than the wall time.
  EXPECT_LE(rs[0].seconds + rs[1].seconds, wall + 0.01);
  // Each file has its strategy's programs only, and the rounds alternate: the second
  // strategy's round k started after the first's round k and before its round k+1.
  std::vector<search::Record> ra = a.task_records(rs[0].task_key, "llvm"), rb = b.task_records(rs[1].task_key, "llvm");
  ASSERT_EQ(ra.size(), 12u);
  ASSERT_EQ(rb.size(), 12u);
  auto started = [](std::vector<search::Record> v) {
    std::vector<double> t;
    for (const search::Record& r : v) t.push_back(r.started_at);
    std::sort(t.begin(), t.end());
    return t;
  };
  std::vector<double> sa = started(ra), sb = started(rb);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_GT(sb[4 * k], sa[4 * k + 3]) << "round " << k;
    if (k < 2) {
      EXPECT_LT(sb[4 * k + 3], sa[4 * k + 4]) << "round " << k;
    }
  }
  for (const search::Record& r : ra) EXPECT_EQ(r.estimator_version.rfind("random", 0), 0u) << r.estimator_version;
  for (const search::Record& r : rb) EXPECT_EQ(r.estimator_version.rfind("annealing", 0), 0u) << r.estimator_version;
  // Two strategies cannot share a records file: each would resume from the other's.
  search::RecordStore again(db_a);
  EXPECT_THROW(search::tune_interleaved(small_gemm(), {{random.get(), nullptr, &a}, {annealing.get(), gbt.get(), &again}},
                                        opt),
               Error);
  std::remove(db_a.c_str());
  std::remove(db_b.c_str());
}

TEST(Tuner, RejectsWhatItCannotRun) {
  std::string db = temp_db("reject");
  search::RecordStore store(db);
  std::unique_ptr<search::Strategy> gradient = search::make_strategy("gradient");
  std::unique_ptr<models::Estimator> gbt = models::make_estimator("gbt");
  search::TuneOptions opt;
  opt.trials = 4;
  EXPECT_THROW(search::tune_task(small_gemm(), store, *gradient, gbt.get(), opt), Error);
  EXPECT_THROW(search::tune_task(small_gemm(), store, *gradient, nullptr, opt), Error);
  opt.trials = 0;
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  EXPECT_THROW(search::tune_task(small_gemm(), store, *random, nullptr, opt), Error);
  opt.trials = 4;
  opt.target = "cuda9";
  EXPECT_THROW(search::tune_task(small_gemm(), store, *random, nullptr, opt), Error);
  opt.target = "llvm";
  for (double factor : {0.5, -1.0, std::numeric_limits<double>::infinity()}) {
    opt.slow_factor = factor;
    EXPECT_THROW(search::tune_task(small_gemm(), store, *random, nullptr, opt), Error) << factor;
  }
  EXPECT_EQ(store.count(), 0);
  std::remove(db.c_str());
}

TEST(Tuner, PairwiseAccuracy) {
  EXPECT_DOUBLE_EQ(search::pairwise_accuracy({1, 2, 3}, {10, 20, 30}), 1.0);
  EXPECT_DOUBLE_EQ(search::pairwise_accuracy({3, 2, 1}, {10, 20, 30}), 0.0);
  EXPECT_DOUBLE_EQ(search::pairwise_accuracy({1, 2}, {5, 5}), -1.0);
}

}  // namespace
