// An estimator kind added as a researcher adds one: a class and one registration line
// in a file of its own (this one), nothing else edited. make_estimator, the estimator
// file (save, then load by the kind in its header), --estimator's specs and the list of
// kinds then know it; it tunes a task like the shipped kinds.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/ops/registry.h"
#include "core/util/error.h"
#include "models/estimator.h"
#include "records/records.h"
#include "search/strategy.h"
#include "search/tuner.h"

using namespace basin;

namespace {

// Scores a program by the weighted sum of its stores' first feature; training sets the
// weight's sign so that programs with more of it rank slower when they measured slower.
class ToyEstimator final : public models::Estimator {
 public:
  explicit ToyEstimator(double weight = 1) : weight_(weight) {}
  std::string kind() const override { return "toy"; }
  std::vector<double> predict(const models::FeatureBatch& b) override {
    std::vector<double> out(static_cast<size_t>(b.batch), 0.0);
    for (int i = 0; i < b.batch; ++i)
      for (int s = 0; s < b.stores; ++s) {
        const size_t at = (static_cast<size_t>(i) * static_cast<size_t>(b.stores) + static_cast<size_t>(s));
        out[static_cast<size_t>(i)] += weight_ * b.mask[at] * b.values[at * static_cast<size_t>(b.features)];
      }
    return out;
  }
  void train(const std::vector<models::Sample>& samples, const models::TrainOptions&) override {
    ++trained;
    weight_ = samples.size() >= 2 ? 2 : 1;
  }
  std::string payload() const override { return std::to_string(weight_); }
  double weight() const { return weight_; }
  static inline int trained = 0;

 private:
  double weight_;
};
BASIN_REGISTER_ESTIMATOR(
    "toy", 100, [] { return std::make_unique<ToyEstimator>(); },
    [](const std::string& payload, const std::string& path) {
      try {
        return std::unique_ptr<models::Estimator>(new ToyEstimator(std::stod(payload)));
      } catch (const std::exception&) {
        throw Error(path + ": a toy estimator's payload is its weight, not '" + payload + "'");
      }
    },
    "a toy: the stores' first feature, weighted");

TEST(EstimatorRegistry, ANewKindIsMadeSavedLoadedAndListed) {
  const std::vector<models::EstimatorKind> kinds = models::estimator_kinds();
  ASSERT_FALSE(kinds.empty());
  EXPECT_EQ(kinds.front().kind, "mlp");
  EXPECT_EQ(kinds.back().kind, "toy");
  EXPECT_EQ(kinds.back().help, "a toy: the stores' first feature, weighted");

  std::unique_ptr<models::Estimator> e = models::make_estimator("toy");
  ASSERT_EQ(e->kind(), "toy");
  EXPECT_EQ(models::estimator_from_spec("toy")->kind(), "toy");
  models::FeatureBatch b;
  b.batch = 2;
  b.stores = 1;
  b.features = 2;
  b.values = {3, 0, 5, 0};
  b.mask = {1, 1};
  EXPECT_EQ(e->predict(b), (std::vector<double>{3, 5}));

  // Saved as basin's estimator file, loaded back by the kind its header names.
  const std::string path =
      (std::filesystem::temp_directory_path() / ("toy_estimator_" + std::to_string(::getpid()) + ".bin")).string();
  ToyEstimator(4).save(path);
  std::unique_ptr<models::Estimator> back = models::load_estimator(path);
  ASSERT_EQ(back->kind(), "toy");
  EXPECT_EQ(back->predict(b), (std::vector<double>{12, 20}));
  std::filesystem::remove(path);

  // An unknown kind's error lists the registered ones.
  try {
    models::make_estimator("no_such_kind");
    FAIL() << "an unknown kind was made";
  } catch (const NotFoundError& err) {
    EXPECT_NE(std::string(err.what()).find("toy"), std::string::npos) << err.what();
  }
}

// It tunes a task: the tuning loop trains it once enough programs ran, and ranks with it.
TEST(EstimatorRegistry, ANewKindTunesATask) {
  setenv("BASIN_NUM_THREADS", "1", 1);
  ops::OpGraph g = ops::build_op("matmul", {{"M", "32"}, {"N", "32"}, {"K", "32"}});
  const std::string db =
      (std::filesystem::temp_directory_path() / ("toy_tune_" + std::to_string(::getpid()) + ".db")).string();
  search::RecordStore store(db);
  std::unique_ptr<search::Strategy> s = search::make_strategy("annealing:plan_size=8");
  std::unique_ptr<models::Estimator> est = models::make_estimator("toy");
  search::TuneOptions opt;
  opt.budget.trials = 24;
  opt.batch = 8;
  opt.seed = 1;
  ToyEstimator::trained = 0;
  const search::TuneResult r = search::tune_task(g, store, *s, est.get(), opt);
  EXPECT_EQ(r.measured, 24);
  EXPECT_GT(r.best_latency_us, 0);
  EXPECT_GE(r.updates, 1);
  EXPECT_GE(ToyEstimator::trained, 1);
  std::filesystem::remove(db);
}

}  // namespace
