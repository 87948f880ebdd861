#include "core/ir/flatten_buffers.h"

namespace basin {

namespace {

Expr flat_index(const Buffer& b, const std::vector<Expr>& idx) {
  if (idx.empty()) return Expr(0);  // a rank-0 buffer holds one element
  Expr flat = idx[0];
  for (size_t i = 1; i < idx.size(); ++i) flat = flat * b->shape[i] + idx[i];
  return flat;
}

Expr flatten_expr(const Expr& e) {
  return rewrite_post_order(e, [](const Expr& x) -> Expr {
    if (x.kind() != ExprKind::Load || x->args.size() == 1) return Expr();
    return load(x->buffer, {flat_index(x->buffer, x->args)});
  });
}

}  // namespace

Stmt flatten_buffers(const Stmt& s) {
  return rewrite_stmt(s, flatten_expr, [](const Stmt& st) -> Stmt {
    if (st.kind() != StmtKind::Store || st->indices.size() == 1) return Stmt();
    return make_store(st->buffer, {flat_index(st->buffer, st->indices)}, st->value);
  });
}

}  // namespace basin
