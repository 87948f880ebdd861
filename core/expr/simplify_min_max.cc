// Rules for min and max: decided by bounds of the operands or of their difference;
// nested constants folded; commutative operands in canonical order.
#include "core/expr/simplify_rules.h"

namespace basin {

Expr SimplifyRules::min_max(const Analyzer& an, const Expr& e) {
  if (!e.dtype().is_int()) return e;
  bool is_min = e.kind() == ExprKind::Min;
  Expr x = e.arg(0);
  Expr y = e.arg(1);
  if (structural_equal(x, y)) return x;
  IntBound bx = an.bound(x), by = an.bound(y);
  if (bx.max <= by.min) return is_min ? x : y;
  if (by.max <= bx.min) return is_min ? y : x;
  LinearForm d = an.linear_form(sub(x, y));
  IntBound bd = an.bound(an.from_linear(d, e.dtype()));
  if (bd.max <= 0) return is_min ? x : y;
  if (bd.min >= 0) return is_min ? y : x;
  // min(min(z, c1), c2) = min(z, min(c1, c2))
  int64_t c2;
  if (x.kind() == e.kind() && is_const_int(y, &c2)) {
    int64_t c1;
    if (is_const_int(x.arg(1), &c1))
      return resimplify(
          an, make_binary(e.kind(), x.arg(0), int_imm(e.dtype(), is_min ? std::min(c1, c2) : std::max(c1, c2))));
  }
  // Constants last, others in structural order.
  bool swap = is_const(x) ? !is_const(y) : (!is_const(y) && structural_compare(x, y) > 0);
  return swap ? make_binary(e.kind(), y, x) : e;
}

}  // namespace basin
