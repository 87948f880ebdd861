// The C++ API (<basin/basin.h>), linked as a user links it: libbasin.so alone. A network
// loads, tunes within its budget, compiles, saves, loads and runs to the same outputs;
// tensors check what they are given; every user error is a std::runtime_error of one
// line naming what is at fault.
#include <basin/basin.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// A small CNN of the model families' CI set (tests/models/coverage).
const std::string kModel = BASIN_SOURCE_DIR "/tests/models/coverage/tiny_cnn_ceil.legacy.onnx";

class Api : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = (fs::temp_directory_path() / ("basin_api_" + std::to_string(getpid()))).string();
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string dir;
};

// Expects `f` to throw std::runtime_error whose message is one line containing `needle`.
template <typename F>
void expect_user_error(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming '" << needle << "'";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(needle), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

TEST_F(Api, TunesCompilesSavesLoadsAndRunsANetwork) {
  basin::Model model = basin::Model::load(kModel);
  ASSERT_EQ(model.inputs().size(), 1u);
  EXPECT_EQ(model.inputs()[0].dtype, "float32");
  EXPECT_GT(model.tasks(), 0);

  basin::TuneOptions opt;
  opt.records = dir + "/r.db";
  opt.trials = 2 * model.tasks();
  opt.first_batch = 2;
  opt.strategy = "random";
  int rounds = 0;
  opt.on_progress = [&](const basin::Progress& p) {
    ++rounds;
    EXPECT_EQ(p.trial_budget, opt.trials);
  };
  basin::TuneReport rep = basin::TuningSession(model, opt).run();
  EXPECT_GE(rep.trials, opt.trials);
  EXPECT_GT(rounds, 0);
  EXPECT_EQ(rep.tasks_without_program, 0);
  // A second session resumes: what was measured is not measured again.
  basin::TuneReport again = basin::TuningSession(model, opt).run();
  EXPECT_EQ(again.measured, 0);

  basin::Network net = basin::Network::compile(model, opt.records);
  EXPECT_EQ(net.untuned_tasks(), 0);
  basin::Network untuned = basin::Network::compile(model);
  EXPECT_EQ(untuned.untuned_tasks(), model.tasks());
  // Checked against float32 when compiled; the check travels with the file.
  ASSERT_TRUE(net.accuracy().measured) << net.accuracy().note;
  EXPECT_LT(net.accuracy().max_rel_error, 1e-4);
  EXPECT_EQ(net.bf16_kernels(), 0);
  net.save(dir + "/n.basin");
  basin::Network loaded = basin::Network::load(dir + "/n.basin");
  EXPECT_EQ(loaded.accuracy().max_rel_error, net.accuracy().max_rel_error);
  basin::Tensor x = basin::Tensor::random(loaded.inputs()[0], -1, 1, 3);
  std::vector<basin::Tensor> a = net.run({x}), b = loaded.run({x}), c = untuned.run({x});
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(a[0].shape(), loaded.outputs()[0].shape);
  for (int64_t i = 0; i < a[0].size(); ++i) {
    EXPECT_EQ(a[0].at(i), b[0].at(i)) << i;
    EXPECT_NEAR(a[0].at(i), c[0].at(i), 1e-4 * (1 + std::abs(c[0].at(i)))) << i;
  }
  EXPECT_GT(loaded.time_us({x}), 0);
}

TEST(ApiTensor, HoldsWhatItIsGiven) {
  basin::Tensor t = basin::Tensor::from_floats({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(t.dtype(), "float32");
  EXPECT_EQ(t.size(), 6);
  EXPECT_EQ(t.bytes(), 24u);
  EXPECT_EQ(t.at(5), 6);
  basin::Tensor c = t.clone();
  static_cast<float*>(c.data())[0] = 9;
  EXPECT_EQ(t.at(0), 1);  // a clone copies
  basin::Tensor z("int64", {4});
  EXPECT_EQ(z.at(3), 0);
  basin::Tensor idx = basin::Tensor::random({"ids", "int64", {1000}, 7}, -1, 1, 1);
  for (int64_t i = 0; i < idx.size(); ++i) ASSERT_TRUE(idx.at(i) >= 0 && idx.at(i) < 7) << idx.at(i);
}

TEST_F(Api, AStopRequestEndsTuningWhereItIsAndTheRecordsResume) {
  basin::Model model = basin::Model::load(kModel);
  basin::TuneOptions opt;
  opt.records = dir + "/r.db";
  opt.budget_seconds = 120;
  opt.strategy = "random";
  opt.first_batch = 2;
  int asked = 0;
  opt.stop = [&] { return ++asked > 6; };
  basin::TuneReport rep = basin::TuningSession(model, opt).run();
  EXPECT_TRUE(rep.stopped);
  EXPECT_LT(rep.seconds, 60);
  EXPECT_GT(rep.measured, 0);
  opt.stop = nullptr;
  opt.trials = rep.trials + 1;
  basin::TuneReport again = basin::TuningSession(model, opt).run();
  EXPECT_FALSE(again.stopped);
  EXPECT_EQ(again.resumed, rep.trials);  // every program measured before the stop was kept
}

TEST_F(Api, BorrowedTensorsRunInPlaceAndProfilesTimeEachLaunch) {
  basin::Network net = basin::Network::compile(basin::Model::load(kModel));
  basin::Tensor x = basin::Tensor::random(net.inputs()[0]);
  std::vector<float> mine(static_cast<size_t>(x.size()));
  std::memcpy(mine.data(), x.data(), x.bytes());
  auto keep = std::make_shared<int>(0);
  basin::Tensor b = basin::Tensor::borrow("float32", x.shape(), mine.data(), keep);
  EXPECT_EQ(b.data(), mine.data());  // no copy
  EXPECT_EQ(keep.use_count(), 2);    // the owner lives as long as the tensor
  basin::Tensor y1 = net.run({x})[0], y2 = net.run({b})[0];
  for (int64_t i = 0; i < y1.size(); ++i) ASSERT_EQ(y1.at(i), y2.at(i));
  basin::Profile p = net.profile({b}, 2);
  ASSERT_FALSE(p.launches.empty());
  EXPECT_GT(p.run_us, 0);
  for (const auto& l : p.launches) EXPECT_GT(l.us, 0) << l.task;
  EXPECT_EQ(net.target(), "llvm");
}

TEST_F(Api, FeatureNamesAreTheEstimatorsInput) {
  std::vector<std::string> cpu = basin::feature_names(), gpu = basin::feature_names("cuda");
  ASSERT_FALSE(cpu.empty());
  EXPECT_EQ(cpu[0], "flops_add");
  EXPECT_NE(cpu, gpu);
  expect_user_error([] { basin::feature_names("tpu"); }, "tpu");
}

TEST_F(Api, UserErrorsAreOneLineNamingTheirCause) {
  expect_user_error([] { basin::Model::load("/nonexistent/model.onnx"); }, "/nonexistent/model.onnx");
  expect_user_error([] { basin::Model::load("zoo:no_such_net"); }, "no_such_net");
  expect_user_error([] { basin::Tensor::from_floats({1, 2, 3}, {2, 2}); }, "3 values");
  expect_user_error([] { basin::Tensor("float32", {-1, 4}); }, "invalid shape");
  expect_user_error([] { basin::Tensor("complex7", {2}); }, "complex7");
  expect_user_error([] { basin::Tensor::from_floats({1}, {1}).at(1); }, "out of range");
  expect_user_error([&] { basin::Network::load(dir + "/missing.basin"); }, "missing.basin");

  basin::Model model = basin::Model::load(kModel);
  basin::TuneOptions opt;
  expect_user_error([&] { basin::TuningSession(model, opt).run(); }, "records");
  opt.records = dir + "/r.db";
  opt.budget_seconds = 0;
  expect_user_error([&] { basin::TuningSession(model, opt).run(); }, "budget_seconds");
  opt.budget_seconds = 1;
  opt.batch = 0;
  expect_user_error([&] { basin::TuningSession(model, opt).run(); }, "batch");
  opt.batch = 16;
  opt.strategy = "telepathy";
  expect_user_error([&] { basin::TuningSession(model, opt).run(); }, "telepathy");
  expect_user_error([&] { basin::Network::compile(model, dir + "/no_records.db"); }, "no_records.db");

  basin::Network net = basin::Network::compile(model);
  expect_user_error([&] { net.run({}); }, "input");
  expect_user_error([&] { net.run({basin::Tensor("float32", {3, 3})}); }, net.inputs()[0].name);
  expect_user_error([&] { net.save(dir + "/no/such/folder/n.basin"); }, "n.basin");
  expect_user_error([] { basin::Tensor::borrow("float32", {2, 2}, nullptr, nullptr); }, "no data");
  expect_user_error([&] { net.profile({basin::Tensor::random(net.inputs()[0])}, 0); }, "rounds");
}

}  // namespace
