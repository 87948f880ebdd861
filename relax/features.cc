#include "relax/features.h"

#include <cmath>

#include "core/schedule/sketch.h"
#include "core/util/error.h"

namespace basin::relax {

namespace {

// Cache capacities of the traffic features: about the vector registers, an L1, an L2
// and an L3 of a server core.
const std::pair<const char*, double> kTrafficCapacities[] = {
    {"2KiB", 2048.0}, {"32KiB", 32768.0}, {"1MiB", 1048576.0}, {"32MiB", 33554432.0}};

// The share of an AMX nest's lane-iterations that count as one vector multiply-add each
// (the store under the pragma, Walker::store).
constexpr double kAmxShare = 1.0 / 8;

const char* kSlotFeatures[] = {"unique_bytes", "reuse_ratio", "innermost_stride", "reuse_distance_bytes",
                               "vector_stride"};

std::vector<std::string> make_names() {
  std::vector<std::string> n = {"flops_add",  "flops_mul",    "flops_div",       "flops_math",   "flops_cmp_select",
                                "iterations", "vector_lanes", "parallel_extent", "unroll_depth", "unroll_steps"};
  for (int s = 0; s < kBufferSlots; ++s)
    for (const char* f : kSlotFeatures) n.push_back("buf" + std::to_string(s) + "." + f);
  n.push_back("local_alloc_bytes");
  for (int l = 1; l <= kIntensityLevels; ++l) n.push_back("intensity.level" + std::to_string(l));
  for (int l = 1; l <= kIntensityLevels; ++l) n.push_back("footprint.level" + std::to_string(l));
  n.push_back("innermost_extent");
  for (const auto& [name, bytes] : kTrafficCapacities) n.push_back(std::string("traffic.") + name);
  for (const char* f : {"guards", "guards_in_vector", "guarded_loads"}) n.push_back(f);
  return n;
}

std::vector<std::string> make_gpu_names() {
  std::vector<std::string> n = make_names();
  for (const char* f : {"gpu.blocks", "gpu.threads_per_block", "gpu.vthreads", "gpu.shared_bytes",
                        "gpu.thread_local_bytes", "gpu.tensor_core", "gpu.async_copy"})
    n.push_back(f);
  for (int s = 0; s < kBufferSlots; ++s) n.push_back("buf" + std::to_string(s) + ".shared");
  return n;
}

Expr f64(const Expr& e) { return e.dtype() == DType::f64() ? e : cast(DType::f64(), e); }
Expr one() { return float_imm(DType::f64(), 1.0); }
Expr zero() { return float_imm(DType::f64(), 0.0); }
Expr abs64(const Expr& x) { return select(lt(x, zero()), zero() - x, x); }

struct Loop {
  Var var;
  Expr extent;  // f64
  ForKind kind;
  bool under_unroll;
};

// Operations per evaluation of a stored value, by kind: float arithmetic, and integer
// arithmetic on loaded values (a quantized model's products and sums; not index
// arithmetic, in load indices or guards).
struct OpCounts {
  int add = 0, mul = 0, div = 0, math = 0, cmp = 0;
};
// Whether x depends on a loaded value; x's operations added to c.
bool count_ops(const Expr& x, OpCounts& c) {
  if (x.kind() == ExprKind::Load) return true;
  bool data = false;
  for (size_t i = 0; i < x.num_args(); ++i) data |= count_ops(x.arg(i), c);
  const bool fl = x.dtype().is_float() || (data && x.dtype().is_int());
  switch (x.kind()) {
    case ExprKind::Add:
    case ExprKind::Sub:
      c.add += fl;
      break;
    case ExprKind::Mul:
      c.mul += fl;
      break;
    case ExprKind::Div:
      c.div += fl;
      break;
    case ExprKind::Call:
      c.math += 1;
      break;
    case ExprKind::Min:
    case ExprKind::Max:
    case ExprKind::Select:
      c.cmp += fl;
      break;
    case ExprKind::EQ:
    case ExprKind::NE:
    case ExprKind::LT:
    case ExprKind::LE:
    case ExprKind::GT:
    case ExprKind::GE:
      c.cmp += x.arg(0).dtype().is_float();
      break;
    default:
      break;
  }
  return data;
}
OpCounts count_ops(const Expr& value) {
  OpCounts c;
  count_ops(value, c);
  return c;
}

// An access: the buffer and its flat index as an integer expression (loads inside the
// index replaced by 0).
struct Access {
  Buffer buffer;
  Expr flat;
};
// e with every load replaced by 0 (gathers: indices and guards read only loop variables).
Expr no_loads(const Expr& e) {
  return rewrite_post_order(
      e, [](const Expr& x) -> Expr { return x.kind() == ExprKind::Load ? make_const(x.dtype(), 0) : Expr(); });
}
Expr flat_of(const Buffer& b, const std::vector<Expr>& idx) {
  if (idx.empty()) return Expr(int64_t{0});
  Expr flat = no_loads(idx[0]);
  for (size_t d = 1; d < idx.size(); ++d) flat = flat * b->shape[d] + no_loads(idx[d]);
  return flat;
}

class Walker {
 public:
  explicit Walker(FeatureSet set) : set_(set) {}
  std::vector<StoreFeatures> out;

  void walk(const Stmt& s) {
    const StmtNode& n = *s;
    switch (n.kind) {
      case StmtKind::For:
        loops_.push_back({n.var, f64(n.extent), n.for_kind, unroll_.defined()});
        walk(n.body[0]);
        loops_.pop_back();
        return;
      case StmtKind::Allocate: {
        Expr saved = local_bytes_, saved_shared = shared_bytes_, saved_thread = thread_bytes_;
        if (n.buffer->scope != MemScope::Global) {
          Expr size = buffer_bytes(n.buffer);
          local_bytes_ = local_bytes_.defined() ? local_bytes_ + size : size;
          if (n.buffer->scope == MemScope::Shared) {
            shared_bytes_ = shared_bytes_.defined() ? shared_bytes_ + size : size;
          } else {
            Expr mine = thread_own_bytes(n.buffer, in_thread_loop());
            thread_bytes_ = thread_bytes_.defined() ? thread_bytes_ + mine : mine;
          }
        }
        walk(n.body[0]);
        local_bytes_ = saved;
        shared_bytes_ = saved_shared;
        thread_bytes_ = saved_thread;
        return;
      }
      case StmtKind::Pragma: {
        Expr saved = unroll_;
        const double saved_mma = in_mma_;
        const Expr saved_async = async_;
        if (n.key == "auto_unroll_max_step") unroll_ = f64(n.pragma_value);
        if (n.key == sched::kMmaPragma) {
          // The tensor cores' rate: FP16 and BF16 inputs twice TF32's.
          in_mma_ = 1;
          visit_stmt(n.body[0], [&](const Stmt& st) {
            if (st.kind() == StmtKind::Store)
              post_order_visit(st->value, [&](const Expr& x) {
                if (x.kind() == ExprKind::Call && (x->fn == MathFn::fp16 || x->fn == MathFn::bf16)) in_mma_ = 2;
              });
          });
        }
        if (n.key == sched::kAsyncCopyPragma) async_ = f64(n.pragma_value);
        const bool saved_int8 = in_int8_dot_, saved_amx = in_amx_;
        in_int8_dot_ = saved_int8 || n.key == kInt8DotPragma;
        in_amx_ = saved_amx || n.key == kAmxBf16Pragma || n.key == kAmxInt8Pragma;
        walk(n.body[0]);
        in_int8_dot_ = saved_int8;
        in_amx_ = saved_amx;
        unroll_ = saved;
        in_mma_ = saved_mma;
        async_ = saved_async;
        return;
      }
      case StmtKind::IfThenElse: {
        bool in_vector = false;
        for (const Loop& l : loops_) in_vector |= l.kind == ForKind::Vectorized;
        Expr cond = no_loads(n.cond);
        guards_.push_back({cond, in_vector});
        walk(n.body[0]);
        if (n.body.size() > 1) {
          guards_.back().cond = logical_not(cond);
          walk(n.body[1]);
        }
        guards_.pop_back();
        return;
      }
      case StmtKind::Store:
        store(n);
        return;
      default:
        for (const Stmt& c : n.body) walk(c);
        return;
    }
  }

 private:
  bool in_thread_loop() const {
    for (const Loop& l : loops_)
      if (is_gpu_thread(l.kind)) return true;
    return false;
  }

  // The flat index with loop `which` at `at` and every other enclosing loop at 0.
  Expr index_at(const Expr& flat, int which, const Expr& at) {
    VarMap m;
    for (size_t l = 0; l < loops_.size(); ++l)
      m[loops_[l].var.id()] = static_cast<int>(l) == which ? at : int_imm(loops_[l].var.dtype(), 0);
    return substitute(flat, m);
  }

  // e with every enclosing loop at its first (last = false) or last iteration.
  Expr at_corner(const Expr& e, bool last) {
    VarMap m;
    for (const Loop& l : loops_) {
      DType t = l.var.dtype();
      m[l.var.id()] = last ? cast(t, l.extent) - int_imm(t, 1) : int_imm(t, 0);
    }
    return substitute(e, m);
  }
  // 1 when a condition of the loop variables fails at this configuration, else 0. The
  // conditions are guards of tiles past an extent and padding tests, monotone in each
  // loop, so they fail somewhere exactly when they fail at the first or last iteration.
  Expr can_fail(const Expr& cond) {
    return select(logical_and(at_corner(cond, false), at_corner(cond, true)), zero(), one());
  }

  // |change of the flat index when loop l steps from 0 to 1| (every other loop at 0).
  Expr stride_along(const Expr& flat, int l) {
    Expr step = index_at(flat, l, int_imm(loops_[l].var.dtype(), 1)) - index_at(flat, -1, Expr());
    return abs64(f64(step));
  }

  void store(const StmtNode& n) {
    std::vector<Access> acc = {{n.buffer, flat_of(n.buffer, n.indices)}};
    post_order_visit(n.value, [&](const Expr& x) {
      if (x.kind() != ExprKind::Load) return;
      for (const Access& a : acc)
        if (a.buffer.get() == x->buffer.get()) return;
      acc.push_back({x->buffer, flat_of(x->buffer, x->args)});
    });
    acc.resize(std::min<size_t>(acc.size(), kBufferSlots));

    int depth = static_cast<int>(loops_.size());
    Expr iters = one();
    for (const Loop& l : loops_) iters = iters * l.extent;
    // A group of four 8-bit products (kInt8DotPragma) is one vpdpbusd per vector: the
    // issue cost of one float multiply-add. Inside an AMX nest (kAmxBf16Pragma,
    // kAmxInt8Pragma) one tile product covers 16 x 16 x 16 of the nest's lane-iterations
    // (a pair of bfloat16 or a group of four 8-bit products each) in about 16 cycles, the
    // issue time of 32 vector multiply-adds of 16 lanes: a multiply-add per lane for
    // kAmxShare of the iterations.
    OpCounts c = in_int8_dot_ || in_amx_ ? OpCounts{1, 1, 0, 0, 0} : count_ops(n.value);
    const Expr op_share = float_imm(DType::f64(), in_amx_ ? kAmxShare : 1.0);
    auto times = [&](int k) { return float_imm(DType::f64(), k) * iters * op_share; };
    std::vector<Expr> v = {times(c.add), times(c.mul), times(c.div), times(c.math), times(c.cmp), iters};
    Expr lanes = one(), par = one(), steps = one();
    for (const Loop& l : loops_) {
      if (l.kind == ForKind::Vectorized) lanes = lanes * l.extent;
      if (l.kind == ForKind::Parallel) par = par * l.extent;
      if (l.kind == ForKind::Serial && l.under_unroll) steps = steps * l.extent;
    }
    v.push_back(lanes);
    v.push_back(par);
    v.push_back(unroll_.defined() ? unroll_ : zero());
    v.push_back(unroll_.defined() ? min(unroll_, steps) : zero());

    // Per access: whether each loop moves its index, and unique elements inside each level.
    std::vector<std::vector<Expr>> inner_unique(acc.size());  // [slot][level j]: loops j..depth-1
    std::vector<Expr> bytes_of(acc.size());
    std::vector<std::vector<Expr>> slot_moves(acc.size(), std::vector<Expr>(depth));  // 1 when loop l moves the index
    for (size_t a = 0; a < acc.size(); ++a) {
      const Expr& flat = acc[a].flat;
      Expr base = index_at(flat, -1, Expr());
      std::vector<Expr>& u = inner_unique[a];
      u.assign(depth + 1, one());
      for (int l = depth - 1; l >= 0; --l) {
        Expr at_end =
            index_at(flat, l, cast(loops_[l].var.dtype(), loops_[l].extent) - int_imm(loops_[l].var.dtype(), 1));
        Expr moves = select(ne(at_end, base), one(), zero());
        slot_moves[a][l] = moves;
        u[l] = u[l + 1] * (one() + moves * (loops_[l].extent - one()));
      }
      bytes_of[a] = float_imm(DType::f64(), acc[a].buffer->dtype.bytes());
    }
    // footprint[j]: bytes all the store's accesses touch in the nest of loops j..depth-1.
    std::vector<Expr> footprint(depth + 1, zero());
    for (int j = 0; j <= depth; ++j)
      for (size_t a = 0; a < acc.size(); ++a) footprint[j] = footprint[j] + inner_unique[a][j] * bytes_of[a];
    for (int s = 0; s < kBufferSlots; ++s) {
      if (s >= static_cast<int>(acc.size())) {
        v.insert(v.end(), {zero(), zero(), zero(), zero(), zero()});
        continue;
      }
      const Expr& flat = acc[s].flat;
      Expr unique = inner_unique[s][0];
      v.push_back(unique * bytes_of[s]);
      v.push_back(iters / unique);
      v.push_back(depth == 0 ? zero() : stride_along(flat, depth - 1));
      // Reuse distance: the bytes touched between two uses of an element, that is the
      // footprint of one iteration of the innermost loop that repeats the access (does
      // not move its index, extent above 1); 0 when no loop does.
      Expr distance = zero();
      for (int l = 0; l < depth; ++l)
        distance =
            select(logical_and(eq(slot_moves[s][l], zero()), gt(loops_[l].extent, one())), footprint[l + 1], distance);
      v.push_back(distance);
      // The vector loop's stride: 0 without one (or with one lane), else 1 + |elements
      // between lanes| (1: one value broadcast, 2: contiguous, more: a gather or scatter).
      Expr vstride = zero();
      for (int l = 0; l < depth; ++l)
        if (loops_[l].kind == ForKind::Vectorized)
          vstride = select(gt(loops_[l].extent, one()), one() + stride_along(flat, l), zero());
      v.push_back(vstride);
    }
    v.push_back(local_bytes_.defined() ? local_bytes_ : zero());
    // Arithmetic intensity of the nest inside each of the innermost levels.
    Expr flops_per_iter = float_imm(DType::f64(), c.add + c.mul + c.div + c.math + c.cmp) * op_share;
    for (int k = 1; k <= kIntensityLevels; ++k) {
      int j = std::max(0, depth - k);
      Expr it = one();
      for (int l = j; l < depth; ++l) it = it * loops_[l].extent;
      v.push_back(flops_per_iter * it / footprint[j]);
    }
    // The working set of each tiling level, against the cache sizes.
    for (int k = 1; k <= kIntensityLevels; ++k) v.push_back(footprint[std::max(0, depth - k)]);
    v.push_back(depth == 0 ? one() : loops_[depth - 1].extent);
    // Traffic into a cache of capacity C: the nest inside the outermost loop level whose
    // footprint fits in C is loaded once per execution of that nest, so the bytes moved
    // are that footprint times the iterations of the loops outside it. Going outward the
    // footprint grows at most as fast as the outer iterations shrink, so the outermost
    // level that fits moves the fewest bytes. This sees every tiling level, not only the
    // innermost five of footprint.levelK: the outer tiles' sizes and order.
    std::vector<Expr> outer(depth + 1, one());  // iterations of loops 0..j-1
    for (int j = 1; j <= depth; ++j) outer[j] = outer[j - 1] * loops_[j - 1].extent;
    for (const auto& [name, bytes] : kTrafficCapacities) {
      const Expr cap = float_imm(DType::f64(), bytes);
      Expr traffic = footprint[depth] * outer[depth];
      for (int j = depth - 1; j >= 0; --j) traffic = select(le(footprint[j], cap), footprint[j] * outer[j], traffic);
      v.push_back(traffic);
    }
    // Guards that fail somewhere at this configuration: a tile past an awkward extent
    // (docs/schedules.md) costs a branch around the store, masked stores when the guard
    // is inside a vector loop, and masked loads for the guarded loads of the value. A
    // configuration whose tiles divide the extent compiles without them.
    Expr guards = zero(), guards_vector = zero(), guarded_loads = zero();
    for (const Guard& g : guards_) {
      Expr fails = can_fail(g.cond);
      guards = guards + fails;
      if (g.in_vector) guards_vector = guards_vector + fails;
    }
    post_order_visit(n.value, [&](const Expr& x) {
      if (x.kind() == ExprKind::Select && (x.arg(1).kind() == ExprKind::Load || x.arg(2).kind() == ExprKind::Load))
        guarded_loads = guarded_loads + can_fail(no_loads(x.arg(0)));
    });
    v.insert(v.end(), {guards, guards_vector, guarded_loads});
    if (set_ == FeatureSet::Gpu) {
      Expr blocks = one(), threads = one(), vthreads = one();
      for (const Loop& l : loops_) {
        if (is_gpu_block(l.kind)) blocks = blocks * l.extent;
        if (is_gpu_thread(l.kind)) threads = threads * l.extent;
        if (l.kind == ForKind::VThread) vthreads = vthreads * l.extent;
      }
      v.insert(v.end(), {blocks, threads, vthreads, shared_bytes_.defined() ? shared_bytes_ : zero(),
                         thread_bytes_.defined() ? thread_bytes_ : zero(), float_imm(DType::f64(), in_mma_),
                         async_.defined() ? async_ : zero()});
      for (int s = 0; s < kBufferSlots; ++s)
        v.push_back(s < static_cast<int>(acc.size()) && acc[s].buffer->scope == MemScope::Shared ? one() : zero());
    }
    BASIN_CHECK(static_cast<int>(v.size()) == num_features(set_)) << v.size() << " features";
    out.push_back({n.buffer->name, v});
  }

  struct Guard {
    Expr cond;
    bool in_vector;  // inside a vectorized loop
  };

  FeatureSet set_;
  std::vector<Loop> loops_;
  std::vector<Guard> guards_;
  Expr unroll_;
  Expr local_bytes_, shared_bytes_, thread_bytes_;
  // Inside a tensor-core fragment's nest (sched::kMmaPragma): 1 for TF32 inputs, 2 for
  // FP16 and BF16 (the tensor cores' rate relative to TF32's), else 0.
  double in_mma_ = 0;
  Expr async_;                // inside a cp.async group (sched::kAsyncCopyPragma): the groups left in flight
  bool in_int8_dot_ = false;  // inside kInt8DotPragma
  bool in_amx_ = false;       // inside kAmxBf16Pragma or kAmxInt8Pragma
};

}  // namespace

Expr buffer_bytes(const Buffer& b) {
  Expr size = float_imm(DType::f64(), b->dtype.bytes());
  for (const Expr& e : b->shape) size = size * f64(e);
  return size;
}

Expr thread_own_bytes(const Buffer& b, bool inside_thread_loop) {
  Expr size = buffer_bytes(b);
  return inside_thread_loop || b->shape.empty() ? size : size / f64(b->shape[0]);
}

const std::vector<std::string>& feature_names(FeatureSet set) {
  static const std::vector<std::string> cpu = make_names(), gpu = make_gpu_names();
  return set == FeatureSet::Gpu ? gpu : cpu;
}

int num_features(FeatureSet set) { return static_cast<int>(feature_names(set).size()); }

std::vector<StoreFeatures> extract_features(const LoweredFunc& structure, FeatureSet set) {
  Walker w(set);
  w.walk(structure.body);
  return w.out;
}

std::vector<std::vector<double>> evaluate_features(const std::vector<StoreFeatures>& f, const VarValues& knobs) {
  std::vector<std::vector<double>> out;
  for (const StoreFeatures& s : f) {
    std::vector<double> row;
    for (const Expr& e : s.values) {
      double x = evaluate(e, knobs).as_double();
      row.push_back(std::log2(1.0 + std::max(0.0, x)));
    }
    out.push_back(row);
  }
  return out;
}

}  // namespace basin::relax
