#include "core/schedule/task_analysis.h"

#include <algorithm>
#include <cstdlib>
#include <unordered_map>
#include <unordered_set>

#include "core/expr/analyzer.h"
#include "core/expr/evaluate.h"
#include "core/ops/operators.h"

namespace basin::sched {

const te::OpNode* producer_of(const Buffer& b) {
  auto p = b->producer.lock();
  return p ? static_cast<const te::OpNode*>(p.get()) : nullptr;
}

std::vector<Expr> loads_in(const Expr& e) {
  std::vector<Expr> r;
  post_order_visit(e, [&](const Expr& x) {
    if (x.kind() == ExprKind::Load) r.push_back(x);
  });
  return r;
}

Expr flat_index(const Expr& load) {
  if (load->args.size() == 1) return load->args[0];
  Expr flat(int64_t{0});
  for (size_t d = 0; d < load->args.size(); ++d) flat = flat * load->buffer->shape[d] + load->args[d];
  return flat;
}

VarMap single_iteration_axes(const te::OpNode& op) {
  VarMap m;
  for (const te::IterVar& iv : op.axes)
    if (iv.extent == 1) m[iv.var.id()] = Expr(int64_t{0});
  for (const te::IterVar& iv : op.reduce_axes)
    if (iv.extent == 1) m[iv.var.id()] = Expr(int64_t{0});
  return m;
}

namespace {

// True if the load reads at exactly the given variables, in order.
bool reads_at(const Expr& load, const std::vector<te::IterVar>& axes) {
  if (load->args.size() != axes.size()) return false;
  for (size_t i = 0; i < axes.size(); ++i)
    if (load->args[i].kind() != ExprKind::Var || Var(load->args[i]).id() != axes[i].var.id()) return false;
  return true;
}

// A stage casting a load of `src` at its own indices to `to`; the load, or undefined.
Expr cast_of_load(const te::OpNode& op, DType to) {
  if (op.is_placeholder || op.tag != "cast" || op.body.kind() != ExprKind::Cast || op.body.dtype() != to ||
      op.body.arg(0).kind() != ExprKind::Load || !reads_at(op.body.arg(0), op.axes))
    return Expr();
  return op.body.arg(0);
}

// The bfloat16 placeholder a stage widens to float32 (a stored activation as its
// readers take it, ops::apply_node); null for any other stage.
const te::OpNode* widened_placeholder(const te::OpNode& op) {
  const Expr l = cast_of_load(op, DType::f32());
  if (!l.defined()) return nullptr;
  const te::OpNode* p = producer_of(l->buffer);
  return p && p->is_placeholder && p->buffer->dtype.is_bf16() ? p : nullptr;
}

}  // namespace

int64_t load_stride(const Expr& e, const Var& axis, const std::vector<Var>& all) {
  for (const Expr& l : loads_in(e)) {
    const te::OpNode* p = producer_of(l->buffer);
    if (!p || !p->is_placeholder) continue;
    const Expr flat = flat_index(l);
    std::unordered_map<int64_t, int64_t> at;
    for (const Var& v : all) at[v.id()] = 0;
    int64_t f0 = evaluate_int(flat, at);
    at[axis.id()] = 1;
    return evaluate_int(flat, at) - f0;
  }
  return 0;
}

MmaOperandLayout mma_operand_layout(const AnchorInfo& info, int factor, int spatial_axis, int k_axis) {
  const te::OpNode& a = *info.anchor;
  std::unordered_set<const te::OpNode*> inl;
  for (const te::Op& p : info.producers) inl.insert(p.get());
  const Expr v = inline_stages(a.body.arg(factor), inl);
  std::vector<Var> all;
  std::vector<int64_t> ext;
  for (const te::IterVar& x : a.axes) {
    all.push_back(x.var);
    ext.push_back(x.extent);
  }
  for (const te::IterVar& x : a.reduce_axes) {
    all.push_back(x.var);
    ext.push_back(x.extent);
  }
  const Var& s = a.axes[spatial_axis].var;
  const size_t kx = a.axes.size() + static_cast<size_t>(k_axis), sx = static_cast<size_t>(spatial_axis);
  const Var& k = all[kx];
  MmaOperandLayout out;
  const int64_t st_s = std::llabs(load_stride(v, s, all)), st_k = std::llabs(load_stride(v, k, all));
  out.k_inner = st_k != 0 && (st_s == 0 || st_k <= st_s);
  if (v.kind() != ExprKind::Load) return out;
  const te::OpNode* p = producer_of(v->buffer);
  if (!p || !p->is_placeholder) return out;
  for (const Expr& d : v->buffer->shape)
    if (d.kind() != ExprKind::IntImm) return out;
  const Expr flat = flat_index(v);
  std::unordered_map<int64_t, int64_t> at;
  for (const Var& x : all) at[x.id()] = 0;
  const int64_t f0 = evaluate_int(flat, at);
  std::vector<int64_t> stride(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    at[all[i].id()] = 1;
    stride[i] = evaluate_int(flat, at) - f0;
    at[all[i].id()] = 0;
  }
  const size_t inner = out.k_inner ? kx : sx;
  if (stride[inner] != 1 || ext[inner] % 4 != 0 || f0 % 4 != 0) return out;
  for (size_t i = 0; i < all.size(); ++i)
    if (i != inner && stride[i] % 4 != 0) return out;
  // Affine: the strides predict the index at the far corner and at points between.
  for (int64_t num : {1, 2, 3}) {
    int64_t want = f0;
    for (size_t i = 0; i < all.size(); ++i) {
      at[all[i].id()] = (ext[i] - 1) * num / 3;
      want += stride[i] * at[all[i].id()];
    }
    if (evaluate_int(flat, at) != want) return out;
  }
  out.vector = true;
  return out;
}

int mma_store_lanes(const AnchorInfo& info, int spatial_axis) {
  const te::OpNode& out = info.epilogue.empty() ? *info.anchor : *info.epilogue.back();
  const std::vector<Expr>& shape = out.buffer->shape;
  if (out.buffer->dtype != DType::f32() || shape.size() != info.anchor->axes.size()) return 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t e = 0;
    if (!is_const_int(shape[d], &e) || e != info.anchor->axes[d].extent) return 1;
    if (d > static_cast<size_t>(spatial_axis) && e != 1) return 1;
  }
  const int64_t n = info.anchor->axes[spatial_axis].extent;
  return n % 4 == 0 ? 4 : n % 2 == 0 ? 2 : 1;
}

bool is_injective(const te::OpNode& op) {
  return !op.is_placeholder && op.reduce == te::ReduceKind::None &&
         (op.pattern == te::OpPattern::Elementwise || op.pattern == te::OpPattern::Broadcast ||
          op.pattern == te::OpPattern::Injective);
}

Expr inline_stages(const Expr& e, const std::unordered_set<const te::OpNode*>& inlined) {
  return rewrite_post_order(e, [&](const Expr& x) -> Expr {
    if (x.kind() != ExprKind::Load) return Expr();
    const te::OpNode* p = producer_of(x->buffer);
    if (!p || !inlined.count(p)) return Expr();
    VarMap m;
    for (size_t i = 0; i < p->axes.size(); ++i) m[p->axes[i].var.id()] = x->args[i];
    return inline_stages(substitute(p->body, m), inlined);
  });
}

std::optional<OutputBorder> output_border(const ops::OpGraph& task) {
  if (task.outputs.size() != 1) return std::nullopt;
  // The border, perhaps under a last cast (a stored value's narrowing, which commutes
  // with a zero border): its inner value is then the cast of the border's input.
  const te::OpNode* top = task.outputs[0].op().get();
  std::optional<DType> narrowed;
  if (cast_of_load(*top, top->body.dtype()).defined()) {
    narrowed = top->body.dtype();
    top = top->inputs[0].op().get();
  }
  const te::OpNode& op = *top;
  // ops::pad's constant mode: select(inside, x[i - before], 0).
  if (op.is_placeholder || op.tag != "pad" || op.inputs.size() != 1 || op.body.kind() != ExprKind::Select)
    return std::nullopt;
  const Expr l = op.body.arg(1), zero = op.body.arg(2);
  double z = 1;
  int64_t zi = 1;
  if (l.kind() != ExprKind::Load || !((is_const_float(zero, &z) && z == 0) || (is_const_int(zero, &zi) && zi == 0)))
    return std::nullopt;
  const te::OpNode* in = producer_of(l->buffer);
  if (!in || in->is_placeholder || l->args.size() != op.axes.size()) return std::nullopt;
  OutputBorder b;
  b.inner = op.inputs[0];
  if (b.inner.op().get() != in) return std::nullopt;
  for (size_t d = 0; d < op.axes.size(); ++d) {
    const LinearForm lf = Analyzer().linear_form(l->args[d]);
    if (lf.terms.size() != 1 || lf.terms[0].first.kind() != ExprKind::Var ||
        Var(lf.terms[0].first).id() != op.axes[d].var.id() || lf.terms[0].second != 1 || lf.constant > 0 ||
        in->shape[d] - lf.constant > op.shape[d])
      return std::nullopt;
    b.before.push_back(-lf.constant);
  }
  if (narrowed) b.inner = ops::cast_to(b.inner, *narrowed);
  return b;
}

ops::OpGraph without_border(const ops::OpGraph& task, const OutputBorder& b) {
  ops::OpGraph inner = task;
  inner.outputs = {b.inner};
  return inner;
}

std::optional<AnchorInfo> analyze_anchor(const ops::OpGraph& task) {
  if (task.outputs.size() != 1) return std::nullopt;
  std::vector<te::Op> order = te::topo_order(task.outputs);
  te::Op anchor;
  for (const te::Op& op : order) {
    if (op->is_placeholder) continue;
    if (op->reduce != te::ReduceKind::None) {
      if (anchor || op->pattern != te::OpPattern::Anchor || op->reduce_axes.empty()) return std::nullopt;
      anchor = op;
    }
  }
  if (!anchor) return std::nullopt;

  // Readers of each stage.
  std::unordered_map<const te::OpNode*, std::vector<const te::OpNode*>> readers;
  for (const te::Op& op : order)
    for (const te::Tensor& t : op->inputs) readers[t.op().get()].push_back(op.get());

  AnchorInfo info;
  info.anchor = anchor;
  std::unordered_map<const te::OpNode*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position[order[i].get()] = i;
  const size_t anchor_position = position[anchor.get()];
  // An operand of the epilogue: a stage of the anchor's shape computed from the task's
  // inputs alone and read only by stages after the anchor (a residual's dequantization),
  // computed in the epilogue at each output where its reader takes it; or from such
  // stages.
  std::unordered_set<const te::OpNode*> operands;
  auto epilogue_operand = [&](const te::Op& op) {
    if (op->shape != anchor->shape) return false;
    for (const Expr& l : loads_in(op->body))
      if (const te::OpNode* p = producer_of(l->buffer);
          p && !p->is_placeholder && (p == anchor.get() || !operands.count(p)))
        return false;
    const auto& rs = readers[op.get()];
    if (rs.empty()) return false;
    for (const te::OpNode* r : rs)
      if (position[r] <= anchor_position) return false;
    return true;
  };
  bool before = true;
  const te::OpNode* prev = anchor.get();
  for (const te::Op& op : order) {
    if (op->is_placeholder) continue;
    if (op == anchor) {
      before = false;
      continue;
    }
    if (!is_injective(*op)) return std::nullopt;
    if (epilogue_operand(op)) {
      operands.insert(op.get());
      info.epilogue.push_back(op);
      continue;
    }
    if (before) {
      // A producer: read only by the anchor or by other producers.
      for (const te::OpNode* r : readers[op.get()])
        if (r != anchor.get() && !is_injective(*r)) return std::nullopt;
      info.producers.push_back(op);
      continue;
    }
    // An epilogue stage: the anchor's shape, reads the anchor or earlier epilogue stages
    // (at least one) at its own indices, and no other compute stage. A stage may be read
    // by several later ones (x * sigmoid(x)).
    if (op->shape != anchor->shape) return std::nullopt;
    bool reads_stage = false;
    for (const Expr& l : loads_in(op->body)) {
      const te::OpNode* p = producer_of(l->buffer);
      if (p == anchor.get() || std::find_if(info.epilogue.begin(), info.epilogue.end(),
                                            [&](const te::Op& e) { return e.get() == p; }) != info.epilogue.end()) {
        if (!reads_at(l, op->axes)) return std::nullopt;
        reads_stage = true;
      } else if (p && !p->is_placeholder) {
        return std::nullopt;
      }
    }
    if (!reads_stage) return std::nullopt;
    info.epilogue.push_back(op);
    prev = op.get();
  }
  if (prev != task.outputs[0].op().get()) return std::nullopt;
  // Producers must all be reached from the anchor only (no producer is an output).
  for (const te::Op& p : info.producers)
    for (const te::Tensor& out : task.outputs)
      if (out.op() == p) return std::nullopt;

  // Pack candidates: input dims indexed by one spatial axis variable alone.
  std::unordered_set<const te::OpNode*> inl;
  for (const te::Op& p : info.producers) inl.insert(p.get());
  Expr body = inline_stages(anchor->body, inl);
  for (size_t a = 0; a < anchor->axes.size(); ++a) {
    for (const Expr& l : loads_in(body)) {
      const te::OpNode* p = producer_of(l->buffer);
      if (!p || !p->is_placeholder || l->args.size() < 2) continue;
      for (size_t d = 0; d < l->args.size(); ++d) {
        const Expr& ix = l->args[d];
        if (ix.kind() == ExprKind::Var && Var(ix).id() == anchor->axes[a].var.id()) {
          // The axis must appear nowhere else in this load.
          bool alone = true;
          for (size_t k = 0; k < l->args.size(); ++k)
            if (k != d && uses_var(l->args[k], anchor->axes[a].var)) alone = false;
          bool dup = false;
          for (const auto& c : info.pack_candidates) dup |= c.axis == int(a) && c.input.get() == p;
          if (alone && !dup) {
            auto sp = l->buffer->producer.lock();
            info.pack_candidates.push_back({int(a), std::static_pointer_cast<const te::OpNode>(sp), int(d)});
          }
        }
      }
    }
  }
  return info;
}

GenericInfo analyze_generic(const ops::OpGraph& task) {
  GenericInfo info;
  std::unordered_set<const te::OpNode*> outputs;
  for (const te::Tensor& t : task.outputs) outputs.insert(t.op().get());
  for (const te::Op& op : te::topo_order(task.outputs)) {
    if (op->is_placeholder) continue;
    if (is_injective(*op) && !outputs.count(op.get())) info.inlined.insert(op.get());
    else info.stages.push_back(op);
  }
  if (task.outputs.size() != 1) return info;
  const te::OpNode& out = *task.outputs[0].op();
  int k = static_cast<int>(out.shape.size()) - (out.reduce == te::ReduceKind::None ? 1 : 0);
  for (const te::Op& s : info.stages) {
    k = std::min(k, static_cast<int>(s->shape.size()));
    for (int d = 0; d < k; ++d)
      if (s->shape[d] != out.shape[d]) k = d;
  }
  // Reads of earlier stages must use the reader's own leading axes.
  for (const te::Op& s : info.stages) {
    for (const Expr& l : loads_in(inline_stages(s->body, info.inlined))) {
      const te::OpNode* p = producer_of(l->buffer);
      if (!p || p->is_placeholder) continue;
      int ok = 0;
      while (ok < k && ok < static_cast<int>(l->args.size()) && l->args[ok].kind() == ExprKind::Var &&
             Var(l->args[ok]).id() == s->axes[ok].var.id())
        ++ok;
      k = std::min(k, ok);
    }
  }
  info.max_prefix = std::max(0, k);
  return info;
}

std::vector<CachedInput> cached_inputs(const AnchorInfo& info) {
  const te::OpNode& a = *info.anchor;
  std::vector<Var> axes;
  for (const te::IterVar& iv : a.axes) axes.push_back(iv.var);
  for (const te::IterVar& iv : a.reduce_axes) axes.push_back(iv.var);
  std::vector<const BufferNode*> order;
  std::unordered_map<const BufferNode*, std::vector<Expr>> loads;
  for (const Expr& l : loads_in(a.body)) {
    if (!loads.count(l->buffer.get())) order.push_back(l->buffer.get());
    loads[l->buffer.get()].push_back(l);
  }
  Analyzer an;
  std::vector<CachedInput> out;
  for (const BufferNode* b : order) {
    const std::vector<Expr>& ls = loads[b];
    bool ok = true;
    for (const Expr& l : ls) ok &= structural_equal(l, ls[0]);
    CachedInput c;
    c.buffer = ls[0]->buffer;
    for (const Expr& ix : ls[0]->args) {
      if (!ok) break;
      LinearForm f = an.linear_form(ix);
      std::vector<int64_t> coef(axes.size(), 0);
      for (const auto& [term, k] : f.terms) {
        bool found = false;
        for (size_t i = 0; i < axes.size() && !found; ++i)
          if (term.kind() == ExprKind::Var && Var(term).id() == axes[i].id()) {
            coef[i] += k;
            found = true;
          }
        ok &= found && k > 0;
      }
      c.coef.push_back(coef);
      c.offset.push_back(f.constant);
    }
    if (ok) out.push_back(std::move(c));
  }
  return out;
}

namespace {

// The one index of `args` that uses r, where it is r itself; -1 otherwise.
int alone(const std::vector<Expr>& args, const Var& r) {
  int dim = -1, uses = 0;
  for (size_t d = 0; d < args.size(); ++d) {
    if (!uses_var(args[d], r)) continue;
    ++uses;
    if (args[d].kind() == ExprKind::Var && Var(args[d]).id() == r.id()) dim = static_cast<int>(d);
  }
  return uses == 1 ? dim : -1;
}

// The activation is the vector operand (DotGroups::act_vector).
std::optional<DotGroups> act_vector_pairing(const AnchorInfo& info, int vec) {
  const te::OpNode& a = *info.anchor;
  const Var& v = a.axes[static_cast<size_t>(vec)].var;
  if (a.axes[static_cast<size_t>(vec)].extent < 4) return std::nullopt;
  Expr wl, al;
  for (int i = 0; i < 2; ++i) {
    const Expr& f = a.body.arg(static_cast<size_t>(i));
    if (f.kind() != ExprKind::Load || f.dtype() != DType::f32()) return std::nullopt;
    if (uses_var(f, v)) al = f;
    else wl = f;
  }
  if (!wl.defined() || !al.defined() || al->buffer.get() == wl->buffer.get()) return std::nullopt;
  const te::OpNode* wp = producer_of(wl->buffer);
  const te::OpNode* ap = producer_of(al->buffer);
  if (!wp || !wp->is_placeholder || !ap) return std::nullopt;
  if (!info.producers.empty() && info.producers.back().get() != ap) return std::nullopt;
  if (info.producers.empty() && !ap->is_placeholder) return std::nullopt;
  const std::vector<Expr>& ai = al->args;
  if (ai.size() < 2) return std::nullopt;
  for (size_t d = 0; d + 1 < ai.size(); ++d)
    if (uses_var(ai[d], v)) return std::nullopt;
  Analyzer an;
  int64_t step = 0;
  if (!is_const_int(an.simplify(substitute(ai.back(), {{v.id(), Expr(v) + 1}}) - ai.back()), &step) || step != 1)
    return std::nullopt;
  for (size_t j = a.reduce_axes.size(); j-- > 0;) {
    const Var& r = a.reduce_axes[j].var;
    const int64_t extent = a.reduce_axes[j].extent;
    if (extent < 2 || extent % 2 != 0) continue;
    const int ad = alone(ai, r), wd = alone(wl->args, r);
    if (ad < 0 || wd < 0 || ad + 1 == static_cast<int>(ai.size())) continue;
    DotGroups p;
    p.act_vector = true;
    p.reduce_axis = static_cast<int>(j);
    p.act = std::static_pointer_cast<const te::OpNode>(al->buffer->producer.lock());
    p.weight = std::static_pointer_cast<const te::OpNode>(wl->buffer->producer.lock());
    p.weight_dim = wd;
    p.act_dim = ad;
    p.act_load = al;
    p.weight_load = wl;
    return p;
  }
  return std::nullopt;
}

}  // namespace

bool integer_products(const ops::OpGraph& task) {
  const std::optional<AnchorInfo> info = analyze_anchor(task);
  if (!info || !info->anchor->buffer->dtype.is_int()) return false;
  bool bytes = false;
  post_order_visit(info->anchor->body,
                   [&](const Expr& e) { bytes |= e.kind() == ExprKind::Load && e.dtype().is_byte(); });
  // A producer (a padding) of 8-bit values counts as well.
  for (const te::Op& p : info->producers) bytes |= p->buffer->dtype.is_byte();
  return bytes;
}

namespace {

// The load under a factor of the anchor's product in a dot-product form of `width`
// products: a float32 load (2, bfloat16 pairs), or an 8-bit load widened to int32
// (4, integer quads); undefined otherwise.
Expr dot_factor(const Expr& f, int width) {
  if (width == 2) return f.kind() == ExprKind::Load && f.dtype() == DType::f32() ? f : Expr();
  if (f.kind() == ExprKind::Cast && f.dtype() == DType::i32() && f.arg(0).kind() == ExprKind::Load &&
      f.arg(0).dtype().is_byte())
    return f.arg(0);
  return Expr();
}

}  // namespace

std::optional<DotGroups> dot_groups(const AnchorInfo& info, int vec, int width) {
  const te::OpNode& a = *info.anchor;
  if (a.reduce != te::ReduceKind::Sum || a.body.kind() != ExprKind::Mul) return std::nullopt;
  const AnchorInfo::PackCandidate* pc = nullptr;
  for (const auto& c : info.pack_candidates)
    if (c.axis == vec) pc = &c;
  if (!pc) return width == 2 ? act_vector_pairing(info, vec) : std::nullopt;
  Expr wl, al;
  for (int i = 0; i < 2; ++i) {
    const Expr f = dot_factor(a.body.arg(static_cast<size_t>(i)), width);
    if (!f.defined()) return std::nullopt;
    if (f->buffer.get() == pc->input->buffer.get() && !wl.defined()) wl = f;
    else al = f;
  }
  if (!wl.defined() || !al.defined() || al->buffer.get() == wl->buffer.get()) return std::nullopt;
  // vpdpbusd multiplies unsigned bytes (the activation's, broadcast) by signed ones.
  if (width == 4 && (al.dtype() != DType::u8() || wl.dtype() != DType::i8())) return std::nullopt;
  const te::OpNode* ap = producer_of(al->buffer);
  if (!ap) return std::nullopt;
  // Every producer feeds act: the last one is act, the others are read by producers only.
  if (!info.producers.empty() && info.producers.back().get() != ap) return std::nullopt;
  if (info.producers.empty() && !ap->is_placeholder) return std::nullopt;
  if (uses_var(al, a.axes[static_cast<size_t>(vec)].var)) return std::nullopt;
  for (size_t j = a.reduce_axes.size(); j-- > 0;) {
    const Var& r = a.reduce_axes[j].var;
    const int64_t extent = a.reduce_axes[j].extent;
    if (extent < 2) continue;
    const std::vector<Expr>& ai = al->args;
    bool ok = !ai.empty();
    for (size_t d = 0; ok && d + 1 < ai.size(); ++d) ok = !uses_var(ai[d], r);
    if (!ok) continue;
    int64_t step = 0;
    if (!is_const_int(Analyzer().simplify(substitute(ai.back(), {{r.id(), Expr(r) + 1}}) - ai.back()), &step) ||
        step != 1)
      continue;
    const int wd = alone(wl->args, r);
    if (wd < 0) continue;
    // A partial last group is padded: the activation's last index must be the axis
    // itself over the whole dimension (its copy then gets the zero elements), and the
    // weight's dimension the axis's extent.
    const bool padded = extent % width != 0;
    if (padded) {
      const std::vector<int64_t>& ashape = ap->shape;
      if (ai.back().kind() != ExprKind::Var || Var(ai.back()).id() != r.id() || ashape.empty() ||
          ashape.back() != extent || pc->input->shape[static_cast<size_t>(wd)] != extent)
        continue;
    }
    DotGroups p;
    p.width = width;
    p.padded = padded;
    p.reduce_axis = static_cast<int>(j);
    p.act = std::static_pointer_cast<const te::OpNode>(al->buffer->producer.lock());
    p.weight = pc->input;
    p.weight_dim = wd;
    p.vec_dim = pc->dim;
    p.act_load = al;
    p.weight_load = wl;
    return p;
  }
  return std::nullopt;
}

std::optional<DotGroups> bf16_pairing(const AnchorInfo& info, int vec) { return dot_groups(info, vec, 2); }

std::optional<AmxForm> amx_form(const AnchorInfo& info, int vec) {
  const te::OpNode& a = *info.anchor;
  if (a.reduce != te::ReduceKind::Sum || a.body.kind() != ExprKind::Mul) return std::nullopt;
  AmxForm f;
  // int8: both factors 8-bit values widened to int32.
  auto widened_byte = [](const Expr& e) {
    return e.kind() == ExprKind::Cast && e.dtype() == DType::i32() && e.arg(0).dtype().is_byte();
  };
  f.int8 = a.body.dtype() == DType::i32() && widened_byte(a.body.arg(0)) && widened_byte(a.body.arg(1));
  if (a.body.dtype() != DType::f32() && !f.int8) return std::nullopt;
  // The weight's factor reads the weight alone; the activation's never.
  auto reads = [](const Expr& e, const BufferNode* b, bool* other) {
    bool found = false;
    post_order_visit(e, [&](const Expr& x) {
      if (x.kind() != ExprKind::Load) return;
      if (x->buffer.get() == b) found = true;
      else *other = true;
    });
    return found;
  };
  // The factors with the producers inlined (a stored activation packed as the B operand
  // is read through the stage that widens it).
  std::unordered_set<const te::OpNode*> all;
  for (const te::Op& pr : info.producers) all.insert(pr.get());
  const Expr factor[2] = {inline_stages(a.body.arg(0), all), inline_stages(a.body.arg(1), all)};
  for (const auto& c : info.pack_candidates)
    if (c.axis == vec) f.weight = c.input;
  if (!f.weight) {
    // Else a placeholder whose dimension vec indexes alone once the axes of one
    // iteration read 0 (a 1x1 convolution's input, its window axes 0).
    const VarMap unit = single_iteration_axes(a);
    const Var& v = a.axes[static_cast<size_t>(vec)].var;
    for (int i = 0; i < 2 && !f.weight; ++i)
      for (const Expr& l : loads_in(substitute(factor[i], unit))) {
        const te::OpNode* p = producer_of(l->buffer);
        if (!p || !p->is_placeholder) continue;
        std::vector<Expr> args;
        for (const Expr& ix : l->args) args.push_back(Analyzer().simplify(ix));
        if (alone(args, v) >= 0) {
          f.weight = std::static_pointer_cast<const te::OpNode>(l->buffer->producer.lock());
          break;
        }
      }
  }
  if (!f.weight) return std::nullopt;
  const BufferNode* wb = f.weight->buffer.get();
  for (int i = 0; i < 2; ++i) {
    bool other = false;
    if (reads(factor[i], wb, &other)) {
      if (other || f.weight_factor >= 0) return std::nullopt;
      f.weight_factor = i;
    }
  }
  if (f.weight_factor < 0) return std::nullopt;
  // tdpbusd multiplies unsigned bytes (the activation's rows) by signed ones.
  if (f.int8 && (a.body.arg(static_cast<size_t>(f.weight_factor)).arg(0).dtype() != DType::i8() ||
                 a.body.arg(static_cast<size_t>(1 - f.weight_factor)).arg(0).dtype() != DType::u8()))
    return std::nullopt;
  const Expr wf = factor[f.weight_factor];
  const Expr af = factor[1 - f.weight_factor];
  bool unused = false;
  if (reads(af, wb, &unused)) return std::nullopt;
  for (size_t i = 0; i < a.axes.size(); ++i) {
    const Var& v = a.axes[i].var;
    const bool in_a = uses_var(af, v), in_w = uses_var(wf, v);
    if (in_a && in_w) f.batch_axes.push_back(static_cast<int>(i));
    else if (in_a) f.m_axes.push_back(static_cast<int>(i));
    else if (in_w) f.n_axes.push_back(static_cast<int>(i));
    else if (a.axes[i].extent > 1) return std::nullopt;
  }
  for (size_t j = 0; j < a.reduce_axes.size(); ++j)
    if (a.reduce_axes[j].extent > 1) f.k_axes.push_back(static_cast<int>(j));
  if (f.m_axes.empty() || f.k_axes.empty() || f.n_axes.empty() || f.n_axes.back() != vec) return std::nullopt;
  // With other column axes and vec's extent not a multiple of 16, a tile's 16 columns
  // straddle values of the others: contiguous in the output where the wide column axes
  // are the anchor's last ones (an NCHW convolution's (h, w)), else in runs of vec's
  // extent where it divides 16 (an output blocked by 8 channels).
  const int64_t ve = a.axes[static_cast<size_t>(vec)].extent;
  if (f.n_axes.size() > 1 && ve % 16 != 0) {
    std::vector<int> wide_n, wide_all;  // those of more than one iteration
    for (int x : f.n_axes)
      if (a.axes[static_cast<size_t>(x)].extent > 1) wide_n.push_back(x);
    for (size_t x = 0; x < a.axes.size(); ++x)
      if (a.axes[x].extent > 1) wide_all.push_back(static_cast<int>(x));
    f.straddles = wide_n.size() <= wide_all.size() &&
                  std::equal(wide_n.begin(), wide_n.end(), wide_all.end() - static_cast<std::ptrdiff_t>(wide_n.size()));
    f.vec_runs = !f.straddles && 16 % ve == 0;
    if (!f.straddles && !f.vec_runs) return std::nullopt;
  }
  return f;
}

int64_t flat_plane_tiles(const AmxDirect& d, int64_t h, int64_t w) {
  const int64_t wp = d.src->shape[static_cast<size_t>(d.x_dim)];
  return ((d.plane ? (h - 1) * wp + w : h * wp) + 15) / 16;
}

std::optional<AmxDirect> amx_direct_form(const AnchorInfo& info, const AmxForm& f) {
  const te::OpNode& a = *info.anchor;
  Expr af = a.body.arg(static_cast<size_t>(1 - f.weight_factor));
  if (f.int8) af = af.arg(0);  // the byte under the widening
  if (af.kind() != ExprKind::Load) return std::nullopt;
  const te::OpNode* src = producer_of(af->buffer);
  if (!src) return std::nullopt;
  if (!info.producers.empty() ? info.producers.back().get() != src : !src->is_placeholder) return std::nullopt;
  AmxDirect d;
  d.src = std::static_pointer_cast<const te::OpNode>(af->buffer->producer.lock());
  d.row_axis = f.m_axes.back();
  const Var& row = a.axes[static_cast<size_t>(d.row_axis)].var;
  std::vector<bool> channel(a.reduce_axes.size(), false);
  for (size_t x = 0; x < af->args.size(); ++x) {
    const Expr& e = af->args[x];
    if (e.kind() == ExprKind::Var)
      for (int j : f.k_axes)
        if (Var(e).id() == a.reduce_axes[static_cast<size_t>(j)].var.id() && !channel[static_cast<size_t>(j)] &&
            a.reduce_axes[static_cast<size_t>(j)].extent == src->shape[x]) {
          d.channel_dims.push_back(static_cast<int>(x));
          d.channel_k.push_back(j);
          channel[static_cast<size_t>(j)] = true;
          break;
        }
  }
  if (d.channel_dims.empty()) return std::nullopt;
  for (size_t x = 0; x < af->args.size(); ++x) {
    if (std::find(d.channel_dims.begin(), d.channel_dims.end(), static_cast<int>(x)) != d.channel_dims.end()) continue;
    for (int j : d.channel_k)
      if (uses_var(af->args[x], a.reduce_axes[static_cast<size_t>(j)].var)) return std::nullopt;
    if (!uses_var(af->args[x], row)) continue;
    if (d.x_dim >= 0) return std::nullopt;
    d.x_dim = static_cast<int>(x);
    for (const auto& [atom, coef] : Analyzer().linear_form(af->args[x]).terms) {
      if (atom.kind() != ExprKind::Var && uses_var(atom, row)) return std::nullopt;
      if (atom.kind() == ExprKind::Var && Var(atom).id() == row.id()) d.row_stride += coef;
    }
  }
  if (d.x_dim < 0) return std::nullopt;
  for (int j : f.k_axes)
    if (!channel[static_cast<size_t>(j)]) d.window_k.push_back(j);
  int64_t channels = 1;
  for (int j : d.channel_k) channels *= a.reduce_axes[static_cast<size_t>(j)].extent;
  bool x_last = true;
  for (size_t x = static_cast<size_t>(d.x_dim) + 1; x < af->args.size(); ++x)
    x_last &= std::find(d.channel_dims.begin(), d.channel_dims.end(), static_cast<int>(x)) != d.channel_dims.end();
  if (channels < (f.int8 ? 64 : 32) && x_last) {
    const LinearForm lf = Analyzer().linear_form(af->args[static_cast<size_t>(d.x_dim)]);
    for (int j : d.window_k) {
      int64_t coef = 0;
      for (const auto& [atom, c] : lf.terms)
        if (atom.kind() == ExprKind::Var && Var(atom).id() == a.reduce_axes[static_cast<size_t>(j)].var.id()) coef += c;
      if (coef == 1) {
        d.folded_k = j;
        break;
      }
    }
  }
  // Flat rows: y, the m axis before the row axis, by 1 in the other dimension before x.
  if (d.folded_k < 0 && d.row_stride == 1 && f.m_axes.size() >= 2) {
    const int y_axis = f.m_axes[f.m_axes.size() - 2];
    const Var& y = a.axes[static_cast<size_t>(y_axis)].var;
    int y_dim = -1;
    for (int x = d.x_dim - 1; x >= 0; --x)
      if (std::find(d.channel_dims.begin(), d.channel_dims.end(), x) == d.channel_dims.end()) {
        y_dim = x;
        break;
      }
    // The window's reach along a dimension whose index is `axis` x 1 plus window axes.
    auto reach = [&](int dim, const Var& axis, int64_t* out) {
      int64_t coef_axis = 0;
      *out = 0;
      const LinearForm lf = Analyzer().linear_form(af->args[static_cast<size_t>(dim)]);
      if (lf.constant != 0) return false;
      for (const auto& [atom, c] : lf.terms) {
        if (atom.kind() != ExprKind::Var) return false;
        const int64_t id = Var(atom).id();
        if (id == axis.id()) {
          coef_axis += c;
          continue;
        }
        bool window = false;
        for (int j : d.window_k)
          if (id == a.reduce_axes[static_cast<size_t>(j)].var.id()) {
            window = true;
            if (c < 0) return false;
            *out += c * (a.reduce_axes[static_cast<size_t>(j)].extent - 1);
          }
        if (!window) return false;
      }
      return coef_axis == 1;
    };
    bool y_alone = y_dim >= 0;
    for (size_t x = 0; y_alone && x < af->args.size(); ++x)
      if (static_cast<int>(x) != y_dim && uses_var(af->args[x], y)) y_alone = false;
    if (y_alone && reach(y_dim, y, &d.y_reach) && reach(d.x_dim, row, &d.x_reach)) {
      d.y_axis = y_axis;
      d.y_dim = y_dim;
    }
  }
  if (d.y_axis >= 0 && !f.int8 && d.channel_dims == std::vector<int>{1, 4} && d.y_dim == 2 && d.x_dim == 3 &&
      src->shape.size() == 5 && src->shape[4] == 32) {
    const te::OpNode* p = src->is_placeholder ? src : widened_placeholder(*src);
    // The last tile of a plane ends at its last computed position: at least 16 of them.
    const int64_t h = a.axes[static_cast<size_t>(d.y_axis)].extent, w = a.axes[static_cast<size_t>(d.row_axis)].extent;
    if (p && p->buffer->dtype.is_bf16() && (h - 1) * src->shape[3] + w >= 16)
      d.plane = std::static_pointer_cast<const te::OpNode>(p->buffer->producer.lock());
  }
  return d;
}

std::optional<AmxAttention> amx_attention_form(const GenericInfo& info) {
  // Stored activations (graph::store_activations_bf16): q, k and v may be bfloat16,
  // read through (inlined) stages that widen them, and the output narrowed to bfloat16
  // by a last stage, the quotient then inlined into it.
  std::vector<te::Op> st = info.stages;
  std::unordered_map<const te::OpNode*, const te::OpNode*> widened;
  for (const te::OpNode* op : info.inlined)
    if (const te::OpNode* p = widened_placeholder(*op)) widened[op] = p;
  if (st.size() == 6) {
    const Expr l = cast_of_load(*st[5], DType::bf16());
    if (l.defined()) {
      const te::OpNode* q = producer_of(l->buffer);
      if (!q || !info.inlined.count(q) || q->tag != "attention") return std::nullopt;
      st.back() = std::static_pointer_cast<const te::OpNode>(l->buffer->producer.lock());
    }
  }
  if (st.size() != 6) return std::nullopt;
  for (const te::Op& op : st)
    if (op->tag != "attention" || op->shape.size() != 3) return std::nullopt;
  // Topological order puts the scores first and the output last; the max, the
  // exponentials, their sum and the values in between in some order.
  te::Op scores = st[0], out = st[5], mx, ex;
  std::vector<te::Op> sums;
  for (size_t i = 1; i < 5; ++i) {
    const te::Op& op = st[i];
    if (op->reduce == te::ReduceKind::Max) mx = op;
    else if (op->reduce_axes.empty()) ex = op;
    else if (op->reduce == te::ReduceKind::Sum) sums.push_back(op);
  }
  if (!mx || !ex || sums.size() != 2 || scores->reduce != te::ReduceKind::Sum || !out->reduce_axes.empty())
    return std::nullopt;
  // body = load(a, {i0, i1, r}) * load(b, {i0, r, i2}) over placeholders (a may be `first`).
  auto product_of = [&](const te::OpNode& op, const te::OpNode* first, const te::OpNode** a, const te::OpNode** b) {
    if (op.reduce_axes.size() != 1 || op.body.kind() != ExprKind::Mul) return false;
    const Expr& x = op.body.arg(0);
    const Expr& y = op.body.arg(1);
    if (x.kind() != ExprKind::Load || y.kind() != ExprKind::Load) return false;
    const Var &i0 = op.axes[0].var, &i1 = op.axes[1].var, &i2 = op.axes[2].var, &r = op.reduce_axes[0].var;
    auto is = [](const Expr& e, const Var& v) { return e.kind() == ExprKind::Var && Var(e).id() == v.id(); };
    if (x->args.size() != 3 || y->args.size() != 3 || !is(x->args[0], i0) || !is(x->args[1], i1) ||
        !is(x->args[2], r) || !is(y->args[0], i0) || !is(y->args[1], r) || !is(y->args[2], i2))
      return false;
    auto source = [&](const te::OpNode* p) {
      auto it = widened.find(p);
      return it == widened.end() ? p : it->second;
    };
    auto input = [](const te::OpNode* p) {
      return p && p->is_placeholder && (p->buffer->dtype == DType::f32() || p->buffer->dtype.is_bf16());
    };
    const te::OpNode* pa = source(producer_of(x->buffer));
    const te::OpNode* pb = source(producer_of(y->buffer));
    if (!input(pb)) return false;
    if (first ? producer_of(x->buffer) != first : !input(pa)) return false;
    *a = pa;
    *b = pb;
    return true;
  };
  AmxAttention f;
  const te::OpNode* e_op = nullptr;
  if (!product_of(*scores, nullptr, &f.q, &f.k)) return std::nullopt;
  // The values: the sum of the exponentials times v (the other sum is their row sum).
  const te::Op values = product_of(*sums[0], ex.get(), &e_op, &f.v)   ? sums[0]
                        : product_of(*sums[1], ex.get(), &e_op, &f.v) ? sums[1]
                                                                      : te::Op();
  if (!values) return std::nullopt;
  f.scores = scores;
  f.max = mx;
  f.values = values;
  f.out = out;
  f.B = scores->shape[0];
  f.L = scores->shape[1];
  f.S = scores->shape[2];
  f.D = scores->reduce_axes[0].extent;
  f.E = values->shape[2];
  return f;
}

}  // namespace basin::sched
