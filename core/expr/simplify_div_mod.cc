// Rules for floordiv and floormod by a positive constant c, using divisibility and
// bounds. With a = Q*c + R (Q the terms whose coefficients c divides):
//   floordiv(a, c) = Q + floordiv(R, c)        floormod(a, c) = floormod(R, c)
//   floordiv(g*y, g*c') = floordiv(y, c')      floormod(g*y, g*c') = g*floormod(y, c')
//   R in [m*c, m*c + c - 1]  =>  floordiv(R, c) = m and floormod(R, c) = R - m*c
//   floordiv(floordiv(x, c1), c2) = floordiv(x, c1*c2)        (c1, c2 > 0)
//   floormod(floormod(x, c1), c2) = floormod(x, c2)           (c2 divides c1)
#include "core/expr/simplify_rules.h"

#include "core/expr/evaluate.h"

namespace basin {

namespace {

bool single_term(const LinearForm& f, ExprKind k, int64_t* inner_c) {
  return f.constant == 0 && f.terms.size() == 1 && f.terms[0].second == 1 && f.terms[0].first.kind() == k &&
         is_const_int(f.terms[0].first.arg(1), inner_c) && *inner_c > 0;
}

}  // namespace

Expr SimplifyRules::div_mod(const Analyzer& an, const Expr& e) {
  const Expr& x = e.arg(0);
  int64_t c;
  if (!is_const_int(e.arg(1), &c) || c <= 0) return e;
  DType t = e.dtype();
  bool is_div = e.kind() == ExprKind::FloorDiv;
  if (c == 1) return is_div ? x : int_imm(t, 0);

  LinearForm f = an.linear_form(x);
  LinearForm quotient;  // the part that leaves the division
  LinearForm rest;
  for (auto& [term, k] : f.terms) {
    if (k % c == 0) quotient.terms.emplace_back(term, k / c);
    else rest.terms.emplace_back(term, k);
  }
  quotient.constant = floordiv_int(f.constant, c);
  rest.constant = floormod_int(f.constant, c);

  // Divide out a common factor of the remainder and the divisor.
  int64_t g = gcd_int(c, rest.constant);
  for (auto& tk : rest.terms) g = gcd_int(g, tk.second);
  int64_t scale = 1;  // floormod(g*y, g*c') = g * floormod(y, c')
  if (g > 1) {
    for (auto& tk : rest.terms) tk.second /= g;
    rest.constant /= g;
    c /= g;
    scale = g;
  }

  Expr inner;
  IntBound b = an.bound(an.from_linear(rest, t));
  int64_t m_lo = b.min == IntBound::kNegInf ? 0 : floordiv_int(b.min, c);
  int64_t m_hi = b.max == IntBound::kPosInf ? 1 : floordiv_int(b.max, c);
  bool fixed = b.min != IntBound::kNegInf && b.max != IntBound::kPosInf && m_lo == m_hi;
  int64_t c_inner;
  if (is_div) {
    if (rest.terms.empty()) {
      inner = int_imm(t, floordiv_int(rest.constant, c));
    } else if (fixed) {
      inner = int_imm(t, m_lo);
    } else if (single_term(rest, ExprKind::FloorDiv, &c_inner)) {
      const Expr& in = rest.terms[0].first;
      inner = SimplifyRules::resimplify(an, floordiv(in.arg(0), int_imm(t, c_inner * c)));
    } else {
      inner = floordiv(an.from_linear(rest, t), int_imm(t, c));
    }
    quotient.terms.emplace_back(inner, 1);
    if (is_const(inner)) {
      quotient.terms.pop_back();
      quotient.constant += inner->ival;
    }
    return an.from_linear(an.linear_form(an.from_linear(quotient, t)), t);
  }

  if (rest.terms.empty()) {
    inner = int_imm(t, floormod_int(rest.constant, c));
  } else if (fixed) {
    LinearForm shifted = rest;
    shifted.constant -= m_lo * c;
    inner = an.from_linear(shifted, t);
  } else if (single_term(rest, ExprKind::FloorMod, &c_inner) && c_inner % c == 0) {
    inner = floormod(rest.terms[0].first.arg(0), int_imm(t, c));
  } else {
    inner = floormod(an.from_linear(rest, t), int_imm(t, c));
  }
  if (scale == 1) return inner;
  return an.from_linear(an.linear_form(mul(inner, int_imm(t, scale))), t);
}

}  // namespace basin
