// The ensemble estimator: the MLP and the GBT, each score divided by its typical spread
// within a task, averaged. Their errors differ (a per-store network summed over stores
// against trees over the stores' sum and max), and the average ranks held-out tasks
// better than either (docs/PERFORMANCE.md@6bf7154, "Feature set 5"). Scores of one task only
// need a common scale, not a common offset, so the scales are fixed numbers (the mean
// over the training tasks of the standard deviation of a part's scores within a task)
// and one program's score does not depend on the others of its batch: the tuning loop
// caches scores per program.
//
// Differentiable through the MLP: the trees are piecewise constant, so the gradient of
// the average is the MLP's gradient times its weight; the gradient search descends on
// that and ranks its rounded candidates with the full average.
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "core/util/error.h"
#include "core/util/parallel.h"
#include "models/estimator.h"

namespace basin::models {

namespace {

// The mean over tasks (of at least two programs) of the standard deviation of the
// scores within a task; 0 when no task has two programs.
double typical_spread(const std::vector<double>& score, const std::vector<Sample>& samples) {
  std::map<std::string, std::vector<double>> by_task;
  for (size_t i = 0; i < samples.size(); ++i) by_task[pair_group(samples[i])].push_back(score[i]);
  double sum = 0;
  int tasks = 0;
  for (const auto& [task, s] : by_task) {
    if (s.size() < 2) continue;
    double mean = 0, var = 0;
    for (double v : s) mean += v;
    mean /= s.size();
    for (double v : s) var += (v - mean) * (v - mean);
    sum += std::sqrt(var / s.size());
    ++tasks;
  }
  return tasks > 0 ? sum / tasks : 0;
}

class Ensemble final : public DifferentiableEstimator {
 public:
  Ensemble(std::unique_ptr<Estimator> mlp, std::unique_ptr<Estimator> gbt)
      : mlp_(std::move(mlp)), gbt_(std::move(gbt)) {
    BASIN_CHECK(mlp_->differentiable()) << "the ensemble's first part must be the MLP";
  }

  std::string kind() const override { return "ensemble"; }
  // Ready with the MLP alone (the shipped weights): the trees join at the first update.
  bool ready() const override { return mlp_->ready(); }

  // The two parts at once, each on a thread (the trees on the second).
  std::vector<double> predict(const FeatureBatch& b) override {
    if (!blended()) return mlp_->predict(b);
    std::vector<double> s, g;
    run_both([&] { s = mlp_->predict(b); }, [&] { g = gbt_->predict(b); });
    for (size_t i = 0; i < s.size(); ++i) s[i] = 0.5 * (s[i] / mlp_scale_ + g[i] / gbt_scale_);
    return s;
  }

  torch::Tensor forward(const torch::Tensor& features, const torch::Tensor& mask) override {
    torch::Tensor s = static_cast<DifferentiableEstimator&>(*mlp_).forward(features, mask);
    if (!blended()) return s;
    return s * (0.5 / mlp_scale_);  // plus the trees' term, constant almost everywhere
  }

  void train(const std::vector<Sample>& samples, const TrainOptions& opt) override {
    run_both([&] { mlp_->train(samples, opt); }, [&] { gbt_->train(samples, opt); });
    rescale(samples);
  }

  // Fine-tunes the MLP, and the trees the same way: rounds fitted to the samples are
  // added to the trees already there (cross-task trees of a trained or shipped
  // ensemble), which are trained from the samples only when there are none yet (the
  // shipped MLP alone). Retraining them on one task's few hundred programs, as session
  // 30 did, threw away what the cross-task trees knew and made three of five tasks worse
  // (docs/PERFORMANCE.md@6bf7154).
  void update(const std::vector<Sample>& samples, const TrainOptions& opt) override {
    run_both([&] { mlp_->update(samples, opt); },
             [&] {
               if (gbt_->ready()) gbt_->update(samples, opt);
               else gbt_->train(samples, opt);
             });
    rescale(samples);
  }

  std::string payload() const override {
    std::string mlp = mlp_->payload(), gbt = gbt_->ready() ? gbt_->payload() : "";
    nlohmann::json meta = {
        {"mlp_bytes", mlp.size()}, {"gbt_bytes", gbt.size()}, {"mlp_scale", mlp_scale_}, {"gbt_scale", gbt_scale_}};
    return meta.dump() + "\n" + mlp + gbt;
  }

  void load(const std::string& payload, const std::string& path) {
    size_t nl = payload.find('\n');
    size_t mlp_bytes = 0, gbt_bytes = 0;
    try {
      nlohmann::json meta = nlohmann::json::parse(payload.substr(0, nl));
      mlp_bytes = meta.at("mlp_bytes").get<size_t>();
      gbt_bytes = meta.at("gbt_bytes").get<size_t>();
      mlp_scale_ = meta.at("mlp_scale").get<double>();
      gbt_scale_ = meta.at("gbt_scale").get<double>();
    } catch (const nlohmann::json::exception& e) {
      throw Error(path + ": malformed ensemble header (" + e.what() + ")");
    }
    if (nl == std::string::npos || payload.size() - nl - 1 != mlp_bytes + gbt_bytes)
      throw Error(path + ": malformed ensemble payload (its parts' sizes do not add up)");
    mlp_ = detail::load_mlp(payload.substr(nl + 1, mlp_bytes), path);
    gbt_ = gbt_bytes > 0 ? detail::load_gbt(payload.substr(nl + 1 + mlp_bytes), path) : detail::make_gbt();
  }

 private:
  // Both parts score, on scales measured at the last training or update.
  bool blended() const { return gbt_->ready() && gbt_scale_ > 0 && mlp_scale_ > 0; }

  void rescale(const std::vector<Sample>& samples) {
    FeatureBatch b = FeatureBatch::of(samples);
    std::vector<double> ms, gs;
    run_both([&] { ms = mlp_->predict(b); }, [&] { gs = gbt_->predict(b); });
    double m = typical_spread(ms, samples), g = typical_spread(gs, samples);
    if (m > 0 && g > 0) {  // else keep the previous scales (a batch of single programs)
      mlp_scale_ = m;
      gbt_scale_ = g;
    }
  }

  std::unique_ptr<Estimator> mlp_, gbt_;
  double mlp_scale_ = 0, gbt_scale_ = 0;
};

}  // namespace

namespace detail {
std::unique_ptr<Estimator> make_ensemble(std::unique_ptr<Estimator> mlp) {
  return std::make_unique<Ensemble>(mlp ? std::move(mlp) : make_mlp(), make_gbt());
}
std::unique_ptr<Estimator> load_ensemble(const std::string& payload, const std::string& path) {
  auto e = std::make_unique<Ensemble>(make_mlp(), make_gbt());
  e->load(payload, path);
  return e;
}
}  // namespace detail

BASIN_REGISTER_ESTIMATOR(
    "ensemble", 20, [] { return detail::make_ensemble(nullptr); }, detail::load_ensemble,
    "the MLP and trees, ranked together; descends on the MLP (the shipped CPU ensemble with --estimator ensemble)");

}  // namespace basin::models
