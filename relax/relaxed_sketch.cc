#include "relax/relaxed_sketch.h"

#include <algorithm>
#include <cmath>

#include "core/schedule/lower_sketch.h"
#include "relax/features.h"

namespace basin::relax {

RelaxedSketch::RelaxedSketch(const ops::OpGraph& task, const sched::Sketch& s, TapeMode mode, double tau,
                             const CpuTarget& target)
    : space_(s), mode_(mode) {
  sched::KnobValues sym = sched::symbolic_knobs(s);
  std::vector<Var> inputs;
  for (size_t i = 0; i < sym.factors.size(); ++i)
    for (size_t l = 0; l < sym.factors[i].size(); ++l) {
      inputs.push_back(Var(sym.factors[i][l]));
      knob_of_.push_back({static_cast<int>(i), static_cast<int>(l)});
    }
  inputs.push_back(Var(sym.unroll));
  knob_of_.push_back({-1, -1});
  // Which exponent variables make up each factor knob.
  exponents_.resize(inputs.size());
  const auto& ev = space_.exponent_vars();
  for (size_t v = 0; v < ev.size(); ++v)
    for (size_t k = 0; k + 1 < inputs.size(); ++k)
      if (knob_of_[k] == std::make_pair(ev[v].split, ev[v].level))
        exponents_[k].push_back({static_cast<int>(v), std::log(static_cast<double>(ev[v].prime))});
  exponents_.back().push_back({space_.unroll_var(), std::log(2.0)});

  LoweredFunc structure = sched::lower_sketch_structure(task, s, sym);
  set_ = feature_set_of(s);
  std::vector<StoreFeatures> feats = extract_features(structure, set_);
  std::vector<Expr> outputs;
  const double inv_ln2 = 1.0 / std::log(2.0);
  for (const StoreFeatures& st : feats) {
    buffers_.push_back(st.buffer);
    for (const Expr& e : st.values)
      outputs.push_back(call(MathFn::log, {max(e, float_imm(DType::f64(), 0.0)) + float_imm(DType::f64(), 1.0)}) *
                        float_imm(DType::f64(), inv_ln2));
  }
  stores_ = static_cast<int>(feats.size());
  for (const Constraint& c : set_ == FeatureSet::Gpu ? gpu_constraints(structure) : cpu_constraints(s, sym, structure, target)) {
    constraint_names_.push_back(c.name);
    outputs.push_back(c.value);
  }
  tape_ = std::make_unique<Tape>(outputs, inputs, mode, tau);
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
    if (constraints) std::copy(&out[b * (nf + nc) + nf], &out[(b + 1) * (nf + nc)], constraints + static_cast<size_t>(b) * nc);
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
