#include "core/ir/verify.h"

#include <unordered_set>

#include "core/util/error.h"

namespace basin {

namespace {

struct Verifier {
  const VerifyOptions& opt;
  std::unordered_set<int64_t> vars_in_scope;
  std::unordered_set<const BufferNode*> buffers;
  std::vector<std::string> errors;
  int thread_depth = 0;
  int block_depth = 0;

  void error(const std::string& s) { errors.push_back(s); }

  void check_expr(const Expr& e, const char* where) {
    post_order_visit(e, [&](const Expr& x) {
      if (x.kind() == ExprKind::Var) {
        bool knob = x->var_kind == VarKind::Knob && opt.allow_knob_vars;
        if (!knob && !vars_in_scope.count(x->ival))
          error(std::string("variable '") + x->name + "' used in " + where + " is not bound");
      } else if (x.kind() == ExprKind::Load) {
        check_access(x->buffer, x->args.size(), where);
      }
    });
  }

  void check_access(const Buffer& b, size_t nidx, const char* where) {
    if (!buffers.count(b.get()))
      error("buffer '" + b->name + "' accessed in " + where + " is neither a parameter nor allocated");
    if (opt.require_flat && nidx != 1)
      error("buffer '" + b->name + "' accessed with " + std::to_string(nidx) + " indices after flattening");
  }

  void visit(const Stmt& s) {
    const StmtNode& n = *s;
    switch (n.kind) {
      case StmtKind::For: {
        check_expr(n.min, "a loop bound");
        check_expr(n.extent, "a loop extent");
        if (vars_in_scope.count(n.var.id())) error("loop variable '" + n.var.name() + "' is bound twice");
        if (is_gpu_kind(n.for_kind) && !is_zero(n.min)) error("GPU loop '" + n.var.name() + "' does not start at 0");
        vars_in_scope.insert(n.var.id());
        thread_depth += is_gpu_thread(n.for_kind);
        block_depth += is_gpu_block(n.for_kind);
        visit(n.body[0]);
        thread_depth -= is_gpu_thread(n.for_kind);
        block_depth -= is_gpu_block(n.for_kind);
        vars_in_scope.erase(n.var.id());
        return;
      }
      case StmtKind::Allocate: {
        for (const Expr& e : n.buffer->shape) check_expr(e, "an allocation extent");
        if (buffers.count(n.buffer.get())) error("buffer '" + n.buffer->name + "' is allocated twice");
        buffers.insert(n.buffer.get());
        visit(n.body[0]);
        buffers.erase(n.buffer.get());
        return;
      }
      case StmtKind::Store:
        check_access(n.buffer, n.indices.size(), "a store");
        for (const Expr& i : n.indices) check_expr(i, "a store index");
        check_expr(n.value, "a stored value");
        if (n.value.dtype() != n.buffer->dtype) error("store of the wrong type into '" + n.buffer->name + "'");
        return;
      case StmtKind::IfThenElse:
        check_expr(n.cond, "a condition");
        for (const Stmt& c : n.body) visit(c);
        return;
      case StmtKind::Seq:
      case StmtKind::Pragma:
        for (const Stmt& c : n.body) visit(c);
        return;
      case StmtKind::Barrier:
        if (block_depth == 0) error("barrier outside a GPU block loop");
        if (thread_depth > 0) error("barrier inside a GPU thread loop (barriers separate the thread loops of a block)");
        return;
    }
  }
};

}  // namespace

std::vector<std::string> well_formed_errors(const LoweredFunc& f, const VerifyOptions& opt) {
  Verifier v{opt, {}, {}, {}, 0};
  std::unordered_set<const BufferNode*> seen;
  for (const Buffer& b : f.params) {
    if (!seen.insert(b.get()).second) v.error("parameter '" + b->name + "' appears twice");
    v.buffers.insert(b.get());
  }
  if (!f.body.defined()) v.error("function has no body");
  else v.visit(f.body);
  return v.errors;
}

void verify_well_formed(const LoweredFunc& f, const VerifyOptions& opt) {
  auto errs = well_formed_errors(f, opt);
  if (errs.empty()) return;
  std::string msg = "loop IR of '" + f.name + "' is not well-formed:";
  for (auto& e : errs) msg += "\n  " + e;
  msg += "\n" + to_string(f);
  throw InternalError(msg);
}

}  // namespace basin
