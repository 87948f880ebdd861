// The arithmetic analyzer: integer bounds of expressions under known variable ranges,
// and the simplifier that uses them. One Analyzer is the shared context of a pass;
// the rules live in one file per operator family (simplify_*.cc).
//
// The simplifier assumes integer index arithmetic does not overflow (as every tensor
// compiler does); under that assumption simplify(e) evaluates equal to e at every
// point where the bound variables are inside their ranges.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/expr/expr.h"

namespace basin {

// Inclusive integer interval; the extreme int64 values stand for -inf and +inf.
struct IntBound {
  static constexpr int64_t kNegInf = INT64_MIN;
  static constexpr int64_t kPosInf = INT64_MAX;
  int64_t min = kNegInf;
  int64_t max = kPosInf;
  static IntBound everything() { return {}; }
  static IntBound point(int64_t v) { return {v, v}; }
  bool is_point() const { return min == max; }
  bool within(int64_t lo, int64_t hi) const { return min >= lo && max <= hi; }
};

// A linear combination sum(coef_i * term_i) + constant over non-linear atoms, with
// terms in canonical (structural) order and unique.
struct LinearForm {
  std::vector<std::pair<Expr, int64_t>> terms;
  int64_t constant = 0;
};

class Analyzer {
 public:
  // Declares that v ranges over [min, max] (inclusive).
  void bind(const Var& v, int64_t min, int64_t max);
  // Declares a loop variable's range from its min and extent where they are constant.
  void bind_loop(const Var& v, const Expr& min, const Expr& extent);
  void unbind(const Var& v);

  IntBound bound(const Expr& e) const;
  Expr simplify(const Expr& e) const;
  // True if cond (a bool expression) is known to hold for every value in range.
  bool can_prove(const Expr& cond) const;

  // Linear-form helpers shared by the rule files.
  LinearForm linear_form(const Expr& e) const;
  Expr from_linear(const LinearForm& f, DType t) const;

 private:
  friend struct SimplifyRules;
  Expr simplify_node(const Expr& e) const;
  std::unordered_map<int64_t, IntBound> bounds_;
};

// Convenience: simplify with no variable ranges known.
Expr simplify(const Expr& e);

// e as a * v + rest, where rest does not use v: false when v appears in a non-linear
// term. `alone`: rest is the constant *b.
bool linear_in(const Expr& e, const Var& v, int64_t* a, int64_t* b, bool* alone);
// v's coefficient in e, when e is linear in v (0 when e does not use v); false otherwise.
bool coefficient(const Expr& e, const Var& v, int64_t* c);

}  // namespace basin
