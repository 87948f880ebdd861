#include "core/ir/partition_loops.h"

#include <vector>

#include "core/expr/analyzer.h"
#include "core/ir/simplify_stmt.h"

namespace basin {

namespace {

constexpr int64_t kMaxExtent = 1 << 16;  // the comparisons are evaluated at every point
constexpr int kMaxStores = 4;
constexpr int64_t kMaxVectorLanes = 64;
constexpr int64_t kVectorChunk = 16;  // lanes of each vector of a longer copy loop

// A comparison of a * v + b with 0 (the loop variable alone), as `op`.
struct Bound {
  ExprKind op;
  int64_t a, b;
  bool holds(int64_t v) const {
    const int64_t x = a * v + b;
    switch (op) {
      case ExprKind::LT:
        return x < 0;
      case ExprKind::LE:
        return x <= 0;
      case ExprKind::GT:
        return x > 0;
      case ExprKind::GE:
        return x >= 0;
      case ExprKind::EQ:
        return x == 0;
      default:
        return x != 0;  // NE
    }
  }
};

bool is_comparison(ExprKind k) {
  return k == ExprKind::LT || k == ExprKind::LE || k == ExprKind::GT || k == ExprKind::GE || k == ExprKind::EQ ||
         k == ExprKind::NE;
}

// The comparisons of v alone with constants inside the conditions of selects and
// branches (through &&, || and !).
void collect_bounds(const Expr& cond, const Var& v, std::vector<Bound>* out) {
  if (!cond.defined()) return;
  const ExprKind k = cond.kind();
  if (k == ExprKind::And || k == ExprKind::Or) {
    collect_bounds(cond->args[0], v, out);
    collect_bounds(cond->args[1], v, out);
  } else if (k == ExprKind::Not) {
    collect_bounds(cond->args[0], v, out);
  } else if (is_comparison(k) && cond->args[0].dtype().is_int() && uses_var(cond, v)) {
    int64_t a = 0, b = 0;
    bool alone = false;
    if (linear_in(cond->args[0] - cond->args[1], v, &a, &b, &alone) && alone && a != 0) out->push_back({k, a, b});
  }
}

void bounds_in(const Stmt& body, const Var& v, std::vector<Bound>* out) {
  auto from_expr = [&](const Expr& e) {
    rewrite_post_order(e, [&](const Expr& x) -> Expr {
      if (x.kind() == ExprKind::Select) collect_bounds(x->args[0], v, out);
      return Expr();
    });
  };
  visit_stmt(body, [&](const Stmt& st) {
    if (st.kind() == StmtKind::IfThenElse) collect_bounds(st->cond, v, out);
    if (st.kind() == StmtKind::Store) {
      from_expr(st->value);
      for (const Expr& i : st->indices) from_expr(i);
    }
  });
}

// Small: serial loops and stores (and branches), at most kMaxStores stores.
bool small(const Stmt& body) {
  bool ok = true;
  int stores = 0;
  visit_stmt(body, [&](const Stmt& st) {
    if (st.kind() == StmtKind::For && st->for_kind != ForKind::Serial) ok = false;
    if (st.kind() == StmtKind::Allocate || st.kind() == StmtKind::Barrier) ok = false;
    if (st.kind() == StmtKind::Store) ++stores;
  });
  return ok && stores <= kMaxStores;
}

// A loop as a vector loop: a copy or fill whose store steps by one element per
// iteration and whose loads step by a constant number (or stay), with no select left,
// reading nothing it writes.
bool vectorizable(const Stmt& st) {
  int64_t n = 0;
  if (!is_const_int(st->extent, &n) || n < 2 || n > kMaxExtent) return false;
  const Stmt& body = st->body[0];
  if (body.kind() != StmtKind::Store || !body->value.dtype().is_scalar()) return false;
  if (body->indices.size() != 1) return false;  // flattened buffers
  int64_t c = 0;
  if (!coefficient(body->indices[0], st->var, &c) || c != 1) return false;
  bool ok = true;
  post_order_visit(body->value, [&](const Expr& x) {
    if (x.kind() == ExprKind::Select || x.kind() == ExprKind::Call) ok = false;
    if (x.kind() == ExprKind::Load) {
      int64_t k = 0;
      if (x->buffer.get() == body->buffer.get() || x->args.size() != 1 || !coefficient(x->args[0], st->var, &k))
        ok = false;
    }
  });
  return ok;
}

}  // namespace

Stmt partition_loops(const Stmt& s, int max_pieces) {
  // rewrite_stmt rebuilds bottom-up: an inner loop is split first, its pieces
  // simplified (the comparisons of its variable decided from each piece's range), and
  // an outer loop is then split over the inner pieces.
  Stmt out = rewrite_stmt(s, nullptr, [&](const Stmt& st) -> Stmt {
    if (st.kind() != StmtKind::For || st->for_kind != ForKind::Serial) return Stmt();
    int64_t lo = 0, n = 0;
    if (!is_const_int(st->min, &lo) || !is_const_int(st->extent, &n) || n < 2 || n > kMaxExtent) return Stmt();
    const Stmt& body = st->body[0];
    if (!small(body)) return Stmt();
    std::vector<Bound> bounds;
    bounds_in(body, st->var, &bounds);
    if (bounds.empty()) return Stmt();
    // The points where some comparison changes value.
    std::vector<int64_t> cuts = {lo};
    for (int64_t v = lo + 1; v < lo + n; ++v)
      for (const Bound& b : bounds)
        if (b.holds(v) != b.holds(v - 1)) {
          cuts.push_back(v);
          break;
        }
    if (cuts.size() < 2 || static_cast<int>(cuts.size()) > max_pieces) return Stmt();
    cuts.push_back(lo + n);
    std::vector<Stmt> pieces;
    for (size_t i = 0; i + 1 < cuts.size(); ++i)
      pieces.push_back(make_for(st->var, Expr(cuts[i]), Expr(cuts[i + 1] - cuts[i]), ForKind::Serial, body));
    return simplify_stmt(make_seq(std::move(pieces)));
  });
  // The innermost loops that copy or fill run as vector loops: LLVM's pipeline here
  // has no loop vectorizer, a padded input's interior rows are contiguous copies, and
  // a packing stage's were one scalar load and store an element (on resnet18-c10, 44%
  // of the kernel's time; docs/PERFORMANCE.md@6bf7154, "Strided loads").
  // A loop longer than kMaxVectorLanes runs as a serial loop over vectors of
  // kVectorChunk lanes, then one vector of the rest.
  return rewrite_stmt(out, nullptr, [&](const Stmt& st) -> Stmt {
    if (st.kind() != StmtKind::For || st->for_kind != ForKind::Serial || !vectorizable(st)) return Stmt();
    const Stmt& body = st->body[0];
    int64_t n = 0;
    is_const_int(st->extent, &n);
    if (n <= kMaxVectorLanes) return make_for(st->var, st->min, st->extent, ForKind::Vectorized, body);
    auto at = [&](const Expr& index) {
      VarMap m;
      m[st->var.id()] = index;
      return make_store(body->buffer, {substitute(body->indices[0], m)}, substitute(body->value, m));
    };
    Var outer(st->var.name() + ".o"), lane(st->var.name() + ".v");
    const int64_t chunks = n / kVectorChunk, rest = n % kVectorChunk;
    std::vector<Stmt> parts;
    parts.push_back(make_for(outer, Expr(int64_t{0}), Expr(chunks), ForKind::Serial,
                             make_for(lane, Expr(int64_t{0}), Expr(kVectorChunk), ForKind::Vectorized,
                                      at(st->min + outer * Expr(kVectorChunk) + lane))));
    if (rest > 0) {
      Var tail(st->var.name() + ".r");
      parts.push_back(make_for(tail, Expr(int64_t{0}), Expr(rest), rest > 1 ? ForKind::Vectorized : ForKind::Serial,
                               at(st->min + Expr(chunks * kVectorChunk) + tail)));
    }
    return simplify_stmt(make_seq(std::move(parts)));
  });
}

}  // namespace basin
