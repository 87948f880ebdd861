// The estimator that reads the machine (models/estimator.h, make_machine_input): the
// description of the machine that measured a program (basin::Hardware::features, H
// numbers) appended to each of its stores' features, so that the inner estimator sees
// F + H features per store. Training data brings each program's own machine
// (Sample::machine, from the records file's descriptions); the tuning loop's programs,
// and the gradient search's relaxed features, are this machine's.
#include <torch/torch.h>

#include <mutex>
#include <nlohmann/json.hpp>

#include "core/util/error.h"
#include "core/util/hardware.h"
#include "models/estimator.h"

namespace basin::models {

namespace {

class MachineInput final : public DifferentiableEstimator {
 public:
  explicit MachineInput(std::unique_ptr<Estimator> inner) : inner_(std::move(inner)) {
    if (inner_->kind().rfind("machine+", 0) == 0) throw Error("an estimator reads the machine once, not twice");
    if (!inner_->trainable())
      throw Error("the " + inner_->kind() + " estimator learns nothing from the machine's description");
  }

  std::string kind() const override { return "machine+" + inner_->kind(); }
  bool ready() const override { return inner_->ready(); }
  bool differentiable() const override { return inner_->differentiable(); }
  bool retrains_in_tuning() const override { return inner_->retrains_in_tuning(); }

  std::vector<double> predict(const FeatureBatch& b) override { return inner_->predict(widen(b)); }

  torch::Tensor forward(const torch::Tensor& features, const torch::Tensor& mask) override {
    if (!inner_->differentiable()) throw Error("the " + inner_->kind() + " estimator has no gradient");
    const std::vector<float>& m = here();
    torch::Tensor hw =
        torch::from_blob(const_cast<float*>(m.data()), {1, 1, static_cast<int64_t>(m.size())}, torch::kFloat32)
            .clone()
            .to(features.dtype())
            .expand({features.size(0), features.size(1), static_cast<int64_t>(m.size())});
    return static_cast<DifferentiableEstimator&>(*inner_).forward(torch::cat({features, hw}, 2), mask);
  }

  void train(const std::vector<Sample>& samples, const TrainOptions& opt) override {
    inner_->train(widen(samples), opt);
  }
  void update(const std::vector<Sample>& samples, const TrainOptions& opt) override {
    inner_->update(widen(samples), opt);
  }

  std::string payload() const override {
    const std::string inner = inner_->payload();
    nlohmann::json meta = {
        {"inner", inner_->kind()}, {"inner_bytes", inner.size()}, {"machine_features", hardware_feature_names()}};
    return meta.dump() + "\n" + inner;
  }

  void load(const std::string& payload, const std::string& path) {
    const size_t nl = payload.find('\n');
    std::string kind;
    size_t bytes = 0;
    try {
      nlohmann::json meta = nlohmann::json::parse(payload.substr(0, nl));
      kind = meta.at("inner").get<std::string>();
      bytes = meta.at("inner_bytes").get<size_t>();
      if (meta.at("machine_features").get<std::vector<std::string>>() != hardware_feature_names())
        throw Error(path + ": reads another description of the machine (" + meta.at("machine_features").dump() +
                    ") than this basin gives");
    } catch (const nlohmann::json::exception& e) {
      throw Error(path + ": malformed machine estimator header (" + e.what() + ")");
    }
    if (nl == std::string::npos || payload.size() - nl - 1 != bytes)
      throw Error(path + ": malformed machine estimator payload (its size does not match its header)");
    if (kind.rfind("machine+", 0) == 0) throw Error(path + ": a machine estimator inside a machine estimator");
    inner_ = detail::load_payload(kind, payload.substr(nl + 1), path);
  }

 private:
  // This machine's description, read once, at the first program without one.
  const std::vector<float>& here() {
    std::call_once(here_once_, [this] { here_ = this_hardware().features(); });
    return here_;
  }
  const std::vector<float>& machine_of(const std::vector<float>& m) { return m.empty() ? here() : m; }

  FeatureBatch widen(const FeatureBatch& b) {
    const size_t h = hardware_feature_names().size(), f = static_cast<size_t>(b.features);
    FeatureBatch w;
    w.batch = b.batch;
    w.stores = b.stores;
    w.features = b.features + static_cast<int>(h);
    w.mask = b.mask;
    w.machines = b.machines;
    w.values.resize(static_cast<size_t>(b.batch) * b.stores * (f + h));
    static const std::vector<float> none;
    for (size_t i = 0; i < static_cast<size_t>(b.batch); ++i) {
      const std::vector<float>& m = machine_of(b.machines.empty() ? none : b.machines[i]);
      BASIN_CHECK(m.size() == h) << "a machine description of " << m.size() << " numbers";
      for (size_t s = 0; s < static_cast<size_t>(b.stores); ++s) {
        const size_t at = i * b.stores + s;
        std::copy_n(b.values.begin() + static_cast<std::ptrdiff_t>(at * f), f,
                    w.values.begin() + static_cast<std::ptrdiff_t>(at * (f + h)));
        std::copy(m.begin(), m.end(), w.values.begin() + static_cast<std::ptrdiff_t>(at * (f + h) + f));
      }
    }
    return w;
  }

  std::vector<Sample> widen(const std::vector<Sample>& samples) {
    const size_t h = hardware_feature_names().size();
    std::vector<Sample> out;
    out.reserve(samples.size());
    for (const Sample& s : samples) {
      Sample w = s;
      const std::vector<float>& m = machine_of(s.machine);
      BASIN_CHECK(m.size() == h) << "a machine description of " << m.size() << " numbers";
      const size_t f = s.stores > 0 ? s.features.size() / static_cast<size_t>(s.stores) : 0;
      w.features.clear();
      w.features.reserve(static_cast<size_t>(s.stores) * (f + h));
      for (size_t st = 0; st < static_cast<size_t>(s.stores); ++st) {
        w.features.insert(w.features.end(), s.features.begin() + static_cast<std::ptrdiff_t>(st * f),
                          s.features.begin() + static_cast<std::ptrdiff_t>((st + 1) * f));
        w.features.insert(w.features.end(), m.begin(), m.end());
      }
      out.push_back(std::move(w));
    }
    return out;
  }

  std::unique_ptr<Estimator> inner_;
  std::once_flag here_once_;
  std::vector<float> here_;
};

}  // namespace

std::unique_ptr<Estimator> make_machine_input(std::unique_ptr<Estimator> inner) {
  return std::make_unique<MachineInput>(std::move(inner));
}

namespace detail {
std::unique_ptr<Estimator> load_machine_input(const std::string& payload, const std::string& path) {
  auto e = std::make_unique<MachineInput>(make_mlp());
  e->load(payload, path);
  return e;
}
}  // namespace detail

}  // namespace basin::models
