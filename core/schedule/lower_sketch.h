// Lowering of a sketch to loop IR, with the knobs given as expressions: integer
// constants for a concrete program, knob variables for the relaxation. Both are the
// same code; substituting a configuration's values into the symbolic program and
// simplifying gives the concrete program (tested in tests/core/schedule_test.cc).
#pragma once

#include "core/ir/stmt.h"
#include "core/schedule/sketch.h"

namespace basin::sched {

// The loop IR of task under sketch s with knob values k (flattened and simplified).
// The unroll knob is a Pragma "auto_unroll_max_step" around the loops it governs.
LoweredFunc lower_sketch(const ops::OpGraph& task, const Sketch& s, const KnobValues& k);

// The program lower_sketch starts from, before flattening and simplification: multi-
// dimensional accesses, every loop kept (even of extent 1). Its structure is the same
// for symbolic and for concrete knobs, which is what the relaxation's features need.
// By default the outermost parallel loops are a nest of one loop per axis (the same
// iterations as the single fused loop that is compiled), so that features see which
// axis moves which access.
LoweredFunc lower_sketch_structure(const ops::OpGraph& task, const Sketch& s, const KnobValues& k,
                                   bool fuse_parallel = false);

// The concrete program of a configuration: lower_sketch with its values, then the
// loops within the unroll depth marked Unrolled (mark_unrolled). Throws Error if the
// configuration is invalid for the sketch.
LoweredFunc lower_config(const ops::OpGraph& task, const Sketch& s, const Config& c);

}  // namespace basin::sched
