// The well-formedness checker of loop IR, run between passes in debug builds and in
// tests.
//
// Requires: nothing. Ensures (when it returns without throwing): every variable used is
// bound by an enclosing For (or is a knob variable, where allowed); no For rebinds a
// variable already in scope; every buffer read or written is a parameter or allocated
// by an enclosing Allocate; stored values have the buffer's type; flattened programs
// access buffers with one index; constant extents are non-negative; a Barrier sits
// inside a GPU thread loop; GPU-bound loops start at 0.
#pragma once

#include <string>
#include <vector>

#include "core/ir/stmt.h"

namespace basin {

struct VerifyOptions {
  bool allow_knob_vars = false;  // symbolic lowering leaves knob variables free
  bool require_flat = false;     // after flattening: one index per access
};

// Every problem found, as one line each (empty when well-formed).
std::vector<std::string> well_formed_errors(const LoweredFunc& f, const VerifyOptions& opt = {});
// Throws InternalError listing the problems and the IR when f is not well-formed.
void verify_well_formed(const LoweredFunc& f, const VerifyOptions& opt = {});

}  // namespace basin
