// The core correctness guarantee of the CPU backend: for every sketch of the operator
// suite (conv2d, depthwise conv2d, dense, batch_matmul, softmax, layer_norm and the
// fused conv2d + bias + relu), random valid configurations are lowered, compiled by
// LLVM and compared with the interpreter running the same program, and with the
// default schedule. Zero mismatches; at least 300 configurations in total, at least 50
// of them with a guarded, partial last tile (awkward extents).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <random>

#include "codegen/llvm_jit.h"
#include "codegen/op_check.h"
#include "core/ir/interpreter.h"
#include "core/ir/lower.h"
#include "core/ir/runtime_extent.h"
#include "core/ops/registry.h"
#include "core/schedule/lower_sketch.h"
#include "core/schedule/task_analysis.h"
#include "core/util/host.h"
#include "tests/ops/op_cases.h"

namespace basin {
namespace {

struct Suite {
  std::string op, params;
  int per_sketch;
};

std::vector<NDArray> run(const ops::OpGraph& g, std::vector<NDArray>& in,
                         const std::function<void(std::vector<NDArray*>&)>& f) {
  std::vector<NDArray> out;
  for (const te::Tensor& t : g.outputs) out.emplace_back(t.dtype(), t.shape());
  std::vector<NDArray*> args;
  for (NDArray& a : in) args.push_back(&a);
  for (NDArray& a : out) args.push_back(&a);
  f(args);
  return out;
}

// The operator's default schedule, interpreted: the float32 reference.
std::vector<NDArray> default_outputs(const Suite& c, const ops::OpGraph& g, std::vector<NDArray>& in) {
  return run(g, in, [&](std::vector<NDArray*>& a) { interpret(lower_default(c.op, g.inputs, g.outputs), a); });
}

// One configuration lowered, then run by the interpreter (the oracle) and compiled by LLVM.
struct BothEngines {
  LoweredFunc f;
  std::vector<NDArray> oracle, got;
};
BothEngines run_both(const ops::OpGraph& g, const sched::Sketch& s, const sched::Config& cfg,
                     std::vector<NDArray>& in) {
  BothEngines r;
  r.f = sched::lower_config(g, s, cfg);
  r.oracle = run(g, in, [&](std::vector<NDArray*>& a) { interpret(r.f, a); });
  r.got = run(g, in, [&](std::vector<NDArray*>& a) { codegen::compile_llvm(r.f)->run(a); });
  return r;
}

// An AMX configuration lowered, then run by the interpreter (the oracle), compiled by
// LLVM with the tiles (its assembly kept) and without (LlvmOptions::amx_tiles off).
struct AmxEngines {
  LoweredFunc f;
  std::vector<NDArray> oracle, got, got_plain;
  std::string assembly;
};
AmxEngines run_amx(const ops::OpGraph& g, const sched::Sketch& s, const sched::Config& cfg, std::vector<NDArray>& in) {
  AmxEngines r;
  r.f = sched::lower_config(g, s, cfg);
  r.oracle = run(g, in, [&](std::vector<NDArray*>& a) { interpret(r.f, a); });
  codegen::LlvmOptions tiles, plain;
  tiles.keep_asm = true;
  plain.amx_tiles = false;
  auto kernel = codegen::compile_llvm(r.f, tiles);
  r.got = run(g, in, [&](std::vector<NDArray*>& a) { kernel->run(a); });
  r.got_plain = run(g, in, [&](std::vector<NDArray*>& a) { codegen::compile_llvm(r.f, plain)->run(a); });
  r.assembly = kernel->assembly();
  return r;
}

// Every AMX sketch of each case of the suite (bfloat16 ones, or with int8 the 8-bit
// ones), its default configuration then random ones, each valid one run by run_amx and
// given to `check` with the case's inputs and reference outputs (the default schedule
// interpreted); counts the configurations run, read in place and across rows, and
// expects an AMX sketch for every case. Stops at the first failure.
struct AmxCounts {
  int total = 0, in_place = 0, flat_rows = 0;
};
using AmxCheck = std::function<void(const Suite&, const ops::OpGraph&, const sched::Sketch&, const sched::Config&,
                                    std::vector<NDArray>&, const std::vector<NDArray>&, const AmxEngines&)>;
AmxCounts for_each_amx_config(const std::vector<Suite>& suite, bool int8, uint64_t seed, const AmxCheck& check) {
  AmxCounts n;
  std::mt19937_64 rng(seed);
  for (const Suite& c : suite) {
    ops::OpGraph g = ops::build_op(c.op, parse(c.params));
    std::vector<NDArray> in = codegen::random_inputs(g, 3);
    std::vector<NDArray> ref = default_outputs(c, g, in);
    int sketches = 0;
    for (const sched::Sketch& s : sched::cpu_sketches(g, !int8, int8, true)) {
      if (s.rule != sched::SketchRule::CpuAmx) continue;
      ++sketches;
      for (int t = 0; t < c.per_sketch; ++t) {
        sched::Config cfg = t == 0 ? sched::default_config(s) : sched::random_config(s, rng);
        if (!sched::invalid_reason(s, cfg).empty()) continue;
        check(c, g, s, cfg, in, ref, run_amx(g, s, cfg, in));
        ++n.total;
        n.in_place += s.amx_direct;
        n.flat_rows += s.amx_flat_rows;
        if (::testing::Test::HasFailure()) return n;
      }
    }
    EXPECT_GE(sketches, 1) << c.op << " " << c.params << " has no AMX sketch";
  }
  return n;
}

TEST(SketchProperty, LlvmMatchesTheInterpreterOnRandomConfigurations) {
  if (!codegen::llvm_enabled()) GTEST_SKIP() << "built without LLVM";
  const std::vector<Suite> suite = {
      {"conv2d", "in_channels=8 out_channels=16 height=10 width=12 kernel=3 padding=1", 5},
      {"conv2d", "in_channels=6 out_channels=8 height=9 width=9 kernel=3 stride=2 padding=1", 3},
      {"conv2d", "in_channels=16 out_channels=8 height=8 width=8 kernel=1 padding=0", 3},
      {"depthwise_conv2d", "channels=16 height=10 width=10", 4},
      {"depthwise_conv2d", "channels=8 height=9 width=11 stride=2", 3},
      {"dense", "M=12 K=40 N=32", 8},
      {"dense", "M=7 K=9 N=5", 4},
      {"batch_matmul", "B=3 M=8 K=12 N=16", 10},
      {"softmax", "shape=6,40", 15},
      {"softmax", "shape=2,3,5,8 axis=1", 10},
      {"layer_norm", "shape=4,48", 15},
      {"layer_norm", "shape=3,5,16 axis=1", 10},
      {"conv2d_bias_relu", "in_channels=8 out_channels=16 height=8 width=8 kernel=3 padding=1", 6},
      // An epilogue whose stages read the anchor's value twice (SiLU: x * sigmoid(x)), on a
      // depthwise convolution.
      {"subgraph",
       "graph=x0:float32[1,8,9,9]@-1:1;x1:float32[8,1,3,3]@-1:1;x2:float32[8,1,1]@-1:1;"
       "t0=conv2d(x0,x1){dilation=1,1|groups=8|padding=1,1|stride=2,2};t1=add(t0,x2){};t2=sigmoid(t1){};"
       "t3=mul(t1,t2){}",
       4},
      // Quantized products: uint8 by int8 summed in int32 (a QDQ model's convolution with
      // its zero point as padding, and a dense layer requantized in its epilogue).
      {"subgraph",
       "graph=x0:uint8[1,8,10,10]@0:256;x1:int8[16,8,3,3]@-128:128;x2:int32[16,1,1]@-5000:5000;"
       "t0=pad(x0){mode=constant|pads=0,0,1,1,0,0,1,1|value=7};t1=conv2d(t0,x1){dilation=1,1|groups=1|padding=0,0|"
       "stride=1,1};t2=add(t1,x2){}",
       5},
      {"subgraph",
       "graph=x0:uint8[12,40]@0:256;x1:int8[24,40]@-128:128;x2:float32[24]@0.001:0.002;x3:float32[]@0.05:0.06;"
       "x4:int32[]@0:10;t0=dense(x0,x1){};t1=cast(t0){to=float32};t2=mul(t1,x2){};"
       "t3=quantize_linear(t2,x3,x4){axis=1|qmax=127|qmin=-128}",
       6},
      // Indices read from memory inside a vectorized loop (bert_base's embedding once failed
      // to compile: a uniform select over a loaded index was splatted).
      {"embedding", "num_embeddings=50 dim=24 indices_shape=3,5", 6},
      {"gather", "axis=0 indices_shape=11", 4},
      // Pooling: rows of output elements, or the last output axis vectorized around the
      // window (strided, padded reads).
      {"max_pool2d", "", 6},
      {"max_pool2d", "kernel=3 stride=2 padding=1 height=13 width=13", 6},
      {"avg_pool2d", "kernel=3,2 stride=1,2 padding=1,1 count_include_pad=0", 6},
      // Attention: rows computed one by one, or in tiles of query rows sharing each key
      // and value vector (a partial last tile at 13 queries).
      {"attention", "batch=2 heads=2 queries=8 keys=12 head_dim=8 value_dim=8 mask=padding", 6},
      {"attention", "heads=2 queries=13 keys=9 head_dim=5 value_dim=6 mask=causal", 6},
      // Awkward extents: guarded splits whose last tiles are partial.
      {"dense", "M=37 K=10 N=23", 6},
      {"dense", "M=4 K=197 N=8", 4},
      {"softmax", "shape=3,197", 10},
      {"conv2d", "in_channels=3 out_channels=5 height=7 width=7 kernel=3 padding=1", 3},
      // The blocked layout NCHWc: convolutions (an NHWC input, a depthwise one at stride
      // 2), a blocked bias and activation, pooling over blocked values.
      {"conv2d_nchwc", "in_channels=16 out_channels=16 block=8 height=9 width=7 kernel=3 padding=1", 5},
      {"conv2d_nchwc", "in_channels=3 in_block=3 out_channels=8 block=8 height=9 width=9 stride=2", 3},
      {"conv2d_nchwc", "in_channels=16 out_channels=16 groups=16 block=8 height=9 width=9 stride=2", 4},
      // Winograd's F(m x m, 3 x 3): the input tiles (padding and zeros past the last tile
      // read in place), the batched GEMM, the outputs with an epilogue, odd extents.
      {"winograd_input", "in_channels=16 block=8 height=9 width=7", 4},
      {"winograd_input", "m=4 in_channels=8 block=8 height=6 width=5 padding=2", 3},
      {"winograd_gemm", "in_channels=16 block=8 out_channels=16 height=5 width=7", 5},
      {"winograd_gemm", "m=4 in_channels=8 block=8 out_channels=16 out_block=16 height=7 width=7", 3},
      {"subgraph",
       "graph=x0:float32[4,4,1,2,12,8]@-1:1;x1:float32[1,2,1,1,8]@-1:1;"
       "t0=winograd_output(x0){height=7|m=2|width=5};t1=add(t0,x1){};t2=relu(t1){}",
       4},
      // NCHW, vectorized along the width: the activation's channel pairs interleaved.
      {"conv2d", "in_channels=10 out_channels=12 height=6 width=28 kernel=1", 6},
      {"conv2d", "in_channels=6 out_channels=8 height=7 width=9 kernel=3 padding=1", 6},
      {"subgraph",
       "graph=x0:float32[1,2,7,7,8]@-1:1;x1:float32[1,2,1,1,8,8]@-1:1;x2:float32[1,1,1,1,8]@-1:1;"
       "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|padding=0,0|stride=1,1};t1=add(t0,x2){};t2=clip(t1){max=6|min=0}",
       4},
      {"subgraph",
       "graph=x0:float32[1,2,9,9,8]@-1:1;"
       "t0=max_pool2d(x0){ceil_mode=0|dilation=1,1|kernel=3,3|padding=1,1|stride=2,2}",
       4},
  };
  int total = 0, partial = 0;
  std::mt19937_64 rng(2026);
  for (const Suite& c : suite) {
    ops::OpGraph g = ops::build_op(c.op, parse(c.params));
    std::vector<NDArray> in = codegen::random_inputs(g, 3);
    std::vector<NDArray> ref = default_outputs(c, g, in);
    for (const sched::Sketch& s : sched::cpu_sketches(g)) {
      for (int t = 0; t < c.per_sketch; ++t) {
        sched::Config cfg = sched::random_config(s, rng);
        bool has_partial = false;
        for (size_t i = 0; i < s.splits.size(); ++i) {
          int64_t prod = 1;
          for (int64_t f : cfg.factors[i]) prod *= f;
          has_partial |= s.splits[i].extent % prod != 0;
        }
        partial += has_partial;
        auto [f, oracle, got] = run_both(g, s, cfg, in);
        for (size_t i = 0; i < got.size(); ++i) {
          ErrorStats vs_oracle = compare_arrays(got[i], oracle[i]);
          ErrorStats vs_default = compare_arrays(oracle[i], ref[i]);
          EXPECT_LE(vs_oracle.max_rel, 1e-4) << c.op << " " << c.params << " " << sched::config_to_json(s, cfg) << "\n"
                                             << to_string(f);
          EXPECT_LE(vs_default.max_rel, 1e-4) << c.op << " " << c.params << " " << sched::config_to_json(s, cfg);
        }
        ++total;
        if (HasFailure()) return;
      }
    }
  }
  EXPECT_GE(total, 300);
  EXPECT_GE(partial, 50);
  std::cout << "[ property ] " << total << " random configurations compiled by LLVM (" << partial
            << " with partial last tiles), no mismatch\n";
}

// The bfloat16 sketches (precision bf16, Sketch::bf16_pair): random configurations
// compiled by LLVM (vdpbf16ps where the CPU has AVX512-BF16, the products as written
// elsewhere) against the interpreter running the same program, which rounds the
// operands to bfloat16 exactly; and within bfloat16's tolerance of the float32 default.
TEST(SketchProperty, Bf16SketchesMatchTheInterpreterOnRandomConfigurations) {
  if (!codegen::llvm_enabled()) GTEST_SKIP() << "built without LLVM";
  const std::vector<Suite> suite = {
      {"dense", "M=12 K=40 N=32", 8},
      {"dense", "M=37 K=10 N=23", 6},  // guarded splits: partial last tiles
      {"dense", "M=9 K=7 N=16", 6},    // an odd reduction: padded pairs
      // ResNet's first convolution: 3 input channels, padded pairs of the channel block.
      {"conv2d_nchwc",
       "in_channels=3 in_block=3 out_channels=16 block=16 height=12 width=12 kernel=7 stride=2 padding=3", 4},
      {"matmul", "M=16 K=24 N=48", 6},
      {"batch_matmul", "B=3 M=8 K=12 N=16", 6},
      {"winograd_gemm", "in_channels=16 block=8 out_channels=16 height=5 width=7", 4},  // F(2x2)
      {"conv2d_nchwc", "in_channels=16 out_channels=16 block=8 height=9 width=7 kernel=3 padding=1", 6},
      {"conv2d_nchwc", "in_channels=16 out_channels=32 block=16 height=8 width=8 kernel=1 stride=2", 4},
      // NCHW, vectorized along the width: the activation's channel pairs interleaved.
      {"conv2d", "in_channels=10 out_channels=12 height=6 width=28 kernel=1", 6},
      {"conv2d", "in_channels=6 out_channels=8 height=7 width=9 kernel=3 padding=1", 6},
      {"subgraph",
       "graph=x0:float32[1,2,7,7,8]@-1:1;x1:float32[1,2,1,1,8,8]@-1:1;x2:float32[1,1,1,1,8]@-1:1;"
       "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|padding=0,0|stride=1,1};t1=add(t0,x2){};t2=clip(t1){max=6|min=0}",
       4},
  };
  int total = 0;
  std::mt19937_64 rng(2027);
  for (const Suite& c : suite) {
    ops::OpGraph g = ops::build_op(c.op, parse(c.params));
    std::vector<NDArray> in = codegen::random_inputs(g, 3);
    std::vector<NDArray> ref = default_outputs(c, g, in);
    int sketches = 0;
    for (const sched::Sketch& s : sched::cpu_sketches(g, true)) {
      if (s.bf16_pair < 0) continue;
      ++sketches;
      for (int t = 0; t < c.per_sketch; ++t) {
        sched::Config cfg = sched::random_config(s, rng);
        auto [f, oracle, got] = run_both(g, s, cfg, in);
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_LE(compare_arrays(got[i], oracle[i]).max_rel, 1e-5)
              << c.op << " " << c.params << " " << sched::config_to_json(s, cfg) << "\n"
              << to_string(f);
          const double vs_f32 = compare_arrays(oracle[i], ref[i]).max_rel;
          EXPECT_LE(vs_f32, sched::result_tolerance(s, 1e-4)) << c.op << " " << sched::config_to_json(s, cfg);
          EXPECT_GT(vs_f32, 0.0) << "a bfloat16 program computed the float32 result exactly: " << c.op;
        }
        ++total;
        if (HasFailure()) return;
      }
    }
    EXPECT_GE(sketches, 2) << c.op << " " << c.params << " has no bfloat16 sketch";
  }
  EXPECT_GE(total, 80);
  std::cout << "[ property ] " << total << " random bfloat16 configurations compiled by LLVM, no mismatch\n";
}

// The AMX sketches (SketchRule::CpuAmx): random configurations of their tiles (TM x TN
// accumulators) compiled by LLVM (AMX-BF16 tile instructions where the CPU has them,
// checked in the assembly; vdpbf16ps or the products as written elsewhere, and always
// once more with LlvmOptions::amx_tiles off) against the interpreter running the same
// program; within bfloat16's tolerance of the float32 default. Partial tiles in every
// direction (rows, columns, k's steps of 32), batched products, an epilogue.
TEST(SketchProperty, AmxSketchesMatchTheInterpreterOnRandomConfigurations) {
  if (!codegen::llvm_enabled()) GTEST_SKIP() << "built without LLVM";
  const std::vector<Suite> suite = {
      {"dense", "M=37 K=40 N=23", 4},
      {"dense", "M=32 K=64 N=48", 5},
      {"dense", "M=9 K=7 N=16", 2},
      {"matmul", "M=16 K=24 N=48", 3},
      {"batch_matmul", "B=3 M=20 K=70 N=33", 4},
      {"subgraph",
       "graph=x0:float32[24,96]@-1:1;x1:float32[40,96]@-1:1;x2:float32[40]@-1:1;t0=dense(x0,x1){};t1=add(t0,x2){};"
       "t2=relu(t1){}",
       3},
      // Blocked convolutions: rows (h, w), columns (c, cb), k (rc, rh, rw, rcb); the
      // padding computed into the copy; a strided 1x1; a bias and clip epilogue.
      {"conv2d_nchwc", "in_channels=32 out_channels=32 block=16 height=9 width=7 kernel=3 padding=1", 3},
      {"conv2d_nchwc", "in_channels=16 out_channels=48 block=16 height=8 width=8 kernel=1 stride=2", 3},
      // Read in place (amx.bf16.direct): rows of 16 along the width, partial last tiles
      // (width 20), a stride of 2, a dilation of 2, 48 channels (k's steps padded to 64).
      {"conv2d_nchwc", "in_channels=16 out_channels=32 block=16 height=5 width=20 kernel=3 padding=1", 3},
      {"conv2d_nchwc", "in_channels=48 out_channels=16 block=16 height=9 width=9 kernel=3 padding=1 stride=2", 3},
      {"conv2d_nchwc", "in_channels=32 out_channels=16 block=16 height=7 width=18 kernel=3 padding=2 dilation=2", 3},
      // Rows across output rows (amx.bf16.flat, offered for every stride-1 convolution
      // above): a 7x7 map, whose rows fill 7 of a tile's 16 when read row by row.
      {"conv2d_nchwc", "in_channels=32 out_channels=32 block=16 height=7 width=7 kernel=3 padding=1", 4},
      // A plane row of exactly 16 positions (width 14, padded): each tile's rows cross
      // one row's end, found by one compare from the tile's first row.
      {"conv2d_nchwc", "in_channels=32 out_channels=16 block=16 height=5 width=14 kernel=3 padding=1", 3},
      // Fewer than 32 channels: the window's columns folded into the channels' steps
      // (ResNet's first convolution, 3 channels, 7x7 stride 2; MobileNet's, 3x3 stride 2).
      {"conv2d_nchwc",
       "in_channels=3 in_block=3 out_channels=16 block=16 height=12 width=20 kernel=7 stride=2 padding=3", 3},
      {"conv2d_nchwc",
       "in_channels=3 in_block=3 out_channels=32 block=16 height=9 width=11 kernel=3 stride=2 padding=1", 3},
      {"subgraph",
       "graph=x0:float32[1,2,7,7,16]@-1:1;x1:float32[2,2,1,1,16,16]@-1:1;x2:float32[1,2,1,1,16]@-1:1;"
       "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|padding=0,0|stride=1,1};t1=add(t0,x2){};t2=clip(t1){max=6|min=0}",
       3},
      // Outputs blocked by fewer than 16 channels (mobilenet_v2's 24-channel projections
      // at block 8): a tile's columns are runs of the block, 40 channels a partial tile.
      {"subgraph",
       "graph=x0:float32[1,3,5,7,16]@-1:1;x1:float32[3,3,1,1,16,8]@-1:1;x2:float32[1,3,1,1,8]@-1:1;"
       "x3:float32[1,3,5,7,8]@-1:1;t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|padding=0,0|stride=1,1};"
       "t1=add(t0,x2){};t2=add(x3,t1){}",
       3},
      {"conv2d_nchwc", "in_channels=32 out_channels=40 block=8 height=6 width=5 kernel=1 padding=0", 3},
      {"conv2d_nchwc", "in_channels=16 out_channels=20 block=4 height=4 width=9 kernel=3 padding=1", 3},
      // NCHW 1x1 convolutions (shufflenet's): the weight as A, the input as B packed per
      // call, a tile's columns straddling rows of the width (7 and 9 columns a row).
      {"conv2d", "in_channels=24 out_channels=20 height=7 width=9 kernel=1 padding=0", 3},
      {"subgraph",
       "graph=x0:float32[1,40,7,7]@-1:1;x1:float32[36,40,1,1]@-1:1;x2:float32[36,1,1]@-1:1;"
       "t0=conv2d(x0,x1){dilation=1,1|groups=1|padding=0,0|stride=1,1};t1=add(t0,x2){};t2=relu(t1){}",
       3},
  };
  const bool amx_here = this_host().amx_bf16;
  const AmxCounts n = for_each_amx_config(
      suite, false, 2029,
      [&](const Suite& c, const ops::OpGraph& g, const sched::Sketch& s, const sched::Config& cfg,
          std::vector<NDArray>& in, const std::vector<NDArray>& ref, const AmxEngines& r) {
        const auto& [f, oracle, got, got_plain, assembly] = r;
        if (amx_here) {
          EXPECT_NE(assembly.find("tdpbf16ps"), std::string::npos) << c.op << " " << c.params;
          // The accumulators start as zero tiles (the pragma's value 0), not as loads.
          EXPECT_NE(assembly.find("tilezero"), std::string::npos) << c.op << " " << c.params;
        }
        // The same nest told that acc holds partial sums (value 1): the tiles start as
        // loads of what the zeroing stored, and the results are the same.
        LoweredFunc adding = f;
        int marked = 0;
        adding.body = rewrite_stmt(f.body, nullptr, [&](const Stmt& st) -> Stmt {
          if (st->kind != StmtKind::Pragma || st->key != kAmxBf16Pragma) return Stmt();
          ++marked;
          return make_pragma(st->key, Expr(int64_t{1}), st->body[0]);
        });
        EXPECT_EQ(marked, 1);
        std::vector<NDArray> got_adding =
            run(g, in, [&](std::vector<NDArray*>& a) { codegen::compile_llvm(adding)->run(a); });
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_LE(compare_arrays(got[i], oracle[i]).max_rel, 1e-5)
              << c.op << " " << c.params << " " << sched::config_to_json(s, cfg) << "\n"
              << to_string(f);
          EXPECT_LE(compare_arrays(got_plain[i], oracle[i]).max_rel, 1e-5)
              << c.op << " " << c.params << " " << sched::config_to_json(s, cfg);
          EXPECT_LE(compare_arrays(got_adding[i], oracle[i]).max_rel, 1e-5)
              << c.op << " " << c.params << " " << sched::config_to_json(s, cfg);
          EXPECT_LE(compare_arrays(oracle[i], ref[i]).max_rel, sched::result_tolerance(s, 1e-4))
              << c.op << " " << sched::config_to_json(s, cfg);
        }
      });
  EXPECT_GE(n.total, 15);
  EXPECT_GE(n.in_place, 8);
  EXPECT_GE(n.flat_rows, 8);
  std::cout << "[ property ] " << n.total << " random AMX configurations compiled by LLVM"
            << (amx_here ? " (AMX-BF16 tiles)" : " (no AMX here: vdpbf16ps or as written)") << ", no mismatch\n";
}

// The attention operator on AMX tiles (Sketch::amx_attention): random configurations
// of its tiles (TM query tiles per panel, TN column tiles per group) compiled by LLVM
// (AMX where the CPU has it, as written with amx_tiles off) against the interpreter
// running the same program, and within bfloat16's tolerance of the float32 operator.
// Partial tiles everywhere (L, S, E not multiples of 16, D and S not of 32, odd D and
// S), the three masks, a scale.
TEST(SketchProperty, AmxAttentionMatchesTheInterpreterOnRandomConfigurations) {
  if (!codegen::llvm_enabled()) GTEST_SKIP() << "built without LLVM";
  const std::vector<Suite> suite = {
      {"attention", "batch=1 heads=2 queries=20 keys=37 head_dim=24 value_dim=40", 4},
      {"attention", "batch=2 heads=2 queries=32 keys=64 head_dim=64 value_dim=64 mask=padding", 4},
      {"attention", "batch=1 heads=3 queries=17 keys=17 head_dim=7 value_dim=9 mask=causal scale=0.5", 4},
      {"attention", "batch=2 heads=1 queries=48 keys=33 head_dim=32 value_dim=16 mask=full", 4},
  };
  const bool amx_here = this_host().amx_bf16;
  int total = 0;
  std::mt19937_64 rng(2031);
  for (const Suite& c : suite) {
    ops::OpGraph g = ops::build_op(c.op, parse(c.params));
    std::vector<NDArray> in = codegen::random_inputs(g, 3);
    std::vector<NDArray> ref = default_outputs(c, g, in);
    int sketches = 0;
    for (const sched::Sketch& s : sched::cpu_sketches(g, true, false, true)) {
      if (!s.amx_attention) continue;
      ++sketches;
      for (int t = 0; t < c.per_sketch; ++t) {
        sched::Config cfg = t == 0 ? sched::default_config(s) : sched::random_config(s, rng);
        if (!sched::invalid_reason(s, cfg).empty()) continue;
        auto [f, oracle, got, got_plain, assembly] = run_amx(g, s, cfg, in);
        if (amx_here) {
          EXPECT_NE(assembly.find("tdpbf16ps"), std::string::npos) << c.params;
        }
        const std::string what = c.params + " " + sched::config_to_json(s, cfg);
        // The exponentials rounded to bfloat16: an ulp of float32 between the backend's
        // exp and the interpreter's may become one of bfloat16 (sched::oracle_tolerance).
        EXPECT_LE(compare_arrays(got[0], oracle[0]).max_rel, sched::oracle_tolerance(s, 1e-5)) << what;
        EXPECT_LE(compare_arrays(got_plain[0], oracle[0]).max_rel, sched::oracle_tolerance(s, 1e-5)) << what;
        const double vs_f32 = compare_arrays(oracle[0], ref[0]).max_rel;
        EXPECT_LE(vs_f32, sched::result_tolerance(s, 1e-4)) << what;
        EXPECT_GT(vs_f32, 0.0) << "a bfloat16 program computed the float32 result exactly: " << what;
        ++total;
        if (HasFailure()) return;
      }
    }
    EXPECT_EQ(sketches, 1) << c.params;
    // Not offered without AMX or at float32.
    for (const sched::Sketch& s : sched::cpu_sketches(g, true, false, false)) EXPECT_FALSE(s.amx_attention);
    for (const sched::Sketch& s : sched::cpu_sketches(g, false, false, true)) EXPECT_FALSE(s.amx_attention);
  }
  EXPECT_GE(total, 12);
  std::cout << "[ property ] " << total << " random AMX attention configurations compiled by LLVM"
            << (amx_here ? " (AMX-BF16 tiles)" : " (no AMX here: as written)") << ", no mismatch\n";
}

// Tasks of stored activations (graph::store_activations_bf16): bfloat16 inputs read
// through the stages that widen them, outputs narrowed to bfloat16 last. Every sketch at
// bf16 (AMX where the CPU has it): random configurations compiled by LLVM against the
// interpreter running the same program, and the task's float32-product default, each
// within a rounding step of the stored output (sched::storage_tolerance).
TEST(SketchProperty, StoredBfloat16TasksMatchTheInterpreterOnRandomConfigurations) {
  if (!codegen::llvm_enabled()) GTEST_SKIP() << "built without LLVM";
  const std::vector<Suite> suite = {
      {"subgraph",  // a 3x3 convolution with its bias and activation
       "graph=x0:bfloat16[1,1,9,9,16]@-1:1;x1:float32[2,1,3,3,16,16]@-1:1;x2:float32[1,2,1,1,16]@-1:1;"
       "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|padding=1,1|stride=1,1};t1=add(t0,x2){};t2=relu(t1){};"
       "t3=cast(t2){to=bfloat16}",
       1},
      {"subgraph",  // a depthwise one at stride 2
       "graph=x0:bfloat16[1,2,9,9,8]@-1:1;x1:float32[2,1,3,3,1,8]@-1:1;"
       "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=16|padding=1,1|stride=2,2};t1=cast(t0){to=bfloat16}",
       2},
      {"subgraph",  // a 1x1 projection adding a stored residual
       "graph=x0:bfloat16[1,2,7,7,16]@-1:1;x1:float32[2,2,1,1,16,16]@-1:1;x2:bfloat16[1,2,7,7,16]@-1:1;"
       "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|padding=0,0|stride=1,1};t1=add(t0,x2){};"
       "t2=cast(t1){to=bfloat16}",
       2},
      {"subgraph",  // dense layers: rows read in place (a partial last tile), or copied (fewer than 16)
       "graph=x0:bfloat16[37,64]@-1:1;x1:float32[40,64]@-1:1;x2:float32[40]@-1:1;t0=dense(x0,x1){};"
       "t1=add(t0,x2){};t2=cast(t1){to=bfloat16}",
       2},
      {"subgraph", "graph=x0:bfloat16[13,64]@-1:1;x1:float32[40,64]@-1:1;t0=dense(x0,x1){};t1=cast(t0){to=bfloat16}",
       2},
      {"subgraph",  // a batched product in place (its right operand float32: graph::store_activations_bf16)
       "graph=x0:bfloat16[2,32,32]@-1:1;x1:float32[2,32,48]@-1:1;t0=batch_matmul(x0,x1){};"
       "t1=cast(t0){to=bfloat16}",
       3},
      {"subgraph",  // attention over stored q, k, v
       "graph=x0:bfloat16[2,20,24]@-1:1;x1:bfloat16[2,24,37]@-1:1;x2:bfloat16[2,37,16]@-1:1;"
       "t0=attention(x0,x1,x2){batch_shape=|scale=0.5};t1=cast(t0){to=bfloat16}",
       3},
      {"subgraph",  // a 1x1 convolution of an input blocked by 32: A's tiles read in place, block by block
       "graph=x0:bfloat16[1,3,5,7,32]@-1:1;x1:float32[2,3,1,1,32,16]@-1:1;x2:float32[1,2,1,1,16]@-1:1;"
       "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|padding=0,0|stride=1,1};t1=add(t0,x2){};"
       "t2=cast(t1){to=bfloat16}",
       3},
      {"subgraph",  // a 3x3 convolution of a value stored with its zero border, blocked by 32:
                    // flat rows read in place, two images, the last tile of a plane clamped
       "graph=x0:bfloat16[2,2,9,10,32]@-1:1;x1:float32[2,2,3,3,32,16]@-1:1;x2:float32[1,2,1,1,16]@-1:1;"
       "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|padding=0,0|stride=1,1};t1=add(t0,x2){};t2=relu(t1){};"
       "t3=cast(t2){to=bfloat16}",
       3},
      {"subgraph",  // an NCHW 1x1 convolution: the stored input packed as B
       "graph=x0:bfloat16[1,36,14,14]@-1:1;x1:float32[24,36,1,1]@-1:1;"
       "t0=conv2d(x0,x1){dilation=1,1|groups=1|padding=0,0|stride=1,1};t1=cast(t0){to=bfloat16}",
       2},
      {"subgraph",
       "graph=x0:bfloat16[3,40]@-1:1;x1:float32[40]@0.5:1.5;x2:float32[40]@-1:1;"
       "t0=layer_norm(x0,x1,x2){axis=-1|epsilon=1e-05};t1=cast(t0){to=bfloat16}",
       4},
      {"subgraph",
       "graph=x0:bfloat16[1,2,9,9,8]@-1:1;"
       "t0=max_pool2d(x0){ceil_mode=0|dilation=1,1|kernel=3,3|padding=1,1|stride=2,2};"
       "t1=cast(t0){to=bfloat16}",
       3},
      {"subgraph", "graph=x0:float32[1,16,5,7]@-1:1;t0=to_nchwc(x0){block=8};t1=cast(t0){to=bfloat16}", 3},
      {"subgraph", "graph=x0:bfloat16[1,2,5,7,8]@-1:1;t0=from_nchwc(x0){}", 3},
  };
  const bool amx_here = this_host().amx_bf16;
  int total = 0, amx = 0, in_place = 0;
  std::mt19937_64 rng(2041);
  for (const Suite& c : suite) {
    ops::OpGraph g = ops::build_op(c.op, parse(c.params));
    std::vector<NDArray> in = codegen::random_inputs(g, 3);
    std::vector<NDArray> ref = default_outputs(c, g, in);
    for (const sched::Sketch& s : sched::cpu_sketches(g, true, false, amx_here)) {
      const int n = s.rule == sched::SketchRule::CpuAmx ? 3 * c.per_sketch : c.per_sketch;
      for (int t = 0; t < n; ++t) {
        sched::Config cfg = t == 0 ? sched::default_config(s) : sched::random_config(s, rng);
        if (!sched::invalid_reason(s, cfg).empty()) continue;
        auto [f, oracle, got] = run_both(g, s, cfg, in);
        const std::string what = c.params + " " + sched::config_to_json(s, cfg);
        EXPECT_LE(compare_arrays(got[0], oracle[0]).max_rel,
                  sched::storage_tolerance(g, sched::oracle_tolerance(s, 1e-5)))
            << what << "\n"
            << to_string(f);
        EXPECT_LE(compare_arrays(oracle[0], ref[0]).max_rel,
                  sched::storage_tolerance(g, sched::result_tolerance(s, 1e-4)))
            << what;
        ++total;
        amx += s.rule == sched::SketchRule::CpuAmx;
        const std::string text = to_string(f);
        in_place += s.rule == sched::SketchRule::CpuAmx && !s.amx_attention &&
                    text.find("_amx_a") == std::string::npos && text.find("_amx_p") == std::string::npos;
        if (HasFailure()) return;
      }
    }
  }
  EXPECT_GE(total, 50);
  if (amx_here) {
    EXPECT_GE(amx, 20);
    EXPECT_GE(in_place, 8);  // A tiles read from the stored activation itself
  }
  std::cout << "[ property ] " << total << " random configurations of stored bfloat16 tasks compiled by LLVM (" << amx
            << " on AMX tiles, " << in_place << " of them reading A in place), no mismatch\n";
}

// A value stored with its zero border (graph::plan_layouts on AMX hosts): the flat-row
// sketch of a 3x3 convolution with no padding reads its A tiles from the bfloat16 plane
// itself (no copy), and on a plane whose border is zero its output is the padded
// convolution of the plane's interior, on every random configuration (interpreted, and
// compiled by LLVM on tiles where the CPU has them, else as written).
TEST(SketchProperty, AmxFlatRowsReadABorderedPlaneInPlace) {
  const int64_t n = 2, cb = 2, h = 6, w = 17;  // the last tile of a plane clamped (6 x 19 - 2 positions)
  const std::string tail = "x1:float32[2,2,3,3,32,16]@-1:1;x2:float32[1,2,1,1,16]@-1:1;";
  const std::string ops = "t1=add(t0,x2){};t2=relu(t1){};t3=cast(t2){to=bfloat16}";
  auto shape = [](int64_t a, int64_t b, int64_t c, int64_t d) {
    return "[" + std::to_string(a) + "," + std::to_string(b) + "," + std::to_string(c) + "," + std::to_string(d) +
           ",32]";
  };
  ops::OpGraph bordered =
      ops::build_op("subgraph", parse("graph=x0:bfloat16" + shape(n, cb, h + 2, w + 2) + "@-1:1;" + tail +
                                      "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|padding=0,0|stride=1,1};" + ops));
  ops::OpGraph padded =
      ops::build_op("subgraph", parse("graph=x0:bfloat16" + shape(n, cb, h, w) + "@-1:1;" + tail +
                                      "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|padding=1,1|stride=1,1};" + ops));
  std::vector<NDArray> in = codegen::random_inputs(padded, 5);
  // The bordered input: the interior at (1, 1), zeros around it.
  std::vector<NDArray> bin = {NDArray(DType::bf16(), {n, cb, h + 2, w + 2, 32}), in[1], in[2]};
  for (int64_t i = 0; i < bin[0].numel(); ++i) bin[0].set(i, 0.0);
  for (int64_t b = 0; b < n * cb; ++b)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t c = 0; c < 32; ++c)
          bin[0].set(((b * (h + 2) + y + 1) * (w + 2) + x + 1) * 32 + c, in[0].get(((b * h + y) * w + x) * 32 + c));
  const std::vector<NDArray> ref = run(padded, in, [&](std::vector<NDArray*>& a) {
    interpret(lower_default("subgraph", padded.inputs, padded.outputs), a);
  });
  const bool amx_here = this_host().amx_bf16;
  std::mt19937_64 rng(2042);
  int flat = 0;
  for (const sched::Sketch& s : sched::cpu_sketches(bordered, true, false, true)) {
    if (!s.amx_flat_rows) continue;
    for (int t = 0; t < 8; ++t) {
      sched::Config cfg = t == 0 ? sched::default_config(s) : sched::random_config(s, rng);
      if (!sched::invalid_reason(s, cfg).empty()) continue;
      const LoweredFunc f = sched::lower_config(bordered, s, cfg);
      EXPECT_EQ(to_string(f).find("_amx_p"), std::string::npos) << "the plane was copied:\n" << to_string(f);
      std::vector<NDArray> oracle = run(bordered, bin, [&](std::vector<NDArray*>& a) { interpret(f, a); });
      codegen::LlvmOptions o;
      o.amx_tiles = amx_here;
      std::vector<NDArray> got =
          run(bordered, bin, [&](std::vector<NDArray*>& a) { codegen::compile_llvm(f, o)->run(a); });
      const std::string what = sched::config_to_json(s, cfg);
      EXPECT_LE(compare_arrays(got[0], oracle[0]).max_rel, sched::storage_tolerance(bordered, 1e-5)) << what;
      EXPECT_LE(compare_arrays(oracle[0], ref[0]).max_rel, sched::storage_tolerance(bordered, sched::result_tolerance(s, 1e-4))) << what;
      ++flat;
      if (HasFailure()) return;
    }
  }
  EXPECT_GE(flat, 4);
}

// A task whose output carries a zero border (sched::output_border: the value its 3x3
// reader reads in place, graph::store_borders): every sketch of the task without the
// border, on random configurations, its stores moved into the bordered output and the
// border zeroed (the outputs start as 7s), against the interpreter and the default
// schedule of the bordered task.
TEST(SketchProperty, BorderedOutputsMatchTheInterpreterOnRandomConfigurations) {
  if (!codegen::llvm_enabled()) GTEST_SKIP() << "built without LLVM";
  const std::string graph =
      "graph=x0:bfloat16[1,2,7,9,32]@-1:1;x1:float32[2,2,3,3,32,32]@-1:1;x2:float32[1,2,1,1,32]@-1:1;"
      "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|padding=1,1|stride=1,1};t1=add(t0,x2){};t2=relu(t1){};"
      "t3=pad(t2){mode=constant|pads=0,0,1,1,0,0,0,1,1,0|value=0};t4=cast(t3){to=bfloat16}";
  ops::OpGraph g = ops::build_op("subgraph", parse(graph));
  std::optional<sched::OutputBorder> b = sched::output_border(g);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->before, (std::vector<int64_t>{0, 0, 1, 1, 0}));
  EXPECT_EQ(g.outputs[0].shape(), (std::vector<int64_t>{1, 2, 9, 11, 32}));
  std::vector<NDArray> in = codegen::random_inputs(g, 6);
  auto sevens = [&](const std::function<void(std::vector<NDArray*>&)>& f) {
    NDArray out(g.outputs[0].dtype(), g.outputs[0].shape());
    for (int64_t i = 0; i < out.numel(); ++i) out.set(i, 7.0);
    std::vector<NDArray*> args;
    for (NDArray& a : in) args.push_back(&a);
    args.push_back(&out);
    f(args);
    return out;
  };
  const NDArray ref =
      sevens([&](std::vector<NDArray*>& a) { interpret(lower_default("subgraph", g.inputs, g.outputs), a); });
  const bool amx_here = this_host().amx_bf16;
  std::mt19937_64 rng(2043);
  int total = 0, amx = 0;
  for (const sched::Sketch& s : sched::cpu_sketches(g, true, false, amx_here)) {
    for (int t = 0; t < 3; ++t) {
      sched::Config cfg = t == 0 ? sched::default_config(s) : sched::random_config(s, rng);
      if (!sched::invalid_reason(s, cfg).empty()) continue;
      const LoweredFunc f = sched::lower_config(g, s, cfg);
      const NDArray oracle = sevens([&](std::vector<NDArray*>& a) { interpret(f, a); });
      const NDArray got = sevens([&](std::vector<NDArray*>& a) { codegen::compile_llvm(f)->run(a); });
      const std::string what = sched::config_to_json(s, cfg);
      EXPECT_LE(compare_arrays(got, oracle).max_rel, sched::storage_tolerance(g, 1e-5)) << what;
      EXPECT_LE(compare_arrays(oracle, ref).max_rel, sched::storage_tolerance(g, sched::result_tolerance(s, 1e-4)))
          << what;
      ++total;
      amx += s.rule == sched::SketchRule::CpuAmx;
      if (HasFailure()) return;
    }
  }
  EXPECT_GE(total, 10);
  if (amx_here) EXPECT_GE(amx, 3);
}

// Which anchors have an AMX sketch, and the tile registers that bound its knobs.
TEST(SketchProperty, AmxSketchesCoverAWeightTimesAnActivationAndFitEightTiles) {
  ops::OpGraph dense = ops::build_op("dense", parse("M=32 K=64 N=48"));
  auto amx_count = [](const ops::OpGraph& g, bool bf16, bool amx) {
    int n = 0;
    for (const sched::Sketch& s : sched::cpu_sketches(g, bf16, false, amx)) n += s.rule == sched::SketchRule::CpuAmx;
    return n;
  };
  // Either operand's rows may be A's (the other packed as B).
  EXPECT_EQ(amx_count(dense, true, true), 2);
  EXPECT_EQ(amx_count(dense, true, false), 0);
  EXPECT_EQ(amx_count(dense, false, true), 0);  // bf16 products only
  ops::OpGraph conv = ops::build_op(
      "conv2d_nchwc", parse("in_channels=16 out_channels=16 block=8 height=9 width=7 kernel=3 padding=1"));
  // Blocks of 8: a tile's 16 columns are two runs of the block (AmxForm::vec_runs).
  EXPECT_EQ(amx_count(conv, true, true), 2);
  ops::OpGraph conv12 = ops::build_op(
      "conv2d_nchwc", parse("in_channels=12 out_channels=24 block=12 height=9 width=7 kernel=3 padding=1"));
  EXPECT_EQ(amx_count(conv12, true, true), 0);  // blocks of 12: a tile's columns would straddle two unevenly
  ops::OpGraph conv16 = ops::build_op(
      "conv2d_nchwc", parse("in_channels=16 out_channels=32 block=16 height=9 width=7 kernel=3 padding=1"));
  // Its windows read in place (16 channels: the window's columns fold into the steps),
  // and the flattened GEMM of the copied windows.
  auto amx_names = [](const ops::OpGraph& g) {
    std::vector<std::string> names;
    for (const sched::Sketch& s : sched::cpu_sketches(g, true, false, true))
      if (s.rule == sched::SketchRule::CpuAmx) names.push_back(s.name);
    return names;
  };
  EXPECT_EQ(amx_names(conv16), (std::vector<std::string>{"amx.bf16.direct.m=n,h,w.n=c,cb", "amx.bf16.m=n,h,w.n=c,cb"}));
  // With 32 channels, also (first, the default) rows across output rows.
  ops::OpGraph conv32 = ops::build_op(
      "conv2d_nchwc", parse("in_channels=32 out_channels=32 block=16 height=7 width=7 kernel=3 padding=1"));
  EXPECT_EQ(amx_names(conv32), (std::vector<std::string>{"amx.bf16.flat.m=n,h,w.n=c,cb",
                                                         "amx.bf16.direct.m=n,h,w.n=c,cb", "amx.bf16.m=n,h,w.n=c,cb"}));
  // Not with a stride of 2 (the plane's positions would skip columns).
  ops::OpGraph strided = ops::build_op(
      "conv2d_nchwc", parse("in_channels=32 out_channels=32 block=16 height=9 width=7 kernel=3 padding=1 stride=2"));
  for (const sched::Sketch& s : sched::cpu_sketches(strided, true, false, true)) EXPECT_FALSE(s.amx_flat_rows);
  // A depthwise convolution's weight and input share the channels: no columns of its own.
  ops::OpGraph dw = ops::build_op(
      "conv2d_nchwc", parse("in_channels=32 out_channels=32 block=16 groups=32 kernel=3 padding=1 height=9 width=7"));
  EXPECT_EQ(amx_count(dw, true, true), 0);
  // An NCHW 1x1 convolution also runs with the weight's rows as A and the input's (h, w)
  // as columns (the anchor's last axes: contiguous in the output); not a 3x3 one (no
  // column axis alone), whose only AMX form copies its windows as rows.
  auto has = [](const std::vector<std::string>& names, const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  const std::vector<std::string> one =
      amx_names(ops::build_op("conv2d", parse("in_channels=24 out_channels=20 height=7 width=9 kernel=1 padding=0")));
  EXPECT_TRUE(has(one, "amx.bf16.m=c.n=n,h,w")) << one.size();
  const std::vector<std::string> three =
      amx_names(ops::build_op("conv2d", parse("in_channels=24 out_channels=20 height=7 width=9 kernel=3")));
  EXPECT_FALSE(has(three, "amx.bf16.m=c.n=n,h,w"));
  for (const sched::Sketch& s : sched::cpu_sketches(dense, true, false, true)) {
    if (s.name != "amx.bf16.m=i.n=j") continue;
    sched::Config c = sched::default_config(s);
    EXPECT_EQ(sched::invalid_reason(s, c), "");
    c.factors = {{2}, {3}};  // 6 accumulators + 2 + 3 tiles
    EXPECT_NE(sched::invalid_reason(s, c).find("tile registers"), std::string::npos);
    c.factors = {{1}, {3}};
    EXPECT_EQ(sched::invalid_reason(s, c), "");
  }
}

// The 8-bit integer sketches (Sketch::int8_quad): random configurations compiled by LLVM
// (vpdpbusd where the CPU has it, else vpmaddwd) give exactly the
// interpreter's int32 sums, and exactly the default schedule's: dense layers (a padded
// last group, partial tiles, a requantizing epilogue), batched products, and blocked
// convolutions whose padding is the input's zero point (ResNet's first layer: 3 input
// channels in one block, padded to a group of 4).
TEST(SketchProperty, Int8SketchesMatchTheInterpreterExactly) {
  if (!codegen::llvm_enabled()) GTEST_SKIP() << "built without LLVM";
  const std::vector<Suite> suite = {
      {"subgraph", "graph=x0:uint8[12,40]@0:256;x1:int8[32,40]@-128:128;t0=dense(x0,x1){}", 6},
      {"subgraph", "graph=x0:uint8[9,7]@0:256;x1:int8[16,7]@-128:128;t0=dense(x0,x1){}", 5},
      {"subgraph", "graph=x0:uint8[37,10]@0:256;x1:int8[23,10]@-128:128;t0=dense(x0,x1){}", 5},
      {"subgraph",
       "graph=x0:uint8[12,40]@0:256;x1:int8[24,40]@-128:128;x2:float32[24]@0.001:0.002;x3:float32[]@0.05:0.06;"
       "x4:int32[]@0:10;t0=dense(x0,x1){};t1=cast(t0){to=float32};t2=mul(t1,x2){};"
       "t3=quantize_linear(t2,x3,x4){axis=1|qmax=127|qmin=-128}",
       4},
      {"subgraph", "graph=x0:uint8[3,8,12]@0:256;x1:int8[3,12,16]@-128:128;t0=batch_matmul(x0,x1){}", 5},
      {"subgraph",
       "graph=x0:uint8[1,2,9,9,8]@0:256;x1:int8[2,2,3,3,8,8]@-128:128;x2:int32[1,2,1,1,8]@-5000:5000;"
       "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|pad_value=131|padding=1,1|stride=1,1};t1=add(t0,x2){}",
       5},
      // A residual's dequantization computed in the epilogue (Fusion,
      // AResidualsDequantizationJoinsTheConvolutionThatAddsIt), before and after the anchor.
      {"subgraph",
       "graph=x0:uint8[1,2,9,9,8]@0:256;x1:int8[2,2,3,3,8,8]@-128:128;x2:uint8[1,2,9,9,8]@0:256;"
       "x3:float32[]@0.0001:0.0002;x4:float32[]@0.05:0.06;x5:int32[]@120:130;"
       "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|pad_value=131|padding=1,1|stride=1,1};"
       "t1=cast(t0){to=float32};t2=mul(t1,x3){};t3=dequantize_linear(x2,x4,x5){axis=1};t4=add(t2,t3){};"
       "t5=quantize_linear(t4,x4,x5){axis=1|qmax=255|qmin=0}",
       4},
      {"subgraph",
       "graph=x0:uint8[1,2,9,9,8]@0:256;x1:int8[2,2,3,3,8,8]@-128:128;x2:uint8[1,2,9,9,8]@0:256;"
       "x3:float32[]@0.0001:0.0002;x4:float32[]@0.05:0.06;x5:int32[]@120:130;"
       "t0=dequantize_linear(x2,x4,x5){axis=1};"
       "t1=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|pad_value=131|padding=1,1|stride=1,1};"
       "t2=cast(t1){to=float32};t3=mul(t2,x3){};t4=add(t0,t3){};"
       "t5=quantize_linear(t4,x4,x5){axis=1|qmax=255|qmin=0}",
       4},
      // The convolution's own quantization pair folded (Passes,
      // AQuantizationPairReadByArithmeticRoundsInFloat) before the residual add.
      {"subgraph",
       "graph=x0:uint8[1,2,9,9,8]@0:256;x1:int8[2,2,3,3,8,8]@-128:128;x2:uint8[1,2,9,9,8]@0:256;"
       "x3:float32[]@0.0001:0.0002;x4:float32[]@0.05:0.06;x5:int32[]@120:130;x6:float32[]@0.01:0.02;"
       "t0=dequantize_linear(x2,x4,x5){axis=1};"
       "t1=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|pad_value=131|padding=1,1|stride=1,1};"
       "t2=cast(t1){to=float32};t3=mul(t2,x3){};t4=fake_quantize(t3,x6,x5){axis=1|qmax=255|qmin=0};"
       "t5=add(t0,t4){};t6=quantize_linear(t5,x4,x5){axis=1|qmax=255|qmin=0}",
       4},
      {"subgraph",
       "graph=x0:uint8[1,1,12,12,3]@0:256;x1:int8[1,1,7,7,3,16]@-128:128;"
       "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|pad_value=128|padding=3,3|stride=2,2}",
       4},
      {"subgraph",
       "graph=x0:uint8[1,1,8,8,16]@0:256;x1:int8[2,1,1,1,16,16]@-128:128;"
       "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|pad_value=0|padding=0,0|stride=2,2}",
       4},
  };
  int total = 0, dot = 0;
  const std::string isa = this_host().vector_isa;
  const std::string instruction = this_host().int8_dot ? "vpdpbusd" : isa == "avx2" || isa == "avx512" ? "pmadd" : "";
  std::mt19937_64 rng(2028);
  for (const Suite& c : suite) {
    ops::OpGraph g = ops::build_op(c.op, parse(c.params));
    std::vector<NDArray> in = codegen::random_inputs(g, 3);
    std::vector<NDArray> ref = default_outputs(c, g, in);
    int sketches = 0;
    for (const sched::Sketch& s : sched::cpu_sketches(g, false, true)) {
      if (s.int8_quad < 0) continue;
      ++sketches;
      for (int t = 0; t < c.per_sketch; ++t) {
        sched::Config cfg = sched::random_config(s, rng);
        auto [f, oracle, got] = run_both(g, s, cfg, in);
        // Every vector tile of a multiple of 4 lanes uses vpdpbusd where the CPU has it,
        // else vpmaddwd.
        if (!instruction.empty() && cfg.factors[static_cast<size_t>(s.vec_axis)].back() % 4 == 0) {
          codegen::LlvmOptions keep;
          keep.keep_ir = true;
          ++dot;
          EXPECT_NE(codegen::compile_llvm(f, keep)->llvm_ir().find(instruction), std::string::npos)
              << c.params << " " << sched::config_to_json(s, cfg) << ": no " << instruction;
        }
        // As a CPU without VNNI runs it (vpmaddwd), the same sums.
        if (this_host().int8_dot) {
          codegen::LlvmOptions madd;
          madd.int8_without_vnni = true;
          std::vector<NDArray> without =
              run(g, in, [&](std::vector<NDArray*>& a) { codegen::compile_llvm(f, madd)->run(a); });
          for (size_t i = 0; i < got.size(); ++i)
            EXPECT_EQ(compare_arrays(without[i], oracle[i]).max_abs, 0.0)
                << "vpmaddwd: " << c.params << " " << sched::config_to_json(s, cfg);
        }
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_EQ(compare_arrays(got[i], oracle[i]).max_abs, 0.0)
              << c.params << " " << sched::config_to_json(s, cfg) << "\n"
              << to_string(f);
          EXPECT_EQ(compare_arrays(oracle[i], ref[i]).max_abs, 0.0) << c.params << " " << sched::config_to_json(s, cfg);
        }
        ++total;
        if (HasFailure()) return;
      }
    }
    EXPECT_GE(sketches, 2) << c.params << " has no 8-bit integer sketch";
  }
  if (!instruction.empty()) EXPECT_GE(dot, 15) << "too few vector tiles of 4, 8 or 16 lanes drawn";
  EXPECT_GE(total, 70);
  std::cout << "[ property ] " << total << " random 8-bit integer configurations compiled by LLVM ("
            << (instruction.empty() ? "products as written" : instruction) << "), no mismatch\n";
}

// The AMX-INT8 sketches (SketchRule::CpuAmx with Sketch::int8_quad): random
// configurations of their tiles compiled by LLVM (tdpbusd where the CPU has AMX-INT8,
// checked in the assembly; vpdpbusd or the products as written elsewhere, and always once
// more with LlvmOptions::amx_tiles off) give exactly the interpreter's int32 sums, and
// exactly the default schedule's. Partial tiles in every direction (rows, columns, k's
// steps of 64), a padded last group of 4, uint8 rows read in place (k a multiple of 64),
// batched products, requantizing epilogues, convolutions whose padding is the zero point
// read in place (row by row and across rows), strided, and a first convolution's 3
// channels folded with the window's columns.
TEST(SketchProperty, AmxInt8SketchesMatchTheInterpreterExactly) {
  if (!codegen::llvm_enabled()) GTEST_SKIP() << "built without LLVM";
  const std::vector<Suite> suite = {
      {"subgraph", "graph=x0:uint8[37,40]@0:256;x1:int8[23,40]@-128:128;t0=dense(x0,x1){}", 4},
      {"subgraph", "graph=x0:uint8[9,7]@0:256;x1:int8[16,7]@-128:128;t0=dense(x0,x1){}", 2},
      {"subgraph", "graph=x0:uint8[40,128]@0:256;x1:int8[48,128]@-128:128;t0=dense(x0,x1){}", 4},
      {"subgraph", "graph=x0:uint8[20,150]@0:256;x1:int8[33,150]@-128:128;t0=dense(x0,x1){}", 3},
      {"subgraph",
       "graph=x0:uint8[24,96]@0:256;x1:int8[40,96]@-128:128;x2:float32[40]@0.001:0.002;x3:float32[]@0.05:0.06;"
       "x4:int32[]@0:10;t0=dense(x0,x1){};t1=cast(t0){to=float32};t2=mul(t1,x2){};"
       "t3=quantize_linear(t2,x3,x4){axis=1|qmax=127|qmin=-128}",
       3},
      {"subgraph", "graph=x0:uint8[3,20,70]@0:256;x1:int8[3,70,33]@-128:128;t0=batch_matmul(x0,x1){}", 3},
      {"subgraph",
       "graph=x0:uint8[1,2,9,9,16]@0:256;x1:int8[2,2,3,3,16,16]@-128:128;x2:int32[1,2,1,1,16]@-5000:5000;"
       "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|pad_value=131|padding=1,1|stride=1,1};t1=add(t0,x2){}",
       3},
      {"subgraph",
       "graph=x0:uint8[1,4,7,7,16]@0:256;x1:int8[2,4,3,3,16,16]@-128:128;"
       "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|pad_value=7|padding=1,1|stride=1,1}",
       3},
      // 64 channels in rows across output rows, a plane row of 16 positions (width 14,
      // padded); with fewer the window's columns fold into the channels' steps instead.
      {"subgraph",
       "graph=x0:uint8[1,4,5,14,16]@0:256;x1:int8[1,4,3,3,16,16]@-128:128;"
       "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|pad_value=3|padding=1,1|stride=1,1}",
       2},
      {"subgraph",
       "graph=x0:uint8[1,3,9,20,16]@0:256;x1:int8[1,3,3,3,16,16]@-128:128;"
       "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|pad_value=128|padding=1,1|stride=2,2}",
       3},
      {"subgraph",
       "graph=x0:uint8[1,2,9,9,16]@0:256;x1:int8[2,2,3,3,16,16]@-128:128;x2:uint8[1,2,9,9,16]@0:256;"
       "x3:float32[]@0.0001:0.0002;x4:float32[]@0.05:0.06;x5:int32[]@120:130;"
       "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|pad_value=131|padding=1,1|stride=1,1};"
       "t1=cast(t0){to=float32};t2=mul(t1,x3){};t3=dequantize_linear(x2,x4,x5){axis=1};t4=add(t2,t3){};"
       "t5=quantize_linear(t4,x4,x5){axis=1|qmax=255|qmin=0}",
       3},
      {"subgraph",
       "graph=x0:uint8[1,1,12,12,3]@0:256;x1:int8[1,1,7,7,3,16]@-128:128;"
       "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|pad_value=128|padding=3,3|stride=2,2}",
       3},
      {"subgraph",
       "graph=x0:uint8[1,4,8,8,16]@0:256;x1:int8[2,4,1,1,16,16]@-128:128;"
       "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|pad_value=0|padding=0,0|stride=1,1}",
       3},
  };
  const bool amx_here = this_host().amx_int8;
  const AmxCounts n = for_each_amx_config(
      suite, true, 2030,
      [&](const Suite& c, const ops::OpGraph&, const sched::Sketch& s, const sched::Config& cfg, std::vector<NDArray>&,
          const std::vector<NDArray>& ref, const AmxEngines& r) {
        const auto& [f, oracle, got, got_plain, assembly] = r;
        EXPECT_GE(s.int8_quad, 0) << s.name;
        EXPECT_EQ(s.name.rfind("amx.int8.", 0), 0u) << s.name;
        if (amx_here) {
          EXPECT_NE(assembly.find("tdpbusd"), std::string::npos) << c.params;
          EXPECT_NE(assembly.find("tilezero"), std::string::npos) << c.params;
        }
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_EQ(compare_arrays(got[i], oracle[i]).max_abs, 0.0)
              << c.params << " " << s.name << " " << sched::config_to_json(s, cfg) << "\n"
              << to_string(f);
          EXPECT_EQ(compare_arrays(got_plain[i], oracle[i]).max_abs, 0.0)
              << c.params << " " << s.name << " " << sched::config_to_json(s, cfg);
          EXPECT_EQ(compare_arrays(oracle[i], ref[i]).max_abs, 0.0)
              << c.params << " " << s.name << " " << sched::config_to_json(s, cfg);
        }
      });
  EXPECT_GE(n.total, 40);
  EXPECT_GE(n.in_place, 10);
  EXPECT_GE(n.flat_rows, 4);
  std::cout << "[ property ] " << n.total << " random AMX-INT8 configurations compiled by LLVM"
            << (amx_here ? " (tdpbusd)" : " (no AMX-INT8 here: vpdpbusd or as written)") << ", no mismatch\n";
}

// Integer sketches only where the form exists: unsigned by signed bytes (not two signed
// operands, not float32), the reduction innermost in the activation (a blocked
// convolution's channel block, not an NCHW convolution's taps), and only when asked for.
TEST(SketchProperty, Int8SketchesOnlyWhereTheGroupsExist) {
  auto quads = [](const std::string& graph, bool int8_dot = true) {
    int n = 0;
    for (const sched::Sketch& s :
         sched::cpu_sketches(ops::build_op("subgraph", parse("graph=" + graph)), false, int8_dot))
      n += s.int8_quad >= 0;
    return n;
  };
  EXPECT_GE(quads("x0:uint8[4,8]@0:256;x1:int8[16,8]@-128:128;t0=dense(x0,x1){}"), 1);
  EXPECT_EQ(quads("x0:uint8[4,8]@0:256;x1:int8[16,8]@-128:128;t0=dense(x0,x1){}", false), 0);
  EXPECT_EQ(quads("x0:int8[4,8]@-128:128;x1:int8[16,8]@-128:128;t0=dense(x0,x1){}"), 0);
  EXPECT_EQ(quads("x0:uint8[4,8]@0:256;x1:uint8[16,8]@0:256;t0=dense(x0,x1){}"), 0);
  EXPECT_EQ(quads("x0:float32[4,8]@-1:1;x1:float32[16,8]@-1:1;t0=dense(x0,x1){}"), 0);
  EXPECT_EQ(quads("x0:uint8[1,8,10,10]@0:256;x1:int8[16,8,3,3]@-128:128;"
                  "t0=conv2d(x0,x1){dilation=1,1|groups=1|pad_value=0|padding=1,1|stride=1,1}"),
            0);
}

// A float32 sketch never offers bfloat16. An odd reduction pairs padded only where the
// activation's last index is that axis over its whole extent (a dense's K, a blocked
// convolution's channel block); a 3x3 convolution over 3 channels in NCHW, whose
// innermost index is the width plus a tap and whose channels cannot pair, has no
// bfloat16 pair sketch: it stays float32 (the AMX sketches, off here, are checked by
// AmxSketchesCoverAWeightTimesAnActivationAndFitEightTiles).
TEST(SketchProperty, Bf16SketchesOnlyWhereThePairsExist) {
  ops::OpGraph dense = ops::build_op("dense", parse("M=4 K=8 N=16"));
  for (const sched::Sketch& s : sched::cpu_sketches(dense)) EXPECT_LT(s.bf16_pair, 0) << s.name;
  ops::OpGraph odd = ops::build_op("dense", parse("M=4 K=7 N=16"));
  int paired = 0;
  for (const sched::Sketch& s : sched::cpu_sketches(odd, true, true, false)) paired += s.bf16_pair >= 0;
  EXPECT_GE(paired, 1);
  ops::OpGraph conv = ops::build_op("conv2d", parse("in_channels=3 out_channels=8 height=8 width=8 kernel=3"));
  for (const sched::Sketch& s : sched::cpu_sketches(conv, true, true, false)) EXPECT_LT(s.bf16_pair, 0) << s.name;
  // With an even channel count the NCHW convolution pairs its channels, the activation
  // the vector operand (its pairs interleaved along the width).
  int nchw = 0;
  for (const sched::Sketch& s : sched::cpu_sketches(
           ops::build_op("conv2d", parse("in_channels=4 out_channels=8 height=8 width=8 kernel=3")), true, true, false))
    nchw += s.bf16_pair >= 0 && s.name.find("vec=w") != std::string::npos;
  EXPECT_GE(nchw, 1);
  // Its vector tile takes whole vdpbf16ps registers: 16 or 32 lanes, 4 or 8, not 12 or 24.
  for (const sched::Sketch& s :
       sched::cpu_sketches(ops::build_op("conv2d", parse("in_channels=4 out_channels=8 height=4 width=28 kernel=1")),
                           true, true, false)) {
    if (s.bf16_pair < 0) continue;
    sched::Config c;
    for (const sched::SplitSpec& sp : s.splits)
      c.factors.push_back(std::vector<int64_t>(static_cast<size_t>(sp.parts), 1));
    c.unroll = s.unroll_menu[0];
    const size_t w = static_cast<size_t>(s.vec_axis);
    for (int64_t lanes : {4, 8, 16}) {
      c.factors[w].back() = lanes;
      EXPECT_EQ(sched::invalid_reason(s, c), "") << lanes;
    }
    for (int64_t lanes : {12, 24}) {
      c.factors[w].back() = lanes;
      EXPECT_NE(sched::invalid_reason(s, c).find("multiple of 16 lanes"), std::string::npos) << lanes;
    }
  }
  // Winograd's F(2x2) products pair; F(4x4)'s stay float32 (its transforms amplify the rounding).
  int f2 = 0;
  for (const sched::Sketch& s : sched::cpu_sketches(
           ops::build_op("winograd_gemm", parse("in_channels=16 block=8 out_channels=16 height=5 width=7")), true, true,
           false))
    f2 += s.bf16_pair >= 0;
  EXPECT_GE(f2, 1);
  for (const sched::Sketch& s : sched::cpu_sketches(
           ops::build_op("winograd_gemm",
                         parse("m=4 in_channels=8 block=8 out_channels=16 out_block=16 height=7 width=7")),
           true))
    EXPECT_LT(s.bf16_pair, 0) << s.name;
  ops::OpGraph soft = ops::build_op("softmax", parse("shape=4,16"));
  EXPECT_EQ(sched::cpu_sketches(soft, true, true, false).size(), sched::cpu_sketches(soft).size());
}


// Kernels over a run-time extent (core/ir/runtime_extent.h): for random configurations
// of the operators a shape range's buckets run along a padded axis (rows of a dense
// layer and of a batched product, of a softmax and a layer norm, an attention's
// queries), the kernel given its iterations at run time, for a call of n < E positions,
// computes the first n positions as the kernel computes them at the full extent, in
// the interpreter and compiled by LLVM, with NaN in every padded position of its
// inputs and its output before the call (skipped iterations leave padded positions
// alone; nothing it runs reads them into a real one). With every iteration it
// computes everything the kernel does.
TEST(SketchProperty, RuntimeExtentKernelsComputeTheRealPositionsOfACall) {
  if (!codegen::llvm_enabled()) GTEST_SKIP() << "built without LLVM";
  struct Ranged {
    Suite c;
    int axis;  // of the output (and of every input that carries it)
  };
  const std::vector<Ranged> suite = {
      {{"dense", "M=24 K=16 N=32", 12}, 0},
      {{"dense", "M=37 K=10 N=23", 8}, 0},
      {{"batch_matmul", "B=3 M=16 K=12 N=16", 10}, 1},
      {{"softmax", "shape=20,40", 10}, 0},
      {{"layer_norm", "shape=18,48", 10}, 0},
      {{"attention", "heads=2 queries=16 keys=16 head_dim=8 value_dim=8 mask=causal", 8}, 1},
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  int total = 0, listed = 0, skipped = 0;
  std::mt19937_64 rng(2027);
  for (const Ranged& r : suite) {
    ops::OpGraph g = ops::build_op(r.c.op, parse(r.c.params));
    const std::vector<int64_t>& oshape = g.outputs[0].shape();
    const int64_t extent = oshape[static_cast<size_t>(r.axis)];
    int64_t stride = 1;
    for (size_t a = static_cast<size_t>(r.axis) + 1; a < oshape.size(); ++a) stride *= oshape[a];
    std::vector<NDArray> in = codegen::random_inputs(g, 5);
    for (const sched::Sketch& s : sched::cpu_sketches(g)) {
      for (int t = 0; t < r.c.per_sketch; ++t) {
        sched::Config cfg = t == 0 ? sched::default_config(s) : sched::random_config(s, rng);
        if (!sched::invalid_reason(s, cfg).empty()) continue;
        ++total;
        const LoweredFunc f = sched::lower_config(g, s, cfg);
        std::optional<RuntimeExtentKernel> k = with_runtime_iterations(f, {extent});
        if (!k) continue;
        ++listed;
        const std::string what = r.c.op + " " + r.c.params + " " + sched::config_to_json(s, cfg);
        ASSERT_EQ(k->func.params.size(), f.params.size() + 1) << what;
        NDArray iters(DType::i32(), {iterations_size(k->nests)});
        auto call = [&](std::vector<NDArray>& inputs, NDArray& out, bool llvm) {
          std::vector<NDArray*> a;
          for (NDArray& x : inputs) a.push_back(&x);
          a.insert(a.begin() + k->param, &iters);
          a.push_back(&out);
          if (llvm) codegen::compile_llvm(k->func)->run(a);
          else interpret(k->func, a);
        };
        // Every iteration: what f computes.
        std::vector<NDArray> full = run(g, in, [&](std::vector<NDArray*>& a) { interpret(f, a); });
        runtime_iterations(k->nests, stride, extent, extent, static_cast<int32_t*>(iters.data()));
        NDArray all(full[0].dtype(), full[0].shape());
        call(in, all, false);
        EXPECT_LE(compare_arrays(all, full[0]).max_rel, 0.0) << what;
        // A call of n positions: the inputs' and the output's padded positions NaN.
        const int64_t n = std::uniform_int_distribution<int64_t>(1, extent - 1)(rng);
        auto poison = [&](NDArray& x, int axis) {
          const std::vector<int64_t>& sh = x.shape();
          int64_t inner = 1, outer = 1;
          for (size_t a = static_cast<size_t>(axis) + 1; a < sh.size(); ++a) inner *= sh[a];
          for (int a = 0; a < axis; ++a) outer *= sh[static_cast<size_t>(a)];
          auto* p = static_cast<float*>(x.data());
          for (int64_t o = 0; o < outer; ++o)
            for (int64_t i = n * inner; i < sh[static_cast<size_t>(axis)] * inner; ++i)
              p[o * sh[static_cast<size_t>(axis)] * inner + i] = nan;
        };
        std::vector<NDArray> padded;
        for (size_t i = 0; i < in.size(); ++i) {
          padded.push_back(in[i].clone());
          // The inputs that run along the ranged axis: those of the output's extent there
          // (an attention's keys and values too: its mask hides them, but NaN would not be
          // hidden, and the network's zero fill keeps them finite, so they stay as given).
          const std::vector<int64_t>& sh = padded.back().shape();
          const bool rows = padded.back().dtype() == DType::f32() && r.c.op != "attention" && sh.size() == oshape.size() &&
                            sh[static_cast<size_t>(r.axis)] == extent;
          if (rows || (r.c.op == "attention" && i == 0)) poison(padded.back(), r.axis);
        }
        runtime_iterations(k->nests, stride, extent, n, static_cast<int32_t*>(iters.data()));
        const auto* it = static_cast<const int32_t*>(iters.data());
        int64_t off = 0;
        for (const RuntimeNest& nest : k->nests) {
          for (int64_t p = 0; p < nest.extent; ++p) skipped += it[off + 1 + p] == 0;
          off += 1 + nest.extent;
        }
        for (bool llvm : {false, true}) {
          NDArray out(full[0].dtype(), full[0].shape());
          auto* o = static_cast<float*>(out.data());
          for (int64_t e = 0; e < out.numel(); ++e) o[e] = nan;
          call(padded, out, llvm);
          const auto* want = static_cast<const float*>(full[0].data());
          int64_t outer = out.numel() / (extent * stride), bad = 0;
          for (int64_t b = 0; b < outer; ++b)
            for (int64_t e = 0; e < n * stride; ++e) {
              const int64_t at = b * extent * stride + e;
              bad += !(std::abs(o[at] - want[at]) <= 1e-4f * (1.0f + std::abs(want[at])));
            }
          EXPECT_EQ(bad, 0) << (llvm ? "llvm " : "interpreter ") << what << " n=" << n << "\n" << to_string(k->func);
        }
        if (HasFailure()) return;
      }
    }
  }
  EXPECT_GE(listed, total / 2) << total << " configurations";
  EXPECT_GE(skipped, 100);
  std::cout << "[ property ] " << listed << " of " << total
            << " random configurations given their iterations at run time, " << skipped
            << " iterations skipped, no real position changed\n";
}

}  // namespace
}  // namespace basin
