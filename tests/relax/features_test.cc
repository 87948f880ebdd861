// The relaxation's features: for random configurations of every sketch of the operator
// suite, the symbolic feature expressions evaluated at the configuration's integer
// point equal the features of the concrete program (to 1e-6), every value is finite,
// and known programs have the values their definitions give.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/graph/fusion.h"
#include "core/graph/passes.h"
#include "core/ops/registry.h"
#include "core/schedule/lower_sketch.h"
#include "relax/features.h"
#include "tests/ops/op_cases.h"

namespace basin {
namespace {

VarValues values_of(const VarMap& m) {
  VarValues v;
  for (const auto& [id, e] : m) v[id] = Value::of_int(DType::i64(), const_int(e));
  return v;
}

std::vector<std::pair<std::string, std::string>> suite() {
  return {{"conv2d", "in_channels=8 out_channels=16 height=10 width=12 kernel=3 padding=1"},
          {"conv2d", "in_channels=6 out_channels=8 height=9 width=9 kernel=3 stride=2 padding=1"},
          {"depthwise_conv2d", "channels=16 height=10 width=10"},
          {"dense", "M=12 K=40 N=32"},
          {"batch_matmul", "B=3 M=8 K=12 N=16"},
          {"softmax", "shape=6,40"},
          {"softmax", "shape=2,3,5,8 axis=1"},
          {"layer_norm", "shape=4,48"},
          {"conv2d_bias_relu", "in_channels=8 out_channels=16 height=8 width=8 kernel=3 padding=1"},
          // Awkward extents: guarded splits.
          {"dense", "M=37 K=10 N=23"},
          {"matmul", "M=257 K=16 N=8"},
          {"softmax", "shape=4,197"},
          // A tensor-core sketch (gpu.mma.tf32) beside the tile.
          {"matmul", "M=32 K=16 N=16"}};
}

TEST(Features, SymbolicFeaturesAtAConfigurationEqualTheConcreteProgramsFeatures) {
  std::mt19937_64 rng(9);
  int checked = 0;
  for (const auto& [op, params] : suite()) {
    ops::OpGraph g = ops::build_op(op, parse(params));
    for (const sched::Sketch& s : sched::cpu_sketches(g)) {
      sched::KnobValues sym = sched::symbolic_knobs(s);
      std::vector<relax::StoreFeatures> symbolic = relax::extract_features(sched::lower_sketch_structure(g, s, sym));
      for (int t = 0; t < 5; ++t) {
        sched::Config c = sched::random_config(s, rng);
        auto at_point = relax::evaluate_features(symbolic, values_of(sched::knob_substitution(sym, c)));
        auto concrete = relax::evaluate_features(
            relax::extract_features(sched::lower_sketch_structure(g, s, sched::concrete_knobs(c))), {});
        ASSERT_EQ(at_point.size(), concrete.size()) << op << " " << s.name;
        for (size_t st = 0; st < concrete.size(); ++st)
          for (int f = 0; f < relax::num_features(); ++f) {
            ASSERT_TRUE(std::isfinite(at_point[st][f])) << relax::feature_names()[f];
            EXPECT_NEAR(at_point[st][f], concrete[st][f], 1e-6)
                << op << " " << s.name << " store " << st << " " << relax::feature_names()[f] << " "
                << sched::config_to_json(s, c);
          }
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 100);
}

// The GPU feature set, on the GPU sketches of the same suite.
TEST(Features, GpuFeaturesAtAConfigurationEqualTheConcreteProgramsFeatures) {
  std::mt19937_64 rng(10);
  const relax::FeatureSet gpu = relax::FeatureSet::Gpu;
  ASSERT_EQ(relax::num_features(gpu), relax::num_features() + 11);
  int checked = 0;
  for (const auto& [op, params] : suite()) {
    ops::OpGraph g = ops::build_op(op, parse(params));
    for (const sched::Sketch& s : sched::gpu_sketches(g)) {
      sched::KnobValues sym = sched::symbolic_knobs(s);
      std::vector<relax::StoreFeatures> symbolic =
          relax::extract_features(sched::lower_sketch_structure(g, s, sym), gpu);
      for (int t = 0; t < 5; ++t) {
        sched::Config c = sched::random_config(s, rng);
        auto at_point = relax::evaluate_features(symbolic, values_of(sched::knob_substitution(sym, c)));
        auto concrete = relax::evaluate_features(
            relax::extract_features(sched::lower_sketch_structure(g, s, sched::concrete_knobs(c)), gpu), {});
        ASSERT_EQ(at_point.size(), concrete.size()) << op << " " << s.name;
        for (size_t st = 0; st < concrete.size(); ++st) {
          ASSERT_EQ(concrete[st].size(), static_cast<size_t>(relax::num_features(gpu)));
          for (int f = 0; f < relax::num_features(gpu); ++f) {
            ASSERT_TRUE(std::isfinite(at_point[st][f])) << relax::feature_names(gpu)[f];
            EXPECT_NEAR(at_point[st][f], concrete[st][f], 1e-6)
                << op << " " << s.name << " store " << st << " " << relax::feature_names(gpu)[f] << " "
                << sched::config_to_json(s, c);
          }
        }
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 50);
}

// The GPU features of sketch s of g at configuration c, per store, raw (2^f - 1) by name.
struct GpuFeatures {
  std::vector<std::vector<double>> f;
  GpuFeatures(const ops::OpGraph& g, const sched::Sketch& s, const sched::Config& c)
      : f(relax::evaluate_features(
            relax::extract_features(sched::lower_sketch_structure(g, s, sched::concrete_knobs(c)),
                                    relax::FeatureSet::Gpu),
            {})) {}
  size_t size() const { return f.size(); }
  double at(size_t store, const std::string& name) const {
    const auto& names = relax::feature_names(relax::FeatureSet::Gpu);
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return std::exp2(f[store][i]) - 1;
    ADD_FAILURE() << name;
    return -1.0;
  }
};

TEST(Features, KnownGpuValuesOfADenseTile) {
  ops::OpGraph g = ops::build_op("dense", parse("M=64 K=32 N=128"));
  const sched::Sketch s = sched::gpu_sketches(g).at(0);
  sched::Config c;
  c.factors = {{2, 4, 2}, {1, 32, 2}, {8}};  // i: 64 = 4 blocks x 2 vthreads x 4 threads x 2; j: 128 = 2 x 1 x 32 x 2
  c.unroll = 16;
  const GpuFeatures f(g, s, c);
  auto at = [&](size_t store, const std::string& name) { return f.at(store, name); };
  // Stores: the accumulator's init, the two shared tiles' loads, the update, the output.
  ASSERT_EQ(f.size(), 5u);
  for (size_t st = 0; st < 5; ++st) {
    EXPECT_NEAR(at(st, "gpu.blocks"), 8, 1e-9);
    EXPECT_NEAR(at(st, "gpu.threads_per_block"), 128, 1e-9);
    EXPECT_NEAR(at(st, "gpu.shared_bytes"), (16 + 64) * 8 * 4, 1e-6);  // x: 16 x 8, w: 64 x 8
    EXPECT_NEAR(at(st, "gpu.thread_local_bytes"), 2 * 2 * 2 * 4, 1e-9);
  }
  EXPECT_NEAR(at(0, "gpu.vthreads"), 2, 1e-9);
  EXPECT_NEAR(at(1, "gpu.vthreads"), 1, 1e-9);  // the cooperative load
  EXPECT_NEAR(at(3, "buf1.shared"), 1, 1e-9);   // the update reads both tiles from shared memory
  EXPECT_NEAR(at(3, "buf2.shared"), 1, 1e-9);
  EXPECT_NEAR(at(4, "buf1.shared"), 0, 1e-9);  // the output reads the accumulator
}

// The tensor-core sketch: 2 x 2 warps of 2 x 4 fragments (a 64 x 64 tile), k steps of 16.
TEST(Features, KnownGpuValuesOfATensorCoreTile) {
  ops::OpGraph g = ops::build_op("dense", parse("M=64 K=32 N=128"));
  std::vector<sched::Sketch> sk = sched::gpu_sketches(g);
  ASSERT_EQ(sk.size(), 4u);  // gpu.tile, gpu.mma.tf32, .async2, .async3
  const sched::Sketch& s = sk[1];
  ASSERT_EQ(s.rule, sched::SketchRule::GpuMma);
  EXPECT_EQ(sk[2].name, "gpu.mma.tf32.async2");
  EXPECT_EQ(sk[3].name, "gpu.mma.tf32.async3");
  sched::Config c;
  c.factors = {{2, 2}, {2, 4}, {2}};
  c.unroll = 512;
  ASSERT_EQ(sched::invalid_reason(s, c), "");
  const GpuFeatures f(g, s, c);
  auto at = [&](size_t store, const std::string& name) { return f.at(store, name); };
  // Stores: the accumulator's init, the two shared tiles' loads, the fragments, the
  // lane exchange of the write-back, the output (128 bits at a time: 128 columns).
  ASSERT_EQ(f.size(), 6u);
  EXPECT_NEAR(at(5, "vector_lanes"), 4, 1e-9);
  EXPECT_NEAR(at(4, "vector_lanes"), 1, 1e-9);
  for (size_t st = 0; st < 6; ++st) {
    EXPECT_NEAR(at(st, "gpu.blocks"), 2, 1e-9);  // 64 / 64 x 128 / 64
    EXPECT_NEAR(at(st, "gpu.threads_per_block"), 128, 1e-9);
    // Padded rows, k innermost in both tiles: x[m][k] and the weights w[n][k].
    EXPECT_NEAR(at(st, "gpu.shared_bytes"), (64 * (16 + 4) + 64 * (16 + 4)) * 4, 1e-6);
    // 2 x 4 fragments of 4, and in the write-back the 2 elements taken from the pair.
    EXPECT_NEAR(at(st, "gpu.thread_local_bytes"), 2 * 4 * 4 * 4 + (st >= 4 ? 2 * 4 : 0), 1e-9);
    EXPECT_NEAR(at(st, "gpu.tensor_core"), st == 3 ? 1 : 0, 1e-9);
  }
  EXPECT_EQ(sched::gpu_tile_use(s, c).shared_bytes, (64 * 20 + 64 * 20) * 4);
  // Double buffered: two stages of each tile.
  const GpuFeatures f2(g, sk[2], c);
  EXPECT_NEAR(f2.at(0, "gpu.shared_bytes"), 2 * (64 * 20 + 64 * 20) * 4, 1e-6);
  EXPECT_EQ(sched::gpu_tile_use(sk[2], c).shared_bytes, 2 * (64 * 20 + 64 * 20) * 4);
  // Its copies: the two tiles' fills of the prologue and of the loop, one group in flight.
  int copies = 0;
  for (size_t st = 0; st < f2.size(); ++st) {
    const double a = f2.at(st, "gpu.async_copy");
    EXPECT_TRUE(a == 0 || a == 1) << a;
    copies += a == 1;
    if (a == 1) EXPECT_NEAR(f2.at(st, "gpu.tensor_core"), 0, 1e-9);
  }
  EXPECT_EQ(copies, 4);
  for (size_t st = 0; st < 6; ++st) EXPECT_NEAR(at(st, "gpu.async_copy"), 0, 1e-9);
  // FP16 fragments: the tensor cores at twice the TF32 rate.
  const sched::Sketch half = sched::gpu_sketches(g, "fp16").at(1);
  ASSERT_EQ(half.name, "gpu.mma.fp16");
  const GpuFeatures fh(g, half, sched::default_config(half));
  int fragments = 0;
  for (size_t st = 0; st < fh.size(); ++st) {
    const double v = fh.at(st, "gpu.tensor_core");
    EXPECT_TRUE(v == 0 || v == 2) << v;
    fragments += v == 2;
  }
  EXPECT_EQ(fragments, 1);
  EXPECT_EQ(sched::gpu_tile_use(s, c).threads, 128);
  EXPECT_EQ(sched::gpu_tile_use(s, c).registers, 32);
}

TEST(Features, KnownValuesOfAMatmulTile) {
  ops::OpGraph g = ops::build_op("matmul", parse("M=64 K=32 N=128"));
  std::vector<sched::Sketch> sk = sched::cpu_sketches(g);
  const sched::Sketch& s = sched::find_sketch(sk, "tile.vec=j.acc2");
  sched::Config c;
  c.factors = {{2, 2, 4}, {1, 2, 16}, {8}};  // i: 64 = 4 x 2 x 2 x 4; j: 128 = 4 x 1 x 2 x 16; k: 32 = 4 x 8
  c.unroll = 64;
  auto f = relax::evaluate_features(
      relax::extract_features(sched::lower_sketch_structure(g, s, sched::concrete_knobs(c))), {});
  const auto& names = relax::feature_names();
  auto at = [&](size_t store, const std::string& name) {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return std::exp2(f[store][i]) - 1;
    ADD_FAILURE() << name;
    return 0.0;
  };
  ASSERT_EQ(f.size(), 3u);  // init, update, write-back
  EXPECT_NEAR(at(1, "iterations"), 64.0 * 128 * 32, 1e-6);
  EXPECT_NEAR(at(1, "flops_add"), 64.0 * 128 * 32, 1e-6);
  EXPECT_NEAR(at(1, "flops_mul"), 64.0 * 128 * 32, 1e-6);
  EXPECT_NEAR(at(1, "vector_lanes"), 16, 1e-9);
  EXPECT_NEAR(at(1, "parallel_extent"), 4 * 4, 1e-9);
  EXPECT_NEAR(at(1, "unroll_depth"), 64, 1e-9);
  EXPECT_NEAR(at(1, "local_alloc_bytes"), 4 * 16 * 4, 1e-9);  // acc: i3 x j3 floats
  // the accumulator is the stored buffer: 4 x 16 floats, each updated 64 * 128 * 32 / 64 times
  EXPECT_NEAR(at(1, "buf0.unique_bytes"), 4 * 16 * 4, 1e-9);
  EXPECT_NEAR(at(1, "buf0.reuse_ratio"), 64.0 * 128 * 32 / 64, 1e-6);
  EXPECT_NEAR(at(1, "buf1.unique_bytes"), 64.0 * 32 * 4, 1e-6);   // a[i, k]
  EXPECT_NEAR(at(1, "buf2.unique_bytes"), 32.0 * 128 * 4, 1e-6);  // b[k, j]
  EXPECT_NEAR(at(1, "buf2.innermost_stride"), 1, 1e-9);
  EXPECT_NEAR(at(1, "buf0.innermost_stride"), 1, 1e-9);  // j3, the vectorized loop
  EXPECT_NEAR(at(2, "iterations"), 64.0 * 128, 1e-6);
  // The vector loop (j3) reads b[k, j] contiguously (1 + stride 1), broadcasts a[i, k]
  // (1 + stride 0) and updates acc[i3, j3] contiguously.
  EXPECT_NEAR(at(1, "buf0.vector_stride"), 2, 1e-9);
  EXPECT_NEAR(at(1, "buf1.vector_stride"), 1, 1e-9);
  EXPECT_NEAR(at(1, "buf2.vector_stride"), 2, 1e-9);
  EXPECT_NEAR(at(1, "buf3.vector_stride"), 0, 1e-9);  // no fourth buffer
  // Traffic. The update's loops: i0 j0 (parallel, 4 x 4) i1 (2) j1 (1) i2 (2) j2 (2)
  // k0 (4) k1 (8) i3 (4) j3 (16). The nest inside k0 touches acc 4 x 16, a 4 x 8 and
  // b 8 x 16 floats: 896 bytes, within 2 KiB; the nest inside i0 (2816 bytes) is not.
  // So a 2 KiB cache loads 896 bytes per iteration of the loops outside (4*4*2*1*2*2*4 = 512).
  EXPECT_NEAR(at(1, "traffic.2KiB"), 896.0 * 512, 1e-6);
  // All of a, b and acc (8192 + 16384 + 256 bytes) fit in 32 KiB: each is loaded once.
  EXPECT_NEAR(at(1, "traffic.32KiB"), 24832, 1e-6);
  EXPECT_NEAR(at(1, "traffic.32MiB"), 24832, 1e-6);
}

// Two programs of ResNet-18's C2 layer that differ only in their outer tiles (the h and
// c tiles above the innermost five loops, and the rc split) had equal features in
// version 3, which saw only the innermost five levels; they ran in 848 and 967 us. The
// traffic features see every level.
TEST(Features, OuterTilesChangeTheTraffic) {
  ops::OpGraph g =
      ops::build_op("conv2d", parse("in_channels=64 out_channels=64 height=56 width=56 kernel=3 padding=1"));
  std::vector<sched::Sketch> sk = sched::cpu_sketches(g);
  auto features = [&](const std::string& json) {
    const sched::Sketch* s = nullptr;
    sched::Config c = sched::config_from_json(json, sk, "test", &s);
    return relax::evaluate_features(
        relax::extract_features(sched::lower_sketch_structure(g, *s, sched::concrete_knobs(c))), {});
  };
  auto a = features(
      R"({"sketch":"tile.vec=w.acc2.stage","splits":{"n":[1,1,1],"c":[1,2,8],"h":[1,28,2],"w":[1,1,14],"rc":[4],"rh":[1],"rw":[3]},"unroll":512})");
  auto b = features(
      R"({"sketch":"tile.vec=w.acc2.stage","splits":{"n":[1,1,1],"c":[2,4,8],"h":[7,1,2],"w":[1,1,14],"rc":[1],"rh":[1],"rw":[3]},"unroll":512})");
  ASSERT_EQ(a.size(), b.size());
  const auto& names = relax::feature_names();
  int differ = 0;
  for (size_t st = 0; st < a.size(); ++st)
    for (size_t i = 0; i < names.size(); ++i)
      if (std::abs(a[st][i] - b[st][i]) > 1e-9) {
        ++differ;
        EXPECT_EQ(names[i].rfind("traffic.", 0), 0u) << names[i] << " differs: only the traffic should see these tiles";
      }
  EXPECT_GT(differ, 0) << "the two programs still have equal features";
}

// A vector loop across rows is a gather: summing the rows of x[8, 64] with the rows
// vectorized reads x with 64 elements between lanes; a one-lane vector loop is no vector (0).
// A guard or index that reads a float value (a where's isnan condition fused after a
// softmax, as torch's exporter writes BERT's attention): its loads count as zero of
// their own type (an integer zero for a float load was an internal error).
TEST(Features, GuardsReadingFloatValuesExtract) {
  graph::Graph g;
  int x = g.add_input("x", {2, 16});
  int sm = g.add_node("softmax", {x}, {{"axis", int64_t{-1}}});
  int nan = g.add_node("isnan", {sm});
  int zero = g.add_constant("zero", NDArray(DType::f32(), {}));
  g.add_output(g.add_node("where", {nan, zero, sm}));
  graph::Partition p = graph::partition(graph::optimize(g));
  int extracted = 0;
  for (const graph::NetworkTask& t : p.tasks)
    for (const sched::Sketch& s : sched::cpu_sketches(t.graph)) {
      SCOPED_TRACE(t.label + " " + s.name);
      auto f = relax::extract_features(
          sched::lower_sketch_structure(t.graph, s, sched::concrete_knobs(sched::default_config(s))));
      EXPECT_FALSE(f.empty());
      ++extracted;
    }
  EXPECT_GT(extracted, 0);
}

TEST(Features, VectorStrideOfAGather) {
  ops::OpGraph g = ops::build_op("sum", parse("shape=8,64 axes=1"));
  std::vector<sched::Sketch> sk = sched::cpu_sketches(g);
  const auto& names = relax::feature_names();
  auto at = [&](const std::vector<std::vector<double>>& f, size_t store, const std::string& name) {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return std::exp2(f[store][i]) - 1;
    ADD_FAILURE() << name;
    return 0.0;
  };
  const sched::Sketch* s = nullptr;
  sched::Config c =
      sched::config_from_json(R"({"sketch":"stages","splits":{"st0.v":[4],"st0.r":[16]},"unroll":0})", sk, "test", &s);
  auto f = relax::evaluate_features(
      relax::extract_features(sched::lower_sketch_structure(g, *s, sched::concrete_knobs(c))), {});
  bool gather = false;
  for (size_t st = 0; st < f.size(); ++st)
    if (std::abs(at(f, st, "buf1.vector_stride") - 65) < 1e-9) gather = true;
  EXPECT_TRUE(gather) << "no store reads x with 64 elements between its vector lanes";
  c = sched::config_from_json(R"({"sketch":"stages","splits":{"st0.v":[1],"st0.r":[16]},"unroll":0})", sk, "test", &s);
  f = relax::evaluate_features(relax::extract_features(sched::lower_sketch_structure(g, *s, sched::concrete_knobs(c))),
                               {});
  for (size_t st = 0; st < f.size(); ++st) EXPECT_LE(at(f, st, "buf1.vector_stride"), 1.0 + 1e-9) << st;
}

// A feature's raw value (2^x - 1), summed over the stores of one configuration.
double feature_total(const ops::OpGraph& g, const std::string& json, const std::string& name) {
  std::vector<sched::Sketch> sk = sched::cpu_sketches(g);
  const sched::Sketch* s = nullptr;
  sched::Config c = sched::config_from_json(json, sk, "test", &s);
  auto f = relax::evaluate_features(
      relax::extract_features(sched::lower_sketch_structure(g, *s, sched::concrete_knobs(c))), {});
  const auto& names = relax::feature_names();
  double sum = 0;
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name)
      for (const auto& store : f) sum += std::exp2(store[i]) - 1;
  return sum;
}

// A tile past an awkward extent: summing the 13 rows of x[13, 64] two rows per vector
// needs a guard inside the vector loop (masked stores) at the seventh pair; 13 rows
// per vector divide the extent and compile without one.
TEST(Features, GuardsThatFailAtTheConfiguration) {
  ops::OpGraph g = ops::build_op("sum", parse("shape=13,64 axes=1"));
  auto total = [&](const std::string& json, const std::string& name) { return feature_total(g, json, name); };
  const char* two = R"({"sketch":"stages","splits":{"st0.v":[2],"st0.r":[16]},"unroll":0})";
  const char* all = R"({"sketch":"stages","splits":{"st0.v":[13],"st0.r":[16]},"unroll":0})";
  EXPECT_GE(total(two, "guards"), 1.0);
  EXPECT_GE(total(two, "guards_in_vector"), 1.0);
  EXPECT_NEAR(total(all, "guards"), 0.0, 1e-9);
  EXPECT_NEAR(total(all, "guards_in_vector"), 0.0, 1e-9);
  EXPECT_NEAR(total(all, "guarded_loads"), 0.0, 1e-9);
}

// Along a guarded vectorized axis the loads past the extent are masked: a dense of
// N = 23 with 8 columns per vector (tiles of 16, so 32 columns) reads through guarded
// loads; 23 outer columns of one lane need no guard.
TEST(Features, GuardedLoadsOfAPartialVector) {
  ops::OpGraph g = ops::build_op("dense", parse("M=4 K=16 N=23"));
  auto total = [&](const std::string& json, const std::string& name) { return feature_total(g, json, name); };
  const char* partial = R"({"sketch":"tile.vec=j.pack.acc2","splits":{"i":[1,4,1],"j":[1,2,8],"k":[8]},"unroll":0})";
  const char* whole = R"({"sketch":"tile.vec=j.pack.acc2","splits":{"i":[1,4,1],"j":[23,1,1],"k":[8]},"unroll":0})";
  EXPECT_GE(total(partial, "guarded_loads"), 1.0);
  EXPECT_GE(total(partial, "guards"), 1.0);
  EXPECT_NEAR(total(whole, "guarded_loads"), 0.0, 1e-9);
  EXPECT_NEAR(total(whole, "guards"), 0.0, 1e-9);
}

// A tile product (AMX) runs 16 x 16 x 16 lane-iterations of its nest in about the issue
// time of 32 vector multiply-adds: the store under kAmxBf16Pragma and kAmxInt8Pragma
// counts one multiply and one add per lane for an eighth of its iterations. The same
// structure with the pragma removed (the nest as written: vdpbf16ps, two multiplies and
// two adds per lane; vpdpbusd, one of each) differs in the update's operation counts
// and intensities alone.
TEST(Features, TileProductsCountAtTheirIssueCost) {
  struct Case {
    const char* graph;
    bool int8;
    double ratio;  // as written over inside the tile nest
  };
  for (const Case& c : {Case{"x0:float32[32,64]@-1:1;x1:float32[48,64]@-1:1;t0=dense(x0,x1){}", false, 16.0},
                        Case{"x0:uint8[32,128]@0:256;x1:int8[48,128]@-128:128;t0=dense(x0,x1){}", true, 8.0}}) {
    ops::OpGraph g = ops::build_op("subgraph", parse(std::string("graph=") + c.graph));
    const char* pragma = c.int8 ? kAmxInt8Pragma : kAmxBf16Pragma;
    int found = 0;
    for (const sched::Sketch& s : sched::cpu_sketches(g, !c.int8, c.int8, true)) {
      if (s.name.rfind(c.int8 ? "amx.int8." : "amx.bf16.", 0) != 0) continue;
      ++found;
      LoweredFunc tiles = sched::lower_sketch_structure(g, s, sched::concrete_knobs(sched::default_config(s)));
      LoweredFunc written = tiles;
      int removed = 0;
      written.body = rewrite_stmt(tiles.body, nullptr, [&](const Stmt& st) -> Stmt {
        if (st->kind != StmtKind::Pragma || st->key != pragma) return Stmt();
        ++removed;
        return st->body[0];
      });
      ASSERT_EQ(removed, 1) << s.name;
      const auto a = relax::evaluate_features(relax::extract_features(tiles), {});
      const auto b = relax::evaluate_features(relax::extract_features(written), {});
      ASSERT_EQ(a.size(), b.size());
      const auto& names = relax::feature_names();
      int updates = 0;
      for (size_t st = 0; st < a.size(); ++st) {
        bool differs = false;
        for (size_t i = 0; i < names.size(); ++i) {
          const double x = std::exp2(a[st][i]) - 1, y = std::exp2(b[st][i]) - 1;
          const bool ops = names[i].rfind("flops_", 0) == 0 || names[i].rfind("intensity.", 0) == 0;
          if (!ops || std::abs(x - y) <= 1e-9 * std::max(1.0, y)) {
            EXPECT_NEAR(x, y, 1e-9 * std::max(1.0, y)) << s.name << " store " << st << " " << names[i];
            continue;
          }
          differs = true;
          EXPECT_NEAR(y / x, c.ratio, 1e-6 * c.ratio) << s.name << " store " << st << " " << names[i];
        }
        updates += differs;
      }
      EXPECT_EQ(updates, 1) << s.name;
    }
    EXPECT_GE(found, 1) << c.graph;
  }
}

}  // namespace
}  // namespace basin
