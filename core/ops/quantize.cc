// Linear quantization, as ONNX's QuantizeLinear and DequantizeLinear define it:
// q = saturate(round(x / scale) + zero_point), x = (q - zero_point) * scale. Quantized
// values are uint8 or int8 tensors (storage types: the integer anchors sum their
// products in int32), 16-bit ones int32 tensors holding the type's range.
#include <cmath>

#include "core/ops/op_util.h"
#include "core/ops/operators.h"

namespace basin::ops {

namespace {

// The index of the scale and zero point of element i: i[axis] for per-axis ones (shape
// [x.shape[axis]]), else the one value of per-tensor ones (shape [] or [1]).
std::vector<Expr> param_index(const Tensor& scale, int axis, const std::vector<Var>& i) {
  if (axis >= 0) return {Expr(i[static_cast<size_t>(axis)])};
  if (scale.ndim() == 0) return {};
  return {Expr(0)};
}

// Checks scale and zero point against x and returns the axis their values run along
// (-1 for per-tensor ones).
int check_params(const Check& c, const Tensor& x, const Tensor& scale, const Tensor& zero_point, int64_t axis) {
  c.that(scale.dtype() == DType::f32(), "scale", "must be float32, got " + scale.dtype().str());
  c.that(zero_point.dtype() == DType::i32(), "zero_point", "must be int32, got " + zero_point.dtype().str());
  c.that(scale.shape() == zero_point.shape(), "zero_point",
         "shape " + ints_str(zero_point.shape()) + " differs from the scale's " + ints_str(scale.shape()));
  c.that(scale.ndim() <= 1, "scale", "must be a scalar or a vector, got shape " + ints_str(scale.shape()));
  const int64_t r = static_cast<int64_t>(x.ndim());
  if (scale.numel() == 1) return -1;  // per tensor (one value per axis index is the same thing)
  c.that(axis >= -r && axis < r, "axis", std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  const int a = static_cast<int>(axis < 0 ? axis + r : axis);
  c.that(scale.shape()[0] == x.shape()[static_cast<size_t>(a)], "scale",
         "has " + std::to_string(scale.shape()[0]) + " values; axis " + std::to_string(a) + " of x " +
             ints_str(x.shape()) + " has " + std::to_string(x.shape()[static_cast<size_t>(a)]));
  return a;
}

// check_params for a quantization of a float32 x into [qmin, qmax].
int check_quantization(const Check& c, const Tensor& x, const Tensor& scale, const Tensor& zero_point, int64_t axis,
                       int64_t qmin, int64_t qmax) {
  c.that(x.dtype() == DType::f32(), "x", "must be float32, got " + x.dtype().str());
  c.that(qmin <= qmax && qmin >= INT32_MIN && qmax <= INT32_MAX, "qmin",
         "[" + std::to_string(qmin) + ", " + std::to_string(qmax) + "] is not an int32 range");
  return check_params(c, x, scale, zero_point, axis);
}

}  // namespace

DType quantized_type(int64_t qmin, int64_t qmax) {
  if (qmin >= 0 && qmax <= 255) return DType::u8();
  if (qmin >= -128 && qmax <= 127) return DType::i8();
  return DType::i32();
}

Tensor quantize_linear(const Tensor& x, const Tensor& scale, const Tensor& zero_point, int64_t axis, int64_t qmin,
                       int64_t qmax) {
  Check c("quantize_linear");
  const int a = check_quantization(c, x, scale, zero_point, axis, qmin, qmax);
  const DType f = DType::f32();
  const DType out = quantized_type(qmin, qmax);
  return te::compute(
      "quantize_linear", x.shape(),
      [&](const std::vector<Var>& i) {
        const std::vector<Expr> p = param_index(scale, a, i);
        Expr zp = cast(f, zero_point.read(p));
        Expr v = call(MathFn::rint, {x.read(as_exprs(i)) / scale.read(p)}) + zp;
        // 8-bit: the cast saturates (NaN gives 0), and v is read once, so that a chain
        // of quantizations inlined into one kernel stays linear in its length. int8 goes
        // through uint8 (v + 128), so that NaN gives the least value, -128, as for uint8
        // (0) and as ONNX Runtime quantizes it.
        if (out == DType::u8() && qmin == 0 && qmax == 255) return cast(out, v);
        if (out == DType::i8() && qmin == -128 && qmax == 127) {
          const Expr u = cast(DType::u8(), v + make_const(f, 128));
          return cast(out, cast(DType::i32(), u) - make_const(DType::i32(), 128));
        }
        // Otherwise saturated in float32 (exact: the bounds are integers below 2^24 for
        // every 16-bit type), NaN quantized to the least value.
        Expr s = max(min(v, make_const(f, static_cast<double>(qmax))), make_const(f, static_cast<double>(qmin)));
        return select(ne(v, v), make_const(out, static_cast<double>(qmin)), cast(out, s));
      },
      te::OpPattern::Broadcast, "quantize_linear");
}

Tensor dequantize_linear(const Tensor& x, const Tensor& scale, const Tensor& zero_point, int64_t axis) {
  Check c("dequantize_linear");
  c.that(x.dtype() == DType::i32() || x.dtype().is_byte(), "x", "must be int32, int8 or uint8, got " + x.dtype().str());
  const int a = check_params(c, x, scale, zero_point, axis);
  return te::compute(
      "dequantize_linear", x.shape(),
      [&](const std::vector<Var>& i) {
        const std::vector<Expr> p = param_index(scale, a, i);
        return cast(DType::f32(), widened(x.read(as_exprs(i))) - zero_point.read(p)) * scale.read(p);
      },
      te::OpPattern::Broadcast, "dequantize_linear");
}

Tensor fake_quantize(const Tensor& x, const Tensor& scale, const Tensor& zero_point, int64_t axis, int64_t qmin,
                     int64_t qmax) {
  Check c("fake_quantize");
  const int a = check_quantization(c, x, scale, zero_point, axis, qmin, qmax);
  const DType f = DType::f32(), i32 = DType::i32();
  return te::compute(
      "fake_quantize", x.shape(),
      [&](const std::vector<Var>& i) {
        const std::vector<Expr> p = param_index(scale, a, i);
        const Expr s = scale.read(p);
        // The zero point inside [qmin, qmax], as a quantized type's zero point is.
        const Expr zp = max(min(zero_point.read(p), int_imm(i32, qmax)), int_imm(i32, qmin));
        const Expr q = call(MathFn::rint, {x.read(as_exprs(i)) / s});
        // quantize_linear's value less the zero point, in float32 (every quantized value
        // is an integer below 2^24 in magnitude: exact), times the scale. 8-bit: through
        // uint8 as quantize_linear goes (int8 offset by 128), x read once (a chain stays
        // linear in its length); code generation makes the round trip one saturation of q
        // in float code.
        if ((qmin == 0 && qmax == 255) || (qmin == -128 && qmax == 127)) {
          const Expr offset = cast(f, qmin < 0 ? zp + int_imm(i32, 128) : zp);
          return (cast(f, cast(DType::u8(), q + offset)) - offset) * s;
        }
        const Expr v = q + cast(f, zp);
        Expr sat = max(min(v, make_const(f, static_cast<double>(qmax))), make_const(f, static_cast<double>(qmin)));
        sat = select(ne(v, v), make_const(f, static_cast<double>(qmin)), sat);
        return (sat - cast(f, zp)) * s;
      },
      te::OpPattern::Broadcast, "fake_quantize");
}

void register_quantize_ops(std::vector<OpDef>& r) {
  auto params = [](bool quantize) {
    std::vector<ParamSpec> p = {p_ints("shape", {2, 3, 5}, "shape of x"),
                                p_int("per_axis", 0, "1: one scale and zero point per index of `axis`"),
                                p_int("axis", 1, "the axis of per-axis parameters")};
    if (quantize) {
      p.push_back(p_int("qmin", 0, "the integer type's least value (0 for uint8, -128 for int8)"));
      p.push_back(p_int("qmax", 255, "its greatest (255 for uint8, 127 for int8)"));
    } else {
      p.push_back(p_str("dtype", "uint8", "x's type: uint8, int8 or int32"));
    }
    return p;
  };
  auto build = [](const Attrs& at, bool quantize, bool dequantize = false) {
    const std::string name = dequantize ? "fake_quantize" : quantize ? "quantize_linear" : "dequantize_linear";
    Check c(name);
    std::vector<int64_t> s = c.shape(at, "shape");
    const int64_t axis = at.i("axis"), r = static_cast<int64_t>(s.size());
    const bool per_axis = at.i("per_axis") != 0;
    c.that(!per_axis || (axis >= -r && axis < r), "axis",
           std::to_string(axis) + " is out of range for rank " + std::to_string(r));
    std::vector<int64_t> ps;
    if (per_axis) ps = {s[static_cast<size_t>(axis < 0 ? axis + r : axis)]};
    int64_t qmin = quantize ? at.i("qmin") : 0, qmax = quantize ? at.i("qmax") : 255;
    DType xt = DType::f32();
    if (!quantize) {
      const std::string t = at.s("dtype");
      c.that(t == "uint8" || t == "int8" || t == "int32", "dtype", "'" + t + "' is not uint8, int8 or int32");
      xt = DType::parse(t);
      if (t == "int8") qmin = -128, qmax = 127;
      if (t == "int32") qmin = -100000, qmax = 100000;  // (the values drawn: a bias's magnitudes)
    }
    Tensor x = te::placeholder("x", s, xt);
    Tensor scale = te::placeholder("scale", ps), zp = te::placeholder("zero_point", ps, DType::i32());
    OpGraph g;
    g.inputs = {x, scale, zp};
    g.outputs = {dequantize ? fake_quantize(x, scale, zp, axis, qmin, qmax)
                 : quantize ? quantize_linear(x, scale, zp, axis, qmin, qmax)
                            : dequantize_linear(x, scale, zp, axis)};
    // Zero points inside the range; x spanning it and beyond (saturation) for quantize.
    const double lo = static_cast<double>(qmin), hi = static_cast<double>(qmax);
    g.ranges = {quantize ? InputRange{-4, 4} : InputRange{lo, hi + 1}, {0.01, 0.05}, {lo, hi + 1}};
    g.flops = static_cast<double>(x.numel());
    return g;
  };
  r.push_back({"quantize_linear", "elementwise",
               "saturate(round(x / scale) + zero_point) to [qmin, qmax], ties to even (ONNX QuantizeLinear; uint8, "
               "int8 or int32 out)",
               params(true), [build](const Attrs& at) { return build(at, true); }});
  r.push_back({"dequantize_linear", "elementwise", "(x - zero_point) * scale of an integer x (ONNX DequantizeLinear)",
               params(false), [build](const Attrs& at) { return build(at, false); }});
  r.push_back(
      {"fake_quantize", "elementwise",
       "dequantize_linear(quantize_linear(x)) in float32: (saturate(round(x / scale) + zero_point) - zero_point) "
       "* scale (a quantization pair that rounds a value inside one kernel)",
       params(true), [build](const Attrs& at) { return build(at, true, true); }});
}

}  // namespace basin::ops
