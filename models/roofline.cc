// The analytical roofline estimator: no training. Each store's time is the larger of
// its compute time (its flops at the machine's peak scaled by the vector lanes and the
// parallel work it uses) and its memory time (the unique bytes it touches at the
// memory bandwidth), plus a per-iteration overhead; the score is the log of the sum in
// microseconds.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/util/error.h"
#include "core/util/host.h"
#include "models/estimator.h"
#include "relax/features.h"

namespace basin::models {

namespace {

int index_of(const std::string& name) {
  const auto& n = relax::feature_names();
  auto it = std::find(n.begin(), n.end(), name);
  BASIN_CHECK(it != n.end()) << "no feature " << name;
  return static_cast<int>(it - n.begin());
}

class Roofline final : public Estimator {
 public:
  Roofline() : cores_(this_host().cores) {}  // the threads kernels run on
  std::string kind() const override { return "roofline"; }
  bool trainable() const override { return false; }
  void train(const std::vector<Sample>&, const TrainOptions&) override {}  // nothing to learn
  void update(const std::vector<Sample>&, const TrainOptions&) override {}

  std::vector<double> predict(const FeatureBatch& b) override {
    static const int add = index_of("flops_add"), mul = index_of("flops_mul"), div = index_of("flops_div"),
                     math = index_of("flops_math"), cmp = index_of("flops_cmp_select"), it = index_of("iterations"),
                     lanes = index_of("vector_lanes"), par = index_of("parallel_extent");
    std::vector<int> bytes;
    for (int k = 0; k < relax::kBufferSlots; ++k)
      bytes.push_back(index_of("buf" + std::to_string(k) + ".unique_bytes"));
    auto raw = [](float v) { return std::exp2(static_cast<double>(v)) - 1.0; };
    const double lane_rate = peak_gflops_ * 1e9 / (cores_ * 16.0);  // flop/s of one lane of one core
    std::vector<double> out(b.batch);
    for (int i = 0; i < b.batch; ++i) {
      double t = 0;
      for (int s = 0; s < b.stores; ++s) {
        if (b.mask[static_cast<size_t>(i) * b.stores + s] == 0) continue;
        const float* f = &b.values[(static_cast<size_t>(i) * b.stores + s) * b.features];
        double flops = raw(f[add]) + raw(f[mul]) + 8 * raw(f[div]) + 20 * raw(f[math]) + raw(f[cmp]);
        double used_lanes = std::clamp(raw(f[lanes]), 1.0, 16.0);
        double used_cores = std::clamp(raw(f[par]), 1.0, static_cast<double>(cores_));
        double mem = 0;
        for (int k : bytes) mem += raw(f[k]);
        double compute = flops / (lane_rate * used_lanes * used_cores);
        double memory = mem / (bandwidth_gbs_ * 1e9);
        double overhead = raw(f[it]) / used_lanes / used_cores * iteration_ns_ * 1e-9;
        t += std::max(compute, memory) + overhead;
      }
      out[i] = std::log(std::max(t, 1e-9) * 1e6);
    }
    return out;
  }

  std::string payload() const override {
    nlohmann::json j = {{"peak_gflops", peak_gflops_},
                        {"bandwidth_gbs", bandwidth_gbs_},
                        {"iteration_ns", iteration_ns_},
                        {"cores", cores_}};
    return j.dump();
  }

  void load(const std::string& payload, const std::string& path) {
    try {
      nlohmann::json j = nlohmann::json::parse(payload);
      peak_gflops_ = j.at("peak_gflops");
      bandwidth_gbs_ = j.at("bandwidth_gbs");
      iteration_ns_ = j.at("iteration_ns");
      cores_ = j.at("cores");
    } catch (const nlohmann::json::exception& e) {
      throw Error(path + ": malformed roofline parameters (" + e.what() + ")");
    }
  }

 private:
  double peak_gflops_ = 100.0 * 2;  // AVX-512 FMA, 2 cores
  double bandwidth_gbs_ = 20.0;
  double iteration_ns_ = 0.3;
  int cores_;
};

}  // namespace

namespace detail {
std::unique_ptr<Estimator> make_roofline() { return std::make_unique<Roofline>(); }
std::unique_ptr<Estimator> load_roofline(const std::string& payload, const std::string& path) {
  auto r = std::make_unique<Roofline>();
  r->load(payload, path);
  return r;
}
}  // namespace detail

BASIN_REGISTER_ESTIMATOR("roofline", 30, detail::make_roofline, detail::load_roofline,
                         "the CPU's analytical roofline of each store; ready untrained, not trainable");

}  // namespace basin::models
