#include "core/ir/substitute_knobs.h"

#include <unordered_map>

#include "core/expr/analyzer.h"
#include "core/ir/simplify_stmt.h"

namespace basin {

LoweredFunc substitute_knobs(const LoweredFunc& f, const VarMap& values) {
  std::unordered_map<const BufferNode*, Buffer> remap;
  visit_stmt(f.body, [&](const Stmt& s) {
    if (s.kind() != StmtKind::Allocate) return;
    const Buffer& b = s->buffer;
    std::vector<Expr> shape;
    bool changed = false;
    for (const Expr& e : b->shape) {
      shape.push_back(simplify(substitute(e, values)));
      changed |= !structural_equal(shape.back(), e);
    }
    if (changed) remap[b.get()] = make_buffer(b->name, b->dtype, shape, b->scope);
  });
  auto buf = [&](const Buffer& b) {
    auto it = remap.find(b.get());
    return it == remap.end() ? b : it->second;
  };
  auto expr_fn = [&](const Expr& e) {
    Expr r = substitute(e, values);
    return rewrite_post_order(r, [&](const Expr& x) -> Expr {
      if (x.kind() != ExprKind::Load || !remap.count(x->buffer.get())) return Expr();
      return load(buf(x->buffer), x->args);
    });
  };
  Stmt body = rewrite_stmt(f.body, expr_fn, [&](const Stmt& s) -> Stmt {
    if (s.kind() == StmtKind::Allocate && remap.count(s->buffer.get()))
      return make_allocate(buf(s->buffer), s->body[0]);
    if (s.kind() == StmtKind::Store && remap.count(s->buffer.get()))
      return make_store(buf(s->buffer), s->indices, s->value);
    return Stmt();
  });
  LoweredFunc out = f;
  out.body = simplify_stmt(body);
  return out;
}

}  // namespace basin
