// The program features a latency estimator reads, per buffer store, as expressions of
// the knob variables (docs/features.md defines each one). They are computed by walking
// a sketch's structure (lower_sketch_structure) once: the same expressions evaluated at
// a configuration's integer point are that configuration's features, which is what
// training features and search features share. Symbolic and concrete structures give
// the same numbers (tested), because every loop is kept and dependences and strides are
// evaluated numerically rather than read off the simplifier's output.
//
// Raw feature values are non-negative; the estimator reads log2(1 + x).
#pragma once

#include <string>
#include <vector>

#include "core/expr/evaluate.h"
#include "core/ir/stmt.h"

namespace basin::relax {

// Bumped whenever a feature changes meaning; estimators refuse features of another version.
constexpr int kFeatureVersion = 6;

// The CPU features, or for GPU programs the CPU features followed by the GPU ones
// (block, thread and virtual-thread extents, shared memory and registers, whether the
// store is a tensor core's, whether it is an asynchronous copy, which slots read shared
// memory; docs/features.md). An estimator is trained on one set; the
// GPU set has its own version.
enum class FeatureSet : uint8_t { Cpu, Gpu };
constexpr int kGpuFeatureVersion = 7;
// Buffers described per store: the stored buffer, then the first loaded ones.
constexpr int kBufferSlots = 4;
constexpr int kIntensityLevels = 5;

const std::vector<std::string>& feature_names(FeatureSet set = FeatureSet::Cpu);
int num_features(FeatureSet set = FeatureSet::Cpu);

struct StoreFeatures {
  std::string buffer;        // the stored buffer
  std::vector<Expr> values;  // num_features() float64 expressions of the knob variables
};

// Requires the structure form (multi-dimensional accesses). Loads inside indices
// (gathers) count as index 0 for strides and dependences.
std::vector<StoreFeatures> extract_features(const LoweredFunc& structure, FeatureSet set = FeatureSet::Cpu);

// A buffer's bytes as a float64 expression of its shape.
Expr buffer_bytes(const Buffer& b);
// The bytes of a local buffer one GPU thread holds: all of it when allocated inside a
// thread loop, one thread's slice when allocated in the block (its first dimension is
// the thread, stmt.h).
Expr thread_own_bytes(const Buffer& b, bool inside_thread_loop);

// log2(1 + x) of every feature, at the given knob values ([store][feature]).
std::vector<std::vector<double>> evaluate_features(const std::vector<StoreFeatures>& f, const VarValues& knobs);

}  // namespace basin::relax
