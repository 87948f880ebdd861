// Sketches and their lowering, with the interpreter as the oracle: every operator case
// of the library has sketches; random configurations of each compute what the default
// schedule computes; symbolic lowering, with a configuration's values substituted,
// gives the concrete program; configuration files parse and fail clearly.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "core/expr/evaluate.h"
#include "core/ir/interpreter.h"
#include "core/ir/lower.h"
#include "core/ir/mark_unrolled.h"
#include "core/ir/substitute_knobs.h"
#include "core/ops/registry.h"
#include "core/schedule/lower_sketch.h"
#include "core/schedule/sketch.h"
#include "core/schedule/task_analysis.h"
#include "core/util/error.h"
#include "tests/ops/op_cases.h"

namespace basin {
namespace {

std::vector<NDArray> inputs_for(const ops::OpGraph& g, uint64_t seed) {
  std::vector<NDArray> in;
  for (size_t i = 0; i < g.inputs.size(); ++i)
    in.push_back(NDArray::random(g.inputs[i].dtype(), g.inputs[i].shape(), g.ranges[i].lo, g.ranges[i].hi, seed + i));
  return in;
}

std::vector<NDArray> run(const LoweredFunc& f, const ops::OpGraph& g, std::vector<NDArray>& in) {
  std::vector<NDArray> out;
  for (const te::Tensor& t : g.outputs) out.emplace_back(t.dtype(), t.shape());
  std::vector<NDArray*> args;
  for (NDArray& a : in) args.push_back(&a);
  for (NDArray& a : out) args.push_back(&a);
  interpret(f, args);
  return out;
}

// The program of sketch s with configuration cfg computes `want` on `in` (to the
// rounding of its arithmetic: a TF32 program's products are TF32 products).
void expect_matches(const Case& c, const ops::OpGraph& g, const sched::Sketch& s, const sched::Config& cfg,
                    const LoweredFunc& f, std::vector<NDArray>& in, const std::vector<NDArray>& want) {
  std::vector<NDArray> got = run(f, g, in);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_LE(compare_arrays(got[i], want[i]).max_rel, sched::result_tolerance(s, 1e-5))
        << c.op << " " << c.params << " sketch " << s.name << " " << sched::config_to_json(s, cfg) << "\n"
        << to_string(f);
}

class SketchesOfEveryOperator : public ::testing::TestWithParam<Case> {};

TEST_P(SketchesOfEveryOperator, RandomConfigurationsMatchTheDefaultSchedule) {
  const Case& c = GetParam();
  ops::OpGraph g = ops::build_op(c.op, parse(c.params));
  std::vector<sched::Sketch> sketches = sched::cpu_sketches(g);
  ASSERT_FALSE(sketches.empty()) << c.op;
  std::vector<NDArray> in = inputs_for(g, 11);
  std::vector<NDArray> want = run(lower_default(c.op, g.inputs, g.outputs), g, in);
  std::mt19937_64 rng(std::hash<std::string>()(c.op + c.params));
  for (const sched::Sketch& s : sketches) {
    for (int trial = 0; trial < 2; ++trial) {
      sched::Config cfg = sched::random_config(s, rng);
      expect_matches(c, g, s, cfg, sched::lower_config(g, s, cfg), in, want);
    }
  }
}

// The GPU rules on every operator: blocks and threads (a block's thread loops in phases
// between barriers) run serially in the interpreter, so the program must compute what
// the default schedule computes.
TEST_P(SketchesOfEveryOperator, GpuConfigurationsMatchTheDefaultSchedule) {
  const Case& c = GetParam();
  ops::OpGraph g = ops::build_op(c.op, parse(c.params));
  std::vector<sched::Sketch> sketches = sched::gpu_sketches(g);
  if (sketches.empty()) return;  // stages without shared rows: no GPU sketch yet
  std::vector<NDArray> in = inputs_for(g, 11);
  std::vector<NDArray> want = run(lower_default(c.op, g.inputs, g.outputs), g, in);
  std::mt19937_64 rng(std::hash<std::string>()(c.op + c.params + "gpu"));
  for (const sched::Sketch& s : sketches) {
    EXPECT_TRUE(sched::is_gpu_rule(s.rule));
    for (int trial = 0; trial < 3; ++trial) {
      sched::Config cfg = trial == 0 ? sched::default_config(s) : sched::random_config(s, rng);
      ASSERT_EQ(sched::invalid_reason(s, cfg), "");
      LoweredFunc f = sched::lower_config(g, s, cfg);
      bool blocks = false, threads = false;
      visit_stmt(f.body, [&](const Stmt& st) {
        if (st.kind() != StmtKind::For) return;
        blocks |= st->for_kind == ForKind::BlockX;
        threads |= st->for_kind == ForKind::ThreadX;
        EXPECT_NE(st->for_kind, ForKind::Parallel);
        // The vector loops on a GPU: a tensor-core tile's 128-bit fill (4 lanes of a store
        // into shared memory) and its write-back's 64- or 128-bit stores (2 or 4 lanes
        // into the output).
        if (st->for_kind == ForKind::Vectorized) {
          ASSERT_EQ(s.rule, sched::SketchRule::GpuMma) << s.name;
          ASSERT_EQ(st->body[0].kind(), StmtKind::Store) << to_string(st);
          const bool fill = st->body[0]->buffer->scope == MemScope::Shared;
          EXPECT_TRUE(fill ? s.mma_vector[0] || s.mma_vector[1] : s.mma_store_lanes > 1) << s.name;
          EXPECT_TRUE(is_const_int(st->extent) && st->extent->ival == (fill ? 4 : s.mma_store_lanes)) << to_string(st);
          if (!fill) EXPECT_EQ(st->body[0]->buffer->scope, MemScope::Global) << to_string(st);
        }
      });
      EXPECT_TRUE(blocks && threads) << to_string(f);
      expect_matches(c, g, s, cfg, f, in, want);
    }
  }
}

// The GPU tiling rule, more configurations: every anchor case of the suite (the shared
// tiles of padded, strided, dilated and grouped convolutions, fused epilogues, batched
// matmuls), 15 random configurations each.
TEST(Sketch, GpuTileRandomConfigurationsMatchTheDefaultSchedule) {
  int cases = 0;
  for (const Case& c : good_cases()) {
    ops::OpGraph g = ops::build_op(c.op, parse(c.params));
    std::vector<sched::Sketch> sk = sched::gpu_sketches(g);
    if (sk.empty() || sk[0].rule != sched::SketchRule::GpuTile) continue;
    ++cases;
    // Grouped and transposed convolutions read some inputs at indices that are not
    // affine in the axes (a group's channel offset, a stride phase): those stay global.
    bool may_miss = c.op == "conv2d_transpose" || c.params.find("groups") != std::string::npos;
    if (!may_miss) EXPECT_FALSE(sk[0].shared.empty()) << c.op << " " << c.params;
    std::vector<NDArray> in = inputs_for(g, 3);
    std::vector<NDArray> want = run(lower_default(c.op, g.inputs, g.outputs), g, in);
    std::mt19937_64 rng(std::hash<std::string>()(c.op + c.params + "tile"));
    for (int trial = 0; trial < 15; ++trial) {
      sched::Config cfg = sched::random_config(sk[0], rng);
      LoweredFunc f = sched::lower_config(g, sk[0], cfg);
      int barriers = 0, shared = 0;
      visit_stmt(f.body, [&](const Stmt& st) {
        barriers += st.kind() == StmtKind::Barrier;
        shared += st.kind() == StmtKind::Allocate && st->buffer->scope == MemScope::Shared;
      });
      EXPECT_EQ(shared, static_cast<int>(sk[0].shared.size()));
      EXPECT_EQ(barriers, 2);
      expect_matches(c, g, sk[0], cfg, f, in, want);
    }
  }
  EXPECT_GE(cases, 15);
}

// The tensor-core rule: every case of the suite that has it, 12 random configurations
// each. Its products are of TF32-rounded factors: on inputs already in TF32 (every input
// rounded; cases without an epilogue's own inputs) it computes what the default schedule
// computes, to the order of the sums; on the FP32 inputs, to TF32's rounding, and
// visibly differently from FP32 (the rounding is modeled, not skipped).
TEST(Sketch, GpuMmaRandomConfigurationsMatchTheDefaultSchedule) {
  std::set<std::string> ops_with;
  std::vector<Case> cases = good_cases();
  for (Case c : std::vector<Case>{{"dense", "M=48 K=24 N=40"},
                                  {"dense", "M=20 K=13 N=27"},  // every extent padded
                                  {"conv2d", "in_channels=8 out_channels=16 height=7 width=7 kernel=3 padding=1"},
                                  {"conv2d", "in_channels=3 out_channels=16 height=9 width=9 kernel=5 stride=2"},
                                  {"batch_matmul", "B=3 M=16 K=16 N=24"},
                                  {"conv2d", "in_channels=8 out_channels=32 height=6 width=8 kernel=3 padding=1"},
                                  {"conv2d", "in_channels=16 out_channels=16 height=9 width=8 kernel=3 stride=2"},
                                  {"conv2d_bias_relu", "in_channels=8 out_channels=16 height=5 width=16 kernel=1"}})
    cases.push_back(c);
  for (const Case& c : cases) {
    ops::OpGraph g = ops::build_op(c.op, parse(c.params));
    // TF32 on every sketch; FP16 and BF16 (m16n8k16) on the synchronous one and one pipeline.
    for (const std::string precision : {"tf32", "fp16", "bf16"})
      for (const sched::Sketch& s : sched::gpu_sketches(g, precision)) {
        if (s.rule != sched::SketchRule::GpuMma || (precision != "tf32" && s.mma_stages == 3)) continue;
        ops_with.insert(c.op + " " + precision);
        float (*round)(float) = precision == "tf32"   ? round_to_tf32
                                : precision == "fp16" ? round_to_fp16
                                                      : round_to_bf16;
        std::vector<NDArray> in = inputs_for(g, 5), rounded;
        for (const NDArray& a : in) {
          rounded.push_back(a.clone());
          for (int64_t i = 0; i < a.numel(); ++i) rounded.back().as<float>()[i] = round(a.as<float>()[i]);
        }
        std::vector<NDArray> want = run(lower_default(c.op, g.inputs, g.outputs), g, in);
        std::vector<NDArray> want_tf32 = run(lower_default(c.op, g.inputs, g.outputs), g, rounded);
        std::mt19937_64 rng(std::hash<std::string>()(c.op + c.params + "mma" + precision));
        for (int trial = 0; trial < (s.mma_stages > 1 || precision != "tf32" ? 5 : 12); ++trial) {
          sched::Config cfg = trial == 0 ? sched::default_config(s) : sched::random_config(s, rng);
          LoweredFunc f = sched::lower_config(g, s, cfg);
          int fragments = 0;
          visit_stmt(f.body, [&](const Stmt& st) {
            fragments += st.kind() == StmtKind::Pragma && st->key == sched::kMmaPragma;
          });
          EXPECT_EQ(fragments, 1);
          expect_matches(c, g, s, cfg, f, in, want);
          std::vector<NDArray> got = run(f, g, rounded);
          EXPECT_LE(compare_arrays(got[0], want_tf32[0]).max_rel, 1e-5)
              << c.op << " " << c.params << " " << sched::config_to_json(s, cfg);
          if (trial == 0) {
            double off = compare_arrays(run(f, g, in)[0], want[0]).max_rel;
            EXPECT_GT(off, 1e-6) << c.op << " " << c.params << ": no " << precision << " rounding seen";
            EXPECT_LE(off, sched::result_tolerance(s, 1e-5)) << c.op << " " << c.params << " " << precision;
          }
        }
      }
  }
  for (const char* op : {"dense", "conv2d", "batch_matmul"})
    for (const char* precision : {"tf32", "fp16", "bf16"})
      EXPECT_TRUE(ops_with.count(std::string(op) + " " + precision)) << op << " " << precision;
}

// The tensor-core rule's choices and bounds: which factor is A, which axes are the rows,
// the columns and k, extents padded to the fragment's, no sketch where padding would
// waste more than half, and fp32 leaves it out.
TEST(Sketch, GpuMmaSketchIsOfferedWhereTheFragmentsFit) {
  auto mma = [](const std::string& op, const std::string& params, const std::string& precision = "tf32") {
    for (const sched::Sketch& s : sched::gpu_sketches(ops::build_op(op, parse(params)), precision))
      if (s.rule == sched::SketchRule::GpuMma) return std::optional<sched::Sketch>(s);
    return std::optional<sched::Sketch>();
  };
  auto d = mma("dense", "M=64 K=32 N=48");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->name, "gpu.mma.tf32");
  EXPECT_EQ(d->mma_m, 0);  // i: rows of x
  EXPECT_EQ(d->mma_n, 1);  // j: columns, the output's innermost axis
  EXPECT_EQ(d->splits[0].extent, 4);
  EXPECT_EQ(d->splits[1].extent, 6);
  EXPECT_EQ(d->splits[2].extent, 4);
  EXPECT_FALSE(mma("dense", "M=64 K=32 N=48", "fp32"));
  auto padded = mma("dense", "M=64 K=12 N=48");  // k padded to 16
  ASSERT_TRUE(padded);
  EXPECT_EQ(padded->splits[2].extent, 2);
  EXPECT_FALSE(mma("dense", "M=1 K=512 N=1000"));  // a matrix-vector product
  auto t = mma("dense", "M=8 K=32 N=48");          // rows from w, columns from x
  ASSERT_TRUE(t);
  EXPECT_EQ(t->mma_m, 1);
  EXPECT_EQ(t->mma_n, 0);
  auto conv = mma("conv2d", "in_channels=64 out_channels=64 height=56 width=56 kernel=3 padding=1");
  ASSERT_TRUE(conv);
  EXPECT_EQ(conv->mma_m, 1);  // output channels
  EXPECT_EQ(conv->mma_n, 3);  // width
  auto c14 = mma("conv2d", "in_channels=64 out_channels=64 height=14 width=14 kernel=3 padding=1");
  ASSERT_TRUE(c14);  // 14 columns in 2 fragments of 8
  EXPECT_EQ(c14->mma_n, 3);
  EXPECT_EQ(c14->splits[1].extent, 2);
  auto stem = mma("conv2d", "in_channels=3 out_channels=64 height=224 width=224 kernel=7 stride=2 padding=3");
  ASSERT_TRUE(stem);
  EXPECT_EQ(stem->mma_k, 1);             // the kernel's 7 rows in one k of 8, not the 3 channels
  EXPECT_TRUE(conv->splits[1].guarded);  // 56 columns, 7 fragments: tiles of 2, 3, 4 too
  EXPECT_FALSE(mma("softmax", "shape=16,64"));
  EXPECT_THROW(sched::gpu_sketches(ops::build_op("dense", parse("M=16 K=8 N=8")), "fp8"), Error);
  // FP16 and BF16: fragments of k 16 (a k of 12 padded to 16), rounded inputs, looser tolerances.
  auto half = mma("dense", "M=64 K=12 N=48", "fp16");
  ASSERT_TRUE(half);
  EXPECT_EQ(half->name, "gpu.mma.fp16");
  EXPECT_EQ(sched::mma_kdim(*half), 16);
  EXPECT_EQ(sched::mma_rounding(*half), MathFn::fp16);
  EXPECT_EQ(half->splits[2].extent, 1);
  EXPECT_EQ(sched::result_tolerance(*half, 1e-5), 5e-3);
  auto brain = mma("dense", "M=64 K=40 N=48", "bf16");
  ASSERT_TRUE(brain);
  EXPECT_EQ(brain->name, "gpu.mma.bf16");
  EXPECT_EQ(brain->splits[2].extent, 3);  // 40 padded to 48
  EXPECT_EQ(sched::result_tolerance(*brain, 1e-5), 3e-2);
  EXPECT_EQ(sched::mma_kdim(*d), 8);
  EXPECT_THROW(sched::sketches_for(ops::build_op("dense", parse("M=16 K=8 N=8")), "llvm", "fp64"), Error);
  // Bounds: 1024 threads (32 warps), 128 accumulators per thread, 48 KiB of shared tiles.
  ops::OpGraph big = ops::build_op("dense", parse("M=1024 K=1024 N=1024"));
  sched::Sketch s = *mma("dense", "M=1024 K=1024 N=1024");
  sched::Config c = sched::default_config(s);
  EXPECT_EQ(sched::invalid_reason(s, c), "");
  EXPECT_EQ(c.factors, (std::vector<std::vector<int64_t>>{{2, 2}, {2, 4}, {4}}));
  c.factors = {{8, 1}, {8, 1}, {1}};
  EXPECT_NE(sched::invalid_reason(s, c).find("threads per block"), std::string::npos);
  c.factors = {{1, 8}, {1, 8}, {1}};
  EXPECT_NE(sched::invalid_reason(s, c).find("accumulator"), std::string::npos);
  c.factors = {{1, 8}, {1, 4}, {32}};
  EXPECT_NE(sched::invalid_reason(s, c).find("shared memory"), std::string::npos);
  (void)big;
  // The tiles' layouts: x[m][k] and the weights w[n][k] both k innermost, both filled
  // 4 floats at a time; a convolution's weights [co][ci][ky][kx] read along the channels
  // (k, stride 9) and its padded input along the width: one tile each way, neither a
  // plain contiguous load.
  EXPECT_TRUE(d->mma_k_inner[0] && d->mma_k_inner[1]);
  EXPECT_TRUE(d->mma_vector[0] && d->mma_vector[1]);
  EXPECT_FALSE(mma("dense", "M=64 K=30 N=48")->mma_vector[0]);  // rows of 30 floats: unaligned
  EXPECT_TRUE(conv->mma_k_inner[0]);
  EXPECT_FALSE(conv->mma_k_inner[1]);
  EXPECT_FALSE(conv->mma_vector[0] || conv->mma_vector[1]);
  auto bmm = mma("batch_matmul", "B=2 M=32 K=32 N=24");  // b[k][n]: n innermost
  ASSERT_TRUE(bmm);
  EXPECT_FALSE(bmm->mma_k_inner[1]);
  EXPECT_TRUE(bmm->mma_vector[1]);
  // The pipelined sketches: at least as many steps as stages; 2 fragments of k give no
  // triple buffering.
  auto names = [](const std::string& op, const std::string& params) {
    std::set<std::string> n;
    for (const sched::Sketch& x : sched::gpu_sketches(ops::build_op(op, parse(params))))
      if (x.rule == sched::SketchRule::GpuMma) n.insert(x.name);
    return n;
  };
  EXPECT_EQ(names("dense", "M=64 K=16 N=48"), (std::set<std::string>{"gpu.mma.tf32", "gpu.mma.tf32.async2"}));
  EXPECT_EQ(names("dense", "M=64 K=24 N=48").size(), 3u);
  ops::OpGraph small = ops::build_op("dense", parse("M=64 K=32 N=64"));
  sched::Sketch p = sched::find_sketch(sched::gpu_sketches(small), "gpu.mma.tf32.async3");
  c.factors = {{1, 1}, {1, 1}, {2}};  // 2 steps of 16
  EXPECT_NE(sched::invalid_reason(p, c).find("steps of k"), std::string::npos) << sched::invalid_reason(p, c);
  c.factors = {{1, 1}, {1, 1}, {1}};
  EXPECT_EQ(sched::invalid_reason(p, c), "");
  int groups = 0;
  visit_stmt(sched::lower_config(small, p, c).body,
             [&](const Stmt& st) { groups += st.kind() == StmtKind::Pragma && st->key == sched::kAsyncCopyPragma; });
  EXPECT_EQ(groups, 3);  // the prologue's 2, the loop's 1
}

// The cross-thread reduction rule: every case of the suite that has it (softmax and
// log_softmax, the norms, reductions over the last axes), 15 random configurations
// each, thread counts above and below the row's length.
TEST(Sketch, GpuReduceRandomConfigurationsMatchTheDefaultSchedule) {
  std::set<std::string> ops_with;
  for (const Case& c : good_cases()) {
    ops::OpGraph g = ops::build_op(c.op, parse(c.params));
    for (const sched::Sketch& s : sched::gpu_sketches(g)) {
      if (s.rule != sched::SketchRule::GpuReduce) continue;
      ops_with.insert(c.op);
      std::vector<NDArray> in = inputs_for(g, 5);
      std::vector<NDArray> want = run(lower_default(c.op, g.inputs, g.outputs), g, in);
      std::mt19937_64 rng(std::hash<std::string>()(c.op + c.params + "reduce"));
      for (int trial = 0; trial < 15; ++trial) {
        sched::Config cfg = trial == 0 ? sched::default_config(s) : sched::random_config(s, rng);
        LoweredFunc f = sched::lower_config(g, s, cfg);
        int shared = 0;
        visit_stmt(f.body, [&](const Stmt& st) {
          shared += st.kind() == StmtKind::Allocate && st->buffer->scope == MemScope::Shared;
        });
        EXPECT_GE(shared, 1);
        expect_matches(c, g, s, cfg, f, in, want);
      }
    }
  }
  for (const char* op : {"softmax", "log_softmax", "layer_norm"}) EXPECT_TRUE(ops_with.count(op)) << op;
}

// The GPU bounds: threads, virtual threads, the register tile and shared memory.
TEST(Sketch, GpuTileConfigurationsKeepTheGpuBounds) {
  ops::OpGraph g = ops::build_op("dense", parse("M=512 K=512 N=512"));
  sched::Sketch s = sched::gpu_sketches(g).at(0);
  ASSERT_EQ(s.name, "gpu.tile");
  ASSERT_EQ(s.shared.size(), 2u);
  sched::Config c = sched::default_config(s);
  ASSERT_EQ(sched::invalid_reason(s, c), "");
  sched::GpuTileUse u = sched::gpu_tile_use(s, c);
  EXPECT_EQ(u.threads, 256);
  // Tiles of 32 x 128 (i: 8 threads x 4, j: 32 threads x 4), 8 of k per step.
  EXPECT_EQ(u.shared_bytes, (32 + 128) * 8 * 4);
  EXPECT_EQ(u.blocks, 512 / 32 * 512 / 128);
  auto reason = [&](std::vector<std::vector<int64_t>> f) {
    sched::Config x = c;
    x.factors = std::move(f);
    return sched::invalid_reason(s, x);
  };
  EXPECT_NE(reason({{1, 64, 1}, {1, 32, 1}, {8}}).find("2048 threads per block"), std::string::npos);
  EXPECT_NE(reason({{4, 1, 1}, {8, 1, 1}, {8}}).find("virtual threads"), std::string::npos);
  EXPECT_NE(reason({{1, 1, 16}, {1, 1, 16}, {8}}).find("accumulator of 256"), std::string::npos);
  EXPECT_NE(reason({{1, 16, 8}, {1, 16, 8}, {64}}).find("bytes of shared memory"), std::string::npos);
  // Every random configuration keeps them.
  std::mt19937_64 rng(1);
  for (int i = 0; i < 200; ++i) {
    sched::GpuTileUse r = sched::gpu_tile_use(s, sched::random_config(s, rng));
    EXPECT_LE(r.threads, sched::kMaxGpuThreads);
    EXPECT_LE(r.shared_bytes, sched::kMaxGpuSharedBytes);
  }
}

// config_to_json writes what the JSON library writes (its fast path), for every sketch
// of every operator case, CPU and GPU.
TEST(Sketch, ConfigurationTextIsTheJsonLibrarysDump) {
  std::mt19937_64 rng(17);
  for (const Case& c : good_cases()) {
    ops::OpGraph g = ops::build_op(c.op, parse(c.params));
    std::vector<sched::Sketch> all = sched::cpu_sketches(g);
    for (const sched::Sketch& s : sched::gpu_sketches(g)) all.push_back(s);
    for (const sched::Sketch& s : all) {
      sched::Config cfg = sched::random_config(s, rng);
      nlohmann::ordered_json j;
      j["sketch"] = s.name;
      j["splits"] = nlohmann::ordered_json::object();
      for (size_t i = 0; i < s.splits.size(); ++i) j["splits"][s.splits[i].name] = cfg.factors[i];
      j["unroll"] = cfg.unroll;
      EXPECT_EQ(sched::config_to_json(s, cfg), j.dump());
    }
  }
}

TEST(Sketch, GpuThreadsPerBlockAreBounded) {
  ops::OpGraph g = ops::build_op("relu", parse("shape=64,64"));
  std::vector<sched::Sketch> sk = sched::gpu_sketches(g);
  ASSERT_EQ(sk.size(), 1u);
  EXPECT_EQ(sk[0].name, "gpu.rows.prefix=2");
  sched::Config c = sched::default_config(sk[0]);
  EXPECT_EQ(c.factors[0][0], 256);
  c.factors[0][0] = 2048;
  EXPECT_NE(sched::invalid_reason(sk[0], c).find("threads per block"), std::string::npos);
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string s = info.param.op + "_" + std::to_string(info.index);
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(AllOperators, SketchesOfEveryOperator, ::testing::ValuesIn(good_cases()), case_name);

TEST(Sketch, SymbolicLoweringWithValuesSubstitutedIsTheConcreteProgram) {
  std::mt19937_64 rng(5);
  for (const char* spec :
       {"conv2d in_channels=8 out_channels=16 height=12 width=12", "depthwise_conv2d channels=8 height=10 width=10",
        "dense M=12 K=16 N=24", "batch_matmul B=2 M=8 K=12 N=16", "softmax shape=6,20", "layer_norm shape=4,12",
        "relu shape=3,4,16"}) {
    std::string s(spec);
    std::string op = s.substr(0, s.find(' '));
    ops::OpGraph g = ops::build_op(op, parse(s.substr(op.size())));
    for (const sched::Sketch& sk : sched::cpu_sketches(g)) {
      sched::KnobValues sym = sched::symbolic_knobs(sk);
      LoweredFunc symbolic = sched::lower_sketch(g, sk, sym);
      bool has_knob = to_string(symbolic).find(sk.splits[0].name + ".") != std::string::npos;
      EXPECT_TRUE(has_knob) << "the symbolic program of " << sk.name << " does not use its knobs";
      for (int trial = 0; trial < 3; ++trial) {
        sched::Config cfg = sched::random_config(sk, rng);
        LoweredFunc concrete = sched::lower_sketch(g, sk, sched::concrete_knobs(cfg));
        LoweredFunc substituted = substitute_knobs(symbolic, sched::knob_substitution(sym, cfg));
        EXPECT_EQ(to_string(substituted), to_string(concrete))
            << op << " " << sk.name << " " << sched::config_to_json(sk, cfg);
      }
    }
  }
}

TEST(Sketch, AnchorSketchesOfAConvolution) {
  ops::OpGraph g =
      ops::build_op("conv2d", parse("in_channels=16 out_channels=32 height=14 width=14 kernel=3 padding=1"));
  std::vector<sched::Sketch> sk = sched::cpu_sketches(g);
  std::set<std::string> names;
  for (const auto& s : sk) names.insert(s.name);
  // vectorized along the output width, or along the output channels with the weight repacked
  EXPECT_TRUE(names.count("tile.vec=w.acc2.inline"));
  EXPECT_TRUE(names.count("tile.vec=c.pack.acc2.stage"));
  EXPECT_TRUE(names.count("tile.vec=c.acc1.inline"));
  EXPECT_EQ(sk[0].splits.size(), 7u);  // n c h w rc rh rw
}

TEST(Sketch, StagedPaddingRunsInParallel) {
  // A staged producer is parallel over its first axis of more than one iteration: a
  // batch-1 convolution's padded input over its channels (it ran on one thread, 5 to
  // 10% of resnet18-c1, -c2 and -c6 on two threads; docs/PERFORMANCE.md@6bf7154, "Small loops unrolled by LLVM").
  ops::OpGraph g =
      ops::build_op("conv2d", parse("in_channels=16 out_channels=32 height=14 width=14 kernel=3 padding=1"));
  std::vector<sched::Sketch> sk = sched::cpu_sketches(g);
  const sched::Sketch& s = sched::find_sketch(sk, "tile.vec=c.pack.acc2.stage");
  std::mt19937_64 rng(3);
  LoweredFunc f = sched::lower_config(g, s, sched::random_config(s, rng));
  int parallel_pad_loops = 0;
  visit_stmt(f.body, [&](const Stmt& st) {
    if (st.kind() != StmtKind::For || st->for_kind != ForKind::Parallel) return;
    bool pads = false;
    visit_stmt(st, [&](const Stmt& in) {
      pads |= in.kind() == StmtKind::Store && in->buffer->name.find("_pad") != std::string::npos;
    });
    if (pads) {
      ++parallel_pad_loops;
      int64_t extent = 0;
      EXPECT_TRUE(is_const_int(st->extent, &extent) && extent == 16) << to_string(f);  // the input channels
    }
  });
  EXPECT_EQ(parallel_pad_loops, 1) << to_string(f);
}

TEST(Sketch, GenericSketchesOfSoftmaxShareRows) {
  ops::OpGraph g = ops::build_op("softmax", parse("shape=6,20"));
  std::vector<sched::Sketch> sk = sched::cpu_sketches(g);
  ASSERT_EQ(sk.size(), 2u);
  EXPECT_EQ(sk[0].name, "rows.prefix=1");
  EXPECT_EQ(sk[1].name, "stages");
}

TEST(Sketch, AttentionTilesQueryRowsThatShareKeysAndValues) {
  ops::OpGraph g = ops::build_op("attention", parse("heads=2 queries=8 keys=16 head_dim=8 value_dim=8"));
  std::vector<sched::Sketch> sk = sched::cpu_sketches(g);
  ASSERT_EQ(sk.size(), 2u);
  EXPECT_EQ(sk[0].name, "rows.prefix=2");
  EXPECT_EQ(sk[1].name, "rows.tile.prefix=2");
  ASSERT_EQ(sk[1].splits[0].name, "rows.t");
  sched::Config c = sched::default_config(sk[1]);
  EXPECT_EQ(c.factors[0][0], 4);
  LoweredFunc f = sched::lower_config(g, sk[1], c);
  // The parallel loop runs over tiles of 4 query rows; each key vector is read inside the
  // scores' reduction loop, outside the loop over the tile's rows.
  int64_t parallel = 0;
  bool row_loop_inside_reduction = false;
  std::function<void(const Stmt&, bool)> walk = [&](const Stmt& s, bool in_reduction) {
    if (s->kind == StmtKind::For) {
      if (s->for_kind == ForKind::Parallel) is_const_int(s->extent, &parallel);
      if (s->var.name() == "attention_scores.t" && in_reduction) row_loop_inside_reduction = true;
      in_reduction = in_reduction || s->var.name().rfind("r0", 0) == 0;
    }
    for (const Stmt& b : s->body) walk(b, in_reduction);
  };
  walk(f.body, false);
  EXPECT_EQ(parallel, 2 * 8 / 4) << to_string(f);
  EXPECT_TRUE(row_loop_inside_reduction) << to_string(f);
  // Rows that share nothing (softmax) are not tiled.
  EXPECT_EQ(sched::cpu_sketches(ops::build_op("softmax", parse("shape=6,20"))).size(), 2u);
}

TEST(Sketch, PoolingCanVectorizeItsLastOutputAxis) {
  ops::OpGraph g = ops::build_op("max_pool2d", parse("channels=8 height=16 width=16 kernel=3 stride=2 padding=1"));
  std::vector<sched::Sketch> sk = sched::cpu_sketches(g);
  ASSERT_EQ(sk.size(), 2u);
  EXPECT_EQ(sk[0].name, "rows.prefix=4");  // one row per output element
  EXPECT_EQ(sk[1].name, "rows.prefix=3");  // output columns vectorized around the window
  EXPECT_EQ(sk[1].splits[0].name, "st0.v");
}

TEST(Sketch, FactorizationsAndRandomConfigurationsAreValid) {
  EXPECT_EQ(sched::factorizations(12, 1).size(), 6u);  // the divisors
  EXPECT_EQ(sched::factorizations(8, 3).size(), 20u);  // exponents a+b+c <= 3: C(6,3)
  ops::OpGraph g = ops::build_op("matmul", parse("M=64 K=48 N=96"));
  std::mt19937_64 rng(1);
  for (const sched::Sketch& s : sched::cpu_sketches(g))
    for (int i = 0; i < 50; ++i) EXPECT_EQ(sched::invalid_reason(s, sched::random_config(s, rng)), "");
}

TEST(Sketch, ConfigJsonRoundTripsAndBadFilesFailClearly) {
  ops::OpGraph g = ops::build_op("matmul", parse("M=64 K=48 N=96"));
  std::vector<sched::Sketch> sk = sched::cpu_sketches(g);
  std::mt19937_64 rng(2);
  sched::Config c = sched::random_config(sk[0], rng);
  const sched::Sketch* back = nullptr;
  sched::Config r = sched::config_from_json(sched::config_to_json(sk[0], c), sk, "cfg.json", &back);
  EXPECT_EQ(back, &sk[0]);
  EXPECT_EQ(r.factors, c.factors);
  EXPECT_EQ(r.unroll, c.unroll);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"{", "not valid JSON"},
      {"[]", "\"sketch\""},
      {R"({"sketch": "nope", "splits": {}, "unroll": 0})", "unknown sketch 'nope'"},
      {R"({"sketch": "tile.vec=j.acc2", "splits": {"i": [1,1,1], "j": [1,1,1]}, "unroll": 0})", "missing split 'k'"},
      {R"({"sketch": "tile.vec=j.acc2", "splits": {"i": [1,1,1], "j": [1,1,1], "k": [5]}, "unroll": 0})",
       "do not divide"},
      {R"({"sketch": "tile.vec=j.acc2", "splits": {"i": [1,1,1], "j": [1,1,1], "k": [1]}, "unroll": 7})",
       "not in the menu"},
      {R"({"sketch": "tile.vec=j.acc2", "splits": {"i": [1,1,1], "j": [1,1,1], "k": [1], "x": [1]}, "unroll": 0})",
       "unknown split 'x'"},
      {R"({"sketch": "tile.vec=j.acc2", "splits": {"i": [1,1], "j": [1,1,1], "k": [1]}, "unroll": 0})",
       "takes 3 factors"},
  };
  for (const auto& [text, msg] : bad) {
    try {
      sched::config_from_json(text, sk, "cfg.json", nullptr);
      ADD_FAILURE() << "accepted " << text;
    } catch (const ParseError& e) {
      EXPECT_NE(std::string(e.what()).find(msg), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("cfg.json"), std::string::npos) << e.what();
    }
  }
}

// The kinds of a statement's loops, outermost first.
std::string loop_kinds(const Stmt& s) {
  std::string k;
  visit_stmt(s, [&](const Stmt& x) {
    if (x.kind() == StmtKind::For) k += std::string(for_kind_name(x->for_kind)) + " ";
  });
  return k;
}

TEST(MarkUnrolled, UnrollsNestsWithinTheDepth) {
  Buffer b = make_buffer("b", DType::f32(), {Expr(64)});
  Var i("i"), j("j"), v("v");
  Stmt inner = make_for(
      j, Expr(0), Expr(4), ForKind::Serial,
      make_for(v, Expr(0), Expr(8), ForKind::Vectorized, make_store(b, {Expr(i) * 32 + Expr(j) * 8 + v}, fconst(1.0))));
  Stmt nest = make_for(i, Expr(0), Expr(2), ForKind::Serial, inner);
  EXPECT_EQ(loop_kinds(mark_unrolled(make_pragma("auto_unroll_max_step", Expr(4), nest))),
            "serial unrolled vectorized ");
  EXPECT_EQ(loop_kinds(mark_unrolled(make_pragma("auto_unroll_max_step", Expr(16), nest))),
            "unrolled unrolled vectorized ");
  EXPECT_EQ(loop_kinds(mark_unrolled(make_pragma("auto_unroll_max_step", Expr(0), nest))), "serial serial vectorized ");
  EXPECT_EQ(loop_kinds(mark_unrolled(nest)), "serial serial vectorized ");
}

// A vectorized loop whose loads or stores are emitted one lane at a time (a stride other
// than one, or a gather) counts one step per lane: resnet18-c2 programs whose
// accumulator tile was written back to NCHW output 3136 elements apart per lane, unrolled
// as one block of 25,088 scalar stores, took 6 s to compile instead of 0.2.
TEST(MarkUnrolled, CountsALaneByLaneVectorLoopOnceALane) {
  Buffer b = make_buffer("b", DType::f32(), {Expr(1024)});
  Buffer a = make_buffer("a", DType::f32(), {Expr(1024)});
  Var j("j"), v("v");
  auto nest = [&](Expr store_idx, Expr value) {
    return make_pragma("auto_unroll_max_step", Expr(16),
                       make_for(j, Expr(0), Expr(4), ForKind::Serial,
                                make_for(v, Expr(0), Expr(8), ForKind::Vectorized, make_store(b, {store_idx}, value))));
  };
  Expr contiguous = Expr(j) * 8 + v, strided = Expr(v) * 64 + j;
  // Contiguous and lane-invariant accesses: 4 steps, unrolled.
  EXPECT_EQ(loop_kinds(mark_unrolled(nest(contiguous, load(a, {contiguous})))), "unrolled vectorized ");
  EXPECT_EQ(loop_kinds(mark_unrolled(nest(contiguous, load(a, {Expr(j)})))), "unrolled vectorized ");
  // A strided store, a strided load, a non-affine (gathered) load: 4 x 8 steps, over 16.
  EXPECT_EQ(loop_kinds(mark_unrolled(nest(strided, fconst(1.0)))), "serial vectorized ");
  EXPECT_EQ(loop_kinds(mark_unrolled(nest(contiguous, load(a, {strided})))), "serial vectorized ");
  EXPECT_EQ(loop_kinds(mark_unrolled(nest(contiguous, load(a, {floormod(Expr(v) * Expr(v), Expr(1024))})))),
            "serial vectorized ");
}

// A task's output border (graph::store_borders): a constant zero padding at the end,
// perhaps under a last cast, is one (its inner value the padded value, cast alike);
// a padding of another value or mode, a padding inside the task, or one of an input
// alone is not.
TEST(Schedule, OutputBordersAreZeroPaddingsAtTheEnd) {
  const std::string conv =
      "graph=x0:float32[1,1,5,6,8]@-1:1;x1:float32[1,1,3,3,8,8]@-1:1;"
      "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|padding=1,1|stride=1,1};t1=relu(t0){};";
  auto border = [&](const std::string& rest) {
    return sched::output_border(ops::build_op("subgraph", parse(conv + rest)));
  };
  std::optional<sched::OutputBorder> b = border("t2=pad(t1){mode=constant|pads=0,0,1,2,0,0,0,1,2,0|value=0}");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->before, (std::vector<int64_t>{0, 0, 1, 2, 0}));
  EXPECT_EQ(b->inner.shape(), (std::vector<int64_t>{1, 1, 5, 6, 8}));
  b = border("t2=pad(t1){mode=constant|pads=0,0,0,1,0,0,0,2,0,0|value=0};t3=cast(t2){to=bfloat16}");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->before, (std::vector<int64_t>{0, 0, 0, 1, 0}));
  EXPECT_EQ(b->inner.dtype(), DType::bf16());
  EXPECT_FALSE(border("t2=pad(t1){mode=constant|pads=0,0,1,1,0,0,0,1,1,0|value=1}"));
  EXPECT_FALSE(border("t2=pad(t1){mode=edge|pads=0,0,1,1,0,0,0,1,1,0|value=0}"));
  EXPECT_FALSE(border("t2=pad(t1){mode=constant|pads=0,0,1,1,0,0,0,1,1,0|value=0};t3=relu(t2){}"));
  EXPECT_FALSE(border("t2=cast(t1){to=bfloat16}"));
  EXPECT_FALSE(sched::output_border(
      ops::build_op("subgraph", parse("graph=x0:float32[2,3]@-1:1;t0=pad(x0){mode=constant|pads=1,0,0,0|value=0}"))));
}

}  // namespace
TEST(Sketch, TaskKeysRoundTrip) {
  for (const Case& c : good_cases()) {
    ops::OpGraph g = ops::build_op(c.op, parse(c.params));
    std::string key = sched::task_key(g);
    EXPECT_EQ(sched::task_key(sched::task_from_key(key)), key);
  }
  EXPECT_THROW(sched::task_from_key("dense"), ParseError);
  EXPECT_THROW(sched::task_from_key("(M=1)"), ParseError);
  EXPECT_THROW(sched::task_from_key("dense(,M=3)"), ParseError);
  EXPECT_THROW(sched::task_from_key("nosuchop(M=3)"), Error);
}

// A configuration at one extent fitted to the same sketch at another (a shape range's
// buckets): kept where it fits, each split's factors shrunk from the innermost out to
// divide the new extent (within it and built from its primes where guarded), always valid;
// none for another sketch's name or malformed JSON.
TEST(Sketch, ConfigurationsFitOtherExtentsOfTheSameSketch) {
  const std::vector<sched::Sketch> big = sched::cpu_sketches(ops::build_op("dense", parse("M=96 K=40 N=48")));
  const std::vector<sched::Sketch> small = sched::cpu_sketches(ops::build_op("dense", parse("M=6 K=40 N=48")));
  ASSERT_EQ(big.size(), small.size());
  std::mt19937_64 rng(7);
  int fitted = 0, changed = 0;
  for (size_t s = 0; s < big.size(); ++s) {
    ASSERT_EQ(big[s].name, small[s].name);
    for (int t = 0; t < 20; ++t) {
      const sched::Config c = sched::random_config(big[s], rng);
      const std::string json = sched::config_to_json(big[s], c);
      std::optional<sched::Config> f = sched::fit_config(small[s], json);
      ASSERT_TRUE(f) << json;
      EXPECT_EQ(sched::invalid_reason(small[s], *f), "") << json;
      ++fitted;
      changed += f->factors != c.factors;
      // At its own extents a configuration is itself.
      std::optional<sched::Config> same = sched::fit_config(big[s], json);
      ASSERT_TRUE(same);
      EXPECT_EQ(same->factors, c.factors);
      EXPECT_EQ(same->unroll, c.unroll);
      if (s + 1 < big.size()) EXPECT_FALSE(sched::fit_config(small[s + 1], json)) << "another sketch's name";
    }
  }
  EXPECT_GT(changed, fitted / 4);
  EXPECT_FALSE(sched::fit_config(small[0], "not json"));
  EXPECT_FALSE(sched::fit_config(small[0], "{\"sketch\": \"" + small[0].name + "\"}"));
}

}  // namespace basin
