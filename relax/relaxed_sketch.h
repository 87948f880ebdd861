// A sketch's features as a differentiable function of its knob space: a point x of the
// polytope (relax/knob_space.h) gives the knob values (factors prod_p p^x, unroll
// 2^z - 1), which the compiled tape of the feature expressions turns into the
// estimator's input, log2(1 + feature), for every store. Batched, with gradients.
// In exact mode, at a configuration's integer point, the values are that
// configuration's features.
#pragma once

#include <memory>
#include <utility>

#include "core/ops/registry.h"
#include "relax/constraints.h"
#include "relax/features.h"
#include "relax/knob_space.h"
#include "relax/tape.h"

namespace basin::relax {

// The feature set of a sketch's programs: GPU for the GPU rules.
FeatureSet feature_set_of(const sched::Sketch& s);

// GPU sketches get the GPU feature set and gpu_constraints, CPU ones the CPU set and
// cpu_constraints (with `target`).
class RelaxedSketch {
 public:
  RelaxedSketch(const ops::OpGraph& task, const sched::Sketch& s, TapeMode mode = TapeMode::Relaxed, double tau = 0.5,
                const CpuTarget& target = CpuTarget::host());
  // The sketch's exact and relaxed evaluators from one derivation of its features and
  // constraints (most of the building: the tapes compiled from it are the rest).
  static std::pair<std::unique_ptr<RelaxedSketch>, std::unique_ptr<RelaxedSketch>> exact_and_relaxed(
      const ops::OpGraph& task, const sched::Sketch& s, double tau = 0.5, const CpuTarget& target = CpuTarget::host());

  const KnobSpace& space() const { return space_; }
  int num_vars() const { return space_.num_vars(); }
  int num_stores() const { return stores_; }
  int num_features() const;
  const std::vector<std::string>& store_buffers() const { return buffers_; }
  int num_constraints() const { return static_cast<int>(constraint_names_.size()); }
  const std::vector<std::string>& constraint_names() const { return constraint_names_; }

  // x: [batch][num_vars]; features: [batch][num_stores][num_features]; constraints
  // (optional): [batch][num_constraints], each <= 0 when satisfied.
  void forward(const double* x, int batch, double* features, double* constraints = nullptr);
  // After forward: d loss / d features (and d loss / d constraints, optional) -> d loss / d x.
  void backward(const double* grad_features, double* grad_x, const double* grad_constraints = nullptr);
  // Counts forward() calls: backward() needs the state of the forward it follows.
  uint64_t generation() const { return generation_; }
  // forward() without the state backward() needs, in chunks through buffers the
  // calling thread shares with every sketch (Tape::evaluate): for ranking many
  // programs. Safe on several threads at once.
  void evaluate(const double* x, int batch, double* features, double* constraints = nullptr) const;

 private:
  struct Derivation;  // the knob space, the symbolic features and constraints: all but the tape
  static Derivation derive(const ops::OpGraph& task, const sched::Sketch& s, const CpuTarget& target);
  RelaxedSketch(TapeMode mode, double tau, const Derivation& d);

  KnobSpace space_;
  TapeMode mode_;
  FeatureSet set_ = FeatureSet::Cpu;
  std::vector<std::pair<int, int>> knob_of_;                    // tape input -> (split, level); (-1, -1) for unroll
  std::vector<std::vector<std::pair<int, double>>> exponents_;  // tape input -> (x index, ln p)
  std::unique_ptr<Tape> tape_;
  int stores_ = 0;
  std::vector<std::string> buffers_;
  std::vector<std::string> constraint_names_;
  // x [batch][num_vars] -> the tape's inputs [batch][tape inputs].
  void knobs_of(const double* x, int batch, double* knobs) const;
  // out [batch][features then constraints] -> features and constraints (optional).
  void split_outputs(const double* out, int batch, double* features, double* constraints) const;

  std::vector<double> out_;  // [batch][features then constraints]
  int batch_ = 0;
  uint64_t generation_ = 0;
  std::vector<double> knobs_;  // [batch][tape inputs] of the last forward
};

}  // namespace basin::relax
