#include "core/te/tensor.h"
#include "core/util/checked.h"

#include <limits>
#include <unordered_set>

#include "core/util/error.h"

namespace basin::te {

const char* reduce_kind_name(ReduceKind k) {
  switch (k) {
    case ReduceKind::None:
      return "none";
    case ReduceKind::Sum:
      return "sum";
    case ReduceKind::Max:
      return "max";
    case ReduceKind::Min:
      return "min";
  }
  return "?";
}

const char* pattern_name(OpPattern p) {
  switch (p) {
    case OpPattern::Placeholder:
      return "placeholder";
    case OpPattern::Elementwise:
      return "elementwise";
    case OpPattern::Broadcast:
      return "broadcast";
    case OpPattern::Injective:
      return "injective";
    case OpPattern::Reduction:
      return "reduction";
    case OpPattern::Anchor:
      return "anchor";
  }
  return "?";
}

const Buffer& Tensor::buffer() const { return op_->buffer; }
const std::string& Tensor::name() const { return op_->name; }
DType Tensor::dtype() const { return op_->buffer->dtype; }
const std::vector<int64_t>& Tensor::shape() const { return op_->shape; }
int64_t Tensor::numel() const { return checked_product(shape()); }

Expr Tensor::read(std::vector<Expr> indices) const {
  BASIN_CHECK(static_cast<int>(indices.size()) == ndim())
      << "tensor " << name() << " of rank " << ndim() << " read with " << indices.size() << " indices";
  return load(buffer(), std::move(indices));
}

namespace {

std::shared_ptr<OpNode> new_op(std::string name, std::vector<int64_t> shape, DType t) {
  auto op = std::make_shared<OpNode>();
  std::vector<Expr> ext;
  // A negative extent comes from an operator's arithmetic on its attributes (a pad
  // that wraps, a slice past the end): the caller's error, not basin's.
  for (int64_t d : shape) {
    if (d < 0) throw Error("tensor " + name + " would have a negative extent (" + std::to_string(d) + ")");
    ext.push_back(Expr(d));
  }
  op->name = name;
  op->shape = std::move(shape);
  op->buffer = make_buffer(std::move(name), t, std::move(ext), MemScope::Global,
                           std::weak_ptr<const void>(std::static_pointer_cast<const void>(op)));
  return op;
}

std::vector<IterVar> make_axes(const std::vector<int64_t>& extents, const char* prefix) {
  std::vector<IterVar> axes;
  for (size_t i = 0; i < extents.size(); ++i)
    axes.push_back({Var(std::string(prefix) + std::to_string(i)), extents[i]});
  return axes;
}

std::vector<Var> vars_of(const std::vector<IterVar>& axes) {
  std::vector<Var> v;
  for (const IterVar& a : axes) v.push_back(a.var);
  return v;
}

void collect_inputs(OpNode& op) {
  std::unordered_set<const BufferNode*> seen;
  post_order_visit(op.body, [&](const Expr& e) {
    if (e.kind() != ExprKind::Load || !seen.insert(e->buffer.get()).second) return;
    auto producer = e->buffer->producer.lock();
    BASIN_CHECK(producer) << op.name << " reads " << e->buffer->name << ", which is not a live tensor";
    op.inputs.emplace_back(std::static_pointer_cast<const OpNode>(producer));
  });
}

}  // namespace

Tensor placeholder(std::string name, std::vector<int64_t> shape, DType t) {
  auto op = new_op(std::move(name), std::move(shape), t);
  op->is_placeholder = true;
  op->pattern = OpPattern::Placeholder;
  return Tensor(op);
}

Tensor compute(std::string name, std::vector<int64_t> shape, const std::function<Expr(const std::vector<Var>&)>& f,
               OpPattern pattern, std::string tag) {
  std::vector<IterVar> axes = make_axes(shape, "i");
  Expr body = f(vars_of(axes));
  BASIN_CHECK(body.defined()) << "compute " << name << " has no body";
  auto op = new_op(std::move(name), std::move(shape), body.dtype());
  op->axes = std::move(axes);
  op->body = std::move(body);
  op->pattern = pattern;
  op->tag = std::move(tag);
  collect_inputs(*op);
  return Tensor(op);
}

Tensor reduce(std::string name, std::vector<int64_t> shape, std::vector<int64_t> reduce_extents, ReduceKind kind,
              const std::function<Expr(const std::vector<Var>&, const std::vector<Var>&)>& f, OpPattern pattern,
              std::string tag) {
  BASIN_CHECK(kind != ReduceKind::None) << "reduce " << name << " without a combiner";
  std::vector<IterVar> axes = make_axes(shape, "i");
  std::vector<IterVar> raxes = make_axes(reduce_extents, "r");
  Expr body = f(vars_of(axes), vars_of(raxes));
  BASIN_CHECK(body.defined()) << "reduce " << name << " has no body";
  auto op = new_op(std::move(name), std::move(shape), body.dtype());
  op->axes = std::move(axes);
  op->reduce_axes = std::move(raxes);
  op->reduce = kind;
  op->body = std::move(body);
  op->pattern = pattern;
  op->tag = std::move(tag);
  collect_inputs(*op);
  return Tensor(op);
}

Expr reduce_identity(ReduceKind k, DType t) {
  switch (k) {
    case ReduceKind::Sum:
      return make_const(t, 0);
    case ReduceKind::Max:
      return t.is_float() ? make_const(t, -std::numeric_limits<double>::infinity())
                          : int_imm(t, t.bits == 32 ? INT32_MIN : INT64_MIN);
    case ReduceKind::Min:
      return t.is_float() ? make_const(t, std::numeric_limits<double>::infinity())
                          : int_imm(t, t.bits == 32 ? INT32_MAX : INT64_MAX);
    case ReduceKind::None:
      break;
  }
  BASIN_CHECK(false) << "no identity for reduce kind none";
  return Expr();
}

Expr reduce_combine(ReduceKind k, const Expr& acc, const Expr& value) {
  switch (k) {
    case ReduceKind::Sum:
      return add(acc, value);
    case ReduceKind::Max:
      return max(acc, value);
    case ReduceKind::Min:
      return min(acc, value);
    case ReduceKind::None:
      break;
  }
  BASIN_CHECK(false) << "no combiner for reduce kind none";
  return Expr();
}

std::vector<Op> topo_order(const std::vector<Tensor>& outputs) {
  std::vector<Op> order;
  std::unordered_set<const OpNode*> done;
  std::function<void(const Op&)> visit = [&](const Op& op) {
    if (done.count(op.get())) return;
    for (const Tensor& in : op->inputs) visit(in.op());
    done.insert(op.get());
    order.push_back(op);
  };
  for (const Tensor& t : outputs) visit(t.op());
  return order;
}

}  // namespace basin::te
