// Internal to the simplifier: the rule families, one file each, sharing the analyzer.
// Each takes a node whose operands are already simplified and returns its simplified
// form (the node itself when no rule applies).
#pragma once

#include "core/expr/analyzer.h"

namespace basin {

struct SimplifyRules {
  static Expr arith(const Analyzer& a, const Expr& e);    // simplify_arith.cc: + - * / (Div)
  static Expr div_mod(const Analyzer& a, const Expr& e);  // simplify_div_mod.cc: // %
  static Expr min_max(const Analyzer& a, const Expr& e);  // simplify_min_max.cc
  static Expr compare(const Analyzer& a, const Expr& e);  // simplify_compare.cc: == != < <= > >=
  static Expr logic(const Analyzer& a, const Expr& e);    // simplify_logic.cc: && || ! select cast call
  static Expr resimplify(const Analyzer& a, const Expr& e) { return a.simplify_node(e); }
};

// Constant folding of a node whose operands are all immediates; null if not foldable.
Expr fold_constants(const Expr& e);
int64_t gcd_int(int64_t a, int64_t b);

}  // namespace basin
