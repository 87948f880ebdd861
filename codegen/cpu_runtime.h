// The runtime that compiled CPU kernels call: a persistent thread pool for parallel
// loops. The LLVM backend outlines the body of a parallel loop into a function
// `body(ctx, begin, end)` and calls basin_parallel_for, which cuts [0, extent) into
// contiguous chunks, a few per thread (BASIN_PARALLEL_CHUNKS, default 4; 1 is the
// static split, one chunk per thread), that the threads (the caller among them) claim
// in turn, and returns when all are done. A thread that starts late or runs slow, on a
// core another process or the hypervisor has taken, holds up the loop by one small
// chunk instead of its whole share. A parallel loop reached from inside another one
// runs serially on its thread.
#pragma once

#include <cstdint>

extern "C" {
typedef void (*basin_parallel_body)(void* ctx, int64_t begin, int64_t end);
void basin_parallel_for(basin_parallel_body body, void* ctx, int64_t extent);
}

namespace basin::codegen {

// Threads that parallel loops use: BASIN_NUM_THREADS if set, else the hardware's
// (this_host().cores, the count records name).
int runtime_threads();

}  // namespace basin::codegen
