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

}  // namespace basin::relax
