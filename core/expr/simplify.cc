// The simplifier's driver: bottom-up rewriting, constant folding, and the linear-form
// machinery shared by the rule files.
#include <algorithm>
#include <cmath>

#include "core/expr/evaluate.h"
#include "core/expr/simplify_rules.h"
#include "core/util/error.h"

namespace basin {

int64_t gcd_int(int64_t a, int64_t b) {
  a = a < 0 ? -a : a;
  b = b < 0 ? -b : b;
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

Expr fold_constants(const Expr& e) {
  for (const Expr& a : e->args)
    if (!is_const(a)) return Expr();
  if (e->args.empty()) return Expr();
  if (e.kind() == ExprKind::Load) return Expr();
  if (e.dtype().is_bf16() || e.arg(0).dtype().is_bf16()) return Expr();  // storage only: no constants
  // Integer division by zero is left in place: it is an error at run time, not ours.
  if ((e.kind() == ExprKind::Div || e.kind() == ExprKind::FloorDiv || e.kind() == ExprKind::FloorMod) &&
      e.dtype().is_int() && e.arg(1)->ival == 0)
    return Expr();
  if (e.kind() == ExprKind::Cast && e.dtype().is_int() && e.arg(0).dtype().is_float() && !std::isfinite(e.arg(0)->fval))
    return Expr();
  Value v = evaluate(e, {});
  if (e.dtype().is_float()) return float_imm(e.dtype(), v.f);
  return int_imm(e.dtype(), v.i);
}

namespace {

void add_term(std::vector<std::pair<Expr, int64_t>>& terms, const Expr& t, int64_t c) { terms.emplace_back(t, c); }

void collect(const Expr& e, int64_t scale, LinearForm& out, std::vector<std::pair<Expr, int64_t>>& terms) {
  auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  switch (e.kind()) {
    case ExprKind::IntImm:
      out.constant = static_cast<int64_t>(u(out.constant) + u(scale) * u(e->ival));
      return;
    case ExprKind::Add:
      collect(e.arg(0), scale, out, terms);
      collect(e.arg(1), scale, out, terms);
      return;
    case ExprKind::Sub:
      collect(e.arg(0), scale, out, terms);
      collect(e.arg(1), -scale, out, terms);
      return;
    case ExprKind::Mul: {
      int64_t c;
      if (is_const_int(e.arg(1), &c)) return collect(e.arg(0), scale * c, out, terms);
      if (is_const_int(e.arg(0), &c)) return collect(e.arg(1), scale * c, out, terms);
      break;
    }
    default:
      break;
  }
  add_term(terms, e, scale);
}

// Sorts terms canonically and merges equal ones.
void canonicalize(std::vector<std::pair<Expr, int64_t>>& terms) {
  std::stable_sort(terms.begin(), terms.end(),
                   [](const auto& a, const auto& b) { return structural_compare(a.first, b.first) < 0; });
  std::vector<std::pair<Expr, int64_t>> merged;
  for (auto& t : terms) {
    if (!merged.empty() && structural_equal(merged.back().first, t.first)) merged.back().second += t.second;
    else merged.push_back(t);
  }
  merged.erase(std::remove_if(merged.begin(), merged.end(), [](const auto& t) { return t.second == 0; }), merged.end());
  terms = std::move(merged);
}

// k*c*floordiv(x, c) + k*floormod(x, c) == k*x: recombines a split index.
bool fuse_div_mod(LinearForm& f) {
  for (size_t i = 0; i < f.terms.size(); ++i) {
    const Expr& m = f.terms[i].first;
    int64_t c;
    if (m.kind() != ExprKind::FloorMod || !is_const_int(m.arg(1), &c) || c <= 0) continue;
    int64_t k = f.terms[i].second;
    for (size_t j = 0; j < f.terms.size(); ++j) {
      const Expr& d = f.terms[j].first;
      if (d.kind() != ExprKind::FloorDiv || !structural_equal(d.arg(1), m.arg(1)) ||
          !structural_equal(d.arg(0), m.arg(0)) || f.terms[j].second != k * c)
        continue;
      Expr x = m.arg(0);
      f.terms.erase(f.terms.begin() + std::max(i, j));
      f.terms.erase(f.terms.begin() + std::min(i, j));
      std::vector<std::pair<Expr, int64_t>> extra;
      collect(x, k, f, extra);
      f.terms.insert(f.terms.end(), extra.begin(), extra.end());
      canonicalize(f.terms);
      return true;
    }
  }
  return false;
}

}  // namespace

LinearForm Analyzer::linear_form(const Expr& e) const {
  LinearForm f;
  collect(e, 1, f, f.terms);
  canonicalize(f.terms);
  while (fuse_div_mod(f)) {
  }
  return f;
}

Expr Analyzer::from_linear(const LinearForm& f, DType t) const {
  Expr acc;
  auto scaled = [&](const Expr& term, int64_t k) { return k == 1 ? term : mul(term, int_imm(t, k)); };
  for (const auto& [term, k] : f.terms)
    if (k > 0) acc = acc ? add(acc, scaled(term, k)) : scaled(term, k);
  for (const auto& [term, k] : f.terms)
    if (k < 0) acc = acc ? sub(acc, scaled(term, -k)) : scaled(term, k);
  if (!acc) return int_imm(t, f.constant);
  if (f.constant > 0) return add(acc, int_imm(t, f.constant));
  if (f.constant < 0 && f.constant != INT64_MIN) return sub(acc, int_imm(t, -f.constant));
  if (f.constant < 0) return add(acc, int_imm(t, f.constant));
  return acc;
}

bool linear_in(const Expr& e, const Var& v, int64_t* a, int64_t* b, bool* alone) {
  *a = 0;
  LinearForm f = Analyzer().linear_form(e);
  *b = f.constant;
  *alone = true;
  for (const auto& [term, k] : f.terms) {
    if (term.kind() == ExprKind::Var && Var(term).id() == v.id()) {
      *a = k;
    } else if (uses_var(term, v)) {
      return false;
    } else {
      *alone = false;
    }
  }
  return true;
}

bool coefficient(const Expr& e, const Var& v, int64_t* c) {
  *c = 0;
  int64_t b = 0;
  bool alone = false;
  return !uses_var(e, v) || linear_in(e, v, c, &b, &alone);
}

Expr Analyzer::simplify_node(const Expr& e) const {
  if (Expr c = fold_constants(e)) return c;
  switch (e.kind()) {
    case ExprKind::Add:
    case ExprKind::Sub:
    case ExprKind::Mul:
    case ExprKind::Div:
      return SimplifyRules::arith(*this, e);
    case ExprKind::FloorDiv:
    case ExprKind::FloorMod:
      return SimplifyRules::div_mod(*this, e);
    case ExprKind::Min:
    case ExprKind::Max:
      return SimplifyRules::min_max(*this, e);
    case ExprKind::EQ:
    case ExprKind::NE:
    case ExprKind::LT:
    case ExprKind::LE:
    case ExprKind::GT:
    case ExprKind::GE:
      return SimplifyRules::compare(*this, e);
    case ExprKind::And:
    case ExprKind::Or:
    case ExprKind::Not:
    case ExprKind::Select:
    case ExprKind::Cast:
      return SimplifyRules::logic(*this, e);
    default:
      return e;
  }
}

Expr Analyzer::simplify(const Expr& e) const {
  BASIN_CHECK(e) << "simplify of a null expression";
  return rewrite_post_order(e, [this](const Expr& x) -> Expr {
    if (x->args.empty()) return Expr();
    return simplify_node(x);
  });
}

bool Analyzer::can_prove(const Expr& cond) const {
  Expr s = simplify(cond);
  int64_t v;
  if (is_const_int(s, &v)) return v != 0;
  IntBound b = bound(s);
  return b.min > 0;
}

Expr simplify(const Expr& e) { return Analyzer().simplify(e); }

}  // namespace basin
