// Evaluates an expression at given variable values, with the semantics of expr.h.
// Used by tests, by constant folding, and (at integer points) by the relaxation.
#pragma once

#include <functional>
#include <unordered_map>

#include "core/expr/expr.h"

namespace basin {

// A scalar value: integers and bools in `i`, floats in `f` (rounded to the type).
struct Value {
  DType dtype = DType::i64();
  int64_t i = 0;
  double f = 0;
  static Value of_int(DType t, int64_t v);
  static Value of_float(DType t, double v);
  double as_double() const { return dtype.is_float() ? f : static_cast<double>(i); }
};

using VarValues = std::unordered_map<int64_t, Value>;
// Loads call this (buffer, flat-or-multi indices); without it a Load is an error.
using LoadFn = std::function<Value(const BufferNode&, const std::vector<int64_t>&)>;

// Throws RuntimeError on integer division by zero, an unbound variable or a Load
// without a LoadFn.
Value evaluate(const Expr& e, const VarValues& vars, const LoadFn& load = nullptr);
// Convenience for integer expressions over integer variables.
int64_t evaluate_int(const Expr& e, const std::unordered_map<int64_t, int64_t>& vars);

// Integer helpers with the IR's semantics, shared by the evaluator, the simplifier's
// constant folding and the interpreter.
int64_t wrap_int(int64_t v, int bits);
// v as a value of integer (or bool) type t: signed types wrapped to their bits, unsigned
// ones cut to them, bools 0 or 1.
int64_t wrap_to(DType t, int64_t v);
// A float cast to an 8-bit integer type t: toward zero, saturated to t's range, NaN 0.
int64_t saturate_to_byte(DType t, double v);
int64_t floordiv_int(int64_t a, int64_t b);  // b != 0
int64_t floormod_int(int64_t a, int64_t b);  // b != 0
double apply_math(MathFn f, double a, double b, int bits);
// x rounded to TF32 (MathFn::tf32): the 13 low mantissa bits cleared, rounding to
// nearest with ties away from zero; NaN and infinities unchanged.
float round_to_tf32(float x);
// x rounded to the nearest IEEE binary16 value (MathFn::fp16): 10 mantissa bits, ties to
// even, subnormals below 2^-14, infinity from 65520 on; NaN unchanged.
float round_to_fp16(float x);
// x rounded to the nearest bfloat16 value (MathFn::bf16): the 16 low bits cleared, ties
// to even, overflow to infinity; NaN unchanged.
float round_to_bf16(float x);
// The bfloat16 storage of x (DType::bf16), as AVX512-BF16's vcvtneps2bf16 rounds:
// round_to_bf16's upper 16 bits, a subnormal float a zero of its sign, a NaN a (quiet)
// NaN. And its float32 value, exact.
uint16_t bf16_bits(float x);
float bf16_value(uint16_t bits);
// Whether f is one of the tensor cores' input roundings (tf32, fp16, bf16).
bool is_rounding(MathFn f);

}  // namespace basin
