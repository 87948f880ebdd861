// Gradient-boosted trees through XGBoost's C API, the estimator AutoTVM and Ansor pair
// with annealing and evolution. A program is one row: the sum and the max of its
// stores' features and its store count. Loss "rank": rank:pairwise with one group per
// task; "mse": reg:squarederror on log latency. An update adds boosting rounds on the
// new samples to the existing trees.
//
// The step (eta) and the pairs sampled per program come from TrainOptions and are set
// at every training and update, since a model loaded from a file keeps its trees but
// not its training parameters. rank:pairwise samples num_pairsample pairs per program
// and round (XGBoost's default is 1); on the committed dataset 16 pairs at eta 0.1 rank
// held-out tasks at 0.844 against 0.827 for one pair at 0.2 (docs/PERFORMANCE.md@6bf7154).
#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "core/util/error.h"
#include "models/estimator.h"
#include "relax/features.h"

#if BASIN_HAVE_XGBOOST
#include <xgboost/c_api.h>
#endif

namespace basin::models {

#if BASIN_HAVE_XGBOOST
namespace {

void check(int rc, const char* what) {
  if (rc != 0) throw Error(std::string("XGBoost: ") + what + ": " + XGBGetLastError());
}

// [rows][2 F + 1]
std::vector<float> program_rows(const FeatureBatch& b) {
  int width = 2 * b.features + 1;
  std::vector<float> rows(static_cast<size_t>(b.batch) * width, 0.0f);
  for (int i = 0; i < b.batch; ++i) {
    float* r = &rows[static_cast<size_t>(i) * width];
    int stores = 0;
    for (int s = 0; s < b.stores; ++s) {
      if (b.mask[static_cast<size_t>(i) * b.stores + s] == 0) continue;
      ++stores;
      const float* f = &b.values[(static_cast<size_t>(i) * b.stores + s) * b.features];
      for (int k = 0; k < b.features; ++k) {
        r[k] += f[k];
        r[b.features + k] = std::max(r[b.features + k], f[k]);
      }
    }
    r[2 * b.features] = static_cast<float>(stores);
  }
  return rows;
}

class Matrix {
 public:
  Matrix(const std::vector<float>& rows, int n, int width) {
    check(XGDMatrixCreateFromMat(rows.data(), n, width, NAN, &h_), "creating a matrix");
  }
  ~Matrix() { XGDMatrixFree(h_); }
  DMatrixHandle get() const { return h_; }

 private:
  DMatrixHandle h_ = nullptr;
};

class Gbt final : public Estimator {
 public:
  Gbt() = default;
  ~Gbt() override { reset(); }
  std::string kind() const override { return "gbt"; }
  bool retrains_in_tuning() const override { return true; }
  bool ready() const override { return booster_ != nullptr; }

  std::vector<double> predict(const FeatureBatch& b) override {
    if (b.batch == 0) return {};
    if (!booster_) throw Error("the gbt estimator is untrained: train it on records first (basin estimator train)");
    Matrix m(program_rows(b), b.batch, 2 * b.features + 1);
    bst_ulong n = 0;
    const float* out = nullptr;
    check(XGBoosterPredict(booster_, m.get(), 0, 0, 0, &n, &out), "predicting");
    std::vector<double> s(out, out + n);
    if (loss_ == "rank")  // rank:pairwise scores the better program higher
      for (double& v : s) v = -v;
    return s;
  }

  void train(const std::vector<Sample>& samples, const TrainOptions& opt) override {
    reset();
    loss_ = opt.loss;
    boost(samples, opt);
  }

  void update(const std::vector<Sample>& samples, const TrainOptions& opt) override {
    if (!booster_) return train(samples, opt);
    boost(samples, opt);
  }

  std::string payload() const override {
    if (!booster_) throw Error("cannot save an untrained gbt estimator");
    bst_ulong len = 0;
    const char* buf = nullptr;
    check(XGBoosterSaveModelToBuffer(booster_, R"({"format": "ubj"})", &len, &buf), "saving");
    return loss_ + "\n" + std::string(buf, len);
  }

  void load(const std::string& payload, const std::string& path) {
    size_t nl = payload.find('\n');
    loss_ = payload.substr(0, nl);
    if (nl == std::string::npos || (loss_ != "rank" && loss_ != "mse")) throw Error(path + ": malformed gbt payload");
    check(XGBoosterCreate(nullptr, 0, &booster_), "creating a booster");
    std::string model = payload.substr(nl + 1);
    if (XGBoosterLoadModelFromBuffer(booster_, model.data(), model.size()) != 0)
      throw Error(path + ": cannot load the trees (" + XGBGetLastError() + ")");
  }

 private:
  void reset() {
    if (booster_) XGBoosterFree(booster_);
    booster_ = nullptr;
  }

  void boost(const std::vector<Sample>& samples, const TrainOptions& opt) {
    if (samples.size() < 2) throw Error("training an estimator needs at least two measured programs");
    // Rows grouped by task (ranking groups are contiguous).
    std::map<std::string, std::vector<const Sample*>> by_task;
    for (const Sample& s : samples) by_task[pair_group(s)].push_back(&s);
    std::vector<const Sample*> order;
    std::vector<unsigned> groups;
    for (auto& [task, v] : by_task) {
      order.insert(order.end(), v.begin(), v.end());
      groups.push_back(static_cast<unsigned>(v.size()));
    }
    FeatureBatch b = FeatureBatch::of(order);
    std::vector<float> labels;
    for (const Sample* s : order) labels.push_back(static_cast<float>(std::log(s->latency_us)));
    if (loss_ == "rank") {  // rank:pairwise wants higher labels for better programs
      for (float& l : labels) l = -l;
    }
    Matrix m(program_rows(b), b.batch, 2 * b.features + 1);
    check(XGDMatrixSetFloatInfo(m.get(), "label", labels.data(), labels.size()), "setting labels");
    if (loss_ == "rank") check(XGDMatrixSetUIntInfo(m.get(), "group", groups.data(), groups.size()), "setting groups");
    if (!booster_) {
      DMatrixHandle d[] = {m.get()};
      check(XGBoosterCreate(d, 1, &booster_), "creating a booster");
    }
    if (!(opt.tree_eta > 0 && opt.tree_eta <= 1)) throw Error("the gbt step (eta) must be in (0, 1]");
    if (opt.tree_pair_samples < 1) throw Error("the gbt needs at least one pair sample per program");
    // Every parameter at every call: a booster loaded from a file has its trees and its
    // objective, not these (it would boost at XGBoost's defaults, depth 6 and eta 0.3).
    const std::pair<const char*, std::string> params[] = {
        {"objective", loss_ == "rank" ? "rank:pairwise" : "reg:squarederror"},
        {"max_depth", "8"},
        {"min_child_weight", "2"},
        {"subsample", "0.8"},
        // A second thread only for large data: on a few hundred rows (the tuning loop's
        // updates, the tests) each of the round's parallel regions waits for the other
        // thread, and beside a busy process that wait is a scheduler slice (a test of
        // 200 rounds took 18 s beside another test instead of 0.4).
        {"nthread", b.batch >= 10000 ? "2" : "1"},
        {"seed", std::to_string(opt.seed % 1000000)},
        {"seed_per_iteration", "1"},  // a round's sample depends on the seed and the round, not on history
        {"verbosity", "0"},
        {"eta", std::to_string(opt.tree_eta)},
        {"num_pairsample", std::to_string(opt.tree_pair_samples)}};
    for (const auto& [name, value] : params) check(XGBoosterSetParam(booster_, name, value.c_str()), name);
    // `epochs` is the amount of learning: epochs / eta rounds (5 per epoch at eta 0.2).
    int rounds = std::max(1, static_cast<int>(std::lround(opt.epochs / opt.tree_eta)));
    int done = 0;  // rounds so far, also of a booster loaded from a file
    check(XGBoosterBoostedRounds(booster_, &done), "counting rounds");
    for (int i = 0; i < rounds; ++i) check(XGBoosterUpdateOneIter(booster_, done + i, m.get()), "boosting");
  }

  BoosterHandle booster_ = nullptr;
  std::string loss_ = "rank";
};

}  // namespace

namespace detail {
std::unique_ptr<Estimator> make_gbt() { return std::make_unique<Gbt>(); }
std::unique_ptr<Estimator> load_gbt(const std::string& payload, const std::string& path) {
  auto g = std::make_unique<Gbt>();
  g->load(payload, path);
  return g;
}
}  // namespace detail
#else
namespace detail {
std::unique_ptr<Estimator> make_gbt() { throw Error("this basin was built without XGBoost (libxgboost-dev)"); }
std::unique_ptr<Estimator> load_gbt(const std::string&, const std::string& path) {
  throw Error(path + ": a gbt estimator, but this basin was built without XGBoost (libxgboost-dev)");
}
}  // namespace detail
#endif

BASIN_REGISTER_ESTIMATOR("gbt", 10, detail::make_gbt, detail::load_gbt,
                         "gradient-boosted trees (XGBoost), pairwise ranking of programs; not differentiable");

}  // namespace basin::models
