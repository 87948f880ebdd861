// The generation of the code each target's backend emits. Every record a tuner or the
// dataset collector measures names it (search::Record::codegen), because a latency
// belongs to the code as much as to the machine: records of another generation are
// measured again, not reused, and never compared with this one's in training.
//
// Bump a target's number with any change to lowering or to its backend that changes
// how fast programs run (LLVM's full unrolling of small loops made some programs
// 2.4 times faster; its records would have named stale bests). A change that only
// fixes an error message or adds a sketch needs no bump. Header-only, so that the
// records store can name the generation without linking the backends.
#pragma once

#include <string>

namespace basin::codegen {

// llvm 1: the first numbered generation. llvm 2: a constant stride other than one loaded
// and stored one lane at a time instead of by gathers and scatters, and every innermost
// copy loop vectorized (resnet18-c10's committed program, whose packing stage read its
// weights one scalar at a time, 1.4 times faster on Zen 4). llvm 3: the code
// generator's dependence graphs limited to 200 pending memory accesses (LLVM: 1000),
// which changed the machine code of some programs with very large blocks
// (12 of 84 sampled, all far from their task's best; one GEMM program 5.4 times faster).
// llvm 4: a vectorized loop whose accesses are emitted lane by lane counts one unrolled
// step per lane (core/ir/mark_unrolled.h), so fewer such nests are unrolled
// (24 of 90 sampled programs changed, none slower beyond the noise, one GEMM program
// 7 times faster; compile time of the slowest from 6 s to 0.2). llvm 5: float32 exp,
// sigmoid, tanh and erf as vectorized polynomials instead of one libm call per lane
// (sigmoid 2.5, tanh 16 and erf 4 times faster on 1.2 M elements). llvm 6: exp's
// polynomial of degree 6 instead of 8 and 2^n added to its exponent bits; sigmoid and
// erf on exp clamped, without its overflow selects (x sigmoid(x) 1.5 times faster);
// loads with a stride of 2 to 4 in the vector loop as vector loads and a shuffle, and
// copy loops longer than 64 iterations as vectors of 16 lanes (a padded input's rows:
// a stride-2 depthwise convolution 1.4 times faster). llvm 7: guarded loads unmasked in
// the register tiles that stay inside their buffers (core/ir/version_tiles.h), masked
// loads of stride 2 to 4 as masked vector loads and a shuffle instead of gathers (a
// stride-2 depthwise convolution reading its padding in place 6.9 times faster), and a
// network's tasks timed without the repacking of their constant weights, which the
// compiled network runs once. llvm 8: a network's tasks timed with their weights
// evicted from the caches when the network's weights exceed the last-level cache
// (search/network.h), as a run of the network reads them. llvm 9: a select whose
// condition is the same for every lane, between loads that vary across lanes, is a
// branch between whole vectors instead of masked loads of both sides (a concatenation:
// its 232-channel one in shufflenet 238 us in the network, 7.9 us as a branch).
inline std::string codegen_version(const std::string& target) {
  if (target == "llvm") return "llvm 9";
  if (target == "cuda") return "cuda 1";
  return target + " 1";  // the interpreter: latencies of no interest, but named alike
}

}  // namespace basin::codegen
