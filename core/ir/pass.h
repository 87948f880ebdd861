// Pipelines of named passes over a function's body. Every way a program reaches the
// machine is one of these scripts, run in order:
//
//   lower_default (core/ir/lower.cc)          flatten_buffers, simplify_stmt
//   lower_sketch  (core/schedule/lower_sketch.cc)  the sketch's loop structure, then
//                                              flatten_buffers, simplify_stmt
//   lower_config  (the same)                  lower_sketch, then mark_unrolled: the program
//                                              the interpreter runs and the features see
//   prepare_for_backend (core/ir/pass.cc)     version_tiles, partition_loops: what the
//                                              LLVM backend emits
//
// BASIN_DEBUG_LOWER=1 prints the IR after each pass that changed it, with the pipeline's
// name, the pass's and the time it took; debug builds check well-formedness after every
// pass.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/ir/stmt.h"
#include "core/ir/verify.h"

namespace basin {

struct Pass {
  const char* name;
  std::function<Stmt(const Stmt&)> run;
};

// f with `passes` applied to its body in order. `allow_knob_vars`: symbolic lowering
// leaves knob variables free (the debug builds' checks allow them).
LoweredFunc run_passes(LoweredFunc f, const char* pipeline, const std::vector<Pass>& passes,
                       bool allow_knob_vars = false);

// The backend's own passes on a lowered program (version_tiles: a register tile whose
// loads are guarded runs unguarded where every guard holds over the whole tile;
// partition_loops: the small loops that select on their own bounds, a padded input's
// border, split where the selects are decided). The interpreter and the estimator's features see the program before
// them.
LoweredFunc prepare_for_backend(const LoweredFunc& f);

}  // namespace basin
