// The GPU's analytical estimator, and the prior that the trainable estimators start
// from on the cuda target, where no weights ship yet (docs/estimators.md, "On the GPU").
//
// gpu_roofline: each store's time is the larger of its compute time (its flops at the
// GPU's FP32 rate, or for a fragment's store at its tensor cores' rate, TF32's or twice
// that for FP16 and BF16, scaled by the share of the GPU's thread slots its blocks fill)
// and its memory time (the bytes of its global buffers at the memory bandwidth); the
// score is the log of the sum in microseconds, except that a pipeline's asynchronous
// copies overlap its tensor-core fragments (the larger of their sums counts). Written in
// LibTorch, so the gradient search descends on it as on the MLP. Its rates are the
// architecture's data-sheet figures, not measured: it ranks, it does not predict
// latencies.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/util/error.h"
#include "models/estimator.h"
#include "relax/features.h"

namespace basin::models {

namespace {

int gpu_index(const std::string& name) {
  const auto& n = relax::feature_names(relax::FeatureSet::Gpu);
  auto it = std::find(n.begin(), n.end(), name);
  BASIN_CHECK(it != n.end()) << "no GPU feature " << name;
  return static_cast<int>(it - n.begin());
}

// Data-sheet figures of the GPUs the target compiles for (dense tensor-core rates).
struct GpuRates {
  double sms, fp32_flops, tf32_flops, bandwidth;
};
GpuRates rates_of(const std::string& arch) {
  if (arch == "sm_80") return {108, 19.5e12, 156e12, 1.9e12};  // A100
  return {132, 67e12, 495e12, 3.35e12};                        // H100 (sm_90 and later)
}

class GpuRoofline final : public DifferentiableEstimator {
 public:
  explicit GpuRoofline(std::string arch) : arch_(std::move(arch)), r_(rates_of(arch_)) {}
  std::string kind() const override { return "gpu_roofline"; }
  bool trainable() const override { return false; }
  void train(const std::vector<Sample>&, const TrainOptions&) override {}  // nothing to learn
  void update(const std::vector<Sample>&, const TrainOptions&) override {}

  std::vector<double> predict(const FeatureBatch& b) override { return detail::predict_by_forward(*this, b); }

  torch::Tensor forward(const torch::Tensor& features, const torch::Tensor& mask) override {
    if (features.size(2) != relax::num_features(relax::FeatureSet::Gpu))
      throw Error("the gpu_roofline estimator reads the GPU feature set (" +
                  std::to_string(relax::num_features(relax::FeatureSet::Gpu)) + " features), not " +
                  std::to_string(features.size(2)));
    static const int add = gpu_index("flops_add"), mul = gpu_index("flops_mul"), div = gpu_index("flops_div"),
                     math = gpu_index("flops_math"), cmp = gpu_index("flops_cmp_select"),
                     blocks = gpu_index("gpu.blocks"), tpb = gpu_index("gpu.threads_per_block"),
                     tc = gpu_index("gpu.tensor_core"), async = gpu_index("gpu.async_copy");
    auto raw = [&](int i) { return torch::exp2(features.select(2, i)) - 1; };
    // A fragment's store: its products (its TF32 roundings belong to the fragment loads).
    torch::Tensor on_tc = raw(tc).clamp(0, 1);
    torch::Tensor flops = raw(add) + raw(mul) + (1 - on_tc) * (8 * raw(div) + 20 * raw(math) + raw(cmp));
    torch::Tensor bytes = torch::zeros_like(flops);
    // Global traffic: the unique bytes of the slots that are not shared memory.
    for (int k = 0; k < relax::kBufferSlots; ++k) {
      const std::string slot = "buf" + std::to_string(k);
      bytes = bytes + raw(gpu_index(slot + ".unique_bytes")) * (1 - raw(gpu_index(slot + ".shared")).clamp(0, 1));
    }
    // The share of the GPU's thread slots (2048 per SM) the store's blocks fill.
    torch::Tensor fill = (raw(blocks).clamp_min(1) * raw(tpb).clamp_min(1) / (r_.sms * 2048)).clamp(1e-6, 1.0);
    // FP16 and BF16 fragments (gpu.tensor_core 2) at twice the TF32 rate.
    torch::Tensor rate = fill * (on_tc * r_.tf32_flops * raw(tc).clamp(1, 2) + (1 - on_tc) * r_.fp32_flops);
    torch::Tensor t = torch::maximum(flops / rate, bytes / r_.bandwidth) * mask;
    // A pipeline's copies run while the fragments compute: their time and the
    // fragments' overlap (the larger counts), the other stores' add up.
    torch::Tensor copying = raw(async).clamp(0, 1);
    torch::Tensor plain = (t * (1 - copying) * (1 - on_tc)).sum(1);
    torch::Tensor overlapped = torch::maximum((t * copying).sum(1), (t * on_tc).sum(1));
    return torch::log((plain + overlapped) * 1e6 + 1e-3);
  }

  std::string payload() const override { return nlohmann::json{{"arch", arch_}}.dump(); }

 private:
  std::string arch_;
  GpuRates r_;
};

// A trainable estimator that scores with the prior until it has trained on enough
// programs: the tuning loop's first rounds on a GPU are ranked by the roofline instead
// of drawn at random, and the learned estimator takes over once it knows the task.
class WithPrior final : public DifferentiableEstimator {
 public:
  WithPrior(std::unique_ptr<Estimator> learned, std::unique_ptr<Estimator> prior)
      : learned_(std::move(learned)), prior_(std::move(prior)) {}
  // The learned estimator's kind: what a saved file holds, and what the tuning loop's
  // rules for a kind apply to.
  std::string kind() const override { return learned_->kind(); }
  bool retrains_in_tuning() const override { return learned_->retrains_in_tuning(); }
  bool ready() const override { return true; }
  std::vector<double> predict(const FeatureBatch& b) override { return active().predict(b); }
  torch::Tensor forward(const torch::Tensor& features, const torch::Tensor& mask) override {
    auto* d = dynamic_cast<DifferentiableEstimator*>(&active());
    if (!d) throw Error("the " + learned_->kind() + " estimator is not differentiable");
    return d->forward(features, mask);
  }
  // Trains the learned estimator from scratch once there are kMinSamples programs,
  // then fine-tunes it (models::train_for_tuning's options).
  void train(const std::vector<Sample>& samples, const TrainOptions& opt) override {
    if (samples.size() < kMinSamples) return;
    learned_->train(samples, opt);
  }
  void update(const std::vector<Sample>& samples, const TrainOptions& opt) override {
    if (learned_->ready()) return learned_->update(samples, opt);
    TrainOptions scratch = opt;
    scratch.epochs = std::max(opt.epochs, 10);
    train(samples, scratch);
  }
  std::string payload() const override { return learned_->payload(); }

  static constexpr size_t kMinSamples = 8;

 private:
  Estimator& active() { return learned_->ready() ? *learned_ : *prior_; }
  std::unique_ptr<Estimator> learned_, prior_;
};

}  // namespace

std::unique_ptr<Estimator> make_gpu_roofline(const std::string& arch) { return std::make_unique<GpuRoofline>(arch); }

std::unique_ptr<Estimator> with_gpu_prior(std::unique_ptr<Estimator> learned, const std::string& arch) {
  return std::make_unique<WithPrior>(std::move(learned), make_gpu_roofline(arch));
}

namespace detail {
std::unique_ptr<Estimator> load_gpu_roofline(const std::string& payload, const std::string& path) {
  try {
    return make_gpu_roofline(nlohmann::json::parse(payload).at("arch").get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": malformed gpu_roofline parameters (" + e.what() + ")");
  }
}
}  // namespace detail

BASIN_REGISTER_ESTIMATOR(
    "gpu_roofline", 40, [] { return make_gpu_roofline(); }, detail::load_gpu_roofline,
    "the GPU's analytical roofline (data-sheet rates of the architecture), differentiable; not trainable");

}  // namespace basin::models
