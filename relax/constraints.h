// Hardware constraints of a sketch on the CPU or a GPU, as expressions of its knob variables
// that are <= 0 when satisfied (DESIGN.md, "Constraints"). The relaxation penalizes
// them with relu(c)^2; the sketch's own validity checks (sched::invalid_reason) stay
// the hard limits at rounding time.
#pragma once

#include <string>
#include <vector>

#include "core/ir/stmt.h"
#include "core/schedule/sketch.h"

namespace basin::relax {

struct CpuTarget {
  int cores = 2;
  int vector_bytes = 64;  // one zmm register
  int vector_registers = 32;
  int l1_bytes = 32 * 1024;
  // The machine's cores and vector register file (HostInfo), never a fixed
  // AVX-512 file: on an AVX2 host that would let the register-tile penalty allow twice
  // the registers and twice the bytes it has.
  static CpuTarget host();
};

struct Constraint {
  std::string name;
  Expr value;  // float64; <= 0 when satisfied
};

// From the sketch's structure (lower_sketch_structure with knob variables):
//  - vector_lanes: each vectorized loop's extent against 64 lanes;
//  - register_tile: the anchor's register tile (its innermost tiles) in vector
//    registers (a part of a vector takes one), and the operands' values the tile keeps
//    live in the code's loop order (cpu_tiles.h, operand_registers), against the
//    register file;
//  - local_l1: each local buffer's bytes against L1;
//  - parallel_work: the core count against the largest parallel extent (a soft target).
std::vector<Constraint> cpu_constraints(const sched::Sketch& s, const sched::KnobValues& knobs,
                                        const LoweredFunc& structure, const CpuTarget& target);

// The bounds of an NVIDIA GPU since Volta (sched::kMaxGpu* are the hard ones).
struct GpuTarget {
  int threads_per_block = 1024;
  int shared_bytes = 48 * 1024;  // static shared memory per block
  int registers = 255;           // 4-byte registers per thread
  int reserved_registers = 40;   // addresses, loaded operands, loop counters
  int vthreads = 16;
};

// From a GPU sketch's structure:
//  - threads_per_block.N: each thread loop's extent against the block's limit;
//  - shared_memory: the block's shared buffers' bytes against the limit;
//  - registers: each thread's own buffers (the accumulator) in 4-byte registers,
//    against the register file less the reserved ones (beyond it they spill to local
//    memory);
//  - vthreads: the virtual threads around each store against the limit.
std::vector<Constraint> gpu_constraints(const LoweredFunc& structure, const GpuTarget& target = {});

// sum relu(c)^2 over n constraint values, and its gradient (2 relu(c)) into `grad` when
// given.
double penalty(const double* c, int n, double* grad = nullptr);

// The penalty gradient scaled against the cost gradient (DESIGN.md, "Constraints"),
// per point of a batch: out = g_cost + weight * (|g_cost| / |g_pen|) * g_pen, so that a
// violated constraint pulls as hard as the cost, whatever the estimator's scale (a
// point whose constraints hold, g_pen = 0, gets g_cost alone; where g_cost = 0 the
// penalty gradient is taken as it is, times weight). All arrays [batch][n_vars].
void scale_penalty_gradient(const double* g_cost, const double* g_pen, int batch, int n_vars, double weight,
                            double* out);

}  // namespace basin::relax
