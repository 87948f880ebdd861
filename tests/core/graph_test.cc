// The network graph: building with shape inference, the passes (each checked against
// the graph interpreter, the loop-IR oracle), fusion and task extraction, subgraph
// task names, and the zoo.
#include <gtest/gtest.h>

#include <tuple>

#include <cmath>
#include <cstring>
#include <set>

#include "core/graph/fusion.h"
#include "core/graph/graph.h"
#include "core/graph/layout.h"
#include "core/graph/model.h"
#include "core/graph/passes.h"
#include "core/graph/shape_range.h"
#include "core/graph/zoo.h"
#include "core/ops/subgraph.h"
#include "core/schedule/sketch.h"
#include "core/util/host.h"
#include "tests/scoped_env.h"

namespace basin::graph {
namespace {

using I = std::vector<int64_t>;

void expect_close(const std::vector<NDArray>& got, const std::vector<NDArray>& ref, double tol = 1e-4) {
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].shape(), ref[i].shape());
    ErrorStats e = compare_arrays(got[i], ref[i]);
    EXPECT_LE(e.max_rel, tol) << "output " << i << ": max abs error " << e.max_abs;
  }
}

// x[1,3,8,8] -> conv -> batch_norm -> relu -> (+ residual conv) -> global pool -> flatten -> dense
Graph small_net(bool with_dead_branch = false) {
  Graph g;
  g.name = "small";
  NetBuilder b(g, 7);
  int x = g.add_input("x", {1, 3, 8, 8});
  int c = b.conv(x, 8, {3}, {1, 1}, {1, 1});
  int r = b.op("relu", {b.batch_norm(c)});
  int c2 = b.op("relu", {b.batch_norm(b.conv(r, 8, {3}, {1, 1}, {1, 1}))});
  int s = b.op("add", {c2, r});
  if (with_dead_branch) b.op("sigmoid", {b.op("exp", {s})});
  int p = b.op("global_avg_pool2d", {s});
  int f = b.op("flatten", {p}, {{"start_dim", int64_t{1}}, {"end_dim", int64_t{-1}}});
  g.add_output(b.dense(f, 5));
  return g;
}

TEST(Graph, ShapesAreInferredWhenNodesAreAdded) {
  Graph g = small_net();
  const Value& out = g.value(g.outputs()[0]);
  EXPECT_EQ(out.shape, (I{1, 5}));
  EXPECT_EQ(out.dtype, DType::f32());
  std::vector<int> order = g.topo_order();
  ASSERT_EQ(order.size(), g.nodes().size());
  std::vector<int> pos(order.size());
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = static_cast<int>(i);
  for (const Node& n : g.nodes())
    for (int v : n.inputs)
      if (g.value(v).producer >= 0) {
        EXPECT_LT(pos[g.value(v).producer], pos[g.value(n.output).producer]);
      }
  EXPECT_GT(g.weight_bytes(), 0);
  EXPECT_EQ(g.op_counts().at("conv2d"), 2);
}

TEST(Graph, ANodeWithIncompatibleInputsNamesItself) {
  Graph g;
  int a = g.add_input("a", {2, 3});
  int b = g.add_input("b", {4, 5});
  try {
    g.add_node("add", {a, b}, {}, "the_bad_add");
    FAIL() << "no error";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("the_bad_add"), std::string::npos) << e.what();
  }
  EXPECT_THROW(g.add_node("no_such_op", {a}), GraphError);
  EXPECT_THROW(g.add_node("relu", {42}), GraphError);
  EXPECT_THROW(g.add_node("conv2d", {a, a}), GraphError);
}

// A convolution's padding value (a quantized input's zero point) is a value of its
// integer input's type: on float32 inputs, or outside uint8's range, an error naming
// the attribute.
TEST(Graph, AConvolutionsPadValueFitsItsIntegerInput) {
  Graph g;
  const int xf = g.add_input("xf", {1, 2, 5, 5});
  const int xu = g.add_input("xu", {1, 2, 5, 5}, DType::u8());
  const int w = g.add_constant("w", NDArray(DType::i8(), {4, 2, 3, 3}));
  auto conv = [&](int x, int64_t pad_value) {
    return g.add_node("conv2d", {x, w}, {{"padding", I{1, 1}}, {"pad_value", pad_value}});
  };
  EXPECT_EQ(g.node(g.value(conv(xu, 255)).producer).attrs.i("pad_value"), 255);
  for (auto [x, v, needle] : {std::tuple{xf, int64_t{3}, "needs integer inputs"},
                              std::tuple{xu, int64_t{256}, "not a value of the input's type"},
                              std::tuple{xu, int64_t{-1}, "not a value of the input's type"}}) {
    try {
      conv(x, v);
      ADD_FAILURE() << v << " accepted";
    } catch (const GraphError& e) {
      EXPECT_NE(std::string(e.what()).find("pad_value"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
}

// A node's output follows the size rule of every tensor (tensor_bytes): an extent
// that wraps negative, an element count that overflows, more than one tensor may take
// here are one GraphError naming the node, never a shape that compiles and then writes
// past its arena.
TEST(Graph, AnOutputTooLargeToExistIsAnErrorNamingItsNode) {
  Graph g;
  int x = g.add_input("x", {1, 4});
  const int64_t huge = int64_t{1} << 62;
  auto refused = [&](const std::string& op, const std::map<std::string, ops::AttrValue>& attrs,
                     const std::string& needle) {
    try {
      g.add_node(op, {x}, attrs, "big_" + op);
      ADD_FAILURE() << op << " accepted";
    } catch (const GraphError& e) {
      EXPECT_NE(std::string(e.what()).find("big_" + op), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused("pad", {{"pads", I{0, huge, 0, huge}}}, "too large to exist");
  refused("broadcast_to", {{"new_shape", I{int64_t{1} << 32, int64_t{1} << 32, 4}}}, "too many elements");
  refused("broadcast_to", {{"new_shape", I{int64_t{1} << 20, int64_t{1} << 20, 4}}}, "more than the");
  EXPECT_EQ(g.nodes().size(), 0u);
  // An empty tensor whose other extents multiply past 2^62 (the fuzzer's global pooling
  // of such a tensor wrapped its window's size): refused, as any tensor of that shape.
  EXPECT_THROW(NDArray(DType::f32(), {0, huge, 3}), Error);
  EXPECT_THROW(tensor_bytes(DType::f32(), {huge, 3, 0}), Error);
  EXPECT_EQ(NDArray(DType::f32(), {0, 1 << 20, 3}).numel(), 0);
  EXPECT_THROW(g.add_input("huge", {1, 1, huge, 3}), GraphError);  // (no input too large to exist)
}

TEST(Passes, BatchNormFoldingKeepsTheOutputs) {
  Graph g = small_net();
  Graph f = fold_batch_norm(g);
  EXPECT_EQ(g.op_counts().count("batch_norm"), 1u);
  EXPECT_EQ(g.op_counts().at("batch_norm"), 2);
  EXPECT_EQ(f.op_counts().count("batch_norm"), 0u);
  NDArray x = NDArray::random(DType::f32(), {1, 3, 8, 8}, -1, 1, 3);
  expect_close(interpret_graph(f, {x}), interpret_graph(g, {x}));
}

TEST(Passes, BatchNormReadTwiceIsNotFolded) {
  Graph g;
  NetBuilder b(g, 1);
  int x = g.add_input("x", {1, 2, 4, 4});
  int c = b.conv(x, 4, {1}, {1, 1}, {0, 0});
  int n = b.batch_norm(c);
  g.add_output(b.op("add", {n, c}));  // the conv's output is read by the norm and the add
  Graph f = fold_batch_norm(g);
  EXPECT_EQ(f.op_counts().at("batch_norm"), 1);
  NDArray in = NDArray::random(DType::f32(), {1, 2, 4, 4}, -1, 1, 2);
  expect_close(interpret_graph(f, {in}), interpret_graph(g, {in}));
}

TEST(Passes, ConstantFoldingComputesConstantSubgraphs) {
  Graph g;
  int x = g.add_input("x", {4});
  int c = g.add_constant("c", NDArray::random(DType::f32(), {4}, 0.5, 1, 1));
  int e = g.add_node("exp", {c}, {}, "exp_of_constant");
  int m = g.add_node("mul", {e, g.add_constant("two", NDArray::random(DType::f32(), {4}, 2, 2.0001, 1))});
  g.add_output(g.add_node("add", {x, m}));
  Graph f = fold_constants(g);
  EXPECT_EQ(f.nodes().size(), 1u);
  EXPECT_EQ(f.node(0).op, "add");
  NDArray in = NDArray::random(DType::f32(), {4}, -1, 1, 5);
  expect_close(interpret_graph(f, {in}), interpret_graph(g, {in}), 1e-6);
}

// q, k, v as an exporter writes them: [1, H, L, D] heads viewed as [H, L, D] for the
// batch_matmuls, the scores viewed back as [1, H, L, S] for the scale, the mask and the
// softmax. `order` "mul,add" (the exporters' order), "add,mul", or "div".
Graph attention_net(const std::string& order, int64_t softmax_axis = -1, bool scores_output = false) {
  const int64_t H = 3, L = 5, S = 7, D = 4, E = 6;
  Graph g;
  int q = g.add_input("q", {1, H, L, D}), k = g.add_input("k", {1, H, D, S}), v = g.add_input("v", {1, H, S, E});
  int mask = g.add_input("mask", {1, 1, L, S});
  auto view = [&](int x, std::vector<int64_t> shape) { return g.add_node("reshape", {x}, {{"new_shape", shape}}); };
  int s = g.add_node("batch_matmul", {view(q, {H, L, D}), view(k, {H, D, S})});
  int x = view(s, {1, H, L, S});
  int c = g.add_constant("scale", NDArray::random(DType::f32(), {1}, 0.5, 0.5001, 1));
  if (order == "mul,add") x = g.add_node("add", {g.add_node("mul", {x, c}), mask});
  if (order == "add,mul") x = g.add_node("mul", {g.add_node("add", {mask, x}), c});
  if (order == "div") x = g.add_node("div", {x, c});
  int p = g.add_node("softmax", {x}, {{"axis", softmax_axis}});
  int o = g.add_node("batch_matmul", {view(p, {H, L, S}), view(v, {H, S, E})});
  g.add_output(view(o, {1, H, L, E}));
  if (scores_output) g.add_output(s);
  return g;
}

std::vector<NDArray> attention_inputs() {
  return {NDArray::random(DType::f32(), {1, 3, 5, 4}, -1, 1, 1), NDArray::random(DType::f32(), {1, 3, 4, 7}, -1, 1, 2),
          NDArray::random(DType::f32(), {1, 3, 7, 6}, -1, 1, 3), NDArray::random(DType::f32(), {1, 1, 5, 7}, -3, 0, 4)};
}

TEST(Passes, AttentionIsFusedIntoOneNode) {
  for (const char* order : {"mul,add", "div", ""}) {
    Graph g = attention_net(order);
    Graph f = fuse_attention(g);
    EXPECT_EQ(f.op_counts().count("softmax"), 0u) << order;
    EXPECT_EQ(f.op_counts().count("batch_matmul"), 0u) << order;
    ASSERT_EQ(f.op_counts().count("attention"), 1u) << order;
    Partition part = partition(f);
    int attention_tasks = 0;
    for (const auto& t : part.tasks) attention_tasks += t.label.find("attention") != std::string::npos;
    EXPECT_EQ(attention_tasks, 1) << order;
    expect_close(interpret_graph(f, attention_inputs()), interpret_graph(g, attention_inputs()), 1e-5);
  }
}

TEST(Passes, AttentionVariantsOutsideThePatternStayUnfused) {
  // The mask added before the scale, a softmax over another axis, the scores read twice.
  for (Graph g : {attention_net("add,mul"), attention_net("mul,add", 2), attention_net("mul,add", -1, true)}) {
    Graph f = fuse_attention(g);
    EXPECT_EQ(f.op_counts().count("attention"), 0u);
    EXPECT_EQ(f.nodes().size(), g.nodes().size());
  }
}

TEST(Passes, DeadCodeIsEliminated) {
  Graph g = small_net(true);
  Graph f = eliminate_dead_code(g);
  EXPECT_EQ(g.op_counts().count("sigmoid"), 1u);
  EXPECT_EQ(f.op_counts().count("sigmoid"), 0u);
  EXPECT_EQ(f.op_counts().count("exp"), 0u);
  EXPECT_EQ(f.nodes().size() + 2, g.nodes().size());
  NDArray in = NDArray::random(DType::f32(), {1, 3, 8, 8}, -1, 1, 5);
  expect_close(interpret_graph(f, {in}), interpret_graph(g, {in}), 1e-6);
}

// pow by a constant 2, 3 or 4 becomes products (the tanh-GELU's cube, which otherwise
// calls the C library's powf per element); a fractional or mixed exponent, or one that
// broadcasts x to a larger shape, stays a pow. The values match the pow's (negative
// bases included) to a few roundings, and the cube's products are the ones PyTorch
// computes.
TEST(Passes, PowersByASmallIntegerBecomeProducts) {
  auto net = [](double e, I x_shape, I c_shape, bool mixed = false) {
    Graph g;
    int x = g.add_input("x", x_shape);
    NDArray c(DType::f32(), c_shape);
    for (int64_t i = 0; i < c.numel(); ++i) c.set(i, mixed && i == 1 ? e + 1 : e);
    g.add_output(g.add_node("pow", {x, g.add_constant("c", c)}, {}, "cube"));
    return g;
  };
  NDArray in = NDArray::random(DType::f32(), {4, 8}, -3, 3, 7);
  for (double e : {2.0, 3.0, 4.0}) {
    Graph g = net(e, {4, 8}, {});
    Graph f = expand_powers(g);
    EXPECT_EQ(f.op_counts().count("pow"), 0u) << e;
    EXPECT_EQ(f.op_counts().at("mul"), e == 2 ? 1 : 2) << e;
    const NDArray got = interpret_graph(f, {in})[0], ref = interpret_graph(g, {in})[0];
    expect_close({got}, {ref}, 1e-6);
    for (int64_t i = 0; i < in.numel(); ++i) {
      const float v = static_cast<float>(in.get(i)), sq = v * v;
      const float want = e == 2 ? sq : e == 3 ? sq * v : sq * sq;
      EXPECT_EQ(static_cast<float>(got.get(i)), want) << i;
    }
    // The whole pipeline: no pow reaches a kernel.
    EXPECT_EQ(optimize(g).op_counts().count("pow"), 0u) << e;
  }
  for (const Graph& g : {net(2.5, {4, 8}, {}), net(3, {4, 8}, {4, 8}, true), net(3, {8}, {4, 8}), net(1, {4, 8}, {})})
    EXPECT_EQ(expand_powers(g).op_counts().count("pow"), 1u);
  // A constant exponent with x's shape (every element 3) is expanded too.
  EXPECT_EQ(expand_powers(net(3, {4, 8}, {4, 8})).op_counts().count("pow"), 0u);
}

TEST(Fusion, AnchorsAbsorbTheirElementwiseChains) {
  Graph g = optimize(small_net());
  Partition p = partition(g);
  // conv+add(bias)+relu, conv+add(bias)+relu+add(residual), global pool, flatten (a
  // view), dense+add.
  std::vector<std::string> labels;
  for (const auto& t : p.tasks) labels.push_back(t.label);
  ASSERT_EQ(p.tasks.size(), 4u) << ::testing::PrintToString(labels);
  EXPECT_EQ(labels[0].rfind("conv2d+add+relu [", 0), 0u) << labels[0];
  EXPECT_EQ(labels[1].rfind("conv2d+add+relu+add [", 0), 0u) << labels[1];
  int views = 0;
  for (const auto& fg : p.groups) views += fg.view;
  EXPECT_EQ(views, 1);
  // Groups come producers first and read only values defined before them.
  std::set<int> defined(g.inputs().begin(), g.inputs().end());
  for (size_t v = 0; v < g.values().size(); ++v)
    if (g.values()[v].constant) defined.insert(static_cast<int>(v));
  for (const auto& fg : p.groups) {
    for (int v : fg.inputs) EXPECT_TRUE(defined.count(v)) << g.value(v).name;
    defined.insert(fg.output);
  }
  for (int v : g.outputs()) EXPECT_TRUE(defined.count(v));
}

// A chain of thousands of elementwise operators, each with a constant of its own,
// becomes kernels of at most 64 operators reading at most 64 values: one kernel of the
// whole chain would be an expression as deep as the chain (its code generation
// overflowed the stack at 20,000) and a function of as many arguments. The consumers
// of every value are those of the nodes that read it.
TEST(Fusion, ALongChainBecomesKernelsOfBoundedSize) {
  Graph g;
  int x = g.add_input("x", {1, 16});
  for (int i = 0; i < 20000; ++i)
    x = g.add_node("add",
                   {x, g.add_constant("c" + std::to_string(i), NDArray::random(DType::f32(), {1, 16}, -1, 1, 1))});
  g.add_output(x);
  Partition p = partition(g);
  size_t nodes = 0;
  for (const auto& fg : p.groups) {
    EXPECT_LE(fg.nodes.size(), 64u);
    EXPECT_LE(fg.inputs.size(), 64u);
    nodes += fg.nodes.size();
  }
  EXPECT_EQ(nodes, g.nodes().size());
  EXPECT_GE(p.groups.size(), 20000u / 64);
  EXPECT_LE(p.tasks.size(), 3u);  // the full kernels are one task
  for (size_t v = 0; v < g.values().size(); ++v) {
    std::vector<int> expect;
    for (size_t n = 0; n < g.nodes().size(); ++n)
      for (int in : g.nodes()[n].inputs)
        if (in == static_cast<int>(v)) {
          expect.push_back(static_cast<int>(n));
          break;
        }
    ASSERT_EQ(g.consumers(static_cast<int>(v)), expect) << v;
    if (v > 200) break;  // (the reference is quadratic)
  }
}

TEST(Fusion, AFanOutThatClosesAgainStaysInOneGroup) {
  Graph g;
  NetBuilder b(g, 2);
  int x = g.add_input("x", {1, 4, 6, 6});
  int c = b.conv(x, 4, {3}, {1, 1}, {1, 1}, 1, true);
  // SiLU (c * sigmoid(c)) and a second fan-out of the SiLU that closes in an add.
  int s = b.op("mul", {c, b.op("sigmoid", {c})});
  g.add_output(b.op("add", {b.op("sigmoid", {s}), b.op("tanh", {s})}));
  Partition p = partition(g);
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.tasks[0].label.rfind("conv2d+add+sigmoid+mul+", 0), 0u) << p.tasks[0].label;
  EXPECT_EQ(p.groups[0].nodes.size(), g.nodes().size());
  EXPECT_EQ(p.groups[0].output, g.outputs()[0]);
  // Its epilogue reads the convolution's value twice: still the anchor's tiling sketches.
  EXPECT_EQ(sched::cpu_sketches(p.tasks[0].graph).at(0).rule, sched::SketchRule::Anchor);
  EXPECT_EQ(sched::gpu_sketches(p.tasks[0].graph).at(0).rule, sched::SketchRule::GpuTile);
}

// A transformer's feed-forward block as exported: rows of [1, 8, 16] through dense layers,
// each product viewed back to [1, 8, N] before its bias, GELU (x / sqrt 2, erf, + 1,
// * x, * 0.5) and the residual add. View sinking moves the views after the chains, so
// each chain fuses into its product's epilogue; the outputs and their names stay.
TEST(Passes, ViewsSinkBelowElementwiseChainsIntoTheProductsEpilogue) {
  Graph g;
  NetBuilder b(g, 4);
  int x = g.add_input("x", {1, 8, 16});
  auto rows = [&](int v, int64_t n) {
    const int64_t k = g.value(v).shape.back();
    int d =
        b.op("dense", {b.op("reshape", {v}, {{"new_shape", std::vector<int64_t>{8, k}}}), b.weight("w", {n, k}, 0.3)});
    return b.op("add", {b.op("reshape", {d}, {{"new_shape", std::vector<int64_t>{1, 8, n}}}), b.weight("b", {n}, 0.3)});
  };
  int h = rows(x, 32);
  auto scalar = [&](const char* name, double v) {
    NDArray a(DType::f32(), {});
    a.set(0, v);
    return g.add_constant(name, a);
  };
  int sqrt2 = scalar("sqrt2", 1.4142135), one = scalar("one", 1.0), half = scalar("half", 0.5);
  int gelu = b.op("mul", {b.op("mul", {h, b.op("add", {b.op("erf", {b.op("div", {h, sqrt2})}), one})}), half});
  int y = b.op("add", {rows(gelu, 16), x});
  g.add_output(y);
  const std::string out_name = g.value(y).name;
  Graph f = optimize(g);
  EXPECT_EQ(f.value(f.outputs()[0]).name, out_name);
  std::vector<std::string> labels;
  for (const auto& t : partition(f).tasks) labels.push_back(t.label);
  ASSERT_EQ(labels.size(), 2u) << ::testing::PrintToString(labels);
  EXPECT_EQ(labels[0].rfind("dense+add+div+erf+add+mul+mul [8, 32]", 0), 0u) << labels[0];
  EXPECT_EQ(labels[1].rfind("dense+add+add [8, 16]", 0), 0u) << labels[1];
  NDArray in = NDArray::random(DType::f32(), {1, 8, 16}, -1, 1, 6);
  expect_close(interpret_graph(f, {in}), interpret_graph(g, {in}), 1e-5);

  // An operand that broadcasts the result past the view's shape keeps the node (and the
  // view) where they are.
  Graph w;
  NetBuilder c(w, 5);
  int a = w.add_input("a", {8, 16});
  int t = w.add_input("t", {2, 8, 16});
  w.add_output(c.op("relu", {c.op("add", {c.op("reshape", {a}, {{"new_shape", std::vector<int64_t>{1, 8, 16}}}), t})}));
  Graph sw = sink_views(w);
  EXPECT_EQ(sw.nodes().size(), w.nodes().size());
  EXPECT_EQ(sw.node(sw.value(sw.outputs()[0]).producer).op, "relu");
}

// Squeeze-and-excitation: the channel scale (a cheap elementwise group) becomes the
// producer of the projection convolution that reads it; a costly one (with a sigmoid)
// does not.
TEST(Fusion, ACheapElementwiseGroupJoinsTheAnchorThatReadsIt) {
  for (const std::string scale_op : {"mul", "sigmoid"}) {
    Graph g;
    NetBuilder b(g, 4);
    int x = g.add_input("x", {1, 8, 6, 6});
    int d = b.op("relu", {b.conv(x, 8, {3}, {1, 1}, {1, 1}, 8)});
    int s = b.op("sigmoid", {b.conv(b.op("global_avg_pool2d", {d}), 8, {1}, {1, 1}, {0, 0}, 1, true)});
    int scaled = scale_op == "mul" ? b.op("mul", {d, s}) : b.op("mul", {b.op("sigmoid", {d}), s});
    g.add_output(b.conv(scaled, 4, {1}, {1, 1}, {0, 0}));
    Partition p = partition(g);
    const NetworkTask& last = p.tasks[p.groups.back().task];
    if (scale_op == "mul") {
      EXPECT_EQ(last.label.rfind("mul+conv2d [", 0), 0u) << last.label;
      EXPECT_EQ(sched::cpu_sketches(last.graph).at(0).rule, sched::SketchRule::Anchor) << last.label;
    } else {
      EXPECT_EQ(last.label.rfind("conv2d [", 0), 0u) << last.label;
    }
  }
}

TEST(Fusion, AValueReadOutsideItsRegionEndsItsGroup) {
  // r is read by an elementwise chain and by a reduction: it is materialized, and the
  // chain that reads it starts a group of its own.
  Graph g;
  NetBuilder b(g, 2);
  int x = g.add_input("x", {1, 4, 6, 6});
  int r = b.op("relu", {b.conv(x, 4, {3}, {1, 1}, {1, 1})});
  int pooled = b.op("global_avg_pool2d", {r});
  g.add_output(b.op("mul", {b.op("sigmoid", {r}), pooled}));
  Partition p = partition(g);
  ASSERT_EQ(p.groups.size(), 3u);
  EXPECT_EQ(p.tasks[p.groups[0].task].label.rfind("conv2d+relu [", 0), 0u) << p.tasks[p.groups[0].task].label;
  int total_nodes = 0;
  for (const auto& fg : p.groups) total_nodes += static_cast<int>(fg.nodes.size());
  EXPECT_EQ(total_nodes, static_cast<int>(g.nodes().size()));
  // A fan-out whose readers are a graph output and an elementwise op is not closed either.
  Graph h;
  NetBuilder hb(h, 3);
  int y = h.add_input("y", {1, 4, 6, 6});
  int t = hb.op("relu", {hb.conv(y, 4, {3}, {1, 1}, {1, 1})});
  int u = hb.op("sigmoid", {t});
  h.add_output(u);
  h.add_output(hb.op("mul", {t, u}));
  Partition q = partition(h);
  std::set<int> produced;
  for (const auto& fg : q.groups) produced.insert(fg.output);
  EXPECT_TRUE(produced.count(u)) << "a graph output must be some group's output";
}

TEST(Fusion, IdenticalGroupsAreOneTaskWeightedByCount) {
  Graph g;
  NetBuilder b(g, 3);
  int x = g.add_input("x", {1, 8, 10, 10});
  for (int i = 0; i < 3; ++i) x = b.op("relu", {b.conv(x, 8, {3}, {1, 1}, {1, 1}, 1, true)});
  g.add_output(x);
  Partition p = partition(g);
  ASSERT_EQ(p.tasks.size(), 1u);
  EXPECT_EQ(p.tasks[0].weight, 3);
  EXPECT_EQ(p.groups.size(), 3u);
  EXPECT_GT(p.tasks[0].flops, 2.0 * 8 * 8 * 9 * 100);
  for (const auto& fg : p.groups) EXPECT_EQ(fg.task, 0);
}

// The task writing the network's output (here through a view) is marked: at bf16 its
// products keep float32 (the output layer's rounding is not attenuated by later layers);
// the others take the precision asked for.
TEST(Fusion, TheTaskWritingAnOutputKeepsFloat32ProductsAtBf16) {
  Graph g;
  NetBuilder b(g, 4);
  int x = g.add_input("x", {1, 8, 6, 6});
  int c = b.op("relu", {b.conv(x, 8, {3}, {1, 1}, {1, 1}, 1, true)});
  int f = b.op("flatten", {b.op("global_avg_pool2d", {c})}, {{"start_dim", int64_t{1}}, {"end_dim", int64_t{-1}}});
  g.add_output(b.op("reshape", {b.dense(f, 10)}, {{"new_shape", std::vector<int64_t>{10}}}));
  Partition p = partition(g);
  int marked = 0;
  for (const NetworkTask& t : p.tasks) {
    const bool dense = t.label.find("dense") != std::string::npos;
    EXPECT_EQ(t.writes_output, dense) << t.label;
    marked += t.writes_output;
    EXPECT_EQ(sched::task_precision("bf16", t.writes_output), dense ? "" : "bf16");
    EXPECT_EQ(sched::task_precision("f32", t.writes_output), "f32");
  }
  EXPECT_EQ(marked, 1);
}

// x[1,3,10,10] -> conv 16 (NHWC read) -> relu -> depthwise stride 2 -> batch_norm ->
// clip -> conv 24 (blocks of 8 at 16 lanes) -> squeeze-excite (a 4-channel conv, plain)
// -> mul -> + a second branch -> max_pool -> concat -> global pool -> dense.
Graph blockable_net() {
  Graph g;
  g.name = "blockable";
  NetBuilder b(g, 11);
  int x = g.add_input("x", {1, 3, 10, 10});
  int c = b.op("relu", {b.conv(x, 16, {3}, {1, 1}, {1, 1}, 1, true)});
  int d = b.op("clip", {
                           b.batch_norm(b.conv(c, 16, {3}, {2, 2}, {1, 1}, 16)),
                       });
  int e = b.conv(d, 24, {1}, {1, 1}, {0, 0}, 1, true);
  int s = b.op("global_avg_pool2d", {e});
  s = b.op("relu", {b.conv(s, 4, {1}, {1, 1}, {0, 0}, 1, true)});
  s = b.op("sigmoid", {b.conv(s, 24, {1}, {1, 1}, {0, 0}, 1, true)});
  int se = b.op("mul", {e, s});
  int br = b.op("add", {b.conv(d, 24, {3}, {1, 1}, {1, 1}), se});
  int p = b.op("max_pool2d", {br}, {{"kernel", I{2}}, {"stride", I{2}}});
  int q = b.op("avg_pool2d", {se}, {{"kernel", I{2}}, {"stride", I{2}}});
  int cat = b.op("concat", {p, q}, {{"axis", int64_t{1}}});
  int f = b.op("flatten", {b.op("global_avg_pool2d", {cat})}, {{"start_dim", int64_t{1}}, {"end_dim", int64_t{-1}}});
  g.add_output(b.dense(f, 5));
  g.add_output(br);
  return g;
}

TEST(Layout, ChannelBlocksAreTheVectorsOrTheirHalves) {
  EXPECT_EQ(channel_block(64, 16), 16);
  EXPECT_EQ(channel_block(24, 16), 8);
  EXPECT_EQ(channel_block(40, 16), 8);
  EXPECT_EQ(channel_block(20, 16), 0);
  EXPECT_EQ(channel_block(3, 16), 0);
  EXPECT_EQ(channel_block(24, 8), 8);
  EXPECT_EQ(channel_block(12, 8), 0);
  EXPECT_EQ(channel_block(64, 4), 0);  // blocks of fewer than 8 channels are not worth it
}

TEST(Layout, ConvolutionChainsRunBlockedAndComputeTheSameOutputs) {
  Graph g = blockable_net();
  NDArray x = NDArray::random(DType::f32(), {1, 3, 10, 10}, -1, 1, 4);
  Graph plain = optimize(g);
  std::vector<NDArray> ref = interpret_graph(plain, {x});
  for (int64_t lanes : {8, 16}) {
    SCOPED_TRACE("lanes " + std::to_string(lanes));
    Graph f = optimize(g, lanes);
    std::map<std::string, int> ops = f.op_counts();
    EXPECT_EQ(ops["conv2d_nchwc"], 5);  // all but the 4-channel one
    EXPECT_EQ(ops["conv2d"], 1);
    // The 4-channel conv's input and the two network outputs leave the layout; the
    // image enters it in one block (NHWC), the 4-channel conv's output in another.
    EXPECT_EQ(ops["from_nchwc"], 3);
    EXPECT_EQ(ops["to_nchwc"], 2);
    for (size_t i = 0; i < g.outputs().size(); ++i)
      EXPECT_EQ(f.value(f.outputs()[i]).shape, g.value(g.outputs()[i]).shape);
    expect_close(interpret_graph(f, {x}), ref, 1e-5);
    // Blocked convolutions keep their epilogues.
    Partition p = partition(f);
    int fused = 0;
    for (const auto& t : p.tasks) fused += t.label.rfind("conv2d_nchwc+add", 0) == 0;
    EXPECT_GE(fused, 3);
  }
  EXPECT_EQ(optimize(g, 0).op_counts().count("conv2d_nchwc"), 0u);
}

// A quantized model's convolutions run blocked as float32 ones do: uint8 activations
// padded by their zero point, int8 weights packed, the int32 sums' epilogue
// (correction, scale, requantization per tensor) and the residual's dequantization
// blocked; nothing converts between the two convolutions; the outputs are exactly the
// unplanned graph's.
// Quantized ResNet blocks as the importer makes a QDQ model's: two 3x3 convolutions
// (uint8 activations, int8 weights, int32 bias, the requantization per tensor) and a
// residual adding the dequantized block input to the dequantized result; each block
// after the first reads the previous one's sum, quantized.
Graph quantized_residual_blocks(int blocks) {
  Graph g;
  const int x = g.add_input("x", {1, 16, 6, 6});
  const auto scalar = [&](const std::string& name, DType t, double v) {
    NDArray a(t, {});
    if (t.is_float()) a.as<float>()[0] = static_cast<float>(v);
    else a.set_int(0, static_cast<int64_t>(v));
    return g.add_constant(name, a);
  };
  const int s = scalar("s", DType::f32(), 0.05), z = scalar("z", DType::i32(), 131);
  const auto quant = [&](int v) {
    return g.add_node("quantize_linear", {v, s, z},
                      {{"axis", int64_t{1}}, {"qmin", int64_t{0}}, {"qmax", int64_t{255}}});
  };
  const auto dequant = [&](int v) { return g.add_node("dequantize_linear", {v, s, z}, {{"axis", int64_t{1}}}); };
  int q = quant(x), sum = -1;
  for (int b = 0; b < blocks; ++b) {
    if (b > 0) q = quant(sum);
    int v = q;
    for (int k = 0; k < 2; ++k) {
      const std::string id = std::to_string(b) + "_" + std::to_string(k);
      const int w = g.add_constant("w" + id, NDArray::random(DType::i8(), {16, 16, 3, 3}, -128, 128, 3 + k + 2 * b));
      const int bias = g.add_constant("b" + id, NDArray::random(DType::i32(), {16, 1, 1}, -999, 999, 5));
      const int scale = g.add_constant("sc" + id, NDArray::random(DType::f32(), {16, 1, 1}, 1e-4, 2e-4, 6));
      const int c =
          g.add_node("conv2d", {v, w}, {{"padding", I{1, 1}}, {"pad_value", int64_t{131}}, {"stride", I{1, 1}}});
      const int f = g.add_node("cast", {g.add_node("add", {c, bias})}, {{"to", std::string("float32")}});
      v = quant(g.add_node("mul", {f, scale}));
    }
    sum = g.add_node("add", {dequant(v), dequant(q)});
  }
  g.add_output(sum);
  return g;
}

TEST(Layout, QuantizedConvolutionsRunBlocked) {
  const Graph g = quantized_residual_blocks(1);
  Graph f = plan_layouts(g, 16);
  std::map<std::string, int> ops = f.op_counts();
  int second = 0;
  EXPECT_EQ(ops["conv2d_nchwc"], 2);
  // The quantized input enters the layout once (the residual's dequantization may
  // convert it apart, as the plan visits nodes in a topological order of its own); the
  // second convolution reads the first's requantized output as it is.
  EXPECT_LE(ops["to_nchwc"], 2);
  EXPECT_EQ(ops["from_nchwc"], 1);  // the output
  for (const Node& nd : f.nodes())
    if (nd.op == "conv2d_nchwc") {
      EXPECT_EQ(f.value(nd.inputs[0]).dtype, DType::u8());
      EXPECT_EQ(f.value(nd.inputs[1]).dtype, DType::i8());
      EXPECT_EQ(nd.attrs.i("pad_value"), 131);
      const std::string& from = f.node(f.value(nd.inputs[0]).producer).op;
      EXPECT_TRUE(from == "to_nchwc" || from == "quantize_linear") << from;
      second += from == "quantize_linear";
    }
  EXPECT_EQ(second, 1);
  NDArray in = NDArray::random(DType::f32(), {1, 16, 6, 6}, -4, 4, 8);
  const std::vector<NDArray> want = interpret_graph(g, {in}), got = interpret_graph(f, {in});
  EXPECT_EQ(compare_arrays(got[0], want[0]).max_abs, 0.0);
}

// A residual's dequantization (a cheap elementwise group read once, by the addition in
// a convolution's epilogue) is computed in that epilogue: no kernel writes it in float32
// (but the first block's, which enters the blocked layout with it), the outputs stay
// exactly the graph's, and the fused tasks keep their 8-bit integer sketches.
TEST(Fusion, AResidualsDequantizationJoinsTheConvolutionThatAddsIt) {
  const Graph g = quantized_residual_blocks(3);
  const Graph f = plan_layouts(g, 16);
  Partition p = partition(f);
  int convolutions = 0, dequantizing = 0;
  for (const FusedGroup& fg : p.groups) {
    if (fg.view) continue;
    const NetworkTask& t = p.tasks[fg.task];
    int conv = 0, dequantize = 0;
    for (int n : fg.nodes) {
      conv += f.node(n).op == "conv2d_nchwc";
      dequantize += f.node(n).op == "dequantize_linear";
    }
    if (conv == 0) {
      dequantizing += dequantize > 0;
      continue;
    }
    ++convolutions;
    int quads = 0;
    for (const sched::Sketch& s : sched::cpu_sketches(t.graph, false, true)) quads += s.int8_quad >= 0;
    EXPECT_GT(quads, 0) << t.label;
  }
  EXPECT_EQ(convolutions, 6);
  EXPECT_LE(dequantizing, 1);
  int total_nodes = 0;
  for (const auto& fg : p.groups) total_nodes += static_cast<int>(fg.nodes.size());
  EXPECT_EQ(total_nodes, static_cast<int>(f.nodes().size()));
  NDArray in = NDArray::random(DType::f32(), {1, 16, 6, 6}, -4, 4, 8);
  EXPECT_EQ(compare_arrays(interpret_graph(f, {in})[0], interpret_graph(g, {in})[0]).max_abs, 0.0);
}

// A quantization pair read by arithmetic (a convolution's output quantized and
// dequantized before the residual add) becomes one fake_quantize, the same values in
// float32; the fused convolution tasks keep their 8-bit integer sketches. Pairs read
// by anything else, or with other parameters, stay.
TEST(Passes, AQuantizationPairReadByArithmeticRoundsInFloat) {
  const Graph g = quantized_residual_blocks(2);
  const Graph f = eliminate_dead_code(fold_quantization(g));
  std::map<std::string, int> before = g.op_counts(), after = f.op_counts();
  EXPECT_EQ(after["fake_quantize"], 2);  // each block's second convolution, before the add
  EXPECT_EQ(after["quantize_linear"], before["quantize_linear"] - 2);
  EXPECT_EQ(after["dequantize_linear"], before["dequantize_linear"] - 2);
  NDArray in = NDArray::random(DType::f32(), {1, 16, 6, 6}, -4, 4, 8);
  in.as<float>()[3] = NAN;
  in.as<float>()[5] = INFINITY;
  EXPECT_EQ(compare_arrays(interpret_graph(f, {in})[0], interpret_graph(g, {in})[0]).max_abs, 0.0);
  const Graph planned = plan_layouts(f, 16);
  Partition p = partition(planned);
  int convolutions = 0;
  for (const FusedGroup& fg : p.groups) {
    if (fg.view || p.tasks[fg.task].label.find("conv2d_nchwc") == std::string::npos) continue;
    ++convolutions;
    int quads = 0;
    for (const sched::Sketch& s : sched::cpu_sketches(p.tasks[fg.task].graph, false, true)) quads += s.int8_quad >= 0;
    EXPECT_GT(quads, 0) << p.tasks[fg.task].label;
  }
  EXPECT_EQ(convolutions, 4);

  // Every 8-bit and 16-bit range, NaN, infinities and saturation on both sides: the
  // pair and fake_quantize agree bit for bit.
  for (const std::pair<int64_t, int64_t>& range :
       std::vector<std::pair<int64_t, int64_t>>{{0, 255}, {-128, 127}, {-32768, 32767}}) {
    Graph h;
    const int x = h.add_input("x", {64});
    NDArray sa(DType::f32(), {}), za(DType::i32(), {});
    sa.as<float>()[0] = 0.05f;
    za.set_int(0, range.first < 0 ? -7 : 131);
    const int s = h.add_constant("s", sa), z = h.add_constant("z", za);
    const int q =
        h.add_node("quantize_linear", {x, s, z}, {{"axis", int64_t{1}}, {"qmin", range.first}, {"qmax", range.second}});
    const int d = h.add_node("dequantize_linear", {q, s, z}, {{"axis", int64_t{1}}});
    h.add_output(h.add_node("add", {d, x}));
    const Graph hf = eliminate_dead_code(fold_quantization(h));
    EXPECT_EQ(hf.op_counts()["fake_quantize"], 1);
    NDArray xs = NDArray::random(DType::f32(), {64}, -2000, 2000, 9);
    const float special[] = {NAN, INFINITY, -INFINITY, 1e30f, -1e30f, 0.025f, -0.025f, 0.075f, 6.4f, -6.4f};
    for (int k = 0; k < 10; ++k) xs.as<float>()[k] = special[k];
    const NDArray want = interpret_graph(h, {xs})[0], got = interpret_graph(hf, {xs})[0];
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.nbytes()), 0) << range.first << ".." << range.second;
  }

  // Read by a convolution (its 8-bit input), or with another zero point: no rewrite.
  Graph h;
  const int x = h.add_input("x", {1, 4, 5, 5});
  NDArray sa(DType::f32(), {}), za(DType::i32(), {}), zb(DType::i32(), {});
  sa.as<float>()[0] = 0.05f;
  za.set_int(0, 3);
  zb.set_int(0, 4);
  const int s = h.add_constant("s", sa), z = h.add_constant("z", za), z2 = h.add_constant("z2", zb);
  const auto quant = [&](int v) {
    return h.add_node("quantize_linear", {v, s, z},
                      {{"axis", int64_t{1}}, {"qmin", int64_t{0}}, {"qmax", int64_t{255}}});
  };
  const int w = h.add_constant("w", NDArray::random(DType::f32(), {4, 4, 1, 1}, -1, 1, 2));
  const int conv = h.add_node("conv2d", {h.add_node("dequantize_linear", {quant(x), s, z}, {{"axis", int64_t{1}}}), w},
                              {{"padding", I{0, 0}}, {"stride", I{1, 1}}});
  const int other = h.add_node("dequantize_linear", {quant(conv), s, z2}, {{"axis", int64_t{1}}});
  h.add_output(h.add_node("relu", {other}));
  EXPECT_EQ(eliminate_dead_code(fold_quantization(h)).op_counts().count("fake_quantize"), 0u);
}

// Max pooling between a dequantization and a quantization with the same parameters
// (one positive scale, the 8-bit type's whole range) pools the 8-bit values themselves,
// exactly; a negative scale, a narrower range or per-channel scales keep the float pooling.
TEST(Passes, MaxPoolingOfAQuantizedValueRunsOnItsIntegers) {
  struct Case {
    DType type;
    float scale;
    int64_t qmin, qmax;
    int64_t channels_of_scale;
    bool folds;
  };
  const std::vector<Case> cases = {{DType::u8(), 0.05f, 0, 255, 0, true},
                                   {DType::i8(), 0.05f, -128, 127, 0, true},
                                   {DType::u8(), -0.05f, 0, 255, 0, false},
                                   {DType::u8(), 0.05f, 0, 127, 0, false},
                                   {DType::u8(), 0.05f, 0, 255, 4, false}};
  for (const Case& c : cases) {
    Graph g;
    const int x = g.add_input("x", {1, 4, 7, 7});
    NDArray sa(DType::f32(), c.channels_of_scale ? std::vector<int64_t>{c.channels_of_scale} : std::vector<int64_t>{});
    NDArray za(DType::i32(), sa.shape());
    for (int64_t k = 0; k < sa.numel(); ++k) {
      sa.as<float>()[k] = c.scale;
      za.set_int(k, c.type.is_uint() ? 131 : -3);
    }
    const int s = g.add_constant("s", sa), z = g.add_constant("z", za);
    const std::map<std::string, ops::AttrValue> qa = {{"axis", int64_t{1}}, {"qmin", c.qmin}, {"qmax", c.qmax}};
    const int q = g.add_node("quantize_linear", {x, s, z}, qa);
    const int pool = g.add_node("max_pool2d", {g.add_node("dequantize_linear", {q, s, z}, {{"axis", int64_t{1}}})},
                                {{"kernel", I{3}}, {"stride", I{2}}, {"padding", I{1}}, {"ceil_mode", int64_t{1}}});
    g.add_output(g.add_node("dequantize_linear", {g.add_node("quantize_linear", {pool, s, z}, qa), s, z},
                            {{"axis", int64_t{1}}}));
    const Graph f = eliminate_dead_code(fold_quantization(g));
    int byte_pools = 0;
    for (const Node& nd : f.nodes()) byte_pools += nd.op == "max_pool2d" && f.value(nd.inputs[0]).dtype.is_byte();
    EXPECT_EQ(byte_pools, c.folds ? 1 : 0) << c.type.str() << " scale " << c.scale << " " << c.qmin << ".." << c.qmax;
    EXPECT_EQ(f.op_counts()["max_pool2d"], 1);
    const NDArray in = NDArray::random(DType::f32(), {1, 4, 7, 7}, -9, 9, 4);
    EXPECT_EQ(compare_arrays(interpret_graph(f, {in})[0], interpret_graph(g, {in})[0]).max_abs, 0.0);
    // Blocked, as the network runs it.
    const Graph planned = plan_layouts(f, 16);
    EXPECT_EQ(compare_arrays(interpret_graph(planned, {in})[0], interpret_graph(g, {in})[0]).max_abs, 0.0);
  }
}

TEST(Layout, ConvolutionsWithoutBlocksStayNchw) {
  Graph g;
  NetBuilder b(g, 2);
  int x = g.add_input("x", {1, 6, 8, 8});
  int c = b.conv(x, 12, {3}, {1, 1}, {1, 1});     // 12 channels: no block
  int d = b.conv(c, 16, {3}, {1, 1}, {1, 1}, 2);  // two groups: not planned
  g.add_output(b.op("relu", {d}));
  Graph f = plan_layouts(g, 16);
  EXPECT_EQ(f.op_counts().count("conv2d_nchwc"), 0u);
  EXPECT_EQ(f.op_counts().count("to_nchwc"), 0u);
  EXPECT_EQ(f.nodes().size(), g.nodes().size());
}

// Blocks of half a vector at any width: 24 channels are blocked by 8 at 16 lanes at 7
// and at 56 wide, so both convolutions run blocked and nothing converts between them
// (no 24-channel value in one block of 24, NHWC).
TEST(Layout, HalfVectorBlocksAtEveryWidth) {
  for (int64_t width : {7, 56}) {
    Graph g;
    NetBuilder b(g, 3);
    int x = g.add_input("x", {1, 32, 4, width});
    int y = b.op("relu", {b.conv(x, 24, {1}, {1, 1}, {0, 0})});
    g.add_output(b.conv(y, 32, {1}, {1, 1}, {0, 0}));
    Graph f = plan_layouts(g, 16);
    SCOPED_TRACE("width " + std::to_string(width));
    EXPECT_EQ(f.op_counts()["conv2d_nchwc"], 2);
    EXPECT_EQ(f.op_counts()["to_nchwc"], 1);  // the input
    for (const Value& v : f.values())
      if (v.shape.size() == 5 && v.shape[1] * v.shape[4] == 24) EXPECT_EQ(v.shape[4], 8) << v.name;
    NDArray in = NDArray::random(DType::f32(), {1, 32, 4, width}, -1, 1, 8);
    expect_close(interpret_graph(f, {in}), interpret_graph(g, {in}), 1e-5);
  }
}

// A strided transposed convolution into channels that fill no vector (DCGAN's last
// layer) computes its width phase-major and transposes it back; one into channels that
// fill vectors, or of stride 1 along the width, stays as it is. The outputs are the same.
TEST(Layout, NarrowTransposedConvolutionsComputeTheirWidthByPhase) {
  struct Case {
    int64_t out_channels, stride, kernel, padding;
    bool phased;
  };
  for (const Case& c :
       {Case{3, 2, 4, 1, true}, Case{3, 3, 5, 1, true}, Case{16, 2, 4, 1, false}, Case{3, 1, 3, 1, false}}) {
    SCOPED_TRACE("out_channels " + std::to_string(c.out_channels) + " stride " + std::to_string(c.stride));
    Graph g;
    NetBuilder b(g, 4);
    int x = g.add_input("x", {1, 6, 5, 8});
    int w = b.weight("w", {6, c.out_channels, c.kernel, c.kernel}, 0.5);
    int y = b.op("conv2d_transpose", {x, w},
                 {{"stride", std::vector<int64_t>{c.stride}},
                  {"padding", std::vector<int64_t>{c.padding}},
                  {"output_padding", std::vector<int64_t>{0}}});
    g.add_output(b.op("tanh", {y}));
    Graph f = plan_layouts(g, 8);
    std::map<std::string, int> ops = f.op_counts();
    EXPECT_EQ(ops["transpose"], c.phased ? 1 : 0);
    bool phased = false;
    for (const Node& nd : f.nodes())
      if (nd.op == "conv2d_transpose") phased = nd.attrs.i("width_phases") == 1;
    EXPECT_EQ(phased, c.phased);
    EXPECT_EQ(f.value(f.outputs()[0]).shape, g.value(g.outputs()[0]).shape);
    NDArray in = NDArray::random(DType::f32(), {1, 6, 5, 8}, -1, 1, 9);
    expect_close(interpret_graph(f, {in}), interpret_graph(g, {in}), 1e-5);
  }
}

// A transposed convolution of a 1x1 map (a GAN generator's first layer) becomes a
// product of the input's channels and the weight viewed [C, O*KH*KW], its bias and
// activation computed on the product's rows (one task), with the same outputs; one of
// a wider map, or padded, or of two groups, stays as it is.
TEST(Passes, ATransposedConvolutionOfOnePixelIsAProduct) {
  struct Case {
    int64_t n, size, padding, groups;
    bool product;
  };
  for (const Case& c : {Case{1, 1, 0, 1, true}, Case{2, 1, 0, 1, true}, Case{1, 2, 0, 1, false},
                        Case{1, 1, 1, 1, false}, Case{1, 1, 0, 2, false}}) {
    SCOPED_TRACE("batch " + std::to_string(c.n) + " size " + std::to_string(c.size) + " padding " +
                 std::to_string(c.padding) + " groups " + std::to_string(c.groups));
    Graph g;
    NetBuilder b(g, 6);
    int x = g.add_input("x", {c.n, 8, c.size, c.size});
    int w = b.weight("w", {8, 12 / c.groups, 4, 4}, 0.5);
    int y = b.op("conv2d_transpose", {x, w},
                 {{"stride", std::vector<int64_t>{2}},
                  {"padding", std::vector<int64_t>{c.padding}},
                  {"output_padding", std::vector<int64_t>{0}},
                  {"groups", c.groups}});
    g.add_output(b.op("relu", {b.batch_norm(y)}));
    Graph f = optimize(g);
    std::map<std::string, int> ops = f.op_counts();
    EXPECT_EQ(ops["matmul"], c.product ? 1 : 0);
    EXPECT_EQ(ops["conv2d_transpose"], c.product ? 0 : 1);
    if (c.product) {  // the bias and the ReLU run on the product's rows, in its epilogue
      Partition p = partition(f);
      ASSERT_EQ(p.tasks.size(), 1u);
      EXPECT_EQ(p.tasks[0].label.rfind("matmul+add+relu [", 0), 0u) << p.tasks[0].label;
    }
    NDArray in = NDArray::random(DType::f32(), {c.n, 8, c.size, c.size}, -1, 1, 5);
    expect_close(interpret_graph(f, {in}), interpret_graph(g, {in}), 1e-5);
  }
}

// 3x3 stride-1 convolutions of a blocked network, padded or not, on maps that are not
// a multiple of the tile, computed by F(2x2, 3x3) and F(4x4, 3x3): three nodes each
// (the weight transformed at planning), the outputs of the direct convolutions; the
// strided, 1x1 and grouped ones stay direct; the input transform is a task of its own
// and the output transform keeps the epilogue.
TEST(Layout, WinogradConvolutionsComputeTheSameOutputs) {
  Graph g;
  NetBuilder b(g, 5);
  int x = g.add_input("x", {1, 16, 9, 7});
  int c1 = b.op("relu", {b.conv(x, 16, {3}, {1, 1}, {1, 1}, 1, true)});
  int c2 = b.conv(c1, 32, {3}, {1, 1}, {0, 0});
  int c3 = b.conv(c1, 16, {3}, {2, 2}, {1, 1});
  int c4 = b.conv(c1, 16, {1}, {1, 1}, {0, 0});
  int c5 = b.conv(c1, 16, {3}, {1, 1}, {1, 1}, 2);
  for (int y : {c2, c3, c4, c5}) g.add_output(y);
  NDArray in = NDArray::random(DType::f32(), {1, 16, 9, 7}, -1, 1, 10);
  std::vector<NDArray> ref = interpret_graph(g, {in});
  for (const char* m : {"2", "4"}) {
    SCOPED_TRACE(std::string("m ") + m);
    basin::testing::ScopedEnv setting("BASIN_WINOGRAD", m);
    Graph f = plan_layouts(g, 8);
    std::map<std::string, int> ops = f.op_counts();
    EXPECT_EQ(ops["winograd_input"], 2);
    EXPECT_EQ(ops["winograd_gemm"], 2);
    EXPECT_EQ(ops["winograd_output"], 2);
    EXPECT_EQ(ops["conv2d_nchwc"], 2);  // the strided and the 1x1 one
    for (const Node& nd : f.nodes())
      if (nd.op == "winograd_input") EXPECT_EQ(nd.attrs.i("m"), std::stoi(m));
    expect_close(interpret_graph(f, {in}), ref, std::string(m) == "2" ? 1e-5 : 1e-4);
    bool own_task = false, epilogue = false;
    for (const auto& t : partition(f).tasks) {
      own_task |= t.label.rfind("winograd_input [", 0) == 0;
      epilogue |= t.label.rfind("winograd_output+add+relu", 0) == 0;
    }
    EXPECT_TRUE(own_task);
    EXPECT_TRUE(epilogue);
  }
  basin::testing::ScopedEnv off("BASIN_WINOGRAD", "off");
  EXPECT_EQ(plan_layouts(g, 8).op_counts().count("winograd_gemm"), 0u);
}

// At bf16 the values between kernels are stored in bfloat16: each group's output read by
// another group gets a cast in that group, the network's outputs (and what they view)
// stay float32, Winograd's transformed tiles too; the partition keeps its groups, and
// the graph computes the float32 one's outputs within bfloat16's rounding.
TEST(Passes, ActivationsBetweenKernelsAreStoredInBfloat16) {
  for (const bool blocked : {false, true}) {
    SCOPED_TRACE(blocked ? "NCHWc" : "NCHW");
    basin::testing::ScopedEnv winograd("BASIN_WINOGRAD", "2");
    const Graph f = blocked ? plan_layouts(blockable_net(), 8) : small_net();
    const Graph st = store_activations_bf16(f);
    const Partition pf = partition(f), ps = partition(st);
    ASSERT_EQ(ps.groups.size(), pf.groups.size());
    ASSERT_EQ(ps.tasks.size(), pf.tasks.size());
    std::set<int> outputs(st.outputs().begin(), st.outputs().end());
    int stored = 0;
    std::map<std::string, const FusedGroup*> by_first;  // f's groups by their first node's name
    for (const FusedGroup& a : pf.groups) by_first[f.node(a.nodes[0]).name] = &a;
    for (const FusedGroup& b : ps.groups) {
      ASSERT_EQ(by_first.count(st.node(b.nodes[0]).name), 1u) << st.node(b.nodes[0]).name;
      const FusedGroup& a = *by_first[st.node(b.nodes[0]).name];
      const Value& out = st.value(b.output);
      const bool read = !st.consumers(b.output).empty();
      bool winograd = false;
      for (int n : a.nodes) winograd |= f.node(n).op == "winograd_input" || f.node(n).op == "winograd_gemm";
      if (b.view) {
        EXPECT_EQ(out.dtype, st.value(b.inputs[0]).dtype) << "a view keeps its input's type";
        continue;
      }
      if (outputs.count(b.output) || !read || winograd) {
        EXPECT_EQ(out.dtype, DType::f32()) << out.name;
        EXPECT_EQ(b.nodes.size(), a.nodes.size());
        continue;
      }
      EXPECT_EQ(out.dtype, DType::bf16()) << out.name;
      ASSERT_EQ(b.nodes.size(), a.nodes.size() + 1);
      EXPECT_EQ(st.node(b.nodes.back()).op, "cast");
      ++stored;
      // Its readers take it as float32.
      for (int c : st.consumers(b.output))
        if (!is_view_op(st.node(c).op)) EXPECT_EQ(st.value(st.node(c).output).dtype.is_bf16(), false);
    }
    EXPECT_GE(stored, blocked ? 6 : 3);
    for (int v : st.outputs()) EXPECT_EQ(st.value(v).dtype, DType::f32());
    if (blocked) {
      std::map<std::string, int> ops = st.op_counts();
      EXPECT_GE(ops["winograd_gemm"], 1);
    }
    std::vector<NDArray> in;
    for (int v : f.inputs()) in.push_back(NDArray::random(DType::f32(), f.value(v).shape, -1, 1, 3));
    const std::vector<NDArray> ref = interpret_graph(f, in), got = interpret_graph(st, in);
    expect_close(got, ref, 2e-2);
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, compare_arrays(got[i], ref[i]).max_rel);
    EXPECT_GT(worst, 0.0) << "bfloat16 storage rounded nothing";
  }
}

// What stays float32 at bf16 besides the outputs: a normalization's input and output
// (a transformer's residual stream), and a matrix product's right operand; a value
// read through a view counts as read by the view's readers.
TEST(Passes, TheResidualStreamAndRightOperandsStayFloat32) {
  Graph g;
  NetBuilder b(g, 3);
  int x = g.add_input("x", {16, 32});
  int h = b.op("gelu", {b.dense(x, 32)});                                   // read by a dense: stored
  int r = b.op("add", {b.dense(h, 32), x});                                 // read by the norm: kept
  int n = b.layer_norm(r);                                                  // written by the norm: kept
  int q = b.op("reshape", {b.dense(n, 32)}, {{"new_shape", I{2, 8, 32}}});  // stored
  int k = b.op("reshape", {b.dense(n, 32)}, {{"new_shape", I{2, 32, 8}}});  // a right operand: kept
  g.add_output(b.op("batch_matmul", {q, k}));
  const Graph st = store_activations_bf16(g);
  std::map<std::string, DType> type;
  for (const FusedGroup& fg : partition(st).groups) {
    if (fg.view) continue;
    std::string ops;
    for (int m : fg.nodes) ops += (ops.empty() ? "" : "+") + st.node(m).op;
    type[ops] = st.value(fg.output).dtype;
  }
  ASSERT_EQ(type.count("dense+add+gelu+cast"), 1u);
  EXPECT_EQ(type["dense+add+gelu+cast"], DType::bf16());
  EXPECT_EQ(type["dense+add+add"], DType::f32());
  EXPECT_EQ(type["layer_norm"], DType::f32());
  EXPECT_EQ(type["dense+add+cast"], DType::bf16());  // q
  EXPECT_EQ(type["dense+add"], DType::f32());        // k
  EXPECT_EQ(type["batch_matmul"], DType::f32());     // the output
}

// On AMX hosts (convolutions on tiles, blocks of 32) a stored value that a 3x3
// convolution alone reads is stored with its padding as a zero border: its producer's
// kernel ends in pad+cast, the reader's padding is 0, and the graph computes the same
// outputs. Values read by others (the residual), maps under 28x28 and the network's
// outputs keep their shape.
TEST(Passes, ValuesReadByOnePaddedConvolutionAreStoredWithTheirBorder) {
  for (const int64_t side : {28, 14}) {
    SCOPED_TRACE(side);
    Graph g;
    NetBuilder b(g, 9);
    const int x = g.add_input("x", {1, 64, side, side});
    const int h = b.op("relu", {b.conv(x, 64, {3}, {1, 1}, {1, 1}, 1, true)});  // read by the 3x3 alone
    const int y = b.op("add", {b.conv(h, 64, {3}, {1, 1}, {1, 1}, 1, true), x});
    g.add_output(b.op("relu", {y}));
    const Graph stored = store_activations_bf16(plan_layouts(g, 16, /*tiles=*/true));
    const Graph bordered = store_borders(stored);
    std::map<std::string, int> ops = bordered.op_counts();
    if (side < 28) {
      EXPECT_EQ(ops.count("pad"), 0u);
      continue;
    }
    EXPECT_EQ(ops["pad"], 1);
    int padded_readers = 0, border_groups = 0;
    for (const Node& nd : bordered.nodes())
      if (nd.op == "conv2d_nchwc") padded_readers += nd.attrs.ints("padding") != std::vector<int64_t>{0, 0};
    EXPECT_EQ(padded_readers, 1);  // the first: its input is also the residual
    for (const FusedGroup& fg : partition(bordered).groups) {
      std::string names;
      for (int n : fg.nodes) names += (names.empty() ? "" : "+") + bordered.node(n).op;
      if (names.find("pad") == std::string::npos) continue;
      ++border_groups;
      EXPECT_EQ(names, "conv2d_nchwc+add+relu+pad+cast");
      EXPECT_EQ(bordered.value(fg.output).shape, (std::vector<int64_t>{1, 2, side + 2, side + 2, 32}));
      EXPECT_EQ(bordered.value(fg.output).dtype, DType::bf16());
    }
    EXPECT_EQ(border_groups, 1);
    EXPECT_EQ(partition(bordered).tasks.size(), partition(stored).tasks.size());
    const std::vector<NDArray> in = {NDArray::random(DType::f32(), {1, 64, side, side}, -1, 1, 4)};
    expect_close(interpret_graph(bordered, in), interpret_graph(stored, in), 1e-5);
  }
}

TEST(Layout, WinogradsAutoRuleKeepsNarrowConvolutionsDirect) {
  EXPECT_EQ(winograd_auto(16, 16, 56, 56), 0);
  EXPECT_GT(winograd_auto(64, 64, 56, 56), 0);
  EXPECT_GT(winograd_auto(512, 512, 7, 7), 0);
  basin::testing::ScopedEnv bad("BASIN_WINOGRAD", "3");
  EXPECT_EQ(winograd_setting(), -1);
  EXPECT_THROW(check_settings(), Error);
}

// Convolutions that run on matrix tiles (bf16 on an AMX host) stay direct under `auto`;
// an explicit BASIN_WINOGRAD still applies.
TEST(Layout, TiledConvolutionsStayDirect) {
  Graph g;
  NetBuilder b(g, 5);
  int x = g.add_input("x", {1, 64, 14, 14});
  g.add_output(b.conv(x, 64, {3}, {1, 1}, {1, 1}));
  basin::testing::ScopedEnv setting("BASIN_WINOGRAD", "auto");
  EXPECT_EQ(plan_layouts(g, 16).op_counts()["winograd_gemm"], 1);
  std::map<std::string, int> tiled = plan_layouts(g, 16, /*tiles=*/true).op_counts();
  EXPECT_EQ(tiled.count("winograd_gemm"), 0u);
  EXPECT_EQ(tiled["conv2d_nchwc"], 1);
  basin::testing::ScopedEnv forced("BASIN_WINOGRAD", "2");
  EXPECT_EQ(plan_layouts(g, 16, true).op_counts()["winograd_gemm"], 1);
}

// On tiles, values whose channels 32 divide are blocked by 32 (a bfloat16 tile row's
// values of k, read in place by a 1x1 convolution); others keep the vector's blocks.
TEST(Layout, TiledConvolutionsBlockBy32Channels) {
  Graph g;
  NetBuilder b(g, 5);
  int x = g.add_input("x", {1, 64, 14, 14});
  int y = b.conv(x, 96, {1}, {1, 1}, {0, 0});        // 96 channels: blocks of 32
  int z = b.conv(y, 48, {1}, {1, 1}, {0, 0});        // 48: of 16
  g.add_output(b.conv(z, 24, {1}, {1, 1}, {0, 0}));  // 24: of 8
  auto blocks = [](const Graph& planned) {
    std::vector<int64_t> out;
    for (const Node& nd : planned.nodes())
      if (nd.op == "conv2d_nchwc") out.push_back(planned.value(nd.output).shape.back());
    return out;
  };
  EXPECT_EQ(blocks(plan_layouts(g, 16, /*tiles=*/true)), (std::vector<int64_t>{32, 16, 8}));
  EXPECT_EQ(blocks(plan_layouts(g, 16)), (std::vector<int64_t>{16, 16, 8}));
}

TEST(Layout, AnUnknownLayoutSettingIsAnError) {
  const char* old = std::getenv("BASIN_LAYOUT");
  std::string saved = old ? old : "";
  setenv("BASIN_LAYOUT", "nhwc", 1);
  EXPECT_THROW(host_layout_lanes(), Error);
  setenv("BASIN_LAYOUT", "nchw", 1);
  EXPECT_EQ(host_layout_lanes(), 0);
  setenv("BASIN_LAYOUT", "nchwc", 1);
  EXPECT_GE(host_layout_lanes(), 4);
  if (old) setenv("BASIN_LAYOUT", saved.c_str(), 1);
  else unsetenv("BASIN_LAYOUT");
}

TEST(Subgraph, TextRoundTripsAndRebuildsTheTask) {
  Partition p = partition(optimize(small_net()));
  for (const auto& t : p.tasks) {
    std::string text = t.graph.attrs.s("graph");
    ops::SubgraphSpec s = ops::parse_subgraph(text);
    EXPECT_EQ(ops::subgraph_to_string(s), text);
    ops::OpGraph again = ops::build_subgraph(s);
    EXPECT_EQ(again.outputs.at(0).shape(), t.graph.outputs.at(0).shape());
  }
  EXPECT_THROW(ops::parse_subgraph("x0:f32[1,2"), ParseError);
  EXPECT_THROW(ops::parse_subgraph("x0:f32[2,3]@-1:1;t0=nope(x0)"), Error);
  EXPECT_THROW(ops::parse_subgraph("x0:f32[2,3]@-1:1;t0=relu(x9)"), Error);
}

TEST(Zoo, EveryNetworkBuildsDeterministicallyAndPartitions) {
  ASSERT_EQ(zoo_networks().size(), 9u);
  for (const auto& z : zoo_networks()) {
    SCOPED_TRACE(z.name);
    Graph g = optimize(zoo_network(z.name));
    EXPECT_FALSE(g.outputs().empty());
    Partition p = partition(g);
    EXPECT_GT(p.tasks.size(), 0u);
    int groups = 0;
    for (const auto& t : p.tasks) groups += t.weight;
    int kernels = 0;
    for (const auto& fg : p.groups) kernels += !fg.view;
    EXPECT_EQ(groups, kernels);
  }
  // The same weights on every build.
  Graph a = zoo_network("resnet18"), b = zoo_network("resnet18");
  ASSERT_EQ(a.values().size(), b.values().size());
  for (size_t v = 0; v < a.values().size(); ++v)
    if (a.values()[v].constant) {
      ASSERT_EQ(a.values()[v].data.nbytes(), b.values()[v].data.nbytes());
      EXPECT_EQ(0, std::memcmp(a.values()[v].data.data(), b.values()[v].data.data(), a.values()[v].data.nbytes()));
    }
}

TEST(Zoo, ResNet18HasItsTwelveConvolutionShapes) {
  Partition p = partition(optimize(zoo_network("resnet18")));
  int convs = 0;
  for (const auto& t : p.tasks) convs += t.label.rfind("conv2d", 0) == 0 ? t.weight : 0;
  EXPECT_EQ(convs, 20);  // 17 3x3/7x7 convolutions and 3 downsampling 1x1s
}

// Regression: a bias broadcast over the batch axis read the convolution's output at
// index 0 instead of the batch index, so fused conv+bias tasks missed the anchor
// sketches and were tuned on the generic rule (7x slower in resnet18).
TEST(Zoo, EveryAnchorTaskOfTheCnnsGetsTheTilingSketches) {
  for (const char* net : {"resnet18", "mobilenet_v2", "bert_base"}) {
    Partition p = partition(optimize(zoo_network(net)));
    for (const auto& t : p.tasks) {
      bool anchor =
          t.label.rfind("conv", 0) == 0 || t.label.rfind("dense", 0) == 0 || t.label.rfind("batch_matmul", 0) == 0;
      if (!anchor) continue;
      EXPECT_EQ(sched::cpu_sketches(t.graph).at(0).rule, sched::SketchRule::Anchor) << net << ": " << t.label;
    }
  }
}

// The cuda target compiles whole networks: every task of every zoo network has a GPU
// sketch, and anchors the tiling one.
TEST(Zoo, EveryTaskOfTheZooHasAGpuSketch) {
  for (const auto& z : zoo_networks()) {
    Partition p = partition(optimize(zoo_network(z.name)));
    for (const auto& t : p.tasks) {
      std::vector<sched::Sketch> gpu = sched::gpu_sketches(t.graph);
      EXPECT_FALSE(gpu.empty()) << z.name << ": " << t.label;
      if (!gpu.empty() && sched::cpu_sketches(t.graph).at(0).rule == sched::SketchRule::Anchor) {
        EXPECT_EQ(gpu[0].rule, sched::SketchRule::GpuTile) << z.name << ": " << t.label;
      }
    }
  }
}

TEST(Zoo, UnknownNamesListTheNetworks) {
  try {
    zoo_network("resnet1000");
    FAIL() << "no error";
  } catch (const NotFoundError& e) {
    EXPECT_NE(std::string(e.what()).find("mobilenet_v2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_model("zoo:nope"), NotFoundError);
  EXPECT_THROW(load_model("/no/such/model.onnx"), NotFoundError);
}

}  // namespace
}  // namespace basin::graph

namespace basin::graph {
namespace {

// The ladder of bucket extents: powers of two, and from 16 on 3 * 2^k, inside the range.
TEST(ShapeRange, BucketExtentsAreTwoPerOctaveFromSixteen) {
  EXPECT_EQ(bucket_extents(1, 512),
            (std::vector<int64_t>{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512}));
  EXPECT_EQ(bucket_extents(5, 40), (std::vector<int64_t>{8, 16, 24, 32, 40}));
  EXPECT_EQ(bucket_extents(7, 7), (std::vector<int64_t>{7}));
  EXPECT_THROW(bucket_extents(0, 8), GraphError);
  EXPECT_THROW(bucket_extents(9, 8), GraphError);
}

// Padding puts an array in the leading block of a larger one (zeros elsewhere); cutting
// takes that block back; the mask is 0 on real positions and -inf on padded ones.
TEST(ShapeRange, PaddingAndCuttingAreInverse) {
  NDArray a = NDArray::random(DType::f32(), {2, 3, 5}, -1, 1, 3);
  NDArray p = pad_array(a, {2, 7, 6});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 7; ++j)
      for (int64_t k = 0; k < 6; ++k) {
        const double want = j < 3 && k < 5 ? a.get((i * 3 + j) * 5 + k) : 0.0;
        EXPECT_EQ(p.get((i * 7 + j) * 6 + k), want) << i << " " << j << " " << k;
      }
  NDArray c = cut_array(p, {2, 3, 5});
  EXPECT_EQ(std::memcmp(c.data(), a.data(), a.nbytes()), 0);
  NDArray ids = NDArray::random(DType::i64(), {1, 4}, 0, 9, 1);
  EXPECT_EQ(cut_array(pad_array(ids, {1, 9}), {1, 4}).get_int(3), ids.get_int(3));
  EXPECT_THROW(pad_array(a, {2, 2, 5}), InternalError);
  NDArray m = padding_mask(5, 3);
  EXPECT_EQ(m.get(2), 0.0);
  EXPECT_TRUE(std::isinf(m.get(3)) && m.get(3) < 0);
}

// An attention graph at sequence length L (input [L, 8]; softmax over the keys).
Graph attention_at(int64_t L, bool flatten_output = false) {
  Graph g;
  NetBuilder b(g, 3);
  int x = g.add_input("x", {L, 8});
  int q = b.dense(x, 8), k = b.op("transpose", {b.dense(x, 8)}, {{"perm", std::vector<int64_t>{1, 0}}});
  int p = b.op("softmax", {b.op("matmul", {q, k})}, {{"axis", int64_t{-1}}});
  int y = b.op("matmul", {p, b.dense(x, 8)});
  if (flatten_output) y = b.op("reshape", {y}, {{"new_shape", std::vector<int64_t>{L * 8}}});
  g.add_output(y);
  return g;
}

// The axes that carry the range are found by importing the model at two extents; the
// softmax over the keys gets the padding mask; each bucket's weight is the extents it
// serves. An output that flattens the range with another axis, or a graph whose
// operators change with the extent, is refused.
TEST(ShapeRange, AxesMasksAndWeightsOfABucketedModel) {
  ConstantPool pool;
  RangedModel rm = ranged_model([](const std::map<std::string, int64_t>& at) { return attention_at(at.at("n")); },
                                {{"n", 3, 20}}, pool);
  EXPECT_EQ(rm.input_axes, (std::vector<std::vector<std::string>>{{"n", ""}}));
  EXPECT_EQ(rm.output_axes, (std::vector<std::vector<std::string>>{{"n", ""}}));
  EXPECT_EQ(rm.masks, std::vector<std::string>{"n"});
  ASSERT_EQ(rm.buckets.size(), 4u);  // 4 8 16 20
  std::vector<int64_t> weights;
  for (const ShapeBucket& b : rm.buckets) {
    weights.push_back(b.weight);
    EXPECT_EQ(b.graph.value(b.graph.inputs().back()).name, padding_mask_input("n"));
    EXPECT_EQ(b.graph.value(b.graph.inputs().back()).shape, std::vector<int64_t>{b.at.at("n")});
  }
  // The values served, each by 20 / the bucket's extent: 4 serves 3 and 4 (2 x 5), 8
  // serves 5..8 (4 x 2.5), 16 serves 9..16 (8 x 1.25), 20 serves 17..20 (4 x 1).
  EXPECT_EQ(weights, (std::vector<int64_t>{10, 10, 10, 4}));
  // The weights are one copy across the buckets.
  auto first_weight = [](const Graph& g) {
    for (const Value& v : g.values())
      if (v.constant && v.data.nbytes() >= 64) return v.data.data();
    return static_cast<const void*>(nullptr);
  };
  ASSERT_NE(first_weight(rm.buckets[0].graph), nullptr);
  EXPECT_EQ(first_weight(rm.buckets[0].graph), first_weight(rm.buckets[3].graph));
  EXPECT_THROW(ranged_model([](const std::map<std::string, int64_t>& at) { return attention_at(at.at("n"), true); },
                            {{"n", 3, 20}}, pool),
               GraphError);
  EXPECT_THROW(ranged_model(
                   [](const std::map<std::string, int64_t>& at) {
                     Graph g = attention_at(at.at("n"));
                     if (at.at("n") % 2 == 0) g.add_output(g.add_node("relu", {g.outputs()[0]}));
                     return g;
                   },
                   {{"n", 3, 20}}, pool),
               GraphError);
  EXPECT_THROW(
      ranged_model([](const std::map<std::string, int64_t>&) { return attention_at(6); }, {{"n", 3, 20}}, pool),
      GraphError);
}

}  // namespace
}  // namespace basin::graph
