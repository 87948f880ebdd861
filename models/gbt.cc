// Gradient-boosted trees through XGBoost's C API, the estimator AutoTVM and Ansor pair
// with annealing and evolution. A program is one row: the sum and the max of its
// stores' features and its store count. Loss "rank": rank:pairwise with one group per
// task; "mse": reg:squarederror on log latency. An update adds boosting rounds on the
// new samples to the existing trees.
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
    rounds_ = 0;
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
      check(XGBoosterSetParam(booster_, "objective", loss_ == "rank" ? "rank:pairwise" : "reg:squarederror"), "objective");
      check(XGBoosterSetParam(booster_, "max_depth", "8"), "max_depth");
      check(XGBoosterSetParam(booster_, "eta", "0.2"), "eta");
      check(XGBoosterSetParam(booster_, "min_child_weight", "2"), "min_child_weight");
      check(XGBoosterSetParam(booster_, "subsample", "0.8"), "subsample");
      check(XGBoosterSetParam(booster_, "nthread", "2"), "nthread");
      check(XGBoosterSetParam(booster_, "seed", std::to_string(opt.seed % 1000000).c_str()), "seed");
      check(XGBoosterSetParam(booster_, "verbosity", "0"), "verbosity");
    }
    int rounds = std::max(1, opt.epochs * 5);
    for (int i = 0; i < rounds; ++i) check(XGBoosterUpdateOneIter(booster_, rounds_++, m.get()), "boosting");
  }

  BoosterHandle booster_ = nullptr;
  int rounds_ = 0;
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

}  // namespace basin::models
