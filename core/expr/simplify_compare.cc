// Rules for comparisons of integers: decided by the bound of (lhs - rhs) where
// possible; otherwise rewritten to a canonical form with > and >= turned around,
// like terms collected, positive terms on the left, negative ones on the right, and
// the constant on the side where it is positive.
#include "core/expr/simplify_rules.h"

namespace basin {

Expr SimplifyRules::compare(const Analyzer& an, const Expr& e) {
  const Expr& x = e.arg(0);
  const Expr& y = e.arg(1);
  DType t = x.dtype();
  if (!t.is_int()) return e;
  if (structural_equal(x, y)) {
    ExprKind k = e.kind();
    return bool_imm(k == ExprKind::EQ || k == ExprKind::LE || k == ExprKind::GE);
  }
  ExprKind k = e.kind();
  LinearForm d = k == ExprKind::GT || k == ExprKind::GE ? an.linear_form(sub(y, x)) : an.linear_form(sub(x, y));
  if (k == ExprKind::GT) k = ExprKind::LT;
  if (k == ExprKind::GE) k = ExprKind::LE;
  IntBound b = an.bound(an.from_linear(d, t));
  switch (k) {
    case ExprKind::LT:
      if (b.max < 0) return bool_imm(true);
      if (b.min >= 0) return bool_imm(false);
      break;
    case ExprKind::LE:
      if (b.max <= 0) return bool_imm(true);
      if (b.min > 0) return bool_imm(false);
      break;
    case ExprKind::EQ:
      if (b.is_point()) return bool_imm(b.min == 0);
      if (b.min > 0 || b.max < 0) return bool_imm(false);
      break;
    default:  // NE
      if (b.is_point()) return bool_imm(b.min != 0);
      if (b.min > 0 || b.max < 0) return bool_imm(true);
      break;
  }
  // One quotient against a constant, q = floordiv(g, c) with c > 0: q < m is g < m c,
  // q > m is g >= (m + 1) c (a padding's bounds on a flattened run of columns and
  // channels, 1 <= floordiv(f, 3), become 3 <= f, linear in the vector's lanes).
  int64_t divisor = 0;
  if ((k == ExprKind::LT || k == ExprKind::LE) && d.terms.size() == 1 &&
      (d.terms[0].second == 1 || d.terms[0].second == -1) && d.terms[0].first.kind() == ExprKind::FloorDiv &&
      is_const_int(d.terms[0].first.arg(1), &divisor) && divisor > 0) {
    const Expr& g = d.terms[0].first.arg(0);
    // s q + K < 0 (LT) or <= 0 (LE), as q < m (s = 1) or q > m (s = -1).
    const int64_t K = d.constant, s = d.terms[0].second;
    const int64_t limit = int64_t{1} << 40;  // no overflow in the products below
    if (K > -limit && K < limit && divisor < limit) {
      if (s == 1) {
        const int64_t m = k == ExprKind::LT ? -K : -K + 1;  // q < m
        return an.simplify(lt(g, make_const(t, m * divisor)));
      }
      const int64_t m = k == ExprKind::LT ? K : K - 1;  // q > m
      return an.simplify(le(make_const(t, (m + 1) * divisor), g));
    }
  }
  LinearForm lhs, rhs;
  for (auto& [term, c] : d.terms) {
    if (c > 0) lhs.terms.emplace_back(term, c);
    else rhs.terms.emplace_back(term, -c);
  }
  if (d.constant > 0) lhs.constant = d.constant;
  else rhs.constant = -d.constant;
  return make_binary(k, an.from_linear(lhs, t), an.from_linear(rhs, t));
}

}  // namespace basin
