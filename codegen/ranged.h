// Networks over ranges of shapes (core/graph/shape_range.h): the check that a compiled
// one serves every bucket exactly.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "codegen/network.h"
#include "core/graph/shape_range.h"

namespace basin::codegen {

// For each bucket of `rm`, on a call of the least extents it serves (the most padding),
// random inputs: the float32 reference (LibTorch) on the bucket's graph with the call
// padded by zeros and by random values, cut back, must agree (the padded positions
// change no real output: 1e-6 of the output's largest value), and must match the
// reference on the model at the call's own extents (`import`; 1e-4: padding is
// exact); `net` (compiled from rm) runs the call, and its error against that reference
// is the accuracy returned (the largest over the buckets). Throws Error naming the
// bucket and the output where padding is not exact (the model mixes positions along a
// ranged axis other than through a softmax: a reduction over it, a convolution along it).
Accuracy check_ranged(const graph::RangedModel& rm, CompiledNetwork& net,
                      const std::function<graph::Graph(const std::map<std::string, int64_t>&)>& import);

}  // namespace basin::codegen
