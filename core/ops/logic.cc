// Comparisons, logical operators, NaN and infinity tests, where, mod and cast: the
// operators of masks and index arithmetic (attention masks, padding masks, position
// ids). Comparisons and tests give bool tensors; where selects by one.
#include <cmath>
#include <functional>
#include <limits>

#include "core/ops/op_util.h"
#include "core/ops/operators.h"

namespace basin::ops {

namespace {

te::OpPattern pattern_of(const std::vector<const Tensor*>& ins, const std::vector<int64_t>& out) {
  for (const Tensor* t : ins)
    if (t->shape() != out) return te::OpPattern::Broadcast;
  return te::OpPattern::Elementwise;
}

const char* compare_name(CompareOp op) {
  switch (op) {
    case CompareOp::Equal:
      return "equal";
    case CompareOp::Less:
      return "less";
    case CompareOp::LessEqual:
      return "less_equal";
    case CompareOp::Greater:
      return "greater";
    case CompareOp::GreaterEqual:
      return "greater_equal";
  }
  return "?";
}

}  // namespace

Tensor compare(CompareOp op, const Tensor& a, const Tensor& b) {
  const std::string name = compare_name(op);
  Check c(name);
  c.that(a.dtype() == b.dtype(), "b", "operand types differ: " + a.dtype().str() + " and " + b.dtype().str());
  std::vector<int64_t> out = broadcast_shapes(c, a.shape(), b.shape());
  return te::compute(
      name, out,
      [&](const std::vector<Var>& i) {
        Expr x = a.read(broadcast_index(a.shape(), out, i)), y = b.read(broadcast_index(b.shape(), out, i));
        if (x.dtype().is_bool()) {  // bool operands compare as 0 and 1
          x = cast(DType::i32(), x);
          y = cast(DType::i32(), y);
        }
        switch (op) {
          case CompareOp::Equal:
            return eq(x, y);
          case CompareOp::Less:
            return lt(x, y);
          case CompareOp::LessEqual:
            return le(x, y);
          case CompareOp::Greater:
            return gt(x, y);
          case CompareOp::GreaterEqual:
            return ge(x, y);
        }
        return eq(x, y);
      },
      pattern_of({&a, &b}, out), name);
}

Tensor logical(const std::string& op, const Tensor& a, const Tensor& b) {
  Check c(op);
  c.that(op == "logical_and" || op == "logical_or" || op == "logical_xor", "", "is not a binary logical operator");
  c.that(a.dtype().is_bool(), "a", "expects a bool tensor, got " + a.dtype().str());
  c.that(b.dtype().is_bool(), "b", "expects a bool tensor, got " + b.dtype().str());
  std::vector<int64_t> out = broadcast_shapes(c, a.shape(), b.shape());
  return te::compute(
      op, out,
      [&](const std::vector<Var>& i) {
        Expr x = a.read(broadcast_index(a.shape(), out, i)), y = b.read(broadcast_index(b.shape(), out, i));
        if (op == "logical_and") return logical_and(x, y);
        if (op == "logical_or") return logical_or(x, y);
        return ne(cast(DType::i32(), x), cast(DType::i32(), y));
      },
      pattern_of({&a, &b}, out), op);
}

Tensor logical_not(const Tensor& x) {
  Check c("logical_not");
  c.that(x.dtype().is_bool(), "x", "expects a bool tensor, got " + x.dtype().str());
  return te::compute(
      "logical_not", x.shape(), [&](const std::vector<Var>& i) { return basin::logical_not(x.read(as_exprs(i))); },
      te::OpPattern::Elementwise, "logical_not");
}

Tensor is_nan(const Tensor& x) {
  Check c("isnan");
  c.that(x.dtype().is_float(), "x", "expects a float tensor, got " + x.dtype().str());
  return te::compute(
      "isnan", x.shape(),
      [&](const std::vector<Var>& i) {
        Expr v = x.read(as_exprs(i));
        return ne(v, v);
      },
      te::OpPattern::Elementwise, "isnan");
}

Tensor is_inf(const Tensor& x, bool positive, bool negative) {
  Check c("isinf");
  c.that(x.dtype().is_float(), "x", "expects a float tensor, got " + x.dtype().str());
  const double inf = std::numeric_limits<double>::infinity();
  return te::compute(
      "isinf", x.shape(),
      [&](const std::vector<Var>& i) {
        Expr v = x.read(as_exprs(i));
        Expr pos = eq(v, make_const(x.dtype(), inf)), neg = eq(v, make_const(x.dtype(), -inf));
        if (positive && negative) return logical_or(pos, neg);
        if (positive) return pos;
        if (negative) return neg;
        return bool_imm(false);
      },
      te::OpPattern::Elementwise, "isinf");
}

Tensor where(const Tensor& cond, const Tensor& x, const Tensor& y) {
  Check c("where");
  c.that(cond.dtype().is_bool(), "condition", "expects a bool tensor, got " + cond.dtype().str());
  c.that(x.dtype() == y.dtype(), "y", "branch types differ: " + x.dtype().str() + " and " + y.dtype().str());
  std::vector<int64_t> out = broadcast_shapes(c, broadcast_shapes(c, cond.shape(), x.shape()), y.shape());
  return te::compute(
      "where", out,
      [&](const std::vector<Var>& i) {
        return select(cond.read(broadcast_index(cond.shape(), out, i)), x.read(broadcast_index(x.shape(), out, i)),
                      y.read(broadcast_index(y.shape(), out, i)));
      },
      pattern_of({&cond, &x, &y}, out), "where");
}

Tensor mod(const Tensor& a, const Tensor& b, bool fmod) {
  Check c("mod");
  c.that(a.dtype() == b.dtype(), "b", "operand types differ: " + a.dtype().str() + " and " + b.dtype().str());
  c.that(!a.dtype().is_bool(), "a", "expects numbers, got bool");
  c.that(fmod || !a.dtype().is_float(), "fmod", "must be 1 for floating-point operands (ONNX Mod)");
  std::vector<int64_t> out = broadcast_shapes(c, a.shape(), b.shape());
  const DType t = a.dtype();
  return te::compute(
      "mod", out,
      [&](const std::vector<Var>& i) {
        Expr x = a.read(broadcast_index(a.shape(), out, i)), y = b.read(broadcast_index(b.shape(), out, i));
        if (t.is_float()) {  // C's fmod: the dividend's sign, x - trunc(x / y) * y
          Expr q = x / y;
          Expr tq = select(lt(q, make_const(t, 0)), call(MathFn::ceil, {q}), call(MathFn::floor, {q}));
          return x - tq * y;
        }
        // Integers: a zero divisor gives 0 rather than a trap.
        Expr zero = make_const(t, 0), one = make_const(t, 1);
        Expr d = select(eq(y, zero), one, y);
        Expr r = x - (x / d) * d;  // integer division truncates: the dividend's sign
        if (!fmod) r = select(logical_and(ne(r, zero), ne(lt(r, zero), lt(d, zero))), r + d, r);  // the divisor's sign
        return select(eq(y, zero), zero, r);
      },
      pattern_of({&a, &b}, out), "mod");
}

Tensor cast_to(const Tensor& x, DType to) {
  Check c("cast");
  c.that(to.is_scalar(), "to", "must be a scalar type");
  return te::compute(
      "cast", x.shape(),
      [&](const std::vector<Var>& i) {
        Expr v = x.read(as_exprs(i));
        if (to.is_bool()) return ne(widened(v), make_const(widened(v).dtype(), 0));
        if ((to.is_int() || to.is_uint()) && v.dtype().is_float()) {
          // Out-of-range and NaN values saturate (C's cast is undefined there).
          const double lo = to.is_uint()    ? 0.0
                            : to.bits == 8  ? -128.0
                            : to.bits == 32 ? -2147483648.0
                                            : -9223372036854775808.0;
          const double hi = to.is_uint()    ? 255.0
                            : to.bits == 8  ? 127.0
                            : to.bits == 32 ? 2147483647.0
                                            : 9223372036854774784.0;
          Expr f = max(min(v, make_const(v.dtype(), hi)), make_const(v.dtype(), lo));
          return select(ne(v, v), make_const(to, 0), cast(to, f));
        }
        return cast(to, v);
      },
      te::OpPattern::Elementwise, "cast");
}

namespace {

// A broadcasting binary operator of the registry: operands of one dtype drawn from
// `range`, one output.
OpDef binary_def(const std::string& name, const std::string& summary, DType operands, InputRange range,
                 std::function<Tensor(const Tensor&, const Tensor&)> f) {
  return {name,
          "elementwise",
          summary,
          {p_ints("a_shape", {2, 3, 4}, "shape of a"), p_ints("b_shape", {3, 1}, "shape of b")},
          [name, operands, range, f](const Attrs& at) {
            Check c(name);
            Tensor a = te::placeholder("a", c.shape(at, "a_shape"), operands);
            Tensor b = te::placeholder("b", c.shape(at, "b_shape"), operands);
            OpGraph g;
            g.inputs = {a, b};
            g.outputs = {f(a, b)};
            g.ranges = {range, range};
            g.flops = static_cast<double>(g.outputs[0].numel());
            return g;
          }};
}

}  // namespace

void register_logic_ops(std::vector<OpDef>& r) {
  for (CompareOp op :
       {CompareOp::Equal, CompareOp::Less, CompareOp::LessEqual, CompareOp::Greater, CompareOp::GreaterEqual}) {
    const std::string name = compare_name(op);
    r.push_back(binary_def(name,
                           name + "(a, b) -> bool with broadcasting (int64 operands in the tests, so that values tie)",
                           DType::i64(), {0, 3}, [op](const Tensor& a, const Tensor& b) { return compare(op, a, b); }));
  }
  for (std::string name : {"logical_and", "logical_or", "logical_xor"})
    r.push_back(binary_def(name, name + " of bool tensors with broadcasting", DType::boolean(), {0, 2},
                           [name](const Tensor& a, const Tensor& b) { return logical(name, a, b); }));
  r.push_back({"logical_not",
               "elementwise",
               "not x, of a bool tensor",
               {p_ints("shape", {3, 5, 7}, "shape of x")},
               [](const Attrs& at) {
                 Check c("logical_not");
                 Tensor x = te::placeholder("x", c.shape(at, "shape"), DType::boolean());
                 OpGraph g;
                 g.inputs = {x};
                 g.outputs = {logical_not(x)};
                 g.ranges = {{0, 2}};
                 g.flops = static_cast<double>(x.numel());
                 return g;
               }});
  r.push_back({"isnan",
               "elementwise",
               "x != x: true where x is NaN",
               {p_ints("shape", {3, 5, 7}, "shape of x")},
               [](const Attrs& at) {
                 Check c("isnan");
                 Tensor x = te::placeholder("x", c.shape(at, "shape"));
                 OpGraph g;
                 g.inputs = {x};
                 g.outputs = {is_nan(x)};
                 g.ranges = {{}};
                 g.flops = static_cast<double>(x.numel());
                 return g;
               }});
  r.push_back({"isinf",
               "elementwise",
               "true where x is +inf (detect_positive) or -inf (detect_negative)",
               {p_ints("shape", {3, 5, 7}, "shape of x"), p_int("detect_positive", 1, "1: +inf counts"),
                p_int("detect_negative", 1, "1: -inf counts")},
               [](const Attrs& at) {
                 Check c("isinf");
                 Tensor x = te::placeholder("x", c.shape(at, "shape"));
                 OpGraph g;
                 g.inputs = {x};
                 g.outputs = {is_inf(x, at.i("detect_positive") != 0, at.i("detect_negative") != 0)};
                 g.ranges = {{}};
                 g.flops = static_cast<double>(x.numel());
                 return g;
               }});
  r.push_back({"where",
               "elementwise",
               "condition ? x : y with broadcasting of all three",
               {p_ints("cond_shape", {3, 1}, "shape of the condition"), p_ints("x_shape", {2, 3, 4}, "shape of x"),
                p_ints("y_shape", {4}, "shape of y")},
               [](const Attrs& at) {
                 Check c("where");
                 Tensor cond = te::placeholder("condition", c.shape(at, "cond_shape"), DType::boolean());
                 Tensor x = te::placeholder("x", c.shape(at, "x_shape")),
                        y = te::placeholder("y", c.shape(at, "y_shape"));
                 OpGraph g;
                 g.inputs = {cond, x, y};
                 g.outputs = {where(cond, x, y)};
                 g.ranges = {{0, 2}, {}, {}};
                 g.flops = static_cast<double>(g.outputs[0].numel());
                 return g;
               }});
  r.push_back({"mod",
               "elementwise",
               "remainder with broadcasting: fmod=0 (integers) takes the divisor's sign, fmod=1 the dividend's "
               "(int64 operands for fmod=0, float32 for fmod=1 in the tests)",
               {p_ints("a_shape", {2, 3, 4}, "shape of a"), p_ints("b_shape", {3, 1}, "shape of b"),
                p_int("fmod", 0, "0: the divisor's sign (integers only); 1: the dividend's sign")},
               [](const Attrs& at) {
                 Check c("mod");
                 int64_t f = at.i("fmod");
                 c.that(f == 0 || f == 1, "fmod", "must be 0 or 1, got " + std::to_string(f));
                 DType t = f ? DType::f32() : DType::i64();
                 Tensor a = te::placeholder("a", c.shape(at, "a_shape"), t),
                        b = te::placeholder("b", c.shape(at, "b_shape"), t);
                 OpGraph g;
                 g.inputs = {a, b};
                 g.outputs = {mod(a, b, f == 1)};
                 g.ranges = f ? std::vector<InputRange>{{-6, 6}, {0.5, 2}} : std::vector<InputRange>{{-20, 20}, {1, 8}};
                 g.flops = static_cast<double>(g.outputs[0].numel());
                 return g;
               }});
  r.push_back(
      {"cast",
       "elementwise",
       "float32 x converted to `to` (integers truncate toward zero; bool: x != 0)",
       {p_ints("shape", {3, 5, 7}, "shape of x"), p_str("to", "int64", "float32, float64, int32, int64 or bool")},
       [](const Attrs& at) {
         Check c("cast");
         DType to;
         try {
           to = DType::parse(at.s("to"));
         } catch (const Error&) {
           c.that(false, "to", "'" + at.s("to") + "' is not a type (float32, float64, int32, int64, bool)");
         }
         Tensor x = te::placeholder("x", c.shape(at, "shape"));
         OpGraph g;
         g.inputs = {x};
         g.outputs = {cast_to(x, to)};
         g.ranges = {{-4, 4}};
         g.flops = static_cast<double>(x.numel());
         return g;
       }});
}

}  // namespace basin::ops
