#include "relax/constraints.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/schedule/task_analysis.h"
#include "core/util/host.h"
#include "relax/cpu_tiles.h"
#include "relax/features.h"

namespace basin::relax {

namespace {
Expr f64(const Expr& e) { return e.dtype() == DType::f64() ? e : cast(DType::f64(), e); }
Expr num(double v) { return float_imm(DType::f64(), v); }
}  // namespace

CpuTarget CpuTarget::host() {
  CpuTarget t;
  t.cores = this_host().cores;                                  // the threads kernels run on (BASIN_NUM_THREADS)
  const VectorFile file = vector_file(this_host().vector_isa);  // BASIN_VECTOR_ISA's where set
  t.vector_bytes = file.bytes;
  t.vector_registers = file.registers;
  return t;
}

std::vector<Constraint> cpu_constraints(const sched::Sketch& s, const sched::KnobValues& knobs,
                                        const LoweredFunc& structure, const CpuTarget& target) {
  std::vector<Constraint> out;
  std::vector<Expr> parallel;  // per store: the product of its enclosing parallel loops
  std::vector<Expr> stack;
  std::vector<const StmtNode*> vectorized;  // the enclosing vectorized loops, innermost last
  int vec = 0, local = 0, rows = 0;
  // A loop over a tile's rows around one row's update of a local accumulator, inside a
  // vectorized loop (the generic rule's tiles of rows, Sketch::tile_rows: attention's
  // scores and weighted sum): the tile's rows of accumulator vectors are live through
  // the reduction loops around it, and beside them each operand the rows read alike
  // (its vectors, loaded once per step) and one broadcast value of the row's own
  // (used once), as operand_registers counts an anchor's.
  auto tile_rows_registers = [&](const StmtNode& n) {
    if (s.rule != sched::SketchRule::Generic || !s.tile_rows || vectorized.empty()) return;
    const StmtNode& u = *n.body[0];
    if (u.kind != StmtKind::Store || u.buffer->scope == MemScope::Global) return;
    bool per_row = false, accumulates = false;
    for (const Expr& i : u.indices) per_row = per_row || uses_var(i, n.var);
    const std::vector<Expr> loads = sched::loads_in(u.value);
    for (const Expr& l : loads) accumulates = accumulates || l->buffer.get() == u.buffer.get();
    if (!per_row || !accumulates) return;
    const StmtNode& v = *vectorized.back();
    const Expr vectors =
        max(num(u.buffer->dtype.bytes()) * f64(v.extent) / num(target.vector_bytes), num(1));
    Expr operands = num(0);
    for (const Expr& l : loads) {
      if (l->buffer.get() == u.buffer.get()) continue;
      bool along = false;
      for (const Expr& a : l->args) along = along || uses_var(a, v.var);
      operands = operands + (along ? vectors : num(1));
    }
    out.push_back({"register_tile_rows." + std::to_string(rows++),
                   f64(n.extent) * vectors + operands - num(target.vector_registers)});
  };
  std::function<void(const Stmt&)> walk = [&](const Stmt& st) {
    const StmtNode& n = *st;
    switch (n.kind) {
      case StmtKind::For: {
        if (n.for_kind == ForKind::Vectorized)
          out.push_back({"vector_lanes." + std::to_string(vec++), f64(n.extent) - num(64)});
        else
          tile_rows_registers(n);
        stack.push_back(n.for_kind == ForKind::Parallel ? f64(n.extent) : Expr());
        if (n.for_kind == ForKind::Vectorized) vectorized.push_back(&n);
        walk(n.body[0]);
        if (n.for_kind == ForKind::Vectorized) vectorized.pop_back();
        stack.pop_back();
        return;
      }
      case StmtKind::Allocate:
        if (n.buffer->scope != MemScope::Global) {
          out.push_back({"local_l1." + std::to_string(local++), buffer_bytes(n.buffer) - num(target.l1_bytes)});
        }
        walk(n.body[0]);
        return;
      case StmtKind::Store: {
        Expr p = num(1);
        for (const Expr& e : stack)
          if (e.defined()) p = p * e;
        parallel.push_back(p);
        return;
      }
      default:
        for (const Stmt& c : n.body) walk(c);
        return;
    }
  };
  walk(structure.body);
  if (s.rule == sched::SketchRule::Anchor) {
    // The register tile: the innermost (S3) tile of every spatial axis, its vectors a
    // register each (a part of one too: 8 lanes of AVX-512's 16 take a register), and
    // beside it the operands' values the unrolled tile keeps live in the code's loop
    // order (operand_registers, as search::TaskSpace::filled_tiles counts them).
    Expr tile = num(1);
    std::vector<Expr> inner(s.splits.size(), num(1));
    for (size_t i = 0; i < s.splits.size(); ++i) {
      if (s.splits[i].parts != 3) continue;
      const Expr f = f64(knobs.factors[i][2]);
      inner[i] = s.splits[i].vectorized ? max(num(4) * f / num(target.vector_bytes), num(1)) : f;
      tile = tile * inner[i];
    }
    const Expr operands = operand_registers<Expr>(
        s, sched::vector_operand_splits(s), inner, [](const Expr& x) { return min(x, num(1)); }, num(1),
        num(0));
    out.push_back({"register_tile", tile + operands - num(target.vector_registers)});
  }
  if (!parallel.empty()) {
    Expr most = parallel[0];
    for (size_t i = 1; i < parallel.size(); ++i) most = max(most, parallel[i]);
    out.push_back({"parallel_work", num(target.cores) - most});
  }
  return out;
}

std::vector<Constraint> gpu_constraints(const LoweredFunc& structure, const GpuTarget& target) {
  std::vector<Constraint> out;
  Expr shared = num(0), regs = num(0), vthreads;
  int threads = 0, depth = 0;
  std::vector<Expr> vstack;
  std::function<void(const Stmt&)> walk = [&](const Stmt& st) {
    const StmtNode& n = *st;
    switch (n.kind) {
      case StmtKind::For: {
        if (is_gpu_thread(n.for_kind))
          out.push_back(
              {"threads_per_block." + std::to_string(threads++), f64(n.extent) - num(target.threads_per_block)});
        depth += is_gpu_thread(n.for_kind);
        if (n.for_kind == ForKind::VThread) vstack.push_back(f64(n.extent));
        walk(n.body[0]);
        if (n.for_kind == ForKind::VThread) vstack.pop_back();
        depth -= is_gpu_thread(n.for_kind);
        return;
      }
      case StmtKind::Allocate: {
        if (n.buffer->scope == MemScope::Shared) shared = shared + buffer_bytes(n.buffer);
        else if (n.buffer->scope == MemScope::Local) regs = regs + thread_own_bytes(n.buffer, depth > 0) / num(4);
        walk(n.body[0]);
        return;
      }
      case StmtKind::Store: {
        if (vstack.empty()) return;
        Expr p = num(1);
        for (const Expr& e : vstack) p = p * e;
        vthreads = vthreads.defined() ? max(vthreads, p) : p;
        return;
      }
      default:
        for (const Stmt& c : n.body) walk(c);
        return;
    }
  };
  walk(structure.body);
  out.push_back({"shared_memory", shared - num(target.shared_bytes)});
  out.push_back({"registers", regs - num(target.registers - target.reserved_registers)});
  if (vthreads.defined()) out.push_back({"vthreads", vthreads - num(target.vthreads)});
  return out;
}

double penalty(const double* c, int n, double* grad) {
  double p = 0;
  for (int i = 0; i < n; ++i) {
    double r = std::max(0.0, c[i]);
    p += r * r;
    if (grad) grad[i] = 2 * r;
  }
  return p;
}

void scale_penalty_gradient(const double* g_cost, const double* g_pen, int batch, int n_vars, double weight,
                            double* out) {
  for (int b = 0; b < batch; ++b) {
    const double* gc = g_cost + static_cast<size_t>(b) * n_vars;
    const double* gp = g_pen + static_cast<size_t>(b) * n_vars;
    double nc = 0, np = 0;
    for (int v = 0; v < n_vars; ++v) {
      nc += gc[v] * gc[v];
      np += gp[v] * gp[v];
    }
    nc = std::sqrt(nc);
    np = std::sqrt(np);
    double scale = np == 0 ? 0.0 : nc > 0 ? weight * nc / np : weight;
    for (int v = 0; v < n_vars; ++v) out[static_cast<size_t>(b) * n_vars + v] = gc[v] + scale * gp[v];
  }
}

}  // namespace basin::relax
