// Loop IR as C source, for reading (`basin op ... --emit c`): one function taking its
// buffers as restrict pointers, loop kinds as pragmas (omp parallel for, omp simd,
// GCC unroll), the IR's floor division and modulo as helper functions. It compiles with
// a C99 compiler (-fopenmp for the pragmas to take effect) but is not a backend.
#pragma once

#include <string>

#include "core/ir/stmt.h"

namespace basin::codegen {

std::string print_c(const LoweredFunc& f);

}  // namespace basin::codegen
