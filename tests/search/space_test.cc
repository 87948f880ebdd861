// The search space's moves: valid new programs, tilings transplanted into sibling
// sketches, register tiles reshaped and filled, and the evaluators behind them.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <unistd.h>

#include "codegen/version.h"
#include "core/ops/registry.h"
#include "core/ops/workloads.h"
#include "core/util/error.h"
#include "core/util/host.h"
#include "models/dataset.h"
#include "models/estimator.h"
#include "relax/features.h"
#include "relax/relaxed_sketch.h"
#include "records/records.h"
#include "search/tuner.h"
#include "tests/codegen/fault_hooks.h"
#include "tests/search/search_test_util.h"

using namespace basin;
using namespace basin::search_test;

namespace {

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
    EXPECT_EQ(batch[i].features.size(),
              static_cast<size_t>(alone.stores) * relax::num_features(relax::FeatureSet::Cpu));
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
  const search::Candidate parent =
      parse_program(space,
                    R"({"sketch":"tile.vec=c.acc1.stage","splits":{"n":[1,1,1],"c":[32,1,16],"h":[7,1,1],"w":[7,1,1],)"
                    R"("rc":[8],"rh":[3],"rw":[3]},"unroll":512})",
                    &s);
  EXPECT_EQ(space.tile_registers(parent, 64), 1);
  EXPECT_EQ(space.tile_registers(parent, 32), 2);
  const std::vector<search::Candidate> full = space.filled_tiles(parent, 32, 64);
  ASSERT_FALSE(full.empty());
  EXPECT_EQ(space.tile_registers(full.front(), 64), 28);
  std::set<std::vector<int64_t>> tiles;
  // Ordered by pace (a step's multiply-adds against its loads and against 8), then
  // fullness.
  auto pace = [&](const search::Candidate& f) {
    const int64_t r = space.tile_registers(f, 64);
    return static_cast<double>(r) / static_cast<double>(std::max<int64_t>({r, space.tile_loads(f, 64), 8}));
  };
  double last = 1;
  bool best_tile = false;
  for (const search::Candidate& f : full) {
    EXPECT_EQ(f.sketch, parent.sketch);
    EXPECT_EQ(f.config.unroll, parent.config.unroll);  // 512: every tile's loops unrolled
    EXPECT_EQ(sched::invalid_reason(*s, f.config), "") << f.json;
    EXPECT_TRUE(tiles.insert(space.register_tile(f)).second) << "a tile twice: " << f.json;
    const int64_t r = space.tile_registers(f, 64);
    EXPECT_LE(pace(f), last) << "not the fastest paced first";
    EXPECT_GE(2 * r, 32 - 4);
    EXPECT_LE(space.live_registers(f, 64), 32) << f.json;
    last = pace(f);
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
  for (const search::Candidate& f : space.filled_tiles(wide, 32, 64)) {
    const std::vector<int64_t> t = space.register_tile(f);
    for (size_t k = 0; k < s->splits.size(); ++k)
      if (s->splits[k].parts >= 2) {
        EXPECT_EQ(f.config.factors[k][1], 1) << f.json;
      }
    EXPECT_EQ(f.config.unroll, t[2] * t[3] > 16 ? 64 : 16) << f.json;
    EXPECT_LE(space.live_registers(f, 64), 32);
  }
  for (const search::Candidate& f : space.filled_tiles(parent, 16, 32)) {
    const int64_t r = space.tile_registers(f, 32);
    EXPECT_LE(space.live_registers(f, 32), 16);
    EXPECT_GE(2 * r, 16 - 4);
    EXPECT_EQ(space.register_tile(f)[1] % 8, 0) << "not whole AVX2 vectors: " << f.json;
  }
  // The channels' vectors are innermost, so a tile V vectors wide keeps V weight
  // vectors live across its pixels (assembled a lane at a time: two registers more)
  // and one broadcast: AVX-512's fullest tiles of 28 are one vector of 16 channels by
  // 28 pixels (28 + 1 + 1 + 2), none 2 x 14 (28 + 2 + 1 + 2) or 4 x 7 (28 + 4 + 1 + 2).
  const std::vector<search::Candidate> fullest512 = space.filled_tiles(parent, 32, 64, /*fullest_only=*/true);
  ASSERT_FALSE(fullest512.empty());
  for (const search::Candidate& f : fullest512) {
    EXPECT_EQ(space.tile_registers(f, 64), 28);
    EXPECT_EQ(space.live_registers(f, 64), 32);
    EXPECT_EQ(space.register_tile(f)[1], 16) << f.json;
  }
  // Whole tiles have no partial tile at an edge: on AVX2, C12's 7 x 7 output makes the
  // fullest 8 channels by a whole row or column of 7 (the fastest tile there), where
  // the fullest of all are 12 with partial tiles (4 x 3 or 2 x 6 of 7 x 7: 12 + 4).
  const std::vector<search::Candidate> whole =
      space.filled_tiles(parent, 16, 32, /*fullest_only=*/true, /*whole_only=*/true);
  ASSERT_FALSE(whole.empty());
  for (const search::Candidate& f : whole) {
    const std::vector<int64_t> t = space.register_tile(f);
    EXPECT_EQ(space.tile_registers(f, 32), 7) << f.json;
    EXPECT_EQ(t[1], 8) << f.json;
    EXPECT_EQ(t[2] * t[3], 7) << f.json;
  }
  const std::vector<search::Candidate> fullest = space.filled_tiles(parent, 16, 32, /*fullest_only=*/true);
  ASSERT_FALSE(fullest.empty());
  EXPECT_EQ(space.tile_registers(fullest.front(), 32), 12);
  EXPECT_EQ(space.live_registers(fullest.front(), 32), 16);
  // The generic rule's sketches hold no register tile of accumulators.
  search::TaskSpace softmax(ops::build_op("softmax", std::map<std::string, std::string>{{"shape", "12,197,197"}}));
  std::mt19937_64 rng(3);
  const search::Candidate r = softmax.random(rng);
  EXPECT_EQ(softmax.tile_registers(r, 64), 0);
  EXPECT_TRUE(softmax.filled_tiles(r, 32, 64).empty());
}

// A tile vectorized along a conv's width holds its input's vectors of every row it
// covers while its channels' loop outside reuses them (Zen 4): resnet18-c2's sketches
// vectorized along w read the input by n, h and w and the weight by c alone; with 56
// pixels no whole AVX-512 vector fits, so the filled tiles take 8 lanes. 4 channels by
// 4 rows (2020 us, the fastest measured) keep 16 + 4 + 1 registers and are filled
// tiles; 4 by 7 (28 + 7 + 1: 3173 us) and 2 by 14 (28 + 14 + 1: 4141 us) spill and are
// not; one channel by 28 rows uses each input vector once (28 + 1 + 1).
TEST(TaskSpace, FilledTilesCountTheVectorOperandsRows) {
  const ops::Workload& w = ops::find_workload("resnet18-c2");
  search::TaskSpace space(ops::build_op(w.op, w.params));
  const sched::Sketch* s = nullptr;
  const search::Candidate parent =
      parse_program(space,
                    R"({"sketch":"tile.vec=w.acc1.stage","splits":{"n":[1,1,1],"c":[32,1,2],"h":[2,1,14],"w":[2,1,7],)"
                    R"("rc":[16],"rh":[3],"rw":[1]},"unroll":1024})",
                    &s);
  EXPECT_EQ(s->vector_operand_axes, (std::vector<int>{0, 2, 3}));  // n, h, w
  const sched::Sketch& by_c = space.sketches()[static_cast<size_t>(space.sketch_index("tile.vec=c.acc1.stage"))];
  EXPECT_EQ(by_c.vector_operand_axes, (std::vector<int>{1}));
  std::set<std::vector<int64_t>> tiles;
  for (const search::Candidate& f : space.filled_tiles(parent, 32, 64)) {
    const std::vector<int64_t> t = space.register_tile(f);  // n, c, h, w
    EXPECT_EQ(t[3], 8) << f.json;
    const int64_t live = space.live_registers(f, 64);
    EXPECT_EQ(live, t[1] * t[2] + (t[1] > 1 ? t[2] : 1) + 1) << f.json;
    EXPECT_LE(live, 32) << f.json;
    EXPECT_FALSE(t[1] == 4 && t[2] == 7) << f.json;
    EXPECT_FALSE(t[1] == 2 && t[2] == 14) << f.json;
    tiles.insert(t);
  }
  EXPECT_TRUE(tiles.count({1, 1, 28, 8, 0, 0, 0})) << "no 1x28x8 tile";
  // 1 x 28 x 8 loads as many values a step as it multiplies (29), so the tiles that
  // reuse their loads come first: 4 x 4 x 8 (16 multiply-adds, 8 loads).
  const std::vector<search::Candidate> fullest = space.filled_tiles(parent, 32, 64, /*fullest_only=*/true);
  ASSERT_FALSE(fullest.empty());
  EXPECT_EQ(space.register_tile(fullest.front()), (std::vector<int64_t>{1, 4, 4, 8, 0, 0, 0})) << fullest.front().json;
  // On AVX2, 8 lanes are a whole vector.
  for (const search::Candidate& f : space.filled_tiles(parent, 16, 32, /*fullest_only=*/true)) {
    const std::vector<int64_t> t = space.register_tile(f);
    EXPECT_EQ(t[3] % 8, 0) << f.json;
    EXPECT_LE(space.live_registers(f, 32), 16) << f.json;
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
  const std::vector<search::Candidate> fullest = space.filled_tiles(parent, 32, 64, /*fullest_only=*/true);
  ASSERT_GE(fullest.size(), 2u);
  EXPECT_EQ(space.register_tile(fullest.front()), (std::vector<int64_t>{4, 64, 0}));
  EXPECT_EQ(space.tile_loads(fullest.front(), 64), 8);
  int64_t loads = 0;
  for (const search::Candidate& f : fullest) {
    EXPECT_EQ(space.tile_registers(f, 64), 16) << f.json;
    EXPECT_GE(space.tile_loads(f, 64), loads) << f.json;
    EXPECT_LE(space.tile_loads(f, 64), 16) << f.json;  // as fast paced as 4 x 64
    loads = space.tile_loads(f, 64);
  }
  // 16 x 16 (17 loads for 16 multiply-adds) comes after them.
  std::vector<std::vector<int64_t>> order;
  for (const search::Candidate& f : space.filled_tiles(parent, 32, 64)) order.push_back(space.register_tile(f));
  const auto at = [&](const std::vector<int64_t>& t) { return std::find(order.begin(), order.end(), t) - order.begin(); };
  ASSERT_LT(at({16, 16, 0}), static_cast<long>(order.size()));
  EXPECT_LT(at({4, 64, 0}), at({16, 16, 0}));
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
  const std::vector<search::Candidate> strided = space.filled_tiles(by_i, 32, 64, /*fullest_only=*/true);
  ASSERT_FALSE(strided.empty());
  EXPECT_EQ(space.register_tile(strided.front()), (std::vector<int64_t>{16, 16, 0}));
  const std::vector<search::Candidate> packed = space.filled_tiles(by_i_packed, 32, 64, /*fullest_only=*/true);
  ASSERT_FALSE(packed.empty());
  EXPECT_EQ(space.register_tile(packed.front()), (std::vector<int64_t>{64, 4, 0}));
  // resnet18-c2 along the width: the input's rows are vectors, the weight's channels broadcasts.
  const ops::Workload& c2 = ops::find_workload("resnet18-c2");
  search::TaskSpace conv(ops::build_op(c2.op, c2.params));
  const search::Candidate by_w = parse_program(
      conv, R"({"sketch":"tile.vec=w.acc1.stage","splits":{"n":[1,1,1],"c":[4,1,16],"h":[56,1,1],"w":[7,1,8],)"
            R"("rc":[8],"rh":[3],"rw":[3]},"unroll":512})");
  EXPECT_EQ(conv.tile_loads(by_w, 64), 17);  // 16 x 1 x 8
  EXPECT_FALSE(conv.sketches()[static_cast<size_t>(by_w.sketch)].vector_operand_strided);
  // Along the output channels, the weight (c, rc, rh, rw) is strided unless packed.
  EXPECT_TRUE(conv.sketches()[static_cast<size_t>(conv.sketch_index("tile.vec=c.acc1.stage"))].vector_operand_strided);
  EXPECT_FALSE(
      conv.sketches()[static_cast<size_t>(conv.sketch_index("tile.vec=c.pack.acc1.stage"))].vector_operand_strided);
  // Of its tiles of 16 accumulators (the fullest, 1 x 28 x 8, uses each input vector
  // once), 4 x 4 x 8 comes first.
  std::vector<search::Candidate> c2_sixteen;
  for (search::Candidate& f : conv.filled_tiles(by_w, 32, 64))
    if (conv.tile_registers(f, 64) == 16) c2_sixteen.push_back(std::move(f));
  ASSERT_FALSE(c2_sixteen.empty());
  EXPECT_EQ(conv.register_tile(c2_sixteen.front()), (std::vector<int64_t>{1, 4, 4, 8, 0, 0, 0}));
  EXPECT_EQ(conv.tile_loads(c2_sixteen.front(), 64), 8);
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
          EXPECT_EQ(b.values[(static_cast<size_t>(i) * b.stores + st) * b.features + f],
                    s.features[st * b.features + f]);
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
        for (const Eigen::VectorXd& p : built.space().sample(batch, rng, 20, 5))
          x.insert(x.end(), p.data(), p.data() + nv);
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

}  // namespace
