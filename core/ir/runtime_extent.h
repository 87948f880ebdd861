// Kernels over a run-time extent (docs/networks.md, "Ranges of shapes"): a program
// compiled for a shape bucket's extent E that a call of extent n <= E runs on the
// iterations its first n positions need, not on all E.
//
// A loop qualifies when it is serial or parallel from 0 over a constant number of
// iterations (2 to `max_extent`), reached from the top of the kernel through loops,
// allocations, sequences and pragmas only, it writes the output and no buffer that
// outlives one of its iterations but the output, it reads the output only inside the
// range of indices the same iteration writes, and the analyzer bounds every output
// index it writes in every iteration (the loops around it over their whole ranges).
// Of these, on each path from the top, the outermost one whose iterations separate
// positions along an axis of the output whose extent is one of `extents` (some
// iteration writes only positions past the first) is chosen: a dense layer's
// row tiles, whether its parallel loop walks them or walks the columns around them.
// Each chosen loop
//
//   for p in 0..P: body
//
// becomes
//
//   for p in 0..iterations[o]: if (iterations[o + 1 + p] != 0) body
//
// reading a new int32 parameter, `iterations`, placed just before the output: per
// loop, the number of iterations to walk, then one flag per iteration. With every flag
// set and the count P, the kernel computes what f computes. The loop's table gives,
// for each iteration, the least and greatest flat output index it writes: the caller
// that knows which axis of the output a ranged dimension runs along clears the flags
// of the iterations that write padded positions only (runtime_iterations). An
// iteration it runs writes what f writes there; one it skips leaves its output
// positions as they were, which only a padded position's can be.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/ir/stmt.h"

namespace basin {

struct RuntimeNest {
  int64_t extent = 0;                // its loop's iterations, P
  std::vector<int64_t> first, last;  // per iteration: the least and greatest flat output index it writes
};

struct RuntimeExtentKernel {
  LoweredFunc func;                // f with the iterations parameter just before its output
  int param = -1;                  // the parameter's index in func.params
  std::vector<RuntimeNest> nests;  // in the parameter's order (the chosen loops' order in f)
};

// The iterations parameter's element count: per nest, 1 + its extent.
int64_t iterations_size(const std::vector<RuntimeNest>& nests);

// f (a concrete lowered function with flattened buffers and one output) with its
// chosen loops given their iterations at run time; nullopt when there are none.
// `extents`: the extents an output axis that a ranged dimension runs along may have
// (a bucket's extents of its ranged dimensions).
std::optional<RuntimeExtentKernel> with_runtime_iterations(const LoweredFunc& f, const std::vector<int64_t>& extents,
                                                           int64_t max_extent = 16384);

// The iterations parameter for a call whose output's positions at or past n along one
// axis are padding: the axis has `extent` positions, `stride` elements apart (the
// product of the later axes' extents). An iteration runs unless every index it writes
// lies in one block of extent x stride elements at position n or past; stride 0 or
// n >= extent: every iteration runs. `out` holds iterations_size(nests) elements.
void runtime_iterations(const std::vector<RuntimeNest>& nests, int64_t stride, int64_t extent, int64_t n,
                        int32_t* out);

}  // namespace basin
