// The CPU sketch rules. A task whose DAG is an anchor (conv, dense, matmul,
// batch_matmul) with injective producers and an elementwise epilogue gets the anchor
// sketches: multi-level tiling S S R S R S with a local accumulator, every choice of
// vectorized axis, weight repacking, accumulator level and producer inlining. Every
// other task gets the generic sketches: stages fused under their shared leading axes
// (softmax and the norms computed row by row) or run one after another.
#include <algorithm>
#include <functional>
#include <numeric>
#include <unordered_set>

#include "core/schedule/sketch.h"
#include "core/schedule/task_analysis.h"
#include "core/util/error.h"
#include "core/util/host.h"

namespace basin::sched {

namespace {

// Readable split names for the common anchors; s<i>/r<j> otherwise.
std::vector<std::string> axis_names(const te::OpNode& op, bool reduce) {
  std::vector<std::string> names;
  size_t n = reduce ? op.reduce_axes.size() : op.axes.size();
  if (op.tag == "conv2d" && n == (reduce ? 3u : 4u))
    names = reduce ? std::vector<std::string>{"rc", "rh", "rw"} : std::vector<std::string>{"n", "c", "h", "w"};
  else if (op.tag == "conv2d_nchwc" && !reduce && n == 5u) names = {"n", "c", "h", "w", "cb"};
  else if (op.tag == "conv2d_nchwc" && reduce && (n == 4u || n == 2u))
    names = n == 4u ? std::vector<std::string>{"rc", "rh", "rw", "rcb"} : std::vector<std::string>{"rh", "rw"};
  else if ((op.tag == "dense" || op.tag == "matmul") && n == (reduce ? 1u : 2u))
    names = reduce ? std::vector<std::string>{"k"} : std::vector<std::string>{"i", "j"};
  else if (op.tag == "batch_matmul" && n == (reduce ? 1u : 3u))
    names = reduce ? std::vector<std::string>{"k"} : std::vector<std::string>{"b", "i", "j"};
  for (size_t i = names.size(); i < n; ++i) names.push_back((reduce ? "r" : "s") + std::to_string(i));
  return names;
}

// True if e uses v other than inside a remainder by a constant (a stride phase, v % s).
bool uses_beyond_phase(const Expr& e, const Var& v) {
  if (e.kind() == ExprKind::FloorMod && is_const_int(e->args[1])) return false;
  if (e.kind() == ExprKind::Var) return Var(e).id() == v.id();
  for (const Expr& a : e->args)
    if (uses_beyond_phase(a, v)) return true;
  return false;
}

// True if the only spatial axis of the anchor the input's reads use is `axis`, apart
// from stride phases (a transposed convolution's weight tap depends on the output
// position modulo the stride: still a small constant table per output channel).
bool weight_like(const te::OpNode& anchor, const te::OpNode& input, int axis) {
  bool ok = true;
  post_order_visit(anchor.body, [&](const Expr& x) {
    if (x.kind() != ExprKind::Load || x->buffer.get() != input.buffer.get()) return;
    for (const Expr& ix : x->args)
      for (size_t a = 0; a < anchor.axes.size(); ++a)
        if (int(a) != axis && uses_beyond_phase(ix, anchor.axes[a].var)) ok = false;
  });
  return ok;
}

// The spatial axes that the reads of the anchor's vectorized operand use: every input
// read whose indices use axis `vec` (a conv's input, along its width: n, h and w; its
// weight, along the output channels: c alone).
std::vector<int> vector_operand_axes(const te::OpNode& anchor, int vec) {
  std::vector<bool> used(anchor.axes.size(), false);
  post_order_visit(anchor.body, [&](const Expr& x) {
    if (x.kind() != ExprKind::Load) return;
    auto uses = [&](size_t a) {
      for (const Expr& ix : x->args)
        if (uses_var(ix, anchor.axes[a].var)) return true;
      return false;
    };
    if (!uses(static_cast<size_t>(vec))) return;
    for (size_t a = 0; a < anchor.axes.size(); ++a) used[a] = used[a] || uses(a);
  });
  std::vector<int> out;
  for (size_t a = 0; a < used.size(); ++a)
    if (used[a]) out.push_back(static_cast<int>(a));
  return out;
}

// Whether every input read whose indices use axis `vec` uses it in its innermost index
// alone, so that vectors along it are contiguous loads (a stride-2 conv's input, along
// its width, counts as contiguous: every other lane of two vectors).
bool reads_contiguously(const te::OpNode& anchor, int vec) {
  bool contiguous = true;
  const Var& v = anchor.axes[static_cast<size_t>(vec)].var;
  post_order_visit(anchor.body, [&](const Expr& x) {
    if (x.kind() != ExprKind::Load || x->args.empty()) return;
    for (size_t i = 0; i + 1 < x->args.size(); ++i)
      if (uses_var(x->args[i], v)) contiguous = false;
  });
  return contiguous;
}

std::vector<Sketch> anchor_sketches(const AnchorInfo& info, bool bf16, bool int8_dot, bool amx) {
  const te::OpNode& a = *info.anchor;
  std::vector<SplitSpec> splits;
  std::vector<std::string> sn = axis_names(a, false), rn = axis_names(a, true);
  for (size_t i = 0; i < a.axes.size(); ++i) splits.push_back(make_split(sn[i], a.axes[i].extent, 3));
  for (size_t j = 0; j < a.reduce_axes.size(); ++j) splits.push_back(make_split(rn[j], a.reduce_axes[j].extent, 1));

  int last = static_cast<int>(a.axes.size()) - 1;
  std::vector<std::pair<int, bool>> vec_pack = {{last, false}};
  for (const auto& c : info.pack_candidates) {
    if (a.axes[c.axis].extent < 4) continue;
    if (c.axis == last) vec_pack.push_back({last, true});
    else if (weight_like(a, *c.input, c.axis)) {
      vec_pack.push_back({c.axis, false});
      vec_pack.push_back({c.axis, true});
    }
  }
  // The choices every anchor sketch makes; the caller names it.
  auto sketch = [&](int vec, bool pack, int acc, bool inl) {
    Sketch s;
    s.rule = SketchRule::Anchor;
    s.splits = splits;
    s.splits[vec].vectorized = true;
    s.vec_axis = vec;
    s.vector_operand_axes = vector_operand_axes(a, vec);
    s.vector_operand_strided = !pack && !reads_contiguously(a, vec);
    s.pack = pack;
    s.acc_level = acc;
    s.inline_producers = inl;
    return s;
  };
  std::vector<Sketch> out;
  std::unordered_set<std::string> seen;
  for (auto [vec, pack] : vec_pack) {
    for (int acc : {2, 1}) {
      for (bool inl : {true, false}) {
        if (!inl && info.producers.empty()) continue;
        Sketch s = sketch(vec, pack, acc, inl);
        s.name = "tile.vec=" + sn[vec] + (pack ? ".pack" : "") + ".acc" + std::to_string(acc) +
                 (info.producers.empty() ? "" : (inl ? ".inline" : ".stage"));
        if (seen.insert(s.name).second) out.push_back(s);
      }
    }
  }
  // The dot-product forms (docs/schedules.md): the grouped reduction axis split over its
  // groups of `width`, the weight packed; `mark` records the form in the sketch.
  std::vector<int> vec_axes;
  for (auto [vec, pack] : vec_pack)
    if (std::find(vec_axes.begin(), vec_axes.end(), vec) == vec_axes.end()) vec_axes.push_back(vec);
  auto add_grouped = [&](int vec, const DotGroups& g, const std::string& kind,
                         const std::function<void(Sketch&)>& mark) {
    const size_t r = static_cast<size_t>(g.reduce_axis);
    for (int acc : {2, 1}) {
      Sketch s = sketch(vec, true, acc, false);
      s.splits[a.axes.size() + r] =
          make_split(rn[r] + std::to_string(g.width), (a.reduce_axes[r].extent + g.width - 1) / g.width, 1);
      mark(s);
      s.name = "tile." + kind + ".vec=" + sn[vec] + ".pack.acc" + std::to_string(acc);
      if (seen.insert(s.name).second) out.push_back(s);
    }
  };
  // Winograd's F(4x4) products stay float32: its transforms amplify bfloat16's rounding
  // of U and V about 12 times (a layer's rms error 2.9e-2 against 2.4e-3 direct, 4.0e-3
  // for F(2x2): docs/schedules.md, "bfloat16 products").
  const bool wide_winograd = a.tag == "winograd_gemm" && !a.axes.empty() && a.axes[0].extent > 4;
  for (int vec : vec_axes) {
    std::optional<DotGroups> p = bf16 && !wide_winograd ? bf16_pairing(info, vec) : std::nullopt;
    if (!p) continue;
    add_grouped(vec, *p, "bf16", [&](Sketch& s) {
      s.bf16_pair = p->reduce_axis;
      if (p->act_vector) {
        // vdpbf16ps takes 4, 8 or 16 lanes (other widths, 24 or 28 lanes, emit slowly):
        // a guarded split offers such tiles of any width.
        s.splits[static_cast<size_t>(vec)].guarded = true;
        s.splits[static_cast<size_t>(vec)].lane_multiple = 16;
      }
    });
  }
  for (int vec : vec_axes) {
    std::optional<DotGroups> q = int8_dot ? dot_groups(info, vec, 4) : std::nullopt;
    if (q) add_grouped(vec, *q, "int8", [&](Sketch& s) { s.int8_quad = q->reduce_axis; });
  }
  for (int vec : vec_axes) {
    // bfloat16 tiles for float32 anchors at precision bf16, 8-bit ones for integer anchors.
    std::optional<AmxForm> f = amx && !wide_winograd ? amx_form(info, vec) : std::nullopt;
    if (!f || !(f->int8 ? int8_dot : bf16)) continue;
    int64_t m = 1, n = 1;
    std::string mn, nn;
    for (int x : f->m_axes) {
      m *= a.axes[static_cast<size_t>(x)].extent;
      mn += (mn.empty() ? "" : ",") + sn[static_cast<size_t>(x)];
    }
    for (int x : f->n_axes) {
      n *= a.axes[static_cast<size_t>(x)].extent;
      nn += (nn.empty() ? "" : ",") + sn[static_cast<size_t>(x)];
    }
    auto amx_sketch = [&](bool direct, int64_t row_tiles, bool flat = false) {
      Sketch s;
      s.rule = SketchRule::CpuAmx;
      s.vec_axis = vec;
      (f->int8 ? s.int8_quad : s.bf16_pair) = f->k_axes.front();
      s.amx_direct = direct;
      s.amx_flat_rows = flat;
      s.pack = true;
      s.unroll_menu = {0};
      s.splits = {make_split("m16", row_tiles, 1), make_split("n16", (n + 15) / 16, 1)};
      for (SplitSpec& sp : s.splits) sp.guarded = true;
      s.name = std::string(f->int8 ? "amx.int8." : "amx.bf16.") +
               (flat     ? "flat."
                : direct ? "direct."
                         : "") +
               "m=" + mn + ".n=" + nn;
      if (seen.insert(s.name).second) out.push_back(s);
    };
    // In place first (the default where both apply): a convolution's windows uncopied.
    // Without windows (a dense layer, a 1x1 convolution) the row-by-row copy is the same
    // or smaller.
    // Rows across output rows first where they apply: the plane's positions past the
    // output's columns (the window's reach) waste less than tiles of one row each.
    std::optional<AmxDirect> d = amx_direct_form(info, *f);
    if (d && !d->window_k.empty() && d->y_axis >= 0) {
      const int64_t h = a.axes[static_cast<size_t>(d->y_axis)].extent,
                    w = a.axes[static_cast<size_t>(d->row_axis)].extent;
      amx_sketch(true, m / (h * w) * flat_plane_tiles(*d, h, w), true);
    }
    if (d && !d->window_k.empty()) {
      const int64_t w = a.axes[static_cast<size_t>(d->row_axis)].extent;
      amx_sketch(true, m / w * ((w + 15) / 16));
    }
    amx_sketch(false, (m + 15) / 16);
  }
  return out;
}

// Per stage after the first k (row) axes: its last free axis split ("stN.v", the
// vector lanes on the CPU) and its last reduction axis split ("stN.r"; on the CPU the
// vector lanes instead when nothing is free after the rows: a row's max or sum).
void add_stage_splits(Sketch& s, const GenericInfo& info, int k, bool vectorized) {
  for (size_t j = 0; j < info.stages.size(); ++j) {
    const te::OpNode& st = *info.stages[j];
    int64_t free = std::accumulate(st.shape.begin() + std::min<size_t>(k, st.shape.size()), st.shape.end(), int64_t{1},
                                   std::multiplies<int64_t>());
    bool lanes_reduce = vectorized && !st.reduce_axes.empty() && free == 1;
    if (static_cast<int>(st.axes.size()) > k)
      s.splits.push_back(
          make_split("st" + std::to_string(j) + ".v", st.axes.back().extent, 1, vectorized && !lanes_reduce));
    if (!st.reduce_axes.empty())
      s.splits.push_back(make_split("st" + std::to_string(j) + ".r", st.reduce_axes.back().extent, 1, lanes_reduce));
  }
}

// Whether tiles of rows along the last shared axis share loads: some reduction stage
// with free axes after the rows reads an input without that axis (attention's scores
// read the keys, its weighted sum the values, the same for every query row).
bool shares_across_rows(const GenericInfo& info) {
  const int k = info.max_prefix;
  if (k < 1 || info.stages.back()->shape[k - 1] < 2) return false;
  for (const te::Op& st : info.stages) {
    if (st->reduce_axes.empty() || static_cast<int>(st->axes.size()) <= k) continue;
    int64_t free = 1;
    for (size_t d = k; d < st->axes.size(); ++d) free *= st->axes[d].extent;
    if (free < 2) continue;
    const Var& row = st->axes[k - 1].var;
    for (const Expr& l : loads_in(inline_stages(st->body, info.inlined))) {
      const te::OpNode* p = producer_of(l->buffer);
      if (p && !p->is_placeholder) continue;
      bool uses = false;
      for (const Expr& ix : l->args) uses = uses || uses_var(ix, row);
      if (!uses) return true;
    }
  }
  return false;
}

std::vector<Sketch> generic_sketches(const GenericInfo& info) {
  std::vector<Sketch> out;
  std::vector<int> prefixes = {info.max_prefix};
  // A single reduction whose every output axis is a row (pooling, a reduction over
  // inner axes that keeps the others): also the sketch that leaves the last output axis
  // out of the rows, so that it is vectorized around the reduction loops instead of
  // one scalar row per output element.
  if (info.stages.size() == 1 && !info.stages[0]->reduce_axes.empty() && info.max_prefix > 0 &&
      info.max_prefix == static_cast<int>(info.stages[0]->axes.size()) && info.stages[0]->axes.back().extent >= 4)
    prefixes.push_back(info.max_prefix - 1);
  // Stages one after another through global buffers: only where no intermediate stage is
  // larger than the output (softmax's and the norms' row statistics), since writing out
  // a larger one (attention's scores) costs more traffic than the whole task.
  if (info.max_prefix > 0 && info.stages.size() > 1) {
    int64_t largest = 1;
    for (size_t j = 0; j + 1 < info.stages.size(); ++j) largest = std::max(largest, te::Tensor(info.stages[j]).numel());
    if (largest <= te::Tensor(info.stages.back()).numel()) prefixes.push_back(0);
  }
  for (int k : prefixes) {
    Sketch s;
    s.rule = SketchRule::Generic;
    s.prefix = k;
    add_stage_splits(s, info, k, /*vectorized=*/true);
    s.name = k > 0 ? "rows.prefix=" + std::to_string(k) : "stages";
    out.push_back(s);
  }
  if (shares_across_rows(info)) {
    const int k = info.max_prefix;
    Sketch s;
    s.rule = SketchRule::Generic;
    s.prefix = k;
    s.tile_rows = true;
    // Deeper unrolling repeats every stage's body per row of the tile: the exponentials'
    // constants spill (BERT-base attention, tiles of 4: 903 us at 64, 1716 at 512).
    s.unroll_menu = {0, 16, 64};
    s.splits.push_back(make_split("rows.t", info.stages.back()->shape[k - 1], 1));
    add_stage_splits(s, info, k, /*vectorized=*/true);
    s.name = "rows.tile.prefix=" + std::to_string(k);
    out.push_back(s);
  }
  return out;
}

// GpuTile: every split a divisor tiling (GPU tiles need no guards: a thread count
// that does not divide leaves the last block's threads idle instead).
Sketch gpu_tile_sketch(const AnchorInfo& info) {
  const te::OpNode& a = *info.anchor;
  Sketch s;
  s.rule = SketchRule::GpuTile;
  s.name = "gpu.tile";
  std::vector<std::string> sn = axis_names(a, false), rn = axis_names(a, true);
  for (size_t i = 0; i < a.axes.size(); ++i) s.splits.push_back({sn[i], a.axes[i].extent, 3, false, false});
  for (size_t j = 0; j < a.reduce_axes.size(); ++j)
    s.splits.push_back({rn[j], a.reduce_axes[j].extent, 1, false, false});
  for (const CachedInput& c : cached_inputs(info)) {
    SharedFootprint fp;
    fp.elem_bytes = std::max(1, c.buffer->dtype.bits / 8);
    fp.coef = c.coef;
    s.shared.push_back(fp);
  }
  return s;
}

// GpuMma: the anchor as a GEMM, when its body is a sum of products of two float32
// factors such that a spatial axis is read by one factor alone (the rows, M), another
// by the other factor alone (the columns, N), and a reduction axis by both (k). Extents
// that are not multiples of the fragment's (16, 8, 8) are padded: the tiles past them
// are masked, their elements zero and never stored. Of the candidates, the one that
// wastes least (the useful share of the padded M x N x k), the columns the output's
// innermost axis on a tie (a thread's two adjacent results adjacent in memory); none
// when more than half the padded work would be waste (a matrix-vector product).
std::optional<Sketch> gpu_mma_sketch(const AnchorInfo& info, const std::string& precision) {
  Sketch s;
  s.mma_precision = precision;
  const int64_t kdim = mma_kdim(s);
  const te::OpNode& a = *info.anchor;
  if (a.reduce != te::ReduceKind::Sum || a.body.kind() != ExprKind::Mul || a.buffer->dtype != DType::f32())
    return std::nullopt;
  auto reads = [&](int factor, const te::IterVar& ax) { return uses_var(a.body.arg(factor), ax.var); };
  auto useful = [](int64_t extent, int64_t frag) {
    return static_cast<double>(extent) / static_cast<double>((extent + frag - 1) / frag * frag);
  };
  int best_k = -1;
  for (size_t j = 0; j < a.reduce_axes.size(); ++j) {
    const te::IterVar& r = a.reduce_axes[j];
    if (!reads(0, r) || !reads(1, r)) continue;
    // The least padding, then the longest (the fewest steps of the loops around).
    if (best_k < 0 || useful(r.extent, kdim) > useful(a.reduce_axes[best_k].extent, kdim) ||
        (useful(r.extent, kdim) == useful(a.reduce_axes[best_k].extent, kdim) &&
         r.extent > a.reduce_axes[best_k].extent))
      best_k = static_cast<int>(j);
  }
  if (best_k < 0) return std::nullopt;
  double best = 0;
  const int last = static_cast<int>(a.axes.size()) - 1;
  for (int fa = 0; fa < 2; ++fa)
    for (int m = 0; m <= last; ++m)
      for (int n = 0; n <= last; ++n) {
        if (!reads(fa, a.axes[m]) || reads(1 - fa, a.axes[m])) continue;
        if (!reads(1 - fa, a.axes[n]) || reads(fa, a.axes[n])) continue;
        double u = useful(a.axes[m].extent, kMmaM) * useful(a.axes[n].extent, kMmaN);
        // Ties: the columns innermost, then the later axes (inner ones are contiguous).
        bool better = u > best + 1e-12 || (u > best - 1e-12 && (n == last) > (s.mma_n == last)) ||
                      (u > best - 1e-12 && (n == last) == (s.mma_n == last) && m + n > s.mma_m + s.mma_n);
        if (s.mma_m >= 0 && !better) continue;
        best = u;
        s.mma_a = fa;
        s.mma_m = m;
        s.mma_n = n;
      }
  if (s.mma_m < 0 || best * useful(a.reduce_axes[best_k].extent, kdim) < 0.5) return std::nullopt;
  s.mma_k = best_k;
  s.rule = SketchRule::GpuMma;
  s.name = "gpu.mma." + precision;
  // Deep enough to unroll a warp's fragments (32 steps each) so that they stay in registers.
  s.unroll_menu = {64, 512, 4096};
  std::vector<std::string> sn = axis_names(a, false), rn = axis_names(a, true);
  auto frags = [](int64_t extent, int64_t frag) { return (extent + frag - 1) / frag; };
  // Fragments per axis: divisor tilings, guarded where the count is awkward (7 of
  // ResNet's 56 columns: tiles of 2, 3 and 4 fragments too, the last block masked).
  s.splits.push_back(make_split(sn[s.mma_m], frags(a.axes[s.mma_m].extent, kMmaM), 2));
  s.splits.push_back(make_split(sn[s.mma_n], frags(a.axes[s.mma_n].extent, kMmaN), 2));
  s.splits.push_back(make_split(rn[s.mma_k], frags(a.reduce_axes[s.mma_k].extent, kdim), 1));
  for (size_t j = 0; j < a.reduce_axes.size(); ++j)
    if (static_cast<int>(j) != s.mma_k) s.mma_other_reduce *= a.reduce_axes[j].extent;
  for (int op = 0; op < 2; ++op) {
    const int factor = op == 0 ? s.mma_a : 1 - s.mma_a;
    MmaOperandLayout l = mma_operand_layout(info, factor, op == 0 ? s.mma_m : s.mma_n, s.mma_k);
    s.mma_k_inner[op] = l.k_inner;
    s.mma_vector[op] = l.vector;
  }
  s.mma_store_lanes = mma_store_lanes(info, s.mma_n);
  return s;
}

}  // namespace

void check_precision(const std::string& precision) {
  if (precision.empty() || precision == "f32" || precision == "tf32" || precision == "fp32" || precision == "fp16" ||
      precision == "bf16")
    return;
  throw Error("unknown precision '" + precision + "' (f32 or bf16; on cuda also tf32 or fp16)");
}

std::string resolve_precision(const std::string& target, const std::string& precision) {
  check_precision(precision);
  if (target == "llvm") {
    if (precision.empty() || precision == "f32" || precision == "fp32") return "f32";
    if (precision == "bf16") return "bf16";
    throw Error("precision '" + precision + "' is not available on the CPU (--target llvm): f32 or bf16");
  }
  if (precision.empty()) return "tf32";
  return precision == "f32" ? "fp32" : precision;
}

std::string precision_note(const std::string& target, const std::string& precision) {
  if (target == "llvm" && resolve_precision(target, precision) == "bf16" && !this_host().bf16_dot)
    return "this CPU has no AVX512-BF16 (" + this_host().vector_isa + "): --precision bf16 runs float32 programs";
  return "";
}

bool stores_bf16_activations(const std::string& target, const std::string& precision) {
  return target == "llvm" && resolve_precision(target, precision) == "bf16" && this_host().bf16_dot;
}

std::string task_precision(const std::string& precision, bool writes_output) {
  return writes_output && (precision == "bf16" || precision == "fp16") ? "" : precision;
}

int64_t mma_kdim(const Sketch& s) { return s.mma_precision == "tf32" ? kMmaK : kMmaK16; }

MathFn mma_rounding(const Sketch& s) {
  if (s.mma_precision == "fp16") return MathFn::fp16;
  if (s.mma_precision == "bf16") return MathFn::bf16;
  return MathFn::tf32;
}

std::vector<Sketch> sketches_of_every_precision(const ops::OpGraph& task, const std::string& target) {
  std::vector<Sketch> out = sketches_for(task, target, "");
  if (target == "llvm") {
    for (Sketch& s : cpu_sketches(task, true))
      if (s.bf16_pair >= 0) out.push_back(std::move(s));
  }
  if (target == "cuda")
    for (const char* precision : {"fp16", "bf16"})
      for (Sketch& s : gpu_sketches(task, precision))
        if (s.rule == SketchRule::GpuMma) out.push_back(std::move(s));
  return out;
}

size_t default_sketch(const std::vector<Sketch>& sketches) {
  for (size_t i = 0; i < sketches.size(); ++i)
    if (sketches[i].rule == SketchRule::CpuAmx) return i;
  for (size_t i = 0; i < sketches.size(); ++i)
    if (sketches[i].rule == SketchRule::GpuMma || sketches[i].bf16_pair >= 0 || sketches[i].int8_quad >= 0) return i;
  return 0;
}

double result_tolerance(const Sketch& s, double fp32_tolerance) {
  if (s.bf16_pair >= 0) return std::max(fp32_tolerance, 3e-2);
  if (s.rule != SketchRule::GpuMma) return fp32_tolerance;
  return std::max(fp32_tolerance, s.mma_precision == "bf16" ? 3e-2 : 5e-3);
}

double oracle_tolerance(const Sketch& s, double tolerance) {
  return s.amx_attention ? std::max(tolerance, 4e-3) : tolerance;
}

double storage_tolerance(const ops::OpGraph& task, double tolerance) {
  for (const te::Tensor& t : task.outputs)
    if (t.dtype().is_bf16()) return std::max(tolerance, 1.0 / 128);
  return tolerance;
}

std::vector<Sketch> gpu_sketches(const ops::OpGraph& task, const std::string& given) {
  if (auto b = output_border(task)) return gpu_sketches(without_border(task, *b), given);
  const std::string precision = resolve_precision("cuda", given);
  if (auto anchor = analyze_anchor(task)) {
    std::vector<Sketch> out = {gpu_tile_sketch(*anchor)};
    if (precision != "fp32")
      if (auto mma = gpu_mma_sketch(*anchor, precision)) {
        out.push_back(*mma);
        for (int stages : {2, 3}) {
          Sketch p = *mma;
          if (p.splits[2].extent * p.mma_other_reduce < stages) continue;  // too few steps
          p.mma_stages = stages;
          p.name += ".async" + std::to_string(stages);
          out.push_back(p);
        }
      }
    return out;
  }
  GenericInfo info = analyze_generic(task);
  if (info.stages.empty() || task.outputs.size() != 1) return {};
  const te::OpNode& out = *task.outputs[0].op();
  int k = info.max_prefix;
  // One injective stage: every output element is a row of its own.
  if (info.stages.size() == 1 && info.stages[0]->reduce_axes.empty()) k = static_cast<int>(out.shape.size());
  if (k == 0) return {};
  Sketch s;
  s.rule = SketchRule::GpuRows;
  s.prefix = k;
  s.name = "gpu.rows.prefix=" + std::to_string(k);
  int64_t rows = 1;
  for (int d = 0; d < k; ++d) rows *= out.shape[d];
  // Threads per block: any count built from 2, 3 and the rows' primes, the last block
  // guarded.
  SplitSpec t = make_split("rows.t", rows, 1);
  t.guarded = true;
  s.splits.push_back(t);
  add_stage_splits(s, info, k, /*vectorized=*/false);
  std::vector<Sketch> result = {s};
  // Cross-thread reduction: every reduction stage one value per row (its axes after the
  // rows of extent 1), every other stage the output, elementwise over the row.
  bool reduces = false, fits = info.max_prefix > 0 && k == info.max_prefix;
  int64_t widest = 1;
  for (const te::Op& st : info.stages) {
    int64_t n = 1;
    if (!st->reduce_axes.empty()) {
      reduces = true;
      for (size_t d = k; d < st->axes.size(); ++d) fits &= st->axes[d].extent == 1;
      for (const te::IterVar& r : st->reduce_axes) n *= r.extent;
    } else {
      fits &= st.get() == &out;  // the output
      for (size_t d = k; d < st->axes.size(); ++d) n *= st->axes[d].extent;
    }
    widest = std::max(widest, n);
  }
  if (reduces && fits && widest > 1) {
    Sketch r;
    r.rule = SketchRule::GpuReduce;
    r.prefix = k;
    r.name = "gpu.reduce.prefix=" + std::to_string(k);
    // Threads per block: built from 2, 3 and the row's primes, at most 1024.
    SplitSpec t = make_split("red.t", widest, 1);
    t.guarded = true;
    r.splits.push_back(t);
    result.push_back(r);
    // The same with warp shuffles: whole warps, at most 32 (1024 threads).
    Sketch w = r;
    w.warp_shuffle = true;
    w.name = "gpu.reduce.shfl.prefix=" + std::to_string(k);
    w.splits[0] = make_split("red.w", (widest + kWarp - 1) / kWarp, 1);
    w.splits[0].guarded = true;
    result.push_back(w);
  }
  return result;
}

std::vector<Sketch> sketches_for(const ops::OpGraph& task, const std::string& target, const std::string& precision) {
  if (target == "llvm")
    return cpu_sketches(task, resolve_precision(target, precision) == "bf16" && this_host().bf16_dot);
  if (target == "cuda") return gpu_sketches(task, resolve_precision(target, precision));
  throw Error("unknown target '" + target + "' (llvm or cuda)");
}

std::vector<Sketch> cpu_sketches(const ops::OpGraph& task, bool bf16) {
  // vpdpbusd, or vpmaddwd on widened bytes (AVX2, AVX-512 without VNNI).
  const HostInfo& h = this_host();
  return cpu_sketches(task, bf16, h.int8_dot || h.vector_isa == "avx2" || h.vector_isa == "avx512", h.amx_bf16);
}

std::vector<Sketch> cpu_sketches(const ops::OpGraph& task, bool bf16, bool int8_dot, bool amx) {
  if (auto b = output_border(task)) return cpu_sketches(without_border(task, *b), bf16, int8_dot, amx);
  if (auto info = analyze_anchor(task)) return anchor_sketches(*info, bf16, int8_dot, amx);
  GenericInfo info = analyze_generic(task);
  std::vector<Sketch> out = generic_sketches(info);
  // Attention on AMX tiles: the scores' row block (TM x 16 rows of S float32) lives on
  // the stack, so S is bounded.
  std::optional<AmxAttention> att = bf16 && amx ? amx_attention_form(info) : std::nullopt;
  if (att && att->S <= 4096) {
    Sketch s;
    s.rule = SketchRule::CpuAmx;
    s.amx_attention = true;
    s.bf16_pair = 0;
    s.unroll_menu = {0};
    s.splits = {make_split("m16", (att->L + 15) / 16, 1),
                make_split("n16", std::max((att->S + 15) / 16, (att->E + 15) / 16), 1)};
    for (SplitSpec& sp : s.splits) sp.guarded = true;
    s.name = "amx.bf16.attention";
    out.push_back(s);
  }
  return out;
}

}  // namespace basin::sched
