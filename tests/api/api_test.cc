// The C++ API (<basin/basin.h>), linked as a user links it: libbasin.so alone. A network
// loads, tunes within its budget, compiles, saves, loads and runs to the same outputs;
// tensors check what they are given; every user error is a std::runtime_error of one
// line naming what is at fault.
#include <basin/basin.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
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

// precision "bf16" plans the model as the command line does: where the CPU has bfloat16
// products (bf16 kernels), the values between kernels are stored in bfloat16 (the
// launches move fewer bytes); the error is measured against float32 either way.
TEST_F(Api, Bf16StoresTheValuesBetweenKernels) {
  basin::Model model = basin::Model::load(kModel);
  basin::Network f32 = basin::Network::compile(model), bf16 = basin::Network::compile(model, "", "llvm", "bf16");
  ASSERT_TRUE(bf16.accuracy().measured) << bf16.accuracy().note;
  EXPECT_LT(bf16.accuracy().max_rel_error, 2e-2);
  basin::Tensor x = basin::Tensor::random(f32.inputs()[0], -1, 1, 5);
  auto bytes = [&](basin::Network& n) {
    int64_t b = 0;
    for (const basin::LaunchProfile& l : n.profile({x}, 1).launches) b += l.bytes;
    return b;
  };
  if (bf16.bf16_kernels() > 0) {
    EXPECT_GT(bf16.accuracy().max_rel_error, 0.0);
    EXPECT_LT(bytes(bf16), bytes(f32));
  } else {
    EXPECT_EQ(bytes(bf16), bytes(f32));
  }
  std::vector<basin::Tensor> a = f32.run({x}), b = bf16.run({x});
  ASSERT_EQ(a.size(), b.size());
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

// An estimator of one's own: linear in the features summed over a program's real
// stores, fitted to log latency by least squares on its diagonal (enough to rank), its
// gradient the weights on every real store.
class Linear final : public basin::Estimator {
 public:
  std::string name() const override { return "linear"; }
  bool differentiable() const override { return true; }
  std::vector<double> predict(const basin::FeatureBatch& x) override {
    ++predicts;
    features = x.features;
    std::vector<double> s(static_cast<size_t>(x.batch), 0.0);
    for (int b = 0; b < x.batch; ++b)
      for (int t = 0; t < x.stores; ++t)
        for (int f = 0; f < x.features; ++f)
          s[b] += x.mask[b * x.stores + t] * w(f) * x.values[(static_cast<size_t>(b) * x.stores + t) * x.features + f];
    return s;
  }
  std::vector<float> gradient(const basin::FeatureBatch& x) override {
    ++gradients;
    std::vector<float> g(static_cast<size_t>(x.batch) * x.stores * x.features);
    for (size_t i = 0; i < g.size(); ++i)
      g[i] = static_cast<float>(x.mask[i / x.features] * w(static_cast<int>(i % x.features)));
    return g;
  }
  void update(const basin::FeatureBatch& x, const std::vector<double>& latencies_us) override {
    ASSERT_EQ(latencies_us.size(), static_cast<size_t>(x.batch));
    updated += x.batch;
    weights.assign(static_cast<size_t>(x.features), 0.0);
    for (int f = 0; f < x.features; ++f) {
      double xy = 0, xx = 1e-6;
      for (int b = 0; b < x.batch; ++b) {
        double v = 0;
        for (int t = 0; t < x.stores; ++t)
          v += x.mask[b * x.stores + t] * x.values[(static_cast<size_t>(b) * x.stores + t) * x.features + f];
        xy += v * std::log(latencies_us[static_cast<size_t>(b)]);
        xx += v * v;
      }
      weights[static_cast<size_t>(f)] = xy / xx / x.features;
    }
  }
  double w(int f) const { return weights.empty() ? 1.0 : weights[static_cast<size_t>(f)]; }
  std::vector<double> weights;
  int predicts = 0, gradients = 0, updated = 0, features = 0;
};

TEST_F(Api, AnEstimatorOfOnesOwnDrivesTheGradientSearchOfAnOperator) {
  auto est = std::make_shared<Linear>();
  basin::TuneOptions opt;
  opt.records = dir + "/op.db";
  opt.trials = 30;
  opt.custom_estimator = est;
  int progress = 0;
  opt.on_progress = [&](const basin::Progress& p) {
    ++progress;
    EXPECT_GE(p.estimated_latency_us, 0);
  };
  basin::OperatorSpec op;
  op.op = "matmul";
  op.params = {{"M", "48"}, {"N", "64"}, {"K", "32"}};
  basin::OperatorTuneReport r = basin::tune_operator(op, opt);
  EXPECT_EQ(r.trials, 30);
  EXPECT_EQ(r.measured, 30);
  EXPECT_GT(r.best_latency_us, 0);
  EXPECT_FALSE(r.best_sketch.empty());
  EXPECT_EQ(r.estimator, "linear");
  EXPECT_EQ(r.task, "matmul(K=32,M=48,N=64)");
  EXPECT_GT(est->predicts, 0);
  EXPECT_GT(est->gradients, 0);  // the gradient search descended on its scores
  EXPECT_GE(est->updated, 8);    // and it learned from the measurements
  EXPECT_EQ(est->features, static_cast<int>(basin::feature_names().size()));
  EXPECT_EQ(progress, 30);
  // A named workload, resumed; a stop ends the run before its next program.
  basin::OperatorSpec w;
  w.workload = "gemm-256";
  opt.trials = 100;
  opt.custom_estimator = nullptr;
  opt.estimator = "roofline";
  opt.strategy = "annealing";
  int asked = 0;
  opt.stop = [&] { return ++asked > 3; };
  basin::OperatorTuneReport s = basin::tune_operator(w, opt);
  EXPECT_TRUE(s.stopped);
  EXPECT_LT(s.trials, 100);
  EXPECT_EQ(s.estimator, "roofline");
}

TEST_F(Api, EveryTaskOfANetworkAsksTheSameEstimatorOfOnesOwn) {
  auto est = std::make_shared<Linear>();
  basin::Model model = basin::Model::load(kModel);
  basin::TuneOptions opt;
  opt.records = dir + "/net.db";
  opt.trials = 12 * model.tasks();
  opt.batch = 4;
  opt.first_batch = 4;
  opt.custom_estimator = est;
  basin::TuneReport r = basin::TuningSession(model, opt).run();
  EXPECT_EQ(r.tasks_without_program, 0);
  EXPECT_GT(est->gradients, 0);
  EXPECT_GE(est->updated, 8);
}

// An estimator that breaks its contract, in one way each.
class Broken final : public basin::Estimator {
 public:
  explicit Broken(std::string how) : how_(std::move(how)) {}
  bool differentiable() const override { return how_ != "no gradient"; }
  std::vector<double> predict(const basin::FeatureBatch& x) override {
    if (how_ == "count") return std::vector<double>(static_cast<size_t>(x.batch) + 1, 0.0);
    if (how_ == "nan") return std::vector<double>(static_cast<size_t>(x.batch), std::nan(""));
    if (how_ == "throws") throw std::runtime_error("the estimator's own error");
    return std::vector<double>(static_cast<size_t>(x.batch), 1.0);
  }
  std::vector<float> gradient(const basin::FeatureBatch& x) override {
    return std::vector<float>(static_cast<size_t>(x.batch), 0.0f);  // "gradient size": too short
  }

 private:
  std::string how_;
};

TEST_F(Api, AnEstimatorOfOnesOwnThatBreaksItsContractIsOneClearError) {
  basin::OperatorSpec op;
  op.workload = "gemm-256";
  auto tune = [&](const std::string& how, const std::string& strategy) {
    basin::TuneOptions opt;
    opt.records = dir + "/" + how + ".db";
    opt.trials = 24;
    opt.batch = 8;
    opt.strategy = strategy;
    opt.custom_estimator = std::make_shared<Broken>(how);
    basin::tune_operator(op, opt);
  };
  expect_user_error([&] { tune("count", "annealing"); }, "predict returns one per program");
  expect_user_error([&] { tune("nan", "annealing"); }, "not finite");
  expect_user_error([&] { tune("throws", "annealing"); }, "the estimator's own error");
  expect_user_error([&] { tune("no gradient", "gradient"); }, "needs a differentiable estimator");
  expect_user_error([&] { tune("gradient size", "gradient"); }, "returned a gradient of");
  basin::TuneOptions opt;
  opt.records = dir + "/x.db";
  opt.trials = 4;
  basin::OperatorSpec both = op;
  both.op = "matmul";
  expect_user_error([&] { basin::tune_operator(both, opt); }, "give a workload or an operator");
  expect_user_error([&] { basin::tune_operator(basin::OperatorSpec(), opt); }, "give a workload or an operator");
  basin::OperatorSpec params = op;
  params.params = {{"M", "4"}};
  expect_user_error([&] { basin::tune_operator(params, opt); }, "params must be empty");
  basin::OperatorSpec nonesuch;
  nonesuch.workload = "nonesuch";
  expect_user_error([&] { basin::tune_operator(nonesuch, opt); }, "nonesuch");
  opt.target = "tpu";
  expect_user_error([&] { basin::tune_operator(op, opt); }, "unknown target 'tpu'");
  opt.target = "llvm";
  opt.estimator = "nonesuch";
  expect_user_error([&] { basin::tune_operator(op, opt); }, "nonesuch");
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
