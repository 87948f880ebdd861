// The network runtime: a compiled network computes what the graph interpreter (the
// loop-IR oracle) and the LibTorch executor compute; its memory plan reuses buffers;
// it saves and loads without the compiler, bit for bit; corrupt files and bad inputs
// are clear errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>

#include "codegen/cuda.h"
#include "codegen/llvm_jit.h"
#include "codegen/network.h"
#include "codegen/ranged.h"
#include "core/graph/shape_range.h"
#include "codegen/torch_executor.h"
#include "core/graph/fusion.h"
#include "core/graph/layout.h"
#include "core/graph/passes.h"
#include "core/graph/zoo.h"
#include "core/schedule/sketch.h"
#include "core/util/host.h"
#include "core/util/sha256.h"
#include "tests/scoped_env.h"

namespace basin::codegen {
namespace {

namespace fs = std::filesystem;
using I = std::vector<int64_t>;

std::vector<ProgramChoice> defaults(const graph::Partition& p) {
  std::vector<ProgramChoice> c;
  for (const auto& t : p.tasks) {
    std::vector<sched::Sketch> s = sched::cpu_sketches(t.graph);
    c.push_back({s[0].name, sched::default_config(s[0]), false});
  }
  return c;
}

// Random valid programs: every task on a random sketch and configuration.
std::vector<ProgramChoice> random_programs(const graph::Partition& p, uint64_t seed,
                                           const std::string& target = "llvm") {
  std::mt19937_64 rng(seed);
  std::vector<ProgramChoice> c;
  for (const auto& t : p.tasks) {
    std::vector<sched::Sketch> s = sched::sketches_for(t.graph, target);
    const sched::Sketch& k = s[rng() % s.size()];
    c.push_back({k.name, sched::random_config(k, rng), true});
  }
  return c;
}

// A small CNN with a residual block, a view and a dense head.
graph::Graph cnn() {
  graph::Graph g;
  g.name = "cnn";
  graph::NetBuilder b(g, 5);
  int x = g.add_input("x", {1, 3, 16, 16});
  int c = b.op("relu", {b.batch_norm(b.conv(x, 16, {3}, {1, 1}, {1, 1}))});
  int r = b.op("relu", {b.batch_norm(b.conv(c, 16, {3}, {1, 1}, {1, 1}))});
  r = b.op("relu", {b.op("add", {b.batch_norm(b.conv(r, 16, {3}, {1, 1}, {1, 1})), c})});
  r = b.op("max_pool2d", {r}, {{"kernel", I{2, 2}}, {"stride", I{2, 2}}, {"padding", I{0, 0}}});
  int p = b.op("global_avg_pool2d", {r});
  int f = b.op("flatten", {p}, {{"start_dim", int64_t{1}}, {"end_dim", int64_t{-1}}});
  g.add_output(b.op("softmax", {b.dense(f, 10)}, {{"axis", int64_t{-1}}}));
  return g;
}

// A transformer-like block: embedding (indices read from memory), layer norm,
// attention-shaped batch matmuls, softmax, gelu; two outputs.
graph::Graph transformer() {
  graph::Graph g;
  g.name = "block";
  graph::NetBuilder b(g, 9);
  const int64_t s = 12, d = 32;
  int ids = g.add_input("ids", {1, s}, DType::i64());
  int x = b.op("reshape", {b.op("embedding", {b.weight("emb", {50, d}, 0.5), ids})}, {{"new_shape", I{s, d}}});
  x = b.layer_norm(x);
  int q = b.op("reshape", {b.dense(x, d)}, {{"new_shape", I{s, 4, 8}}});
  int k = b.op("reshape", {b.dense(x, d)}, {{"new_shape", I{s, 4, 8}}});
  q = b.op("transpose", {q}, {{"perm", I{1, 0, 2}}});
  k = b.op("transpose", {k}, {{"perm", I{1, 2, 0}}});
  int att = b.op("softmax", {b.op("batch_matmul", {q, k})}, {{"axis", int64_t{-1}}});
  int h = b.op("gelu", {b.dense(x, 64)});
  g.add_output(att);
  g.add_output(b.layer_norm(b.op("add", {b.dense(h, d), x})));
  return g;
}

// An EfficientNet block: SiLU activations (fan-outs that close again), a depthwise
// convolution, squeeze-and-excitation and a residual add.
graph::Graph mbconv() {
  graph::Graph g;
  g.name = "mbconv";
  graph::NetBuilder b(g, 7);
  auto silu = [&](int v) { return b.op("mul", {v, b.op("sigmoid", {v})}); };
  int x = g.add_input("x", {1, 8, 12, 12});
  int e = silu(b.batch_norm(b.conv(x, 24, {1}, {1, 1}, {0, 0})));
  int d = silu(b.batch_norm(b.conv(e, 24, {3}, {1, 1}, {1, 1}, 24)));
  int s = b.op("global_avg_pool2d", {d});
  s = b.op("sigmoid", {b.conv(silu(b.conv(s, 4, {1}, {1, 1}, {0, 0}, 1, true)), 24, {1}, {1, 1}, {0, 0}, 1, true)});
  int y = b.batch_norm(b.conv(b.op("mul", {d, s}), 8, {1}, {1, 1}, {0, 0}));
  g.add_output(b.op("add", {y, x}));
  return g;
}

// A ResNet basic block on a 28x28 map of 64 channels: on tiles (blocks of 32) its inner
// value, read by the second 3x3 convolution alone, is stored with its border
// (graph::store_borders).
graph::Graph resblock() {
  graph::Graph g;
  g.name = "resblock";
  graph::NetBuilder b(g, 11);
  const int x = g.add_input("x", {1, 64, 28, 28});
  const int h = b.op("relu", {b.conv(x, 64, {3}, {1, 1}, {1, 1}, 1, true)});
  g.add_output(b.op("relu", {b.op("add", {b.conv(h, 64, {3}, {1, 1}, {1, 1}, 1, true), x})}));
  return g;
}

// Two ShuffleNet v2 blocks of stride 1 on 24 channels: each splits its input's
// channels in halves (two slices), passes the first through, convolves the second
// (1x1, depthwise 3x3, 1x1) and shuffles the halves back together (concat, reshape,
// transpose, reshape). The second block reads the first one's shuffle.
graph::Graph shuffle_blocks() {
  graph::Graph g;
  g.name = "shuffle";
  graph::NetBuilder b(g, 5);
  const int64_t C = 24, H = 8;
  int x = g.add_input("x", {1, C, H, H});
  for (int k = 0; k < 2; ++k) {
    auto half = [&](int64_t from) {
      return b.op("slice", {x}, {{"starts", I{from}}, {"ends", I{from + C / 2}}, {"axes", I{1}}});
    };
    const int x1 = half(0), x2 = half(C / 2);
    int y = b.op("relu", {b.batch_norm(b.conv(x2, C / 2, {1}, {1, 1}, {0, 0}))});
    y = b.batch_norm(b.conv(y, C / 2, {3}, {1, 1}, {1, 1}, C / 2));
    y = b.op("relu", {b.batch_norm(b.conv(y, C / 2, {1}, {1, 1}, {0, 0}))});
    int c = b.op("concat", {x1, y}, {{"axis", int64_t{1}}});
    c = b.op("reshape", {c}, {{"new_shape", I{1, 2, C / 2, H, H}}});
    c = b.op("transpose", {c}, {{"perm", I{0, 2, 1, 3, 4}}});
    x = b.op("reshape", {c}, {{"new_shape", I{1, C, H, H}}});
  }
  g.add_output(x);
  return g;
}

class Network : public ::testing::Test {
 protected:
  // The CPU target's tests need LLVM; the cuda one does not (a GPU machine may build
  // basin without it).
  virtual bool needs_llvm() const { return true; }
  void SetUp() override {
    if (needs_llvm() && !llvm_enabled()) GTEST_SKIP() << "built without LLVM";
    dir = (fs::temp_directory_path() / ("basin_net_" + std::to_string(getpid()))).string();
    fs::create_directories(dir);
  }
  void TearDown() override {
    if (!dir.empty()) fs::remove_all(dir);
  }
  static std::vector<NDArray> inputs(const CompiledNetwork& n, uint64_t seed) {
    std::vector<NDArray> in;
    for (const auto& t : n.inputs())
      in.push_back(t.dtype == DType::i64() ? NDArray::random(t.dtype, t.shape, 0, 50, seed)
                                           : NDArray::random(t.dtype, t.shape, -1, 1, seed));
    return in;
  }
  static void expect_close(const std::vector<NDArray>& got, const std::vector<NDArray>& ref, double tol) {
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].shape(), ref[i].shape()) << "output " << i;
      ErrorStats e = compare_arrays(got[i], ref[i]);
      EXPECT_LE(e.max_rel, tol) << "output " << i << ", max abs error " << e.max_abs;
    }
  }
  std::string dir;
};

// Every value NCHW, and under the layout plan of 16-float vectors (blocked
// convolutions, epilogues, pooling and squeeze-excitation; blocks of 8 at 24 channels).
TEST_F(Network, MatchesTheInterpreterAndLibTorchOnRandomPrograms) {
  for (int64_t lanes : {0, 16})
    for (auto make : {cnn, transformer, mbconv}) {
      graph::Graph g = graph::optimize(make(), lanes);
      SCOPED_TRACE(g.name + ", lanes " + std::to_string(lanes));
      if (lanes > 0 && g.name != "block") EXPECT_GT(g.op_counts().count("conv2d_nchwc"), 0u);
      graph::Partition p = graph::partition(g);
      for (uint64_t seed = 0; seed < 4; ++seed) {
        CompiledNetwork n = CompiledNetwork::compile(g, p, seed == 0 ? defaults(p) : random_programs(p, seed));
        std::vector<NDArray> in = inputs(n, seed + 1);
        std::vector<NDArray> got = n.run(in);
        expect_close(got, graph::interpret_graph(g, in), 1e-4);
        expect_close(got, TorchExecutor(g).run(in), 1e-4);
        // A second run on the same network gives the same outputs (no stale arena state).
        std::vector<NDArray> again = n.run(in);
        for (size_t i = 0; i < got.size(); ++i)
          EXPECT_EQ(0, std::memcmp(got[i].data(), again[i].data(), got[i].nbytes()));
      }
    }
}

// A channel shuffle moves its data once: the concat, the views around the transpose
// and the transpose are one kernel. The halves a block splits its input into are one
// contiguous run each of a batch-1 value: views of the shuffle's storage, no kernel.
// Random programs on both layouts agree with the interpreter and LibTorch.
TEST_F(Network, AChannelShuffleMovesItsDataOnceAndItsHalvesAreViews) {
  for (int64_t lanes : {0, 16}) {
    graph::Graph g = graph::optimize(shuffle_blocks(), lanes);
    SCOPED_TRACE("lanes " + std::to_string(lanes));
    graph::Partition p = graph::partition(g);
    int shuffles = 0, slice_views = 0, slice_kernels = 0;
    for (const graph::FusedGroup& fg : p.groups) {
      std::set<std::string> ops;
      for (int n : fg.nodes) ops.insert(g.node(n).op);
      if (ops.count("transpose")) {
        ++shuffles;
        EXPECT_FALSE(fg.view);
        EXPECT_TRUE(ops.count("concat")) << p.tasks[fg.task].label;
      }
      if (ops == std::set<std::string>{"slice"}) {
        if (fg.view) {
          ++slice_views;
          EXPECT_EQ(fg.view_offset % 64, 0);
        } else {
          ++slice_kernels;
        }
      }
    }
    EXPECT_EQ(shuffles, 2);
    if (lanes == 0) {
      // The second halves of x and of the first shuffle: 12 channels of 8x8 floats in.
      EXPECT_EQ(slice_views, 2);
      EXPECT_EQ(slice_kernels, 0);
    }
    for (uint64_t seed = 0; seed < 4; ++seed) {
      CompiledNetwork n = CompiledNetwork::compile(g, p, seed == 0 ? defaults(p) : random_programs(p, seed));
      std::vector<NDArray> in = inputs(n, seed + 1);
      std::vector<NDArray> got = n.run(in);
      expect_close(got, graph::interpret_graph(g, in), 1e-5);
      expect_close(got, TorchExecutor(g).run(in), 1e-4);
    }
  }
}

// Only a slice of one contiguous run, at an offset of whole 64-byte lines, is a view;
// every other slice copies (its own kernel), and each computes the same values.
TEST_F(Network, OnlyContiguousAlignedSlicesAreViews) {
  struct Case {
    I shape, starts, ends, axes, steps;
    bool view;
  };
  const std::vector<Case> cases = {
      {{1, 8, 4, 4}, {4}, {8}, {1}, {}, true},             // channels 4..7: 256 bytes in
      {{1, 8, 4, 4}, {0}, {3}, {1}, {}, true},             // from the start
      {{8, 16}, {2, 0}, {3, 16}, {0, 1}, {}, true},         // one whole row
      {{1, 8, 4, 4}, {1}, {5}, {1}, {}, true},             // 64 bytes in
      {{1, 8, 4, 4}, {0}, {2}, {3}, {}, false},            // columns: not contiguous
      {{2, 8, 4, 4}, {4}, {8}, {1}, {}, false},            // a channel range of each of two images
      {{1, 8, 4, 4}, {0}, {8}, {1}, {2}, false},           // every other channel
      {{1, 8, 3, 3}, {1}, {4}, {1}, {}, false},            // 36 bytes in: not a whole line
  };
  for (const Case& c : cases) {
    // The slice read by a convolution or a dense layer, which takes no producer in.
    graph::Graph g;
    graph::NetBuilder b(g, 3);
    int x = g.add_input("x", c.shape);
    std::map<std::string, ops::AttrValue> a = {{"starts", c.starts}, {"ends", c.ends}, {"axes", c.axes}};
    if (!c.steps.empty()) a["steps"] = c.steps;
    int s = g.add_node("slice", {x}, a);
    g.add_output(c.shape.size() == 4 ? b.conv(s, 4, {1}, {1, 1}, {0, 0}) : b.dense(s, 4));
    graph::Partition p = graph::partition(g);
    bool view = false;
    for (const graph::FusedGroup& fg : p.groups)
      if (fg.nodes.size() == 1 && g.node(fg.nodes[0]).op == "slice") view = fg.view;
    SCOPED_TRACE(::testing::PrintToString(c.shape) + " starts " + ::testing::PrintToString(c.starts) + " axes " +
                 ::testing::PrintToString(c.axes));
    EXPECT_EQ(view, c.view);
    CompiledNetwork n = CompiledNetwork::compile(g, p, defaults(p));
    std::vector<NDArray> in = inputs(n, 3);
    expect_close(n.run(in), graph::interpret_graph(g, in), 1e-6);
  }
}

// At bf16, activations stored in bfloat16 between kernels (graph::store_activations_bf16):
// random programs of every precision (AMX where the CPU has it) agree with the stored
// graph interpreted and with LibTorch running it (which reads and rounds the stored
// values alike) within a rounding step, and with the float32 graph within bfloat16's
// error; the arena holds the stored values in half the bytes. The residual block is
// planned for tiles on every host, its inner value stored with its border
// (graph::store_borders: the producer's stores moved, the border zeroed, the reader's
// padding 0). The shuffle blocks' halves of a stored value are float32 slices of it:
// copies, not views of its bfloat16 bytes.
TEST_F(Network, ActivationsStoredInBfloat16MatchTheInterpreterAndLibTorch) {
  const bool amx = this_host().amx_bf16;
  for (auto make : {cnn, transformer, mbconv, resblock, shuffle_blocks}) {
    const bool block = make == resblock;
    const graph::Graph f = graph::optimize(make(), 16, amx || block);
    const graph::Graph g =
        block ? graph::store_borders(graph::store_activations_bf16(f)) : graph::store_activations_bf16(f);
    SCOPED_TRACE(g.name);
    if (block) EXPECT_EQ(g.op_counts()["pad"], 1);
    int stored = 0;
    for (const graph::Value& v : g.values()) stored += v.dtype.is_bf16();
    EXPECT_GT(stored, 0);
    graph::Partition p = graph::partition(g);
    for (uint64_t seed = 0; seed < 3; ++seed) {
      std::vector<ProgramChoice> programs;
      std::mt19937_64 rng(seed);
      for (const auto& t : p.tasks) {
        std::vector<sched::Sketch> s = sched::cpu_sketches(t.graph, true, false, amx);
        const sched::Sketch& k = seed == 0 ? s[0] : s[rng() % s.size()];
        programs.push_back({k.name, seed == 0 ? sched::default_config(k) : sched::random_config(k, rng), true});
      }
      CompiledNetwork n = CompiledNetwork::compile(g, p, programs);
      std::vector<NDArray> in = inputs(n, seed + 1);
      std::vector<NDArray> got = n.run(in);
      expect_close(got, graph::interpret_graph(g, in), 3e-2);
      expect_close(got, TorchExecutor(g).run(in), 3e-2);
      expect_close(got, TorchExecutor(f).run(in), 5e-2);
      if (seed == 0) {
        CompiledNetwork plain = CompiledNetwork::compile(f, graph::partition(f), defaults(graph::partition(f)));
        EXPECT_LT(n.arena_bytes(), plain.arena_bytes());
      }
    }
  }
}

// NaN propagates as in LibTorch (and ONNX Runtime) through every max and min: a ReLU,
// a clip, an elementwise maximum and minimum, a max reduction, a max pooling, a ReLU
// fused after a convolution, HardSwish, a softmax; and HardSwish of a huge x is x, as
// ONNX defines it (x * hardsigmoid(x)), not inf. The compiled network (default and random programs, NCHW and blocked
// layouts) and the interpreter agree with LibTorch on which outputs are NaN and on the rest.
TEST_F(Network, NanPropagatesAsInLibTorch) {
  graph::Graph base;
  base.name = "nan";
  {
    graph::Graph& g = base;
    graph::NetBuilder b(g, 7);
    int x = g.add_input("x", {1, 16, 6, 6});
    int y = g.add_input("y", {1, 16, 6, 6});
    g.add_output(b.op("relu", {x}));
    g.add_output(b.op("clip", {x}, {{"min", -0.5}, {"max", 0.5}}));
    g.add_output(b.op("maximum", {x, y}));
    g.add_output(b.op("minimum", {y, x}));
    g.add_output(b.op("max", {x}, {{"axes", I{2, 3}}, {"keepdims", int64_t{0}}}));
    g.add_output(b.op("max_pool2d", {x}, {{"kernel", I{2, 2}}, {"stride", I{2, 2}}, {"padding", I{0, 0}}}));
    g.add_output(b.op("relu", {b.conv(x, 16, {3}, {1, 1}, {1, 1})}));
    g.add_output(b.op("hardswish", {y}));
    g.add_output(b.op("softmax", {x}, {{"axis", int64_t{-1}}}));
  }
  NDArray x = NDArray::random(DType::f32(), {1, 16, 6, 6}, -1, 1, 3);
  NDArray y = NDArray::random(DType::f32(), {1, 16, 6, 6}, -1, 1, 4);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i : {0, 7, 40, 333, 575}) x.set(i, nan);  // corners, inside, last
  for (int64_t i : {1, 7, 100}) y.set(i, nan);
  y.set(200, 6e37);  // x * 6 would overflow
  const std::vector<NDArray> in = {x, y};
  const std::vector<NDArray> ref = TorchExecutor(base).run(in);
  auto same = [&](const std::vector<NDArray>& got, const std::string& who) {
    ASSERT_EQ(got.size(), ref.size());
    for (size_t o = 0; o < got.size(); ++o) {
      int nans = 0;
      for (int64_t i = 0; i < ref[o].numel(); ++i) {
        if (o == 7 && i == 200) {  // LibTorch's x * relu6(x + 3) / 6 overflows; ONNX's x * hardsigmoid(x) does not
          EXPECT_NEAR(got[o].get(i), 6e37, 6e31) << who;
          continue;
        }
        const double r = ref[o].get(i), v = got[o].get(i);
        nans += std::isnan(r);
        ASSERT_EQ(std::isnan(r), std::isnan(v))
            << who << ", output " << o << ", element " << i << ": " << v << " where LibTorch gives " << r;
        if (!std::isnan(r))
          ASSERT_NEAR(v, r, 1e-4 * std::max(1.0, std::abs(r))) << who << ", output " << o << ", " << i;
      }
      EXPECT_GT(nans, 0) << "output " << o << " has no NaN to check";
    }
  };
  for (int64_t lanes : {0, 16}) {
    graph::Graph g = graph::optimize(base, lanes);
    graph::Partition p = graph::partition(g);
    same(graph::interpret_graph(g, in), "interpreter, lanes " + std::to_string(lanes));
    for (uint64_t seed = 0; seed < 3; ++seed) {
      CompiledNetwork n = CompiledNetwork::compile(g, p, seed == 0 ? defaults(p) : random_programs(p, seed));
      same(n.run(in), "compiled, lanes " + std::to_string(lanes) + ", seed " + std::to_string(seed));
    }
  }
}

// A ResNet basic block of 64 channels on a 9x7 map (tiles past the edge), its 3x3
// convolutions computed by Winograd's F(2x2) and F(4x4): compiled with random programs,
// the outputs match LibTorch's direct convolutions of the graph before the plan.
TEST_F(Network, WinogradConvolutionsMatchLibTorchOnRandomPrograms) {
  graph::Graph g;
  g.name = "basic_block";
  graph::NetBuilder b(g, 11);
  int x = g.add_input("x", {1, 64, 9, 7});
  int r = b.op("relu", {b.batch_norm(b.conv(x, 64, {3}, {1, 1}, {1, 1}))});
  g.add_output(b.op("relu", {b.op("add", {b.batch_norm(b.conv(r, 64, {3}, {1, 1}, {1, 1})), x})}));
  for (const char* m : {"2", "4"}) {
    SCOPED_TRACE(std::string("m ") + m);
    basin::testing::ScopedEnv setting("BASIN_WINOGRAD", m);
    graph::Graph f = graph::optimize(g, 16);
    EXPECT_EQ(f.op_counts()["winograd_gemm"], 2);
    graph::Partition p = graph::partition(f);
    for (uint64_t seed = 0; seed < 3; ++seed) {
      CompiledNetwork n = CompiledNetwork::compile(f, p, seed == 0 ? defaults(p) : random_programs(p, seed));
      std::vector<NDArray> in = inputs(n, seed + 1);
      expect_close(n.run(in), TorchExecutor(g).run(in), 1e-4);
    }
  }
}

// A sketch's weight repacking runs once, when the network is compiled: every task
// whose program repacks a constant weight gets its packed copy as a weight of the
// network (one per group: the cnn's convolutions of one shape share a task but not
// their weights), and the outputs still match the interpreter and LibTorch, before
// and after a save and load.
TEST_F(Network, ConstantWeightsArePackedWhenCompiled) {
  graph::Graph g = graph::optimize(cnn());
  graph::Partition p = graph::partition(g);
  std::mt19937_64 rng(3);
  std::vector<ProgramChoice> c;
  int packing_groups = 0;
  for (size_t t = 0; t < p.tasks.size(); ++t) {
    std::vector<sched::Sketch> s = sched::cpu_sketches(p.tasks[t].graph);
    const sched::Sketch* pick = &s[0];
    for (const sched::Sketch& k : s)
      if (k.name.find(".pack") != std::string::npos) pick = &k;
    c.push_back({pick->name, sched::random_config(*pick, rng), true});
    if (pick->name.find(".pack") != std::string::npos)
      for (const graph::FusedGroup& fg : p.groups) packing_groups += fg.task == static_cast<int>(t);
  }
  ASSERT_GE(packing_groups, 2) << "the cnn has no task with a packing sketch";
  CompiledNetwork n = CompiledNetwork::compile(g, p, c);
  EXPECT_EQ(n.packed_weights(), packing_groups);
  std::vector<NDArray> in = inputs(n, 7);
  std::vector<NDArray> got = n.run(in);
  expect_close(got, graph::interpret_graph(g, in), 1e-4);
  expect_close(got, TorchExecutor(g).run(in), 1e-4);
  n.save(dir + "/packed.basin");
  CompiledNetwork back = CompiledNetwork::load(dir + "/packed.basin");
  EXPECT_EQ(back.packed_weights(), packing_groups);
  expect_close(back.run(in), got, 0);
  // The same programs without the weights constant (inputs of the graph): the kernels
  // keep their packing stage, and compute the same.
  graph::Graph h;
  h.name = "cnn_inputs";
  std::vector<NDArray> hin = in;
  std::map<int, int> map;
  for (int v : g.inputs()) map[v] = h.add_input(g.value(v).name, g.value(v).shape, g.value(v).dtype);
  for (size_t v = 0; v < g.values().size(); ++v)
    if (g.values()[v].constant && g.values()[v].shape.size() >= 2) {
      map[static_cast<int>(v)] = h.add_input(g.values()[v].name, g.values()[v].shape, g.values()[v].dtype);
      hin.push_back(g.values()[v].data);
    }
  for (int nd : g.topo_order()) {
    const graph::Node& node = g.node(nd);
    std::vector<int> ins;
    for (int v : node.inputs) {
      if (!map.count(v)) map[v] = h.add_constant(g.value(v).name, g.value(v).data);
      ins.push_back(map[v]);
    }
    map[node.output] = h.add_node(node.op, ins, node.attrs.values(), node.name);
  }
  for (int v : g.outputs()) h.add_output(map[v]);
  graph::Partition hp = graph::partition(h);
  ASSERT_EQ(hp.tasks.size(), p.tasks.size());
  std::vector<ProgramChoice> hc;
  for (const graph::NetworkTask& t : hp.tasks)
    for (size_t k = 0; k < p.tasks.size(); ++k)
      if (p.tasks[k].key == t.key) hc.push_back(c[k]);
  ASSERT_EQ(hc.size(), hp.tasks.size());
  CompiledNetwork hn = CompiledNetwork::compile(h, hp, hc);
  EXPECT_EQ(hn.packed_weights(), 0);
  expect_close(hn.run(hin), got, 1e-5);
}

TEST_F(Network, TheMemoryPlanReusesBuffers) {
  graph::Graph g;
  graph::NetBuilder b(g, 1);
  int x = g.add_input("x", {1, 8, 12, 12});
  for (int i = 0; i < 6; ++i) x = b.op("relu", {b.conv(x, 8, {3}, {1, 1}, {1, 1}, 1, true)});
  g.add_output(x);
  graph::Partition p = graph::partition(g);
  CompiledNetwork n = CompiledNetwork::compile(g, p, defaults(p));
  EXPECT_EQ(n.kernels(), 1);
  EXPECT_EQ(n.launches(), 6);
  // A chain needs its input, and two buffers in turn: 3 of the 7 tensors.
  const int64_t one = 8 * 12 * 12 * 4;
  EXPECT_EQ(n.tensor_bytes(), 7 * one);
  EXPECT_LE(n.arena_bytes(), 3 * one);
  std::vector<NDArray> in = inputs(n, 3);
  expect_close(n.run(in), graph::interpret_graph(g, in), 1e-4);
}

TEST_F(Network, SavesAndLoadsWithoutTheCompiler) {
  graph::Graph g = graph::optimize(transformer());
  graph::Partition p = graph::partition(g);
  CompiledNetwork n = CompiledNetwork::compile(g, p, random_programs(p, 7));
  std::string path = dir + "/block.basin";
  n.save(path);
  CompiledNetwork m = CompiledNetwork::load(path);
  EXPECT_EQ(m.name(), "block");
  EXPECT_EQ(m.kernels(), n.kernels());
  EXPECT_EQ(m.launches(), n.launches());
  EXPECT_EQ(m.arena_bytes(), n.arena_bytes());
  EXPECT_EQ(m.weight_bytes(), n.weight_bytes());
  ASSERT_EQ(m.inputs().size(), 1u);
  EXPECT_EQ(m.inputs()[0].dtype, DType::i64());
  // The ids index a 50-row embedding table: random default inputs stay below 50.
  EXPECT_EQ(n.inputs()[0].index_bound, 50);
  EXPECT_EQ(m.inputs()[0].index_bound, 50);
  EXPECT_EQ(m.outputs()[0].index_bound, 0);
  std::vector<NDArray> in = inputs(n, 4);
  std::vector<NDArray> a = n.run(in), b = m.run(in);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(0, std::memcmp(a[i].data(), b[i].data(), a[i].nbytes()));
  EXPECT_GT(m.time(in, TimingOptions::quick()).min_us, 0);
}

// The accuracy check against float32 (LibTorch on the graph): float32 programs agree to
// rounding; bf16 programs (every task on its first bf16 sketch where it has one) differ
// by bfloat16's rounding, not more, and the top-1 class of the classifier agrees; the
// figures travel with the saved network.
TEST_F(Network, AccuracyAgainstFloat32IsMeasuredAndSaved) {
  graph::Graph g = graph::optimize(cnn(), graph::layout_lanes("llvm"));
  graph::Partition p = graph::partition(g);
  CompiledNetwork f32 = CompiledNetwork::compile(g, p, defaults(p));
  const std::vector<NDArray> in = random_inputs(f32.inputs());
  Accuracy a = measure_accuracy(g, f32, in, "random inputs");
  ASSERT_TRUE(a.measured) << a.note;
  EXPECT_LT(a.max_rel, 1e-4);
  EXPECT_EQ(a.top1_rows, 1);
  EXPECT_EQ(a.top1_agree, 1);

  std::vector<ProgramChoice> bf16;
  int paired = 0;
  for (const auto& t : p.tasks) {
    std::vector<sched::Sketch> s = sched::cpu_sketches(t.graph, /*bf16=*/true);
    auto it = std::find_if(s.begin(), s.end(), [](const sched::Sketch& k) { return k.bf16_pair >= 0; });
    const sched::Sketch& k = it == s.end() ? s[0] : *it;
    paired += it != s.end();
    bf16.push_back({k.name, sched::default_config(k), true});
  }
  ASSERT_GT(paired, 0);
  CompiledNetwork low = CompiledNetwork::compile(g, p, bf16);
  EXPECT_EQ(low.kernels_of_precision("bf16"), paired);
  Accuracy b = measure_accuracy(g, low, in, "random inputs");
  ASSERT_TRUE(b.measured) << b.note;
  EXPECT_GT(b.max_rel, a.max_rel);  // bfloat16 rounding shows
  EXPECT_LT(b.max_rel, 3e-2);
  EXPECT_EQ(b.top1_agree, 1);
  low.set_accuracy(b);
  low.save(dir + "/low.basin");
  const Accuracy c = CompiledNetwork::load(dir + "/low.basin").accuracy();
  EXPECT_TRUE(c.measured);
  EXPECT_EQ(c.note, "random inputs");
  EXPECT_EQ(c.max_rel, b.max_rel);
  EXPECT_EQ(c.top1_rows, 1);
  // A network saved without the check says so.
  f32.save(dir + "/f32.basin");
  EXPECT_FALSE(CompiledNetwork::load(dir + "/f32.basin").accuracy().measured);
}

// The cuda target: every task's kernel in one cubin, saved and loaded; run on the GPU
// where there is one (against the graph interpreter), else a clear error.
class CudaNetwork : public Network {
 protected:
  bool needs_llvm() const override { return false; }
};

TEST_F(CudaNetwork, CompilesSavesLoadsAndRuns) {
  if (!nvrtc_enabled()) GTEST_SKIP() << "built without the CUDA toolkit (NVRTC)";
  std::string why;
  const bool gpu = cuda_available(&why);
  const std::string arch = gpu ? cuda_device_arch() : "sm_90";
  for (auto make : {cnn, transformer, mbconv}) {
    graph::Graph g = graph::optimize(make());
    SCOPED_TRACE(g.name);
    graph::Partition p = graph::partition(g);
    for (uint64_t seed = 0; seed < 3; ++seed) {
      std::vector<ProgramChoice> programs = random_programs(p, seed, "cuda");
      // TF32 programs (the tensor-core sketches) round their products' inputs.
      double tolerance = 1e-3;
      for (size_t t = 0; t < p.tasks.size(); ++t) {
        std::vector<sched::Sketch> sk = sched::sketches_for(p.tasks[t].graph, "cuda");
        tolerance = sched::result_tolerance(sched::find_sketch(sk, programs[t].sketch), tolerance);
      }
      CompiledNetwork n = CompiledNetwork::compile(g, p, programs, "cuda", arch);
      EXPECT_EQ(n.target(), "cuda");
      EXPECT_EQ(n.kernels(), static_cast<int>(p.tasks.size()));
      std::string path = dir + "/" + g.name + ".cuda.basin";
      n.save(path);
      CompiledNetwork m = CompiledNetwork::load(path);
      EXPECT_EQ(m.target(), "cuda");
      EXPECT_EQ(m.cuda_arch(), arch);
      EXPECT_EQ(m.kernels(), n.kernels());
      EXPECT_EQ(m.launches(), n.launches());
      EXPECT_EQ(m.arena_bytes(), n.arena_bytes());
      EXPECT_EQ(m.weight_bytes(), n.weight_bytes());
      std::vector<NDArray> in = inputs(m, seed + 1);
      if (!gpu) {
        try {
          m.run(in);
          ADD_FAILURE() << "ran without a GPU";
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("the cuda target is unavailable"), std::string::npos) << e.what();
        }
        continue;
      }
      expect_close(m.run(in), graph::interpret_graph(g, in), tolerance);
    }
  }
  // A CPU sketch name is not a GPU program.
  graph::Graph g = graph::optimize(cnn());
  graph::Partition p = graph::partition(g);
  EXPECT_THROW(CompiledNetwork::compile(g, p, defaults(p), "cuda", "sm_90"), Error);
  EXPECT_THROW(CompiledNetwork::compile(g, p, defaults(p), "opencl"), Error);
}

// The first feature an llvm_host_cpu() string lists as off after its first one ("" when
// none): one this CPU lacks.
std::string a_feature_lacking(const std::string& host_cpu) {
  const size_t at = host_cpu.find(",-");
  return at == std::string::npos ? "" : host_cpu.substr(at + 2, host_cpu.find(',', at + 2) - at - 2);
}

// A compiled network loads where this process's kernels may use every instruction-set
// feature its machine code may use (missing_cpu_features), whatever the CPU's name.
TEST(CpuFeatures, CodeForAnotherCpuRunsWhereEveryFeatureItUsesIsHere) {
  const std::string here = llvm_host_cpu();
  if (here == "none") GTEST_SKIP() << "built without LLVM";
  const std::string cpu = llvm_cpu_name(here), features = here.substr(cpu.size() + 1);
  EXPECT_TRUE(missing_cpu_features(here).empty());
  // Fewer features (SSE2 only, as LLVM resolves -avx): runs here.
  EXPECT_TRUE(missing_cpu_features(here + ",-avx").empty());
  // A feature this CPU lacks, turned on: missing, under its name.
  const std::string off = a_feature_lacking(here);
  ASSERT_FALSE(off.empty()) << here;
  const std::vector<std::string> missing = missing_cpu_features(here + ",+" + off);
  EXPECT_NE(std::find(missing.begin(), missing.end(), off), missing.end()) << off;
  // A feature or CPU this host does not name.
  const std::vector<std::string> unknown = missing_cpu_features(here + ",+no-such-feature");
  EXPECT_EQ(unknown, std::vector<std::string>{"no-such-feature"});
  EXPECT_EQ(missing_cpu_features("no-such-cpu " + features), std::vector<std::string>{"cpu:no-such-cpu"});
  // Another CPU's name with the same features: runs here.
  const std::string other = cpu == "x86-64" ? "haswell" : "x86-64";
  const std::vector<std::string> renamed = missing_cpu_features(other + " " + features);
  EXPECT_TRUE(renamed.empty()) << renamed.front();
}

// A compiled file's bytes with its header changed by `edit`, its size and SHA-256 made
// anew (as another machine, or a hostile writer, would have written it).
std::string with_header(const std::string& bytes, const std::function<void(nlohmann::json&)>& edit) {
  const size_t magic = std::strlen("BASINNET2\n"), head = magic + 8 + 32;
  uint64_t n = 0;
  std::memcpy(&n, bytes.data() + magic, sizeof n);
  nlohmann::json h = nlohmann::json::parse(bytes.substr(head, n));
  edit(h);
  const std::string rest = h.dump() + bytes.substr(head + n);
  const uint64_t size = h.dump().size();
  return bytes.substr(0, magic) + std::string(reinterpret_cast<const char*>(&size), sizeof size) + sha256_bytes(rest) +
         rest;
}
std::string with_host_cpu(const std::string& bytes, const std::string& host) {
  return with_header(bytes, [&](nlohmann::json& h) { h["host_cpu"] = host; });
}

TEST(Sha256, MatchesTheStandardVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // A million 'a's, fed in pieces that straddle the 64-byte blocks.
  Sha256 s;
  const std::string piece(999, 'a');
  for (int i = 0; i < 1000; ++i) s.update(piece);
  s.update(std::string(1000, 'a'));
  std::array<uint8_t, 32> d = s.digest();
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(d.data()), 32), sha256_bytes(std::string(1000000, 'a')));
}

// A network compiled on another CPU loads and runs here when this CPU has every
// feature its code may use, and is one clear error naming the one it lacks otherwise.
TEST_F(Network, LoadsFromAnotherCpuWithTheSameInstructions) {
  const std::string here = llvm_host_cpu();
  if (here == "none") GTEST_SKIP() << "built without LLVM";
  graph::Graph g = graph::optimize(cnn());
  graph::Partition p = graph::partition(g);
  CompiledNetwork net = CompiledNetwork::compile(g, p, defaults(p));
  const std::string path = dir + "/cnn.basin";
  net.save(path);
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  auto write = [&](const std::string& name, const std::string& host) {
    std::ofstream(dir + "/" + name, std::ios::binary) << with_host_cpu(bytes, host);
    return dir + "/" + name;
  };
  const std::string cpu = llvm_cpu_name(here), features = here.substr(cpu.size() + 1);
  const std::string other = cpu == "x86-64" ? "haswell" : "x86-64";
  CompiledNetwork moved = CompiledNetwork::load(write("other.basin", other + " " + features));
  EXPECT_EQ(moved.compiled_for_cpu(), other);
  EXPECT_EQ(net.compiled_for_cpu(), cpu);
  std::vector<NDArray> in = {NDArray::random(DType::f32(), net.inputs()[0].shape, -1, 1, 3)};
  const std::vector<NDArray> a = net.run(in), b = moved.run(in);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a[0].data(), b[0].data(), a[0].nbytes()));
  // A feature this CPU lacks, on.
  const std::string off = a_feature_lacking(here);
  ASSERT_FALSE(off.empty()) << here;
  try {
    CompiledNetwork::load(write("wider.basin", cpu + " " + features + ",+" + off));
    ADD_FAILURE() << "loaded code that may use " << off;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(off), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("compile it again here"), std::string::npos) << e.what();
  }
}

TEST_F(Network, CorruptFilesAreClearErrors) {
  graph::Graph g = graph::optimize(cnn());
  graph::Partition p = graph::partition(g);
  std::string good = dir + "/cnn.basin";
  CompiledNetwork::compile(g, p, defaults(p)).save(good);
  std::string bytes;
  {
    std::ifstream f(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  auto write = [&](const std::string& name, const std::string& data) {
    std::ofstream(dir + "/" + name, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
    return dir + "/" + name;
  };
  EXPECT_THROW(CompiledNetwork::load(dir + "/missing.basin"), NotFoundError);
  EXPECT_THROW(CompiledNetwork::load(write("empty", "")), ParseError);
  EXPECT_THROW(CompiledNetwork::load(write("magic", "NOTBASIN" + bytes.substr(8))), ParseError);
  for (double keep : {0.01, 0.3, 0.9, 0.999}) {
    SCOPED_TRACE(keep);
    EXPECT_THROW(CompiledNetwork::load(write("cut", bytes.substr(0, static_cast<size_t>(bytes.size() * keep)))),
                 ParseError);
  }
  // A file of the previous format is refused with what to do.
  EXPECT_THROW(CompiledNetwork::load(write("old", "BASINNET1\n" + bytes.substr(10))), ParseError);
  try {
    CompiledNetwork::load(write("old", "BASINNET1\n" + bytes.substr(10)));
  } catch (const ParseError& e) {
    EXPECT_NE(std::string(e.what()).find("compile the network again"), std::string::npos) << e.what();
  }
  // A header whose launches disagree with their kernels, its digest made anew: refused
  // before anything runs, naming the launch.
  auto refused = [&](const std::string& name, const std::function<void(nlohmann::json&)>& edit,
                     const std::string& why) {
    SCOPED_TRACE(name);
    try {
      CompiledNetwork::load(write(name, with_header(bytes, edit)));
      ADD_FAILURE() << "loaded " << name;
    } catch (const ParseError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused(
      "short", [](nlohmann::json& h) { h["steps"][0]["args"].erase(h["steps"][0]["args"].size() - 1); }, "passes");
  refused(
      "swapped",
      [](nlohmann::json& h) {
        auto& a = h["steps"][0]["args"];
        std::swap(a[0], a[a.size() - 1]);
      },
      "launch 0");
  refused(
      "shape",
      [](nlohmann::json& h) {
        h["slots"][0]["shape"] = {-1, 4};
      },
      "invalid shape");
  refused(
      "huge",
      [](nlohmann::json& h) {
        h["slots"][0]["shape"] = {int64_t{1} << 40, int64_t{1} << 40};
      },
      "invalid shape");
  refused(
      "params", [](nlohmann::json& h) { h["kernels"][0].erase("params"); }, "corrupt header");
  refused(
      "misaligned", [](nlohmann::json& h) { h["slots"][0]["offset"] = 4; }, "not aligned");
  refused(
      "no args",
      [](nlohmann::json& h) {
        h["kernels"][h["steps"][0]["kernel"].get<int>()]["params"] = nlohmann::json::array();
        h["steps"][0]["args"] = nlohmann::json::array();
      },
      "passes no tensors");
  refused(
      "wrapping offset",  // offset + size wraps past 2^63
      [](nlohmann::json& h) {
        for (auto& s : h["slots"])
          if (s["weight"].get<int>() < 0) {
            s["offset"] = INT64_MAX - 63;
            break;
          }
      },
      "outside its storage");
  // A flipped byte anywhere (header, machine code, weights) is caught by the digest.
  for (double at : {0.02, 0.5, 0.97}) {
    SCOPED_TRACE(at);
    std::string bad = bytes;
    bad[static_cast<size_t>(bad.size() * at)] ^= 0x5a;
    EXPECT_THROW(CompiledNetwork::load(write("flip", bad)), ParseError);
  }
}

TEST_F(Network, BadInputsAreClearErrors) {
  graph::Graph g = graph::optimize(cnn());
  graph::Partition p = graph::partition(g);
  CompiledNetwork n = CompiledNetwork::compile(g, p, defaults(p));
  EXPECT_THROW(n.run({}), Error);
  EXPECT_THROW(n.run({NDArray(DType::f32(), {1, 3, 16, 15})}), Error);
  EXPECT_THROW(n.run({NDArray(DType::f64(), {1, 3, 16, 16})}), Error);
  std::vector<ProgramChoice> wrong = defaults(p);
  wrong.pop_back();
  EXPECT_THROW(CompiledNetwork::compile(g, p, wrong), InternalError);
  wrong = defaults(p);
  wrong[0].sketch = "no_such_sketch";
  try {
    CompiledNetwork::compile(g, p, wrong);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("task 0"), std::string::npos) << e.what();
  }
}

// An index outside the table it indexes is an error naming the input and the index, as
// in ONNX Runtime (the kernel would clamp it: a wrong row, silently); a negative one
// counts from the end.
TEST_F(Network, IndicesOutsideTheirTableAreAnError) {
  graph::Graph g;
  int ids = g.add_input("ids", {1, 4}, DType::i64());
  int table = g.add_constant("table", NDArray::random(DType::f32(), {10, 3}, -1, 1, 1));
  g.add_output(g.add_node("embedding", {table, ids}));
  g = graph::optimize(g);
  graph::Partition p = graph::partition(g);
  CompiledNetwork n = CompiledNetwork::compile(g, p, defaults(p));
  ASSERT_EQ(n.inputs()[0].index_bound, 10);
  NDArray in(DType::i64(), {1, 4});
  for (int64_t i = 0; i < 4; ++i) in.set_int(i, i);
  in.set_int(3, -1);  // the last row
  NDArray out = n.run({in})[0];
  EXPECT_EQ(out.get(3 * 3), g.value(table).data.get(9 * 3));
  for (int64_t bad : {int64_t{10}, int64_t{1000000000}, int64_t{-11}}) {
    in.set_int(2, bad);
    try {
      n.run({in});
      ADD_FAILURE() << "index " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("index " + std::to_string(bad)), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("'ids'"), std::string::npos) << e.what();
    }
  }
}

// HardSwish is ONNX's x * hardsigmoid(x), in the kernels and in the float32 reference:
// finite for x up to float32's largest (LibTorch's own hardswish overflows above about
// 5.7e37, which made a right answer look infinitely wrong).
TEST_F(Network, HardSwishOfHugeValuesIsFiniteInTheReference) {
  graph::Graph g;
  int x = g.add_input("x", {4}, DType::f32());
  g.add_output(g.add_node("hardswish", {x}));
  g = graph::optimize(g);
  graph::Partition p = graph::partition(g);
  CompiledNetwork n = CompiledNetwork::compile(g, p, defaults(p));
  NDArray in(DType::f32(), {4});
  const float xs[] = {1e38f, 3e38f, -1e38f, 1.5f};
  for (int i = 0; i < 4; ++i) in.as<float>()[i] = xs[i];
  const NDArray ours = n.run({in})[0], ref = TorchExecutor(g).run({in})[0];
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(std::isfinite(ref.get(i))) << i;
    EXPECT_EQ(ours.get(i), ref.get(i)) << i;
  }
  EXPECT_EQ(ours.get(0), 1e38f);
}

// Integer division is defined for every operand pair (a zero divisor gives 0,
// INT64_MIN / -1 wraps), so no kernel traps; a zero in an input that divides is an
// error, as in ONNX Runtime.
TEST_F(Network, IntegerDivisionNeverTrapsAndAZeroDivisorInputIsAnError) {
  graph::Graph g;
  int a = g.add_input("a", {4}, DType::i64());
  int b = g.add_input("b", {4}, DType::i64());
  NDArray two(DType::i64(), {1});
  two.set_int(0, 2);
  int c = g.add_node("sub", {b, g.add_constant("two", two)});  // b - 2: zeros and -1 in the kernel
  g.add_output(g.add_node("div", {a, b}));
  g.add_output(g.add_node("mod", {a, b}, {{"fmod", ops::AttrValue(int64_t{0})}}));
  g.add_output(g.add_node("div", {a, c}));
  g.add_output(g.add_node("mod", {a, c}, {{"fmod", ops::AttrValue(int64_t{0})}}));
  g = graph::optimize(g);
  graph::Partition p = graph::partition(g);
  CompiledNetwork n = CompiledNetwork::compile(g, p, defaults(p));
  EXPECT_FALSE(n.inputs()[0].divisor);
  EXPECT_TRUE(n.inputs()[1].divisor);
  const std::vector<int64_t> av = {INT64_MIN, 7, -7, 5}, bv = {-1, 2, 2, 1};
  NDArray ai(DType::i64(), {4}), bi(DType::i64(), {4});
  for (int i = 0; i < 4; ++i) ai.set_int(i, av[i]), bi.set_int(i, bv[i]);
  std::vector<NDArray> out = n.run({ai, bi});
  const std::vector<std::vector<int64_t>> want = {{INT64_MIN, 3, -3, 5},
                                                  {0, 1, 1, 0},
                                                  {3074457345618258602, 0, 0, -5},  // by -3, 0, 0, -1
                                                  {-2, 0, 0, 0}};
  for (size_t o = 0; o < want.size(); ++o)
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out[o].get_int(i), want[o][i]) << "output " << o << " element " << i;
  bi.set_int(2, 0);
  try {
    n.run({ai, bi});
    ADD_FAILURE() << "a zero divisor accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("division by zero"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'b'"), std::string::npos) << e.what();
  }
}

// A transformer block at sequence length L: token ids [1, L], attention over the L
// tokens (softmax along the keys), a residual dense; outputs the hidden states [L, 32]
// and the attention weights [4, L, L]. `mean_over_tokens` adds the mean over the
// tokens to the states (a reduction over the ranged axis: padding is then not exact).
graph::Graph ranged_block(int64_t L, bool mean_over_tokens = false) {
  graph::Graph g;
  g.name = "ranged_block";
  graph::NetBuilder b(g, 9);
  const int64_t d = 32;
  int ids = g.add_input("ids", {1, L}, DType::i64());
  int x = b.op("reshape", {b.op("embedding", {b.weight("emb", {50, d}, 0.5), ids})}, {{"new_shape", I{L, d}}});
  x = b.layer_norm(x);
  auto heads = [&](int v, const I& perm) {
    return b.op("transpose", {b.op("reshape", {v}, {{"new_shape", I{L, 4, 8}}})}, {{"perm", perm}});
  };
  int q = heads(b.dense(x, d), I{1, 0, 2});
  int k = heads(b.dense(x, d), I{1, 2, 0});
  int v = heads(b.dense(x, d), I{1, 0, 2});
  int att = b.op("softmax", {b.op("batch_matmul", {q, k})}, {{"axis", int64_t{-1}}});
  int o = b.op("reshape", {b.op("transpose", {b.op("batch_matmul", {att, v})}, {{"perm", I{1, 0, 2}}})},
               {{"new_shape", I{L, d}}});
  int y = b.op("add", {b.dense(o, d), x});
  if (mean_over_tokens) y = b.op("add", {y, b.op("mean", {y}, {{"axes", I{0}}, {"keepdims", int64_t{1}}})});
  g.add_output(b.layer_norm(y));
  g.add_output(att);
  return g;
}

std::function<graph::Graph(const std::map<std::string, int64_t>&)> ranged_import(bool mean = false) {
  return [mean](const std::map<std::string, int64_t>& at) { return ranged_block(at.at("seq"), mean); };
}

// `runtime_extents`: the buckets' kernels take their iterations at run time, as tune
// and compile build them.
CompiledNetwork compile_ranged(const graph::RangedModel& rm, bool runtime_extents = true) {
  std::vector<CompiledNetwork> buckets;
  for (const graph::ShapeBucket& bk : rm.buckets) {
    graph::Graph g = graph::optimize(bk.graph, graph::layout_lanes("llvm"));
    graph::Partition p = graph::partition(g);
    std::vector<int64_t> extents;
    if (runtime_extents)
      for (const auto& [d, x] : bk.at) extents.push_back(x);
    buckets.push_back(CompiledNetwork::compile(g, p, random_programs(p, 3), "llvm", "", extents));
  }
  return CompiledNetwork::ranged(std::move(buckets), {rm.dims, rm.input_axes, rm.output_axes, rm.masks});
}

// One network over a range of lengths: every length runs on its bucket, padded and
// masked, and gives the outputs of the model built at that length (LibTorch), the
// attention weights included; the file keeps the buckets (and one copy of the weights);
// a length outside the range and a wrong fixed extent are refused.
TEST_F(Network, ARangeOfShapesServesEveryLengthAsTheModelAtThatLength) {
  graph::ConstantPool pool;
  graph::RangedModel rm = graph::ranged_model(ranged_import(), {{"seq", 1, 20}}, pool);
  ASSERT_EQ(rm.masks, std::vector<std::string>{"seq"});
  CompiledNetwork net = compile_ranged(rm);
  ASSERT_TRUE(net.is_ranged());
  EXPECT_EQ(net.buckets(), 6);  // 1 2 4 8 16 20
  EXPECT_EQ(net.inputs()[0].axis_dims, (std::vector<std::string>{"", "seq"}));
  EXPECT_EQ(net.outputs()[1].axis_dims, (std::vector<std::string>{"", "seq", "seq"}));
  // One copy of the weights for every bucket.
  const graph::Graph top = graph::optimize(ranged_block(20), graph::layout_lanes("llvm"));
  EXPECT_LE(net.weight_bytes(), top.weight_bytes() + 4096);
  const std::string file = dir + "/ranged.basin";
  net.save(file);
  CompiledNetwork loaded = CompiledNetwork::load(file);
  ASSERT_TRUE(loaded.is_ranged());
  EXPECT_EQ(loaded.buckets(), net.buckets());
  for (int64_t L = 1; L <= 20; ++L) {
    SCOPED_TRACE("length " + std::to_string(L));
    std::vector<NDArray> in = {NDArray::random(DType::i64(), {1, L}, 0, 50, static_cast<uint64_t>(L))};
    const std::vector<NDArray> got = net.run(in);
    ASSERT_EQ(got[0].shape(), (I{L, 32}));
    ASSERT_EQ(got[1].shape(), (I{4, L, L}));
    expect_close(got, TorchExecutor(ranged_block(L)).run(in), 1e-5);
    const std::vector<NDArray> again = loaded.run(in);
    for (size_t o = 0; o < got.size(); ++o)
      EXPECT_EQ(std::memcmp(got[o].data(), again[o].data(), got[o].nbytes()), 0) << "output " << o;
  }
  try {
    net.run({NDArray::random(DType::i64(), {1, 21}, 0, 50, 1)});
    ADD_FAILURE() << "a length above the range ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside the range"), std::string::npos) << e.what();
  }
  try {
    net.run({NDArray::random(DType::i64(), {2, 5}, 0, 50, 1)});
    ADD_FAILURE() << "a wrong fixed extent ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[1, seq]"), std::string::npos) << e.what();
  }
  const Accuracy a = check_ranged(rm, net, ranged_import());
  EXPECT_TRUE(a.measured) << a.note;
  EXPECT_LT(a.max_rel, 1e-5);
}

// The buckets' kernels given their iterations at run time: a call below its bucket's
// extent runs the iterations of its real positions only, and gives what the same
// programs compiled for every iteration give, bit for bit, at every length, saved and
// loaded (the padded positions a skipped iteration leaves are cleared, so that the
// attention's masked keys stay finite).
TEST_F(Network, ABucketRunsOnlyTheIterationsOfTheRealPositions) {
  graph::ConstantPool pool;
  graph::RangedModel rm = graph::ranged_model(ranged_import(), {{"seq", 1, 24}}, pool);
  CompiledNetwork plain = compile_ranged(rm, false), net = compile_ranged(rm);
  EXPECT_EQ(plain.runtime_extent_launches(), 0);
  EXPECT_GE(net.runtime_extent_launches(), net.launches() / 2) << net.launches() << " launches";
  const std::string file = dir + "/runtime.basin";
  net.save(file);
  CompiledNetwork loaded = CompiledNetwork::load(file);
  EXPECT_EQ(loaded.runtime_extent_launches(), net.runtime_extent_launches());
  for (int64_t L : {1, 3, 5, 7, 9, 13, 17, 23, 24, 2, 24, 17}) {
    SCOPED_TRACE("length " + std::to_string(L));
    std::vector<NDArray> in = {NDArray::random(DType::i64(), {1, L}, 0, 50, static_cast<uint64_t>(L))};
    const std::vector<NDArray> want = plain.run(in), got = net.run(in), again = loaded.run(in);
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < got.size(); ++o) {
      ASSERT_EQ(got[o].shape(), want[o].shape());
      EXPECT_EQ(std::memcmp(got[o].data(), want[o].data(), got[o].nbytes()), 0) << "output " << o;
      EXPECT_EQ(std::memcmp(again[o].data(), want[o].data(), got[o].nbytes()), 0) << "output " << o;
    }
    expect_close(got, TorchExecutor(ranged_block(L)).run(in), 1e-5);
  }
  // A file whose iteration tables are cut, or whose iterations parameter is moved, is
  // refused before anything runs.
  std::string bytes;
  {
    std::ifstream f(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  auto listed_kernel = [](nlohmann::json& h) -> nlohmann::json& {
    for (auto& b : h["buckets"])
      for (auto& k : b["kernels"])
        if (k.contains("iterations")) return k;
    throw std::runtime_error("no kernel with iterations");
  };
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> bad = {
      {[&](nlohmann::json& h) { listed_kernel(h)["iterations"]["nests"][0]["first"].erase(0); }, "malformed"},
      {[&](nlohmann::json& h) { listed_kernel(h)["iterations"]["param"] = 0; }, "iterations parameter"},
      {[&](nlohmann::json& h) { listed_kernel(h)["iterations"]["param"] = 99; }, "out of range"}};
  for (const auto& [edit, why] : bad) {
    const std::string path = dir + "/iterations.basin", data = with_header(bytes, edit);
    std::ofstream(path, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
    try {
      CompiledNetwork::load(path);
      ADD_FAILURE() << "a file with bad iterations loaded (" << why << ")";
    } catch (const ParseError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
  // A profile of a short call times the launches it runs (the bucket of 24 at 17 tokens).
  EXPECT_EQ(net.profile({NDArray::random(DType::i64(), {1, 17}, 0, 50, 1)}, 1).launches.size(),
            static_cast<size_t>(net.launches()));
}

// Attention over B sequences of L tokens each: x [B, L, 8] (the dense layers see the
// B x L rows flattened), a softmax along each sequence's keys; output [B, L, 8].
graph::Graph batched_attention(int64_t B, int64_t L) {
  graph::Graph g;
  g.name = "batched_attention";
  graph::NetBuilder b(g, 5);
  int x = g.add_input("x", {B, L, 8});
  int rows = b.op("reshape", {x}, {{"new_shape", I{B * L, 8}}});
  auto proj = [&](const I& shape) { return b.op("reshape", {b.dense(rows, 8)}, {{"new_shape", shape}}); };
  int q = proj({B, L, 8}), k = b.op("transpose", {proj({B, L, 8})}, {{"perm", I{0, 2, 1}}}), v = proj({B, L, 8});
  int p = b.op("softmax", {b.op("batch_matmul", {q, k})}, {{"axis", int64_t{-1}}});
  g.add_output(b.op("add", {b.op("batch_matmul", {p, v}), x}));
  return g;
}

// Two ranged dimensions: every combination of their buckets, a call dispatched on both
// (padded along each), the same as the model built at the call's extents.
TEST_F(Network, TwoRangedDimensionsDispatchOnBoth) {
  auto import = [](const std::map<std::string, int64_t>& at) { return batched_attention(at.at("b"), at.at("n")); };
  graph::ConstantPool pool;
  graph::RangedModel rm = graph::ranged_model(import, {{"b", 1, 3}, {"n", 2, 6}}, pool);
  ASSERT_EQ(rm.buckets.size(), 9u);  // b 1 2 3 x n 2 4 6
  EXPECT_EQ(rm.input_axes[0], (std::vector<std::string>{"b", "n", ""}));
  EXPECT_EQ(rm.masks, std::vector<std::string>{"n"});
  CompiledNetwork net = compile_ranged(rm);
  for (auto [B, L] : {std::pair<int64_t, int64_t>{1, 2}, {2, 3}, {3, 5}, {3, 6}}) {
    SCOPED_TRACE(std::to_string(B) + " x " + std::to_string(L));
    std::vector<NDArray> in = {NDArray::random(DType::f32(), {B, L, 8}, -1, 1, static_cast<uint64_t>(B * 10 + L))};
    const std::vector<NDArray> got = net.run(in);
    ASSERT_EQ(got[0].shape(), (I{B, L, 8}));
    expect_close(got, TorchExecutor(batched_attention(B, L)).run(in), 1e-5);
  }
  EXPECT_NO_THROW(check_ranged(rm, net, import));
}

// A model that mixes the tokens other than through a softmax (a mean over them) is
// refused: padding would change its real outputs.
TEST_F(Network, PaddingThatChangesRealOutputsIsRefused) {
  graph::ConstantPool pool;
  graph::RangedModel rm = graph::ranged_model(ranged_import(true), {{"seq", 1, 12}}, pool);
  CompiledNetwork net = compile_ranged(rm);
  try {
    check_ranged(rm, net, ranged_import(true));
    ADD_FAILURE() << "inexact padding passed the check";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("padding is not exact"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace basin::codegen
