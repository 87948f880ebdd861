// The CUDA target without a GPU: for every GPU sketch of the operator suite, 50 random
// valid configurations (12 of a pipelined tensor-core sketch) are printed as CUDA C and compiled by NVRTC to cubin for
// sm_80 and sm_90, the tensor-core sketches among them (all of a sketch's kernels in one translation unit, one NVRTC
// call per architecture); the printer's launch extents and its errors; and the target's availability said in one line
// where there is no driver. On a GPU (CudaOnGpu, each skipped where there is none): the correctness suite against the
// interpreter, the measurer, and `basin tune-op --target cuda`.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "codegen/c_printer.h"
#include "codegen/cpu_runtime.h"
#include "codegen/cuda.h"
#include "codegen/measure.h"
#include "codegen/op_check.h"
#include "core/ir/lower.h"
#include "core/ops/registry.h"
#include "core/schedule/lower_sketch.h"
#include "core/schedule/sketch.h"
#include "core/util/error.h"
#include "core/util/host.h"
#include "tests/codegen/fault_hooks.h"
#include "tests/ops/op_cases.h"
#include "tests/tools/run_basin.h"

namespace basin {
namespace {

// The default and n - 1 random configurations of s as one translation unit, compiled by
// NVRTC for sm_80 and sm_90; the unit.
std::string compile_configs(const ops::OpGraph& g, const sched::Sketch& s, int n, std::mt19937_64& rng,
                            const std::string& op) {
  std::vector<LoweredFunc> fs;
  std::set<std::string> distinct;
  for (int i = 0; i < n; ++i) {
    sched::Config c = i == 0 ? sched::default_config(s) : sched::random_config(s, rng);
    distinct.insert(sched::config_to_json(s, c));
    fs.push_back(sched::lower_config(g, s, c));
    fs.back().name = op + "_" + std::to_string(i);
  }
  const std::string unit = codegen::print_cuda_unit(fs);
  SCOPED_TRACE(op + " " + s.name + " (" + std::to_string(distinct.size()) + " distinct)");
  for (const char* arch : {"sm_80", "sm_90"})
    EXPECT_GT(codegen::compile_cuda(unit, op, arch).cubin.size(), 1000u) << arch;
  return unit;
}

TEST(Cuda, EveryGpuSketchOfTheSuiteCompilesWithNvrtcForSm80AndSm90) {
  if (!codegen::nvrtc_enabled()) GTEST_SKIP() << "built without the CUDA toolkit (NVRTC)";
  const std::vector<std::pair<std::string, std::string>> suite = {
      {"conv2d", "in_channels=8 out_channels=16 height=10 width=12 kernel=3 padding=1"},
      {"depthwise_conv2d", "channels=16 height=10 width=10"},
      {"dense", "M=12 K=40 N=32"},
      {"dense", "M=37 K=10 N=23"},
      {"batch_matmul", "B=3 M=8 K=12 N=16"},
      {"softmax", "shape=6,40"},
      {"layer_norm", "shape=4,48"},
      {"conv2d_bias_relu", "in_channels=8 out_channels=16 height=8 width=8 kernel=3 padding=1"},
      {"dense_bias_gelu", "M=5 K=7 N=3"},
      {"max_pool2d", "kernel=3 stride=2 padding=1 height=13 width=13"},
      {"embedding", "num_embeddings=50 dim=24 indices_shape=3,5"},
      {"add", ""},
      {"transpose", "shape=2,3,4,5 perm=3,1,0,2"},
      // Tensor cores (gpu.mma.tf32, and with cp.async: .async2, .async3) as well; vector
      // fills (dense, batch_matmul), scalar ones with padding computed (conv2d).
      {"dense", "M=64 K=64 N=48"},
      {"batch_matmul", "B=2 M=32 K=16 N=16"},
      {"conv2d", "in_channels=16 out_channels=32 height=8 width=8 kernel=3 padding=1"},
  };
  std::mt19937_64 rng(8);
  int sketches = 0, mma = 0, shuffles = 0;
  for (const auto& [op, params] : suite) {
    ops::OpGraph g = ops::build_op(op, parse(params));
    for (const sched::Sketch& s : sched::gpu_sketches(g)) {
      ++sketches;
      mma += s.rule == sched::SketchRule::GpuMma;
      shuffles += s.warp_shuffle;
      // The pipelined tensor-core sketches share the fill and the fragments with the
      // synchronous one: fewer configurations for them.
      SCOPED_TRACE(params);
      compile_configs(g, s, s.mma_stages > 1 ? 12 : 50, rng, op);
    }
  }
  // FP16 and BF16 fragments (m16n8k16): every tensor-core sketch of a dense and a
  // convolution, 12 configurations each.
  int half = 0;
  for (const char* precision : {"fp16", "bf16"})
    for (const auto& [op, params] : std::vector<std::pair<std::string, std::string>>{
             {"dense", "M=64 K=64 N=48"},
             {"conv2d", "in_channels=16 out_channels=32 height=8 width=8 kernel=3 padding=1"}}) {
      ops::OpGraph g = ops::build_op(op, parse(params));
      for (const sched::Sketch& s : sched::gpu_sketches(g, precision)) {
        if (s.rule != sched::SketchRule::GpuMma) continue;
        ++half;
        SCOPED_TRACE(params);
        const std::string unit = compile_configs(g, s, 12, rng, op);
        EXPECT_NE(unit.find(std::string("basin_mma_m16n8k16_") + precision + "("), std::string::npos) << s.name;
      }
    }
  EXPECT_EQ(half, 12);  // 2 precisions x 2 tasks x 3 sketches
  EXPECT_GE(sketches, 12);
  EXPECT_GE(mma, 12);      // conv2d_bias_relu, dense, batch_matmul, conv2d, each synchronous and pipelined
  EXPECT_GE(shuffles, 2);  // softmax, layer_norm
}

// The warp-shuffle reduction rule prints each warp's fold as five __shfl_down_sync steps
// and a broadcast, twice per reduction (each warp's partials, then the warps' results);
// a warp reduction's nest of another form is refused.
TEST(Cuda, WarpReductionsPrintAsShuffles) {
  ops::OpGraph g = ops::build_op("softmax", parse("shape=6,200"));
  bool found = false;
  for (const sched::Sketch& s : sched::gpu_sketches(g)) {
    if (!s.warp_shuffle) continue;
    found = true;
    EXPECT_EQ(s.name, "gpu.reduce.shfl.prefix=1");
    sched::Config c = sched::default_config(s);
    std::string k = codegen::print_cuda(sched::lower_config(g, s, c));
    size_t downs = 0, broadcasts = 0;
    for (size_t at = k.find("__shfl_down_sync"); at != std::string::npos; at = k.find("__shfl_down_sync", at + 1))
      ++downs;
    for (size_t at = k.find("__shfl_sync"); at != std::string::npos; at = k.find("__shfl_sync", at + 1)) ++broadcasts;
    EXPECT_EQ(downs, 2u * 2u * 5u) << k;  // max and sum, two levels each
    EXPECT_EQ(broadcasts, 2u * 2u) << k;
    EXPECT_NE(k.find("fmaxf("), std::string::npos) << k;  // the max's combiner
  }
  EXPECT_TRUE(found);
  Var b("b"), t("t");
  Buffer out = make_buffer("out", DType::f32(), {Expr(64)});
  Buffer red = make_buffer("red", DType::f32(), {Expr(64)}, MemScope::Shared);
  // A product is no reduction the shuffles know; nor is a sum of values from two buffers.
  for (const Expr& v : {load(red, {Expr(t)}) * load(red, {Expr(t) + 1}), load(red, {Expr(t)}) + load(out, {Expr(t)})}) {
    Stmt body =
        make_for(t, 0, 64, ForKind::ThreadX, make_pragma(sched::kWarpReducePragma, Expr(32), make_store(out, {t}, v)));
    LoweredFunc f{"bad", {out}, {0}, make_for(b, 0, 1, ForKind::BlockX, make_allocate(red, body))};
    EXPECT_THROW(codegen::print_cuda(f), Error) << v;
  }
}

// The tensor-core sketches' memory path: a GEMM whose operands are contiguous along the
// tiles' inner axes fills them 4 floats at a time (basin_ld4/basin_st4, or 16-byte
// cp.async copies when pipelined), a convolution with its padding computed copies one
// float at a time with zeros where it reads nothing; a pipeline of S stages commits one
// group per step and waits until S - 1 are pending; each stage's tile is S times the
// synchronous sketch's shared memory. A cp.async group with a wait that is no constant
// is refused.
TEST(Cuda, TensorCoreTilesAreFilledByVectorAndAsynchronousCopies) {
  auto count = [](const std::string& k, const std::string& what) {  // in the kernel, past the helpers
    size_t n = 0;
    for (size_t at = k.find(what, k.find("extern \"C\"")); at != std::string::npos; at = k.find(what, at + 1)) ++n;
    return n;
  };
  struct Want {
    std::string op, params;
    bool vector_a, vector_b;
    int store_lanes;
  };
  for (const Want& w :
       {Want{"dense", "M=64 K=64 N=48", true, true, 4}, Want{"batch_matmul", "B=2 M=32 K=32 N=24", true, true, 4},
        Want{"conv2d", "in_channels=16 out_channels=32 height=8 width=8 kernel=3 padding=1", false, false, 4},
        // Columns even but not by 4: 64-bit stores; odd: one float at a time.
        Want{"dense", "M=32 K=32 N=30", true, true, 2},
        Want{"conv2d_bias_relu", "in_channels=16 out_channels=32 height=7 width=7 kernel=3 padding=1", false, false, 1},
        Want{"dense", "M=32 K=32 N=27", true, true, 1}}) {
    ops::OpGraph g = ops::build_op(w.op, parse(w.params));
    std::map<int, std::string> kernels;
    std::map<int, sched::Sketch> sketches;
    std::map<int, sched::Config> configs;
    for (const sched::Sketch& s : sched::gpu_sketches(g)) {
      if (s.rule != sched::SketchRule::GpuMma) continue;
      SCOPED_TRACE(w.op + " " + s.name);
      EXPECT_EQ(s.mma_vector[0], w.vector_a);
      EXPECT_EQ(s.mma_vector[1], w.vector_b);
      EXPECT_EQ(s.mma_store_lanes, w.store_lanes);
      sched::Config c = sched::default_config(s);
      ASSERT_EQ(sched::invalid_reason(s, c), "");
      LoweredFunc f = sched::lower_config(g, s, c);
      kernels[s.mma_stages] = codegen::print_cuda(f);
      sketches[s.mma_stages] = s;
      configs[s.mma_stages] = c;
      // The program's shared tiles are what the bounds count.
      int64_t bytes = 0;
      visit_stmt(f.body, [&](const Stmt& st) {
        if (st.kind() != StmtKind::Allocate || st->buffer->scope != MemScope::Shared) return;
        int64_t n = 4;
        for (const Expr& d : st->buffer->shape) n *= d->ival;
        bytes += n;
      });
      EXPECT_EQ(bytes, sched::gpu_tile_use(s, c).shared_bytes);
    }
    ASSERT_EQ(kernels.size(), 3u) << w.op;  // gpu.mma.tf32, .async2, .async3
    const std::string& sync = kernels[1];
    EXPECT_EQ(count(sync, "basin_cp_async"), 0u) << sync;
    const size_t st4 = w.store_lanes == 4 ? 1 : 0;  // the write-back's
    EXPECT_EQ(count(sync, "basin_st4("), (w.vector_a ? 1u : 0u) + (w.vector_b ? 1u : 0u) + st4) << sync;
    for (const auto& [stages, k] : kernels) {  // per fragment, one vector store and its shuffles
      EXPECT_EQ(count(k, "basin_st2("), w.store_lanes == 2 ? 1u : 0u) << k;
      EXPECT_EQ(count(k, "__shfl_xor_sync("), st4) << k;
    }
    for (int stages : {2, 3}) {
      const std::string& k = kernels[stages];
      SCOPED_TRACE(w.op + " stages " + std::to_string(stages));
      EXPECT_EQ(sched::gpu_tile_use(sketches[stages], configs[stages]).shared_bytes,
                stages * sched::gpu_tile_use(sketches[1], configs[stages]).shared_bytes);
      // The prologue's S - 1 groups and the loop's one.
      EXPECT_EQ(count(k, "basin_cp_async_commit();"), static_cast<size_t>(stages)) << k;
      EXPECT_EQ(count(k, "basin_cp_async_wait<" + std::to_string(stages - 1) + ">();"), static_cast<size_t>(stages));
      EXPECT_EQ(count(k, "basin_cp_async16("), static_cast<size_t>(stages) * (w.vector_a + w.vector_b)) << k;
      EXPECT_EQ(count(k, "basin_cp_async4("), static_cast<size_t>(stages) * (2 - w.vector_a - w.vector_b)) << k;
      EXPECT_EQ(count(k, "basin_st4("), st4) << k;
    }
  }
  // A group whose wait is not a constant.
  Var b("b"), t("t"), n("n");
  Buffer in = make_buffer("in", DType::f32(), {Expr(64)});
  Buffer out = make_buffer("out", DType::f32(), {Expr(64)});
  Buffer sh = make_buffer("sh", DType::f32(), {Expr(64)}, MemScope::Shared);
  Stmt body = make_for(t, 0, 64, ForKind::ThreadX,
                       make_pragma(sched::kAsyncCopyPragma, Expr(n), make_store(sh, {t}, load(in, {Expr(t)}))));
  LoweredFunc f{"bad", {in, out}, {0, 1}, make_for(b, 0, 1, ForKind::BlockX, make_allocate(sh, body))};
  EXPECT_THROW(codegen::print_cuda(f), Error);
}

// A vector loop of 2 or 4 lanes over a store of computed values to consecutive addresses
// is one 64- or 128-bit store of the lanes' values; a store whose addresses are not
// consecutive stays a loop of scalar stores.
TEST(Cuda, VectorLoopsOverComputedValuesAreOneStore) {
  Var b("b"), t("t"), l("l");
  Buffer in = make_buffer("in", DType::f32(), {Expr(256)});
  Buffer out = make_buffer("out", DType::f32(), {Expr(512)});
  auto kernel = [&](int64_t lanes, int64_t step) {
    Expr i = Expr(t) * Expr(lanes * step) + Expr(l) * Expr(step);
    Stmt st = make_store(out, {i}, max(mul(load(in, {Expr(t) + Expr(l)}), fconst(2)), fconst(0)));
    Stmt body = make_for(t, 0, 64, ForKind::ThreadX, make_for(l, 0, lanes, ForKind::Vectorized, st));
    return codegen::print_cuda(LoweredFunc{"v", {in, out}, {0, 1}, make_for(b, 0, 1, ForKind::BlockX, body)});
  };
  const std::string two = kernel(2, 1), four = kernel(4, 1), strided = kernel(2, 2);
  const size_t k2 = two.find("extern \"C\""), k4 = four.find("extern \"C\""), ks = strided.find("extern \"C\"");
  EXPECT_NE(two.find("basin_st2(", k2), std::string::npos) << two;
  EXPECT_NE(two.find("make_float2(", k2), std::string::npos) << two;
  EXPECT_NE(four.find("basin_st4(", k4), std::string::npos) << four;
  EXPECT_NE(four.find("make_float4(", k4), std::string::npos) << four;
  EXPECT_EQ(strided.find("basin_st2(", ks), std::string::npos) << strided;
  EXPECT_NE(strided.find("#pragma unroll", ks), std::string::npos) << strided;
  for (const std::string& k : {two, four, strided}) EXPECT_NO_THROW(codegen::compile_cuda(k, "v", "sm_80")) << k;
}

// A value from the lane's pair (sched::kLaneExchangePragma): one __shfl_xor_sync of
// what each lane's pair reads from it. A per-thread buffer read at another thread's
// slice without one, or an exchange of another form, is refused.
TEST(Cuda, LaneExchangesPrintAsOneShuffle) {
  Var b("b"), t("t"), u("u");
  Buffer out = make_buffer("out", DType::f32(), {Expr(64)});
  Buffer acc = make_buffer("acc", DType::f32(), {Expr(128)}, MemScope::Local);   // [32 threads, 4]
  Buffer pair = make_buffer("pair", DType::f32(), {Expr(32)}, MemScope::Local);  // [32 threads, 1]
  auto kernel = [&](const Expr& value, bool pragma) {
    Stmt fill = make_for(t, 0, 32, ForKind::ThreadX, make_store(acc, {Expr(t) * 4 + 1}, fconst(3)));
    Stmt take = make_store(pair, {Expr(u)}, value);
    if (pragma) take = make_pragma(sched::kLaneExchangePragma, Expr(1), take);
    Stmt use = make_for(u, 0, 32, ForKind::ThreadX,
                        make_seq({take, make_store(out, {Expr(b) * 32 + u}, load(pair, {Expr(u)}))}));
    Stmt body = make_allocate(acc, make_allocate(pair, make_seq({fill, use})));
    return codegen::print_cuda(LoweredFunc{"x", {out}, {0}, make_for(b, 0, 2, ForKind::BlockX, body)});
  };
  const Expr even = eq(floormod(Expr(u), Expr(2)), Expr(0));
  const Expr good = select(even, load(acc, {(Expr(u) + 1) * 4 + 1}), load(acc, {(Expr(u) - 1) * 4 + 3}));
  const std::string k = kernel(good, true);
  // The odd pair's element 1 where this lane is even, the even pair's element 3 where odd.
  EXPECT_NE(k.find("__shfl_xor_sync(0xffffffffu, "), std::string::npos) << k;
  EXPECT_NE(k.find("acc_" + std::to_string(acc->id) + "[3LL] : acc_" + std::to_string(acc->id) + "[1LL], 1)"),
            std::string::npos)
      << k;
  EXPECT_NO_THROW(codegen::compile_cuda(k, "x", "sm_80")) << k;
  EXPECT_THROW(kernel(good, false), Error);  // another thread's registers, read directly
  const Expr odd = eq(floormod(Expr(u), Expr(2)), Expr(1));
  for (const Expr& bad :
       {select(odd, load(acc, {(Expr(u) + 1) * 4 + 1}), load(acc, {(Expr(u) - 1) * 4 + 3})),
        select(even, load(acc, {(Expr(u) + 1) * 4 + floormod(Expr(u), Expr(2))}), load(acc, {(Expr(u) - 1) * 4})),
        select(even, load(out, {Expr(u)}), load(out, {Expr(u)}))})
    EXPECT_THROW(kernel(bad, true), Error) << bad;
}

// `--precision fp16|bf16` on the command line: the kernel's fragments are m16n8k16, and
// a network compiles at those precisions.
TEST(Cuda, HalfPrecisionsPrintFragmentsOfKSixteen) {
  for (const std::string precision : {"fp16", "bf16"}) {
    auto r = testing::capture(testing::basin_path() +
                              " op dense --param M=64 --param K=64 --param N=64 --target cuda --arch sm_90 --emit cuda "
                              "--precision " +
                              precision + " 2>/dev/null");
    const size_t kernel = r.out.find("extern \"C\"");  // past the helpers
    ASSERT_NE(kernel, std::string::npos) << r.out;
    EXPECT_NE(r.out.find("basin_mma_m16n8k16_" + precision + "(", kernel), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("basin_mma_m16n8k8_tf32(", kernel), std::string::npos);
    // A network at that precision compiles for the GPU (its tasks' programs looked up
    // among every precision's sketches).
    const std::string out = "/tmp/basin_cuda_half_" + std::to_string(::getpid()) + ".basin";
    auto c = testing::capture(testing::basin_path() + " compile zoo:transformer_layer --target cuda --arch sm_90 " +
                              "--precision " + precision + " -o " + out + " 2>&1");
    EXPECT_EQ(c.code, 0) << c.out;
    std::filesystem::remove(out);
  }
}

// A Local buffer allocated in the block, outside the thread loops, is per thread: the
// kernel declares one thread's slice and indexes it without the thread dimension.
TEST(Cuda, PerThreadBuffersAreEachThreadsSlice) {
  Var b("b"), t("t");
  Buffer out = make_buffer("out", DType::f32(), {Expr(8)});
  Buffer acc = make_buffer("acc", DType::f32(), {Expr(8)}, MemScope::Local);  // [4 threads, 2]
  Stmt body = make_for(t, 0, 4, ForKind::ThreadX,
                       make_seq({make_store(acc, {Expr(t) * 2 + 1}, fconst(3)),
                                 make_store(out, {Expr(b) * 4 + t}, load(acc, {Expr(t) * 2 + 1}))}));
  LoweredFunc f{"slice", {out}, {0}, make_for(b, 0, 2, ForKind::BlockX, make_allocate(acc, body))};
  std::string k = codegen::print_cuda(f);
  EXPECT_NE(k.find("float acc_" + std::to_string(acc->id) + "[2];"), std::string::npos) << k;
  EXPECT_NE(k.find("acc_" + std::to_string(acc->id) + "[1LL] = 3.0f"), std::string::npos) << k;
  // Outside a thread loop it has no slice to name.
  LoweredFunc g{
      "stray",
      {out},
      {0},
      make_for(b, 0, 2, ForKind::BlockX,
               make_allocate(acc, make_seq({make_store(acc, {Expr(0)}, fconst(1)),
                                            make_for(t, 0, 4, ForKind::ThreadX, make_store(out, {t}, fconst(0)))})))};
  EXPECT_THROW(codegen::print_cuda(g), Error);
  // The tiled rule's accumulator: its register tile per thread.
  ops::OpGraph d = ops::build_op("dense", parse("M=64 K=64 N=64"));
  const sched::Sketch s = sched::gpu_sketches(d).at(0);
  sched::Config c = sched::default_config(s);
  std::string dk = codegen::print_cuda(sched::lower_config(d, s, c));
  EXPECT_NE(dk.find("[" + std::to_string(sched::gpu_tile_use(s, c).registers) + "];  /* local */"), std::string::npos)
      << dk;
  EXPECT_NE(dk.find("__syncthreads();"), std::string::npos);
  // Its index arithmetic is on non-negative values: C's division, no floor helper.
  EXPECT_EQ(dk.find("basin_floordiv(", dk.find("extern \"C\"")), std::string::npos) << dk;
  EXPECT_EQ(dk.find("basin_floormod(", dk.find("extern \"C\"")), std::string::npos) << dk;
  // A possibly negative one keeps the floor semantics.
  Var i("i");
  Buffer o = make_buffer("o", DType::i64(), {Expr(8)});
  LoweredFunc neg{
      "neg", {o}, {0}, make_for(i, 0, 8, ForKind::Serial, make_store(o, {i}, floordiv(Expr(i) - 5, Expr(2))))};
  std::string nc = codegen::print_c(neg);
  EXPECT_NE(nc.find("basin_floordiv(", nc.find("void neg")), std::string::npos) << nc;
  LoweredFunc pos{
      "pos", {o}, {0}, make_for(i, 0, 8, ForKind::Serial, make_store(o, {i}, floordiv(Expr(i) + 5, Expr(2))))};
  std::string pc = codegen::print_c(pos);
  EXPECT_EQ(pc.find("basin_floordiv(", pc.find("void pos")), std::string::npos) << pc;
}

TEST(Cuda, LaunchExtentsComeFromTheBoundLoops) {
  ops::OpGraph g = ops::build_op("relu", parse("shape=100,30"));
  const sched::Sketch s = sched::gpu_sketches(g).at(0);
  sched::Config c = sched::default_config(s);
  c.factors[0][0] = 128;
  codegen::GpuLaunch l = codegen::gpu_launch(sched::lower_config(g, s, c));
  EXPECT_EQ(l.block[0], 128);
  EXPECT_EQ(l.grid[0], (3000 + 127) / 128);
  EXPECT_EQ(l.grid[1] * l.grid[2] * l.block[1] * l.block[2], 1);
}

// Regression: an infinite constant (softmax's max starts at -inf) was printed as
// "-inff", which neither C nor CUDA knows.
TEST(Cuda, InfinityIsSpelledInBothDialects) {
  ops::OpGraph g = ops::build_op("softmax", parse("shape=6,40"));
  const sched::Sketch s = sched::gpu_sketches(g).at(0);
  LoweredFunc f = sched::lower_config(g, s, sched::default_config(s));
  std::string cu = codegen::print_cuda(f), c = codegen::print_c(lower_default("softmax", g.inputs, g.outputs));
  EXPECT_EQ(cu.find("inff"), std::string::npos);
  EXPECT_NE(cu.find("__int_as_float(0x7f800000)"), std::string::npos) << cu;
  EXPECT_NE(c.find("INFINITY"), std::string::npos) << c;
  auto r = testing::capture("printf '%s' '" + c + "' | cc -std=c11 -fsyntax-only -x c - 2>&1");
  EXPECT_EQ(r.code, 0) << r.out;
}

TEST(Cuda, CpuProgramsAreNotKernels) {
  ops::OpGraph g = ops::build_op("dense", parse("M=8 K=8 N=8"));
  const std::vector<sched::Sketch> cpu = sched::cpu_sketches(g);
  LoweredFunc f = sched::lower_config(g, cpu[0], sched::default_config(cpu[0]));
  EXPECT_THROW(codegen::print_cuda(f), Error);  // a parallel loop
}

TEST(Cuda, BadSourceAndArchitectureAreClearErrors) {
  if (!codegen::nvrtc_enabled()) GTEST_SKIP() << "built without the CUDA toolkit (NVRTC)";
  try {
    codegen::compile_cuda("extern \"C\" __global__ void k() { undefined_thing(); }", "broken", "sm_90");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("undefined_thing"), std::string::npos) << e.what();
  }
  EXPECT_THROW(codegen::compile_cuda("", "x", "compute_nope"), Error);
}

// ---- on a GPU (each test skips itself where there is none) ----

// The GPU correctness suite: every GPU sketch of every operator case (and the FP16 and
// BF16 tensor-core sketches), the default and 7 random configurations, run on the GPU and compared with the interpreter
// running the same program; zero mismatches. A sketch's kernels are one NVRTC translation unit; the units compile on
// every core at once (NVRTC is thread-safe), the kernels run in turn.
TEST(CudaOnGpu, RandomConfigurationsMatchTheInterpreter) {
  std::string why;
  if (!codegen::cuda_available(&why)) GTEST_SKIP() << "no GPU: " << why;
  const std::string arch = codegen::cuda_device_arch();
  struct Unit {
    const Case* c;
    std::shared_ptr<ops::OpGraph> g;
    std::vector<LoweredFunc> fs;
    std::vector<std::string> configs;
    codegen::CudaBinary bin;
    std::string error;
  };
  const std::vector<Case> cases = good_cases();
  std::vector<Unit> units;
  std::mt19937_64 rng(21);
  for (const Case& c : cases) {
    auto g = std::make_shared<ops::OpGraph>(ops::build_op(c.op, parse(c.params)));
    // Every sketch at TF32, and the FP16 and BF16 fragments' synchronous sketch.
    std::vector<sched::Sketch> sketches = sched::gpu_sketches(*g);
    for (const char* precision : {"fp16", "bf16"})
      for (const sched::Sketch& s : sched::gpu_sketches(*g, precision))
        if (s.rule == sched::SketchRule::GpuMma && s.mma_stages == 1) sketches.push_back(s);
    for (const sched::Sketch& s : sketches) {
      Unit u{&c, g, {}, {}, {}, {}};
      for (int i = 0; i < 8; ++i) {
        sched::Config cfg = i == 0 ? sched::default_config(s) : sched::random_config(s, rng);
        u.fs.push_back(sched::lower_config(*g, s, cfg));
        u.fs.back().name = "k" + std::to_string(i);
        u.configs.push_back(sched::config_to_json(s, cfg));
      }
      units.push_back(std::move(u));
    }
  }
  // On the runtime's thread pool (every core; a chunk of units per claim).
  auto compile = [&](int64_t i) {
    Unit& u = units[static_cast<size_t>(i)];
    try {
      u.bin = codegen::compile_cuda(codegen::print_cuda_unit(u.fs), u.c->op, arch);
    } catch (const std::exception& e) {
      u.error = e.what();
    }
  };
  basin_parallel_for(
      [](void* f, int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) (*static_cast<decltype(compile)*>(f))(i);
      },
      &compile, static_cast<int64_t>(units.size()));
  int programs = 0, mismatches = 0;
  for (const Unit& u : units) {
    const Case& c = *u.c;
    if (!u.error.empty()) {
      ADD_FAILURE() << c.op << " " << c.params << ": " << u.error;
      continue;
    }
    std::vector<NDArray> in = codegen::random_inputs(*u.g, 3);
    for (size_t i = 0; i < u.fs.size(); ++i) {
      std::vector<NDArray> want = codegen::interpret_outputs(u.fs[i], *u.g, in), got = codegen::fresh_outputs(*u.g);
      ++programs;
      try {
        codegen::CudaKernel k(u.bin, u.fs[i]);
        k.run(codegen::program_args(in, got));
      } catch (const std::exception& e) {
        ++mismatches;
        ADD_FAILURE() << c.op << " " << c.params << " " << u.configs[i] << ": " << e.what();
        continue;
      }
      for (size_t o = 0; o < want.size(); ++o) {
        double err = compare_arrays(got[o], want[o]).max_rel;
        if (!(err <= 1e-3)) {
          ++mismatches;
          ADD_FAILURE() << c.op << " " << c.params << " " << u.configs[i] << ": max relative error " << err;
        }
      }
    }
  }
  std::printf("GPU correctness: %d programs in %zu units on %s, %d mismatches\n", programs, units.size(),
              codegen::cuda_device_info().name.c_str(), mismatches);
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(programs, 500);
}

// The measurer on the GPU: programs are checked and timed; a kernel that writes far out
// of bounds poisons its worker's context, is an error, and the next worker measures on.
// The pool forks its workers, which must happen before this process initializes the
// driver; another test may have run kernels in this process, so the checks run in a
// fresh one (a death test in the threadsafe style re-executes the binary).
void measure_pool_checks() {
  ops::OpGraph g = ops::build_op("dense", parse("M=128 K=128 N=128"));
  std::vector<sched::Sketch> sk = sched::gpu_sketches(g);
  codegen::MeasureOptions opt;
  opt.target = "cuda";
  opt.program_hook = [](const LoweredFunc& f) {
    return testing::unroll_of(f) == 16 ? testing::with_store_far_out_of_bounds(f) : f;
  };
  codegen::MeasurePool pool(g, sk, opt);
  sched::Config a = sched::default_config(sk[0]), b = a;
  a.unroll = 64;
  b.unroll = 16;
  auto r = pool.measure({{&pool.sketches()[0], a}, {&pool.sketches()[0], b}, {&pool.sketches()[0], a}});
  ASSERT_TRUE(r[0].ok()) << r[0].error;
  EXPECT_GT(r[0].median_us, 0);
  EXPECT_FALSE(r[1].ok());
  EXPECT_NE(r[1].error.find("CUDA error"), std::string::npos) << r[1].error;
  EXPECT_TRUE(r[2].ok()) << r[2].error;
  EXPECT_EQ(pool.workers_started(), 2);
  EXPECT_FALSE(codegen::cuda_driver_initialized_here());
}

TEST(CudaOnGpu, MeasurePoolTimesKernelsAndReplacesAPoisonedWorker) {
  std::string why;
  if (!codegen::cuda_available(&why)) GTEST_SKIP() << "no GPU: " << why;
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        measure_pool_checks();
        std::exit(::testing::Test::HasFailure() ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "");
}

// Once this process has run a kernel, a forked worker cannot use the GPU (every
// measurement failed with "initialization error", found on an H200): the pool says so
// in one error instead.
TEST(CudaOnGpu, MeasurePoolRefusesToForkAfterTheDriverIsInitializedHere) {
  std::string why;
  if (!codegen::cuda_available(&why)) GTEST_SKIP() << "no GPU: " << why;
  ops::OpGraph g = ops::build_op("relu", parse(""));
  std::vector<sched::Sketch> sk = sched::gpu_sketches(g);
  LoweredFunc f = sched::lower_config(g, sk[0], sched::default_config(sk[0]));
  codegen::CudaKernel k(codegen::compile_cuda(codegen::print_cuda_unit({f}), "relu", codegen::cuda_device_arch()), f);
  EXPECT_TRUE(codegen::cuda_driver_initialized_here());
  codegen::MeasureOptions opt;
  opt.target = "cuda";
  try {
    codegen::MeasurePool pool(g, sk, opt);
    FAIL() << "the pool forked a worker after the driver was initialized here";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("initialized the CUDA driver"), std::string::npos) << e.what();
  }
}

// `basin tune-op --target cuda` as a user runs it, in a fresh process: every trial
// measured on the GPU. The MLP used to seed LibTorch with torch::manual_seed, which in a
// LibTorch built with CUDA initializes the driver; the tuner's forked worker then
// failed every measurement ("cuInit error 3", found on an H200).
TEST(CudaOnGpu, TuneOpMeasuresEveryTrialOnTheGpu) {
  std::string why;
  if (!codegen::cuda_available(&why)) GTEST_SKIP() << "no GPU: " << why;
  const std::string db = ::testing::TempDir() + "basin_cuda_tune_" + std::to_string(getpid()) + ".db";
  auto r = testing::capture(testing::basin_path() +
                            " tune-op dense --param M=64 --param K=64 --param N=64 --target cuda --strategy gradient"
                            " --estimator mlp --trials 16 --batch 8 --json --quiet --records " +
                            db + " 2>&1");
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db + suffix).c_str());
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(j["trials"], 16) << r.out;
  EXPECT_EQ(j["errors"], 0) << r.out;
  EXPECT_GT(j["best_latency_us"].get<double>(), 0) << r.out;
}

// The records of the cuda target name GPU 0, as this backend describes it to
// basin::machine_description; where there is no GPU, no machine.
TEST(Cuda, RecordsNameGpuZero) {
  std::string why;
  if (!codegen::cuda_available(&why)) {
    EXPECT_EQ(machine_description("cuda"), "") << why;
    return;
  }
  const codegen::CudaDeviceInfo gpu = codegen::cuda_device_info();
  EXPECT_EQ(machine_description("cuda"), gpu.name + " (" + gpu.arch + ")");
  EXPECT_NE(machine_description("cuda").find("sm_"), std::string::npos);
}

TEST(Cuda, TheTargetSaysWhenThereIsNoGpu) {
  std::string why;
  if (codegen::cuda_available(&why)) {
    // With a GPU: the command runs, checks and times the kernel.
    auto r = testing::capture(testing::basin_path() + " op dense --target cuda --json 2>&1");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("\"verified\": true"), std::string::npos) << r.out;
    GTEST_SKIP() << "a GPU is here: " << codegen::cuda_device_arch();
  }
  EXPECT_FALSE(why.empty());
  EXPECT_EQ(why.find('\n'), std::string::npos);
  EXPECT_THROW(codegen::cuda_device_arch(), Error);
  // The command line: one error line, non-zero, after compiling for the named arch.
  auto r = testing::capture(testing::basin_path() + " op relu --target cuda --arch sm_90 2>&1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("compiled for sm_90"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("basin: error: the cuda target is unavailable"), std::string::npos) << r.out;
  auto e = testing::capture(testing::basin_path() + " op relu --target cuda --emit cuda 2>/dev/null");
  EXPECT_EQ(e.code, 1);
  EXPECT_NE(e.out.find("__global__ void"), std::string::npos) << e.out;
}

}  // namespace
}  // namespace basin
