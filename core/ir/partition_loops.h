// Pass: loop partitioning for the small loops that select on their own bounds (TVM's
// partition_const_loop, in its simplest case). A padded input computed first,
//   for i2 in 0..30: for i3 in 0..30: pad[i2, i3] = select(1 <= i2 && i2 < 29 && ..., x[...], 0)
// branches on every element: the select guards a load, so it cannot be evaluated
// eagerly. A serial loop with constant bounds whose body is small (serial loops and at
// most a few stores) and whose selects or branches compare the loop variable alone with
// constants is split where one of those comparisons changes value, at most
// `max_pieces` pieces; each piece's comparisons are then decided, so the border rows
// store zeros and the interior copies without a branch. Then every innermost serial
// loop that copies or fills, split or not (one store stepping by one element, loads
// stepping by a constant number of elements or not at all, no select, nothing read that
// the loop writes, 2 to 64 iterations), becomes a vector loop: the padded input's
// interior rows, and a packing stage's rows, whose loads step by a weight's row length
// (LLVM's pipeline here has no loop vectorizer; the LLVM backend loads such a vector
// one lane at a time, codegen/llvm_emit.cc).
//
// Requires: flattened buffers (one index per access) for the vector loops. Ensures: the
// program computes the same values (each piece runs the same body over part of the
// range, in the same order; a vector loop only where no iteration reads another's store).
#pragma once

#include "core/ir/stmt.h"

namespace basin {

Stmt partition_loops(const Stmt& s, int max_pieces = 5);

}  // namespace basin
