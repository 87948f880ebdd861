// Quantized ONNX models: QuantizeLinear and DequantizeLinear (per tensor and per axis,
// 8- and 16-bit types), the QDQ form folded into integer operators, QLinearConv,
// QLinearMatMul, ConvInteger, MatMulInteger and DynamicQuantizeLinear, each against the
// ONNX definition computed here by hand; the graph interpreter and compiled networks
// (default and random programs) agree; and the files basin refuses, each with one
// clear error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <random>

#include "codegen/network.h"
#include "codegen/quantize.h"
#include "core/graph/fusion.h"
#include "core/graph/onnx_import.h"
#include "core/graph/passes.h"
#include "core/ir/stmt.h"
#include "core/schedule/lower_sketch.h"
#include "core/schedule/task_analysis.h"
#include "core/schedule/sketch.h"

#if BASIN_HAVE_ONNX
#include "tests/core/onnx_builder.h"
#endif

namespace basin::codegen {
namespace {

#if BASIN_HAVE_ONNX

using I = std::vector<int64_t>;
using testing::OnnxBuilder;
constexpr int kU8 = onnx::TensorProto::UINT8, kS8 = onnx::TensorProto::INT8, kS32 = onnx::TensorProto::INT32;

struct TempDir : testing::TempDir {
  TempDir() : testing::TempDir("basin_quant_") {}
};

// ONNX QuantizeLinear on one float32 value: the quotient in float32, ties to even.
// NaN gives the least value, as ONNX Runtime quantizes it.
int64_t quantize(float x, float scale, int64_t zp, int64_t lo, int64_t hi) {
  if (std::isnan(x)) return lo;
  const float q = std::nearbyint(x / scale) + static_cast<float>(zp);
  return static_cast<int64_t>(std::min<float>(std::max<float>(q, static_cast<float>(lo)), static_cast<float>(hi)));
}

// n floats drawn uniformly from [lo, hi).
std::vector<float> uniform(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& e : v) e = u(rng);
  return v;
}

NDArray floats(const I& shape, const std::vector<float>& v) {
  NDArray a(DType::f32(), shape);
  for (size_t i = 0; i < v.size(); ++i) a.as<float>()[i] = v[i];
  return a;
}

// The outputs of g by the graph interpreter and by compiled networks: default programs
// and two random ones.
struct Runs {
  std::vector<NDArray> oracle;
  std::vector<std::vector<NDArray>> compiled;
};
Runs run_everywhere(const graph::Graph& imported, const std::vector<NDArray>& in) {
  Runs r;
  r.oracle = graph::interpret_graph(imported, in);
  graph::Graph g = graph::optimize(imported);
  graph::Partition p = graph::partition(g);
  for (uint64_t seed : {0, 1, 2}) {
    std::mt19937_64 rng(seed);
    std::vector<ProgramChoice> c;
    for (const auto& t : p.tasks) {
      std::vector<sched::Sketch> s = sched::cpu_sketches(t.graph);
      const sched::Sketch& k = seed == 0 ? s[0] : s[rng() % s.size()];
      c.push_back({k.name, seed == 0 ? sched::default_config(k) : sched::random_config(k, rng), seed != 0});
    }
    r.compiled.push_back(CompiledNetwork::compile(g, p, c).run(in));
  }
  return r;
}

// Every run gives exactly `want` (integer results and their exact scaling).
void expect_exact(const Runs& r, const std::vector<std::vector<double>>& want) {
  for (size_t run = 0; run <= r.compiled.size(); ++run) {
    const std::vector<NDArray>& out = run == 0 ? r.oracle : r.compiled[run - 1];
    ASSERT_EQ(out.size(), want.size());
    for (size_t o = 0; o < want.size(); ++o) {
      ASSERT_EQ(out[o].numel(), static_cast<int64_t>(want[o].size())) << "output " << o;
      for (size_t i = 0; i < want[o].size(); ++i)
        EXPECT_FLOAT_EQ(out[o].get(static_cast<int64_t>(i)), want[o][i])
            << (run == 0 ? "interpreter" : "compiled run " + std::to_string(run)) << ", output " << o << " [" << i
            << "]";
    }
  }
}

// QuantizeLinear rounds ties to even and saturates (NaN to the least value), per tensor
// and per axis, to uint8 and int8; DequantizeLinear gives back (q - zero point) * scale.
TEST(Quantized, QuantizeAndDequantizeAsOnnxDefinesThem) {
  TempDir dir;
  OnnxBuilder b(13);
  b.input("x", {1, 2, 4});
  b.init("s_axis", {2}, {0.5f, 2.0f});
  b.init_int("z_axis", {2}, {10, 250}, kU8);
  b.init("s8", {}, {0.25f});
  b.init_int("z8", {}, {-3}, kS8, false);
  auto* q = b.node("QuantizeLinear", {"x", "s_axis", "z_axis"}, {"qa"});
  OnnxBuilder::attr_int(q, "axis", 1);
  auto* d = b.node("DequantizeLinear", {"qa", "s_axis", "z_axis"}, {"ya"});
  OnnxBuilder::attr_int(d, "axis", 1);
  b.node("QuantizeLinear", {"x", "s8", "z8"}, {"q8"});
  b.node("DequantizeLinear", {"q8", "s8", "z8"}, {"y8"});
  for (const char* o : {"ya", "y8"}) b.output(o, {1, 2, 4});
  b.save(dir.path + "/qdq.onnx");
  graph::Graph g = graph::import_onnx(dir.path + "/qdq.onnx");
  // Row 0: ties of x / 0.5 (0.25 -> 0.5 -> 0, 0.75 -> 1.5 -> 2, -1.25 -> -2.5 -> -2) and
  // saturation at 0; row 1 (scale 2, zero point 250): saturation at 255.
  const std::vector<float> x = {0.25f, 0.75f, -1.25f, -7.0f, 3.0f, 5.0f, 100.0f, NAN};
  const float sa[] = {0.5f, 2.0f};
  const int64_t za[] = {10, 250};
  std::vector<std::vector<double>> want(2);
  for (int i = 0; i < 8; ++i) {
    const int c = i / 4;
    want[0].push_back((quantize(x[i], sa[c], za[c], 0, 255) - za[c]) * static_cast<double>(sa[c]));
    want[1].push_back((quantize(x[i], 0.25f, -3, -128, 127) + 3) * 0.25);
  }
  EXPECT_EQ(want[0][0], 0.0);               // 0.5 rounds to 0
  EXPECT_EQ(want[0][1], 1.0);               // 1.5 rounds to 2: 2 * 0.5
  EXPECT_EQ(want[0][2], -1.0);              // -2.5 rounds to -2
  EXPECT_EQ(want[0][3], -5.0);              // saturated at 0: (0 - 10) * 0.5
  EXPECT_EQ(want[0][6], 10.0);              // saturated at 255: (255 - 250) * 2
  EXPECT_EQ(want[1][6], (127 + 3) * 0.25);  // int8 saturation
  EXPECT_EQ(want[0][7], (0 - 250) * 2.0);   // NaN: the least value
  EXPECT_EQ(want[1][7], (-128 + 3) * 0.25);
  expect_exact(run_everywhere(g, {floats({1, 2, 4}, x)}), want);
}

// The ONNX float arithmetic of a QDQ model, computed here in double: x quantized to
// uint8, a convolution with per-channel int8 weights and an int32 bias, requantized,
// a Relu, requantized, a Gemm with per-tensor int8 weights.
// With signed activations (INT8, onnxruntime's default) the zero points are the
// unsigned ones less 128.
struct QdqModel {
  static constexpr float sx = 0.03f, s1 = 0.05f, s2 = 0.04f, sg = 0.02f;
  const int act;  // the activations' type: kU8 or kS8
  const int64_t zx, z1, z2, lo, hi;
  std::vector<float> sw = {0.01f, 0.02f, 0.015f, 0.005f};
  std::vector<int64_t> w, bias, wg;
  explicit QdqModel(int act_type = kU8)
      : act(act_type),
        zx(act == kU8 ? 120 : -8),
        z1(act == kU8 ? 100 : -28),
        z2(act == kU8 ? 0 : -128),
        lo(act == kU8 ? 0 : -128),
        hi(act == kU8 ? 255 : 127) {
    std::mt19937 rng(5);
    for (int i = 0; i < 4 * 3 * 9; ++i) w.push_back(static_cast<int64_t>(rng() % 255) - 127);
    for (int i = 0; i < 4; ++i) bias.push_back(static_cast<int64_t>(rng() % 2001) - 1000);
    for (int i = 0; i < 5 * 144; ++i) wg.push_back(static_cast<int64_t>(rng() % 255) - 127);
  }
  void write(const std::string& path) const {
    OnnxBuilder b(13);
    b.input("x", {1, 3, 6, 6});
    b.init("sx", {}, {sx});
    b.init_int("zx", {}, {zx}, act);
    b.init("s1", {}, {s1});
    b.init_int("z1", {}, {z1}, act);
    b.init("s2", {}, {s2});
    b.init_int("z2", {}, {z2}, act);
    b.init("sw", {4}, sw);
    b.init_int("zw", {4}, {0, 0, 0, 0}, kS8);
    b.init_int("w", {4, 3, 3, 3}, w, kS8);
    std::vector<float> sb;
    for (float s : sw) sb.push_back(sx * s);
    b.init("sb", {4}, sb);
    b.init_int("zb", {4}, {0, 0, 0, 0}, kS32);
    b.init_int("b", {4}, bias, kS32);
    b.init("sg", {}, {sg});
    b.init_int("zg", {}, {0}, kS8);
    b.init_int("wg", {5, 144}, wg, kS8);
    b.node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"});
    b.node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"});
    auto* dw = b.node("DequantizeLinear", {"w", "sw", "zw"}, {"wd"});
    OnnxBuilder::attr_int(dw, "axis", 0);
    auto* db = b.node("DequantizeLinear", {"b", "sb", "zb"}, {"bd"});
    OnnxBuilder::attr_int(db, "axis", 0);
    auto* c = b.node("Conv", {"xd", "wd", "bd"}, {"c"});
    OnnxBuilder::attr_ints(c, "pads", {1, 1, 1, 1});
    b.node("QuantizeLinear", {"c", "s1", "z1"}, {"cq"});
    b.node("DequantizeLinear", {"cq", "s1", "z1"}, {"cd"});
    b.node("Relu", {"cd"}, {"r"});
    b.node("QuantizeLinear", {"r", "s2", "z2"}, {"rq"});
    b.node("DequantizeLinear", {"rq", "s2", "z2"}, {"rd"});
    auto* f = b.node("Flatten", {"rd"}, {"f"});
    OnnxBuilder::attr_int(f, "axis", 1);
    b.node("DequantizeLinear", {"wg", "sg", "zg"}, {"wgd"});
    auto* gm = b.node("Gemm", {"f", "wgd"}, {"y"});
    OnnxBuilder::attr_int(gm, "transB", 1);
    b.output("y", {1, 5});
    b.save(path);
  }
  // The output, and the quantized activation before the Gemm (its integers).
  std::vector<double> by_hand(const std::vector<float>& x, std::vector<int64_t>* rq) const {
    std::vector<int64_t> xq;
    for (float v : x) xq.push_back(quantize(v, sx, zx, lo, hi));
    rq->assign(144, 0);
    for (int o = 0; o < 4; ++o)
      for (int yy = 0; yy < 6; ++yy)
        for (int xx = 0; xx < 6; ++xx) {
          double s = static_cast<double>(bias[o]) * static_cast<double>(sx * sw[o]);
          for (int c = 0; c < 3; ++c)
            for (int ky = 0; ky < 3; ++ky)
              for (int kx = 0; kx < 3; ++kx) {
                const int iy = yy + ky - 1, ix = xx + kx - 1;
                if (iy < 0 || iy >= 6 || ix < 0 || ix >= 6) continue;
                s += static_cast<double>((xq[(c * 6 + iy) * 6 + ix] - zx) * sx) *
                     static_cast<double>(w[((o * 3 + c) * 3 + ky) * 3 + kx] * sw[o]);
              }
          const float cd = static_cast<float>((quantize(static_cast<float>(s), s1, z1, lo, hi) - z1) * s1);
          (*rq)[(o * 6 + yy) * 6 + xx] = quantize(std::max(cd, 0.0f), s2, z2, lo, hi);
        }
    std::vector<double> y(5, 0.0);
    for (int n = 0; n < 5; ++n)
      for (int k = 0; k < 144; ++k)
        y[n] += static_cast<double>(((*rq)[k] - z2) * s2) * static_cast<double>(wg[n * 144 + k] * sg);
    return y;
  }
};

// A QDQ model (the form onnxruntime.quantization's quantize_static writes) imports as
// integer operators: the convolution and the Gemm sum int8 products exactly in int32,
// scaled once; their results are the ONNX float arithmetic's, to within a rounding of
// the sum (one quantization step where a sum lands on a tie).
void expect_qdq_model_runs_on_the_integers(int act) {
  TempDir dir;
  QdqModel m(act);
  m.write(dir.path + "/model.onnx");
  graph::Graph g = graph::import_onnx(dir.path + "/model.onnx");
  int int_products = 0;
  for (const graph::Node& nd : g.nodes()) {
    if ((nd.op == "conv2d" || nd.op == "dense") && g.value(nd.output).dtype == DType::i32()) {
      ++int_products;
      // The 8-bit integers as they are (x's zero point a correction of the sum), the
      // activation unsigned: signed ones are held plus 128.
      EXPECT_EQ(g.value(nd.inputs[0]).dtype, DType::u8()) << nd.name;
      EXPECT_EQ(g.value(nd.inputs[1]).dtype, DType::i8()) << nd.name;
      if (nd.op == "conv2d") EXPECT_EQ(nd.attrs.i("pad_value"), m.zx + (act == kS8 ? 128 : 0));
    }
    // No computed value is int8: the quantized activations are uint8.
    EXPECT_TRUE(g.value(nd.output).constant || g.value(nd.output).dtype != DType::i8()) << nd.name;
  }
  EXPECT_EQ(int_products, 2) << "the QDQ convolution and Gemm became integer operators";
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  std::vector<float> x(108);
  for (float& v : x) v = u(rng);
  std::vector<int64_t> rq;
  const std::vector<double> want = m.by_hand(x, &rq);
  const Runs r = run_everywhere(g, {floats({1, 3, 6, 6}, x)});
  // One step of the activation moves the output by at most s2 * 127 * sg.
  const double step = QdqModel::s2 * 127 * QdqModel::sg;
  for (size_t run = 0; run <= r.compiled.size(); ++run) {
    const NDArray& y = run == 0 ? r.oracle[0] : r.compiled[run - 1][0];
    for (int n = 0; n < 5; ++n) EXPECT_NEAR(y.get(n), want[static_cast<size_t>(n)], 2 * step) << run << " " << n;
    if (run > 0)  // compiled code and the interpreter agree exactly
      for (int n = 0; n < 5; ++n) EXPECT_EQ(y.get(n), r.oracle[0].get(n)) << run << " " << n;
  }
}

TEST(Quantized, QdqOperatorsRunOnTheIntegers) { expect_qdq_model_runs_on_the_integers(kU8); }

// Signed 8-bit activations (onnxruntime's default) are held as uint8 plus 128, their
// zero points too, so that the integer dot-product instructions (unsigned by signed
// bytes) apply: the same results, the convolution padded by zx + 128.
TEST(Quantized, SignedActivationsAreHeldUnsigned) { expect_qdq_model_runs_on_the_integers(kS8); }

// An operator that reads a signed activation's integers themselves (a Cast) sees them
// as the model wrote them, not plus 128; a view of one (Reshape) stays unsigned.
TEST(Quantized, OperatorsOnSignedActivationsSeeTheirValues) {
  TempDir dir;
  OnnxBuilder b(13);
  b.input("x", {2, 3});
  b.init("s", {}, {0.5f});
  b.init_int("z", {}, {-3}, kS8);
  b.init_i64("shape", {6});
  b.node("QuantizeLinear", {"x", "s", "z"}, {"q"});
  auto* c = b.node("Cast", {"q"}, {"c"});
  OnnxBuilder::attr_int(c, "to", onnx::TensorProto::FLOAT);
  b.node("Reshape", {"q", "shape"}, {"r"});
  b.node("DequantizeLinear", {"r", "s", "z"}, {"d"});
  b.output("c", {2, 3});
  b.output("d", {6});
  b.save(dir.path + "/cast.onnx");
  graph::Graph g = graph::import_onnx(dir.path + "/cast.onnx");
  const std::vector<float> x = {-70.0f, -1.25f, 0.0f, 0.75f, 10.0f, 90.0f};
  std::vector<std::vector<double>> want(2);
  for (float v : x) {
    const int64_t q = quantize(v, 0.5f, -3, -128, 127);
    want[0].push_back(static_cast<double>(q));
    want[1].push_back(static_cast<double>(q + 3) * 0.5);
  }
  EXPECT_EQ(want[0][0], -128.0);  // saturated
  EXPECT_EQ(want[0][5], 127.0);
  expect_exact(run_everywhere(g, {floats({2, 3}, x)}), want);
}

// A chain of quantizations fused into one kernel reads each stage's value once: its
// code grows with the chain's length, not exponentially (a quantization reading its
// value three times made an attention's 6-stage requantization 43% of a QDQ
// transformer layer).
TEST(Quantized, AChainOfQuantizationsStaysLinear) {
  TempDir dir;
  OnnxBuilder b(13);
  b.input("x", {4, 16});
  b.init("s0", {}, {0.05f});  // alternate scales: a requantization to the same ones folds
  b.init("s1", {}, {0.07f});
  b.init_int("z", {}, {3}, kU8);
  std::string v = "x";
  const int stages = 12;
  for (int k = 0; k < stages; ++k) {
    const std::string q = "q" + std::to_string(k), d = "d" + std::to_string(k), sk = k % 2 ? "s1" : "s0";
    b.node("QuantizeLinear", {v, sk, "z"}, {q});
    b.node("DequantizeLinear", {q, sk, "z"}, {d});
    v = d;
  }
  b.output(v, {4, 16});
  b.save(dir.path + "/chain.onnx");
  graph::Graph g = graph::optimize(graph::import_onnx(dir.path + "/chain.onnx"));
  graph::Partition p = graph::partition(g);
  ASSERT_EQ(p.tasks.size(), 1u);
  const sched::Sketch s = sched::cpu_sketches(p.tasks[0].graph)[0];
  const LoweredFunc f = sched::lower_config(p.tasks[0].graph, s, sched::default_config(s));
  // Rounding calls in the statements' expression trees, each use of a shared
  // subexpression counted (as code generation emits it).
  int64_t rints = 0;
  std::function<void(const Expr&)> count = [&](const Expr& e) {
    if (e.kind() == ExprKind::Call && e->fn == MathFn::rint) ++rints;
    for (const Expr& a : e->args) count(a);
  };
  visit_stmt(f.body, [&](const Stmt& st) {
    if (st->kind == StmtKind::Store) count(st->value);
  });
  EXPECT_EQ(rints, stages);
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[static_cast<size_t>(i)] = 0.37f * static_cast<float>(i) - 9.0f;
  std::vector<double> want;
  for (float xv : x) {
    float v = xv;
    for (int k = 0; k < stages; ++k) {
      const float sk = k % 2 ? 0.07f : 0.05f;
      v = static_cast<float>(quantize(v, sk, 3, 0, 255) - 3) * sk;
    }
    want.push_back(v);
  }
  expect_exact(run_everywhere(graph::import_onnx(dir.path + "/chain.onnx"), {floats({4, 16}, x)}), {want});
}

// A requantization with the dequantization's own scale, zero point and type (what QDQ
// models write around every view and transpose) is the integers themselves, a transpose
// of them moving bytes: one QuantizeLinear is left of three, the results exact.
TEST(Quantized, ARequantizationToTheSameParametersFolds) {
  TempDir dir;
  OnnxBuilder b(13);
  b.input("x", {2, 3, 4});
  b.init("s", {}, {0.05f});
  b.init("s2", {}, {0.08f});
  b.init_int("z", {}, {-5}, kS8);
  b.node("QuantizeLinear", {"x", "s", "z"}, {"q0"});
  b.node("DequantizeLinear", {"q0", "s", "z"}, {"d0"});
  auto* t = b.node("Transpose", {"d0"}, {"t"});
  OnnxBuilder::attr_ints(t, "perm", {0, 2, 1});
  b.node("QuantizeLinear", {"t", "s", "z"}, {"q1"});  // folds
  b.node("DequantizeLinear", {"q1", "s", "z"}, {"d1"});
  b.node("QuantizeLinear", {"d1", "s2", "z"}, {"q2"});  // another scale: stays
  b.node("DequantizeLinear", {"q2", "s2", "z"}, {"d2"});
  b.output("d1", {2, 4, 3});
  b.output("d2", {2, 4, 3});
  b.save(dir.path + "/fold.onnx");
  graph::Graph g = graph::import_onnx(dir.path + "/fold.onnx");
  int quantizations = 0;
  for (const graph::Node& nd : g.nodes()) quantizations += nd.op == "quantize_linear";
  EXPECT_EQ(quantizations, 2);
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[static_cast<size_t>(i)] = 0.61f * static_cast<float>(i) - 7.3f;
  std::vector<std::vector<double>> want(2);
  for (int n = 0; n < 2; ++n)
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 3; ++i) {
        const float d1 =
            static_cast<float>(quantize(x[static_cast<size_t>((n * 3 + i) * 4 + j)], 0.05f, -5, -128, 127) + 5) * 0.05f;
        want[0].push_back(d1);
        want[1].push_back(static_cast<float>(quantize(d1, 0.08f, -5, -128, 127) + 5) * 0.08f);
      }
  expect_exact(run_everywhere(g, {floats({2, 3, 4}, x)}), want);
}

// A QDQ product of two activations (attention's: MatMul of dequantized computed values,
// both with zero points) multiplies bytes, unsigned by signed (the form of vpdpbusd and
// AMX-INT8 tiles), the zero points' terms added from the rows' and columns' sums:
// batched (a signed activation, held plus 128) and two-dimensional (a uint8 one), the
// int32 sums exact, scaled once by the scales' product.
TEST(Quantized, ProductsOfTwoActivationsMultiplyBytes) {
  TempDir dir;
  OnnxBuilder b(13);
  b.input("a", {1, 2, 3, 8});
  b.input("c", {1, 2, 8, 5});
  b.input("e", {3, 8});
  b.input("f", {8, 4});
  b.init("sa", {}, {0.04f});
  b.init_int("za", {}, {7}, kU8);
  b.init("sc", {}, {0.03f});
  b.init_int("zc", {}, {-9}, kS8);
  b.init("se", {}, {0.05f});
  b.init_int("ze", {}, {0}, kU8);
  b.init("sf", {}, {0.02f});
  b.init_int("zf", {}, {131}, kU8);
  for (const char* v : {"a", "c", "e", "f"}) {
    const std::string q = std::string(v) + "q", sv = std::string("s") + v, zv = std::string("z") + v;
    b.node("QuantizeLinear", {v, sv, zv}, {q});
    b.node("DequantizeLinear", {q, sv, zv}, {std::string(v) + "d"});
  }
  b.node("MatMul", {"ad", "cd"}, {"y"});
  b.node("MatMul", {"ed", "fd"}, {"y2"});
  b.output("y", {1, 2, 3, 5});
  b.output("y2", {3, 4});
  b.save(dir.path + "/attn.onnx");
  graph::Graph g = graph::import_onnx(dir.path + "/attn.onnx");
  int byte_products = 0;
  for (const graph::Node& nd : g.nodes())
    if ((nd.op == "batch_matmul" || nd.op == "matmul") && g.value(nd.output).dtype == DType::i32()) {
      ++byte_products;
      EXPECT_EQ(g.value(nd.inputs[0]).dtype, DType::u8()) << nd.name;
      EXPECT_EQ(g.value(nd.inputs[1]).dtype, DType::i8()) << nd.name;
    }
  EXPECT_EQ(byte_products, 2);
  graph::Partition p = graph::partition(graph::optimize(g));
  int int8_tasks = 0;
  for (const auto& t : p.tasks) int8_tasks += sched::integer_products(t.graph);
  EXPECT_EQ(int8_tasks, 2);

  std::mt19937 rng(5);
  const std::vector<float> a = uniform(rng, 48, -3, 3), c = uniform(rng, 80, -3, 3), e = uniform(rng, 24, -3, 3),
                           f = uniform(rng, 32, -3, 3);
  std::vector<std::vector<double>> want(2);
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 5; ++j) {
        int64_t sum = 0;
        for (int k = 0; k < 8; ++k)
          sum += (quantize(a[static_cast<size_t>((h * 3 + i) * 8 + k)], 0.04f, 7, 0, 255) - 7) *
                 (quantize(c[static_cast<size_t>((h * 8 + k) * 5 + j)], 0.03f, -9, -128, 127) + 9);
        want[0].push_back(static_cast<float>(sum) * (0.04f * 0.03f));
      }
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      int64_t sum = 0;
      for (int k = 0; k < 8; ++k)
        sum += quantize(e[static_cast<size_t>(i * 8 + k)], 0.05f, 0, 0, 255) *
               (quantize(f[static_cast<size_t>(k * 4 + j)], 0.02f, 131, 0, 255) - 131);
      want[1].push_back(static_cast<float>(sum) * (0.05f * 0.02f));
    }
  expect_exact(
      run_everywhere(g, {floats({1, 2, 3, 8}, a), floats({1, 2, 8, 5}, c), floats({3, 8}, e), floats({8, 4}, f)}),
      want);
}

// MatMulInteger (per-row and per-column zero points), ConvInteger (padding counts as
// the zero point), QLinearMatMul, QLinearConv and DynamicQuantizeLinear, by hand.
TEST(Quantized, IntegerOperatorsAsOnnxDefinesThem) {
  TempDir dir;
  OnnxBuilder b(13);
  b.input("a", {2, 3});
  b.input("x", {1, 2, 3, 3});
  b.init("sa", {}, {0.1f});
  b.init_int("za", {}, {10}, kU8);
  b.init_int("za_rows", {2}, {12, 7}, kU8);
  b.init_int("B", {3, 4}, {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12}, kS8);
  b.init_int("zb_cols", {4}, {0, 1, -1, 2}, kS8);
  b.init("sb", {}, {0.05f});
  b.init_int("zb", {}, {0}, kS8);
  b.init("sy", {}, {0.02f});
  b.init_int("zy", {}, {128}, kU8);
  b.init("sxc", {}, {0.05f});
  b.init_int("zxc", {}, {3}, kU8);
  b.init_int("W", {2, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 8, 7, 6, 5, 4, 3, 2, 1}, kU8);
  b.init_int("zw", {2}, {2, 5}, kU8);
  b.init("sw", {2}, {0.1f, 0.2f});
  b.init_int("bias", {2}, {-40, 90}, kS32);
  b.node("QuantizeLinear", {"a", "sa", "za"}, {"aq"});
  b.node("MatMulInteger", {"aq", "B", "za_rows", "zb_cols"}, {"mi"});
  auto* c1 = b.node("Cast", {"mi"}, {"mi_f"});
  OnnxBuilder::attr_int(c1, "to", onnx::TensorProto::FLOAT);
  b.node("QLinearMatMul", {"aq", "sa", "za", "B", "sb", "zb", "sy", "zy"}, {"qm"});
  b.node("DequantizeLinear", {"qm", "sy", "zy"}, {"qm_f"});
  b.node("QuantizeLinear", {"x", "sxc", "zxc"}, {"xq"});
  auto* ci = b.node("ConvInteger", {"xq", "W", "zxc", "zw"}, {"cint"});
  OnnxBuilder::attr_ints(ci, "pads", {1, 0, 1, 0});
  auto* c2 = b.node("Cast", {"cint"}, {"cint_f"});
  OnnxBuilder::attr_int(c2, "to", onnx::TensorProto::FLOAT);
  b.node("QLinearConv", {"xq", "sxc", "zxc", "W", "sw", "zw", "sy", "zy", "bias"}, {"qc"});
  b.node("DequantizeLinear", {"qc", "sy", "zy"}, {"qc_f"});
  b.node("DynamicQuantizeLinear", {"a"}, {"dq", "ds", "dz"});
  b.node("DequantizeLinear", {"dq", "ds", "dz"}, {"dq_f"});
  auto* c3 = b.node("Cast", {"dz"}, {"dz_f"});
  OnnxBuilder::attr_int(c3, "to", onnx::TensorProto::FLOAT);
  b.output("mi_f", {2, 4});
  b.output("qm_f", {2, 4});
  b.output("cint_f", {1, 2, 4, 2});
  b.output("qc_f", {1, 2, 2, 2});
  b.output("dq_f", {2, 3});
  b.output("ds", {});
  b.output("dz_f", {});
  b.save(dir.path + "/ints.onnx");
  graph::Graph g = graph::import_onnx(dir.path + "/ints.onnx");

  const std::vector<float> a = {0.3f, -0.5f, 1.2f, 2.0f, 0.05f, -1.0f};
  std::vector<float> x(18);
  for (int i = 0; i < 18; ++i) x[static_cast<size_t>(i)] = 0.13f * static_cast<float>(i) - 0.9f;
  const int64_t B[3][4] = {{1, -2, 3, -4}, {5, -6, 7, -8}, {9, -10, 11, -12}}, zbc[4] = {0, 1, -1, 2};
  std::vector<int64_t> aq;
  for (float v : a) aq.push_back(quantize(v, 0.1f, 10, 0, 255));
  std::vector<std::vector<double>> want(7);
  const int64_t zar[2] = {12, 7};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      int64_t s = 0, t = 0;
      for (int k = 0; k < 3; ++k) {
        s += (aq[static_cast<size_t>(i * 3 + k)] - zar[i]) * (B[k][j] - zbc[j]);
        t += (aq[static_cast<size_t>(i * 3 + k)] - 10) * B[k][j];
      }
      want[0].push_back(static_cast<double>(s));
      const float real = static_cast<float>(t) * (0.1f * 0.05f);
      want[1].push_back((quantize(real, 0.02f, 128, 0, 255) - 128) * static_cast<double>(0.02f));
    }
  std::vector<int64_t> xq;
  for (float v : x) xq.push_back(quantize(v, 0.05f, 3, 0, 255));
  const int64_t W[2][2][2][2] = {{{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}}, {{{8, 7}, {6, 5}}, {{4, 3}, {2, 1}}}};
  const int64_t zw[2] = {2, 5}, bias[2] = {-40, 90};
  const float sw[2] = {0.1f, 0.2f};
  // ConvInteger pads one row above and below, no columns: output [1, 2, 4, 2].
  // QLinearConv pads nothing: output [1, 2, 2, 2].
  for (int o = 0; o < 2; ++o)
    for (int yy = 0; yy < 4; ++yy)
      for (int xx = 0; xx < 2; ++xx) {
        int64_t s = 0;
        for (int c = 0; c < 2; ++c)
          for (int ky = 0; ky < 2; ++ky)
            for (int kx = 0; kx < 2; ++kx) {
              const int iy = yy + ky - 1, ix = xx + kx;
              const int64_t v = iy < 0 || iy >= 3 ? 3 : xq[static_cast<size_t>((c * 3 + iy) * 3 + ix)];
              s += (v - 3) * (W[o][c][ky][kx] - zw[o]);
            }
        want[2].push_back(static_cast<double>(s));
        if (yy == 0 || yy == 3) continue;
        const float real = static_cast<float>(s + bias[o]) * (0.05f * sw[o]);
        want[3].push_back((quantize(real, 0.02f, 128, 0, 255) - 128) * static_cast<double>(0.02f));
      }
  const float lo = std::min(0.0f, *std::min_element(a.begin(), a.end())),
              hi = std::max(0.0f, *std::max_element(a.begin(), a.end()));
  const float ds = (hi - lo) / 255.0f;
  const int64_t dz = quantize(-lo, ds, 0, 0, 255);
  for (float v : a) want[4].push_back(static_cast<float>((quantize(v, ds, dz, 0, 255) - dz) * ds));
  want[5] = {ds};
  want[6] = {static_cast<double>(dz)};
  expect_exact(run_everywhere(g, {floats({2, 3}, a), floats({1, 2, 3, 3}, x)}), want);
}

// A view of dequantized int32 values (a MatMulInteger's sums) read by a product of
// dequantized operands is no 8-bit operand: the product stays in float32 (looking
// through the view once failed the import).
TEST(Quantized, AViewOfDequantizedInt32IsAFloatOperand) {
  TempDir dir;
  OnnxBuilder b(13);
  b.input("a", {2, 3});
  b.init("sa", {}, {0.1f});
  b.init_int("za", {}, {10}, kU8);
  b.init_int("B", {3, 4}, {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12}, kS8);
  b.init("sm", {}, {0.01f});
  b.init_int("zm", {}, {0}, kS32);
  b.init_i64("shape", {4, 2});
  b.init_int("W", {2, 3}, {1, 2, 3, -4, -5, -6}, kS8);
  b.init("sw", {}, {0.5f});
  b.init_int("zw", {}, {0}, kS8);
  b.node("QuantizeLinear", {"a", "sa", "za"}, {"aq"});
  b.node("MatMulInteger", {"aq", "B"}, {"mi"});
  b.node("DequantizeLinear", {"mi", "sm", "zm"}, {"md"});
  b.node("Reshape", {"md", "shape"}, {"mr"});
  b.node("DequantizeLinear", {"W", "sw", "zw"}, {"wd"});
  b.node("MatMul", {"mr", "wd"}, {"y"});
  b.output("y", {4, 3});
  b.save(dir.path + "/view.onnx");
  graph::Graph g = graph::import_onnx(dir.path + "/view.onnx");
  const std::vector<float> a = {0.3f, -0.5f, 1.2f, 2.0f, 0.05f, -1.0f};
  const int64_t B[3][4] = {{1, -2, 3, -4}, {5, -6, 7, -8}, {9, -10, 11, -12}}, W[2][3] = {{1, 2, 3}, {-4, -5, -6}};
  std::vector<double> md;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      int64_t t = 0;
      for (int k = 0; k < 3; ++k)  // (MatMulInteger without zero points: the integers as they are)
        t += quantize(a[static_cast<size_t>(i * 3 + k)], 0.1f, 10, 0, 255) * B[k][j];
      md.push_back(static_cast<double>(static_cast<float>(t) * 0.01f));
    }
  const std::vector<NDArray> out = graph::interpret_graph(g, {floats({2, 3}, a)});
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) {
      double want = 0;
      for (int k = 0; k < 2; ++k) want += md[static_cast<size_t>(r * 2 + k)] * (W[k][c] * 0.5);
      EXPECT_NEAR(out[0].get(r * 3 + c), want, 1e-4 * std::max(1.0, std::abs(want))) << r << " " << c;
    }
}

// What basin does not take is one clear error naming it.
TEST(Quantized, UnsupportedQuantizedModelsAreClearErrors) {
  TempDir dir;
  auto expect_error = [&](OnnxBuilder& b, const std::string& file, const std::string& needle) {
    b.save(dir.path + "/" + file);
    try {
      graph::import_onnx(dir.path + "/" + file);
      ADD_FAILURE() << file << " accepted";
    } catch (const graph::GraphError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << file << ": " << e.what();
    }
  };
  {
    OnnxBuilder b(13);
    b.input("x", {4}, kU8);
    b.node("Identity", {"x"}, {"y"});
    b.output("y", {4}, kU8);
    expect_error(b, "uint8_input.onnx", "inside a graph only");
  }
  {
    OnnxBuilder b(13);
    b.input("x", {4});
    b.init("s", {}, {0.1f});
    b.init_int("z", {}, {0}, kS8);
    b.node("QuantizeLinear", {"x", "s", "z"}, {"y"});
    b.output("y", {4}, kS8);
    expect_error(b, "int8_output.onnx", "dequantize it in the model");
  }
  {
    OnnxBuilder b(13);
    b.input("x", {4});
    auto* c = b.node("Cast", {"x"}, {"y"});
    OnnxBuilder::attr_int(c, "to", kU8);
    auto* c2 = b.node("Cast", {"y"}, {"z"});
    OnnxBuilder::attr_int(c2, "to", onnx::TensorProto::FLOAT);
    b.output("z", {4});
    expect_error(b, "cast_uint8.onnx", "casting to UINT8");
  }
  {
    OnnxBuilder b(13);
    b.input("x", {2, 4});
    b.init("s", {3}, {0.1f, 0.2f, 0.3f});
    b.init_int("z", {3}, {0, 0, 0}, kU8);
    auto* q = b.node("QuantizeLinear", {"x", "s", "z"}, {"q"});
    OnnxBuilder::attr_int(q, "axis", 1);
    b.node("DequantizeLinear", {"q", "s", "z"}, {"y"});
    b.output("y", {2, 4});
    expect_error(b, "scale_length.onnx", "one per index of axis 1");
  }
  {
    OnnxBuilder b(13);
    b.input("x", {4});
    b.init("s", {}, {0.1f});
    b.init("z", {}, {0.0f});
    b.node("QuantizeLinear", {"x", "s", "z"}, {"q"});
    b.node("DequantizeLinear", {"q", "s", "z"}, {"y"});
    b.output("y", {4});
    expect_error(b, "float_zero_point.onnx", "y_zero_point");
  }
  {
    OnnxBuilder b(13);
    b.input("a", {2, 3});
    b.input("sa", {});  // a scale computed at run time
    b.init_int("za", {}, {0}, kU8);
    b.init_int("B", {3, 2}, {1, 2, 3, 4, 5, 6}, kS8);
    b.init("sb", {}, {0.1f});
    b.init_int("zb", {}, {0}, kS8);
    b.node("QuantizeLinear", {"a", "sa", "za"}, {"aq"});
    b.node("QLinearMatMul", {"aq", "sa", "za", "B", "sb", "zb", "sb", "za"}, {"y"});
    b.node("DequantizeLinear", {"y", "sb", "za"}, {"yf"});
    b.output("yf", {2, 2});
    expect_error(b, "runtime_scale.onnx", "constant scales");
  }
}

// A float32 model with a Conv (bias), a Gemm (transB, bias) and a MatMul, random weights.
void write_float_model(const std::string& path, int opset = 13) {
  OnnxBuilder b(opset);
  std::mt19937 rng(11);
  auto values = [&](size_t n) { return uniform(rng, n, -0.5f, 0.5f); };
  b.input("x", {1, 3, 8, 8});
  b.init("W", {8, 3, 3, 3}, values(8 * 27));
  b.init("B", {8}, values(8));
  b.init("W2", {10, 512}, values(5120));
  b.init("B2", {10}, values(10));
  b.init("W3", {10, 4}, values(40));
  auto* c = b.node("Conv", {"x", "W", "B"}, {"c"});
  OnnxBuilder::attr_ints(c, "pads", {1, 1, 1, 1});
  b.node("Relu", {"c"}, {"r"});
  auto* f = b.node("Flatten", {"r"}, {"f"});
  OnnxBuilder::attr_int(f, "axis", 1);
  auto* gm = b.node("Gemm", {"f", "W2", "B2"}, {"g"});
  OnnxBuilder::attr_int(gm, "transB", 1);
  b.node("MatMul", {"g", "W3"}, {"y"});
  b.output("y", {1, 4});
  b.save(path);
}

std::vector<std::vector<NDArray>> samples(int n, uint64_t seed) {
  std::vector<std::vector<NDArray>> s;
  for (int i = 0; i < n; ++i)
    s.push_back({NDArray::random(DType::f32(), {1, 3, 8, 8}, -1, 1, seed + static_cast<uint64_t>(i))});
  return s;
}

// `basin quantize`: the rule quantizes the Conv, the Gemm and the MatMul (their inputs
// calibrated: min-max are the samples' extremes), the file is the QDQ form basin folds
// into integer products (uint8 by int8), and its outputs stay near the float model's.
TEST(Quantized, BasinQuantizesAFloatModel) {
  TempDir dir;
  const std::string in = dir.path + "/float.onnx", out = dir.path + "/int8.onnx";
  write_float_model(in);
  QuantizeOptions o;
  o.calibration = samples(4, 20);
  const QuantizeResult r = quantize_model(in, out, o);
  EXPECT_EQ(r.products, 3);
  ASSERT_EQ(r.activations, (std::vector<std::string>{"x", "f", "g"}));
  float lo = 0, hi = 0;
  for (const auto& smp : o.calibration)
    for (int64_t i = 0; i < smp[0].numel(); ++i) {
      lo = std::min(lo, smp[0].as<float>()[i]);
      hi = std::max(hi, smp[0].as<float>()[i]);
    }
  EXPECT_EQ(r.ranges[0], std::make_pair(lo, hi));
  EXPECT_GE(r.ranges[1].first, 0.0f);  // after a ReLU
  graph::Graph q = graph::import_onnx(out);
  int integer = 0;
  for (const graph::Node& nd : q.nodes())
    if ((nd.op == "conv2d" || nd.op == "dense" || nd.op == "matmul") && q.value(nd.output).dtype == DType::i32()) {
      ++integer;
      EXPECT_EQ(q.value(nd.inputs[0]).dtype, DType::u8()) << nd.name;
      EXPECT_EQ(q.value(nd.inputs[1]).dtype, DType::i8()) << nd.name;
    }
  EXPECT_EQ(integer, 3);
  const std::vector<NDArray> x = samples(1, 99)[0];
  const NDArray want = graph::interpret_graph(graph::import_onnx(in), x)[0];
  const Runs runs = run_everywhere(q, x);
  for (size_t run = 0; run <= runs.compiled.size(); ++run) {
    const NDArray& got = run == 0 ? runs.oracle[0] : runs.compiled[run - 1][0];
    // Four outputs of a random 3-layer model whose products cancel: 4.8e-2 here, and
    // ONNX Runtime 1.32 gives the same outputs on the same file.
    const double err = compare_arrays(got, want).max_rel;
    EXPECT_LT(err, 0.1) << run;
    EXPECT_GT(err, 0.0) << "a quantized model computed the float32 result exactly";
  }
  // The percentile method clips the input's extremes.
  o.method = "percentile";
  o.percentile = 99.0;
  const QuantizeResult p = quantize_model(in, dir.path + "/p.onnx", o);
  EXPECT_GT(p.ranges[0].first, lo);
  EXPECT_LT(p.ranges[0].second, hi);
}

TEST(Quantized, QuantizingBadInputsIsAClearError) {
  TempDir dir;
  const std::string in = dir.path + "/float.onnx";
  write_float_model(in);
  auto refused = [&](const std::string& model, QuantizeOptions o, const std::string& needle) {
    try {
      quantize_model(model, dir.path + "/out.onnx", o);
      ADD_FAILURE() << needle << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  QuantizeOptions ok;
  ok.calibration = samples(2, 1);
  refused(in, QuantizeOptions{}, "calibration inputs");
  QuantizeOptions two = ok;
  two.calibration[1].push_back(two.calibration[1][0]);
  refused(in, two, "sample 2 has 2 inputs; the model takes 1");
  QuantizeOptions method = ok;
  method.method = "entropy";
  refused(in, method, "'entropy' is not known");
  QuantizeOptions pct = ok;
  pct.method = "percentile";
  pct.percentile = 30;
  refused(in, pct, "percentile must lie above 50");
  QuantizeOptions shape = ok;
  shape.calibration[0][0] = NDArray::random(DType::f32(), {1, 3, 4, 4}, -1, 1, 3);
  refused(in, shape, "");
  write_float_model(dir.path + "/old.onnx", 12);
  refused(dir.path + "/old.onnx", ok, "opset 12");
  OnnxBuilder b(13);
  b.input("x", {1, 3, 8, 8});
  b.node("Relu", {"x"}, {"y"});
  b.output("y", {1, 3, 8, 8});
  b.save(dir.path + "/relu.onnx");
  refused(dir.path + "/relu.onnx", ok, "no Conv, Gemm or MatMul");
}

#else

TEST(Quantized, NeedsOnnx) { GTEST_SKIP() << "built without ONNX"; }

#endif

}  // namespace
}  // namespace basin::codegen
