#include "core/ir/runtime_extent.h"

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include "core/expr/analyzer.h"

namespace basin {

namespace {

bool finite(const IntBound& b) { return b.min != IntBound::kNegInf && b.max != IntBound::kPosInf; }

// One iteration of a nest's body: the range of output indices it writes and whether
// it qualifies (writes nothing else that outlives it, reads the output only inside
// that range, every bound known).
struct IterationWalk {
  const BufferNode* out;
  Analyzer an;
  std::set<const BufferNode*> local;
  int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
  std::vector<IntBound> reads;
  bool ok = true;

  void loads(const Expr& e) {
    if (!e.defined() || !ok) return;
    post_order_visit(e, [&](const Expr& x) {
      if (x.kind() != ExprKind::Load || x->buffer.get() != out) return;
      if (x->args.size() != 1) {
        ok = false;
        return;
      }
      IntBound b = an.bound(x->args[0]);
      if (!finite(b)) ok = false;
      reads.push_back(b);
    });
  }

  void stmt(const Stmt& s) {
    if (!s.defined() || !ok) return;
    const StmtNode& n = *s;
    switch (s.kind()) {
      case StmtKind::For: {
        loads(n.min);
        loads(n.extent);
        const IntBound lo = an.bound(n.min), ext = an.bound(n.extent);
        if (!finite(lo) || !finite(ext)) {
          ok = false;
          return;
        }
        if (ext.max <= 0) return;  // never runs
        an.bind(n.var, lo.min, lo.max + ext.max - 1);
        for (const Stmt& b : n.body) stmt(b);
        an.unbind(n.var);
        return;
      }
      case StmtKind::Allocate:
        local.insert(n.buffer.get());
        for (const Stmt& b : n.body) stmt(b);
        return;
      case StmtKind::Store: {
        for (const Expr& i : n.indices) loads(i);
        loads(n.value);
        if (n.buffer.get() == out) {
          if (n.indices.size() != 1) {
            ok = false;
            return;
          }
          const IntBound b = an.bound(n.indices[0]);
          if (!finite(b)) {
            ok = false;
            return;
          }
          first = std::min(first, b.min);
          last = std::max(last, b.max);
        } else if (!local.count(n.buffer.get())) {
          ok = false;  // a buffer that outlives the iteration
        }
        return;
      }
      case StmtKind::IfThenElse:
        loads(n.cond);
        for (const Stmt& b : n.body) stmt(b);
        return;
      case StmtKind::Seq:
        for (const Stmt& b : n.body) stmt(b);
        return;
      case StmtKind::Pragma:
        loads(n.pragma_value);
        for (const Stmt& b : n.body) stmt(b);
        return;
      case StmtKind::Barrier:
        ok = false;
        return;
    }
  }
};

// A loop variable enclosing a candidate loop, over its whole range.
struct Outer {
  Var var;
  int64_t min, max;
};

// The table of a qualifying loop (its enclosing loops' variables over their whole
// ranges); nullopt when it does not qualify.
std::optional<RuntimeNest> nest_table(const Stmt& loop, const std::vector<Outer>& outer, const BufferNode* out,
                                      int64_t max_extent) {
  const StmtNode& n = *loop;
  if (n.for_kind != ForKind::Serial && n.for_kind != ForKind::Parallel) return std::nullopt;
  if (n.min.kind() != ExprKind::IntImm || n.min->ival != 0 || n.extent.kind() != ExprKind::IntImm) return std::nullopt;
  const int64_t extent = n.extent->ival;
  if (extent < 2 || extent > max_extent) return std::nullopt;
  RuntimeNest r;
  r.extent = extent;
  bool writes = false;
  for (int64_t p = 0; p < extent; ++p) {
    IterationWalk w;
    w.out = out;
    for (const Outer& o : outer) w.an.bind(o.var, o.min, o.max);
    w.an.bind(n.var, p, p);
    for (const Stmt& b : n.body) w.stmt(b);
    if (!w.ok) return std::nullopt;
    for (const IntBound& rd : w.reads)
      if (rd.min < w.first || rd.max > w.last) return std::nullopt;  // reads what another iteration writes
    writes = writes || w.first <= w.last;
    r.first.push_back(w.first);
    r.last.push_back(w.last);
  }
  if (!writes) return std::nullopt;
  return r;
}

// The first position, along an axis of `extent` positions `stride` elements apart, of an
// iteration writing the flat indices a..b: -1 unless they lie in one block of extent x
// stride elements (every position it writes is then at or past that one).
int64_t first_position(int64_t a, int64_t b, int64_t stride, int64_t extent) {
  const int64_t block = stride * extent;
  if (a > b || a < 0 || a / block != b / block) return -1;
  return (a % block) / stride;
}

// Whether some iteration of t writes only positions past the first along such an axis.
bool separates(const RuntimeNest& t, int64_t stride, int64_t extent) {
  for (size_t p = 0; p < t.first.size(); ++p)
    if (first_position(t.first[p], t.last[p], stride, extent) > 0) return true;
  return false;
}

// The loops of s to give their iterations at run time: on each path from the top
// (through loops, allocations, sequences and pragmas), the outermost qualifying loop
// whose iterations separate positions along one of the candidate axes ({stride,
// extent}); a loop that does not is looked into.
struct Search {
  const BufferNode* out;
  std::vector<std::pair<int64_t, int64_t>> axes;
  int64_t max_extent;
  std::vector<Outer> outer;
  std::vector<std::pair<Var, RuntimeNest>> found;

  void visit(const Stmt& s) {
    if (!s.defined()) return;
    switch (s.kind()) {
      case StmtKind::For: {
        const StmtNode& n = *s;
        if (std::optional<RuntimeNest> t = nest_table(s, outer, out, max_extent)) {
          for (const auto& [stride, extent] : axes)
            if (separates(*t, stride, extent)) {
              found.push_back({n.var, std::move(*t)});
              return;
            }
        }
        if (n.min.kind() != ExprKind::IntImm || n.extent.kind() != ExprKind::IntImm || n.extent->ival < 1) return;
        outer.push_back({n.var, n.min->ival, n.min->ival + n.extent->ival - 1});
        for (const Stmt& b : n.body) visit(b);
        outer.pop_back();
        return;
      }
      case StmtKind::Allocate:
      case StmtKind::Seq:
      case StmtKind::Pragma:
        for (const Stmt& b : s->body) visit(b);
        return;
      default:
        return;
    }
  }
};

}  // namespace

int64_t iterations_size(const std::vector<RuntimeNest>& nests) {
  int64_t n = 0;
  for (const RuntimeNest& k : nests) n += 1 + k.extent;
  return n;
}

std::optional<RuntimeExtentKernel> with_runtime_iterations(const LoweredFunc& f, const std::vector<int64_t>& extents,
                                                           int64_t max_extent) {
  if (f.output_params.size() != 1) return std::nullopt;
  const int out_param = f.output_params[0];
  const Buffer& ob = f.params[static_cast<size_t>(out_param)];
  Search search;
  search.out = ob.get();
  search.max_extent = max_extent;
  std::vector<int64_t> shape;
  for (const Expr& e : ob->shape) {
    if (e.kind() != ExprKind::IntImm) return std::nullopt;
    shape.push_back(e->ival);
  }
  for (size_t a = 0; a < shape.size(); ++a) {
    if (shape[a] < 2 || std::find(extents.begin(), extents.end(), shape[a]) == extents.end()) continue;
    int64_t stride = 1;
    for (size_t b = a + 1; b < shape.size(); ++b) stride *= shape[b];
    search.axes.push_back({stride, shape[a]});
  }
  if (search.axes.empty()) return std::nullopt;
  search.visit(f.body);
  const std::vector<std::pair<Var, RuntimeNest>>& listed = search.found;
  if (listed.empty()) return std::nullopt;

  RuntimeExtentKernel k;
  std::vector<RuntimeNest> nests;
  for (const auto& [l, t] : listed) nests.push_back(t);
  const Buffer iters = make_buffer("iterations", DType::i32(), {Expr(iterations_size(nests))});
  std::vector<std::pair<int64_t, int64_t>> offset;  // each listed loop's variable and place in the parameter
  int64_t o = 0;
  for (const auto& [v, t] : listed) {
    offset.push_back({v.id(), o});
    o += 1 + t.extent;
  }
  Stmt body = rewrite_stmt(
      f.body, [](const Expr& e) { return e; },
      [&](const Stmt& s) -> Stmt {
        if (s.kind() != StmtKind::For) return Stmt();
        auto it = std::find_if(offset.begin(), offset.end(), [&](const auto& x) { return x.first == s->var.id(); });
        if (it == offset.end()) return Stmt();
        const StmtNode& n = *s;
        const int64_t at = it->second;
        Expr count = cast(DType::index(), load(iters, {Expr(at)}));
        Expr flag = load(iters, {Expr(at + 1) + cast(DType::index(), n.var)});
        Stmt inner = make_if(ne(flag, int_imm(DType::i32(), 0)), make_seq(n.body));
        return make_for(n.var, n.min, count, n.for_kind, inner);
      });
  k.func.name = f.name;
  k.func.params = f.params;
  k.func.params.insert(k.func.params.begin() + out_param, iters);
  k.func.output_params = {out_param + 1};
  k.func.body = body;
  k.param = out_param;
  k.nests = std::move(nests);
  return k;
}

void runtime_iterations(const std::vector<RuntimeNest>& nests, int64_t stride, int64_t extent, int64_t n,
                        int32_t* out) {
  const bool padded = stride > 0 && n < extent;
  size_t o = 0;
  for (const RuntimeNest& k : nests) {
    int32_t count = 0;
    for (int64_t p = 0; p < k.extent; ++p) {
      bool run = true;
      if (padded) {
        const int64_t at =
            first_position(k.first[static_cast<size_t>(p)], k.last[static_cast<size_t>(p)], stride, extent);
        run = at < 0 || at < n;
      }
      out[o + 1 + static_cast<size_t>(p)] = run ? 1 : 0;
      if (run) count = static_cast<int32_t>(p + 1);
    }
    out[o] = count;
    o += 1 + static_cast<size_t>(k.extent);
  }
}

}  // namespace basin
