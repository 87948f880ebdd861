// A user's estimator (basin::Estimator, from C++ or from Python through the package)
// behind the search's estimator interface (models::Estimator): its scores checked, its
// gradient wrapped in a LibTorch autograd function for the gradient search, the tuning
// loop's training samples handed to its update().
#include "api/estimator.h"

#include <torch/torch.h>

#include <cmath>
#include <utility>

#include "core/util/error.h"

namespace basin {

std::vector<float> Estimator::gradient(const FeatureBatch&) {
  throw Error("the estimator '" + name() + "' has no gradient (differentiable() is false)");
}

void Estimator::update(const FeatureBatch&, const std::vector<double>&) {}

namespace api {
namespace {

FeatureBatch view(int batch, int stores, int features, const float* values, const float* mask) {
  FeatureBatch b;
  b.batch = batch;
  b.stores = stores;
  b.features = features;
  b.values = values;
  b.mask = mask;
  return b;
}

std::vector<double> checked_predict(Estimator& e, const FeatureBatch& b) {
  if (b.batch == 0) return {};
  std::vector<double> s = e.predict(b);
  if (s.size() != static_cast<size_t>(b.batch))
    throw Error("the estimator '" + e.name() + "' returned " + std::to_string(s.size()) + " scores for " +
                std::to_string(b.batch) + " programs (predict returns one per program)");
  for (size_t i = 0; i < s.size(); ++i)
    if (!std::isfinite(s[i]))
      throw Error("the estimator '" + e.name() + "' returned a score that is not finite (" + std::to_string(s[i]) +
                  ", program " + std::to_string(i) + ")");
  return s;
}

std::vector<float> checked_gradient(Estimator& e, const FeatureBatch& b) {
  std::vector<float> g = e.gradient(b);
  const size_t n = static_cast<size_t>(b.batch) * b.stores * b.features;
  if (g.size() != n)
    throw Error("the estimator '" + e.name() + "' returned a gradient of " + std::to_string(g.size()) +
                " values for features of " + std::to_string(n) + " (" + std::to_string(b.batch) + " x " +
                std::to_string(b.stores) + " x " + std::to_string(b.features) + ")");
  for (float v : g)
    if (!std::isfinite(v)) throw Error("the estimator '" + e.name() + "' returned a gradient that is not finite");
  return g;
}

// The user's scores as a LibTorch function of the features: forward calls predict,
// backward calls gradient (d sum(scores) / d features; each program's score depends on
// its own features, so row b's gradient, times the incoming gradient of score b, is
// that score's part).
struct UserScores : public torch::autograd::Function<UserScores> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor features, torch::Tensor mask,
                               int64_t estimator) {
    features = features.to(torch::kFloat32).contiguous();
    mask = mask.to(torch::kFloat32).contiguous();
    ctx->save_for_backward({features, mask});
    ctx->saved_data["estimator"] = estimator;
    auto& e = *reinterpret_cast<Estimator*>(estimator);
    std::vector<double> s = checked_predict(
        e, view(static_cast<int>(features.size(0)), static_cast<int>(features.size(1)),
                static_cast<int>(features.size(2)), features.data_ptr<float>(), mask.data_ptr<float>()));
    return torch::tensor(s, torch::kFloat64).to(torch::kFloat32);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grad) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor& features = saved[0];
    const torch::Tensor& mask = saved[1];
    auto& e = *reinterpret_cast<Estimator*>(ctx->saved_data["estimator"].toInt());
    const int b = static_cast<int>(features.size(0)), s = static_cast<int>(features.size(1)),
              f = static_cast<int>(features.size(2));
    std::vector<float> g = checked_gradient(e, view(b, s, f, features.data_ptr<float>(), mask.data_ptr<float>()));
    torch::Tensor gt = torch::from_blob(g.data(), {b, s, f}, torch::kFloat32).clone();
    gt = gt * grad[0].to(torch::kFloat32).reshape({b, 1, 1});
    return {gt, torch::Tensor(), torch::Tensor()};
  }
};

// The adapter, on either base: models::Estimator (scores only) or
// models::DifferentiableEstimator (the gradient search's).
template <class Base>
class Adapter : public Base {
 public:
  explicit Adapter(std::shared_ptr<Estimator> e) : e_(std::move(e)) {}
  std::string kind() const override { return e_->name(); }
  std::vector<double> predict(const models::FeatureBatch& b) override {
    return checked_predict(*e_, view(b.batch, b.stores, b.features, b.values.data(), b.mask.data()));
  }
  bool ready() const override { return e_->ready(); }
  void train(const std::vector<models::Sample>& samples, const models::TrainOptions&) override { feed(samples); }
  void update(const std::vector<models::Sample>& samples, const models::TrainOptions&) override { feed(samples); }
  void save(const std::string&) const override {
    throw Error("the estimator '" + e_->name() + "' is one's own: its own code saves it");
  }

 protected:
  void feed(const std::vector<models::Sample>& samples) {
    if (samples.empty()) return;
    models::FeatureBatch b = models::FeatureBatch::of(samples);
    std::vector<double> latencies;
    latencies.reserve(samples.size());
    for (const models::Sample& s : samples) latencies.push_back(s.latency_us);
    e_->update(view(b.batch, b.stores, b.features, b.values.data(), b.mask.data()), latencies);
  }
  std::shared_ptr<Estimator> e_;
};

class DifferentiableAdapter final : public Adapter<models::DifferentiableEstimator> {
 public:
  using Adapter::Adapter;
  at::Tensor forward(const at::Tensor& features, const at::Tensor& mask) override {
    return UserScores::apply(features, mask, reinterpret_cast<int64_t>(e_.get()));
  }
};

}  // namespace

std::unique_ptr<models::Estimator> adapt(std::shared_ptr<Estimator> e) {
  if (!e) throw Error("basin::TuneOptions::custom_estimator is null");
  if (e->differentiable()) return std::make_unique<DifferentiableAdapter>(std::move(e));
  return std::make_unique<Adapter<models::Estimator>>(std::move(e));
}

}  // namespace api
}  // namespace basin
