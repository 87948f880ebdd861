#include "core/ir/simplify_stmt.h"

namespace basin {

namespace {

struct StmtSimplifier {
  Analyzer an;

  Stmt visit(const Stmt& s) {
    const StmtNode& n = *s;
    switch (n.kind) {
      case StmtKind::For: {
        Expr mn = an.simplify(n.min), ext = an.simplify(n.extent);
        int64_t e;
        if (is_const_int(ext, &e) && e == 0) return make_seq({});
        if (e == 1 && is_const_int(ext) && !is_gpu_kind(n.for_kind)) {
          // A loop of one iteration is its body with the variable replaced by min.
          VarMap m = {{n.var.id(), mn}};
          return visit(rewrite_stmt(n.body[0], [&](const Expr& x) { return substitute(x, m); }));
        }
        an.bind_loop(n.var, mn, ext);
        Stmt body = visit(n.body[0]);
        an.unbind(n.var);
        if (!body.defined()) return Stmt();
        if (mn.same_as(n.min) && ext.same_as(n.extent) && body.same_as(n.body[0])) return s;
        return make_for(n.var, mn, ext, n.for_kind, body);
      }
      case StmtKind::Store: {
        std::vector<Expr> idx;
        bool changed = false;
        for (const Expr& i : n.indices) {
          idx.push_back(an.simplify(i));
          changed |= !idx.back().same_as(i);
        }
        Expr v = an.simplify(n.value);
        if (!changed && v.same_as(n.value)) return s;
        return make_store(n.buffer, idx, v);
      }
      case StmtKind::IfThenElse: {
        Expr c = an.simplify(n.cond);
        int64_t v;
        if (is_const_int(c, &v)) {
          if (v) return visit(n.body[0]);
          return n.body.size() > 1 ? visit(n.body[1]) : Stmt();
        }
        Stmt t = visit(n.body[0]);
        Stmt e = n.body.size() > 1 ? visit(n.body[1]) : Stmt();
        if (!t.defined()) {
          if (!e.defined()) return Stmt();
          return make_if(an.simplify(logical_not(c)), e);
        }
        return make_if(c, t, e);
      }
      case StmtKind::Seq: {
        std::vector<Stmt> items;
        for (const Stmt& c : n.body) items.push_back(visit(c));
        return make_seq(items);
      }
      case StmtKind::Allocate: {
        Stmt b = visit(n.body[0]);
        return b.defined() ? (b.same_as(n.body[0]) ? s : make_allocate(n.buffer, b)) : Stmt();
      }
      case StmtKind::Pragma: {
        Expr v = an.simplify(n.pragma_value);
        Stmt b = visit(n.body[0]);
        if (!b.defined()) return Stmt();
        return b.same_as(n.body[0]) && v.same_as(n.pragma_value) ? s : make_pragma(n.key, v, b);
      }
      case StmtKind::Barrier:
        return s;
    }
    return s;
  }
};

}  // namespace

Stmt simplify_stmt(const Stmt& s, Analyzer analyzer) {
  Stmt r = StmtSimplifier{std::move(analyzer)}.visit(s);
  return r.defined() ? r : make_seq({});
}

}  // namespace basin
