#include "core/ir/mark_unrolled.h"

#include <algorithm>

#include "core/expr/analyzer.h"
#include "core/util/error.h"

namespace basin {

namespace {

constexpr int64_t kMany = int64_t{1} << 40;

// Whether the flat index `idx` touches memory one lane at a time in the vectorized loop
// over v: a coefficient of v other than 0 and 1, or v inside a non-linear term.
bool per_lane(const Expr& idx, const Var& v) {
  int64_t c = 0;
  return !coefficient(idx, v, &c) || (c != 0 && c != 1);
}

// Whether some load or store in `s` (the body of the vectorized loop over v) is emitted
// once per lane (codegen/llvm_emit.cc: a stride other than one, a gather or a scatter).
bool has_per_lane_access(const Stmt& s, const Var& v) {
  bool found = false;
  auto loads = [&](const Expr& e) {
    post_order_visit(e, [&](const Expr& x) {
      if (!found && x.kind() == ExprKind::Load && x->args.size() == 1) found = per_lane(x->args[0], v);
    });
  };
  visit_stmt(s, [&](const Stmt& x) {
    if (found || x.kind() != StmtKind::Store) return;
    if (x->indices.size() == 1) found = per_lane(x->indices[0], v);
    if (!found) loads(x->value);
    if (!found)
      for (const Expr& i : x->indices) loads(i);
  });
  return found;
}

struct Marker {
  int64_t max_step = -1;  // -1: outside any unroll pragma

  // Returns the rewritten statement and its steps (kMany when not constant).
  std::pair<Stmt, int64_t> visit(const Stmt& s) {
    const StmtNode& n = *s;
    switch (n.kind) {
      case StmtKind::For: {
        auto [body, steps] = visit(n.body[0]);
        int64_t ext = 0;
        bool constant = is_const_int(n.extent, &ext);
        // A vectorized loop is one step, or one per lane where its accesses are.
        const bool lanes = n.for_kind != ForKind::Vectorized || has_per_lane_access(n.body[0], n.var);
        int64_t total = !lanes ? steps : constant ? std::min(kMany, std::max<int64_t>(ext, 0) * steps) : kMany;
        ForKind kind = n.for_kind;
        if (kind == ForKind::Serial && constant && max_step >= 0 && total <= max_step) kind = ForKind::Unrolled;
        if (kind == n.for_kind && body.same_as(n.body[0])) return {s, total};
        return {make_for(n.var, n.min, n.extent, kind, body), total};
      }
      case StmtKind::Pragma: {
        if (n.key != "auto_unroll_max_step") {
          auto [b, steps] = visit(n.body[0]);
          return {b.same_as(n.body[0]) ? s : make_pragma(n.key, n.pragma_value, b), steps};
        }
        int64_t v = 0;
        BASIN_CHECK(is_const_int(n.pragma_value, &v)) << "unroll depth is not constant: " << n.pragma_value;
        int64_t saved = max_step;
        max_step = v;
        auto [b, steps] = visit(n.body[0]);
        max_step = saved;
        return {b.same_as(n.body[0]) ? s : make_pragma(n.key, n.pragma_value, b), steps};
      }
      case StmtKind::Seq: {
        std::vector<Stmt> items;
        int64_t total = 0;
        bool changed = false;
        for (const Stmt& c : n.body) {
          auto [b, steps] = visit(c);
          changed |= !b.same_as(c);
          items.push_back(b);
          total = std::min(kMany, total + steps);
        }
        return {changed ? make_seq(items) : s, total};
      }
      case StmtKind::Allocate: {
        auto [b, steps] = visit(n.body[0]);
        return {b.same_as(n.body[0]) ? s : make_allocate(n.buffer, b), steps};
      }
      case StmtKind::IfThenElse: {
        auto [t, ts] = visit(n.body[0]);
        Stmt e;
        int64_t es = 0;
        if (n.body.size() > 1) std::tie(e, es) = visit(n.body[1]);
        bool same = t.same_as(n.body[0]) && (n.body.size() < 2 || e.same_as(n.body[1]));
        return {same ? s : make_if(n.cond, t, e), std::max(ts, es)};
      }
      case StmtKind::Store:
      case StmtKind::Barrier:
        return {s, 1};
    }
    return {s, 1};
  }
};

}  // namespace

Stmt mark_unrolled(const Stmt& s) { return Marker{}.visit(s).first; }

}  // namespace basin
