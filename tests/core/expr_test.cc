// Expressions: factories check types, structural hashing and equality, printing, and
// the evaluator's semantics (floor division, wrap-around, float32 rounding, lazy select).
#include <gtest/gtest.h>

#include <cmath>

#include "core/expr/evaluate.h"
#include "core/expr/expr.h"
#include "core/util/error.h"

namespace basin {
namespace {

TEST(Expr, FactoriesCheckTypes) {
  Var i("i");
  Expr f = fconst(1.5f);
  EXPECT_THROW(add(i, f), InternalError);               // int64 + float32
  EXPECT_THROW(floordiv(f, f), InternalError);          // floordiv needs integers
  EXPECT_THROW(logical_and(i, i), InternalError);       // && needs bools
  EXPECT_THROW(select(i, f, f), InternalError);         // condition must be bool
  EXPECT_THROW(call(MathFn::exp, {i}), InternalError);  // math on integers
  EXPECT_THROW(call(MathFn::pow, {f}), InternalError);  // arity
  Buffer b = make_buffer("b", DType::f32(), {Expr(2), Expr(3)});
  EXPECT_THROW(load(b, {i, i, i}), InternalError);
  EXPECT_EQ((i * 2).dtype(), DType::i64());
  EXPECT_EQ((f + 1.0).dtype(), DType::f32());  // the immediate takes the other operand's type
}

TEST(Expr, StructuralHashAndEquality) {
  Var x("x"), y("y");
  Expr a = (x + 1) * y, b = (x + 1) * y, c = (x + 1) * x;
  EXPECT_FALSE(a.same_as(b));
  EXPECT_TRUE(structural_equal(a, b));
  EXPECT_EQ(structural_hash(a), structural_hash(b));
  EXPECT_FALSE(structural_equal(a, c));
  Var x2("x");  // same name, different variable
  EXPECT_FALSE(structural_equal(x + 1, x2 + 1));
  std::unordered_map<int64_t, int64_t> rename = {{x.id(), x2.id()}};
  EXPECT_TRUE(structural_equal(x + 1, x2 + 1, &rename));
  EXPECT_EQ(structural_compare(a, b), 0);
  EXPECT_NE(structural_compare(a, c), 0);
  EXPECT_EQ(structural_compare(a, c), -structural_compare(c, a));
}

TEST(Expr, PrintsReadably) {
  Var x("x");
  Buffer b = make_buffer("A", DType::f32(), {Expr(4)});
  EXPECT_EQ(to_string(floordiv(x + 3, 4)), "((x + 3) // 4)");
  EXPECT_EQ(to_string(select(lt(x, 2), load(b, {x}), fconst(0))), "select((x < 2), A[x], 0.0f)");
  EXPECT_EQ(to_string(call(MathFn::exp, {fconst(1)})), "exp(1.0f)");
}

TEST(Expr, SubstituteAndRewriteKeepUnchangedSubtrees) {
  Var x("x"), y("y");
  Expr left = y * 3;
  Expr e = left + x;
  Expr s = substitute(e, {{x.id(), Expr(5)}});
  EXPECT_TRUE(structural_equal(s, y * 3 + 5));
  EXPECT_TRUE(s.arg(0).same_as(left));  // shared, not rebuilt
  EXPECT_TRUE(substitute(e, {}).same_as(e));
  EXPECT_TRUE(uses_var(e, x));
  EXPECT_FALSE(uses_var(s, x));
}

TEST(Evaluate, IntegerSemantics) {
  EXPECT_EQ(evaluate_int(floordiv(Expr(-7), Expr(2)), {}), -4);
  EXPECT_EQ(evaluate_int(floormod(Expr(-7), Expr(2)), {}), 1);
  EXPECT_EQ(evaluate_int(floormod(Expr(7), Expr(-2)), {}), -1);
  EXPECT_EQ(evaluate_int(div(Expr(-7), Expr(2)), {}), -3);  // truncating
  Expr big = int_imm(DType::i32(), 2147483647);
  EXPECT_EQ(evaluate(big + int_imm(DType::i32(), 1), {}).i, -2147483648LL);  // wraps at 32 bits
  EXPECT_THROW(evaluate_int(floordiv(Expr(1), Expr(0)), {}), RuntimeError);
  Var x("x");
  EXPECT_THROW(evaluate_int(x + 1, {}), RuntimeError);
}

TEST(Evaluate, Float32RoundsEachOperation) {
  Expr e = fconst(16777216.0f) + fconst(1.0f);  // 2^24 + 1 is not a float32
  EXPECT_EQ(evaluate(e, {}).f, 16777216.0);
  Expr d = float_imm(DType::f64(), 16777216.0) + float_imm(DType::f64(), 1.0);
  EXPECT_EQ(evaluate(d, {}).f, 16777217.0);
  EXPECT_FLOAT_EQ(static_cast<float>(evaluate(call(MathFn::sigmoid, {fconst(0)}), {}).f), 0.5f);
}

// TF32 (MathFn::tf32): 10 mantissa bits, to nearest with ties away from zero, as PTX's
// cvt.rna.tf32.f32; non-finite values unchanged.
TEST(Evaluate, Tf32RoundsToTenMantissaBitsTiesAwayFromZero) {
  const float ulp = std::ldexp(1.0f, -10);  // TF32's ulp at 1
  EXPECT_EQ(round_to_tf32(1.0f), 1.0f);
  EXPECT_EQ(round_to_tf32(1.0f + ulp), 1.0f + ulp);
  EXPECT_EQ(round_to_tf32(1.0f + ulp / 2), 1.0f + ulp);  // a tie: away from zero
  EXPECT_EQ(round_to_tf32(-(1.0f + ulp / 2)), -(1.0f + ulp));
  EXPECT_EQ(round_to_tf32(1.0f + ulp / 2 - std::ldexp(1.0f, -23)), 1.0f);  // below the tie
  EXPECT_EQ(round_to_tf32(1.0f + 3 * ulp / 4), 1.0f + ulp);
  EXPECT_EQ(round_to_tf32(0.0f), 0.0f);
  EXPECT_TRUE(std::isinf(round_to_tf32(INFINITY)));
  EXPECT_TRUE(std::isnan(round_to_tf32(NAN)));
  // The largest float rounds up to infinity, as the hardware's conversion does.
  EXPECT_TRUE(std::isinf(round_to_tf32(3.4028235e38f)));
  // Through the expression evaluator: float32 and float64 alike.
  EXPECT_EQ(evaluate(call(MathFn::tf32, {fconst(1.0f + ulp / 2)}), {}).f, 1.0 + ulp);
  EXPECT_EQ(evaluate(call(MathFn::tf32, {float_imm(DType::f64(), 1.0 + ulp / 2)}), {}).f, 1.0 + ulp);
}

// FP16 and BF16 (MathFn::fp16, bf16): to nearest, ties to even, as PTX's cvt.rn;
// binary16's subnormals and its overflow at 65520; the compiler's own _Float16
// conversion agrees on a sweep of values.
TEST(Evaluate, Fp16AndBf16RoundToNearestEven) {
  const float h = std::ldexp(1.0f, -10), b = std::ldexp(1.0f, -7);  // their ulps at 1
  EXPECT_EQ(round_to_fp16(1.0f + h / 2), 1.0f);                     // a tie: to the even 1
  EXPECT_EQ(round_to_fp16(1.0f + 3 * h / 2), 1.0f + 2 * h);         // a tie: to the even 1 + 2h
  EXPECT_EQ(round_to_fp16(-(1.0f + 3 * h / 4)), -(1.0f + h));
  EXPECT_EQ(round_to_fp16(65504.0f), 65504.0f);  // the largest binary16
  EXPECT_EQ(round_to_fp16(65519.0f), 65504.0f);
  EXPECT_TRUE(std::isinf(round_to_fp16(65520.0f)));
  EXPECT_EQ(round_to_fp16(std::ldexp(1.0f, -24)), std::ldexp(1.0f, -24));  // the smallest subnormal
  EXPECT_EQ(round_to_fp16(std::ldexp(1.0f, -25)), 0.0f);                   // half of it: a tie to 0
  EXPECT_EQ(round_to_fp16(std::ldexp(3.0f, -26)), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isnan(round_to_fp16(NAN)));
  EXPECT_EQ(round_to_bf16(1.0f + b / 2), 1.0f);
  EXPECT_EQ(round_to_bf16(1.0f + 3 * b / 2), 1.0f + 2 * b);
  EXPECT_EQ(round_to_bf16(-(1.0f + 3 * b / 4)), -(1.0f + b));
  EXPECT_TRUE(std::isinf(round_to_bf16(3.4028235e38f)));
  EXPECT_TRUE(std::isnan(round_to_bf16(NAN)));
  EXPECT_EQ(round_to_bf16(1e-40f), std::ldexp(1.0f, -133));  // a subnormal float: 71362 x 2^-149 to 2^16 x 2^-149
  for (int k = 0; k < 20000; ++k) {
    const float x = std::ldexp(static_cast<float>(k) - 10000.0f, (k % 61) - 40) / 3.0f;
    EXPECT_EQ(round_to_fp16(x), static_cast<float>(static_cast<_Float16>(x))) << x;
  }
  EXPECT_EQ(evaluate(call(MathFn::fp16, {fconst(1.0f + 3 * h / 2)}), {}).f, 1.0 + 2 * h);
  EXPECT_EQ(evaluate(call(MathFn::bf16, {float_imm(DType::f64(), 1.0 + 3 * b / 2)}), {}).f, 1.0 + 2 * b);
}

TEST(Evaluate, SelectIsLazy) {
  Expr e = select(bool_imm(true), Expr(1), floordiv(Expr(1), Expr(0)));
  EXPECT_EQ(evaluate_int(e, {}), 1);
}

}  // namespace
}  // namespace basin
