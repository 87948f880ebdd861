// Constant stages out of a kernel: a sketch's weight repacking (a first stage that
// only rearranges a constant input into a buffer of its own) split off, so that a
// compiled network runs it once, when it is compiled, instead of on every call.
#pragma once

#include <optional>
#include <set>

#include "core/ir/stmt.h"

namespace basin {

struct SplitPrologue {
  // The stage alone: params {the constant input, the buffer it fills (the output)}.
  LoweredFunc prologue;
  // The kernel without the stage: the constant input's param replaced by the filled
  // buffer, everything else as it was.
  LoweredFunc kernel;
  int param = -1;  // the replaced param's index (in both the original and the kernel)
};

// The first stage of f that writes one global buffer f allocates at its top, reads
// only one param of `constant_params`, and before which nothing reads that buffer,
// where no other stage reads that param or writes that buffer; nullopt where there is
// none.
std::optional<SplitPrologue> split_constant_prologue(const LoweredFunc& f, const std::set<int>& constant_params);

}  // namespace basin
