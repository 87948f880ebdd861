// Rules for + - * and exact division: integer operands go through the canonical
// linear form (collecting like terms and constants); float operands only fold
// identities that are exact in IEEE arithmetic.
#include "core/expr/simplify_rules.h"

namespace basin {

Expr SimplifyRules::arith(const Analyzer& an, const Expr& e) {
  const Expr& x = e.arg(0);
  const Expr& y = e.arg(1);
  if (e.dtype().is_float()) {
    switch (e.kind()) {
      case ExprKind::Add:
        if (is_zero(y)) return x;
        if (is_zero(x)) return y;
        return e;
      case ExprKind::Sub:
        return is_zero(y) ? x : e;
      case ExprKind::Mul:
        if (is_one(y)) return x;
        if (is_one(x)) return y;
        return e;
      default:
        return is_one(y) ? x : e;
    }
  }
  if (e.kind() == ExprKind::Div) {
    int64_t c;
    if (!is_const_int(y, &c) || c == 0) return e;
    if (c == 1) return x;
    LinearForm f = an.linear_form(x);
    if (f.constant % c != 0) return e;
    for (auto& t : f.terms)
      if (t.second % c != 0) return e;
    for (auto& t : f.terms) t.second /= c;
    f.constant /= c;
    return an.from_linear(f, e.dtype());
  }
  if (e.kind() == ExprKind::Mul && !is_const(x) && !is_const(y)) {
    // A product of two non-constants is an atom; order its operands canonically.
    return structural_compare(x, y) > 0 ? mul(y, x) : e;
  }
  return an.from_linear(an.linear_form(e), e.dtype());
}

}  // namespace basin
