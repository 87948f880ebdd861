// Pass: applies the unroll depth. Inside each Pragma "auto_unroll_max_step" = N, a
// serial loop with a constant extent becomes Unrolled when the steps of the loop nest
// it heads (the product of its extents, the steps of a sequence adding up) are at most
// N. A vectorized loop counts as one step, or as one per lane where some load or store
// in it is emitted lane by lane (a stride other than one, a gather or a scatter:
// codegen/llvm_emit.cc), so that N bounds the size of the straight-line code. Loops
// outside such a pragma, parallel and vectorized loops are unchanged.
//
// Requires: the pragma's value is a constant. Ensures: only loop kinds change.
#pragma once

#include "core/ir/stmt.h"

namespace basin {

Stmt mark_unrolled(const Stmt& s);

}  // namespace basin
