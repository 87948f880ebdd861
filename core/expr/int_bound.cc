// Constant integer bounds of expressions, propagated bottom-up with saturation at the
// infinities.
#include <algorithm>

#include "core/expr/analyzer.h"
#include "core/expr/evaluate.h"
#include "core/util/error.h"

namespace basin {

namespace {

__extension__ typedef __int128 i128;
constexpr int64_t kNeg = IntBound::kNegInf;
constexpr int64_t kPos = IntBound::kPosInf;

i128 widen(int64_t v) {
  // Infinities become values far outside int64 so that saturation keeps them infinite.
  if (v == kNeg) return -(static_cast<i128>(1) << 100);
  if (v == kPos) return static_cast<i128>(1) << 100;
  return v;
}
int64_t narrow(i128 v) {
  if (v <= static_cast<i128>(kNeg)) return kNeg;
  if (v >= static_cast<i128>(kPos)) return kPos;
  return static_cast<int64_t>(v);
}

IntBound from_corners(std::initializer_list<i128> vs) {
  i128 lo = *std::min_element(vs.begin(), vs.end());
  i128 hi = *std::max_element(vs.begin(), vs.end());
  return {narrow(lo), narrow(hi)};
}

IntBound type_range(DType t) {
  if (t.is_bool()) return {0, 1};
  if (t.is_int() && t.bits < 64) {
    int64_t hi = (static_cast<int64_t>(1) << (t.bits - 1)) - 1;
    return {-hi - 1, hi};
  }
  return IntBound::everything();
}

IntBound intersect(IntBound a, IntBound b) { return {std::max(a.min, b.min), std::min(a.max, b.max)}; }

int64_t floordiv_sat(int64_t a, int64_t c) {
  if (a == kNeg) return c > 0 ? kNeg : kPos;
  if (a == kPos) return c > 0 ? kPos : kNeg;
  return floordiv_int(a, c);
}

}  // namespace

void Analyzer::bind(const Var& v, int64_t min, int64_t max) { bounds_[v.id()] = {min, max}; }

void Analyzer::bind_loop(const Var& v, const Expr& min, const Expr& extent) {
  IntBound lo = bound(min);
  IntBound ext = bound(extent);
  if (lo.min == kNeg || ext.max == kPos) {
    unbind(v);
    return;
  }
  bounds_[v.id()] = {lo.min, narrow(widen(lo.max) + widen(ext.max) - 1)};
}

void Analyzer::unbind(const Var& v) { bounds_.erase(v.id()); }

IntBound Analyzer::bound(const Expr& e) const {
  const ExprNode& n = *e;
  if (!n.dtype.is_int() && !n.dtype.is_bool()) return IntBound::everything();
  switch (n.kind) {
    case ExprKind::IntImm:
      return IntBound::point(n.ival);
    case ExprKind::Var: {
      auto it = bounds_.find(n.ival);
      return it == bounds_.end() ? type_range(n.dtype) : intersect(it->second, type_range(n.dtype));
    }
    case ExprKind::Add: {
      IntBound a = bound(n.args[0]), b = bound(n.args[1]);
      return {narrow(widen(a.min) + widen(b.min)), narrow(widen(a.max) + widen(b.max))};
    }
    case ExprKind::Sub: {
      IntBound a = bound(n.args[0]), b = bound(n.args[1]);
      return {narrow(widen(a.min) - widen(b.max)), narrow(widen(a.max) - widen(b.min))};
    }
    case ExprKind::Mul: {
      IntBound a = bound(n.args[0]), b = bound(n.args[1]);
      auto m = [](int64_t x, int64_t y) -> i128 {
        if (x == 0 || y == 0) return 0;
        bool inf = x == kNeg || x == kPos || y == kNeg || y == kPos;
        if (!inf) return static_cast<i128>(x) * y;
        return ((x < 0) != (y < 0)) ? widen(kNeg) : widen(kPos);
      };
      return from_corners({m(a.min, b.min), m(a.min, b.max), m(a.max, b.min), m(a.max, b.max)});
    }
    case ExprKind::FloorDiv:
    case ExprKind::Div: {
      IntBound a = bound(n.args[0]), b = bound(n.args[1]);
      if (b.min > 0 || b.max < 0) {
        bool floor = n.kind == ExprKind::FloorDiv;
        auto d = [&](int64_t x, int64_t y) -> i128 {
          if (x == kNeg || x == kPos) return widen(x) * (y > 0 ? 1 : -1);
          if (y == kNeg || y == kPos) return (x == 0 ? 0 : (floor && ((x < 0) != (y < 0)) ? -1 : 0));
          return floor ? floordiv_int(x, y) : x / y;
        };
        return from_corners({d(a.min, b.min), d(a.min, b.max), d(a.max, b.min), d(a.max, b.max)});
      }
      return type_range(n.dtype);
    }
    case ExprKind::FloorMod: {
      IntBound a = bound(n.args[0]), b = bound(n.args[1]);
      if (b.min > 0) {
        if (b.is_point()) {
          int64_t c = b.min;
          int64_t qa = floordiv_sat(a.min, c), qb = floordiv_sat(a.max, c);
          if (a.min != kNeg && a.max != kPos && qa == qb) return {a.min - qa * c, a.max - qa * c};
        }
        int64_t hi = b.max == kPos ? kPos : b.max - 1;
        if (a.min >= 0) hi = std::min(hi, a.max);
        return {0, hi};
      }
      if (b.max < 0) return {b.min == kNeg ? kNeg : b.min + 1, 0};
      return type_range(n.dtype);
    }
    case ExprKind::Min: {
      IntBound a = bound(n.args[0]), b = bound(n.args[1]);
      return {std::min(a.min, b.min), std::min(a.max, b.max)};
    }
    case ExprKind::Max: {
      IntBound a = bound(n.args[0]), b = bound(n.args[1]);
      return {std::max(a.min, b.min), std::max(a.max, b.max)};
    }
    case ExprKind::Select: {
      IntBound c = bound(n.args[0]);
      if (c.is_point()) return bound(n.args[c.min ? 1 : 2]);
      IntBound a = bound(n.args[1]), b = bound(n.args[2]);
      return {std::min(a.min, b.min), std::max(a.max, b.max)};
    }
    case ExprKind::Cast: {
      IntBound a = bound(n.args[0]);
      IntBound t = type_range(n.dtype);
      if (n.args[0].dtype().is_float()) return t;
      if (n.dtype.is_bool()) return {a.min > 0 || a.max < 0 ? 1 : 0, a.min == 0 && a.max == 0 ? 0 : 1};
      if (a.within(t.min, t.max)) return a;
      return t;
    }
    default:
      if (n.dtype.is_bool()) return {0, 1};
      return type_range(n.dtype);
  }
}

}  // namespace basin
