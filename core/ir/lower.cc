#include "core/ir/lower.h"

#include <unordered_set>

#include "core/ir/flatten_buffers.h"
#include "core/ir/pass.h"
#include "core/ir/simplify_stmt.h"
#include "core/ir/verify.h"
#include "core/util/error.h"

namespace basin {

namespace {

std::vector<Expr> axis_exprs(const std::vector<te::IterVar>& axes) {
  std::vector<Expr> v;
  for (const te::IterVar& a : axes) v.push_back(a.var);
  return v;
}

Stmt wrap_loops(const std::vector<te::IterVar>& axes, Stmt body) {
  for (auto it = axes.rbegin(); it != axes.rend(); ++it)
    body = make_for(it->var, Expr(0), Expr(it->extent), ForKind::Serial, body);
  return body;
}

// The plain loop nest of one compute operation.
Stmt loop_nest(const te::OpNode& op) {
  std::vector<Expr> idx = axis_exprs(op.axes);
  if (op.reduce == te::ReduceKind::None) return wrap_loops(op.axes, make_store(op.buffer, idx, op.body));
  Stmt init = make_store(op.buffer, idx, te::reduce_identity(op.reduce, op.buffer->dtype));
  Stmt update = make_store(op.buffer, idx, te::reduce_combine(op.reduce, load(op.buffer, idx), op.body));
  return wrap_loops(op.axes, make_seq({init, wrap_loops(op.reduce_axes, update)}));
}

}  // namespace

LoweredFunc lower_default(const std::string& name, const std::vector<te::Tensor>& inputs,
                          const std::vector<te::Tensor>& outputs) {
  LoweredFunc f;
  f.name = name;
  std::unordered_set<const te::OpNode*> given, is_output;
  for (const te::Tensor& t : inputs) {
    BASIN_CHECK(t.op()->is_placeholder) << "input " << t.name() << " is not a placeholder";
    given.insert(t.op().get());
    f.params.push_back(t.buffer());
  }
  for (const te::Tensor& t : outputs) {
    is_output.insert(t.op().get());
    f.output_params.push_back(static_cast<int>(f.params.size()));
    f.params.push_back(t.buffer());
  }

  std::vector<Stmt> nests;
  std::vector<Buffer> intermediates;
  for (const te::Op& op : te::topo_order(outputs)) {
    if (op->is_placeholder) {
      if (!given.count(op.get()))
        throw Error("'" + name + "' reads tensor '" + op->name + "', which is not one of its inputs");
      continue;
    }
    nests.push_back(loop_nest(*op));
    if (!is_output.count(op.get())) intermediates.push_back(op->buffer);
  }
  Stmt body = make_seq(nests);
  for (auto it = intermediates.rbegin(); it != intermediates.rend(); ++it) body = make_allocate(*it, body);

  f.body = body;
  f = run_passes(
      std::move(f), "lower_default",
      {{"flatten_buffers", flatten_buffers}, {"simplify_stmt", [](const Stmt& s) { return simplify_stmt(s); }}});
  verify_well_formed(f, {false, true});
  return f;
}

}  // namespace basin
