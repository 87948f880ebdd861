#include "core/ir/version_tiles.h"

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/expr/analyzer.h"

namespace basin {

namespace {

struct Range {
  int64_t lo, hi;  // inclusive
};

class Tile {
 public:
  explicit Tile(const Stmt& tile) : tile_(tile) {
    visit_stmt(tile, [&](const Stmt& st) {
      int64_t lo = 0, n = 0;
      if (st.kind() == StmtKind::For && is_const_int(st->min, &lo) && is_const_int(st->extent, &n) && n >= 1)
        ranges_[st->var.id()] = {lo, lo + n - 1};
      if (st.kind() == StmtKind::For) inner_.insert(st->var.id());
    });
  }

  // The test that every load inside the tile's selects reads inside its buffer at every
  // point of the tile, in `test` (empty: always); false where there is no such load,
  // or an index is not affine in the tile's loops or never inside over a whole tile,
  // or a buffer's size is not constant.
  bool loads_in_bounds(std::vector<Expr>* test) const {
    bool ok = true, any = false;
    auto check_load = [&](const Expr& x) {
      if (!ok || x.kind() != ExprKind::Load) return;
      any = true;
      int64_t numel = 1;
      for (const Expr& e : x->buffer->shape) {
        int64_t v = 0;
        if (!is_const_int(e, &v)) {
          ok = false;
          return;
        }
        numel *= v;
      }
      if (x->args.size() != 1) {  // flattened buffers only
        ok = false;
        return;
      }
      for (const Expr& atom : {ge(x->args[0], Expr(int64_t{0})), lt(x->args[0], Expr(numel))}) {
        Expr t = at_extreme(atom);
        if (!t.defined() || (is_const_int(t) && const_int(t) == 0)) {
          ok = false;
          return;
        }
        if (!is_const_int(t)) add(t, test);
      }
    };
    auto visit = [&](const Expr& e) {
      post_order_visit(e, [&](const Expr& x) {
        if (x.kind() != ExprKind::Select) return;
        for (size_t i = 1; i < 3; ++i) post_order_visit(x->args[i], check_load);
      });
    };
    visit_stmt(tile_, [&](const Stmt& st) {
      if (st.kind() == StmtKind::Store) {
        visit(st->value);
        for (const Expr& i : st->indices) visit(i);
      }
      if (st.kind() == StmtKind::IfThenElse) visit(st->cond);
      if (st.kind() == StmtKind::For) {
        visit(st->min);
        visit(st->extent);
      }
    });
    return ok && any;
  }

 private:
  static void add(const Expr& t, std::vector<Expr>* test) {
    for (const Expr& u : *test)
      if (structural_equal(u, t)) return;
    test->push_back(t);
  }

  // For `lhs < rhs` or `lhs >= rhs` with lhs - rhs affine in the tile's loop
  // variables: the same comparison of its greatest (<) or least (>=) value over the
  // tile, as an expression of the variables outside it; null where it is not affine.
  Expr at_extreme(const Expr& a) const {
    const ExprKind k = a.kind();
    const bool want_max = k == ExprKind::LT;
    Analyzer an;
    LinearForm f = an.linear_form(a->args[0] - a->args[1]);
    LinearForm outer;
    outer.constant = f.constant;
    for (const auto& [term, coef] : f.terms) {
      if (term.kind() == ExprKind::Var) {
        auto r = ranges_.find(term->ival);
        if (r != ranges_.end()) {
          const bool hi = (coef > 0) == want_max;
          outer.constant += coef * (hi ? r->second.hi : r->second.lo);
          continue;
        }
        if (inner_.count(term->ival)) return Expr();  // a loop of the tile without constant bounds
        outer.terms.push_back({term, coef});
        continue;
      }
      bool inside = false;
      post_order_visit(term, [&](const Expr& x) {
        if (x.kind() == ExprKind::Var && inner_.count(x->ival)) inside = true;
      });
      if (inside) return Expr();  // not affine in the tile's variables
      outer.terms.push_back({term, coef});
    }
    Expr d = an.from_linear(outer, a->args[0].dtype());
    return simplify(make_binary(k, d, int_imm(d.dtype(), 0)));
  }

  const Stmt& tile_;
  std::unordered_map<int64_t, Range> ranges_;  // the tile's loops with constant bounds
  std::unordered_set<int64_t> inner_;          // every loop of the tile
};

Expr conjunction(const std::vector<Expr>& test) {
  Expr c = test[0];
  for (size_t i = 1; i < test.size(); ++i) c = logical_and(c, test[i]);
  return c;
}

// s with its unrolled loops run as loops.
Stmt rolled(const Stmt& s) {
  return rewrite_stmt(s, nullptr, [](const Stmt& st) -> Stmt {
    if (st.kind() != StmtKind::For || st->for_kind != ForKind::Unrolled) return Stmt();
    return make_for(st->var, st->min, st->extent, ForKind::Serial, st->body[0]);
  });
}

// The tile versioned, its test simplified under the ranges of the loops around it
// (`outer`); null where no tile can run under the pragma.
Stmt version(const Stmt& tile, const Analyzer& outer) {
  std::vector<Expr> in_bounds;
  if (!Tile(tile).loads_in_bounds(&in_bounds)) return Stmt();
  std::vector<Expr> test;
  for (const Expr& t : in_bounds) {
    Expr u = outer.simplify(t);
    int64_t v = 0;
    if (is_const_int(u, &v)) {
      if (v == 0) return Stmt();
      continue;
    }
    test.push_back(u);
  }
  Stmt inside = make_pragma(kGuardedLoadsInBounds, Expr(int64_t{1}), tile);
  return test.empty() ? inside : make_if(conjunction(test), inside, rolled(tile));
}

bool has_gpu_loops(const Stmt& s) {
  bool gpu = false;
  visit_stmt(s, [&](const Stmt& st) { gpu = gpu || (st.kind() == StmtKind::For && is_gpu_kind(st->for_kind)); });
  return gpu;
}

// s with its innermost Local allocations versioned, the loops around each bound in `an`.
Stmt walk(const Stmt& s, Analyzer& an) {
  const StmtNode& n = *s;
  switch (n.kind) {
    case StmtKind::For: {
      an.bind_loop(n.var, n.min, n.extent);
      Stmt b = walk(n.body[0], an);
      an.unbind(n.var);
      return b.same_as(n.body[0]) ? s : make_for(n.var, n.min, n.extent, n.for_kind, b);
    }
    case StmtKind::Allocate: {
      int allocs = 0;
      visit_stmt(s, [&](const Stmt& x) { allocs += x.kind() == StmtKind::Allocate; });
      if (n.buffer->scope == MemScope::Local && allocs == 1) {  // an innermost tile
        Stmt v = version(s, an);
        return v.defined() ? v : s;
      }
      Stmt b = walk(n.body[0], an);
      return b.same_as(n.body[0]) ? s : make_allocate(n.buffer, b);
    }
    case StmtKind::Seq:
    case StmtKind::IfThenElse:
    case StmtKind::Pragma: {
      std::vector<Stmt> body;
      bool changed = false;
      for (const Stmt& c : n.body) {
        body.push_back(walk(c, an));
        changed |= !body.back().same_as(c);
      }
      if (!changed) return s;
      if (n.kind == StmtKind::Seq) return make_seq(std::move(body));
      if (n.kind == StmtKind::Pragma) return make_pragma(n.key, n.pragma_value, body[0]);
      return make_if(n.cond, body[0], body.size() > 1 ? body[1] : Stmt());
    }
    default:
      return s;
  }
}

}  // namespace

Stmt version_tiles(const Stmt& s) {
  if (!s.defined() || has_gpu_loops(s)) return s;
  Analyzer an;
  return walk(s, an);
}

}  // namespace basin
