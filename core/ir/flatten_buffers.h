// Pass: flatten multi-dimensional buffer accesses into one row-major index.
//
// Requires: accesses with one index per dimension (or already one flat index).
// Ensures: every Load and Store uses exactly one index; the indices are simplified.
#pragma once

#include "core/ir/stmt.h"

namespace basin {

Stmt flatten_buffers(const Stmt& s);

}  // namespace basin
