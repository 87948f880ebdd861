// CPU hardware constraints as expressions of the knobs: known values of a matmul's
// register tile, satisfied lanes at every valid configuration, gradients through the
// tape, and the relu^2 penalty.
#include <gtest/gtest.h>

#include <random>

#include "core/ops/registry.h"
#include "core/expr/evaluate.h"
#include "core/schedule/lower_sketch.h"
#include "core/util/host.h"
#include "relax/relaxed_sketch.h"
#include "tests/ops/op_cases.h"

namespace basin {
namespace {

relax::CpuTarget two_cores() {
  relax::CpuTarget t;
  t.cores = 2;
  return t;
}

std::map<std::string, double> constraints_at(relax::RelaxedSketch& rs, const sched::Config& c) {
  Eigen::VectorXd x = rs.space().point_of(c);
  std::vector<double> f(static_cast<size_t>(rs.num_stores()) * rs.num_features()), k(rs.num_constraints());
  rs.forward(x.data(), 1, f.data(), k.data());
  std::map<std::string, double> m;
  for (int i = 0; i < rs.num_constraints(); ++i) m[rs.constraint_names()[i]] = k[i];
  return m;
}

TEST(Constraints, RegisterTileParallelWorkAndLanesOfAMatmul) {
  ops::OpGraph g = ops::build_op("matmul", parse("M=64 K=32 N=128"));
  std::vector<sched::Sketch> sk = sched::cpu_sketches(g);
  const sched::Sketch s = sched::find_sketch(sk, "tile.vec=j.acc2");
  relax::RelaxedSketch rs(g, s, relax::TapeMode::Exact, 0.5, two_cores());
  // 4 x 64 floats: 16 zmm, beside them the 4 vectors of b the rows reuse and a's broadcast.
  sched::Config fits{{{2, 2, 4}, {1, 2, 64}, {8}}, 64};
  sched::Config spills{{{1, 1, 16}, {1, 1, 64}, {8}}, 64};  // 16 x 64 floats: 64 zmm
  auto a = constraints_at(rs, fits), b = constraints_at(rs, spills);
  EXPECT_DOUBLE_EQ(a["register_tile"], 16 + 4 + 1 - 32);
  EXPECT_DOUBLE_EQ(b["register_tile"], 64 + 4 + 1 - 32);
  EXPECT_DOUBLE_EQ(a["vector_lanes.0"], 0);     // 64 lanes: at the limit
  EXPECT_DOUBLE_EQ(a["parallel_work"], 2 - 4);  // outer tiles: i 64 / 16 = 4, j 128 / 128 = 1
  double pa = relax::penalty(&a["register_tile"], 1), pb = relax::penalty(&b["register_tile"], 1);
  EXPECT_EQ(pa, 0);
  EXPECT_EQ(pb, 37.0 * 37.0);
}

// A conv vectorized along its width holds an input vector per row of its register
// tile beside the accumulators (the channels' loop outside reuses them), and 8 lanes
// of AVX-512's 16 take a register: resnet18-c2's 4 x 4 x 8 tile is 16 + 4 + 1
// registers, within 32; its 4 x 7 x 8 tile (1.6 times slower, spilling) is 28 + 7 + 1,
// over. Vectorized along the channels (unpacked), the weight is read along them alone
// with a stride: one weight vector assembled a lane at a time (two more registers) and
// one broadcast beside the accumulators.
TEST(Constraints, RegisterTileCountsTheVectorOperandsRows) {
  ops::OpGraph g =
      ops::build_op("conv2d", parse("in_channels=64 out_channels=64 height=56 width=56 kernel=3 padding=1"));
  std::vector<sched::Sketch> sk = sched::cpu_sketches(g);
  const sched::Sketch& by_w = sched::find_sketch(sk, "tile.vec=w.acc2.stage");
  relax::RelaxedSketch rw(g, by_w, relax::TapeMode::Exact, 0.5, two_cores());
  auto conv = [](int64_t c, int64_t h, int64_t w) {  // splits n, c, h, w, rc, rh, rw
    return sched::Config{{{1, 1, 1}, {64 / c, 1, c}, {56 / h > 1 ? 2 : 1, 1, h}, {56 / w, 1, w}, {8}, {3}, {3}}, 512};
  };
  EXPECT_DOUBLE_EQ(constraints_at(rw, conv(4, 4, 8))["register_tile"], 16 + 4 + 1 - 32);
  EXPECT_DOUBLE_EQ(constraints_at(rw, conv(4, 7, 8))["register_tile"], 28 + 7 + 1 - 32);
  EXPECT_DOUBLE_EQ(constraints_at(rw, conv(2, 7, 8))["register_tile"], 14 + 7 + 1 - 32);
  const sched::Sketch& by_c = sched::find_sketch(sk, "tile.vec=c.acc2.stage");
  relax::RelaxedSketch rc(g, by_c, relax::TapeMode::Exact, 0.5, two_cores());
  EXPECT_DOUBLE_EQ(constraints_at(rc, conv(16, 1, 28))["register_tile"], 28 + 2 + 2 - 32);
  EXPECT_DOUBLE_EQ(constraints_at(rc, conv(8, 1, 7))["register_tile"], 7 + 2 + 2 - 32);  // half a vector: 1 register
}

// The host's target has the host's register file (HostInfo::vector_isa), never
// AVX-512's on every CPU. An AVX2 file of 16 ymm makes the 4 x 64 tile above 32
// registers and 8 vectors of b beside them, 25 over.
TEST(Constraints, TheHostsTargetHasItsVectorRegisterFile) {
  const relax::CpuTarget host = relax::CpuTarget::host();
  const VectorFile file = vector_file(this_host().vector_isa);
  EXPECT_EQ(host.vector_bytes, file.bytes);
  EXPECT_EQ(host.vector_registers, file.registers);
  EXPECT_EQ(host.cores, this_host().cores);
  ops::OpGraph g = ops::build_op("matmul", parse("M=64 K=32 N=128"));
  std::vector<sched::Sketch> sk = sched::cpu_sketches(g);
  relax::CpuTarget avx2 = two_cores();
  avx2.vector_bytes = vector_file("avx2").bytes;
  avx2.vector_registers = vector_file("avx2").registers;
  relax::RelaxedSketch rs(g, sched::find_sketch(sk, "tile.vec=j.acc2"), relax::TapeMode::Exact, 0.5, avx2);
  EXPECT_DOUBLE_EQ(constraints_at(rs, sched::Config{{{2, 2, 4}, {1, 2, 64}, {8}}, 64})["register_tile"], 32 + 8 + 1 - 16);
}

// Attention's tiles of query rows (the generic rule's rows.tile sketch): each row of the
// tile accumulates its scores and its weighted sum of the values as vectors, all of the
// tile's rows live through the reduction loops, beside the key or value vectors the rows
// read alike and the row's own broadcast value. Tiles of 4 rows by 64 lanes of AVX-512
// (4 zmm each) are 16 + 4 + 1 registers; 16 rows by 64 lanes are 64 + 4 + 1 (BERT-base's
// attention tuned 60 s on Zen 4: such tiles ran at a median 359 us, those that fit at 288).
TEST(Constraints, RegisterTileOfAttentionsRows) {
  ops::OpGraph g =
      ops::build_op("attention", parse("heads=2 queries=32 keys=64 head_dim=64 value_dim=64 scale=0.125"));
  std::vector<sched::Sketch> sk = sched::cpu_sketches(g);
  const sched::Sketch& s = sched::find_sketch(sk, "rows.tile.prefix=2");
  relax::RelaxedSketch rs(g, s, relax::TapeMode::Exact, 0.5, two_cores());
  // rows.t, then per stage its lanes and its inner reduction: scores (v, r), max (v, r),
  // exponentials (v), weighted sum (v, r), sum (v, r), output (v).
  ASSERT_EQ(s.splits.size(), 11u);
  ASSERT_EQ(s.splits[0].name, "rows.t");
  auto tile = [](int64_t rows, int64_t score_lanes, int64_t value_lanes) {
    return sched::Config{{{rows}, {score_lanes}, {8}, {1}, {16}, {32}, {value_lanes}, {8}, {1}, {8}, {64}}, 16};
  };
  auto a = constraints_at(rs, tile(4, 16, 64));
  EXPECT_DOUBLE_EQ(a["register_tile_rows.0"], 4 * 1 + 1 + 1 - 32);   // scores: 16 lanes, one zmm a row
  EXPECT_DOUBLE_EQ(a["register_tile_rows.1"], 4 * 4 + 4 + 1 - 32);   // weighted sum: 64 lanes, four
  auto b = constraints_at(rs, tile(16, 64, 64));
  EXPECT_DOUBLE_EQ(b["register_tile_rows.0"], 16 * 4 + 4 + 1 - 32);
  EXPECT_DOUBLE_EQ(b["register_tile_rows.1"], 16 * 4 + 4 + 1 - 32);
  EXPECT_EQ(a.count("register_tile_rows.2"), 0u);  // the row's own max and sum, the elementwise stages: none
  // AVX2's 16 ymm: 8 lanes a register.
  relax::CpuTarget avx2 = two_cores();
  avx2.vector_bytes = vector_file("avx2").bytes;
  avx2.vector_registers = vector_file("avx2").registers;
  relax::RelaxedSketch r2(g, s, relax::TapeMode::Exact, 0.5, avx2);
  EXPECT_DOUBLE_EQ(constraints_at(r2, tile(4, 16, 64))["register_tile_rows.1"], 4 * 8 + 8 + 1 - 16);
  // Without tiles of rows (rows.prefix), no such constraint.
  relax::RelaxedSketch plain(g, sched::find_sketch(sk, "rows.prefix=2"), relax::TapeMode::Exact, 0.5, two_cores());
  for (const std::string& name : plain.constraint_names()) EXPECT_EQ(name.rfind("register_tile_rows", 0), std::string::npos);
}

TEST(Constraints, GpuThreadsSharedMemoryRegistersAndVthreadsOfADenseTile) {
  ops::OpGraph g = ops::build_op("dense", parse("M=512 K=512 N=512"));
  const sched::Sketch s = sched::gpu_sketches(g).at(0);
  relax::RelaxedSketch rs(g, s, relax::TapeMode::Exact);
  EXPECT_EQ(rs.num_features(), relax::num_features(relax::FeatureSet::Gpu));
  sched::Config fits{{{2, 8, 4}, {1, 32, 4}, {8}}, 64};       // 256 threads, 32 registers, (64 + 128) x 8 floats
  sched::Config too_big{{{1, 64, 4}, {2, 32, 8}, {32}}, 64};  // 2048 threads, 64 registers, (256 + 512) x 32 floats
  auto a = constraints_at(rs, fits);
  // Outside the knob space (sched rejects it), evaluated on its concrete program.
  std::map<std::string, double> b;
  for (const relax::Constraint& k :
       relax::gpu_constraints(sched::lower_sketch_structure(g, s, sched::concrete_knobs(too_big))))
    b[k.name] = evaluate(k.value, {}).as_double();
  for (int t = 0; t < 4; ++t) {  // the thread loops: init, load, compute, store
    EXPECT_DOUBLE_EQ(a["threads_per_block." + std::to_string(t)], 256 - 1024);
    EXPECT_DOUBLE_EQ(b["threads_per_block." + std::to_string(t)], 2048 - 1024);
  }
  EXPECT_DOUBLE_EQ(a["shared_memory"], (64 + 128) * 8 * 4 - 49152);
  EXPECT_DOUBLE_EQ(b["shared_memory"], (256 + 512) * 32 * 4 - 49152);
  EXPECT_DOUBLE_EQ(a["registers"], 2 * 4 * 4 - 215);
  EXPECT_DOUBLE_EQ(b["registers"], 4 * 2 * 8 - 215);
  EXPECT_DOUBLE_EQ(a["vthreads"], 2 - 16);
  // Every valid configuration keeps the hard bounds.
  std::mt19937_64 rng(4);
  for (int i = 0; i < 30; ++i)
    for (const auto& [name, v] : constraints_at(rs, sched::random_config(s, rng))) EXPECT_LE(v, 0) << name;
}

TEST(Constraints, ValidConfigurationsNeverExceedTheLaneLimit) {
  std::mt19937_64 rng(3);
  for (const char* spec : {"conv2d in_channels=16 out_channels=32 height=14 width=14", "softmax shape=8,256"}) {
    std::string t(spec);
    std::string op = t.substr(0, t.find(' '));
    ops::OpGraph g = ops::build_op(op, parse(t.substr(op.size())));
    for (const sched::Sketch& s : sched::cpu_sketches(g)) {
      relax::RelaxedSketch rs(g, s, relax::TapeMode::Exact);
      for (int i = 0; i < 10; ++i)
        for (const auto& [name, v] : constraints_at(rs, sched::random_config(s, rng)))
          if (name.rfind("vector_lanes", 0) == 0) {
            EXPECT_LE(v, 0) << s.name;
          }
    }
  }
}

TEST(Constraints, GradientsThroughTheTape) {
  ops::OpGraph g = ops::build_op("conv2d", parse("in_channels=16 out_channels=32 height=14 width=14"));
  std::mt19937_64 rng(4);
  for (const sched::Sketch& s : sched::cpu_sketches(g)) {
    relax::RelaxedSketch rs(g, s);
    size_t nf = static_cast<size_t>(rs.num_stores()) * rs.num_features();
    std::vector<double> zero(nf, 0.0), ones(rs.num_constraints(), 1.0), f(nf), c(rs.num_constraints()),
        gx(rs.num_vars());
    for (const Eigen::VectorXd& x : rs.space().sample(2, rng)) {
      rs.forward(x.data(), 1, f.data(), c.data());
      rs.backward(zero.data(), gx.data(), ones.data());
      auto sum_c = [&](const Eigen::VectorXd& p) {
        rs.forward(p.data(), 1, f.data(), c.data());
        double t = 0;
        for (double v : c) t += v;
        return t;
      };
      for (int v = 0; v < rs.num_vars(); ++v) {
        Eigen::VectorXd xp = x, xm = x;
        xp(v) += 1e-5;
        xm(v) -= 1e-5;
        double fd = (sum_c(xp) - sum_c(xm)) / 2e-5;
        EXPECT_NEAR(gx[v], fd, 1e-3 * std::max(1.0, std::abs(fd))) << s.name << " " << rs.space().var_names()[v];
      }
    }
  }
}

TEST(Constraints, PenaltyGradientIsScaledAgainstTheCostGradient) {
  // Point 0: a violated constraint, cost gradient of norm 5 and a tiny penalty gradient:
  // the penalty part is scaled to 2 x 5. Point 1: constraints hold. Point 2: no cost
  // gradient: the penalty gradient times the weight.
  const double gc[] = {3, 4, 0, 1, 2, 2, 0, 0, 0};
  const double gp[] = {0, 0, 1e-6, 0, 0, 0, 0, 3, 4};
  double out[9];
  relax::scale_penalty_gradient(gc, gp, 3, 3, 2.0, out);
  EXPECT_DOUBLE_EQ(out[0], 3);
  EXPECT_DOUBLE_EQ(out[1], 4);
  EXPECT_NEAR(out[2], 10, 1e-9);
  EXPECT_DOUBLE_EQ(out[3], 1);
  EXPECT_DOUBLE_EQ(out[4], 2);
  EXPECT_DOUBLE_EQ(out[5], 2);
  EXPECT_DOUBLE_EQ(out[6], 0);
  EXPECT_DOUBLE_EQ(out[7], 6);
  EXPECT_DOUBLE_EQ(out[8], 8);
}

}  // namespace
}  // namespace basin
