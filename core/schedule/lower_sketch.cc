// The two CPU lowerings (anchor, generic) and the pipeline after them. The loop
// structures are documented on Sketch (sketch.h) and in docs/schedules.md.
#include "core/schedule/lower_sketch.h"

#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "core/expr/analyzer.h"
#include "core/expr/evaluate.h"
#include "core/ir/flatten_buffers.h"
#include "core/ir/mark_unrolled.h"
#include "core/ir/pass.h"
#include "core/ir/simplify_stmt.h"
#include "core/ir/verify.h"
#include "core/schedule/task_analysis.h"
#include "core/util/error.h"

namespace basin::sched {

namespace {

const char* kUnrollPragma = "auto_unroll_max_step";

Stmt loop(const Var& v, const Expr& extent, Stmt body, ForKind kind = ForKind::Serial) {
  return make_for(v, Expr(int64_t{0}), extent, kind, std::move(body));
}

// Buffer extents are simplified when built: constants for a concrete program.
std::vector<Expr> simplified(std::vector<Expr> shape) {
  for (Expr& e : shape) e = simplify(e);
  return shape;
}

Expr product(const std::vector<Expr>& v) {
  Expr p(int64_t{1});
  for (const Expr& e : v) p = p * e;
  return p;
}

// Decomposes a fused index into per-axis indices (row-major, first axis outermost).
std::vector<Expr> unfuse_index(const Expr& p, const std::vector<Expr>& extents) {
  std::vector<Expr> idx(extents.size());
  Expr stride(int64_t{1});
  for (size_t i = extents.size(); i-- > 0;) {
    idx[i] = i == 0 ? floordiv(p, stride) : floormod(floordiv(p, stride), extents[i]);
    stride = stride * extents[i];
  }
  return idx;
}
std::vector<Expr> unfuse(const Var& p, const std::vector<Expr>& extents) { return unfuse_index(Expr(p), extents); }

// The outermost parallel loops over several axes: one fused loop (what is compiled, so
// the thread pool sees one range) or the nest of the axes' own loops, all parallel (the
// structure form, whose features then see which axis moves which index).
struct ParallelAxes {
  std::vector<Expr> index;  // per axis
  std::function<Stmt(Stmt)> wrap;
};
ParallelAxes parallel_axes(const std::string& name, const std::vector<Expr>& extents, bool fuse) {
  ParallelAxes r;
  if (fuse) {
    Var p(name);
    r.index = unfuse(p, extents);
    Expr total = product(extents);
    r.wrap = [p, total](Stmt body) { return loop(p, total, std::move(body), ForKind::Parallel); };
    return r;
  }
  std::vector<Var> vars;
  for (size_t i = 0; i < extents.size(); ++i) {
    vars.push_back(Var(name + std::to_string(i)));
    r.index.push_back(vars.back());
  }
  r.wrap = [vars, extents](Stmt body) {
    for (size_t i = vars.size(); i-- > 0;) body = loop(vars[i], extents[i], std::move(body), ForKind::Parallel);
    return body;
  };
  return r;
}

// The number of tiles of a split whose inner levels cover `tile` iterations: exact for
// a divisor split, ceil for a guarded one.
Expr tile_count(const SplitSpec& sp, const Expr& tile) {
  Expr n(sp.extent);
  return sp.guarded ? floordiv(n + tile - Expr(int64_t{1}), tile) : floordiv(n, tile);
}

// Whether a guarded split's last tile needs its guard: not when its factors are
// constants whose product divides the extent. The structure form (what features are
// read from) always keeps it, so that a configuration's features are the symbolic
// features at its point whether or not its tiles divide.
bool needs_guard(const SplitSpec& sp, const std::vector<Expr>& factors, bool structure_form) {
  if (!sp.guarded) return false;
  if (structure_form) return true;
  int64_t prod = 1;
  for (const Expr& f : factors) {
    int64_t v;
    if (!is_const_int(f, &v)) return true;
    prod *= v;
  }
  return sp.extent % prod != 0;
}

Stmt guarded(const Expr& cond, Stmt body) { return cond.defined() ? make_if(cond, std::move(body)) : body; }

// Replaces every load of `from` by a load of `to` at indices map(old indices).
Expr retarget_loads(const Expr& e, const BufferNode* from, const Buffer& to,
                    const std::function<std::vector<Expr>(const std::vector<Expr>&)>& map) {
  return rewrite_post_order(e, [&](const Expr& x) -> Expr {
    if (x.kind() != ExprKind::Load || x->buffer.get() != from) return Expr();
    return load(to, map(x->args));
  });
}

// The anchor's value `value` at output index `idx` through the elementwise epilogue:
// each stage's body with its reads of the anchor and of earlier stages replaced by
// their values at the same index.
Expr apply_epilogue(const AnchorInfo& info, Expr value, const std::vector<Expr>& idx) {
  std::unordered_map<const BufferNode*, Expr> values = {{info.anchor->buffer.get(), value}};
  for (const te::Op& c : info.epilogue) {
    VarMap cm;
    for (size_t i = 0; i < idx.size(); ++i) cm[c->axes[i].var.id()] = idx[i];
    Expr v = rewrite_post_order(c->body, [&](const Expr& x) -> Expr {
      if (x.kind() != ExprKind::Load) return Expr();
      auto it = values.find(x->buffer.get());
      return it == values.end() ? Expr() : it->second;
    });
    value = substitute(v, cm);
    values[c->buffer.get()] = value;
  }
  return value;
}

// ---- the anchor rule ----

struct Tiles {
  Expr f[4];  // f[0]: outermost extent
  Var v[4];   // v[0] unused (the fused parallel loop's decomposition is e0)
  Expr e0;
  Expr full;
  Expr guard;  // full < extent, for a guarded split whose last tile is partial
};

// A stage's loop nest over `vars` (extents `extents`), parallel over its outermost axis
// of more than one iteration (a convolution's padded input has a batch of 1: its channels).
Stmt stage_loops(const std::vector<Var>& vars, const std::vector<int64_t>& extents, Stmt body) {
  size_t par = 0;
  while (par + 1 < extents.size() && extents[par] <= 1) ++par;
  for (size_t x = vars.size(); x-- > 0;)
    body = loop(vars[x], Expr(extents[x]), body, x == par ? ForKind::Parallel : ForKind::Serial);
  return body;
}

// The bfloat16 load a float32 value widens (a stored activation as its reader takes
// it, ops::apply_node); undefined for any other expression.
Expr widened_load(const Expr& e) {
  if (e.kind() == ExprKind::Cast && e.dtype().element() == DType::f32() && e.arg(0).kind() == ExprKind::Load &&
      e.arg(0).dtype().is_bf16())
    return e.arg(0);
  return Expr();
}

// The repacking of input w, read along its dimension d by the vectorized axis (tiles tv,
// `split` its split): packed[o, rest..., l] = w[..., o * t + l, ...], t the vector tile.
// A guarded axis packs every row its tiles read, those past the extent zeros: the
// computation reads them unmasked. With group_dim >= 0 (groups of `group` products:
// bfloat16 pairs, Sketch::bf16_pair; 8-bit quads, Sketch::int8_quad) that dimension is
// divided by the group (rounded up) and a last one of `group` added, the values cast to
// `dtype`: packed[o, .., kg, .., l, q] = w[.., o * t + l, .., group kg + q, ..]; the
// last group's elements past the extent are zeros. Returns the parallel nest; the
// buffer in *packed.
Stmt pack_input(const te::OpNode& w, int d, int group_dim, int group, DType dtype, const Tiles& tv,
                const SplitSpec& split, Buffer* packed) {
  const Expr t = tv.f[3];
  auto extent = [&](size_t x) {
    return static_cast<int>(x) == group_dim ? (w.shape[x] + group - 1) / group : w.shape[x];
  };
  const bool padded_groups = group_dim >= 0 && w.shape[static_cast<size_t>(group_dim)] % group != 0;
  std::vector<Expr> shape = {split.guarded ? tv.f[0] * tv.f[1] * tv.f[2] : floordiv(Expr(w.shape[d]), t)};
  for (size_t x = 0; x < w.shape.size(); ++x)
    if (static_cast<int>(x) != d) shape.push_back(Expr(extent(x)));
  shape.push_back(t);
  if (group_dim >= 0) shape.push_back(Expr(group));
  shape = simplified(shape);
  *packed = make_buffer(w.name + "_packed", dtype, shape, MemScope::Global);
  Var o("pack.o"), l("pack.l"), q("pack.q");
  std::vector<Var> xs;
  std::vector<Expr> src, dst = {o};
  for (size_t x = 0; x < w.shape.size(); ++x) {
    if (static_cast<int>(x) == d) {
      src.push_back(Expr(o) * t + l);
      continue;
    }
    xs.push_back(Var("pack." + std::to_string(x)));
    Expr ix = static_cast<int>(x) == group_dim ? Expr(xs.back()) * group + q : Expr(xs.back());
    // The padding elements read the last one (in bounds) and store zero.
    if (static_cast<int>(x) == group_dim && padded_groups) ix = min(ix, Expr(w.shape[x] - 1));
    src.push_back(ix);
    dst.push_back(xs.back());
  }
  dst.push_back(l);
  if (group_dim >= 0) dst.push_back(q);
  Expr value = load(w.buffer, src);
  if (value.dtype().is_bf16()) value = cast(DType::f32(), value);  // a stored activation: no bfloat16 arithmetic
  if (padded_groups) {
    const Var& kg = xs[static_cast<size_t>(group_dim < d ? group_dim : group_dim - 1)];
    value = select(Expr(kg) * group + q < Expr(w.shape[static_cast<size_t>(group_dim)]), value,
                   make_const(value.dtype(), 0));
  }
  if (tv.guard.defined()) value = select(Expr(o) * t + l < Expr(w.shape[d]), value, make_const(value.dtype(), 0));
  if (value.dtype() != dtype) value = cast(dtype, value);
  Stmt st = group_dim >= 0 ? loop(q, Expr(group), make_store(*packed, dst, value)) : make_store(*packed, dst, value);
  st = loop(l, t, st);
  for (size_t x = xs.size(); x-- > 0;) {
    const size_t dim = x < static_cast<size_t>(d) ? x : x + 1;
    st = loop(xs[x], Expr(extent(dim)), st);
  }
  return loop(o, shape[0], st, ForKind::Parallel);
}

// The activation as bfloat16 pairs interleaved along its last dimension (DotGroups::
// act_vector): act_pk[.., kp, .., x, q] = bf16(act[.., 2 kp + q, .., x]), dimension
// `pair_dim` halved. The last dimension, read by the vectorized axis (extent `extent`,
// tiles tv) unmasked, is padded with zeros by as many elements as the axis's last tile
// reads past its extent. `aval` is act's value at indices `av`. A placeholder's rows
// are copied in chunks of L = 16, 8 or 4 columns by a vectorized loop over the chunk's
// 2L outputs (lane e reads column e / 2 of row 2 kp + e % 2: two contiguous loads the
// backend interleaves), the rest of each row, and the padding, one element at a time.
// Returns the nest.
Stmt pack_act_pairs(const te::OpNode& act, const std::vector<Var>& av, const Expr& aval, int pair_dim, const Tiles& tv,
                    int64_t extent, Buffer* act_pk) {
  const size_t n = act.shape.size(), pd = static_cast<size_t>(pair_dim);
  const int64_t width = act.shape.back();
  const Expr vec_extent = tv.f[0] * tv.f[1] * tv.f[2] * tv.f[3];
  std::vector<Expr> shape;
  for (size_t x = 0; x < n; ++x) shape.push_back(Expr(x == pd ? act.shape[x] / 2 : act.shape[x]));
  shape.back() = shape.back() + max(vec_extent - Expr(extent), Expr(0));
  shape = simplified(shape);
  std::vector<Expr> dims = shape;
  shape.push_back(Expr(2));
  *act_pk = make_buffer(act.name + "_bf16", DType::bf16(), shape, MemScope::Global);
  std::vector<Var> xs;
  for (size_t x = 0; x < n; ++x) xs.push_back(Var("pk." + std::to_string(x)));
  // act's value at row 2 kp + q of the pair dimension, column `col`.
  auto value_at = [&](const Expr& q, const Expr& col) {
    VarMap src;
    for (size_t x = 0; x < n; ++x) src[av[x].id()] = x == pd ? Expr(xs[x]) * 2 + q : x + 1 == n ? col : Expr(xs[x]);
    return substitute(aval, src);
  };
  auto target = [&](const Expr& col, const Expr& q) {
    std::vector<Expr> dst(xs.begin(), xs.end() - 1);
    dst.push_back(col);
    dst.push_back(q);
    return dst;
  };
  // The chunk width covering the most of a row (the wider on a tie); 0: none.
  int64_t chunk = 0;
  if (act.is_placeholder)
    for (int64_t l : {16, 8, 4})
      if (width >= l && (chunk == 0 || width - width % l > width - width % chunk)) chunk = l;
  const int64_t covered = chunk ? width - width % chunk : 0;
  std::vector<Stmt> row;
  if (chunk) {
    Var o("pk.o"), e("pk.e");
    const Expr col = Expr(o) * chunk + floordiv(Expr(e), Expr(2));
    const Expr q = floormod(Expr(e), Expr(2));
    row.push_back(
        loop(o, Expr(covered / chunk),
             loop(e, Expr(2 * chunk), make_store(*act_pk, target(col, q), cast(DType::bf16(), value_at(q, col))),
                  ForKind::Vectorized)));
  }
  // The rest: columns past the chunks, the padding zeros (read in bounds, stored zero).
  Var c("pk.c"), q("pk.q");
  const Expr col = Expr(c) + covered;
  Expr rest = cast(DType::bf16(),
                   select(col < Expr(width), value_at(q, min(col, Expr(width - 1))), make_const(aval.dtype(), 0)));
  row.push_back(loop(c, simplified({dims.back() - Expr(covered)})[0],
                     loop(q, Expr(2), make_store(*act_pk, target(col, q), rest))));
  Stmt st = make_seq(row);
  size_t par = 0;
  while (par + 2 < n && act.shape[par] <= 1) ++par;
  for (size_t x = n - 1; x-- > 0;) st = loop(xs[x], dims[x], st, x == par ? ForKind::Parallel : ForKind::Serial);
  return st;
}

// Weight w copied to bfloat16 with dimension `pair_dim` moved last (its pairs adjacent):
// packed[.., k] = bf16(w[.., k, ..]). Returns the nest.
Stmt weight_pairs_last(const te::OpNode& w, int pair_dim, Buffer* packed) {
  const size_t n = w.shape.size(), pd = static_cast<size_t>(pair_dim);
  std::vector<Var> xs;
  std::vector<Expr> src, dst, shape;
  for (size_t x = 0; x < n; ++x) {
    xs.push_back(Var("wpk." + std::to_string(x)));
    src.push_back(xs.back());
    if (x != pd) {
      dst.push_back(xs.back());
      shape.push_back(Expr(w.shape[x]));
    }
  }
  dst.push_back(xs[pd]);
  shape.push_back(Expr(w.shape[pd]));
  *packed = make_buffer(w.name + "_packed", DType::bf16(), shape, MemScope::Global);
  Stmt st = make_store(*packed, dst, cast(DType::bf16(), load(w.buffer, src)));
  for (size_t x = n; x-- > 0;) st = loop(xs[x], Expr(w.shape[x]), st, x == 0 ? ForKind::Parallel : ForKind::Serial);
  return st;
}

Stmt build_anchor(const ops::OpGraph& task, const Sketch& s, const KnobValues& k, const Buffer& out_buf, bool fuse) {
  AnchorInfo info = *analyze_anchor(task);
  const te::OpNode& a = *info.anchor;
  size_t ns = a.axes.size(), nr = a.reduce_axes.size();
  int vec = s.vec_axis;
  std::vector<Tiles> sp(ns);
  for (size_t i = 0; i < ns; ++i) {
    const std::string& n = s.splits[i].name;
    for (int l = 1; l <= 3; ++l) {
      sp[i].f[l] = k.factors[i][l - 1];
      sp[i].v[l] = Var(n + "." + std::to_string(l));
    }
    sp[i].f[0] = tile_count(s.splits[i], sp[i].f[1] * sp[i].f[2] * sp[i].f[3]);
  }
  std::vector<Expr> outer_extents;
  for (const Tiles& t : sp) outer_extents.push_back(t.f[0]);
  ParallelAxes outer = parallel_axes("fused", outer_extents, fuse);
  const std::vector<Expr>& e0 = outer.index;
  for (size_t i = 0; i < ns; ++i) {
    Tiles& t = sp[i];
    t.e0 = e0[i];
    t.full = ((t.e0 * t.f[1] + t.v[1]) * t.f[2] + t.v[2]) * t.f[3] + t.v[3];
    if (needs_guard(s.splits[i], k.factors[i], !fuse)) t.guard = t.full < Expr(a.axes[i].extent);
  }
  std::vector<Expr> rf1(nr), rfull(nr);
  std::vector<Var> r0(nr), r1(nr);
  std::vector<Expr> rf0(nr), rguard(nr);
  for (size_t j = 0; j < nr; ++j) {
    const std::string& n = s.splits[ns + j].name;
    rf1[j] = k.factors[ns + j][0];
    rf0[j] = tile_count(s.splits[ns + j], rf1[j]);
    r0[j] = Var(n + ".0");
    r1[j] = Var(n + ".1");
    rfull[j] = Expr(r0[j]) * rf1[j] + r1[j];
    if (needs_guard(s.splits[ns + j], k.factors[ns + j], !fuse)) rguard[j] = rfull[j] < Expr(s.splits[ns + j].extent);
  }
  std::vector<int> inner_order;
  for (size_t i = 0; i < ns; ++i)
    if (static_cast<int>(i) != vec) inner_order.push_back(static_cast<int>(i));
  inner_order.push_back(vec);

  // The body the accumulator combines: producers inlined (or read from their stages),
  // the repacked input read in its packed layout, axes replaced by their tiles.
  std::unordered_set<const te::OpNode*> inl;
  if (s.inline_producers)
    for (const te::Op& pr : info.producers) inl.insert(pr.get());
  Expr body = inline_stages(a.body, inl);
  std::vector<Stmt> prologue;
  std::vector<Buffer> staged;
  Buffer packed;
  const bool bf16 = s.bf16_pair >= 0, grouped = bf16 || s.int8_quad >= 0;
  const int width = bf16 ? 2 : 4;
  const Tiles& tv = sp[vec];
  // The vector tile's index in the packed input.
  const Expr vec_tile = (tv.e0 * tv.f[1] + tv.v[1]) * tv.f[2] + tv.v[2];
  if (s.pack && !grouped) {
    const AnchorInfo::PackCandidate* pc = nullptr;
    for (const auto& c : info.pack_candidates)
      if (c.axis == vec) {
        pc = &c;
        break;
      }
    BASIN_CHECK(pc) << "sketch " << s.name << " packs an axis with no candidate input";
    const int d = pc->dim;
    prologue.push_back(pack_input(*pc->input, d, -1, 1, pc->input->buffer->dtype, tv, s.splits[vec], &packed));
    body = retarget_loads(body, pc->input->buffer.get(), packed, [&](const std::vector<Expr>& idx) {
      std::vector<Expr> r = {vec_tile};
      for (size_t x = 0; x < idx.size(); ++x)
        if (static_cast<int>(x) != d) r.push_back(idx[x]);
      r.push_back(tv.v[3]);
      return r;
    });
  }
  // Groups of products (bfloat16 pairs, Sketch::bf16_pair; 8-bit quads,
  // Sketch::int8_quad): the activation copied (to bfloat16; its producers computed into
  // the copy), the weight packed to groups.
  std::optional<DotGroups> pairing;
  Buffer act_bf;
  if (grouped) {
    pairing = dot_groups(info, vec, width);
    BASIN_CHECK(pairing && pairing->reduce_axis == (bf16 ? s.bf16_pair : s.int8_quad))
        << "sketch " << s.name << " groups no reduction axis";
    const te::OpNode& act = *pairing->act;
    const DType copy_type = bf16 ? DType::bf16() : act.buffer->dtype;
    std::vector<Var> av;
    Expr aval;
    if (act.is_placeholder) {
      std::vector<Expr> idx;
      for (size_t x = 0; x < act.shape.size(); ++x) {
        av.push_back(Var("cvt." + std::to_string(x)));
        idx.push_back(av.back());
      }
      aval = load(act.buffer, idx);
    } else {
      for (const te::IterVar& iv : act.axes) av.push_back(iv.var);
      std::unordered_set<const te::OpNode*> all;
      for (const te::Op& pr : info.producers) all.insert(pr.get());
      aval = inline_stages(act.body, all);
    }
    if (pairing->act_vector) {
      prologue.push_back(
          pack_act_pairs(act, av, aval, pairing->act_dim, tv, a.axes[static_cast<size_t>(vec)].extent, &act_bf));
      prologue.push_back(weight_pairs_last(*pairing->weight, pairing->weight_dim, &packed));
      staged.push_back(act_bf);
    } else {
      if (!bf16 && act.is_placeholder && !pairing->padded) {
        act_bf = act.buffer;  // 8-bit integers read as they are
      } else {
        // Padded groups: the copy longer along the last dimension by the zeros.
        std::vector<int64_t> copy_shape = act.shape;
        copy_shape.back() = (copy_shape.back() + width - 1) / width * width;
        std::vector<Expr> ashape;
        for (int64_t e : copy_shape) ashape.push_back(Expr(e));
        act_bf = make_buffer(act.name + (bf16 ? "_bf16" : "_copy"), copy_type, ashape, MemScope::Global);
        if (pairing->padded) {
          const int64_t last = act.shape.back() - 1;
          aval = select(Expr(av.back()) <= Expr(last),
                        substitute(aval, {{av.back().id(), min(Expr(av.back()), Expr(last))}}),
                        make_const(aval.dtype(), 0));
        }
        if (aval.dtype() != copy_type) aval = cast(copy_type, aval);
        prologue.push_back(stage_loops(av, copy_shape, make_store(act_bf, {av.begin(), av.end()}, aval)));
        staged.push_back(act_bf);
      }
      const DType weight_type = bf16 ? DType::bf16() : pairing->weight->buffer->dtype;
      prologue.push_back(pack_input(*pairing->weight, pairing->vec_dim, pairing->weight_dim, width, weight_type, tv,
                                    s.splits[vec], &packed));
    }
  }
  if (!s.inline_producers && !grouped) {
    for (const te::Op& pr : info.producers) {
      std::vector<Var> vars;
      for (const te::IterVar& iv : pr->axes) vars.push_back(iv.var);
      prologue.push_back(stage_loops(vars, pr->shape, make_store(pr->buffer, {vars.begin(), vars.end()}, pr->body)));
      staged.push_back(pr->buffer);
    }
  }
  // The computation reads a partial last tile of a guarded axis at the extent's last
  // index (clamped: no branch in the hot loop; those accumulator elements are never
  // written back), except along the vectorized axis, whose loads are masked (the
  // accumulator's update stays unmasked, so that it can live in registers) unless
  // they read the packed input, padded with zeros.
  VarMap m;
  for (size_t i = 0; i < ns; ++i)
    m[a.axes[i].var.id()] =
        sp[i].guard.defined() && static_cast<int>(i) != vec ? min(sp[i].full, Expr(a.axes[i].extent - 1)) : sp[i].full;
  for (size_t j = 0; j < nr; ++j) m[a.reduce_axes[j].var.id()] = rfull[j];
  body = substitute(body, m);
  if (sp[vec].guard.defined() && !grouped) {
    const Var& lane = sp[vec].v[3];
    const Expr& g = sp[vec].guard;
    body = rewrite_post_order(body, [&](const Expr& x) -> Expr {
      // A bfloat16 load (a stored activation) is masked where it is widened to float32.
      if (x.kind() == ExprKind::Load && x.dtype().is_bf16()) return Expr();
      const Expr w = widened_load(x);
      const Expr& l = w.defined() ? w : x;
      if (l.kind() != ExprKind::Load || !uses_var(l, lane) || (packed && l->buffer.get() == packed.get()))
        return Expr();
      return select(g, x, make_const(x.dtype(), 0));
    });
  }

  // The accumulator, laid out in the inner order.
  int lvl = s.acc_level;
  std::vector<Expr> acc_shape, acc_idx;
  for (int i : inner_order) {
    const Tiles& t = sp[i];
    acc_shape.push_back(lvl == 1 ? t.f[2] * t.f[3] : t.f[3]);
    acc_idx.push_back(lvl == 1 ? Expr(t.v[2]) * t.f[3] + t.v[3] : Expr(t.v[3]));
  }
  Buffer acc = make_buffer(a.name + "_acc", a.buffer->dtype, simplified(acc_shape), MemScope::Local);
  // The S3 loops; with `guard`, the partial last tile of each guarded axis is skipped
  // just inside the axis's innermost loop (masked lanes for the vectorized one).
  auto s3_loops = [&](Stmt st, bool guard) {
    for (size_t x = inner_order.size(); x-- > 0;) {
      int i = inner_order[x];
      if (guard) st = guarded(sp[i].guard, st);
      st = loop(sp[i].v[3], sp[i].f[3], st, i == vec ? ForKind::Vectorized : ForKind::Serial);
    }
    return st;
  };
  auto s2_loops = [&](Stmt st) {
    for (size_t x = inner_order.size(); x-- > 0;) st = loop(sp[inner_order[x]].v[2], sp[inner_order[x]].f[2], st);
    return st;
  };
  auto tile_loops = [&](Stmt st, bool guard) { return lvl == 1 ? s2_loops(s3_loops(st, guard)) : s3_loops(st, guard); };
  auto r_loops = [&](Stmt st, int level) {
    for (size_t j = nr; j-- > 0;) {
      if (level == 1) st = guarded(rguard[j], st);
      st = level == 0 ? loop(r0[j], rf0[j], st) : loop(r1[j], rf1[j], st);
    }
    return st;
  };

  // The accumulator's padded elements are never written back.
  Stmt init = tile_loops(make_store(acc, acc_idx, te::reduce_identity(a.reduce, acc->dtype)), false);
  Stmt update;
  // A group's element q (weight-vector form): the activation's indices at k = width kg + q,
  // the packed weight's [vec tile][.., kg, ..][lane][q].
  auto group_indices = [&](int64_t q) {
    const size_t j = static_cast<size_t>(bf16 ? s.bf16_pair : s.int8_quad);
    VarMap mq = m;
    mq[a.reduce_axes[j].var.id()] = rfull[j] * width + q;
    std::vector<Expr> ai, wi = {vec_tile};
    for (const Expr& x : pairing->act_load->args) ai.push_back(substitute(x, mq));
    for (size_t x = 0; x < pairing->weight_load->args.size(); ++x) {
      if (static_cast<int>(x) == pairing->vec_dim) continue;
      wi.push_back(static_cast<int>(x) == pairing->weight_dim ? rfull[j]
                                                              : substitute(pairing->weight_load->args[x], m));
    }
    wi.push_back(tv.v[3]);
    wi.push_back(Expr(q));
    return std::pair{ai, wi};
  };
  if (!grouped) {
    update = make_store(acc, acc_idx, te::reduce_combine(a.reduce, load(acc, acc_idx), body));
  } else if (!bf16) {
    // acc += act[k = 4 kg + q] w[.., kg, .., l, q] for q = 0 .. 3: one vpdpbusd per vector
    // (kInt8DotPragma), the reduction axis k replaced by its group kg.
    Expr sum = load(acc, acc_idx);
    for (int64_t q = 0; q < 4; ++q) {
      const auto [ai, wi] = group_indices(q);
      sum = sum + cast(DType::i32(), load(act_bf, ai)) * cast(DType::i32(), load(packed, wi));
    }
    update = make_pragma(kInt8DotPragma, Expr(1), make_store(acc, acc_idx, sum));
  } else {
    // acc += act[k = 2 kp + 1] w[.., kp, .., l, 1], then act[2 kp] w[.., kp, .., l, 0]: one
    // vdpbf16ps per vector (kBf16DotPragma), the reduction axis k replaced by its pair kp.
    const size_t j = static_cast<size_t>(s.bf16_pair);
    std::vector<Expr> products;
    for (int64_t q : {1, 0}) {
      if (pairing->act_vector) {
        // The weight's pair broadcast (its reduction dimension last), the activation's
        // pairs interleaved along its last dimension.
        std::vector<Expr> wi, ai;
        for (size_t x = 0; x < pairing->weight_load->args.size(); ++x)
          if (static_cast<int>(x) != pairing->weight_dim) wi.push_back(substitute(pairing->weight_load->args[x], m));
        wi.push_back(rfull[j] * 2 + q);
        for (size_t x = 0; x < pairing->act_load->args.size(); ++x)
          ai.push_back(static_cast<int>(x) == pairing->act_dim ? rfull[j] : substitute(pairing->act_load->args[x], m));
        ai.push_back(Expr(q));
        products.push_back(cast(DType::f32(), load(packed, wi)) * cast(DType::f32(), load(act_bf, ai)));
        continue;
      }
      const auto [ai, wi] = group_indices(q);
      products.push_back(cast(DType::f32(), load(act_bf, ai)) * cast(DType::f32(), load(packed, wi)));
    }
    update = make_pragma(kBf16DotPragma, Expr(1),
                         make_store(acc, acc_idx, (load(acc, acc_idx) + products[0]) + products[1]));
  }
  Stmt compute = lvl == 1 ? r_loops(s2_loops(r_loops(s3_loops(update, false), 1)), 0)
                          : r_loops(r_loops(s3_loops(update, false), 1), 0);
  Expr value = load(acc, acc_idx);
  std::vector<Expr> out_idx;
  for (const Tiles& t : sp) out_idx.push_back(t.full);
  value = apply_epilogue(info, value, out_idx);
  Stmt writeback = tile_loops(make_store(out_buf, out_idx, value), true);

  Stmt tile = make_allocate(acc, make_seq({init, compute, writeback}));
  if (lvl == 2)
    for (size_t i = ns; i-- > 0;) tile = loop(sp[i].v[2], sp[i].f[2], tile);
  for (size_t i = ns; i-- > 0;) tile = loop(sp[i].v[1], sp[i].f[1], tile);
  tile = make_pragma(kUnrollPragma, k.unroll, tile);
  Stmt main = outer.wrap(tile);

  prologue.push_back(main);
  Stmt all = make_seq(prologue);
  for (const Buffer& b : staged) all = make_allocate(b, all);
  if (packed) all = make_allocate(packed, all);
  return all;
}

// ---- AMX-BF16 tiles (SketchRule::CpuAmx) ----

// A loop over `extent` iterations as vectors of 16 lanes, then the rest one at a time:
// body(index) at each.
Stmt vector_chunks(const std::string& name, int64_t extent, const std::function<Stmt(const Expr&)>& body) {
  std::vector<Stmt> parts;
  Var o(name + ".o"), l(name + ".l"), t(name + ".t");
  if (extent >= 16)
    parts.push_back(
        loop(o, Expr(extent / 16), loop(l, Expr(int64_t{16}), body(Expr(o) * 16 + l), ForKind::Vectorized)));
  if (extent % 16) parts.push_back(loop(t, Expr(extent % 16), body(Expr(t) + extent / 16 * 16)));
  return make_seq(parts);
}

// The kAmxBf16Pragma nest (core/ir/stmt.h) over KB steps of 32, acc zeroed before (the
// pragma's value 0): acc[tm*16 + r][(col0 + tn)*16 + c] += a(tm, r, kb, 2 kp + q) *
// b(tn, kb, kp, c, q), a and b the bfloat16 loads of the A and B tiles' elements. With
// int8 the kAmxInt8Pragma nest over steps of 64: groups of 4 (q < 4), a uint8 and b
// int8, acc int32.
Stmt amx_product(const Buffer& acc, const Expr& col0, int64_t KB, const Expr& TM, const Expr& TN,
                 const std::function<Expr(const Expr&, const Expr&, const Expr&, const Expr&)>& a,
                 const std::function<Expr(const Expr&, const Expr&, const Expr&, const Expr&, const Expr&)>& b,
                 bool int8 = false) {
  const Expr one(int64_t{1}), sixteen(int64_t{16});
  const int64_t group = int8 ? 4 : 2;
  const DType wide = int8 ? DType::i32() : DType::f32();
  Var kb("amx.kb"), tm("amx.tm"), tn("amx.tn"), kp("amx.kp"), r("amx.r"), c("amx.c");
  const std::vector<Expr> acc_idx = {Expr(tm) * sixteen + r, (col0 + tn) * sixteen + c};
  auto product = [&](int64_t q) {
    return cast(wide, a(tm, r, kb, Expr(kp) * Expr(group) + Expr(q))) * cast(wide, b(tn, kb, kp, c, Expr(q)));
  };
  Stmt update =
      int8 ? make_pragma(
                 kInt8DotPragma, one,
                 make_store(acc, acc_idx, (((load(acc, acc_idx) + product(0)) + product(1)) + product(2)) + product(3)))
           : make_pragma(kBf16DotPragma, one, make_store(acc, acc_idx, (load(acc, acc_idx) + product(1)) + product(0)));
  Stmt nest = loop(
      kb, Expr(KB),
      loop(tm, TM, loop(tn, TN, loop(kp, sixteen, loop(r, sixteen, loop(c, sixteen, update, ForKind::Vectorized))))));
  return make_pragma(int8 ? kAmxInt8Pragma : kAmxBf16Pragma, Expr(int64_t{0}), nest);
}

// e as a value of type t: the operand of a widening cast from t, else e cast to t.
Expr narrowed(const Expr& e, DType t) {
  if (e.dtype() == t) return e;
  if (e.kind() == ExprKind::Cast && e.arg(0).dtype() == t) return e.arg(0);
  return cast(t, e);
}

Expr ceil_div(const Expr& n, const Expr& d) { return floordiv(n + d - Expr(int64_t{1}), d); }

Stmt pack_pairs(const std::function<Expr(const Expr&, const Expr&)>& src, const Buffer& dst,
                const std::function<std::vector<Expr>(const Expr&, const Expr&, const Expr&, const Expr&)>& at,
                int64_t R, int64_t C, const Expr& nt, int64_t KR, ForKind t_kind);

// The anchor as C[m][n] = sum_k A[m][k] B[k][n] on AMX tiles (sched::amx_form: m, n
// and k each its axes flattened in the anchor's order): C tiles of 16 rows by 16
// float32 columns, A tiles of 16 rows by 32 bfloat16 (16 pairs of k), B tiles of 16
// pairs of k by 16 columns' pairs. An int8 form (AmxForm::int8) alike in groups of 4:
// int32 C tiles, A tiles of 16 rows by 64 unsigned bytes, B tiles of 16 groups of k by
// 16 columns' groups of signed bytes, steps of 64 where this says 32, the copies in bytes
// where it says bfloat16. The weight is packed [batch..][column tiles, padded
// to whole panels of TN][k steps x 16 pairs][16][2] (one stage, split off and run once
// at compile). The activation is copied to bfloat16: row by row of the flattened GEMM,
// A[batch.., m, k], rows padded with zeros to whole panels of TM tiles and k to whole
// steps of 32; or, in place (Sketch::amx_direct, sched::amx_direct_form), src with its
// channel dimensions last, P[other dims.., channels padded to 32], a tile's rows 16
// consecutive values of the row axis (its other m axes one value per tile) and k's steps
// the window's positions times the channels' steps of 32. One parallel loop runs over
// (the batch axes, the panels of TN column tiles, the panels of TM row tiles); each
// iteration zeroes its TM*16 x TN*16 accumulator, runs the kAmxBf16Pragma nest over k's
// steps and writes its rows and columns inside the extents back through the epilogue (a
// row's axes computed once per row, a tile's columns contiguous along vec).
Stmt build_cpu_amx(const ops::OpGraph& task, const Sketch& s, const KnobValues& k, const Buffer& out_buf) {
  AnchorInfo info = *analyze_anchor(task);
  const te::OpNode& a = *info.anchor;
  std::optional<AmxForm> form = amx_form(info, s.vec_axis);
  BASIN_CHECK(form) << "sketch " << s.name << " has no AMX form";
  const AmxForm& g = *form;
  std::optional<AmxDirect> direct = s.amx_direct ? amx_direct_form(info, g) : std::nullopt;
  BASIN_CHECK(!s.amx_direct || direct) << "sketch " << s.name << " reads no convolution in place";
  const size_t ns = a.axes.size();
  // A group's elements (bfloat16 pairs, byte quads) and a step's (16 groups: 64 bytes).
  const bool int8 = g.int8;
  const int64_t G = int8 ? 4 : 2, KS = 16 * G;
  const Expr one(int64_t{1}), zero_i(int64_t{0}), sixteen(int64_t{16}), group(G), step(KS);
  auto axis_extent = [&](int x, bool reduce) {
    return reduce ? a.reduce_axes[static_cast<size_t>(x)].extent : a.axes[static_cast<size_t>(x)].extent;
  };
  auto axis_var = [&](int x, bool reduce) {
    return reduce ? a.reduce_axes[static_cast<size_t>(x)].var : a.axes[static_cast<size_t>(x)].var;
  };
  auto extent_of = [&](const std::vector<int>& axes, bool reduce) {
    int64_t e = 1;
    for (int x : axes) e *= axis_extent(x, reduce);
    return e;
  };
  // Row-major flattening of axes and its inverse (into *m, by the axes' variables).
  auto flatten = [&](const std::vector<int>& axes, bool reduce, const std::vector<Expr>& idx) {
    Expr f = zero_i;
    for (size_t i = 0; i < axes.size(); ++i) f = f * Expr(axis_extent(axes[i], reduce)) + idx[i];
    return f;
  };
  auto vars = [&](const std::vector<int>& axes, bool reduce) {
    std::vector<Expr> e;
    for (int i : axes) e.push_back(axis_var(i, reduce));
    return e;
  };
  auto unflatten = [&](const std::vector<int>& axes, bool reduce, const Expr& flat, VarMap* m) {
    Expr rest = flat;
    for (size_t i = axes.size(); i-- > 0;) {
      const Expr e(axis_extent(axes[i], reduce));
      (*m)[axis_var(axes[i], reduce).id()] = i == 0 ? rest : floormod(rest, e);
      rest = floordiv(rest, e);
    }
  };
  const int64_t N = extent_of(g.n_axes, false);
  const int64_t vec_extent = axis_extent(s.vec_axis, false);
  const Expr TM = k.factors[0][0], TN = k.factors[1][0];
  // Rows: 16-row tiles, each of the flattened m (GEMM), or of the row axis per value of
  // the other m axes (in place).
  // Flat rows (Sketch::amx_flat_rows): per value of the m axes before y, the tiles run
  // over the copy's (y, x) plane of H x Wp positions.
  const bool flat = s.amx_flat_rows;
  BASIN_CHECK(!flat || (direct && direct->y_axis >= 0)) << "sketch " << s.name << " has no rows across output rows";
  std::vector<int> other_m(g.m_axes.begin(), g.m_axes.end() - (direct ? 1 : 0));
  if (flat) other_m.pop_back();  // y, the m axis before the row axis
  const int64_t M = extent_of(g.m_axes, false), W = direct ? axis_extent(direct->row_axis, false) : M;
  const int64_t H = flat ? axis_extent(direct->y_axis, false) : 1,
                Wp = flat ? direct->src->shape[static_cast<size_t>(direct->x_dim)] : 0;
  // Flat rows read in place (AmxDirect::plane): the plane's tiles end at its last
  // computed position (y H - 1, x W - 1), the last one starting 16 positions before it
  // (some of its rows computed twice, alike), so that no window reads past the plane.
  const te::OpNode* plane = flat && direct->plane ? direct->plane.get() : nullptr;
  const int64_t last = (H - 1) * Wp + W - 1;
  const int64_t WT = flat ? flat_plane_tiles(*direct, H, W) : (W + 15) / 16,
                m_tiles = direct ? extent_of(other_m, false) * WT : (M + 15) / 16;
  // The first plane position of tile tw (0 <= tw < WT) of a plane.
  auto plane_start = [&](const Expr& tw) {
    return plane ? min(tw * Expr(int64_t{16}), Expr(last - 15)) : tw * Expr(int64_t{16});
  };
  const Expr mp = ceil_div(Expr(m_tiles), TM), np = ceil_div(Expr((N + 15) / 16), TN);
  const Expr n_tiles = simplify(np * TN);
  // k: steps of 32. GEMM: the reduction axes flattened, padded. In place: the window's
  // positions (outer) times the channels' steps (inner), the channels flattened in src's
  // order and padded to 32.
  const Expr af = a.body.arg(static_cast<size_t>(1 - g.weight_factor));
  const Expr af_load = int8 ? af.arg(0) : af;  // in place: the load (int8: under the widening)
  std::vector<int> channel_k = direct ? direct->channel_k : g.k_axes;
  const int64_t C = extent_of(channel_k, true);
  // In place, a window axis may fold into the channels' steps (AmxDirect::folded_k).
  const int merged = direct ? direct->folded_k : -1;
  std::vector<int> window_rest;
  if (direct)
    for (int j : direct->window_k)
      if (j != merged) window_rest.push_back(j);
  // The elements a step covers: the channels, or (merged) the window columns' channels.
  const int64_t CK = merged >= 0 ? axis_extent(merged, true) * C : C, CC = (CK + KS - 1) / KS;
  const int64_t KB = extent_of(window_rest, true) * CC;
  // The reduction axes at step kb, position j (0..31) of the step; *valid: inside.
  auto k_at = [&](const Expr& kb, const Expr& j, VarMap* m, Expr* valid) {
    const Expr e = (direct ? floormod(kb, Expr(CC)) : kb) * step + j;
    if (direct) unflatten(window_rest, true, floordiv(kb, Expr(CC)), m);
    const Expr ec = min(e, Expr(CK - 1));
    if (merged >= 0) {
      (*m)[axis_var(merged, true).id()] = floordiv(ec, Expr(C));
      unflatten(channel_k, true, floormod(ec, Expr(C)), m);
    } else {
      unflatten(channel_k, true, ec, m);
    }
    *valid = CK % KS ? e < Expr(CK) : Expr();
  };
  // Axes of one iteration read as 0.
  const VarMap unit = single_iteration_axes(a);
  std::unordered_set<const te::OpNode*> all;
  for (const te::Op& pr : info.producers) all.insert(pr.get());
  const Expr wval = substitute(inline_stages(a.body.arg(static_cast<size_t>(g.weight_factor)), all), unit);
  // The A and B tiles' elements (bf: the activation's copy).
  const DType bf = int8 ? DType::u8() : DType::bf16(), wt = int8 ? DType::i8() : DType::bf16();
  const Expr bf_zero = int8 ? make_const(bf, 0) : cast(bf, make_const(DType::f32(), 0));
  auto with_batch = [&](const std::vector<Expr>& batch, std::vector<Expr> rest) {
    std::vector<Expr> idx(batch);
    idx.insert(idx.end(), rest.begin(), rest.end());
    return idx;
  };
  std::vector<Stmt> prologue;

  // The weight, one gathering stage: packed[batch.., nt, kp, l, q] = w(n = 16 nt + l, k at
  // step kp / 16, position 2 (kp % 16) + q), zero past the extents.
  std::vector<Expr> w_shape;
  for (int x : g.batch_axes) w_shape.push_back(Expr(axis_extent(x, false)));
  w_shape.insert(w_shape.end(), {n_tiles, Expr(KB * 16), sixteen, group});
  Buffer packed = make_buffer(g.weight->name + "_amx", wt, simplified(w_shape), MemScope::Global);
  // Whether l loads a placeholder at the flat index `want` (the axes of one iteration 0).
  auto reads_at = [&](const Expr& l, const Expr& want) {
    const te::OpNode* p = l.defined() && l.kind() == ExprKind::Load ? producer_of(l->buffer) : nullptr;
    if (!p || !p->is_placeholder) return false;
    int64_t diff = -1;
    return is_const_int(Analyzer().simplify(flat_index(l) - substitute(want, unit)), &diff) && diff == 0;
  };
  // Whether l loads a placeholder at [batch.., rows.., cols..] row-major (each group of
  // axes flattened).
  auto row_major = [&](const Expr& l, const std::vector<int>& rows, bool rows_reduce, const std::vector<int>& cols,
                       bool cols_reduce) {
    return reads_at(l, (flatten(g.batch_axes, false, vars(g.batch_axes, false)) * Expr(extent_of(rows, rows_reduce)) +
                        flatten(rows, rows_reduce, vars(rows, rows_reduce))) *
                               Expr(extent_of(cols, cols_reduce)) +
                           flatten(cols, cols_reduce, vars(cols, cols_reduce)));
  };
  // B laid out [batch.., k.., n..] row-major (an NCHW 1x1 convolution's input, the width
  // the vector axis, packed per call): pairs of its rows interleaved in vectors of 32
  // along n (pack_pairs).
  Expr b_src = widened_load(wval);
  if (!b_src.defined()) b_src = wval;
  if (direct || int8 || (b_src.dtype() != DType::f32() && !b_src.dtype().is_bf16()) ||
      !row_major(b_src, g.k_axes, true, g.n_axes, false))
    b_src = Expr();
  if (b_src.defined()) {
    std::vector<Var> bv;
    for (int x : g.batch_axes) bv.push_back(Var("amx.wb" + std::to_string(x)));
    const std::vector<Expr> batch(bv.begin(), bv.end());
    const Expr base = flatten(g.batch_axes, false, batch) * Expr(C * N);
    Stmt st =
        pack_pairs([&](const Expr& r, const Expr& c) { return load(b_src->buffer, {base + r * Expr(N) + c}); }, packed,
                   [&](const Expr& t, const Expr& kp, const Expr& l, const Expr& q) {
                     return with_batch(batch, {t, kp, l, q});
                   },
                   C, N, n_tiles, CC, bv.empty() ? ForKind::Parallel : ForKind::Serial);
    for (size_t i = bv.size(); i-- > 0;)
      st = loop(bv[i], Expr(axis_extent(g.batch_axes[i], false)), st, i == 0 ? ForKind::Parallel : ForKind::Serial);
    prologue.push_back(st);
  } else {
    std::vector<Var> bv;
    VarMap wm = unit;
    for (int x : g.batch_axes) {
      bv.push_back(Var("amx.wb" + std::to_string(x)));
      wm[axis_var(x, false).id()] = bv.back();
    }
    Var nt("amx.w.nt"), kp("amx.w.kp"), l("amx.w.l"), q("amx.w.q");
    const Expr n = Expr(nt) * sixteen + l;
    unflatten(g.n_axes, false, min(n, Expr(N - 1)), &wm);
    Expr k_valid;
    k_at(floordiv(Expr(kp), sixteen), floormod(Expr(kp), sixteen) * group + q, &wm, &k_valid);
    Expr inside = n < Expr(N);
    if (k_valid.defined()) inside = logical_and(inside, k_valid);
    const Expr w = substitute(wval, wm);
    Expr v = int8 ? select(inside, narrowed(w, wt), make_const(wt, 0))
                  : cast(wt, select(inside, w, make_const(w.dtype(), 0)));
    std::vector<Expr> dst(bv.begin(), bv.end());
    dst.insert(dst.end(), {nt, kp, l, q});
    Stmt st = loop(nt, n_tiles, loop(kp, Expr(KB * 16), loop(l, sixteen, loop(q, group, make_store(packed, dst, v)))),
                   bv.empty() ? ForKind::Parallel : ForKind::Serial);
    for (size_t i = bv.size(); i-- > 0;)
      st = loop(bv[i], Expr(axis_extent(g.batch_axes[i], false)), st, i == 0 ? ForKind::Parallel : ForKind::Serial);
    prologue.push_back(st);
  }

  // The activation's copy and the A tiles' index in it at (batch, tile t, row r, kb, j).
  Buffer act_bf;
  std::function<std::vector<Expr>(const std::vector<Expr>&, const Expr&, const Expr&, const Expr&, const Expr&)>
      a_index;
  // In place: the activation is a bfloat16 placeholder (a stored activation, read through
  // the stage that widens it) laid out [batch.., m.., k..] row-major, k a multiple of 32
  // and at least 16 rows: the tiles read its rows where they lie. A partial last tile
  // reads the 16 rows that end at M (the tile before computes some of them too, alike),
  // the tiles past the last read it (never stored).
  // Or laid out [batch.., k's outer axis, m.., k's inner axis of 32] (channels blocked by
  // 32, sched's layout plan on AMX hosts): a tile at step kb is 16 rows of 64 bytes, one
  // contiguous kilobyte.
  const Expr aval = substitute(inline_stages(af, all), unit);
  Buffer a_placeholder;
  bool a_blocked = false;
  if (!direct && C % KS == 0 && M >= 16) {
    // The byte (int8) or bfloat16 load under the activation's widening.
    const Expr x = int8 ? (aval.kind() == ExprKind::Cast && aval.arg(0).kind() == ExprKind::Load ? aval.arg(0) : Expr())
                        : widened_load(aval);
    if (row_major(x, g.m_axes, false, g.k_axes, true)) {
      a_placeholder = x->buffer;
    } else if (g.k_axes.size() == 2 && axis_extent(g.k_axes[1], true) == KS &&
               reads_at(
                   x, ((flatten(g.batch_axes, false, vars(g.batch_axes, false)) * Expr(axis_extent(g.k_axes[0], true)) +
                        axis_var(g.k_axes[0], true)) *
                           Expr(M) +
                       flatten(g.m_axes, false, vars(g.m_axes, false))) *
                              step +
                          axis_var(g.k_axes[1], true))) {
      a_placeholder = x->buffer;
      a_blocked = true;
    }
  }
  auto row0 = [&](const Expr& t) {
    const Expr first = min(t, Expr(m_tiles - 1)) * sixteen;
    return M % 16 ? min(first, Expr(M - 16)) : first;
  };
  if (a_placeholder && a_blocked) {
    act_bf = a_placeholder;
    a_index = [&](const std::vector<Expr>& batch, const Expr& t, const Expr& r, const Expr& kb, const Expr& j) {
      return std::vector<Expr>{((flatten(g.batch_axes, false, batch) * Expr(CC) + kb) * Expr(M) + row0(t) + r) * step +
                               j};
    };
  } else if (a_placeholder) {
    act_bf = a_placeholder;
    a_index = [&](const std::vector<Expr>& batch, const Expr& t, const Expr& r, const Expr& kb, const Expr& j) {
      return std::vector<Expr>{(flatten(g.batch_axes, false, batch) * Expr(M) + row0(t) + r) * Expr(C) + kb * step + j};
    };
  } else if (!direct) {
    // A[batch.., m, k] over the axes themselves (k's innermost axis in vectors), then k's
    // padding for the rows inside M, then the padding rows.
    const Expr m_pad = simplify(mp * TM * sixteen);
    const int64_t k_pad = CC * KS;
    std::vector<Expr> a_shape;
    for (int x : g.batch_axes) a_shape.push_back(Expr(axis_extent(x, false)));
    a_shape.push_back(m_pad);
    a_shape.push_back(Expr(k_pad));
    act_bf = make_buffer(a.name + "_amx_a", bf, simplified(a_shape), MemScope::Global);
    std::vector<Var> bv, mv, kv;
    VarMap am;
    for (int x : g.batch_axes) {
      bv.push_back(Var("amx.ab" + std::to_string(x)));
      am[axis_var(x, false).id()] = bv.back();
    }
    for (int x : g.m_axes) {
      mv.push_back(Var("amx.am" + std::to_string(x)));
      am[axis_var(x, false).id()] = mv.back();
    }
    for (int x : g.k_axes) kv.push_back(Var("amx.ak" + std::to_string(x)));
    auto at = [&](const Expr& row, const Expr& col) { return with_batch({bv.begin(), bv.end()}, {row, col}); };
    const Expr row = flatten(g.m_axes, false, {mv.begin(), mv.end()});
    Stmt st = vector_chunks("amx.ak", axis_extent(g.k_axes.back(), true), [&](const Expr& kl) {
      VarMap m = am;
      std::vector<Expr> ki(kv.begin(), kv.end() - 1);
      ki.push_back(kl);
      for (size_t i = 0; i < g.k_axes.size(); ++i) m[axis_var(g.k_axes[i], true).id()] = ki[i];
      return make_store(act_bf, at(row, flatten(g.k_axes, true, ki)), narrowed(substitute(aval, m), bf));
    });
    for (size_t i = kv.size() - 1; i-- > 0;) st = loop(kv[i], Expr(axis_extent(g.k_axes[i], true)), st);
    std::vector<Var> outer(bv.begin(), bv.end());
    outer.insert(outer.end(), mv.begin(), mv.end());
    std::vector<int> outer_axes(g.batch_axes.begin(), g.batch_axes.end());
    outer_axes.insert(outer_axes.end(), g.m_axes.begin(), g.m_axes.end());
    size_t par = 0;
    while (par + 1 < outer.size() && axis_extent(outer_axes[par], false) <= 1) ++par;
    for (size_t i = outer.size(); i-- > 0;)
      st = loop(outer[i], Expr(axis_extent(outer_axes[i], false)), st, i == par ? ForKind::Parallel : ForKind::Serial);
    std::vector<Stmt> parts = {st};
    auto per_batch = [&](Stmt body) {
      for (size_t i = bv.size(); i-- > 0;) body = loop(bv[i], Expr(axis_extent(g.batch_axes[i], false)), body);
      return body;
    };
    if (k_pad > C) {
      Var r("amx.ar");
      parts.push_back(per_batch(loop(r, Expr(M), vector_chunks("amx.akp", k_pad - C, [&](const Expr& c) {
                                       return make_store(act_bf, at(r, c + C), bf_zero);
                                     }))));
    }
    Var pr("amx.apad");
    parts.push_back(per_batch(loop(pr, m_pad - Expr(M), vector_chunks("amx.apk", k_pad, [&](const Expr& c) {
                                     return make_store(act_bf, at(Expr(pr) + M, c), bf_zero);
                                   }))));
    prologue.push_back(make_seq(parts));
    a_index = [&](const std::vector<Expr>& batch, const Expr& t, const Expr& r, const Expr& kb, const Expr& j) {
      return with_batch(batch, {t * sixteen + r, kb * step + j});
    };
  } else if (plane) {
    // The plane's placeholder [N, C / 32, Y, X, 32] itself: src's index at the tile's
    // first row (x its plane position at y = 0, the window and the channels' block from
    // kb), flattened, plus the row's 32 elements (x 16 rows at 32 elements each).
    act_bf = plane->buffer;
    a_index = [&](const std::vector<Expr>& batch, const Expr& t, const Expr& r, const Expr& kb, const Expr& j) {
      const Expr tc = min(t, Expr(m_tiles - 1));
      VarMap m = unit;
      for (size_t i = 0; i < g.batch_axes.size(); ++i) m[axis_var(g.batch_axes[i], false).id()] = batch[i];
      unflatten(other_m, false, floordiv(tc, Expr(WT)), &m);
      m[axis_var(direct->y_axis, false).id()] = zero_i;
      m[axis_var(direct->row_axis, false).id()] = plane_start(floormod(tc, Expr(WT))) + r;
      Expr unused;
      k_at(kb, zero_i, &m, &unused);
      Expr f = zero_i;
      for (size_t x = 0; x < af_load->args.size(); ++x) f = f * Expr(plane->shape[x]) + substitute(af_load->args[x], m);
      return std::vector<Expr>{f + j};
    };
  } else {
    // P[src's other dims.., channels]: the channel dimensions last, flattened, padded to
    // 32; the row axis's dimension longer by the rows a partial last tile reads past it.
    const te::OpNode& src = *direct->src;
    const size_t nd = src.shape.size(), xd = static_cast<size_t>(direct->x_dim);
    const int64_t stride = direct->row_stride;
    // Merged: columns and channels one dimension, C per column, and a step's elements
    // more for the last step's positions past the window.
    const int64_t x_ext = flat ? src.shape[xd] : src.shape[xd] + (WT * 16 - W) * stride,
                  c_pad = merged >= 0 ? C : CC * KS;
    // Flat: y and x one dimension of the plane's positions, as long as the last tile's
    // reads reach (y at 0, x at its last row, the window's reach along both).
    const size_t yd = flat ? static_cast<size_t>(direct->y_dim) : nd;
    const int64_t yx_ext = flat ? std::max(src.shape[yd] * Wp, direct->y_reach * Wp + WT * 16 + direct->x_reach) : 0;
    std::vector<size_t> other_dims;
    for (size_t x = 0; x < nd; ++x)
      if (std::find(direct->channel_dims.begin(), direct->channel_dims.end(), static_cast<int>(x)) ==
          direct->channel_dims.end())
        other_dims.push_back(x);
    std::vector<Expr> p_shape;
    for (size_t x : other_dims) {
      if ((merged >= 0 || flat) && x == xd) continue;
      p_shape.push_back(Expr(x == yd ? yx_ext : x == xd ? x_ext : src.shape[x]));
    }
    p_shape.push_back(Expr(merged >= 0 ? x_ext * C + KS : c_pad));
    act_bf = make_buffer(src.name + "_amx_p", bf, p_shape, MemScope::Global);
    // src's value at indices idx (its body where it is a producer, the padding).
    auto src_value = [&](const std::vector<Expr>& idx) {
      if (src.is_placeholder) return load(src.buffer, idx);
      VarMap m;
      for (size_t x = 0; x < nd; ++x) m[src.axes[x].var.id()] = idx[x];
      return substitute(inline_stages(src.body, all), m);
    };
    std::vector<Var> ov, cv;
    for (size_t x : other_dims) ov.push_back(Var("amx.p" + std::to_string(x)));
    for (int x : direct->channel_dims) cv.push_back(Var("amx.pc" + std::to_string(x)));
    const size_t xi = static_cast<size_t>(std::find(other_dims.begin(), other_dims.end(), xd) - other_dims.begin());
    const size_t yi = static_cast<size_t>(std::find(other_dims.begin(), other_dims.end(), yd) - other_dims.begin());
    auto p_at = [&, xi, yi](const std::vector<Expr>& other, const Expr& cf) {
      std::vector<Expr> idx;
      for (size_t i = 0; i < other.size(); ++i) {
        if ((merged >= 0 || flat) && i == xi) continue;
        idx.push_back(flat && i == yi ? other[yi] * Expr(Wp) + other[xi] : other[i]);
      }
      idx.push_back(merged >= 0 ? other[xi] * Expr(C) + cf : cf);
      return idx;
    };
    // Loops over P's other dimensions (x's over x_extent), the first that has more than
    // one iteration (x's counts as having more) parallel where asked.
    auto other_loops = [&](Stmt body, const Expr& x_extent, bool parallel) {
      size_t par = 0;
      while (par + 1 < ov.size() && other_dims[par] != xd && src.shape[other_dims[par]] <= 1) ++par;
      for (size_t i = ov.size(); i-- > 0;)
        body = loop(ov[i], other_dims[i] == xd ? x_extent : Expr(src.shape[other_dims[i]]), body,
                    parallel && i == par ? ForKind::Parallel : ForKind::Serial);
      return body;
    };
    // Inside src: the channels (the last channel dimension in vectors); merged, a row's
    // columns and channels are one run of P (x C + c), and of src where they are its last
    // two dimensions (a first convolution's 3 channels): copied in vectors along the run,
    // not 3 elements at a time.
    const size_t nc = cv.size();
    std::vector<Stmt> parts;
    if (merged >= 0 && nc == 1) {
      const size_t cd = static_cast<size_t>(direct->channel_dims[0]);
      Stmt run = vector_chunks("amx.pxc", src.shape[xd] * C, [&](const Expr& f) {
        std::vector<Expr> idx(nd);
        for (size_t i = 0; i < ov.size(); ++i) idx[other_dims[i]] = ov[i];
        idx[xd] = floordiv(f, Expr(C));
        idx[cd] = floormod(f, Expr(C));
        std::vector<Expr> other(ov.begin(), ov.end());
        other[xi] = zero_i;
        return make_store(act_bf, p_at(other, f), narrowed(src_value(idx), bf));
      });
      parts.push_back(other_loops(run, Expr(int64_t{1}), true));
    } else {
      auto value_at = [&](const std::vector<Expr>& ch) {
        std::vector<Expr> idx(nd);
        for (size_t i = 0; i < ov.size(); ++i) idx[other_dims[i]] = ov[i];
        for (size_t i = 0; i < nc; ++i) idx[static_cast<size_t>(direct->channel_dims[i])] = ch[i];
        return src_value(idx);
      };
      // A padding producer, select(inside, v, c) with `inside` free of the channels: one
      // test per position around the channels' loops, each branch a plain copy (a stored
      // bfloat16 value widened to v and narrowed back moves as it is) or a fill, not a
      // widening, a select and a narrowing per vector.
      std::vector<Var> probe;
      std::vector<Expr> probe_ch;
      for (size_t i = 0; i < nc; ++i) {
        probe.push_back(Var("amx.probe" + std::to_string(i)));
        probe_ch.push_back(probe.back());
      }
      const Expr probed = value_at(probe_ch);
      Expr inside;
      if (probed.kind() == ExprKind::Select &&
          std::none_of(probe.begin(), probe.end(), [&](const Var& v) { return uses_var(probed.arg(0), v); }))
        inside = probed.arg(0);
      auto copy_of = [&](int branch) {
        Stmt copy =
            vector_chunks("amx.pcl", src.shape[static_cast<size_t>(direct->channel_dims.back())], [&](const Expr& cl) {
              std::vector<Expr> ch(cv.begin(), cv.end() - 1);
              ch.push_back(cl);
              Expr v = value_at(ch);
              if (branch > 0) v = v.arg(static_cast<size_t>(branch));
              return make_store(act_bf, p_at({ov.begin(), ov.end()}, flatten(channel_k, true, ch)),
                                simplify(narrowed(v, bf)));
            });
        for (size_t i = nc - 1; i-- > 0;)
          copy = loop(cv[i], Expr(src.shape[static_cast<size_t>(direct->channel_dims[i])]), copy);
        return copy;
      };
      Stmt copy = inside.defined() ? make_if(inside, copy_of(1), copy_of(2)) : copy_of(0);
      parts.push_back(other_loops(copy, Expr(src.shape[xd]), true));
    }
    if (c_pad > C)
      parts.push_back(
          other_loops(vector_chunks("amx.pcp", c_pad - C,
                                    [&](const Expr& c) {
                                      return make_store(act_bf, p_at({ov.begin(), ov.end()}, c + C), bf_zero);
                                    }),
                      Expr(src.shape[xd]), false));
    if (merged >= 0) {
      // The columns past src and the step's elements after them: zero.
      std::vector<Expr> other(ov.begin(), ov.end());
      other[xi] = Expr(src.shape[xd]);
      const int64_t tail = (x_ext - src.shape[xd]) * C + KS;
      Stmt z =
          vector_chunks("amx.pxp", tail, [&](const Expr& c) { return make_store(act_bf, p_at(other, c), bf_zero); });
      // One iteration of x's loop: the tail starts at its column src.shape[xd].
      parts.push_back(other_loops(z, Expr(int64_t{1}), false));
    } else if (flat) {
      // The plane's positions past src's (read by the last tiles, never stored): zero,
      // written at y = 0 of the loops over the other dimensions.
      std::vector<Expr> other(ov.begin(), ov.end());
      other[yi] = Expr(src.shape[yd]);
      Stmt z = guarded(eq(Expr(ov[yi]), Expr(int64_t{0})), vector_chunks("amx.pyp", c_pad, [&](const Expr& c) {
                         return make_store(act_bf, p_at(other, c), bf_zero);
                       }));
      parts.push_back(other_loops(z, Expr(yx_ext - src.shape[yd] * Wp), false));
    } else if (x_ext > src.shape[xd]) {
      // The columns past src (read by a partial last tile's rows, never stored): zero.
      std::vector<Expr> other(ov.begin(), ov.end());
      other[xi] = Expr(ov[xi]) + src.shape[xd];
      parts.push_back(other_loops(
          vector_chunks("amx.pxp", c_pad, [&](const Expr& c) { return make_store(act_bf, p_at(other, c), bf_zero); }),
          Expr(x_ext - src.shape[xd]), false));
    }
    prologue.push_back(make_seq(parts));
    // By value what this block made (the lambda outlives it).
    a_index = [&, other_dims, p_at](const std::vector<Expr>& batch, const Expr& t, const Expr& r, const Expr& kb,
                                    const Expr& j) {
      // A partial last panel's tiles past the rows read the last tile (never stored).
      const Expr tc = min(t, Expr(m_tiles - 1));
      VarMap m = unit;
      for (size_t i = 0; i < g.batch_axes.size(); ++i) m[axis_var(g.batch_axes[i], false).id()] = batch[i];
      unflatten(other_m, false, floordiv(tc, Expr(WT)), &m);
      // Flat: the plane's position as x at y = 0 (p_at folds y and x into one index).
      if (flat) m[axis_var(direct->y_axis, false).id()] = zero_i;
      m[axis_var(direct->row_axis, false).id()] = floormod(tc, Expr(WT)) * sixteen + r;
      Expr unused;
      k_at(kb, zero_i, &m, &unused);
      if (merged >= 0) m[axis_var(merged, true).id()] = zero_i;  // the step's elements carry it
      std::vector<Expr> other;
      for (size_t x : other_dims) other.push_back(substitute(af_load->args[x], m));
      return p_at(other, floormod(kb, Expr(CC)) * step + j);
    };
  }

  // The parallel loop over (batch axes, column panels, row panels).
  std::vector<Expr> pext;
  for (int x : g.batch_axes) pext.push_back(Expr(axis_extent(x, false)));
  pext.push_back(np);
  pext.push_back(mp);
  ParallelAxes par = parallel_axes("amx.p", pext, true);
  const size_t nb = g.batch_axes.size();
  const std::vector<Expr> batch(par.index.begin(), par.index.begin() + static_cast<std::ptrdiff_t>(nb));
  const Expr pn = par.index[nb], pm = par.index[nb + 1];
  const DType acc_t = int8 ? DType::i32() : DType::f32();
  Buffer acc = make_buffer(a.name + "_acc", acc_t, simplified({TM * sixteen, TN * sixteen}), MemScope::Local);
  Var ia("amx.i"), ta("amx.tj"), ja("amx.j");
  Stmt init = loop(ia, TM * sixteen,
                   loop(ta, TN,
                        loop(ja, sixteen, make_store(acc, {ia, Expr(ta) * sixteen + ja}, make_const(acc_t, 0)),
                             ForKind::Vectorized)));
  Stmt compute = amx_product(  // acc: zeroed by init
      acc, zero_i, KB, TM, TN,
      [&](const Expr& tm, const Expr& r, const Expr& kb, const Expr& j) {
        return load(act_bf, a_index(batch, pm * TM + tm, r, kb, j));
      },
      [&](const Expr& tn, const Expr& kb, const Expr& kp, const Expr& c, const Expr& q) {
        return load(packed, with_batch(batch, {pn * TN + tn, kb * sixteen + kp, c, q}));
      },
      int8);
  Var tm("amx.tm"), tn("amx.tn"), r("amx.r"), c("amx.c"), run("amx.run");
  const Expr tile = pm * TM + tm;
  // Write-back: a row's m axes from its tile and row; a tile's columns: vec at the tile's
  // offset within it plus the lane, the other n axes from the tile (in runs of vec's
  // extent, the lane c of run `run` its column run * vec_extent + c).
  const Expr col = g.vec_runs ? Expr(run) * Expr(vec_extent) + c : Expr(c);
  const std::vector<Expr> acc_idx = {Expr(tm) * sixteen + r, Expr(tn) * sixteen + col};
  const Expr n_tile0 = (pn * TN + tn) * sixteen, n_full = n_tile0 + col;
  VarMap om = unit;
  for (size_t i = 0; i < nb; ++i) om[axis_var(g.batch_axes[i], false).id()] = par.index[i];
  Expr row_inside;
  if (a_placeholder) {
    unflatten(g.m_axes, false, row0(tile) + r, &om);
    row_inside = tile < Expr(m_tiles);
  } else if (!direct) {
    const Expr m_full = tile * sixteen + r;
    unflatten(g.m_axes, false, m_full, &om);
    row_inside = m_full < Expr(M);
  } else {
    unflatten(other_m, false, floordiv(tile, Expr(WT)), &om);
    const Expr w0 = flat ? plane_start(floormod(tile, Expr(WT))) : floormod(tile, Expr(WT)) * sixteen, w = w0 + r;
    if (flat) {
      // The tile's first row divided once: with Wp >= 16 its 16 rows cross at most one
      // end of a plane row (x wraps once), so a row's (y, x) is the first's plus r with
      // one compare, not a division per row.
      const Expr xs = floormod(w0, Expr(Wp)) + r, wrap = xs >= Expr(Wp);
      const Expr y = Wp >= 16 ? floordiv(w0, Expr(Wp)) + select(wrap, Expr(int64_t{1}), zero_i) : floordiv(w, Expr(Wp));
      const Expr x = Wp >= 16 ? select(wrap, xs - Expr(Wp), xs) : floormod(w, Expr(Wp));
      om[axis_var(direct->y_axis, false).id()] = y;
      om[axis_var(direct->row_axis, false).id()] = x;
      row_inside = logical_and(tile < Expr(m_tiles), logical_and(y < Expr(H), x < Expr(W)));
    } else {
      om[axis_var(direct->row_axis, false).id()] = w;
      row_inside = logical_and(tile < Expr(m_tiles), w < Expr(W));
    }
  }
  if (g.n_axes.size() == 1) {
    om[axis_var(s.vec_axis, false).id()] = n_full;
  } else if (g.straddles) {
    // A tile's columns straddle values of the other column axes (the anchor's last ones,
    // sched::amx_form: contiguous in the output): each lane's own (the axes of one
    // iteration 0, so that the output's index folds to one linear in the lane).
    std::vector<int> wide;
    for (int x : g.n_axes)
      if (axis_extent(x, false) > 1) wide.push_back(x);
    unflatten(wide, false, n_full, &om);
  } else if (g.vec_runs) {
    // A tile's columns are 16 / vec_extent runs of vec's values (an output blocked by 8
    // channels): per run, the other column axes from the run's first column, vec the
    // lane, so that each run's index is linear in its lanes.
    std::vector<int> outer_n(g.n_axes.begin(), g.n_axes.end() - 1);
    unflatten(outer_n, false, floordiv(n_tile0 + Expr(run) * Expr(vec_extent), Expr(vec_extent)), &om);
    om[axis_var(s.vec_axis, false).id()] = Expr(c);
  } else {
    std::vector<int> outer_n(g.n_axes.begin(), g.n_axes.end() - 1);
    unflatten(outer_n, false, floordiv(n_tile0, Expr(vec_extent)), &om);
    om[axis_var(s.vec_axis, false).id()] = floormod(n_tile0, Expr(vec_extent)) + c;
  }
  std::vector<Expr> out_idx(ns);
  for (size_t x = 0; x < ns; ++x) {
    auto it = om.find(a.axes[x].var.id());
    out_idx[x] = it != om.end() ? it->second : zero_i;
  }
  Expr value = apply_epilogue(info, load(acc, acc_idx), out_idx);
  Stmt wb = make_store(out_buf, out_idx, value);
  if (g.vec_runs) {
    // N is a multiple of vec_extent: a run lies inside or past it whole.
    wb = loop(c, Expr(vec_extent), wb, ForKind::Vectorized);
    wb = loop(run, Expr(16 / vec_extent), guarded(N % 16 != 0 ? n_full - c < Expr(N) : Expr(), wb));
  } else {
    wb = loop(c, sixteen, guarded(N % 16 != 0 ? n_full < Expr(N) : Expr(), wb), ForKind::Vectorized);
  }
  wb = loop(r, sixteen, guarded(row_inside, wb));
  wb = loop(tm, TM, loop(tn, TN, guarded(n_tile0 < Expr(N), wb)));
  Stmt body = make_allocate(acc, make_seq({init, compute, wb}));
  prologue.push_back(par.wrap(body));
  Stmt whole = make_seq(prologue);
  if (!a_placeholder && !plane) whole = make_allocate(act_bf, whole);
  return make_allocate(packed, whole);
}

// ---- attention on AMX-BF16 tiles (SketchRule::CpuAmx, Sketch::amx_attention) ----

// A matrix of R rows (the product's k) by C columns as the B operand of AMX tiles:
// dst[at(t, kp, l, q)] = bf16(src(2 kp + q, 16 t + l)), zero
// past R rows and C columns, for t < nt tiles and kp < KR x 16 pairs (src(r, c) a load
// of row r, column c, float32 or bfloat16). Where two rows and 16 columns are inside, a
// vectorized loop over a pair row's 32 outputs (lane e reads column e / 2 of row 2 kp +
// e % 2: two contiguous loads the backend interleaves), the loop over those tiles of
// `t_kind`; the edges one element at a time.
Stmt pack_pairs(const std::function<Expr(const Expr&, const Expr&)>& src, const Buffer& dst,
                const std::function<std::vector<Expr>(const Expr&, const Expr&, const Expr&, const Expr&)>& at,
                int64_t R, int64_t C, const Expr& nt, int64_t KR, ForKind t_kind) {
  const DType bf = DType::bf16();
  const Expr two(int64_t{2}), sixteen(int64_t{16});
  const int64_t full_t = C / 16, full_kp = R / 2;
  auto value = [&](const Expr& t, const Expr& kp, const Expr& l, const Expr& q, bool edge) {
    const Expr r = Expr(kp) * two + q, c = Expr(t) * sixteen + l;
    if (!edge) return cast(bf, src(r, c));
    const Expr inside = logical_and(r < Expr(R), c < Expr(C));
    Expr x = src(min(r, Expr(R - 1)), min(c, Expr(C - 1)));
    if (x.dtype().is_bf16()) x = cast(DType::f32(), x);  // a stored activation: selected as float32
    return cast(bf, select(inside, x, make_const(DType::f32(), 0)));
  };
  std::vector<Stmt> parts;
  if (full_t > 0 && full_kp > 0) {
    Var t("pk.t"), kp("pk.kp"), e("pk.e");
    const Expr l = floordiv(Expr(e), two), q = floormod(Expr(e), two);
    parts.push_back(loop(t, Expr(full_t),
                         loop(kp, Expr(full_kp),
                              loop(e, Expr(int64_t{32}), make_store(dst, at(t, kp, l, q), value(t, kp, l, q, false)),
                                   ForKind::Vectorized)),
                         t_kind));
  }
  // The edges: pairs past the full ones in the full tiles, then the tiles past them.
  auto edge = [&](const Expr& t0, const Expr& nts, const Expr& kp0, const Expr& nkp, const std::string& tag) {
    Var t("pk" + tag + ".t"), kp("pk" + tag + ".kp"), l("pk" + tag + ".l"), q("pk" + tag + ".q");
    const Expr tt = Expr(t) + t0, kk = Expr(kp) + kp0;
    return loop(
        t, nts,
        loop(kp, nkp, loop(l, sixteen, loop(q, two, make_store(dst, at(tt, kk, l, q), value(tt, kk, l, q, true))))));
  };
  if (KR * 16 > full_kp && full_t > 0)
    parts.push_back(edge(Expr(int64_t{0}), Expr(full_t), Expr(full_kp), Expr(KR * 16 - full_kp), "k"));
  parts.push_back(edge(Expr(full_t), simplify(nt - Expr(full_t)), Expr(int64_t{0}), Expr(KR * 16), "n"));
  return make_seq(parts);
}

// pack_pairs of src[b][r][c] into dst[b][t][kp][l][q], inside a loop over b (the caller's).
Stmt pack_b_pairs(const Buffer& src, const Buffer& dst, const Expr& b, int64_t R, int64_t C, const Expr& nt,
                  int64_t KR) {
  return pack_pairs(
      [&](const Expr& r, const Expr& c) {
        return load(src, {b, r, c});
      },
      dst,
      [&](const Expr& t, const Expr& kp, const Expr& l, const Expr& q) {
        return std::vector<Expr>{b, t, kp, l, q};
      },
      R, C, nt, KR, ForKind::Serial);
}

// The attention operator (sched::amx_attention_form) with both products on AMX tiles:
// per batch b, q copied to bfloat16 rows [L padded to whole panels][D padded to 32], k
// and v packed as B operands (pack_b_pairs: k's rows D by columns S, v's rows S by
// columns E). One parallel loop over (b, panels of TM query tiles of 16 rows); each
// iteration computes its rows' scores on tiles into a float32 row block [TM x 16][S
// padded to whole groups of TN tiles] (groups of TN column tiles, k = D), the logits
// (the operator's scale and mask, as the task computes them) and their maximum per row
// in place, the exponentials rounded to bfloat16 into the A block [TM x 16][S padded to
// 32] and their sum (of the rounded values, so that the weights sum to 1), the weighted
// values on tiles (groups of TN column tiles of E, k = S) and the quotient by the sum.
// Rows past L compute the last row again and are not stored.
Stmt build_cpu_amx_attention(const ops::OpGraph& task, const Sketch& s, const KnobValues& k, const Buffer& out_buf) {
  GenericInfo info = analyze_generic(task);
  std::optional<AmxAttention> form = amx_attention_form(info);
  BASIN_CHECK(form) << "sketch " << s.name << ": the task is not an attention";
  const AmxAttention& f = *form;
  const int64_t B = f.B, L = f.L, D = f.D, S = f.S, E = f.E;
  const int64_t LT = (L + 15) / 16, ST = (S + 15) / 16, ET = (E + 15) / 16, KD = (D + 31) / 32, KS = (S + 31) / 32;
  const Expr one(int64_t{1}), zero_i(int64_t{0}), two(int64_t{2}), sixteen(int64_t{16}), k32(int64_t{32});
  const DType bf = DType::bf16(), f32 = DType::f32();
  const Expr TM = k.factors[0][0], TN = k.factors[1][0];
  const Expr mp = ceil_div(Expr(LT), TM), rows = simplify(TM * sixteen);
  const Expr SN = simplify(ceil_div(Expr(ST), TN) * TN), EN = simplify(ceil_div(Expr(ET), TN) * TN);

  // The packed inputs, per batch.
  Buffer qb = make_buffer(f.q->name + "_amx_a", bf, simplified({Expr(B), mp * rows, Expr(KD * 32)}), MemScope::Global);
  Buffer kb_buf =
      make_buffer(f.k->name + "_amx_b", bf, simplified({Expr(B), SN, Expr(KD * 16), sixteen, two}), MemScope::Global);
  Buffer vb_buf =
      make_buffer(f.v->name + "_amx_b", bf, simplified({Expr(B), EN, Expr(KS * 16), sixteen, two}), MemScope::Global);
  Stmt pack;
  {
    Var b("amx.pb"), l("amx.pl"), pr("amx.pr");
    std::vector<Stmt> per_b;
    Stmt q_rows = loop(l, Expr(L), vector_chunks("amx.pd", D, [&](const Expr& d) {
                         return make_store(qb, {b, l, d}, cast(bf, load(f.q->buffer, {b, l, d})));
                       }));
    per_b.push_back(q_rows);
    if (KD * 32 > D)
      per_b.push_back(loop(l, Expr(L), vector_chunks("amx.pdp", KD * 32 - D, [&](const Expr& d) {
                             return make_store(qb, {b, l, d + D}, cast(bf, make_const(f32, 0)));
                           })));
    per_b.push_back(loop(pr, simplify(mp * rows - Expr(L)), vector_chunks("amx.pdr", KD * 32, [&](const Expr& d) {
                           return make_store(qb, {b, Expr(pr) + L, d}, cast(bf, make_const(f32, 0)));
                         })));
    per_b.push_back(pack_b_pairs(f.k->buffer, kb_buf, b, D, S, SN, KD));
    per_b.push_back(pack_b_pairs(f.v->buffer, vb_buf, b, S, E, EN, KS));
    pack = loop(b, Expr(B), make_seq(per_b), ForKind::Parallel);
  }

  ParallelAxes par = parallel_axes("amx.att", {Expr(B), mp}, true);
  const Expr b = par.index[0], pm = par.index[1];
  Buffer sc = make_buffer("attention_scores_amx", f32, simplified({rows, SN * sixteen}), MemScope::Local);
  Buffer pb = make_buffer("attention_exp_amx", bf, simplified({rows, Expr(KS * 32)}), MemScope::Local);
  Buffer oc = make_buffer("attention_values_amx", f32, simplified({rows, EN * sixteen}), MemScope::Local);
  Buffer mx = make_buffer("attention_max_amx", f32, simplified({rows}), MemScope::Local);
  Buffer sm = make_buffer("attention_sum_amx", f32, simplified({rows}), MemScope::Local);
  Buffer part = make_buffer("attention_lanes", f32, {sixteen}, MemScope::Local);

  auto zero_block = [&](const Buffer& buf, const Expr& width, const std::string& tag) {
    Var i("amx.z" + tag + ".i"), j("amx.z" + tag + ".j"), c("amx.z" + tag + ".c");
    return loop(
        i, rows,
        loop(j, simplify(floordiv(width, sixteen)),
             loop(c, sixteen, make_store(buf, {i, Expr(j) * sixteen + c}, make_const(f32, 0)), ForKind::Vectorized)));
  };
  // An AMX product into acc's groups of TN column tiles (acc zeroed before): A tiles
  // of a_buf at rows tm x 16 + r, k step kb, position j; B tiles of this batch's b_pack;
  // ksteps steps of 32.
  auto amx_groups = [&](const Buffer& acc, const Expr& groups, int64_t ksteps, const Buffer& a_buf,
                        const std::function<std::vector<Expr>(const Expr&, const Expr&, const Expr&)>& a_idx,
                        const Buffer& b_pack, const std::string& tag) {
    Var g("amx." + tag + ".g");
    const Expr col0 = Expr(g) * TN;
    Stmt product = amx_product(  // acc: zeroed before
        acc, col0, ksteps, TM, TN,
        [&](const Expr& tm, const Expr& r, const Expr& kb, const Expr& j) {
          return load(a_buf, a_idx(tm * sixteen + r, kb, j));
        },
        [&](const Expr& tn, const Expr& kb, const Expr& kp, const Expr& c, const Expr& q) {
          return load(b_pack, {b, col0 + tn, kb * sixteen + kp, c, q});
        });
    return loop(g, groups, product);
  };
  const Expr row0 = pm * rows;
  Stmt scores = amx_groups(
      sc, simplify(floordiv(SN, TN)), KD, qb,
      [&](const Expr& row, const Expr& kbv, const Expr& j) {
        return std::vector<Expr>{b, row0 + row, kbv * k32 + j};
      },
      kb_buf, "s");

  // The softmax of row r: the logits as the task computes them (its max stage's body,
  // the scores read from sc), rows past L reading the last row's mask.
  Var r("amx.row");
  const Expr row = min(row0 + r, Expr(L - 1));
  auto logit = [&](const Expr& col) {
    const te::OpNode& m = *f.max;
    VarMap vm = {{m.axes[0].var.id(), b},
                 {m.axes[1].var.id(), row},
                 {m.axes[2].var.id(), zero_i},
                 {m.reduce_axes[0].var.id(), col}};
    Expr x = substitute(inline_stages(m.body, info.inlined), vm);
    return retarget_loads(x, f.scores->buffer.get(), sc, [&](const std::vector<Expr>& idx) {
      return std::vector<Expr>{Expr(r), idx[2]};
    });
  };
  const Expr neg_inf = make_const(f32, -INFINITY), zero_f = make_const(f32, 0);
  // Over the row's S columns: body(col, lane) in vectors of 16 (lane the vector's), the
  // rest at lane 0.
  auto over_row = [&](const std::string& tag, const std::function<Stmt(const Expr&, const Expr&)>& body) {
    std::vector<Stmt> parts;
    Var o("amx." + tag + ".o"), c("amx." + tag + ".c"), t("amx." + tag + ".t");
    if (S >= 16)
      parts.push_back(loop(o, Expr(S / 16), loop(c, sixteen, body(Expr(o) * sixteen + c, c), ForKind::Vectorized)));
    if (S % 16) parts.push_back(loop(t, Expr(S % 16), body(Expr(t) + S / 16 * 16, zero_i)));
    return make_seq(parts);
  };
  auto lanes_init = [&](const Expr& v) {
    Var c("amx.li");
    return loop(c, sixteen, make_store(part, {c}, v), ForKind::Vectorized);
  };
  // acc[r] = combine over the 16 lanes of part.
  auto lanes_fold = [&](const Buffer& acc, const Expr& init, const std::function<Expr(Expr, Expr)>& combine) {
    Var c("amx.lf");
    return make_seq(
        {make_store(acc, {r}, init), loop(c, sixteen, make_store(acc, {r}, combine(load(acc, {r}), load(part, {c}))))});
  };
  std::vector<Stmt> soft;
  soft.push_back(lanes_init(neg_inf));
  soft.push_back(over_row("x", [&](const Expr& col, const Expr& lane) {
    const Expr x = logit(col);
    return make_seq(
        {make_store(sc, {r, col}, x), make_store(part, {lane}, max(load(part, {lane}), load(sc, {r, col})))});
  }));
  soft.push_back(lanes_fold(mx, neg_inf, [](Expr a, Expr c) { return max(a, c); }));
  soft.push_back(lanes_init(zero_f));
  soft.push_back(over_row("e", [&](const Expr& col, const Expr& lane) {
    const Expr e = cast(bf, call(MathFn::exp, {load(sc, {r, col}) - load(mx, {r})}));
    return make_seq(
        {make_store(pb, {r, col}, e), make_store(part, {lane}, load(part, {lane}) + cast(f32, load(pb, {r, col})))});
  }));
  soft.push_back(lanes_fold(sm, zero_f, [](Expr a, Expr c) { return a + c; }));
  if (KS * 32 > S) {
    Var c("amx.ep");
    soft.push_back(loop(c, Expr(KS * 32 - S), make_store(pb, {r, Expr(c) + S}, cast(bf, zero_f))));
  }
  Stmt softmax = loop(r, rows, make_seq(soft));

  Stmt values = amx_groups(
      oc, simplify(floordiv(EN, TN)), KS, pb,
      [&](const Expr& rr, const Expr& kbv, const Expr& j) {
        return std::vector<Expr>{rr, kbv * k32 + j};
      },
      vb_buf, "v");
  // The quotients of the rows inside L.
  Var wr("amx.wr");
  const Expr wrow = row0 + wr;
  Stmt write = loop(
      wr, rows,
      guarded(wrow < Expr(L),
              vector_chunks(
                  "amx.we", E,
                  [&](const Expr& e) {
                    const Expr q = load(oc, {wr, e}) / load(sm, {wr});
                    return make_store(out_buf, {b, wrow, e}, q.dtype() == out_buf->dtype ? q : cast(out_buf->dtype, q));
                  })));
  Stmt body =
      make_seq({zero_block(sc, SN * sixteen, "s"), scores, softmax, zero_block(oc, EN * sixteen, "v"), values, write});
  for (const Buffer& buf : {part, sm, mx, oc, pb, sc}) body = make_allocate(buf, body);
  Stmt all = make_seq({pack, par.wrap(body)});
  for (const Buffer& buf : {vb_buf, kb_buf, qb}) all = make_allocate(buf, all);
  return all;
}

// ---- the generic rule ----

// Loops over axes[from..]: every axis its own variable, the last one split by `factor`
// into an outer and an inner loop. `m` maps each axis variable to its index expression.
struct AxisLoops {
  std::vector<Var> plain;  // all axes but the last
  Var outer, inner;
  Expr factor, outer_extent;
  Expr guard;  // the last axis's index < its extent, where its last tile is partial
};
AxisLoops split_last(const std::vector<te::IterVar>& axes, size_t from, const SplitSpec* split, const Expr& factor,
                     const char* outer_suffix, const char* inner_suffix, bool structure_form, VarMap& m) {
  AxisLoops r;
  for (size_t d = from; d < axes.size(); ++d) {
    const te::IterVar& a = axes[d];
    if (d + 1 < axes.size()) {
      r.plain.push_back(Var(a.var.name()));
      m[a.var.id()] = r.plain.back();
      continue;
    }
    r.factor = factor;
    r.outer = Var(a.var.name() + outer_suffix);
    r.inner = Var(a.var.name() + inner_suffix);
    r.outer_extent = tile_count(*split, factor);
    Expr index = Expr(r.outer) * factor + r.inner;
    m[a.var.id()] = index;
    if (needs_guard(*split, {factor}, structure_form)) r.guard = index < Expr(a.extent);
  }
  return r;
}

Stmt build_generic(const ops::OpGraph& task, const Sketch& s, const KnobValues& k,
                   const std::unordered_map<const te::OpNode*, Buffer>& outputs, bool fuse) {
  GenericInfo info = analyze_generic(task);
  const int K = s.prefix;
  const bool gpu = s.rule == SketchRule::GpuRows;
  const bool one_injective = info.stages.size() == 1 && info.stages[0]->reduce_axes.empty();
  BASIN_CHECK(K <= info.max_prefix || (gpu && one_injective))
      << "sketch " << s.name << " shares more axes than the task allows";
  std::vector<Expr> ext;
  for (int d = 0; d < K; ++d) ext.push_back(Expr(task.outputs[0].shape()[d]));
  size_t ki = 0;
  // Tiles of rows: the parallel loop runs over the tiles of the last shared axis, each
  // stage over the tile's rows (Sketch::tile_rows).
  const bool tiled = s.tile_rows;
  BASIN_CHECK(!tiled || (K > 0 && !gpu)) << "sketch " << s.name << " tiles rows without shared CPU rows";
  Expr tile;
  const SplitSpec* tile_split = tiled ? &s.splits[ki] : nullptr;
  if (tiled) {
    tile = k.factors[ki++][0];
    ext.back() = tile_count(*tile_split, tile);
  }
  ParallelAxes rows;
  if (gpu) {
    // The rows fused into one index: blockIdx.x * T + threadIdx.x, T threads per block
    // (the first knob), the last block's rows past the end skipped.
    Var b("blockIdx"), t("threadIdx");
    Expr threads = k.factors[ki++][0];
    Expr total = product(ext);
    Expr r = Expr(b) * threads + t;
    rows.index = unfuse_index(r, ext);
    rows.wrap = [=](Stmt body) {
      Stmt inner = make_if(r < total, std::move(body));
      return loop(b, floordiv(total + threads - Expr(int64_t{1}), threads),
                  loop(t, threads, std::move(inner), ForKind::ThreadX), ForKind::BlockX);
    };
  } else {
    rows = parallel_axes("rows", ext, fuse);
  }
  const std::vector<Expr>& q = rows.index;
  // Where each intermediate stage lives: a per-row local buffer (shared prefix) or a
  // global one.
  std::unordered_map<const te::OpNode*, Buffer> where;
  std::vector<Buffer> locals, globals;
  for (const te::Op& st : info.stages) {
    auto o = outputs.find(st.get());
    if (o != outputs.end()) {
      where[st.get()] = o->second;
    } else if (K > 0) {
      std::vector<Expr> shape;
      if (tiled) shape.push_back(tile);
      for (size_t d = K; d < st->shape.size(); ++d) shape.push_back(Expr(st->shape[d]));
      if (shape.empty()) shape.push_back(Expr(int64_t{1}));
      where[st.get()] = make_buffer(st->name + "_row", st->buffer->dtype, simplified(shape), MemScope::Local);
      locals.push_back(where[st.get()]);
    } else {
      where[st.get()] = st->buffer;
      globals.push_back(st->buffer);
    }
  }
  // A stage's row within the tile (tiled sketches): the loop each stage runs over the
  // tile's rows, set per stage below.
  Var row_in_tile;
  auto local_index = [&](const te::OpNode* st, const std::vector<Expr>& idx) {
    if (outputs.count(st) || K == 0) return idx;
    std::vector<Expr> r;
    if (tiled) r.push_back(row_in_tile);
    r.insert(r.end(), idx.begin() + K, idx.end());
    if (r.empty()) r.push_back(Expr(int64_t{0}));
    return r;
  };

  std::vector<Stmt> nests;
  for (size_t j = 0; j < info.stages.size(); ++j) {
    const te::OpNode& st = *info.stages[j];
    int rank = static_cast<int>(st.axes.size());
    VarMap m;
    std::vector<Expr> idx;
    if (tiled) row_in_tile = Var(st.name + ".t");
    for (int d = 0; d < K; ++d) {
      // A tile's row past the last (a partial last tile) recomputes the last row.
      Expr r = q[d];
      if (tiled && d == K - 1) {
        r = q[d] * tile + row_in_tile;
        if (tile_split->guarded) r = min(r, Expr(tile_split->extent - 1));
      }
      m[st.axes[d].var.id()] = r;
      idx.push_back(r);
    }
    // The free axes after the prefix and the reduction axes: each its own loop, the
    // last one of each split by its knob (vector lanes; inner reduction).
    const SplitSpec* vs = rank > K ? &s.splits[ki] : nullptr;
    AxisLoops sp = split_last(st.axes, K, vs, vs ? k.factors[ki++][0] : Expr(), ".o", ".v", !fuse, m);
    size_t nr = st.reduce_axes.size();
    const SplitSpec* rs = nr > 0 ? &s.splits[ki] : nullptr;
    AxisLoops rd = split_last(st.reduce_axes, 0, rs, rs ? k.factors[ki++][0] : Expr(), ".o", ".i", !fuse, m);
    for (int d = K; d < rank; ++d) idx.push_back(m[st.axes[d].var.id()]);
    const std::vector<Var>& rest = sp.plain;
    const std::vector<Var>& red = rd.plain;
    Expr body = inline_stages(st.body, info.inlined);
    for (const te::Op& prev : info.stages) {
      if (prev.get() == &st) break;
      const te::OpNode* pn = prev.get();
      body = retarget_loads(body, pn->buffer.get(), where[pn],
                            [&](const std::vector<Expr>& i) { return local_index(pn, i); });
    }
    body = substitute(body, m);
    const Buffer& target = where[&st];
    std::vector<Expr> tidx = local_index(&st, idx);
    Stmt inner;
    // A reduction with no free element after the rows (a row's max or sum: softmax, the
    // norms, pooling over a whole row; the sketch marks its reduction split vectorized)
    // vectorizes its inner reduction loop instead: a vector of partial results over the
    // lanes, combined at the end.
    const bool lanes_reduce = rs && rs->vectorized;
    const Expr identity = nr > 0 ? te::reduce_identity(st.reduce, target->dtype) : Expr();
    // acc[at] combined with the body over every reduction point, the inner split's loop
    // of the given kind.
    // Over the tile's rows: `body` repeated for each.
    auto per_row = [&](Stmt body) { return tiled ? loop(row_in_tile, tile, std::move(body)) : body; };
    auto reduction = [&](const Buffer& acc, const std::vector<Expr>& at, ForKind inner_kind) {
      Stmt upd = make_store(acc, at, te::reduce_combine(st.reduce, load(acc, at), body));
      // A tile's rows inside the reduction loops when a vector of free elements per row
      // is accumulated: what they read alike is loaded once per tile.
      if (!lanes_reduce) upd = per_row(upd);
      upd = loop(rd.outer, rd.outer_extent, loop(rd.inner, rd.factor, guarded(rd.guard, upd), inner_kind));
      for (size_t r = red.size(); r-- > 0;) upd = loop(red[r], Expr(st.reduce_axes[r].extent), upd);
      return upd;
    };
    if (nr == 0) {
      inner = make_store(target, tidx, body);
    } else if (lanes_reduce) {
      Buffer part = make_buffer(st.name + "_lanes", target->dtype, {rd.factor}, MemScope::Local);
      Var h(st.name + ".h");
      Stmt init = loop(rd.inner, rd.factor, make_store(part, {rd.inner}, identity), ForKind::Vectorized);
      Stmt fold = loop(h, rd.factor,
                       make_store(target, tidx, te::reduce_combine(st.reduce, load(target, tidx), load(part, {h}))));
      inner = make_allocate(part, make_seq({init, reduction(part, {rd.inner}, ForKind::Vectorized),
                                            make_store(target, tidx, identity), fold}));
    } else {
      inner = make_seq({per_row(make_store(target, tidx, identity)), reduction(target, tidx, ForKind::Serial)});
    }
    // An elementwise stage, or a row's own reduction, runs row after row.
    if (nr == 0 || lanes_reduce) inner = per_row(inner);
    bool has_rest = rank > K;
    if (has_rest) {
      inner = loop(sp.outer, sp.outer_extent,
                   loop(sp.inner, sp.factor, guarded(sp.guard, inner),
                        gpu || lanes_reduce ? ForKind::Serial : ForKind::Vectorized));
      for (size_t r = rest.size(); r-- > 0;) inner = loop(rest[r], Expr(st.axes[K + r].extent), inner);
    }
    if (K == 0 && has_rest) {
      // The outermost spatial loop runs in parallel.
      Stmt outer = inner;
      inner = make_for(outer->var, outer->min, outer->extent, ForKind::Parallel, outer->body[0]);
    }
    nests.push_back(inner);
  }
  Stmt body = make_seq(nests);
  for (const Buffer& b : locals) body = make_allocate(b, body);
  body = make_pragma(kUnrollPragma, k.unroll, body);
  if (K > 0) body = rows.wrap(body);
  for (const Buffer& b : globals) body = make_allocate(b, body);
  return body;
}

// ---- the GPU tiling rule ----

// One block per output tile, its threads in phases separated by barriers: each phase
// is a ThreadX loop (every thread runs its own iteration; the interpreter runs them
// one after another, which the barriers make equivalent). The accumulator is a Local
// buffer allocated outside the thread loops with the thread index as its first
// dimension: each thread's registers (the CUDA printer drops that dimension).
//
//   for blockIdx: alloc shared tiles, acc[threads, V..., I...]
//     threads: acc = identity
//     for r0 (each reduction axis's outer part):
//       threads: cooperative load of each cached input's tile (strided by the threads)
//       barrier
//       threads: for r1: for v: for i: acc[t, v, i] += body (cached inputs from shared)
//       barrier
//     threads: for v: for i: out[...] = epilogue(acc[t, v, i])
Stmt build_gpu_tile(const ops::OpGraph& task, const Sketch& s, const KnobValues& k, const Buffer& out_buf) {
  AnchorInfo info = *analyze_anchor(task);
  const te::OpNode& a = *info.anchor;
  size_t ns = a.axes.size(), nr = a.reduce_axes.size();
  const Expr one(int64_t{1});
  // Per spatial axis: blocks, vthreads, threads, register tile.
  std::vector<Expr> nb(ns), nv(ns), nt(ns), ni(ns), tile(ns + nr);
  for (size_t i = 0; i < ns; ++i) {
    nv[i] = k.factors[i][0];
    nt[i] = k.factors[i][1];
    ni[i] = k.factors[i][2];
    tile[i] = nv[i] * nt[i] * ni[i];
    nb[i] = floordiv(Expr(a.axes[i].extent), tile[i]);
  }
  std::vector<Expr> r1(nr), r0n(nr);
  for (size_t j = 0; j < nr; ++j) {
    r1[j] = k.factors[ns + j][0];
    tile[ns + j] = r1[j];
    r0n[j] = floordiv(Expr(a.reduce_axes[j].extent), r1[j]);
  }
  Expr threads = simplify(product(nt)), blocks = simplify(product(nb));
  Var bx("blockIdx");
  std::vector<Expr> b = unfuse_index(bx, nb);
  std::vector<Var> r0(nr);
  for (size_t j = 0; j < nr; ++j) r0[j] = Var(s.splits[ns + j].name + ".0");
  // The tile's first index along each axis.
  std::vector<Expr> base(ns + nr);
  for (size_t i = 0; i < ns; ++i) base[i] = b[i] * tile[i];
  for (size_t j = 0; j < nr; ++j) base[ns + j] = Expr(r0[j]) * r1[j];

  // A thread phase: its own thread variable, the spatial thread indices unfused from it.
  struct Phase {
    Var t;
    std::vector<Expr> ti;
  };
  auto phase = [&](const std::string& name) {
    Phase p{Var("threadIdx." + name), {}};
    p.ti = unfuse_index(p.t, nt);
    return p;
  };
  auto thread_loop = [&](const Phase& p, Stmt body) { return loop(p.t, threads, std::move(body), ForKind::ThreadX); };
  // The per-thread loops over virtual threads (VThread loops: each thread computes its
  // V sub-tiles, T x I apart, interleaved by unrolling) and the register tile.
  struct Inner {
    std::vector<Var> v, i;
  };
  auto inner_vars = [&](const std::string& tag) {
    Inner in;
    for (size_t x = 0; x < ns; ++x) {
      in.v.push_back(Var(s.splits[x].name + ".v" + tag));
      in.i.push_back(Var(s.splits[x].name + ".i" + tag));
    }
    return in;
  };
  auto inner_loops = [&](const Inner& in, Stmt st) {
    for (size_t x = ns; x-- > 0;) st = loop(in.i[x], ni[x], st);
    for (size_t x = ns; x-- > 0;) st = loop(in.v[x], nv[x], st, ForKind::VThread);
    return st;
  };
  // Index within the block's tile, and in the whole axis.
  auto local_index = [&](const Phase& p, const Inner& in, size_t x) {
    return (Expr(in.v[x]) * nt[x] + p.ti[x]) * ni[x] + in.i[x];
  };
  std::vector<Expr> acc_shape = {threads};
  for (size_t x = 0; x < ns; ++x) acc_shape.push_back(nv[x]);
  for (size_t x = 0; x < ns; ++x) acc_shape.push_back(ni[x]);
  Buffer acc = make_buffer(a.name + "_acc", a.buffer->dtype, simplified(acc_shape), MemScope::Local);
  auto acc_index = [&](const Phase& p, const Inner& in) {
    std::vector<Expr> r = {p.t};
    for (size_t x = 0; x < ns; ++x) r.push_back(in.v[x]);
    for (size_t x = 0; x < ns; ++x) r.push_back(in.i[x]);
    return r;
  };

  // The cached inputs' shared tiles and their cooperative loads.
  std::unordered_set<const te::OpNode*> inl;
  for (const te::Op& pr : info.producers) inl.insert(pr.get());
  std::vector<CachedInput> cached = cached_inputs(info);
  std::vector<Buffer> shared;
  Phase pl = phase("load");
  std::vector<Stmt> loads;
  for (size_t c = 0; c < cached.size(); ++c) {
    const CachedInput& ci = cached[c];
    std::vector<Expr> shape, first;
    for (size_t d = 0; d < ci.coef.size(); ++d) {
      Expr ext = one, at(ci.offset[d]);
      for (size_t x = 0; x < ns + nr; ++x) {
        if (ci.coef[d][x] == 0) continue;
        ext = ext + Expr(ci.coef[d][x]) * (tile[x] - one);
        at = at + Expr(ci.coef[d][x]) * base[x];
      }
      shape.push_back(ext);
      first.push_back(at);
    }
    shape = simplified(shape);
    Buffer sh = make_buffer(ci.buffer->name + "_shared", ci.buffer->dtype, shape, MemScope::Shared);
    shared.push_back(sh);
    Var e(ci.buffer->name + ".e");
    Expr size = simplify(product(shape));
    Expr flat = Expr(e) * threads + pl.t;
    std::vector<Expr> at = unfuse_index(flat, shape), src;
    for (size_t d = 0; d < at.size(); ++d) src.push_back(first[d] + at[d]);
    Expr value = inline_stages(load(ci.buffer, src), inl);
    loads.push_back(loop(e, floordiv(size + threads - one, threads), make_if(flat < size, make_store(sh, at, value))));
  }

  // The accumulation: cached inputs read from shared memory at the index within the tile.
  Phase pc = phase("compute");
  Inner ic = inner_vars("");
  std::vector<Var> r1v(nr);
  for (size_t j = 0; j < nr; ++j) r1v[j] = Var(s.splits[ns + j].name + ".1");
  std::vector<Expr> within(ns + nr), full(ns + nr);
  for (size_t x = 0; x < ns; ++x) {
    within[x] = local_index(pc, ic, x);
    full[x] = base[x] + within[x];
  }
  for (size_t j = 0; j < nr; ++j) {
    within[ns + j] = r1v[j];
    full[ns + j] = base[ns + j] + r1v[j];
  }
  Expr body = rewrite_post_order(a.body, [&](const Expr& x) -> Expr {
    if (x.kind() != ExprKind::Load) return Expr();
    for (size_t c = 0; c < cached.size(); ++c) {
      if (x->buffer.get() != cached[c].buffer.get()) continue;
      std::vector<Expr> idx;
      for (size_t d = 0; d < cached[c].coef.size(); ++d) {
        Expr e(int64_t{0});
        for (size_t y = 0; y < ns + nr; ++y)
          if (cached[c].coef[d][y]) e = e + Expr(cached[c].coef[d][y]) * within[y];
        idx.push_back(e);
      }
      return load(shared[c], idx);
    }
    return Expr();
  });
  body = inline_stages(body, inl);
  VarMap m;
  for (size_t i = 0; i < ns; ++i) m[a.axes[i].var.id()] = full[i];
  for (size_t j = 0; j < nr; ++j) m[a.reduce_axes[j].var.id()] = full[ns + j];
  body = substitute(body, m);
  std::vector<Expr> ai = acc_index(pc, ic);
  Stmt update = inner_loops(ic, make_store(acc, ai, te::reduce_combine(a.reduce, load(acc, ai), body)));
  for (size_t j = nr; j-- > 0;) update = loop(r1v[j], r1[j], update);
  Stmt step = make_seq({thread_loop(pl, make_seq(loads)), make_barrier(),
                        thread_loop(pc, make_pragma(kUnrollPragma, k.unroll, update)), make_barrier()});
  for (size_t j = nr; j-- > 0;) step = loop(r0[j], r0n[j], step);

  Phase pi = phase("init");
  Inner ii = inner_vars(".init");
  Stmt init =
      thread_loop(pi, inner_loops(ii, make_store(acc, acc_index(pi, ii), te::reduce_identity(a.reduce, acc->dtype))));

  // The write-back through the epilogue.
  Phase pw = phase("store");
  Inner iw = inner_vars(".store");
  std::vector<Expr> out_idx;
  for (size_t x = 0; x < ns; ++x) out_idx.push_back(base[x] + local_index(pw, iw, x));
  Expr value = load(acc, acc_index(pw, iw));
  value = apply_epilogue(info, value, out_idx);
  Stmt store = thread_loop(pw, inner_loops(iw, make_store(out_buf, out_idx, value)));

  Stmt blk = make_allocate(acc, make_seq({init, step, store}));
  for (size_t c = shared.size(); c-- > 0;) blk = make_allocate(shared[c], blk);
  return loop(bx, blocks, blk, ForKind::BlockX);
}

// ---- the GPU tensor-core rule ----

// An anchor as C[m][n] += A[m][k] * B[k][n] on tensor cores (Sketch::mma_*): per block a
// BM x BN tile of C, BM = 16 x warps_m x frags_m, BN = 8 x warps_n x frags_n; per step
// the block's threads stage BM x BK of A and BK x BN of B in shared memory (the factors'
// values, padding computed as loaded; each tile stored k innermost or outermost as its
// operand is contiguous, filled along its inner axis, 4 floats at a time where
// Sketch::mma_vector; rows padded, sched::kMmaPadKInner/KOuter), then each warp
// multiplies its frags_m x frags_n fragments. A fragment's nest is what one
// mma.sync.m16n8kK (K = 8 for TF32, 16 for FP16 and BF16) computes for a thread: its 4
// elements of C (lane l: rows l/4 and l/4 + 8, columns 2(l%4) and 2(l%4) + 1) from the
// shared tiles, the inputs rounded to the precision's format (rnd: MathFn::tf32, fp16
// or bf16):
//
//   for blockIdx: alloc As, Bs (shared), acc[threads, FM, FN, 4]
//     threads: acc = 0
//     for the other reduction axes: for k0:
//       threads: As[m][k] = A(...), Bs[k][n] = B(...); barrier
//       threads: for kk: for fm: for fn: pragma mma { for r in 4: for q in K:
//         acc[t, fm, fn, r] += rnd(As[row(t, fm, r)][kk*K + q]) * rnd(Bs[kk*K + q][col(t, fn, r)]) }
//       barrier
//     threads: for fm, fn: out[..., row, ..., col, ...] = epilogue(acc[t, fm, fn, r]),
//       1, 2 or 4 columns at a time (see the write-back below)
//
// With S > 1 stages (cp.async) the tiles have a leading dimension of S and the steps
// (the other reduction axes and k0, fused) run as a pipeline:
//     threads: pragma cp.async(S-1) { tiles of step 0 into stage 0 } ... (steps 0 .. S-2)
//     for x in steps:
//       threads: pragma cp.async(S-1) { if x + S-1 < steps: tiles of step x+S-1 into its stage }
//       barrier; threads: the fragments of stage x mod S; barrier
//
// The interpreter runs the nest as written; the CUDA printer emits each mma pragma's
// nest as the fragment loads and one mma.sync (codegen/c_printer.cc): the same
// products, summed by the tensor core in its own order (the last bits may differ), and
// each cp.async pragma's stores as asynchronous copies, a commit and a wait.
Stmt build_gpu_mma(const ops::OpGraph& task, const Sketch& s, const KnobValues& k, const Buffer& out_buf) {
  AnchorInfo info = *analyze_anchor(task);
  const te::OpNode& a = *info.anchor;
  const size_t ns = a.axes.size(), nr = a.reduce_axes.size();
  const int M = s.mma_m, N = s.mma_n, K = s.mma_k;
  const Expr one(int64_t{1}), zero(int64_t{0});
  const Expr wm = k.factors[0][0], fm = k.factors[0][1], wn = k.factors[1][0], fn = k.factors[1][1],
             kf = k.factors[2][0];
  const int64_t KD = mma_kdim(s);  // the fragment's k
  const MathFn rounding = mma_rounding(s);
  const Expr bm = Expr(kMmaM) * wm * fm, bn = Expr(kMmaN) * wn * fn, bk = Expr(KD) * kf;
  const Expr threads = simplify(Expr(kWarp) * wm * wn);
  std::unordered_set<const te::OpNode*> inl;
  for (const te::Op& pr : info.producers) inl.insert(pr.get());
  const Expr fa = inline_stages(a.body.arg(s.mma_a), inl), fb = inline_stages(a.body.arg(1 - s.mma_a), inl);

  // Blocks: the other spatial axes whole, then the tiles of the rows and the columns.
  std::vector<Expr> nb;
  std::vector<int> block_axis;
  for (size_t x = 0; x < ns; ++x)
    if (static_cast<int>(x) != M && static_cast<int>(x) != N) {
      nb.push_back(Expr(a.axes[x].extent));
      block_axis.push_back(static_cast<int>(x));
    }
  const int64_t m_ext = a.axes[M].extent, n_ext = a.axes[N].extent, k_ext = a.reduce_axes[K].extent;
  auto ceil_div = [&](int64_t n, const Expr& d) { return floordiv(Expr(n) + d - one, d); };
  nb.push_back(ceil_div(m_ext, bm));
  nb.push_back(ceil_div(n_ext, bn));
  // Tiles past an extent (padded to the fragment, or a guarded split's last tile) are
  // masked: their elements load as zero and are never stored. Decided by the sketch, so
  // that every configuration has the same structure.
  const bool guard_m = m_ext % kMmaM != 0 || s.splits[0].guarded, guard_n = n_ext % kMmaN != 0 || s.splits[1].guarded,
             guard_k = k_ext % KD != 0 || s.splits[2].guarded;
  Var bx("blockIdx");
  std::vector<Expr> b = unfuse_index(bx, nb);
  // The block tile's first row and column.
  const Expr m0 = b[b.size() - 2] * bm, n0 = b.back() * bn;
  // The reduction's steps: BK of k at a time, within loops over the other reduction
  // axes (stages 1), or all of them one fused sequence of steps (a pipeline, stages > 1).
  const int S = s.mma_stages;
  const Expr nk = ceil_div(k_ext, bk);
  std::vector<int> other_r;
  std::vector<Expr> other_ext;
  for (size_t j = 0; j < nr; ++j)
    if (static_cast<int>(j) != K) {
      other_r.push_back(static_cast<int>(j));
      other_ext.push_back(Expr(a.reduce_axes[j].extent));
    }
  // The anchor's axes at a block: the other spatial axes fixed, the rows and columns at
  // the tile's first index plus `m` and `n`, the reduction at step `step` (the other
  // reduction axes and k0) plus `kk`.
  struct Step {
    std::vector<Expr> r;  // per reduction axis other than K
    Expr k0;
  };
  auto axes_at = [&](const Expr& m, const Expr& n, const Step& step, const Expr& kk) {
    VarMap vm;
    for (size_t i = 0; i < block_axis.size(); ++i) vm[a.axes[block_axis[i]].var.id()] = b[i];
    vm[a.axes[M].var.id()] = m0 + m;
    vm[a.axes[N].var.id()] = n0 + n;
    for (size_t j = 0; j < other_r.size(); ++j) vm[a.reduce_axes[other_r[j]].var.id()] = step.r[j];
    vm[a.reduce_axes[K].var.id()] = step.k0 * bk + kk;
    return vm;
  };
  // Step x of the fused sequence: k0 = x mod nk, the other reduction axes from x / nk.
  auto fused_step = [&](const Expr& x) { return Step{unfuse_index(floordiv(x, nk), other_ext), floormod(x, nk)}; };

  // The shared tiles, per operand (0: A, 1: B) k innermost or outermost
  // (Sketch::mma_k_inner), with a leading dimension of S stages when pipelined.
  auto tile_shape = [&](int op, const Expr& other) {
    std::vector<Expr> sh;
    if (S > 1) sh.push_back(Expr(int64_t{S}));
    if (s.mma_k_inner[op]) {
      sh.push_back(other);
      sh.push_back(bk + Expr(kMmaPadKInner));
    } else {
      sh.push_back(bk);
      sh.push_back(other + Expr(kMmaPadKOuter));
    }
    return simplified(sh);
  };
  auto tile_at = [&](int op, const Expr& stage, const Expr& other, const Expr& kk) {
    std::vector<Expr> i;
    if (S > 1) i.push_back(stage);
    if (s.mma_k_inner[op]) {
      i.push_back(other);
      i.push_back(kk);
    } else {
      i.push_back(kk);
      i.push_back(other);
    }
    return i;
  };
  Buffer as = make_buffer(a.name + "_A_shared", DType::f32(), tile_shape(0, bm), MemScope::Shared);
  Buffer bs = make_buffer(a.name + "_B_shared", DType::f32(), tile_shape(1, bn), MemScope::Shared);
  Buffer acc =
      make_buffer(a.name + "_acc", DType::f32(), simplified({threads, fm, fn, Expr(int64_t{4})}), MemScope::Local);

  // The cooperative fill of operand op's tile for a step: the block's threads take
  // consecutive elements (or vectors of 4, Sketch::mma_vector) along the tile's inner
  // axis, flat vector e * threads + t.
  auto fill = [&](int op, const Var& tl, const Step& step, const Expr& stage, const std::string& tag) {
    const Expr& value = op == 0 ? fa : fb;
    const bool k_inner = s.mma_k_inner[op];
    const int64_t vec = s.mma_vector[op] ? 4 : 1;
    // The tile's extents in vectors: the inner axis's (k, or the operand's own), the outer's.
    const Expr other = op == 0 ? bm : bn;
    const Expr inner_vecs = k_inner ? simplify(Expr(KD / vec) * kf)
                                    : simplify(op == 0 ? Expr(kMmaM / vec) * wm * fm : Expr(kMmaN / vec) * wn * fn);
    Var e(tag + ".e"), lane(tag + ".v");
    const Expr size = simplify(inner_vecs * (k_inner ? other : bk)), flat = Expr(e) * threads + tl;
    Expr inner = floormod(flat, inner_vecs), outer = floordiv(flat, inner_vecs);
    if (vec > 1) inner = inner * Expr(vec) + lane;
    const Expr kk = k_inner ? inner : outer, oth = k_inner ? outer : inner;
    VarMap vm = op == 0 ? axes_at(oth, zero, step, kk) : axes_at(zero, oth, step, kk);
    Expr v = substitute(value, vm), in;
    auto also = [&](const Expr& c) { in = in.defined() ? logical_and(in, c) : c; };
    if (op == 0 ? guard_m : guard_n) also(lt((op == 0 ? m0 : n0) + oth, Expr(op == 0 ? m_ext : n_ext)));
    if (guard_k) also(lt(step.k0 * bk + kk, Expr(k_ext)));
    if (in.defined()) {
      // A vector is wholly inside or outside (mma_operand_layout): its first lane decides.
      if (vec > 1) {
        VarMap first;
        first[lane.id()] = zero;
        in = substitute(in, first);
      }
      v = select(in, v, make_const(DType::f32(), 0));
    }
    Stmt st = make_store(op == 0 ? as : bs, tile_at(op, stage, oth, kk), v);
    if (vec > 1) st = loop(lane, Expr(vec), st, ForKind::Vectorized);
    return loop(e, floordiv(size + threads - one, threads), make_if(flat < size, st));
  };

  // A thread's place: warp (wm_i, wn_i), lane; its rows and columns in the block tile.
  struct Lane {
    Var t;
    Expr wmi, wni, lane;
  };
  auto lane_of = [&](const std::string& name) {
    Lane l{Var("threadIdx." + name), {}, {}, {}};
    Expr warp = floordiv(l.t, Expr(kWarp));
    l.wmi = floordiv(warp, wn);
    l.wni = floormod(warp, wn);
    l.lane = floormod(l.t, Expr(kWarp));
    return l;
  };
  // Element r of a fragment's C: row half r / 2, column r % 2.
  auto row_at = [&](const Lane& l, const Expr& f, const Expr& half) {
    return (l.wmi * fm + f) * Expr(kMmaM) + floordiv(l.lane, Expr(4)) + Expr(8) * half;
  };
  auto col_at = [&](const Lane& l, const Expr& f, const Expr& c) {
    return (l.wni * fn + f) * Expr(kMmaN) + Expr(2) * floormod(l.lane, Expr(4)) + c;
  };
  auto row = [&](const Lane& l, const Expr& f, const Expr& r) { return row_at(l, f, floordiv(r, Expr(2))); };
  auto col = [&](const Lane& l, const Expr& f, const Expr& r) { return col_at(l, f, floormod(r, Expr(2))); };
  auto thread_loop = [&](const Lane& l, Stmt body) { return loop(l.t, threads, std::move(body), ForKind::ThreadX); };
  struct Frag {
    Var fm, fn, r;
  };
  auto frag_vars = [&](const std::string& tag) { return Frag{Var("fm" + tag), Var("fn" + tag), Var("r" + tag)}; };
  auto frag_loops = [&](const Frag& f, Stmt body) {
    return loop(f.fm, fm, loop(f.fn, fn, loop(f.r, Expr(int64_t{4}), std::move(body))));
  };

  Lane li = lane_of("init");
  Frag fi = frag_vars(".init");
  // Init and write-back unrolled too: the accumulator stays in registers only where
  // every index into it is a constant.
  Stmt init = thread_loop(
      li, make_pragma(kUnrollPragma, k.unroll,
                      frag_loops(fi, make_store(acc, {li.t, fi.fm, fi.fn, fi.r}, make_const(DType::f32(), 0)))));

  // The fragments of the tiles at `stage`.
  auto compute = [&](const Expr& stage) {
    Lane lc = lane_of("compute");
    Var kk("kk"), vfm("fm"), vfn("fn"), r("r"), q("q");
    Expr kq = Expr(kk) * Expr(KD) + q;
    std::vector<Expr> ai = {lc.t, vfm, vfn, r};
    Expr prod = mul(call(rounding, {load(as, tile_at(0, stage, row(lc, vfm, r), kq))}),
                    call(rounding, {load(bs, tile_at(1, stage, col(lc, vfn, r), kq))}));
    Stmt frag = make_pragma(
        kMmaPragma, zero, loop(r, Expr(int64_t{4}), loop(q, Expr(KD), make_store(acc, ai, add(load(acc, ai), prod)))));
    return thread_loop(lc, make_pragma(kUnrollPragma, k.unroll, loop(kk, kf, loop(vfm, fm, loop(vfn, fn, frag)))));
  };
  Stmt step;
  if (S == 1) {
    Var k0(a.reduce_axes[K].var.name() + ".0"), tl("threadIdx.load");
    std::vector<Expr> rv;
    std::vector<Var> rvars;
    for (int j : other_r) {
      rvars.push_back(Var(a.reduce_axes[j].var.name() + ".o"));
      rv.push_back(rvars.back());
    }
    Step at{rv, k0};
    Stmt loads = make_seq({fill(0, tl, at, zero, "A"), fill(1, tl, at, zero, "B")});
    step = make_seq({loop(tl, threads, loads, ForKind::ThreadX), make_barrier(), compute(zero), make_barrier()});
    step = loop(k0, nk, step);
    for (size_t j = other_r.size(); j-- > 0;) step = loop(rvars[j], other_ext[j], step);
  } else {
    // The pipeline: the tiles of steps 0 .. S-2 in flight first; at step x the copies of
    // step x + S - 1 issued into its stage, then a wait until step x's copies have
    // landed (at most S - 1 groups pending), a barrier, the fragments of stage x mod S,
    // and a barrier before that stage is filled again.
    const Expr steps = simplify(nk * product(other_ext)), depth(int64_t{S - 1});
    // The copies of step x into stage x mod S, one group; the steps past the last issue
    // none (an empty group), under `guard`.
    auto issue = [&](const Var& tl, const Expr& x, const std::string& tag, bool guard) {
      const Expr stage = floormod(x, Expr(int64_t{S}));
      Stmt loads =
          make_seq({fill(0, tl, fused_step(x), stage, "A" + tag), fill(1, tl, fused_step(x), stage, "B" + tag)});
      if (guard) loads = make_if(lt(x, steps), loads);
      return make_pragma(kAsyncCopyPragma, depth, loads);
    };
    // At least S steps (invalid_reason), so the prologue's steps all exist.
    Var tp("threadIdx.prologue"), tl("threadIdx.load"), x("step");
    std::vector<Stmt> prologue;
    for (int p = 0; p + 1 < S; ++p) prologue.push_back(issue(tp, Expr(int64_t{p}), ".p" + std::to_string(p), false));
    Stmt body = make_seq({loop(tl, threads, issue(tl, Expr(x) + depth, "", true), ForKind::ThreadX), make_barrier(),
                          compute(floormod(x, Expr(int64_t{S}))), make_barrier()});
    step = make_seq({loop(tp, threads, make_seq(prologue), ForKind::ThreadX), loop(x, steps, body)});
  }

  // The write-back, per fragment (Sketch::mma_store_lanes):
  //   1, 2: each row half h's two columns c, a Vectorized loop of 2 (a 64-bit store)
  //     for 2: out[row(h), col(c)] = epilogue(acc[t, fm, fn, 2h + c]);
  //   4: a lane (lane % 4 = 2s + p) and its pair (lane xor 1) hold the same rows' columns
  //     4s .. 4s+3; lane p takes its pair's elements of row half p (one shuffle each,
  //     sched::kLaneExchangePragma) and stores row half p's 4 columns, 128 bits at once:
  //     pair[t, c] = p == 0 ? acc[t + 1, fm, fn, c] : acc[t - 1, fm, fn, 2 + c]
  //     out[row(p), 4s + j] = epilogue(p == j / 2 ? acc[t, fm, fn, j] : pair[t, j % 2]).
  // A vector's first lane's column decides whether it is inside the extent (a
  // multiple of the lanes).
  const int lanes = s.mma_store_lanes;
  const Expr two(int64_t{2});
  Lane lw = lane_of("store");
  Var wfm("fm.store"), wfn("fn.store"), half("h.store"), c2("c.store"), j4("j.store");
  const Expr parity = floormod(lw.lane, two);
  const Expr row_half = lanes == 4 ? parity : Expr(half);
  const Expr column = lanes == 4 ? (lw.wni * fn + wfn) * Expr(kMmaN) +
                                       Expr(int64_t{4}) * floordiv(floormod(lw.lane, Expr(int64_t{4})), two) + j4
                                 : col_at(lw, wfn, c2);
  const Var& vlane = lanes == 4 ? j4 : c2;
  VarMap at = axes_at(row_at(lw, wfm, row_half), column, Step{std::vector<Expr>(other_r.size(), zero), zero}, zero);
  std::vector<Expr> out_idx;
  for (size_t x = 0; x < ns; ++x) out_idx.push_back(at.at(a.axes[x].var.id()));
  const Buffer pair =
      lanes == 4 ? make_buffer(a.name + "_pair", DType::f32(), simplified({threads, two}), MemScope::Local) : Buffer();
  Expr acc_value;
  if (lanes == 4)
    acc_value = select(eq(parity, floordiv(Expr(j4), two)), load(acc, {lw.t, wfm, wfn, j4}),
                       load(pair, {lw.t, floormod(Expr(j4), two)}));
  else acc_value = load(acc, {lw.t, wfm, wfn, Expr(half) * two + c2});
  Stmt write = make_store(out_buf, out_idx, apply_epilogue(info, acc_value, out_idx));
  Expr inside;
  if (guard_m) inside = lt(at.at(a.axes[M].var.id()), Expr(m_ext));
  if (guard_n) {
    Expr c = lt(at.at(a.axes[N].var.id()), Expr(n_ext));
    inside = inside.defined() ? logical_and(inside, c) : c;
  }
  if (lanes > 1) {
    write = loop(vlane, Expr(int64_t{lanes}), write, ForKind::Vectorized);
    if (inside.defined()) {
      VarMap first;
      first[vlane.id()] = zero;
      write = make_if(substitute(inside, first), write);
    }
  } else {
    if (inside.defined()) write = make_if(inside, write);
    write = loop(c2, two, write);
  }
  if (lanes == 4) {
    // Unconditional: every lane of the warp takes part in the shuffles.
    Expr theirs = select(eq(parity, zero), load(acc, {Expr(lw.t) + one, wfm, wfn, c2}),
                         load(acc, {Expr(lw.t) - one, wfm, wfn, Expr(c2) + two}));
    Stmt exchange = loop(c2, two, make_pragma(kLaneExchangePragma, one, make_store(pair, {lw.t, c2}, theirs)));
    write = make_seq({exchange, write});
  } else {
    write = loop(half, two, write);
  }
  Stmt store = thread_loop(lw, make_pragma(kUnrollPragma, k.unroll, loop(wfm, fm, loop(wfn, fn, std::move(write)))));
  if (lanes == 4) store = make_allocate(pair, store);

  Stmt blk = make_allocate(as, make_allocate(bs, make_allocate(acc, make_seq({init, step, store}))));
  return loop(bx, simplify(product(nb)), blk, ForKind::BlockX);
}

// ---- the GPU cross-thread reduction rule ----

// A warp's reduction (kWarpReducePragma): dst[t] = the combination of src[base + i],
// i < 32, in the order in which five
// __shfl_down_sync steps (offsets 16, 8, 4, 2, 1) leave it in lane 0: after the step of
// offset o, lane l holds v(l, o) = v(l, 2o) combined with v(l + o, 2o), v(l, 32) =
// src[base + l]. The CUDA printer emits the shuffles and a broadcast from lane 0.
Stmt warp_reduce(te::ReduceKind kind, const Buffer& dst, const Var& t, const Buffer& src, const Expr& base) {
  std::function<Expr(int64_t, int64_t)> v = [&](int64_t l, int64_t o) -> Expr {
    if (o == kWarp) return load(src, {simplify(base + Expr(l))});
    return te::reduce_combine(kind, v(l, 2 * o), v(l + o, 2 * o));
  };
  return make_pragma(kWarpReducePragma, Expr(kWarp), make_store(dst, {t}, v(0, 1)));
}

// One block per row, T threads (the knob), phases between barriers (see build_gpu_tile):
//   for blockIdx (the row): per reduction stage j
//     threads: part = identity; for e: i = e * T + t; if i < n: part = combine(part, body(i))
//              red_j[t] = part                         (red_j in shared memory)
//     barrier
//     threads: res_j = fold(red_j[0..T))                (every thread its own copy)
//   the output stage, elementwise: threads: for e: i = e * T + t; if i < n: out[row, i] = body
// Later stages read a reduction's value from the thread's res_j. part and res_j are
// per-thread buffers ([T], indexed by the thread). With warp shuffles (T = 32 W, the
// knob W) the fold is instead
//     (the partial phase also sets warps_j[t % 32] = identity; warps_j[32] in shared memory)
//     threads: res_j = warp_reduce(red_j[32 (t / 32) ...])
//              if t % 32 == 0: warps_j[t / 32] = res_j
//     barrier
//     threads: res_j = warp_reduce(warps_j[0..32))
Stmt build_gpu_reduce(const ops::OpGraph& task, const Sketch& s, const KnobValues& k,
                      const std::unordered_map<const te::OpNode*, Buffer>& outputs) {
  GenericInfo info = analyze_generic(task);
  const int K = s.prefix;
  const Expr one(int64_t{1}), zero(int64_t{0});
  std::vector<Expr> ext;
  for (int d = 0; d < K; ++d) ext.push_back(Expr(task.outputs[0].shape()[d]));
  Var bx("blockIdx");
  std::vector<Expr> q = unfuse_index(bx, ext);
  const Expr T = s.warp_shuffle ? simplify(Expr(kWarp) * k.factors[0][0]) : k.factors[0][0];
  std::vector<Stmt> phases;
  std::vector<Buffer> block_buffers;
  std::unordered_map<const te::OpNode*, Buffer> result;
  int n_phase = 0;
  auto thread_var = [&] { return Var("threadIdx." + std::to_string(n_phase++)); };
  auto ceil_div = [&](const Expr& n) { return floordiv(n + T - one, T); };
  for (const te::Op& op : info.stages) {
    const te::OpNode& st = *op;
    const DType dt = st.buffer->dtype;
    Var t = thread_var(), e(st.name + ".e");
    Expr i = Expr(e) * T + t;
    Expr body = inline_stages(st.body, info.inlined);
    for (const auto& [prev, res] : result) {
      Buffer r = res;
      body =
          retarget_loads(body, prev->buffer.get(), r, [&](const std::vector<Expr>&) { return std::vector<Expr>{t}; });
    }
    VarMap m;
    for (int d = 0; d < K; ++d) m[st.axes[d].var.id()] = q[d];
    std::vector<Expr> out_idx(q.begin(), q.end());
    auto out_it = outputs.find(&st);
    if (!st.reduce_axes.empty()) {
      for (size_t d = K; d < st.axes.size(); ++d) {
        m[st.axes[d].var.id()] = zero;
        out_idx.push_back(zero);
      }
      std::vector<Expr> rext;
      for (const te::IterVar& r : st.reduce_axes) rext.push_back(Expr(r.extent));
      Expr n = simplify(product(rext));
      std::vector<Expr> ri = unfuse_index(i, rext);
      for (size_t r = 0; r < st.reduce_axes.size(); ++r) m[st.reduce_axes[r].var.id()] = ri[r];
      body = substitute(body, m);
      Buffer part = make_buffer(st.name + "_part", dt, {T}, MemScope::Local);
      Buffer red = make_buffer(st.name + "_red", dt, {T}, MemScope::Shared);
      Buffer res = make_buffer(st.name + "_res", dt, {T}, MemScope::Local);
      block_buffers.insert(block_buffers.end(), {part, red, res});
      std::vector<Stmt> partial = {
          make_store(part, {t}, te::reduce_identity(st.reduce, dt)),
          loop(e, ceil_div(n),
               make_if(i < n, make_store(part, {t}, te::reduce_combine(st.reduce, load(part, {t}), body)))),
          make_store(red, {t}, load(part, {t}))};
      // With warp shuffles, the warps' results: 32 of them whatever the warps, those past
      // the last warp the identity (each thread writes it to its lane's entry now, the
      // warps their results after the barrier), so that the fold of the warps reads all
      // 32 and no condition on the knob is left to simplify away at a configuration.
      Buffer wred = make_buffer(st.name + "_warps", dt, {Expr(kWarp)}, MemScope::Shared);
      if (s.warp_shuffle) {
        block_buffers.push_back(wred);
        partial.push_back(make_store(wred, {floormod(Expr(t), Expr(kWarp))}, te::reduce_identity(st.reduce, dt)));
      }
      phases.push_back(loop(t, T, make_pragma(kUnrollPragma, k.unroll, make_seq(partial)), ForKind::ThreadX));
      phases.push_back(make_barrier());
      Var u = thread_var(), w(st.name + ".w");
      std::vector<Stmt> fold;
      if (s.warp_shuffle) {
        // Each warp's 32 partials, then (several warps) the warps' results in shared
        // memory, combined in the order of a shuffle butterfly.
        const Expr warp(kWarp);
        fold.push_back(warp_reduce(st.reduce, res, u, red, floordiv(Expr(u), warp) * warp));
        fold.push_back(
            make_if(eq(floormod(Expr(u), warp), zero), make_store(wred, {floordiv(Expr(u), warp)}, load(res, {u}))));
        phases.push_back(loop(u, T, make_seq(fold), ForKind::ThreadX));
        phases.push_back(make_barrier());
        u = thread_var();
        fold = {warp_reduce(st.reduce, res, u, wred, zero)};
      } else {
        fold.push_back(make_store(res, {u}, te::reduce_identity(st.reduce, dt)));
        fold.push_back(loop(w, T, make_store(res, {u}, te::reduce_combine(st.reduce, load(res, {u}), load(red, {w})))));
      }
      if (out_it != outputs.end())
        fold.push_back(make_if(eq(Expr(u), zero), make_store(out_it->second, out_idx, load(res, {u}))));
      phases.push_back(loop(u, T, make_seq(fold), ForKind::ThreadX));
      result[&st] = res;
    } else {
      BASIN_CHECK(out_it != outputs.end()) << "sketch " << s.name << ": an elementwise stage that is not an output";
      std::vector<Expr> fext;
      for (size_t d = K; d < st.axes.size(); ++d) fext.push_back(Expr(st.axes[d].extent));
      Expr n = simplify(product(fext));
      std::vector<Expr> fi = fext.empty() ? std::vector<Expr>{} : unfuse_index(i, fext);
      for (size_t d = K; d < st.axes.size(); ++d) {
        m[st.axes[d].var.id()] = fi[d - K];
        out_idx.push_back(fi[d - K]);
      }
      body = substitute(body, m);
      Stmt each = loop(e, ceil_div(n), make_if(i < n, make_store(out_it->second, out_idx, body)));
      phases.push_back(loop(t, T, make_pragma(kUnrollPragma, k.unroll, each), ForKind::ThreadX));
    }
  }
  Stmt blk = make_seq(phases);
  for (size_t b = block_buffers.size(); b-- > 0;) blk = make_allocate(block_buffers[b], blk);
  return loop(bx, simplify(product(ext)), blk, ForKind::BlockX);
}

}  // namespace

namespace {

// A bordered output (sched::output_border): f lowered the task without the border; its
// output's stores and loads move by the border into the task's output, whose border is
// zeroed after them, slab by slab (the positions outside the inner value along one
// bordered dimension, inside it along the bordered ones before), the last dimension in
// vectors where it has no border. The zeroing goes inside the allocations at the top,
// so that split_constant_prologue still finds the weights' packing there.
LoweredFunc with_border(LoweredFunc f, const OutputBorder& b, const te::Tensor& out) {
  const Buffer from = b.inner.buffer(), to = out.buffer();
  const std::vector<int64_t>& is = b.inner.shape();
  const std::vector<int64_t>& os = out.shape();
  const size_t nd = os.size();
  auto moved = [&](const std::vector<Expr>& idx) {
    std::vector<Expr> m = idx;
    if (idx.size() == 1 && nd > 1) {  // a flat index of the inner value
      m.assign(nd, Expr());
      Expr rest = idx[0];
      for (size_t d = nd; d-- > 0;) {
        m[d] = d == 0 ? rest : floormod(rest, Expr(is[d]));
        rest = floordiv(rest, Expr(is[d]));
      }
    }
    BASIN_CHECK(m.size() == nd) << "a store of the bordered output with " << idx.size() << " indices";
    for (size_t d = 0; d < nd; ++d)
      if (b.before[d]) m[d] = m[d] + Expr(b.before[d]);
    return m;
  };
  Stmt body = rewrite_stmt(
      f.body, [&](const Expr& e) { return retarget_loads(e, from.get(), to, moved); },
      [&](const Stmt& st) -> Stmt {
        if (st.kind() != StmtKind::Store || st->buffer.get() != from.get()) return Stmt();
        return make_store(to, moved(st->indices), st->value);
      });
  std::vector<size_t> bordered;
  for (size_t d = 0; d < nd; ++d)
    if (os[d] != is[d]) bordered.push_back(d);
  std::vector<Stmt> zero;
  const Expr z = out.dtype().is_bf16() ? cast(out.dtype(), make_const(DType::f32(), 0)) : make_const(out.dtype(), 0);
  for (const size_t d : bordered) {
    for (const auto& [lo, hi] : {std::pair<int64_t, int64_t>{0, b.before[d]}, {b.before[d] + is[d], os[d]}}) {
      if (hi <= lo) continue;
      // Along a bordered dimension before d: its inner range; along d: [lo, hi).
      std::vector<Var> v;
      std::vector<Expr> idx;
      std::vector<int64_t> extent;
      for (size_t x = 0; x < nd; ++x) {
        const bool inner = x < d && os[x] != is[x];
        v.push_back(Var("border" + std::to_string(x)));
        idx.push_back(Expr(v[x]) + Expr(x == d ? lo : inner ? b.before[x] : 0));
        extent.push_back(x == d ? hi - lo : inner ? is[x] : os[x]);
      }
      Stmt st = make_store(to, idx, z);
      for (size_t x = nd; x-- > 0;) {
        const bool vec = x == nd - 1 && os[x] == is[x] && extent[x] > 1;
        st = loop(v[x], Expr(extent[x]), st, vec ? ForKind::Vectorized : ForKind::Serial);
      }
      zero.push_back(st);
    }
  }
  // Inside the allocations at the top.
  std::vector<Buffer> allocs;
  while (body.defined() && body.kind() == StmtKind::Allocate && body->body.size() == 1) {
    allocs.push_back(body->buffer);
    body = body->body[0];
  }
  std::vector<Stmt> items = body.kind() == StmtKind::Seq ? body->body : std::vector<Stmt>{body};
  items.insert(items.end(), zero.begin(), zero.end());
  body = make_seq(items);
  for (size_t i = allocs.size(); i-- > 0;) body = make_allocate(allocs[i], body);
  f.body = body;
  for (int o : f.output_params)
    if (f.params[static_cast<size_t>(o)].get() == from.get()) f.params[static_cast<size_t>(o)] = to;
  return f;
}

}  // namespace

LoweredFunc lower_sketch_structure(const ops::OpGraph& task, const Sketch& s, const KnobValues& k, bool fuse_parallel) {
  BASIN_CHECK(k.factors.size() == s.splits.size()) << "sketch " << s.name << ": knob values do not match its splits";
  if (auto b = output_border(task))
    return with_border(lower_sketch_structure(without_border(task, *b), s, k, fuse_parallel), *b, task.outputs[0]);
  LoweredFunc f;
  f.name = task.op;
  for (const te::Tensor& t : task.inputs) f.params.push_back(t.buffer());
  std::unordered_map<const te::OpNode*, Buffer> outputs;
  for (const te::Tensor& t : task.outputs) {
    f.output_params.push_back(static_cast<int>(f.params.size()));
    f.params.push_back(t.buffer());
    outputs[t.op().get()] = t.buffer();
  }
  if (s.rule == SketchRule::Anchor) f.body = build_anchor(task, s, k, task.outputs[0].buffer(), fuse_parallel);
  else if (s.rule == SketchRule::GpuTile) f.body = build_gpu_tile(task, s, k, task.outputs[0].buffer());
  else if (s.rule == SketchRule::GpuReduce) f.body = build_gpu_reduce(task, s, k, outputs);
  else if (s.rule == SketchRule::GpuMma) f.body = build_gpu_mma(task, s, k, task.outputs[0].buffer());
  else if (s.rule == SketchRule::CpuAmx && s.amx_attention)
    f.body = build_cpu_amx_attention(task, s, k, task.outputs[0].buffer());
  else if (s.rule == SketchRule::CpuAmx) f.body = build_cpu_amx(task, s, k, task.outputs[0].buffer());
  else f.body = build_generic(task, s, k, outputs, fuse_parallel);
  return f;
}

LoweredFunc lower_sketch(const ops::OpGraph& task, const Sketch& s, const KnobValues& k) {
  LoweredFunc f = run_passes(
      lower_sketch_structure(task, s, k, /*fuse_parallel=*/true), "lower_sketch",
      {{"flatten_buffers", flatten_buffers}, {"simplify_stmt", [](const Stmt& st) { return simplify_stmt(st); }}},
      /*allow_knob_vars=*/true);
  verify_well_formed(f, {true, true});
  return f;
}

LoweredFunc lower_config(const ops::OpGraph& task, const Sketch& s, const Config& c) {
  std::string why = invalid_reason(s, c);
  if (!why.empty()) throw Error("invalid configuration for sketch " + s.name + ": " + why);
  LoweredFunc f = run_passes(lower_sketch(task, s, concrete_knobs(c)), "lower_config",
                             {{"mark_unrolled", [](const Stmt& st) { return mark_unrolled(st); }}});
  verify_well_formed(f, {false, true});
  return f;
}

}  // namespace basin::sched
