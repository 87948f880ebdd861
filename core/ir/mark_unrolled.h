// Pass: applies the unroll depth. Inside each Pragma "auto_unroll_max_step" = N, a
// serial loop with a constant extent becomes Unrolled when the steps of the loop nest
// it heads (the product of its extents, a vectorized loop counting as one step, the
// steps of a sequence adding up) are at most N. Loops outside such a pragma, parallel
// and vectorized loops are unchanged.
//
// Requires: the pragma's value is a constant. Ensures: only loop kinds change.
#pragma once

#include "core/ir/stmt.h"

namespace basin {

Stmt mark_unrolled(const Stmt& s);

}  // namespace basin
