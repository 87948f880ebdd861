// Broadcasting binary ops (add, sub, mul, div, maximum, minimum, pow) and unary
// activations and math functions.
#include <cmath>

#include "core/ops/op_util.h"
#include "core/ops/operators.h"

namespace basin::ops {

namespace {

struct BinaryInfo {
  const char* name;
  BinaryOp op;
  const char* summary;
  InputRange a, b;
};
const BinaryInfo kBinary[] = {
    {"add", BinaryOp::Add, "a + b with numpy broadcasting", {}, {}},
    {"sub", BinaryOp::Sub, "a - b with numpy broadcasting", {}, {}},
    {"mul", BinaryOp::Mul, "a * b with numpy broadcasting", {}, {}},
    {"div", BinaryOp::Div, "a / b with numpy broadcasting", {}, {0.5, 2.0}},
    {"maximum", BinaryOp::Maximum, "elementwise max(a, b) with broadcasting", {}, {}},
    {"minimum", BinaryOp::Minimum, "elementwise min(a, b) with broadcasting", {}, {}},
    {"pow", BinaryOp::Pow, "a ** b with broadcasting", {0.5, 2.0}, {-2.0, 2.0}},
};

struct UnaryInfo {
  const char* name;
  const char* summary;
  InputRange range;
};
const UnaryInfo kUnary[] = {
    {"relu", "max(x, 0)", {-3, 3}},
    {"relu6", "min(max(x, 0), 6)", {-3, 9}},
    {"clip", "min(max(x, min), max)", {-3, 3}},
    {"leaky_relu", "x if x >= 0 else alpha * x", {-3, 3}},
    {"sigmoid", "1 / (1 + exp(-x))", {-6, 6}},
    {"tanh", "tanh(x)", {-4, 4}},
    {"gelu", "x * (1 + erf(x / sqrt(2))) / 2", {-4, 4}},
    {"silu", "x * sigmoid(x)", {-6, 6}},
    {"hardswish", "x * relu6(x + 3) / 6", {-5, 5}},
    {"hardsigmoid", "relu6(x + 3) / 6", {-5, 5}},
    {"exp", "e ** x", {-4, 4}},
    {"log", "natural logarithm", {0.05, 4}},
    {"sqrt", "square root", {0.0, 4}},
    {"rsqrt", "1 / sqrt(x)", {0.1, 4}},
    {"erf", "the error function", {-3, 3}},
    {"neg", "-x", {-3, 3}},
    {"abs", "|x|", {-3, 3}},
    {"sin", "sine", {-4, 4}},
    {"cos", "cosine", {-4, 4}},
    {"floor", "the greatest integer not above x", {-4, 4}},
    {"ceil", "the least integer not below x", {-4, 4}},
    {"round", "the nearest integer, ties to even", {-4, 4}},
    {"sign", "-1, 0 or 1 by x's sign (NaN stays NaN)", {-3, 3}},
    {"softplus", "log(1 + e ** x)", {-8, 8}},
    {"elu", "x if x > 0 else alpha * (e ** x - 1)", {-4, 4}},
    {"selu", "gamma * (x if x > 0 else alpha * (e ** x - 1))", {-4, 4}},
};

}  // namespace

Expr unary_expr(const std::string& op, const Expr& x, double alpha, double beta) {
  DType t = x.dtype();
  auto k = [&](double v) { return make_const(t, v); };
  if (op == "relu") return max(x, k(0));
  if (op == "relu6") return min(max(x, k(0)), k(6));
  if (op == "clip") return min(max(x, k(alpha)), k(beta));
  if (op == "leaky_relu") return select(ge(x, k(0)), x, x * k(alpha));
  if (op == "sigmoid") return call(MathFn::sigmoid, {x});
  if (op == "tanh") return call(MathFn::tanh, {x});
  if (op == "gelu") return x * k(0.5) * (k(1) + call(MathFn::erf, {x * k(M_SQRT1_2)}));
  if (op == "silu") return x * call(MathFn::sigmoid, {x});
  // x times hardsigmoid(x): x * relu6(x + 3) / 6 in that order overflows for x above
  // float's largest / 6.
  if (op == "hardswish") return x * (min(max(x + k(3), k(0)), k(6)) / k(6));
  if (op == "hardsigmoid") return min(max(x + k(3), k(0)), k(6)) / k(6);
  if (op == "exp") return call(MathFn::exp, {x});
  if (op == "log") return call(MathFn::log, {x});
  if (op == "sqrt") return call(MathFn::sqrt, {x});
  if (op == "rsqrt") return call(MathFn::rsqrt, {x});
  if (op == "erf") return call(MathFn::erf, {x});
  if (op == "neg") return k(0) - x;
  if (op == "abs") return t.is_int() ? select(lt(x, k(0)), k(0) - x, x) : call(MathFn::fabs, {x});
  if (op == "sin") return call(MathFn::sin, {x});
  if (op == "cos") return call(MathFn::cos, {x});
  if (op == "floor") return call(MathFn::floor, {x});
  if (op == "ceil") return call(MathFn::ceil, {x});
  if (op == "round") return call(MathFn::rint, {x});
  if (op == "sign") return select(gt(x, k(0)), k(1), select(lt(x, k(0)), k(-1), x));
  // max(x, 0) + log(1 + e ** -|x|): no overflow for large x.
  if (op == "softplus")
    return max(x, k(0)) + call(MathFn::log, {k(1) + call(MathFn::exp, {k(0) - call(MathFn::fabs, {x})})});
  // (alpha: the negative side's scale; beta: selu's gamma)
  if (op == "elu") return select(gt(x, k(0)), x, k(alpha) * (call(MathFn::exp, {x}) - k(1)));
  if (op == "selu") return k(beta) * select(gt(x, k(0)), x, k(alpha) * (call(MathFn::exp, {x}) - k(1)));
  throw OpError(op, "", "is not a unary operator");
}

Tensor unary(const std::string& op, const Tensor& x, double alpha, double beta) {
  Check c(op);
  c.that(x.dtype().is_float() || (x.dtype().is_int() && (op == "neg" || op == "abs" || op == "relu")), "x",
         "expects a float tensor, got " + x.dtype().str());
  if (op == "clip")
    c.that(alpha <= beta, "min", "min " + std::to_string(alpha) + " exceeds max " + std::to_string(beta));
  return te::compute(
      op, x.shape(), [&](const std::vector<Var>& i) { return unary_expr(op, x.read(as_exprs(i)), alpha, beta); },
      te::OpPattern::Elementwise, op);
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, const std::string& name) {
  Check c(name);
  c.that(a.dtype() == b.dtype(), "b", "operand types differ: " + a.dtype().str() + " and " + b.dtype().str());
  std::vector<int64_t> out = broadcast_shapes(c, a.shape(), b.shape());
  bool same = a.shape() == b.shape();
  return te::compute(
      name, out,
      [&](const std::vector<Var>& i) {
        Expr x = a.read(broadcast_index(a.shape(), out, i)), y = b.read(broadcast_index(b.shape(), out, i));
        switch (op) {
          case BinaryOp::Add:
            return x + y;
          case BinaryOp::Sub:
            return x - y;
          case BinaryOp::Mul:
            return x * y;
          case BinaryOp::Div:
            return x / y;
          case BinaryOp::Maximum:
            return max(x, y);
          case BinaryOp::Minimum:
            return min(x, y);
          case BinaryOp::Pow:
            return call(MathFn::pow, {x, y});
        }
        return x;
      },
      same ? te::OpPattern::Elementwise : te::OpPattern::Broadcast, name);
}

void register_elementwise_ops(std::vector<OpDef>& r) {
  for (const BinaryInfo& info : kBinary) {
    r.push_back({info.name,
                 "elementwise",
                 info.summary,
                 {p_ints("a_shape", {2, 3, 4}, "shape of a"), p_ints("b_shape", {3, 1}, "shape of b")},
                 [info](const Attrs& at) {
                   Check c(info.name);
                   Tensor a = te::placeholder("a", c.shape(at, "a_shape")),
                          b = te::placeholder("b", c.shape(at, "b_shape"));
                   OpGraph g;
                   g.inputs = {a, b};
                   g.outputs = {binary(info.op, a, b, info.name)};
                   g.ranges = {info.a, info.b};
                   g.flops = static_cast<double>(g.outputs[0].numel());
                   return g;
                 }});
  }
  for (const UnaryInfo& info : kUnary) {
    std::vector<ParamSpec> params = {p_ints("shape", {3, 5, 7}, "shape of x")};
    std::string name = info.name;
    if (name == "clip") {
      params.push_back(p_float("min", -1.0, "lower bound"));
      params.push_back(p_float("max", 1.5, "upper bound"));
    }
    if (name == "leaky_relu") params.push_back(p_float("alpha", 0.01, "slope for x < 0"));
    if (name == "elu") params.push_back(p_float("alpha", 1.0, "scale of the negative side"));
    if (name == "selu") {
      params.push_back(p_float("alpha", 1.67326319217681884765625, "scale of the negative side"));
      params.push_back(p_float("gamma", 1.05070102214813232421875, "overall scale"));
    }
    r.push_back({name, "elementwise", info.summary, params, [info, name](const Attrs& at) {
                   Check c(name);
                   Tensor x = te::placeholder("x", c.shape(at, "shape"));
                   double alpha = 0, beta = 0;
                   if (name == "clip") {
                     alpha = at.f("min");
                     beta = at.f("max");
                     c.that(std::isfinite(alpha) && std::isfinite(beta), "min", "bounds must be finite");
                   }
                   if (name == "leaky_relu" || name == "elu" || name == "selu") {
                     alpha = at.f("alpha");
                     c.that(std::isfinite(alpha), "alpha", "must be finite");
                   }
                   if (name == "selu") {
                     beta = at.f("gamma");
                     c.that(std::isfinite(beta), "gamma", "must be finite");
                   }
                   OpGraph g;
                   g.inputs = {x};
                   g.outputs = {unary(name, x, alpha, beta)};
                   g.ranges = {info.range};
                   g.flops = static_cast<double>(x.numel());
                   return g;
                 }});
  }
}

}  // namespace basin::ops
