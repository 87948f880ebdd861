// Pass: substitutes values for (knob) variables throughout a lowered function,
// including the extents of the buffers it allocates, and simplifies. Used to turn a
// symbolically lowered program into the concrete program of a configuration.
//
// Requires: nothing. Ensures: every allocated buffer whose shape used a substituted
// variable is replaced by a new buffer with the substituted, simplified shape.
#pragma once

#include "core/ir/stmt.h"

namespace basin {

LoweredFunc substitute_knobs(const LoweredFunc& f, const VarMap& values);

}  // namespace basin
