// Calibration on arrival: a designed sample measured into the records, the shipped
// estimator fine-tuned on it and kept per machine, found by estimator_file() until it
// no longer matches (another machine, other shipped weights, --no-calibrate); the
// operator families that evaluation reports per family.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/ops/registry.h"
#include "core/schedule/sketch.h"
#include "core/util/error.h"
#include "models/calibrate.h"
#include "models/estimator.h"
#include "records/records.h"

namespace basin {
namespace {

std::string key(const std::string& op, const std::map<std::string, std::string>& p) {
  return sched::task_key(ops::build_op(op, p));
}

// A cache of its own for the process.
class Calibration : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("basin_cal_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    ::setenv("BASIN_CACHE_DIR", dir_.c_str(), 1);
    models::set_use_calibration(true);
  }
  void TearDown() override {
    models::set_use_calibration(true);
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
};

TEST(CalibrationFamilies, TaskFamilies) {
  EXPECT_EQ(models::task_family(key("conv2d_bias_relu", {{"in_channels", "8"},
                                                         {"out_channels", "8"},
                                                         {"height", "8"},
                                                         {"width", "8"},
                                                         {"kernel", "3"},
                                                         {"padding", "1"}})),
            "conv2d");
  EXPECT_EQ(models::task_family(key("depthwise_conv2d", {{"channels", "8"}, {"height", "8"}, {"width", "8"}})),
            "depthwise_conv2d");
  EXPECT_EQ(models::task_family(key("dense_bias_gelu", {{"M", "8"}, {"K", "8"}, {"N", "8"}})), "dense");
  EXPECT_EQ(models::task_family(key("batch_matmul", {{"B", "2"}, {"M", "8"}, {"K", "8"}, {"N", "8"}})), "batch_matmul");
  EXPECT_EQ(models::task_family(key("softmax", {{"shape", "8,40"}})), "softmax");
  EXPECT_EQ(models::task_family(key("layer_norm", {{"shape", "8,40"}})), "norm");
  EXPECT_EQ(models::task_family(key("max_pool2d", {{"channels", "8"}, {"height", "8"}, {"width", "8"}})), "pool");
  // Fused tasks: the heaviest operator inside; a convolution of several groups is depthwise.
  EXPECT_EQ(models::task_family("subgraph(graph=x0:f32[1,8,8,8]@-1:1;x1:f32[8,8,3,3]@-1:1;t0=conv2d(x0,x1){dilation=1,"
                                "1|groups=1|padding=1,1|stride=1,1};t1=relu(t0))"),
            "conv2d");
  EXPECT_EQ(models::task_family("subgraph(graph=x0:f32[1,8,8,8]@-1:1;x1:f32[8,1,3,3]@-1:1;t0=conv2d(x0,x1){dilation=1,"
                                "1|groups=8|padding=1,1|stride=1,1};t1=relu(t0))"),
            "depthwise_conv2d");
  EXPECT_EQ(models::task_family("subgraph(graph=x0:f32[8]@-1:1;t0=relu(x0);t1=sigmoid(t0))"), "elementwise");
}

TEST_F(Calibration, MeasuresASampleAndKeepsTheCalibratedEstimatorPerMachine) {
  if (models::pretrained_cpu_path("cpu_ensemble.bin").empty()) GTEST_SKIP() << "no shipped ensemble";
  const std::string shipped = models::estimator_file("ensemble", "llvm");
  EXPECT_EQ(models::calibrated_estimator_path("ensemble"), "");
  models::CalibrateOptions opt;
  opt.budget_seconds = 8;
  opt.epochs = 2;
  opt.pool = 24;
  opt.task_keys = {key("dense", {{"M", "16"}, {"K", "32"}, {"N", "24"}}), key("softmax", {{"shape", "8,40"}}),
                   key("dense", {{"M", "24"}, {"K", "16"}, {"N", "32"}})};
  std::vector<std::string> lines;
  opt.log = [&](const std::string& l) { lines.push_back(l); };
  models::CalibrateResult r = models::calibrate(opt);
  EXPECT_GE(r.measured, 4);
  EXPECT_GE(r.tasks, 2);
  EXPECT_EQ(r.families, r.tasks >= 2 ? 2 : 1) << "dense and softmax; the two dense tasks are one family";
  EXPECT_EQ(static_cast<int>(lines.size()), r.tasks);
  // Everything it measured is in the calibration's records, named as such.
  {
    search::RecordStore store(r.records, search::RecordStore::ReadOnly::Yes);
    std::vector<search::Record> all = store.all();
    EXPECT_EQ(static_cast<int>(all.size()), r.measured);
    for (const search::Record& rec : all) EXPECT_EQ(rec.estimator_version, "calibration");
    EXPECT_EQ(r.samples, r.measured - static_cast<int>(std::count_if(all.begin(), all.end(),
                                                                     [](const auto& x) { return !x.ok(); })));
  }
  // Found by the estimator specs from now on, and loadable.
  const std::string cal = models::calibrated_estimator_path("ensemble");
  EXPECT_EQ(cal, r.out);
  EXPECT_EQ(models::estimator_file("ensemble", "llvm"), cal);
  EXPECT_EQ(models::load_estimator(cal)->kind(), "ensemble");
  EXPECT_EQ(models::calibrated_estimator_path("mlp"), "") << "only the kind calibrated";
  // --no-calibrate: the shipped weights.
  models::set_use_calibration(false);
  EXPECT_EQ(models::calibrated_estimator_path("ensemble"), "");
  EXPECT_EQ(models::estimator_file("ensemble", "llvm"), shipped);
  models::set_use_calibration(true);
  // A second calibration adds to the same records and trains on all of them.
  opt.budget_seconds = 4;
  models::CalibrateResult again = models::calibrate(opt);
  EXPECT_GT(again.samples, r.samples);
  // A calibration made from other shipped weights (or on another machine) is not used.
  const std::string meta = models::calibration_dir() + "/ensemble.json";
  nlohmann::json j = nlohmann::json::parse(std::ifstream(meta));
  j["base"] = "basin-estimator ensemble 0 1 0000000000000000";
  std::ofstream(meta) << j.dump();
  EXPECT_EQ(models::calibrated_estimator_path("ensemble"), "");
  EXPECT_EQ(models::estimator_file("ensemble", "llvm"), shipped);
}

TEST_F(Calibration, RefusesWhatItCannotCalibrate) {
  models::CalibrateOptions opt;
  opt.kind = "gbt";
  EXPECT_THROW(models::calibrate(opt), Error);
  opt.kind = "ensemble";
  opt.budget_seconds = 0;
  EXPECT_THROW(models::calibrate(opt), Error);
}

TEST_F(Calibration, CacheDirectoryFollowsTheEnvironment) {
  EXPECT_EQ(models::cache_dir(), dir_.string());
  EXPECT_EQ(models::calibration_dir().rfind(dir_.string() + "/calibration/", 0), 0u);
  EXPECT_EQ(models::calibration_dir().find(' '), std::string::npos) << "a directory name of the machine";
}

}  // namespace
}  // namespace basin
