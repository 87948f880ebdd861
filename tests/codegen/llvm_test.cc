// The LLVM CPU backend against the interpreter (the oracle): every operator case of the
// library compiled and run, plus the IR semantics a backend can get wrong (floor
// division of negatives, lazy select, integer wrap, bools, allocations).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "codegen/llvm_jit.h"
#include "codegen/op_check.h"
#include "core/expr/evaluate.h"
#include "core/util/host.h"
#include "core/ir/interpreter.h"
#include "core/ir/lower.h"
#include "core/ops/registry.h"
#include "core/util/error.h"
#include "tests/core/guarded_tiles.h"
#include "tests/ops/op_cases.h"

namespace basin {
namespace {

class LlvmVsInterpreter : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!codegen::llvm_enabled()) GTEST_SKIP() << "built without LLVM";
  }
};

// The largest relative error of case c's outputs compiled by LLVM against the
// interpreter's, the operator's default program run by both.
double error_vs_interpreter(const Case& c) {
  ops::OpGraph g = ops::build_op(c.op, parse(c.params));
  LoweredFunc f = lower_default(c.op, g.inputs, g.outputs);
  std::vector<NDArray> in = codegen::random_inputs(g, 7);
  std::vector<NDArray> want, got;
  for (const te::Tensor& t : g.outputs) {
    want.emplace_back(t.dtype(), t.shape());
    got.emplace_back(t.dtype(), t.shape());
  }
  std::vector<NDArray*> a, b;
  for (NDArray& x : in) {
    a.push_back(&x);
    b.push_back(&x);
  }
  for (NDArray& x : want) a.push_back(&x);
  for (NDArray& x : got) b.push_back(&x);
  interpret(f, a);
  codegen::compile_llvm(f)->run(b);
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, compare_arrays(got[i], want[i]).max_rel);
  return worst;
}

TEST_P(LlvmVsInterpreter, SameResults) {
  const Case& c = GetParam();
  EXPECT_LE(error_vs_interpreter(c), 1e-5) << c.op << " " << c.params;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string s = info.param.op + "_" + std::to_string(info.index);
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(AllOperators, LlvmVsInterpreter, ::testing::ValuesIn(good_cases()), case_name);

class LlvmSemantics : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!codegen::llvm_enabled()) GTEST_SKIP() << "built without LLVM";
  }

 public:
  // Runs f on both engines with the given (identical) inputs and returns both outputs.
  static void both(const LoweredFunc& f, std::vector<NDArray> in, const std::vector<int64_t>& out_shape, DType t,
                   NDArray* oracle, NDArray* compiled) {
    *oracle = NDArray(t, out_shape);
    *compiled = NDArray(t, out_shape);
    std::vector<NDArray*> a, b;
    std::vector<NDArray> in2;
    for (NDArray& x : in) in2.push_back(x.clone());
    for (NDArray& x : in) a.push_back(&x);
    for (NDArray& x : in2) b.push_back(&x);
    a.push_back(oracle);
    b.push_back(compiled);
    interpret(f, a);
    codegen::compile_llvm(f)->run(b);
  }
};

TEST_F(LlvmSemantics, FloorDivisionAndModuloOfNegatives) {
  Var i("i");
  Buffer x = make_buffer("x", DType::i64(), {Expr(8)});
  Buffer d = make_buffer("d", DType::i64(), {Expr(8)});
  Buffer out = make_buffer("out", DType::i64(), {Expr(16)});
  Expr xi = load(x, {i}), di = load(d, {i});
  Stmt body =
      make_for(i, 0, 8, ForKind::Serial,
               make_seq({make_store(out, {i * 2}, floordiv(xi, di)), make_store(out, {i * 2 + 1}, floormod(xi, di))}));
  LoweredFunc f{"divmod", {x, d, out}, {2}, body};
  NDArray xa(DType::i64(), {8}), da(DType::i64(), {8});
  int64_t xs[] = {-7, 7, -7, 7, 0, -1, 13, -13}, ds[] = {2, -2, -2, 2, 3, 4, -5, 5};
  for (int k = 0; k < 8; ++k) {
    xa.set(k, static_cast<double>(xs[k]));
    da.set(k, static_cast<double>(ds[k]));
  }
  NDArray o, c;
  both(f, {xa, da}, {16}, DType::i64(), &o, &c);
  for (int k = 0; k < 16; ++k) EXPECT_EQ(o.as<int64_t>()[k], c.as<int64_t>()[k]) << k;
  EXPECT_EQ(o.as<int64_t>()[0], -4);  // floordiv(-7, 2)
  EXPECT_EQ(o.as<int64_t>()[1], 1);   // floormod(-7, 2)
}

// Division is defined for every operand pair, in the interpreter and the compiled code
// alike: a zero divisor gives 0, a divisor of -1 the wrapped negation (INT64_MIN / -1 is
// INT64_MIN) and a zero remainder; the hardware's trap (SIGFPE) is never reached, in
// scalar or vector loops.
TEST_F(LlvmSemantics, DivisionByZeroAndMinusOneIsDefinedAndNeverTraps) {
  for (ForKind kind : {ForKind::Serial, ForKind::Vectorized}) {
    Var i("i");
    Buffer x = make_buffer("x", DType::i64(), {Expr(8)});
    Buffer d = make_buffer("d", DType::i64(), {Expr(8)});
    Buffer out = make_buffer("out", DType::i64(), {Expr(24)});
    Expr xi = load(x, {i}), di = load(d, {i});
    Stmt body = make_for(i, 0, 8, kind,
                         make_seq({make_store(out, {i}, div(xi, di)), make_store(out, {i + 8}, floordiv(xi, di)),
                                   make_store(out, {i + 16}, floormod(xi, di))}));
    LoweredFunc f{"divzero", {x, d, out}, {2}, body};
    NDArray xa(DType::i64(), {8}), da(DType::i64(), {8});
    const int64_t xs[] = {INT64_MIN, INT64_MIN, 5, -5, 7, INT64_MIN, 0, -7};
    const int64_t ds[] = {-1, 0, 0, -1, -1, 1, 0, 2};
    for (int k = 0; k < 8; ++k) xa.set_int(k, xs[k]), da.set_int(k, ds[k]);
    NDArray o, c;
    both(f, {xa, da}, {24}, DType::i64(), &o, &c);
    for (int k = 0; k < 24; ++k) EXPECT_EQ(o.as<int64_t>()[k], c.as<int64_t>()[k]) << k;
    const int64_t want_div[] = {INT64_MIN, 0, 0, 5, -7, INT64_MIN, 0, -3};
    const int64_t want_mod[] = {0, 0, 0, 0, 0, 0, 0, 1};
    for (int k = 0; k < 8; ++k) {
      EXPECT_EQ(c.as<int64_t>()[k], want_div[k]) << k;
      EXPECT_EQ(c.as<int64_t>()[16 + k], want_mod[k]) << k;
    }
    EXPECT_EQ(c.as<int64_t>()[8 + 7], -4);  // floordiv(-7, 2)
  }
}

// The values of xs as float32, cut to a multiple of `lanes` (those of unary_map's loop).
NDArray in_lanes(const std::vector<float>& xs, int64_t lanes = 8) {
  const int64_t n = static_cast<int64_t>(xs.size()) / lanes * lanes;
  NDArray in(DType::f32(), {n});
  for (int64_t k = 0; k < n; ++k) in.as<float>()[k] = xs[static_cast<size_t>(k)];
  return in;
}

// out[i] = fn(x[i]) for i < n, in rows of `lanes` whose inner loop is of `kind`.
LoweredFunc unary_map(const std::string& name, int64_t n, ForKind kind, MathFn fn, int lanes = 8) {
  Var o("o"), l("l");
  Buffer x = make_buffer("x", DType::f32(), {Expr(n)});
  Buffer out = make_buffer("out", DType::f32(), {Expr(n)});
  Expr at = o * lanes + l;
  Stmt body = make_for(o, 0, n / lanes, ForKind::Serial,
                       make_for(l, 0, lanes, kind, make_store(out, {at}, call(fn, {load(x, {at})}))));
  return LoweredFunc{name, {x, out}, {1}, body};
}

// A rounding MathFn over xs in the emitted code, on a vector loop and a scalar one,
// against the interpreter: bit for bit (NaN for NaN).
void expect_rounding_matches(MathFn fn, const std::vector<float>& xs) {
  NDArray in = in_lanes(xs);
  const int64_t n = in.numel();
  for (ForKind kind : {ForKind::Vectorized, ForKind::Serial}) {
    LoweredFunc f = unary_map(math_fn_name(fn), n, kind, fn);
    NDArray want, got;
    LlvmSemantics::both(f, {in}, {n}, DType::f32(), &want, &got);
    for (int64_t k = 0; k < n; ++k) {
      float w = want.as<float>()[k], g = got.as<float>()[k];
      if (std::isnan(w)) {
        EXPECT_TRUE(std::isnan(g)) << k;
        continue;
      }
      EXPECT_EQ(std::memcmp(&w, &g, 4), 0) << math_fn_name(fn) << " " << in.as<float>()[k] << ": " << g << " vs " << w;
    }
  }
}

// MathFn::tf32 in the emitted code is bit for bit the interpreter's round_to_tf32, on a
// vector loop and a scalar one, ties, infinities and NaN among the values.
TEST_F(LlvmSemantics, Tf32RoundingMatchesTheInterpreterBitForBit) {
  std::vector<float> xs = {
      0.0f,      -0.0f, 1.0f,  1.0f + std::ldexp(1.0f, -11), -(1.0f + std::ldexp(1.0f, -11)), 3.4028235e38f, INFINITY,
      -INFINITY, NAN,   1e-40f};
  for (int k = 0; k < 4000; ++k) xs.push_back(std::ldexp(static_cast<float>(k) - 2000.0f, (k % 41) - 20) / 3.0f);
  expect_rounding_matches(MathFn::tf32, xs);
}

// MathFn::fp16 and bf16 likewise: binary16's subnormals and overflow, ties, NaN.
TEST_F(LlvmSemantics, Fp16AndBf16RoundingMatchTheInterpreterBitForBit) {
  std::vector<float> xs = {
      0.0f,      -0.0f, 1.0f + std::ldexp(1.0f, -11), 65504.0f, 65520.0f, 3.4028235e38f, 1e-40f, INFINITY,
      -INFINITY, NAN,   std::ldexp(1.0f, -25)};
  for (int k = 0; k < 4000; ++k) xs.push_back(std::ldexp(static_cast<float>(k) - 2000.0f, (k % 61) - 40) / 3.0f);
  for (MathFn fn : {MathFn::fp16, MathFn::bf16}) expect_rounding_matches(fn, xs);
}

// A float cast to an 8-bit integer saturates to its range, toward zero, NaN giving 0,
// in the emitted code as in the interpreter, vector and scalar; a vector converts as one
// (a scalar conversion per lane made quantized kernels' epilogues cost more than their products),
// and a float cast to one and back (a quantization undone in one kernel) stays float code.
TEST_F(LlvmSemantics, FloatToEightBitCastsSaturate) {
  const std::vector<float> xs = {NAN,     INFINITY, -INFINITY, 300.0f, -300.0f, 254.9f, -1.5f,  127.9f,
                                 -128.9f, 0.5f,     7.0f,      -0.0f,  1e30f,   -1e30f, 128.0f, 255.0f};
  const float want_u8[] = {0, 255, 0, 255, 0, 254, 0, 127, 0, 0, 7, 0, 255, 0, 128, 255};
  const float want_i8[] = {0, 127, -128, 127, -128, 127, -1, 127, -128, 0, 7, 0, 127, -128, 127, 127};
  for (DType t : {DType::u8(), DType::i8()})
    for (ForKind kind : {ForKind::Vectorized, ForKind::Serial}) {
      Var o("o"), l("l");
      Buffer x = make_buffer("x", DType::f32(), {Expr(16)});
      Buffer out = make_buffer("out", DType::f32(), {Expr(16)});
      const Expr at = o * 8 + l;
      Stmt body = make_for(o, 0, 2, ForKind::Serial,
                           make_for(l, 0, 8, kind, make_store(out, {at}, cast(DType::f32(), cast(t, load(x, {at}))))));
      NDArray in(DType::f32(), {16});
      for (int k = 0; k < 16; ++k) in.as<float>()[k] = xs[static_cast<size_t>(k)];
      NDArray want, got;
      const LoweredFunc f{"sat", {x, out}, {1}, body};
      LlvmSemantics::both(f, {in}, {16}, DType::f32(), &want, &got);
      if (kind == ForKind::Vectorized) {  // one vector conversion, not one per lane
        codegen::LlvmOptions keep;
        keep.keep_asm = true;
        const std::string assembly = codegen::compile_llvm(f, keep)->assembly();
        EXPECT_EQ(assembly.find("cvttss2si"), std::string::npos) << t.str() << ":\n" << assembly;
        EXPECT_EQ(assembly.find("cvttps2dq"), std::string::npos) << t.str() << ":\n" << assembly;
      }
      for (int k = 0; k < 16; ++k) {
        const float expected = t.is_uint() ? want_u8[k] : want_i8[k];
        EXPECT_EQ(want.as<float>()[k], expected) << t.str() << " interpreter " << xs[static_cast<size_t>(k)];
        EXPECT_EQ(got.as<float>()[k], expected) << t.str() << " compiled " << xs[static_cast<size_t>(k)];
      }
    }
}

// A quantized value (an integer in float32) cast to 8 bits and back is saturated but
// not rounded again: one rounding instruction per vector, the rint's.
TEST_F(LlvmSemantics, AnIntegerThroughEightBitsIsNotRoundedAgain) {
  Var i("i");
  Buffer x = make_buffer("x", DType::f32(), {Expr(64)});
  Buffer out = make_buffer("out", DType::f32(), {Expr(64)});
  const Expr q = call(MathFn::rint, {load(x, {i}) * Expr(0.5)}) + Expr(3.0);
  Stmt body = make_for(i, 0, 64, ForKind::Vectorized, make_store(out, {i}, cast(DType::f32(), cast(DType::u8(), q))));
  const LoweredFunc f{"requant", {x, out}, {1}, body};
  NDArray in(DType::f32(), {64});
  for (int k = 0; k < 64; ++k) in.as<float>()[k] = 9.3f * static_cast<float>(k) - 40.0f;
  in.as<float>()[0] = NAN;
  in.as<float>()[1] = 1e30f;
  NDArray want, got;
  LlvmSemantics::both(f, {in}, {64}, DType::f32(), &want, &got);
  EXPECT_EQ(compare_arrays(got, want).max_abs, 0.0);
  EXPECT_EQ(want.as<float>()[0], 0.0f);
  EXPECT_EQ(want.as<float>()[1], 255.0f);
  // As many rounding instructions as the kernel storing the rint's value itself.
  auto roundings = [](const LoweredFunc& k, std::string* assembly) {
    codegen::LlvmOptions keep;
    keep.keep_asm = true;
    *assembly = codegen::compile_llvm(k, keep)->assembly();
    int n = 0;
    for (const char* m : {"vrndscaleps", "vroundps"})
      for (size_t p = assembly->find(m); p != std::string::npos; p = assembly->find(m, p + 1)) ++n;
    return n;
  };
  const LoweredFunc plain{"rint", {x, out}, {1}, make_for(i, 0, 64, ForKind::Vectorized, make_store(out, {i}, q))};
  std::string assembly, plain_assembly;
  const int n = roundings(f, &assembly);
  EXPECT_GT(n, 0);
  EXPECT_EQ(n, roundings(plain, &plain_assembly)) << assembly;
}

// fake_quantize's round trip, float(uint8(q + z)) - z of a rounded q and a clamped zero
// point, is q saturated to [-z, 255 - z]: no vector subtraction of z nor conversion to
// integers, the same bits as the interpreter (NaN, saturation both ways, -0 from small
// negatives, zero points 0 to 255).
TEST_F(LlvmSemantics, AQuantizationRoundTripIsOneSaturation) {
  for (int zero : {0, 131, 255}) {
    Var i("i");
    Buffer x = make_buffer("x", DType::f32(), {Expr(64)});
    Buffer zp = make_buffer("zp", DType::i32(), {Expr(1)});
    Buffer out = make_buffer("out", DType::f32(), {Expr(64)});
    const Expr z =
        cast(DType::f32(), max(min(load(zp, {Expr(0)}), int_imm(DType::i32(), 255)), int_imm(DType::i32(), 0)));
    const Expr q = call(MathFn::rint, {load(x, {i}) / Expr(0.25)});
    const Expr fq = (cast(DType::f32(), cast(DType::u8(), q + z)) - z) * Expr(0.25);
    const LoweredFunc f{"fq", {x, zp, out}, {2}, make_for(i, 0, 64, ForKind::Vectorized, make_store(out, {i}, fq))};
    NDArray in(DType::f32(), {64}), zpa(DType::i32(), {1});
    for (int k = 0; k < 64; ++k) in.as<float>()[k] = 1.37f * static_cast<float>(k) - 40.0f;
    in.as<float>()[0] = NAN;
    in.as<float>()[1] = INFINITY;
    in.as<float>()[2] = -INFINITY;
    in.as<float>()[3] = 0.125f;  // a tie: rounds to even
    in.as<float>()[4] = -0.05f;  // rounds to -0
    zpa.as<int32_t>()[0] = zero;
    NDArray want, got;
    LlvmSemantics::both(f, {in, zpa}, {64}, DType::f32(), &want, &got);
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.nbytes()), 0) << "zero point " << zero;
    EXPECT_EQ(want.as<float>()[0], -0.25f * static_cast<float>(zero));
    EXPECT_EQ(want.as<float>()[1], 0.25f * static_cast<float>(255 - zero));
    codegen::LlvmOptions keep;
    keep.keep_asm = true;
    const std::string assembly = codegen::compile_llvm(f, keep)->assembly();
    for (const char* op : {"vsubps", "cvttps2dq", "cvtdq2ps"})
      EXPECT_EQ(assembly.find(op), std::string::npos) << op << ":\n" << assembly;
  }
}

// A kernel reading or writing 8-bit integers rounds each float operation as written (no
// multiply-add fused where the graph rounds twice: the next quantization would see the
// other side of a tie); a float32 kernel may fuse them.
TEST_F(LlvmSemantics, QuantizedKernelsRoundEachOperation) {
  for (DType t : {DType::u8(), DType::f32()}) {
    Var i("i");
    Buffer a = make_buffer("a", DType::f32(), {Expr(64)});
    Buffer b = make_buffer("b", DType::f32(), {Expr(64)});
    Buffer out = make_buffer("out", t, {Expr(64)});
    const Expr sum = load(a, {i}) * load(b, {i}) + load(b, {i});
    Stmt body = make_for(i, 0, 64, ForKind::Vectorized, make_store(out, {i}, t.is_float() ? sum : cast(t, sum)));
    codegen::LlvmOptions keep;
    keep.keep_asm = true;
    const std::string assembly = codegen::compile_llvm(LoweredFunc{"madd", {a, b, out}, {2}, body}, keep)->assembly();
    const bool fused = assembly.find("vfmadd") != std::string::npos;
    const std::string& isa = this_host().vector_isa;
    if (isa != "avx2" && isa != "avx512") continue;  // x86 with FMA3
    EXPECT_EQ(fused, t.is_float()) << t.str() << ":\n" << assembly;
  }
}

// MathFn::rint (ONNX's Round, quantization's rounding) rounds ties to even, in the
// emitted code as in the interpreter: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -2.5 -> -2.
TEST_F(LlvmSemantics, RintRoundsTiesToEvenAsTheInterpreter) {
  std::vector<float> xs = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 8388607.5f, 3.4028235e38f, INFINITY, -INFINITY, NAN};
  for (int k = 0; k < 4000; ++k) xs.push_back((static_cast<float>(k) - 2000.0f) / 4.0f);
  expect_rounding_matches(MathFn::rint, xs);
  NDArray in = in_lanes({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.49f, -3.51f});
  NDArray want, got;
  LlvmSemantics::both(unary_map("rint", 8, ForKind::Vectorized, MathFn::rint), {in}, {8}, DType::f32(), &want, &got);
  const float expected[] = {0, 2, 2, -0.0f, -2, -2, 3, -4};
  for (int k = 0; k < 8; ++k) EXPECT_EQ(got.as<float>()[k], expected[k]) << k;
}
// bfloat16 storage (DType::bf16): a store rounds a float32 to it (ties to even, NaN
// kept a NaN, a subnormal to zero), a load casts back exactly; the emitted code
// (vcvtneps2bf16 on vectors where the CPU has AVX512-BF16) agrees with the interpreter
// bit for bit, on vectors of 8 and 16 lanes and scalar loops, and both with
// bf16_bits/bf16_value.
TEST_F(LlvmSemantics, Bfloat16StorageRoundsAsTheInterpreterDoes) {
  std::vector<float> xs = {0.0f,
                           -0.0f,
                           1.0f,
                           1.0f + std::ldexp(1.0f, -8),
                           1.0f + 3 * std::ldexp(1.0f, -8),
                           3.4028235e38f,
                           1e-40f,
                           INFINITY,
                           -INFINITY,
                           NAN,
                           -NAN,
                           std::ldexp(1.0f, -130),
                           -std::ldexp(1.0f, -140),
                           -1e-40f,
                           1.5f * std::ldexp(1.0f, -127),
                           -1.0f - std::ldexp(1.0f, -8)};  // 16 values: the lanes' multiple
  for (int k = 0; k < 4000; ++k) xs.push_back(std::ldexp(static_cast<float>(k) - 2000.0f, (k % 61) - 40) / 3.0f);
  NDArray in = in_lanes(xs);
  const int64_t n = in.numel();
  for (const int64_t lanes : {8, 16, 0}) {
    const ForKind kind = lanes ? ForKind::Vectorized : ForKind::Serial;
    const int64_t w = lanes ? lanes : 8;
    ASSERT_EQ(n % w, 0);
    Var o("o"), l("l");
    Buffer x = make_buffer("x", DType::f32(), {Expr(n)});
    Buffer h = make_buffer("h", DType::bf16(), {Expr(n)});
    Buffer out = make_buffer("out", DType::f32(), {Expr(n)});
    Expr at = o * w + l;
    Stmt body = make_seq({make_for(o, 0, n / w, ForKind::Serial,
                                   make_for(l, 0, w, kind, make_store(h, {at}, cast(DType::bf16(), load(x, {at}))))),
                          make_for(o, 0, n / w, ForKind::Serial,
                                   make_for(l, 0, w, kind, make_store(out, {at}, cast(DType::f32(), load(h, {at})))))});
    LoweredFunc f{"bf16_round_trip", {x, out}, {1}, make_allocate(h, body)};
    NDArray want, got;
    both(f, {in}, {n}, DType::f32(), &want, &got);
    for (int64_t k = 0; k < n; ++k) {
      const float v = in.as<float>()[k], w = want.as<float>()[k], g = got.as<float>()[k];
      if (std::isnan(v)) {
        EXPECT_TRUE(std::isnan(w) && std::isnan(g)) << k;
        continue;
      }
      EXPECT_EQ(std::memcmp(&w, &g, 4), 0) << v << ": " << g << " vs " << w;
      // A subnormal float stores as a zero of its sign, as vcvtneps2bf16 rounds.
      const bool subnormal = v != 0 && std::fabs(v) < std::numeric_limits<float>::min();
      EXPECT_EQ(w, subnormal ? std::copysign(0.0f, v) : round_to_bf16(v)) << v;
      if (subnormal) EXPECT_EQ(std::signbit(w), std::signbit(v)) << v;
      EXPECT_EQ(bf16_value(bf16_bits(v)), w) << v;
    }
  }
  // Ties go to the even neighbour.
  EXPECT_EQ(bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
}

// A store under kBf16DotPragma in a vector loop of 16, 32 and 8 lanes (one, two and half
// a 512-bit vdpbf16ps), and with a pair that is not adjacent (emitted as written): the
// same results as the interpreter, which runs the products in float32.
TEST_F(LlvmSemantics, Bfloat16PairProductsMatchTheInterpreter) {
  for (int64_t lanes : {16, 32, 8, 12}) {
    for (int64_t gap : {1, 3}) {
      const int64_t pairs = 10;
      Var k("k"), l("l");
      Buffer a = make_buffer("a", DType::bf16(), {Expr(2 * pairs + 4)});
      Buffer b = make_buffer("b", DType::bf16(), {Expr(pairs * lanes * 2)});
      Buffer out = make_buffer("out", DType::f32(), {Expr(lanes)});
      auto ld = [](const Buffer& x, Expr i) { return cast(DType::f32(), load(x, {std::move(i)})); };
      Expr a0 = ld(a, k * 2), a1 = ld(a, k * 2 + gap);
      Expr b0 = ld(b, (k * lanes + l) * 2), b1 = ld(b, (k * lanes + l) * 2 + 1);
      Stmt upd =
          make_pragma(kBf16DotPragma, Expr(1), make_store(out, {Expr(l)}, (load(out, {Expr(l)}) + a1 * b1) + a0 * b0));
      Stmt body = make_seq({make_for(l, 0, lanes, ForKind::Vectorized, make_store(out, {Expr(l)}, Expr(0.5))),
                            make_for(k, 0, pairs, ForKind::Serial, make_for(l, 0, lanes, ForKind::Vectorized, upd))});
      LoweredFunc f{"dot2", {a, b, out}, {2}, body};
      NDArray av = NDArray::random(DType::bf16(), {2 * pairs + 4}, -2, 2, 7);
      NDArray bv = NDArray::random(DType::bf16(), {pairs * lanes * 2}, -2, 2, 8);
      NDArray want, got;
      both(f, {av, bv}, {lanes}, DType::f32(), &want, &got);
      ErrorStats e = compare_arrays(got, want);
      EXPECT_LE(e.max_rel, 1e-6) << lanes << " lanes, gap " << gap;
    }
  }
}

// A store under kInt8DotPragma in a vector loop of 16, 32, 8 and 12 lanes (one, two and
// half a 512-bit vpdpbusd, three 128-bit ones), and with a group that is not adjacent
// (emitted as written): exactly the interpreter's int32 sums, extreme bytes included
// (255 x -128). Where the CPU has vpdpbusd (HostInfo::int8_dot) the adjacent groups
// compile to it; compiled as for a CPU without it (vpmaddwd), the same sums.
TEST_F(LlvmSemantics, Int8QuadProductsMatchTheInterpreter) {
  for (int64_t lanes : {16, 32, 8, 12}) {
    for (int64_t gap : {1, 3}) {
      const int64_t groups = 9;
      Var k("k"), l("l");
      Buffer a = make_buffer("a", DType::u8(), {Expr(4 * groups + 12)});
      Buffer b = make_buffer("b", DType::i8(), {Expr(groups * lanes * 4)});
      Buffer out = make_buffer("out", DType::i32(), {Expr(lanes)});
      auto ld = [](const Buffer& x, Expr i) { return cast(DType::i32(), load(x, {std::move(i)})); };
      Expr sum = load(out, {Expr(l)});
      for (int64_t q = 0; q < 4; ++q) sum = sum + ld(a, k * 4 + q * gap) * ld(b, (k * lanes + l) * 4 + q);
      Stmt upd = make_pragma(kInt8DotPragma, Expr(1), make_store(out, {Expr(l)}, sum));
      Stmt body = make_seq(
          {make_for(l, 0, lanes, ForKind::Vectorized, make_store(out, {Expr(l)}, make_const(DType::i32(), -7))),
           make_for(k, 0, groups, ForKind::Serial, make_for(l, 0, lanes, ForKind::Vectorized, upd))});
      LoweredFunc f{"dot4", {a, b, out}, {2}, body};
      NDArray av = NDArray::random(DType::u8(), {4 * groups + 12}, 0, 256, 7);
      NDArray bv = NDArray::random(DType::i8(), {groups * lanes * 4}, -128, 128, 8);
      av.set_int(0, 255);
      bv.set_int(0, -128);
      NDArray want, got;
      both(f, {av, bv}, {lanes}, DType::i32(), &want, &got);
      for (int64_t i = 0; i < lanes; ++i)
        ASSERT_EQ(got.get_int(i), want.get_int(i)) << lanes << " lanes, gap " << gap << ", lane " << i;
      if (gap == 1 && this_host().int8_dot) {
        codegen::LlvmOptions keep;
        keep.keep_ir = true;
        EXPECT_NE(codegen::compile_llvm(f, keep)->llvm_ir().find("vpdpbusd"), std::string::npos) << lanes << " lanes";
      }
      // What a CPU without VNNI runs: vpmaddwd on 16-bit values, the same sums.
      const std::string isa = this_host().vector_isa;
      if (isa == "avx2" || isa == "avx512") {
        codegen::LlvmOptions madd;
        madd.int8_without_vnni = true;
        madd.keep_ir = true;
        auto k = codegen::compile_llvm(f, madd);
        NDArray a2 = av.clone(), b2 = bv.clone(), out2(DType::i32(), {lanes});
        k->run({&a2, &b2, &out2});
        for (int64_t i = 0; i < lanes; ++i)
          ASSERT_EQ(out2.get_int(i), want.get_int(i)) << "vpmaddwd, " << lanes << " lanes, gap " << gap;
        if (gap == 1) EXPECT_NE(k->llvm_ir().find("pmadd"), std::string::npos) << lanes << " lanes";
        EXPECT_EQ(k->llvm_ir().find("vpdpbusd"), std::string::npos);
      }
    }
  }
}

// Lanes alternating between two rows, out[o, e] = x[(e % 2) * S + o * L + e / 2] (a
// bfloat16 pair copy): two contiguous loads interleaved, the same values as the
// interpreter, for several vector widths, from an even first lane and, for a loop
// starting at an odd lane, the general path.
TEST_F(LlvmSemantics, InterleavedRowsMatchTheInterpreter) {
  for (int64_t lanes : {32, 16, 8, 6}) {
    for (int64_t start : {0, 1}) {
      const int64_t chunks = 5, row = chunks * lanes / 2 + 1;
      Var o("o"), e("e");
      Buffer x = make_buffer("x", DType::f32(), {Expr(2 * row)});
      Buffer out = make_buffer("out", DType::f32(), {Expr(chunks * lanes + 1)});
      Expr ix = floormod(Expr(e), Expr(2)) * row + Expr(o) * (lanes / 2) + floordiv(Expr(e), Expr(2));
      Stmt body = make_for(
          o, 0, chunks, ForKind::Serial,
          make_for(e, start, lanes, ForKind::Vectorized, make_store(out, {Expr(o) * lanes + e}, load(x, {ix}))));
      LoweredFunc f{"interleave", {x, out}, {1}, body};
      NDArray xv = NDArray::random(DType::f32(), {2 * row}, -2, 2, 9);
      NDArray want, got;
      both(f, {xv}, {chunks * lanes + 1}, DType::f32(), &want, &got);
      EXPECT_EQ(compare_arrays(got, want).max_abs, 0.0) << lanes << " lanes from " << start;
    }
  }
}

TEST_F(LlvmSemantics, SelectDoesNotEvaluateTheGuardedLoad) {
  // out[i] = i < 4 ? x[i] : 0 over 1M elements of a 4-element buffer: an eager load
  // would read far outside x.
  Var i("i");
  Buffer x = make_buffer("x", DType::f32(), {Expr(4)});
  Buffer out = make_buffer("out", DType::f32(), {Expr(1 << 20)});
  Stmt body =
      make_for(i, 0, 1 << 20, ForKind::Serial, make_store(out, {i * 1}, select(lt(i, 4), load(x, {i}), fconst(0))));
  LoweredFunc f{"guard", {x, out}, {1}, body};
  NDArray xa = NDArray::random(DType::f32(), {4}, -1, 1, 3);
  NDArray o, c;
  both(f, {xa}, {1 << 20}, DType::f32(), &o, &c);
  EXPECT_EQ(c.as<float>()[0], xa.as<float>()[0]);
  EXPECT_EQ(c.as<float>()[5], 0.0f);
}

// float32 exp, sigmoid, tanh and erf are polynomials in the emitted code: against the
// interpreter's libm over the whole float range (denormal-free), on a vector loop and a
// scalar one, with the special values (overflow, underflow, saturation, erf's clamp at
// 4, infinities, NaN), densely over erf's fitted range, and no call left per lane.
TEST_F(LlvmSemantics, MathFunctionsArePolynomialsAccurateOverTheWholeRange) {
  std::vector<float> xs = {0.0f,  -0.0f,  1e-30f, -1e-30f, 1e-7f,   0.4999999f, 0.5f,   0.5000001f, -0.5f,     1.0f,
                           -1.0f, 3.9f,   -3.9f,  8.9f,    9.1f,    -9.1f,      20.0f,  80.0f,      88.7f,     88.8f,
                           89.0f, -87.3f, -87.4f, -100.0f, -200.0f, 1e30f,      -1e30f, INFINITY,   -INFINITY, NAN};
  for (int k = 0; k < 4000; ++k) xs.push_back(-12.0f + 24.0f * static_cast<float>(k) / 4000.0f);
  for (int k = 0; k < 20000; ++k) xs.push_back(-4.5f + 9.0f * static_cast<float>(k) / 20000.0f);
  for (float x : {3.99f, 4.0f, 4.01f, -4.0f}) xs.push_back(x);
  for (int k = 0; k < 2000; ++k) xs.push_back(-90.0f + 180.0f * static_cast<float>(k) / 2000.0f);
  NDArray in = in_lanes(xs, 16);
  const int64_t n = in.numel();
  // Vectors of 8 and 16: the reciprocal estimates of AVX (vrcpps) and AVX-512 (vrcp14ps).
  for (MathFn fn : {MathFn::exp, MathFn::sigmoid, MathFn::tanh, MathFn::erf}) {
    for (auto [kind, lanes] : {std::pair{ForKind::Vectorized, 8}, {ForKind::Vectorized, 16}, {ForKind::Serial, 8}}) {
      LoweredFunc f = unary_map("math", n, kind, fn, lanes);
      NDArray want, got;
      both(f, {in}, {n}, DType::f32(), &want, &got);
      const std::string what = std::string(math_fn_name(fn)) +
                               (kind == ForKind::Vectorized ? " vector of " + std::to_string(lanes) : " scalar");
      for (int64_t k = 0; k < n; ++k) {
        float w = want.as<float>()[k], g = got.as<float>()[k], x0 = in.as<float>()[k];
        if (std::isnan(w)) {
          EXPECT_TRUE(std::isnan(g)) << what << "(" << x0 << ") = " << g;
          continue;
        }
        if (std::isinf(w)) {
          EXPECT_EQ(g, w) << what << "(" << x0 << ")";
          continue;
        }
        // Exactly 0 where the true value is (a 2.9e-39 here made 1 / sigmoid(-inf) finite).
        if (fn == MathFn::sigmoid && x0 < -104.0f) EXPECT_EQ(g, 0.0f) << what << "(" << x0 << ")";
        // A few ulp of the result, or of the smallest normal float where it underflows.
        double tol = 4e-7 * std::max(std::fabs(static_cast<double>(w)), 1.2e-38 / 4e-7);
        if (fn == MathFn::erf) tol = std::max(tol, 2.5e-7);  // 1 - erfc: ulps of 1
        EXPECT_LE(std::fabs(static_cast<double>(g) - w), tol) << what << "(" << x0 << "): " << g << " vs " << w;
      }
      codegen::LlvmOptions keep;
      keep.keep_ir = true;
      std::string ir = codegen::compile_llvm(f, keep)->llvm_ir();
      for (const char* libm : {"@expf", "@tanhf", "@erff", "@llvm.exp."})
        EXPECT_EQ(ir.find(libm), std::string::npos) << what << " calls " << libm;
    }
  }
}

TEST_F(LlvmSemantics, Int32WrapsBoolsAndCasts) {
  Var i("i");
  Buffer x = make_buffer("x", DType::i32(), {Expr(4)});
  Buffer flags = make_buffer("flags", DType::boolean(), {Expr(4)});
  Buffer out = make_buffer("out", DType::f32(), {Expr(4)});
  Expr wrapped = load(x, {i}) + int_imm(DType::i32(), 2147483647);
  Expr v = select(load(flags, {i}), cast(DType::f32(), wrapped), fconst(-1));
  Stmt body =
      make_for(i, 0, 4, ForKind::Serial,
               make_seq({make_store(flags, {i}, lt(load(x, {i}), int_imm(DType::i32(), 2))), make_store(out, {i}, v)}));
  LoweredFunc f{"wrap", {x, flags, out}, {2}, body};
  NDArray xa(DType::i32(), {4}), fa(DType::boolean(), {4});
  for (int k = 0; k < 4; ++k) xa.set(k, k);
  NDArray o, c;
  both(f, {xa, fa}, {4}, DType::f32(), &o, &c);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(o.as<float>()[k], c.as<float>()[k]) << k;
  EXPECT_EQ(c.as<float>()[1], -2147483648.0f);  // 1 + INT32_MAX wraps
  EXPECT_EQ(c.as<float>()[3], -1.0f);
}

TEST_F(LlvmSemantics, BarrierIsRejectedWithAClearError) {
  Var t("t");
  Buffer out = make_buffer("out", DType::f32(), {Expr(4)});
  LoweredFunc f{"sync",
                {out},
                {0},
                make_for(t, 0, 4, ForKind::ThreadX, make_seq({make_barrier(), make_store(out, {t}, fconst(1))}))};
  EXPECT_THROW(codegen::compile_llvm(f), Error);
}

// The size limit (LlvmOptions::max_instructions) counts the instructions emitted: a
// program of exactly the limit compiles, one more is refused before optimization with
// an error that names both numbers; no limit compiles anything.
TEST_F(LlvmSemantics, AProgramOverTheInstructionLimitIsRefusedWithItsSize) {
  ops::OpGraph g = ops::build_op("add", {{"a_shape", "5,7"}, {"b_shape", "5,7"}});
  LoweredFunc f = lower_default("add", g.inputs, g.outputs);
  const int64_t size = codegen::compile_llvm(f)->emitted_instructions();
  ASSERT_GT(size, 1);
  codegen::LlvmOptions at;
  at.max_instructions = size;
  EXPECT_EQ(codegen::compile_llvm(f, at)->emitted_instructions(), size);
  codegen::LlvmOptions under;
  under.max_instructions = size - 1;
  try {
    codegen::compile_llvm(f, under);
    ADD_FAILURE() << "a program over the limit compiled";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("too large to compile: " + std::to_string(size) + " LLVM instructions"), std::string::npos)
        << what;
    EXPECT_NE(what.find("limit of " + std::to_string(size - 1)), std::string::npos) << what;
  }
}

TEST_F(LlvmSemantics, SmallConstantLoopsAreUnrolledAndTheirAccumulatorsPromoted) {
  // A local accumulator indexed by a 4-trip serial loop inside a reduction loop (a tiling
  // level that basin's unroll depth left a loop): the pipeline unrolls the small loops
  // fully, so every index is a constant and the accumulator lives in registers, with no
  // stack slot left. Left a loop, every addition stored to the stack (resnet18-c12's
  // packed programs ran up to 2.4 times slower; docs/PERFORMANCE.md@6bf7154,
  // "Small loops unrolled by LLVM").
  Var j("j"), k("k"), r("r"), w("w");
  Buffer x = make_buffer("x", DType::f32(), {Expr(256)});
  Buffer out = make_buffer("out", DType::f32(), {Expr(4)});
  Buffer acc = make_buffer("acc", DType::f32(), {Expr(4)}, MemScope::Local);
  Stmt init = make_for(j, 0, 4, ForKind::Serial, make_store(acc, {j * 1}, fconst(0)));
  Stmt reduce =
      make_for(k, 0, 64, ForKind::Serial,
               make_for(r, 0, 4, ForKind::Serial, make_store(acc, {r * 1}, load(acc, {r * 1}) + load(x, {k * 4 + r}))));
  Stmt write = make_for(w, 0, 4, ForKind::Serial, make_store(out, {w * 1}, load(acc, {w * 1})));
  LoweredFunc f{"accumulate", {x, out}, {1}, make_allocate(acc, make_seq({init, reduce, write}))};
  NDArray xa = NDArray::random(DType::f32(), {256}, -1, 1, 5);
  NDArray o, c;
  both(f, {xa}, {4}, DType::f32(), &o, &c);
  for (int q = 0; q < 4; ++q) EXPECT_NEAR(o.as<float>()[q], c.as<float>()[q], 1e-4) << q;
  codegen::LlvmOptions keep;
  keep.keep_ir = true;
  const std::string ir = codegen::compile_llvm(f, keep)->llvm_ir();
  EXPECT_EQ(ir.find("alloca"), std::string::npos) << ir;
}

// A packing stage, packed[o, k, l] = w[o * 16 + l, k]: its rows' loads step by the
// weight's row length. The backend makes the copy loop a vector loop (partition_loops)
// and loads such a stride one lane at a time, not by a gather (2 to 3 times slower on
// Zen 4); a vector loop's strided store likewise; both against the interpreter.
TEST_F(LlvmSemantics, StridedVectorLoadsAndStoresAreOneLaneAtATimeAndCorrect) {
  Var o("o"), k("k"), l("l");
  constexpr int64_t K = 37, L = 16, O = 3;
  Buffer w = make_buffer("w", DType::f32(), {Expr(O * L * K)});
  Buffer out = make_buffer("out", DType::f32(), {Expr(O * K * L)});
  Stmt pack = make_for(o, 0, O, ForKind::Serial,
                       make_for(k, 0, K, ForKind::Serial,
                                make_for(l, 0, L, ForKind::Serial,
                                         make_store(out, {o * (K * L) + k * L + l}, load(w, {(o * L + l) * K + k})))));
  LoweredFunc f{"pack", {w, out}, {1}, pack};
  NDArray wa = NDArray::random(DType::f32(), {O * L * K}, -1, 1, 6);
  NDArray want, got;
  both(f, {wa}, {O * K * L}, DType::f32(), &want, &got);
  EXPECT_EQ(compare_arrays(got, want).max_abs, 0);
  codegen::LlvmOptions keep;
  keep.keep_ir = true;
  std::string ir = codegen::compile_llvm(f, keep)->llvm_ir();
  EXPECT_EQ(ir.find("gather"), std::string::npos) << ir;
  EXPECT_NE(ir.find("store <16 x float>"), std::string::npos) << "the copy loop is not a vector loop:\n" << ir;
  // The transpose the other way: a vector loop storing with a stride (a scatter before).
  Stmt unpack = make_for(
      o, 0, O, ForKind::Serial,
      make_for(k, 0, K, ForKind::Serial,
               make_for(l, 0, L, ForKind::Vectorized,
                        make_store(out, {(o * L + l) * K + k}, load(w, {o * (K * L) + k * L + l}) * fconst(2)))));
  LoweredFunc g{"unpack", {w, out}, {1}, unpack};
  both(g, {wa}, {O * K * L}, DType::f32(), &want, &got);
  EXPECT_EQ(compare_arrays(got, want).max_abs, 0);
  ir = codegen::compile_llvm(g, keep)->llvm_ir();
  EXPECT_EQ(ir.find("scatter"), std::string::npos) << ir;
}

// Loads with a small stride in the vector loop (a stride-2 convolution's input along its
// width) are contiguous vector loads and a shuffle that reads nothing past the last
// lane's element: against the interpreter, for strides 2 to 4 and at the very end of
// the buffer.
TEST_F(LlvmSemantics, SmallStridedLoadsAreShuffledVectorLoadsAndCorrect) {
  for (int64_t stride : {2, 3, 4}) {
    constexpr int64_t L = 8, R = 5;
    const int64_t n = R * L * stride - (stride - 1);  // the last row's last lane is the last element
    Var r("r"), l("l");
    Buffer x = make_buffer("x", DType::f32(), {Expr(n)});
    Buffer out = make_buffer("out", DType::f32(), {Expr(R * L)});
    Stmt body = make_for(r, 0, R, ForKind::Serial,
                         make_for(l, 0, L, ForKind::Vectorized,
                                  make_store(out, {r * L + l}, load(x, {r * (L * stride) + l * stride}) + fconst(1))));
    LoweredFunc f{"strided", {x, out}, {1}, body};
    NDArray xa = NDArray::random(DType::f32(), {n}, -1, 1, 8);
    NDArray want, got;
    both(f, {xa}, {R * L}, DType::f32(), &want, &got);
    EXPECT_EQ(compare_arrays(got, want).max_abs, 0) << "stride " << stride;
    codegen::LlvmOptions keep;
    keep.keep_ir = true;
    std::string ir = codegen::compile_llvm(f, keep)->llvm_ir();
    EXPECT_NE(ir.find("shufflevector"), std::string::npos) << ir;
    EXPECT_EQ(ir.find("gather"), std::string::npos) << ir;
  }
}

// Register tiles whose loads are guarded (an inlined padded input, core/ir/version_tiles.h),
// stride 1 and 2: interior tiles unguarded, border tiles inside the buffer unmasked
// under the pragma, the first and last rows' border tiles masked (the stride-2 loads
// masked and shuffled, no gather). The input fills one page between two inaccessible
// pages, so a read before or after it faults. Against the interpreter.
TEST_F(LlvmSemantics, GuardedTilesReadOnlyInsideTheirBuffer) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  constexpr int64_t rows = 4;
  const int64_t width = static_cast<int64_t>(page / sizeof(float)) / rows;
  char* region = static_cast<char*>(mmap(nullptr, 3 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(region, MAP_FAILED);
  ASSERT_EQ(mprotect(region + page, page, PROT_READ | PROT_WRITE), 0);
  float* xs = reinterpret_cast<float*>(region + page);
  for (int64_t stride : {1, 2}) {
    LoweredFunc f = testing::guarded_tiles(rows, width, stride, 8);
    NDArray xa = NDArray::random(DType::f32(), {rows * width}, -1, 1, 3);
    std::copy(xa.as<float>(), xa.as<float>() + rows * width, xs);
    const int64_t n = rows * (width / stride);
    NDArray want(DType::f32(), {n}), got(DType::f32(), {n});
    interpret(f, {&xa, &want});
    codegen::LlvmOptions keep;
    keep.keep_ir = true;
    auto k = codegen::compile_llvm(f, keep);
    void* args[] = {xs, got.data()};
    k->run_raw(args);
    EXPECT_EQ(compare_arrays(got, want).max_abs, 0) << "stride " << stride;
    const std::string& ir = k->llvm_ir();
    EXPECT_NE(ir.find("masked.load"), std::string::npos) << ir;
    EXPECT_EQ(ir.find("gather"), std::string::npos) << ir;
  }
  munmap(region, 3 * page);
}

// A select whose condition is the same for every lane (a concatenation's rows: which
// input the row comes from) between loads that vary across lanes is a branch between
// whole vectors: the side not taken touches no memory. As masked loads, its disabled
// lanes addressed the other input's buffer tens of KB off its ends, pages that may not
// be mapped, where masked loads take the CPU's slow path (shufflenet's 232-channel
// concat: 238 us in the network, 11 us alone). Each input fills one page between two
// inaccessible ones, so that a read outside it faults. Against the interpreter.
TEST_F(LlvmSemantics, AUniformSelectBetweenVectorLoadsReadsOneSide) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const int64_t width = 14, rows = static_cast<int64_t>(page / sizeof(float)) / width;
  char* region = static_cast<char*>(mmap(nullptr, 5 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(region, MAP_FAILED);
  ASSERT_EQ(mprotect(region + page, page, PROT_READ | PROT_WRITE), 0);
  ASSERT_EQ(mprotect(region + 3 * page, page, PROT_READ | PROT_WRITE), 0);
  Var r("r"), v("v");
  Buffer a = make_buffer("a", DType::f32(), {Expr(rows * width)});
  Buffer b = make_buffer("b", DType::f32(), {Expr(rows * width)});
  Buffer out = make_buffer("out", DType::f32(), {Expr(2 * rows * width)});
  Expr value = select(lt(r, Expr(rows)), load(a, {r * width + v}), load(b, {(r - rows) * width + v}));
  Stmt nest = make_for(r, 0, 2 * rows, ForKind::Parallel,
                       make_for(v, 0, width, ForKind::Vectorized, make_store(out, {r * width + v}, value)));
  LoweredFunc f{"concat", {a, b, out}, {2}, nest};
  NDArray aa = NDArray::random(DType::f32(), {rows * width}, -1, 1, 4);
  NDArray ba = NDArray::random(DType::f32(), {rows * width}, -1, 1, 5);
  float* as = reinterpret_cast<float*>(region + page);
  float* bs = reinterpret_cast<float*>(region + 3 * page);
  std::copy(aa.as<float>(), aa.as<float>() + rows * width, as);
  std::copy(ba.as<float>(), ba.as<float>() + rows * width, bs);
  NDArray want(DType::f32(), {2 * rows * width}), got(DType::f32(), {2 * rows * width});
  interpret(f, {&aa, &ba, &want});
  codegen::LlvmOptions keep;
  keep.keep_ir = true;
  auto k = codegen::compile_llvm(f, keep);
  void* args[] = {as, bs, got.data()};
  k->run_raw(args);
  EXPECT_EQ(compare_arrays(got, want).max_abs, 0);
  EXPECT_EQ(k->llvm_ir().find("masked.load"), std::string::npos) << k->llvm_ir();
  munmap(region, 5 * page);
}

// A convolution's weight packing, packed[o, c, h, w, l] = wt[o * L + l, c, h, w], under a
// parallel loop, for each vector width the sketches use: a vector copy, loaded one lane
// at a time, against the interpreter.
TEST_F(LlvmSemantics, AWeightPackingIsAVectorCopyAndCorrect) {
  for (int64_t lanes : {8, 16, 32, 64})
    for (int64_t channels : {1, 5}) {
      constexpr int64_t O = 2, KH = 3, KW = 3;
      const int64_t k = channels * KH * KW;
      Var o("o"), c("c"), h("h"), w("w"), l("l");
      Buffer wt = make_buffer("wt", DType::f32(), {Expr(O * lanes * k)});
      Buffer out = make_buffer("packed", DType::f32(), {Expr(O * k * lanes)});
      Stmt body = make_store(out, {o * (k * lanes) + c * (KH * KW * lanes) + h * (KW * lanes) + w * lanes + l},
                             load(wt, {(o * lanes + l) * k + c * (KH * KW) + h * KW + w}));
      Stmt nest = make_for(
          o, 0, O, ForKind::Parallel,
          make_for(c, 0, channels, ForKind::Serial,
                   make_for(h, 0, KH, ForKind::Serial,
                            make_for(w, 0, KW, ForKind::Serial, make_for(l, 0, lanes, ForKind::Serial, body)))));
      LoweredFunc f{"pack", {wt, out}, {1}, nest};
      NDArray wa = NDArray::random(DType::f32(), {O * lanes * k}, -1, 1, 8);
      NDArray want, got;
      both(f, {wa}, {O * k * lanes}, DType::f32(), &want, &got);
      EXPECT_EQ(compare_arrays(got, want).max_abs, 0) << lanes << " lanes, " << channels << " channels";
      codegen::LlvmOptions keep;
      keep.keep_ir = true;
      const std::string ir = codegen::compile_llvm(f, keep)->llvm_ir();
      EXPECT_EQ(ir.find("gather"), std::string::npos) << ir;
      EXPECT_NE(ir.find("store <" + std::to_string(lanes) + " x float>"), std::string::npos) << ir;
    }
}

TEST_F(LlvmSemantics, CompiledKernelChecksItsArguments) {
  ops::OpGraph g = ops::build_op("relu");
  auto k = codegen::compile_llvm(lower_default("relu", g.inputs, g.outputs));
  NDArray wrong(DType::f32(), {2});
  NDArray out(DType::f32(), g.outputs[0].shape());
  EXPECT_THROW(k->run({&wrong, &out}), RuntimeError);
  EXPECT_THROW(k->run({&out}), RuntimeError);
  EXPECT_TRUE(k->llvm_ir().empty());  // kept only when asked for: printing costs compile time
  codegen::LlvmOptions keep;
  keep.keep_ir = true;
  auto with_ir = codegen::compile_llvm(lower_default("relu", g.inputs, g.outputs), keep);
  EXPECT_NE(with_ir->llvm_ir().find("define void @basin_kernel"), std::string::npos);
}

TEST_F(LlvmSemantics, ManyKernelsShareOneJitAndAreFreedIndependently) {
  ops::OpGraph g = ops::build_op("add", {{"a_shape", "5,7"}, {"b_shape", "5,7"}});
  LoweredFunc f = lower_default("add", g.inputs, g.outputs);
  std::vector<NDArray> in = codegen::random_inputs(g, 2);
  NDArray want(DType::f32(), {5, 7});
  interpret(f, {&in[0], &in[1], &want});
  std::vector<std::unique_ptr<codegen::LlvmKernel>> ks;
  for (int i = 0; i < 20; ++i) ks.push_back(codegen::compile_llvm(f));
  ks.erase(ks.begin(), ks.begin() + 10);  // freeing some must not disturb the others
  for (auto& k : ks) {
    NDArray got(DType::f32(), {5, 7});
    k->run({&in[0], &in[1], &got});
    EXPECT_EQ(compare_arrays(got, want).max_abs, 0);
  }
}

// The measurer compiles a batch on several threads at once (codegen/measure.h): each
// thread compiles with its own target machine and links into the one JIT. Four threads
// compile the library's cases at once, and every kernel computes what the interpreter
// does, as the same case compiled alone does.
TEST_F(LlvmSemantics, KernelsCompileOnSeveralThreadsAtOnce) {
  std::vector<Case> cases = good_cases();
  cases.resize(std::min<size_t>(cases.size(), 48));
  std::vector<double> worst(cases.size(), -1);
  std::vector<std::string> errors(cases.size());
  auto work = [&](size_t first) {
    for (size_t i = first; i < cases.size(); i += 4) {
      try {
        worst[i] = error_vs_interpreter(cases[i]);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 4; ++t) threads.emplace_back(work, t);
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_TRUE(errors[i].empty()) << cases[i].op << " " << cases[i].params << ": " << errors[i];
    EXPECT_GE(worst[i], 0) << cases[i].op << " " << cases[i].params;
    EXPECT_LE(worst[i], 1e-5) << cases[i].op << " " << cases[i].params;
  }
}

// BASIN_PERF_MAP set: each compiled kernel's functions (the entry and its parallel
// bodies) are appended to /tmp/perf-PID.map, where perf finds the names of JIT code,
// each at an address inside the process's code and of a nonzero size.
TEST(LlvmPerfMap, NamesTheEntryAndItsParallelBodies) {
  const std::string path = "/tmp/perf-" + std::to_string(getpid()) + ".map";
  std::remove(path.c_str());
  ASSERT_EQ(setenv("BASIN_PERF_MAP", "1", 1), 0);
  Var i("i");
  Buffer x = make_buffer("x", DType::f32(), {Expr(64)});
  Buffer out = make_buffer("out", DType::f32(), {Expr(64)});
  Stmt body = make_for(i, 0, 64, ForKind::Parallel, make_store(out, {i}, load(x, {i}) * 2.0f));
  LoweredFunc f{"perf_map", {x, out}, {1}, body};
  auto kernel = codegen::compile_llvm(f);
  unsetenv("BASIN_PERF_MAP");
  std::FILE* in = std::fopen(path.c_str(), "r");
  ASSERT_NE(in, nullptr) << path;
  bool entry = false, par = false;
  char name[256];
  unsigned long long addr = 0, size = 0;
  while (std::fscanf(in, "%llx %llx %255s", &addr, &size, name) == 3) {
    EXPECT_GT(addr, 0u);
    EXPECT_GT(size, 0u) << name;
    const std::string n = name;
    entry |= n.size() > 13 && n.compare(n.size() - 13, 13, ":basin_kernel") == 0;
    par |= n.find("basin_kernel_body_par") != std::string::npos;
  }
  std::fclose(in);
  std::remove(path.c_str());
  EXPECT_TRUE(entry);
  EXPECT_TRUE(par);
  NDArray xa(DType::f32(), {64}), oa(DType::f32(), {64});
  for (int k = 0; k < 64; ++k) xa.set(k, k);
  kernel->run({&xa, &oa});
  EXPECT_EQ(oa.as<float>()[63], 126.0f);
}

}  // namespace
}  // namespace basin
