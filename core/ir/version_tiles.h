// Pass: register tiles whose guarded loads run unmasked. A tile (an Allocate of a
// Local buffer: an anchor's accumulator) whose loads sit under selects (an inlined
// padded input's border, the lanes past a guarded split's extent) becomes
//
//   if (every load under a select reads inside its buffer at every point of the tile)
//     the tile under the pragma kGuardedLoadsInBounds
//   else
//     the tile with its unrolled loops rolled
//
// The test is each index's least and greatest value over the tile's loop ranges (the
// index affine in the tile's loops: each loop at one end of its range by the sign of its
// coefficient), evaluated once per tile. Under the pragma the backend loads whatever
// the guard says and selects the lanes it keeps: a padded input read in place needs
// neither a copy of its own nor masked loads (on AMD Zen 1 a masked vector load costs
// about 4 times a plain one, and a stride-2 load under a mask was a gather). Only the
// tiles that touch the first or last elements of a buffer fail the test; they are
// rare, so their copy runs as loops, cheap to compile. A tile whose guarded loads'
// indices are not affine in its loops is left alone, and so are GPU programs.
//
// Requires: flattened buffers. Ensures: the program computes the same values (the
// select chooses what it chose; the loads it no longer guards read inside their
// buffers).
#pragma once

#include "core/ir/stmt.h"

namespace basin {

// Pragma key: every load inside a select of the body reads inside its buffer, so a
// backend may load it whatever the select's condition (and select the value after).
inline constexpr const char* kGuardedLoadsInBounds = "guarded_loads_in_bounds";

Stmt version_tiles(const Stmt& s);

}  // namespace basin
