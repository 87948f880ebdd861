// Rules for && || ! select and cast.
#include "core/expr/simplify_rules.h"

namespace basin {

namespace {

ExprKind negated_int_compare(ExprKind k, bool* swap) {
  *swap = false;
  switch (k) {
    case ExprKind::EQ:
      return ExprKind::NE;
    case ExprKind::NE:
      return ExprKind::EQ;
    case ExprKind::LT:
      *swap = true;
      return ExprKind::LE;  // !(a < b) == b <= a
    case ExprKind::LE:
      *swap = true;
      return ExprKind::LT;  // !(a <= b) == b < a
    case ExprKind::GT:
      return ExprKind::LE;
    default:
      return ExprKind::LT;  // !(a >= b) == a < b
  }
}

}  // namespace

Expr SimplifyRules::logic(const Analyzer& an, const Expr& e) {
  int64_t c;
  switch (e.kind()) {
    case ExprKind::And:
    case ExprKind::Or: {
      bool is_and = e.kind() == ExprKind::And;
      const Expr& x = e.arg(0);
      const Expr& y = e.arg(1);
      if (is_const_int(x, &c)) return (c != 0) == is_and ? y : x;
      if (is_const_int(y, &c)) return (c != 0) == is_and ? x : y;
      if (structural_equal(x, y)) return x;
      return e;
    }
    case ExprKind::Not: {
      const Expr& x = e.arg(0);
      if (x.kind() == ExprKind::Not) return x.arg(0);
      switch (x.kind()) {
        case ExprKind::EQ:
        case ExprKind::NE:
        case ExprKind::LT:
        case ExprKind::LE:
        case ExprKind::GT:
        case ExprKind::GE: {
          if (!x.arg(0).dtype().is_int()) return e;  // NaN makes float negation inexact
          bool swap;
          ExprKind k = negated_int_compare(x.kind(), &swap);
          Expr r = swap ? make_binary(k, x.arg(1), x.arg(0)) : make_binary(k, x.arg(0), x.arg(1));
          return resimplify(an, r);
        }
        default:
          return e;
      }
    }
    case ExprKind::Select: {
      if (is_const_int(e.arg(0), &c)) return e.arg(c ? 1 : 2);
      if (structural_equal(e.arg(1), e.arg(2))) return e.arg(1);
      return e;
    }
    case ExprKind::Cast: {
      if (e.arg(0).dtype() == e.dtype()) return e.arg(0);
      // A value widened to a type that holds every value of its own and narrowed back
      // is itself: bfloat16 through float32 (a stored activation read and copied to
      // bfloat16 again), 8-bit integers through int32.
      const Expr& w = e.arg(0);
      if (w.kind() == ExprKind::Cast && w.arg(0).dtype() == e.dtype()) {
        const DType t = e.dtype(), mid = w.dtype();
        if ((t.is_bf16() && mid.element() == DType::f32()) || (t.is_byte() && mid.element() == DType::i32()))
          return w.arg(0);
      }
      return e;
    }
    default:
      return e;
  }
}

}  // namespace basin
