// The CPU register-tile model: how many vector registers a register tile of
// accumulators takes and how many loads feed it per reduction step. The relaxation's
// register-tile constraint (constraints.h) counts the same registers as expressions of
// the knobs; the search's register-filling tiles (search::TaskSpace::filled_tiles)
// choose tiles by these counts.
#pragma once

#include <cstdint>
#include <vector>

#include "core/schedule/sketch.h"

namespace basin::relax {

// The register tile of a configuration: the innermost factor of each split of two or
// more levels (0 for the others).
std::vector<int64_t> register_tile(const sched::Sketch& s, const sched::Config& c);

// The vector registers the tile of accumulators takes where a vector holds
// `vector_bytes` bytes (4-byte accumulators): the vectorized split's innermost factor
// in whole vectors, times the innermost factors of the other splits of two or more
// levels (with an accumulator at level 1, times every such split's S2 factor too). 0
// for a sketch of another rule than the anchor's (multi-level tiling of a conv, dense
// or matmul), or one that vectorizes no such split.
int64_t tile_registers(const sched::Sketch& s, const sched::Config& c, int vector_bytes);

// The loads per reduction step of a register tile with innermost factors `inner` (per
// split; those of one level are not read): the vectorized operand's vectors along the
// splits its reads use (`operand`, sched::vector_operand_splits), a load per lane where
// its reads are strided (Sketch::vector_operand_strided), and the other operand's
// values, broadcast, one per row of the remaining splits. A GEMM tile of 4 rows by 64
// lanes of AVX-512 loads 4 vectors and 4 values for its 16 accumulators, 16 by 16
// loads 1 and 16.
int64_t step_loads(const sched::Sketch& s, const std::vector<bool>& operand, const std::vector<int64_t>& inner,
                   int vector_bytes);

// step_loads of the configuration's own tile; 0 where tile_registers is.
int64_t tile_loads(const sched::Sketch& s, const sched::Config& c, int vector_bytes);

// The vector registers a register tile keeps live beside its accumulators, in the order
// the code runs it (sched::build_anchor: the splits other than the vectorized one in
// their order, the vectorized one innermost, all unrolled). A value of an operand stays
// live while the tile loops over a split it does not depend on: where such a split of
// factor > 1 runs outside, the operand's values along the splits inside it are all
// live (the product of their factors; the vectorized operand's times its vectors),
// otherwise each value is used once, one register. The vectorized operand depends on
// the splits `operand` marks (sched::vector_operand_splits), the broadcast one on the
// others. A conv vectorized along its output channels, tiled 4 channel blocks by 3
// pixels, keeps the 3 pixels' broadcasts (the channels' loop outside) and one weight
// vector: 12 + 4 registers, 16, which fits AVX2's file; 2 x 6 keeps 6 + 1 beside its 12
// and spills there. `inner` holds each split's innermost factor (the vectorized one in
// vectors), `reuse(x)` is min(1, x) for x >= 0, `one` and `zero` T's constants. A
// strided vectorized operand (Sketch::vector_operand_strided) is assembled a lane at a
// time, in two more registers: resnet18-c12's unpacked tile of 8 channels by 2 x 7 on
// AVX2 (14 + 2 + 2) spilled its accumulators, AVX-512's 16 by 4 x 7 (28 + 2 + 2) did not.
template <class T, class Reuse>
T operand_registers(const sched::Sketch& s, const std::vector<bool>& operand, const std::vector<T>& inner,
                    Reuse reuse, const T& one, const T& zero) {
  const std::vector<sched::SplitSpec>& splits = s.splits;
  T total = s.vector_operand_strided ? one + one : zero;
  for (bool vector_operand : {true, false}) {
    T live = one, outside = zero;  // outside: the factors past 1 of the splits it does not depend on
    T vectors = one;
    for (size_t k = 0; k < splits.size(); ++k) {
      if (splits[k].parts < 2) continue;
      if (splits[k].vectorized) {
        vectors = inner[k];
        continue;
      }
      if (operand[k] != vector_operand) outside = outside + (inner[k] - one);
      else live = live * (one + (inner[k] - one) * reuse(outside));
    }
    if (vector_operand) live = live * (one + (vectors - one) * reuse(outside));
    total = total + live;
  }
  return total;
}

// The vector registers of a register tile of `accumulators` with innermost factors
// `inner` (per split, the vectorized one in lanes): the accumulators and
// operand_registers.
int64_t live_registers(const sched::Sketch& s, const std::vector<bool>& operand, const std::vector<int64_t>& inner,
                       int64_t accumulators, int vector_bytes);
// That of a configuration's own tile; 0 where tile_registers is.
int64_t live_registers(const sched::Sketch& s, const sched::Config& c, int vector_bytes);

}  // namespace basin::relax
