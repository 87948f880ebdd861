// Lowering of a tensor-expression DAG to loop IR with the default schedule: one plain
// loop nest per compute operation in producer-to-consumer order, reductions written
// as an initialization followed by the update loops, intermediate tensors allocated.
// The pipeline is a short script of passes (core/ir/pass.h lists every pipeline);
// BASIN_DEBUG_LOWER=1 prints the IR after each pass that changed it.
#pragma once

#include <string>
#include <vector>

#include "core/ir/stmt.h"
#include "core/te/tensor.h"

namespace basin {

// Throws basin::Error if the DAG reads a placeholder that is not among `inputs`.
LoweredFunc lower_default(const std::string& name, const std::vector<te::Tensor>& inputs,
                          const std::vector<te::Tensor>& outputs);

}  // namespace basin
