#include "core/expr/evaluate.h"

#include <cmath>
#include <algorithm>
#include <cstring>

#include "core/util/error.h"

namespace basin {

int64_t saturate_to_byte(DType t, double v) {
  const double lo = t.is_uint() ? 0 : -128, hi = t.is_uint() ? 255 : 127;
  if (std::isnan(v)) return 0;
  return static_cast<int64_t>(std::min(std::max(v, lo), hi));  // toward zero inside the range
}

int64_t wrap_to(DType t, int64_t v) {
  if (t.is_bool()) return v != 0;
  if (t.is_uint())
    return t.bits >= 64 ? v : static_cast<int64_t>(static_cast<uint64_t>(v) & ((uint64_t{1} << t.bits) - 1));
  return wrap_int(v, t.bits);
}

int64_t wrap_int(int64_t v, int bits) {
  if (bits >= 64) return v;
  int s = 64 - bits;
  return static_cast<int64_t>(static_cast<uint64_t>(v) << s) >> s;
}

int64_t floordiv_int(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t floormod_int(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

float round_to_tf32(float x) {
  if (!std::isfinite(x)) return x;
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x1000u) & 0xffffe000u;  // sign-magnitude: adding half an ulp rounds the magnitude away
  std::memcpy(&x, &u, 4);
  return x;
}

float round_to_fp16(float x) {
  if (!std::isfinite(x)) return x;
  const float a = std::fabs(x);
  if (a >= 65520.0f) return std::copysign(INFINITY, x);  // past half the last ulp above 65504
  if (a < 6.103515625e-05f) {                            // binary16's subnormals: steps of 2^-24
    const float q = 5.9604644775390625e-08f;
    return std::copysign(std::nearbyint(a / q) * q, x);  // exact scaling; ties to even
  }
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u;
  std::memcpy(&x, &u, 4);
  return x;
}

float round_to_bf16(float x) {
  if (std::isnan(x)) return x;
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &u, 4);
  return x;
}

uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if (std::isnan(x)) return static_cast<uint16_t>((u >> 16) | 0x40u);
  if ((u & 0x7f800000u) == 0) return static_cast<uint16_t>((u >> 16) & 0x8000u);  // subnormal (or zero)
  const float r = round_to_bf16(x);
  std::memcpy(&u, &r, 4);
  return static_cast<uint16_t>(u >> 16);
}

float bf16_value(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

bool is_rounding(MathFn f) { return f == MathFn::tf32 || f == MathFn::fp16 || f == MathFn::bf16; }

namespace {
template <typename T>
T math_t(MathFn f, T a, T b) {
  switch (f) {
    case MathFn::exp:
      return std::exp(a);
    case MathFn::log:
      return std::log(a);
    case MathFn::sqrt:
      return std::sqrt(a);
    case MathFn::rsqrt:
      return T(1) / std::sqrt(a);
    case MathFn::pow:
      return std::pow(a, b);
    case MathFn::sigmoid:
      return T(1) / (T(1) + std::exp(-a));
    case MathFn::tanh:
      return std::tanh(a);
    case MathFn::erf:
      return std::erf(a);
    case MathFn::fabs:
      return std::fabs(a);
    case MathFn::floor:
      return std::floor(a);
    case MathFn::ceil:
      return std::ceil(a);
    case MathFn::rint:
      return std::nearbyint(a);
    case MathFn::sin:
      return std::sin(a);
    case MathFn::cos:
      return std::cos(a);
    case MathFn::tf32:
      return static_cast<T>(round_to_tf32(static_cast<float>(a)));
    case MathFn::fp16:
      return static_cast<T>(round_to_fp16(static_cast<float>(a)));
    case MathFn::bf16:
      return static_cast<T>(round_to_bf16(static_cast<float>(a)));
  }
  return a;
}
}  // namespace

double apply_math(MathFn f, double a, double b, int bits) {
  if (bits == 32) return math_t<float>(f, static_cast<float>(a), static_cast<float>(b));
  return math_t<double>(f, a, b);
}

Value Value::of_int(DType t, int64_t v) {
  Value r;
  r.dtype = t;
  r.i = wrap_to(t, v);
  return r;
}

Value Value::of_float(DType t, double v) {
  Value r;
  r.dtype = t;
  r.f = t.bits == 32 ? static_cast<double>(static_cast<float>(v)) : v;
  return r;
}

namespace {

struct Evaluator {
  const VarValues& vars;
  const LoadFn& load_fn;

  Value arith(ExprKind k, DType t, const Value& a, const Value& b) {
    if (t.is_float()) {
      double x = a.f, y = b.f, r = 0;
      bool f32 = t.bits == 32;
      auto rnd = [&](double v) { return f32 ? static_cast<double>(static_cast<float>(v)) : v; };
      switch (k) {
        case ExprKind::Add:
          r = f32 ? float(x) + float(y) : x + y;
          break;
        case ExprKind::Sub:
          r = f32 ? float(x) - float(y) : x - y;
          break;
        case ExprKind::Mul:
          r = f32 ? float(x) * float(y) : x * y;
          break;
        case ExprKind::Div:
          r = f32 ? float(x) / float(y) : x / y;
          break;
        case ExprKind::Min:  // NaN propagates (expr.h)
          r = std::isnan(x) ? x : std::isnan(y) ? y : (x < y ? x : y);
          break;
        case ExprKind::Max:
          r = std::isnan(x) ? x : std::isnan(y) ? y : (x > y ? x : y);
          break;
        default:
          BASIN_CHECK(false) << kind_name(k) << " on floats";
      }
      return Value::of_float(t, rnd(r));
    }
    int64_t x = a.i, y = b.i, r = 0;
    auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
    switch (k) {
      case ExprKind::Add:
        r = static_cast<int64_t>(u(x) + u(y));
        break;
      case ExprKind::Sub:
        r = static_cast<int64_t>(u(x) - u(y));
        break;
      case ExprKind::Mul:
        r = static_cast<int64_t>(u(x) * u(y));
        break;
      case ExprKind::Div:
      case ExprKind::FloorDiv:
      case ExprKind::FloorMod:
        if (y == 0) throw RuntimeError("integer division by zero");
        if (k == ExprKind::Div) r = (x == INT64_MIN && y == -1) ? x : x / y;
        else if (k == ExprKind::FloorDiv) r = (x == INT64_MIN && y == -1) ? x : floordiv_int(x, y);
        else r = (y == -1) ? 0 : floormod_int(x, y);
        break;
      case ExprKind::Min:
        r = std::min(x, y);
        break;
      case ExprKind::Max:
        r = std::max(x, y);
        break;
      default:
        BASIN_CHECK(false) << kind_name(k) << " on integers";
    }
    return Value::of_int(t, r);
  }

  bool compare(ExprKind k, const Value& a, const Value& b) {
    if (a.dtype.is_float()) {
      double x = a.f, y = b.f;
      switch (k) {
        case ExprKind::EQ:
          return x == y;
        case ExprKind::NE:
          return x != y;
        case ExprKind::LT:
          return x < y;
        case ExprKind::LE:
          return x <= y;
        case ExprKind::GT:
          return x > y;
        default:
          return x >= y;
      }
    }
    int64_t x = a.i, y = b.i;
    switch (k) {
      case ExprKind::EQ:
        return x == y;
      case ExprKind::NE:
        return x != y;
      case ExprKind::LT:
        return x < y;
      case ExprKind::LE:
        return x <= y;
      case ExprKind::GT:
        return x > y;
      default:
        return x >= y;
    }
  }

  Value eval(const Expr& e) {
    const ExprNode& n = *e;
    switch (n.kind) {
      case ExprKind::IntImm:
        return Value::of_int(n.dtype, n.ival);
      case ExprKind::FloatImm:
        return Value::of_float(n.dtype, n.fval);
      case ExprKind::Var: {
        auto it = vars.find(n.ival);
        if (it == vars.end()) throw RuntimeError("unbound variable '" + n.name + "'");
        return it->second;
      }
      case ExprKind::Add:
      case ExprKind::Sub:
      case ExprKind::Mul:
      case ExprKind::Div:
      case ExprKind::FloorDiv:
      case ExprKind::FloorMod:
      case ExprKind::Min:
      case ExprKind::Max:
        return arith(n.kind, n.dtype, eval(n.args[0]), eval(n.args[1]));
      case ExprKind::EQ:
      case ExprKind::NE:
      case ExprKind::LT:
      case ExprKind::LE:
      case ExprKind::GT:
      case ExprKind::GE:
        return Value::of_int(n.dtype, compare(n.kind, eval(n.args[0]), eval(n.args[1])));
      case ExprKind::And:
        return Value::of_int(n.dtype, eval(n.args[0]).i && eval(n.args[1]).i);
      case ExprKind::Or:
        return Value::of_int(n.dtype, eval(n.args[0]).i || eval(n.args[1]).i);
      case ExprKind::Not:
        return Value::of_int(n.dtype, !eval(n.args[0]).i);
      case ExprKind::Select:
        return eval(n.args[0]).i ? eval(n.args[1]) : eval(n.args[2]);
      case ExprKind::Cast: {
        Value v = eval(n.args[0]);
        if (n.dtype.is_float()) return Value::of_float(n.dtype, v.as_double());
        if (n.dtype.is_bool()) return Value::of_int(n.dtype, v.dtype.is_float() ? v.f != 0 : v.i != 0);
        if (v.dtype.is_float() && n.dtype.is_byte()) return Value::of_int(n.dtype, saturate_to_byte(n.dtype, v.f));
        if (v.dtype.is_float()) {
          if (!std::isfinite(v.f)) throw RuntimeError("cast of a non-finite float to an integer");
          return Value::of_int(n.dtype, static_cast<int64_t>(v.f));
        }
        return Value::of_int(n.dtype, v.i);
      }
      case ExprKind::Call: {
        double a = eval(n.args[0]).f;
        double b = n.args.size() > 1 ? eval(n.args[1]).f : 0.0;
        return Value::of_float(n.dtype, apply_math(n.fn, a, b, n.dtype.bits));
      }
      case ExprKind::Load: {
        if (!load_fn) throw RuntimeError("load from '" + n.buffer->name + "' needs a buffer");
        std::vector<int64_t> idx;
        for (const Expr& a : n.args) idx.push_back(eval(a).i);
        return load_fn(*n.buffer, idx);
      }
    }
    return {};
  }
};

}  // namespace

Value evaluate(const Expr& e, const VarValues& vars, const LoadFn& load) { return Evaluator{vars, load}.eval(e); }

int64_t evaluate_int(const Expr& e, const std::unordered_map<int64_t, int64_t>& vars) {
  VarValues vv;
  for (auto& [id, v] : vars) vv[id] = Value::of_int(DType::i64(), v);
  Value r = evaluate(e, vv);
  return r.dtype.is_float() ? static_cast<int64_t>(r.f) : r.i;
}

}  // namespace basin
