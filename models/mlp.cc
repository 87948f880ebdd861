// The MLP estimator (DESIGN.md, "Estimators"): each store's normalized features go
// through a two-layer encoder, the encodings are summed over the program's stores, and
// a two-layer head gives the score. Loss "rank": pairwise logistic over pairs of one
// task (the faster program should score lower); loss "mse": squared error against log
// latency in microseconds.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "core/util/error.h"
#include "core/util/hardware.h"
#include "models/estimator.h"
#include "relax/features.h"

namespace basin::models {

namespace {

struct NetImpl : torch::nn::Module {
  NetImpl(int features, int hidden)
      : e1(register_module("e1", torch::nn::Linear(features, hidden))),
        e2(register_module("e2", torch::nn::Linear(hidden, hidden))),
        h1(register_module("h1", torch::nn::Linear(hidden, hidden / 2))),
        h2(register_module("h2", torch::nn::Linear(hidden / 2, 1))),
        mean(register_buffer("mean", torch::zeros({features}))),
        inv_std(register_buffer("inv_std", torch::ones({features}))) {}

  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) {
    torch::Tensor z = (x - mean) * inv_std;
    z = torch::relu(e2(torch::relu(e1(z))));
    z = (z * mask.unsqueeze(-1)).sum(1);
    return h2(torch::relu(h1(z))).squeeze(-1);
  }

  torch::nn::Linear e1, e2, h1, h2;
  torch::Tensor mean, inv_std;
};
TORCH_MODULE(Net);

torch::Tensor tensor_of(const std::vector<float>& v, std::vector<int64_t> shape) {
  return torch::from_blob(const_cast<float*>(v.data()), shape, torch::kFloat32).clone();
}

// Seeds LibTorch's CPU generator, the only one the MLP draws from. Not
// torch::manual_seed: a LibTorch built with CUDA seeds the GPUs' generators too, and
// so initializes the CUDA driver in this process; the cuda measurer's workers, forked
// afterwards, then cannot use the GPU (found on an H200 with PyTorch 2.11's LibTorch).
void seed_cpu_generator(uint64_t seed) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_current_seed(seed);
}

class Mlp final : public DifferentiableEstimator {
 public:
  explicit Mlp(int hidden = 128, std::string loss = "rank") : hidden_(hidden), loss_(std::move(loss)) {
    seed_cpu_generator(1);
    net_ = Net(nf_, hidden_);
  }

  std::string kind() const override { return "mlp"; }
  bool ready() const override { return trained_; }

  std::vector<double> predict(const FeatureBatch& b) override {
    if (b.batch == 0) return {};
    check_width(b.features);
    torch::NoGradGuard no_grad;
    net_->eval();
    torch::Tensor s =
        net_->forward(tensor_of(b.values, {b.batch, b.stores, b.features}), tensor_of(b.mask, {b.batch, b.stores}));
    s = s.to(torch::kFloat64).contiguous();
    return std::vector<double>(s.data_ptr<double>(), s.data_ptr<double>() + b.batch);
  }

  at::Tensor forward(const at::Tensor& features, const at::Tensor& mask) override {
    check_width(static_cast<int>(features.size(2)));
    return net_->forward(features, mask);
  }

  void train(const std::vector<Sample>& samples, const TrainOptions& opt) override {
    check_samples(samples);
    seed_cpu_generator(opt.seed);
    if (transferred_from_ > 0) return fine_tune_transfer(samples, opt);
    // The feature set (CPU or GPU) is the training data's.
    nf_ = width_of(samples[0]);
    net_ = Net(nf_, hidden_);
    loss_ = opt.loss;
    normalize_from(samples, 0);
    {
      torch::NoGradGuard no_grad;
      if (loss_ == "mse") {  // start the output at the data's mean log latency
        double my = 0;
        for (const Sample& s : samples) my += std::log(s.latency_us);
        net_->h2->bias.fill_(my / samples.size());
      }
    }
    fit(samples, opt, opt.epochs, /*cosine=*/true);
    trained_ = true;
  }

  void update(const std::vector<Sample>& samples, const TrainOptions& opt) override {
    check_samples(samples);
    check_width(width_of(samples[0]));
    fit(samples, opt, opt.epochs, /*cosine=*/false);
    trained_ = true;
  }

  // This CPU MLP's weights as an MLP over the GPU feature set, whose first
  // relax::num_features() features are the CPU set's: their columns of the first layer
  // and their normalization copied, the GPU features' columns zero (so that it scores a
  // GPU program as this MLP scores the CPU part of its features), the rest copied.
  // Not ready until trained: train() then fine-tunes it (fine_tune_transfer).
  std::unique_ptr<Mlp> to_gpu() const {
    const int cpu = relax::num_features(), gpu = relax::num_features(relax::FeatureSet::Gpu);
    if (!trained_ || nf_ != cpu)
      throw Error("only a trained MLP over the CPU feature set (" + std::to_string(cpu) +
                  " features) transfers to the GPU's; this one reads " + std::to_string(nf_) +
                  (trained_ ? "" : " and is untrained"));
    auto g = std::make_unique<Mlp>(hidden_, loss_);
    g->nf_ = gpu;
    g->net_ = Net(gpu, hidden_);
    torch::NoGradGuard no_grad;
    g->net_->e1->weight.zero_();
    g->net_->e1->weight.narrow(1, 0, cpu).copy_(net_->e1->weight);
    g->net_->e1->bias.copy_(net_->e1->bias);
    for (auto [to, from] : {std::pair{g->net_->e2, net_->e2}, {g->net_->h1, net_->h1}, {g->net_->h2, net_->h2}}) {
      to->weight.copy_(from->weight);
      to->bias.copy_(from->bias);
    }
    g->net_->mean.zero_();
    g->net_->inv_std.fill_(1.0);
    g->net_->mean.narrow(0, 0, cpu).copy_(net_->mean);
    g->net_->inv_std.narrow(0, 0, cpu).copy_(net_->inv_std);
    g->net_->eval();
    g->transferred_from_ = cpu;
    return g;
  }

  std::string payload() const override {
    torch::serialize::OutputArchive archive;
    net_->save(archive);
    std::ostringstream bytes;
    archive.save_to(bytes);
    nlohmann::json meta = {{"hidden", hidden_}, {"loss", loss_}, {"features", nf_}};
    return meta.dump() + "\n" + bytes.str();
  }

  void load(const std::string& payload, const std::string& path) {
    size_t nl = payload.find('\n');
    nlohmann::json meta;
    try {
      meta = nlohmann::json::parse(payload.substr(0, nl));
      hidden_ = meta.at("hidden").get<int>();
      loss_ = meta.at("loss").get<std::string>();
      nf_ = meta.at("features").get<int>();
      // A feature set's width, or that and the machine's description (make_machine_input).
      const int cpu = relax::num_features(), gpu = relax::num_features(relax::FeatureSet::Gpu);
      const int machine = static_cast<int>(hardware_feature_names().size());
      if (nf_ != cpu && nf_ != gpu && nf_ != cpu + machine && nf_ != gpu + machine)
        throw Error(path + ": an MLP over " + std::to_string(nf_) + " features, neither the CPU set's " +
                    std::to_string(cpu) + " nor the GPU set's " + std::to_string(gpu) + " (nor either with the " +
                    std::to_string(machine) + " of the machine's description)");
    } catch (const nlohmann::json::exception& e) {
      throw Error(path + ": malformed MLP header (" + e.what() + ")");
    }
    net_ = Net(nf_, hidden_);
    try {
      std::istringstream is(payload.substr(nl + 1));
      torch::serialize::InputArchive archive;
      archive.load_from(is);
      net_->load(archive);
      trained_ = true;
    } catch (const c10::Error& e) {
      throw Error(path + ": cannot load the MLP's weights (" + std::string(e.what_without_backtrace()) + ")");
    }
  }

 private:
  bool trained_ = false;
  int nf_ = relax::num_features();  // the feature set's width: CPU until trained or loaded
  int transferred_from_ = 0;        // to_gpu's result until trained: the CPU set's width
  // Features per store of a sample.
  static int width_of(const Sample& s) { return static_cast<int>(s.features.size()) / std::max(1, s.stores); }
  void check_width(int features) const {
    if (features != nf_)
      throw Error("this MLP reads " + std::to_string(nf_) + " features per store, not " + std::to_string(features) +
                  " (an estimator of the other target's feature set?)");
  }
  // Training a transferred MLP: the GPU features' normalization from the data (their
  // weights are zero, so the scores do not change), then `opt.epochs` passes from the
  // transferred weights at the cosine step.
  void fine_tune_transfer(const std::vector<Sample>& samples, const TrainOptions& opt) {
    check_width(width_of(samples[0]));
    loss_ = opt.loss;
    normalize_from(samples, transferred_from_);
    fit(samples, opt, opt.epochs, /*cosine=*/true);
    transferred_from_ = 0;
    trained_ = true;
  }
  // The normalization of features `from` on: their mean and inverse deviation over the
  // real stores of the samples.
  void normalize_from(const std::vector<Sample>& samples, int from) {
    const int nf = nf_;
    std::vector<double> sum(nf, 0), sq(nf, 0);
    double n = 0;
    for (const Sample& s : samples)
      for (int st = 0; st < s.stores; ++st, n += 1)
        for (int f = from; f < nf; ++f) {
          double v = s.features[st * nf + f];
          sum[f] += v;
          sq[f] += v * v;
        }
    torch::NoGradGuard no_grad;
    for (int f = from; f < nf; ++f) {
      double m = sum[f] / n, var = std::max(0.0, sq[f] / n - m * m);
      net_->mean[f] = m;
      net_->inv_std[f] = 1.0 / std::sqrt(var + 1e-2);
    }
  }
  static void check_samples(const std::vector<Sample>& samples) {
    if (samples.size() < 2) throw Error("training an estimator needs at least two measured programs");
  }

  // `epochs` passes: "mse" over shuffled minibatches of 128; "rank" over minibatches of
  // up to 128 programs of one task each. With `cosine` (training from scratch) the step
  // decays from opt.learning_rate to 0 along a half cosine over all the minibatches:
  // held-out pairwise accuracy over 5 folds of the committed dataset 0.838 against
  // 0.831 at a constant step (docs/PERFORMANCE.md@6bf7154, "Pair samples and a cosine step").
  // An update (fine-tuning a few hundred programs in the tuning loop) keeps the step.
  void fit(const std::vector<Sample>& samples, const TrainOptions& opt, int epochs, bool cosine) {
    net_->train();
    torch::optim::Adam adam(net_->parameters(), torch::optim::AdamOptions(opt.learning_rate).weight_decay(1e-5));
    std::mt19937_64 rng(opt.seed);
    std::map<std::string, std::vector<size_t>> by_task;
    for (size_t i = 0; i < samples.size(); ++i) by_task[pair_group(samples[i])].push_back(i);
    const size_t mb = 128;
    double total_steps = 0;  // every epoch cuts the same number of minibatches
    size_t step = 0;
    for (int epoch = 0; epoch < epochs; ++epoch) {
      std::vector<std::vector<size_t>> batches;
      if (opt.loss == "rank") {
        for (auto& [task, idx] : by_task) {
          std::shuffle(idx.begin(), idx.end(), rng);
          for (size_t at = 0; at < idx.size(); at += mb)
            batches.emplace_back(idx.begin() + at, idx.begin() + std::min(idx.size(), at + mb));
        }
      } else {
        std::vector<size_t> all(samples.size());
        for (size_t i = 0; i < all.size(); ++i) all[i] = i;
        std::shuffle(all.begin(), all.end(), rng);
        for (size_t at = 0; at < all.size(); at += mb)
          batches.emplace_back(all.begin() + at, all.begin() + std::min(all.size(), at + mb));
      }
      if (epoch == 0) total_steps = static_cast<double>(batches.size()) * epochs;
      std::shuffle(batches.begin(), batches.end(), rng);
      double total = 0;
      for (const std::vector<size_t>& bi : batches) {
        if (opt.loss == "rank" && bi.size() < 2) continue;
        std::vector<const Sample*> ps;
        std::vector<float> y;
        for (size_t i : bi) {
          ps.push_back(&samples[i]);
          y.push_back(static_cast<float>(std::log(samples[i].latency_us)));
        }
        FeatureBatch b = FeatureBatch::of(ps);
        torch::Tensor s =
            net_->forward(tensor_of(b.values, {b.batch, b.stores, b.features}), tensor_of(b.mask, {b.batch, b.stores}));
        torch::Tensor t = tensor_of(y, {b.batch});
        torch::Tensor loss;
        if (opt.loss == "rank") {
          torch::Tensor faster = (t.unsqueeze(1) < t.unsqueeze(0)).to(torch::kFloat32);  // [i][j]: i faster than j
          torch::Tensor margin = s.unsqueeze(1) - s.unsqueeze(0);                        // want s_i < s_j
          loss = (torch::nn::functional::softplus(margin) * faster).sum() / faster.sum().clamp_min(1);
        } else {
          loss = torch::mse_loss(s, t);
        }
        if (cosine) {
          double lr = opt.learning_rate * 0.5 * (1 + std::cos(M_PI * static_cast<double>(step) / total_steps));
          for (torch::optim::OptimizerParamGroup& g : adam.param_groups())
            static_cast<torch::optim::AdamOptions&>(g.options()).lr(lr);
        }
        ++step;
        adam.zero_grad();
        loss.backward();
        adam.step();
        total += loss.item<double>();
      }
      if (opt.verbose)
        std::fprintf(stderr, "[mlp] epoch %d: loss %.4f\n", epoch + 1, total / std::max<size_t>(1, batches.size()));
    }
    net_->eval();
  }

  int hidden_;
  std::string loss_;
  Net net_{nullptr};
};

}  // namespace

namespace detail {
std::unique_ptr<Estimator> make_mlp() { return std::make_unique<Mlp>(); }
std::unique_ptr<Estimator> load_mlp(const std::string& payload, const std::string& path) {
  auto m = std::make_unique<Mlp>();
  m->load(payload, path);
  return m;
}
}  // namespace detail

std::unique_ptr<Estimator> transfer_to_gpu(const Estimator& cpu_mlp) {
  const auto* m = dynamic_cast<const Mlp*>(&cpu_mlp);
  if (!m) throw Error("only an MLP transfers to the GPU's feature set, not a " + cpu_mlp.kind() + " estimator");
  return m->to_gpu();
}

BASIN_REGISTER_ESTIMATOR("mlp", 0, detail::make_mlp, detail::load_mlp,
                         "a multi-layer perceptron over the stores' features, differentiable (the shipped CPU weights "
                         "with --estimator mlp)");

}  // namespace basin::models
