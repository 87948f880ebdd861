#include "relax/relaxed_sketch.h"

#include <algorithm>
#include <cmath>

#include "core/schedule/lower_sketch.h"
#include "relax/features.h"

namespace basin::relax {

struct RelaxedSketch::Derivation {
  explicit Derivation(const sched::Sketch& s) : space(s) {}
  KnobSpace space;
  FeatureSet set = FeatureSet::Cpu;
  std::vector<Var> inputs;
  std::vector<std::pair<int, int>> knob_of;
  std::vector<std::vector<std::pair<int, double>>> exponents;
  std::vector<Expr> outputs;  // every store's features, then the constraints
  std::vector<std::string> buffers, constraint_names;
};

RelaxedSketch::Derivation RelaxedSketch::derive(const ops::OpGraph& task, const sched::Sketch& s,
                                                const CpuTarget& target) {
  Derivation d(s);
  sched::KnobValues sym = sched::symbolic_knobs(s);
  for (size_t i = 0; i < sym.factors.size(); ++i)
    for (size_t l = 0; l < sym.factors[i].size(); ++l) {
      d.inputs.push_back(Var(sym.factors[i][l]));
      d.knob_of.push_back({static_cast<int>(i), static_cast<int>(l)});
    }
  d.inputs.push_back(Var(sym.unroll));
  d.knob_of.push_back({-1, -1});
  // Which exponent variables make up each factor knob.
  d.exponents.resize(d.inputs.size());
  const auto& ev = d.space.exponent_vars();
  for (size_t v = 0; v < ev.size(); ++v)
    for (size_t k = 0; k + 1 < d.inputs.size(); ++k)
      if (d.knob_of[k] == std::make_pair(ev[v].split, ev[v].level))
        d.exponents[k].push_back({static_cast<int>(v), std::log(static_cast<double>(ev[v].prime))});
  d.exponents.back().push_back({d.space.unroll_var(), std::log(2.0)});

  LoweredFunc structure = sched::lower_sketch_structure(task, s, sym);
  d.set = feature_set_of(s);
  const double inv_ln2 = 1.0 / std::log(2.0);
  for (const StoreFeatures& st : extract_features(structure, d.set)) {
    d.buffers.push_back(st.buffer);
    for (const Expr& e : st.values)
      d.outputs.push_back(call(MathFn::log, {max(e, float_imm(DType::f64(), 0.0)) + float_imm(DType::f64(), 1.0)}) *
                          float_imm(DType::f64(), inv_ln2));
  }
  for (const Constraint& c :
       d.set == FeatureSet::Gpu ? gpu_constraints(structure) : cpu_constraints(s, sym, structure, target)) {
    d.constraint_names.push_back(c.name);
    d.outputs.push_back(c.value);
  }
  return d;
}

RelaxedSketch::RelaxedSketch(TapeMode mode, double tau, const Derivation& d)
    : space_(d.space),
      mode_(mode),
      set_(d.set),
      knob_of_(d.knob_of),
      exponents_(d.exponents),
      tape_(std::make_unique<Tape>(d.outputs, d.inputs, mode, tau)),
      stores_(static_cast<int>(d.buffers.size())),
      buffers_(d.buffers),
      constraint_names_(d.constraint_names) {}

RelaxedSketch::RelaxedSketch(const ops::OpGraph& task, const sched::Sketch& s, TapeMode mode, double tau,
                             const CpuTarget& target)
    : RelaxedSketch(mode, tau, derive(task, s, target)) {}

std::pair<std::unique_ptr<RelaxedSketch>, std::unique_ptr<RelaxedSketch>> RelaxedSketch::exact_and_relaxed(
    const ops::OpGraph& task, const sched::Sketch& s, double tau, const CpuTarget& target) {
  const Derivation d = derive(task, s, target);
  return {std::unique_ptr<RelaxedSketch>(new RelaxedSketch(TapeMode::Exact, tau, d)),
          std::unique_ptr<RelaxedSketch>(new RelaxedSketch(TapeMode::Relaxed, tau, d))};
}

int RelaxedSketch::num_features() const { return relax::num_features(set_); }

FeatureSet feature_set_of(const sched::Sketch& s) {
  return sched::is_gpu_rule(s.rule) ? FeatureSet::Gpu : FeatureSet::Cpu;
}

void RelaxedSketch::knobs_of(const double* x, int batch, double* knobs) const {
  const int nk = static_cast<int>(knob_of_.size()), nv = num_vars();
  for (int b = 0; b < batch; ++b) {
    for (int k = 0; k < nk; ++k) {
      double log_value = 0;
      for (const auto& [v, lnp] : exponents_[k]) log_value += x[b * nv + v] * lnp;
      double value = std::exp(log_value);
      value = knob_of_[k].first < 0 ? value - 1.0 : value;  // unroll: 2^z - 1
      // Exact mode evaluates integer points: exp(x ln p) is off by an ulp, and floor
      // division must not see 15.999999.
      knobs[b * nk + k] = mode_ == TapeMode::Exact ? std::round(value) : value;
    }
  }
}

void RelaxedSketch::split_outputs(const double* out, int batch, double* features, double* constraints) const {
  const int nf = stores_ * num_features(), nc = num_constraints();
  for (int b = 0; b < batch; ++b) {
    std::copy(&out[b * (nf + nc)], &out[b * (nf + nc) + nf], features + static_cast<size_t>(b) * nf);
    if (constraints)
      std::copy(&out[b * (nf + nc) + nf], &out[(b + 1) * (nf + nc)], constraints + static_cast<size_t>(b) * nc);
  }
}

void RelaxedSketch::forward(const double* x, int batch, double* features, double* constraints) {
  const size_t nk = knob_of_.size(), no = static_cast<size_t>(stores_ * num_features() + num_constraints());
  batch_ = batch;
  ++generation_;
  if (knobs_.size() < batch * nk) knobs_.resize(batch * nk);  // all written below
  knobs_of(x, batch, knobs_.data());
  if (out_.size() < batch * no) out_.resize(batch * no);  // all written by the tape
  tape_->forward(knobs_.data(), batch, out_.data());
  split_outputs(out_.data(), batch, features, constraints);
}

void RelaxedSketch::evaluate(const double* x, int batch, double* features, double* constraints) const {
  thread_local std::vector<double> knobs, out;
  const size_t nk = knob_of_.size(), nv = static_cast<size_t>(num_vars());
  const size_t nf = static_cast<size_t>(stores_ * num_features()), nc = static_cast<size_t>(num_constraints());
  const size_t rows = static_cast<size_t>(std::min(batch, Tape::kChunk));
  if (knobs.size() < rows * nk) knobs.resize(rows * nk);
  if (out.size() < rows * (nf + nc)) out.resize(rows * (nf + nc));
  for (int start = 0; start < batch; start += Tape::kChunk) {
    const int n = std::min(Tape::kChunk, batch - start);
    knobs_of(x + start * nv, n, knobs.data());
    tape_->evaluate(knobs.data(), n, out.data());
    split_outputs(out.data(), n, features + start * nf, constraints ? constraints + start * nc : nullptr);
  }
}

void RelaxedSketch::backward(const double* grad_features, double* grad_x, const double* grad_constraints) {
  int nk = static_cast<int>(knob_of_.size()), nv = num_vars();
  int nf = stores_ * num_features(), nc = num_constraints();
  std::vector<double> grad_out(static_cast<size_t>(batch_) * (nf + nc), 0.0);
  for (int b = 0; b < batch_; ++b) {
    std::copy(grad_features + static_cast<size_t>(b) * nf, grad_features + static_cast<size_t>(b + 1) * nf,
              &grad_out[b * (nf + nc)]);
    if (grad_constraints)
      std::copy(grad_constraints + static_cast<size_t>(b) * nc, grad_constraints + static_cast<size_t>(b + 1) * nc,
                &grad_out[b * (nf + nc) + nf]);
  }
  std::vector<double> grad_knobs(static_cast<size_t>(batch_) * nk);
  tape_->backward(grad_out.data(), grad_knobs.data());
  for (int i = 0; i < batch_ * nv; ++i) grad_x[i] = 0;
  for (int b = 0; b < batch_; ++b)
    for (int k = 0; k < nk; ++k) {
      // d value / d x_v = value * ln p (the unroll's value is 2^z - 1: its slope is 2^z ln 2)
      double value = knobs_[b * nk + k] + (knob_of_[k].first < 0 ? 1.0 : 0.0);
      for (const auto& [v, lnp] : exponents_[k]) grad_x[b * nv + v] += grad_knobs[b * nk + k] * value * lnp;
    }
}

}  // namespace basin::relax
