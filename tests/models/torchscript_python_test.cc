// The TorchScript plug-in end to end: records measured here are exported, the Python
// example (docs/examples/train_estimator.py, Debian's python3-torch) trains and
// exports a module, basin loads it and gives the scores Python gave, and
// `basin tune-op --estimator model.pt` tunes with it.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/ops/registry.h"
#include "core/schedule/sketch.h"
#include "models/dataset.h"
#include "models/estimator.h"
#include "relax/features.h"
#include "tests/pyarrow_python.h"

namespace basin {
namespace {

std::string run(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  *status = pclose(p);
  return out;
}

// Whether Debian's python3-torch, which the modules are written with, is installed.
bool has_python_torch() {
  int status = 0;
  run("/usr/bin/python3 -c 'import torch' 2>/dev/null", &status);
  return status == 0;
}

TEST(TorchScriptEstimator, TrainedInPythonScoresAsInPython) {
  if (!has_python_torch()) GTEST_SKIP() << "Debian's python3-torch is not installed: the Python example cannot run";
  int status = 0;
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("basin_ts_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string db = (dir / "r.db").string(), data = (dir / "data.jsonl").string(), model = (dir / "model.pt").string();
  size_t exported = 0;
  {
    search::RecordStore store(db);
    models::CollectOptions opt;
    opt.per_task = 12;
    std::vector<std::string> tasks = {
        sched::task_key(
            ops::build_op("dense", std::map<std::string, std::string>{{"M", "32"}, {"K", "64"}, {"N", "48"}})),
        sched::task_key(
            ops::build_op("matmul", std::map<std::string, std::string>{{"M", "48"}, {"K", "32"}, {"N", "64"}}))};
    models::collect_random(store, tasks, opt);
    std::vector<models::Sample> samples = models::samples_from_records(store.all(), "llvm");
    ASSERT_GE(samples.size(), 20u);
    std::ofstream f(data);
    models::export_samples(samples, f);
    exported = samples.size();
    std::ofstream c((dir / "data.csv").string());
    models::export_samples_csv(samples, c, store.machines());
    std::ofstream((dir / "data.parquet").string(), std::ios::binary)
        << models::export_samples_parquet(samples, store.machines());
  }
  std::string out = run("/usr/bin/python3 " BASIN_SOURCE_DIR "/docs/examples/train_estimator.py " + data + " " + model +
                            " --epochs 3 --print-scores 5 2>&1",
                        &status);
  ASSERT_EQ(status, 0) << out;
  std::vector<double> python = nlohmann::json::parse(out.substr(out.rfind('[')));
  // The same programs exported as CSV train the same module.
  std::string from_csv =
      run("/usr/bin/python3 " BASIN_SOURCE_DIR "/docs/examples/train_estimator.py " + (dir / "data.csv").string() +
              " " + (dir / "csv.pt").string() + " --epochs 3 --print-scores 5 2>&1",
          &status);
  ASSERT_EQ(status, 0) << from_csv;
  std::vector<double> python_csv = nlohmann::json::parse(from_csv.substr(from_csv.rfind('[')));
  ASSERT_EQ(python_csv.size(), python.size());
  for (size_t i = 0; i < python.size(); ++i) EXPECT_NEAR(python_csv[i], python[i], 1e-5 * (1 + std::abs(python[i])));
  // The example reads the Parquet export as the CSV one (where a Python has pyarrow).
  if (const std::string py = testing::pyarrow_python(); !py.empty()) {
    const std::string check =
        "import sys, math; sys.path.insert(0, '" BASIN_SOURCE_DIR
        "/docs/examples'); import train_estimator as t; "
        "a = t.load(sys.argv[1] + '/data.csv'); b = t.load(sys.argv[1] + '/data.parquet'); "
        "assert a[0] == b[0] and a[1] == b[1] and len(a[2]) == len(b[2]), (a[0][:3], b[0][:3]); "
        "assert all(p['task'] == q['task'] and p['stores'] == q['stores'] "
        "and math.isclose(p['latency_us'], q['latency_us'], rel_tol=1e-8) "
        "and all(math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-6) for r, w in zip(p['features'], q['features']) "
        "for x, y in zip(r, w)) for p, q in zip(a[2], b[2])); print(len(b[2]), len(b[0]))";
    const std::string both = run("'" + py + "' -c \"" + check + "\" " + dir.string() + " 2>&1", &status);
    ASSERT_EQ(status, 0) << both;
    EXPECT_EQ(both,
              std::to_string(exported) + " " + std::to_string(relax::num_features(relax::FeatureSet::Cpu)) + "\n");
  } else {
    std::fprintf(stderr, "no Python with pyarrow: the example's Parquet reading is not checked\n");
  }
  auto e = models::load_estimator(model);
  EXPECT_EQ(e->kind(), "torchscript");
  EXPECT_TRUE(e->differentiable());
  search::RecordStore store(db);
  std::vector<models::Sample> samples = models::samples_from_records(store.all(), "llvm");
  samples.resize(5);
  std::vector<double> ours = e->predict(models::FeatureBatch::of(samples));
  ASSERT_EQ(ours.size(), python.size());
  for (size_t i = 0; i < ours.size(); ++i) EXPECT_NEAR(ours[i], python[i], 1e-4 * (1 + std::abs(python[i])));
  // The module drives a tuning run: the gradient search descends through it.
  std::string tune = run(std::string(BASIN_BINARY_DIR) +
                             "/bin/basin tune-op dense --param M=32 --param K=64 --param N=48"
                             " --strategy gradient --trials 8 --batch 4 --json --estimator " +
                             model + " --records " + (dir / "tune.db").string() + " 2>/dev/null",
                         &status);
  ASSERT_EQ(status, 0) << tune;
  auto j = nlohmann::json::parse(tune);
  EXPECT_EQ(j["estimator"], model);  // a file is reported by its path
  EXPECT_EQ(j["trials"], 8);
  EXPECT_GT(j["best_latency_us"].get<double>(), 0);
  std::filesystem::remove_all(dir);
}

// A module that raises, one whose scores have no gradient and one that never returns
// stop the tuning with one line naming what went wrong, not a TorchScript or autograd
// backtrace, nor a hang.
TEST(TorchScriptEstimator, AFailingModuleIsOneClearLine) {
  if (!has_python_torch()) GTEST_SKIP() << "Debian's python3-torch is not installed";
  int status = 0;
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("basin_ts_bad_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string script = (dir / "make.py").string();
  std::ofstream(script) << "import sys, torch\n"
                           "class M(torch.nn.Module):\n"
                           "    def __init__(self):\n"
                           "        super().__init__()\n"
                           "        self.feature_version = "
                        << relax::kFeatureVersion
                        << "\n"
                           "    def forward(self, x, mask):\n"
                           "        return x.sum(2).sum(1)\n"
                           "class Raises(M):\n"
                           "    def forward(self, x, mask):\n"
                           "        if x.size(0) > 0:\n"
                           "            raise RuntimeError('this estimator always fails')\n"
                           "        return x.sum(2).sum(1)\n"
                           "class Detached(M):\n"
                           "    def forward(self, x, mask):\n"
                           "        return x.detach().sum(2).sum(1)\n"
                           "class Loops(M):\n"
                           "    def forward(self, x, mask):\n"
                           "        i = 0\n"
                           "        while i >= 0:\n"
                           "            i = i + 1\n"
                           "        return x.sum(2).sum(1)\n"
                           "m = {'raises': Raises, 'detached': Detached, 'loops': Loops}[sys.argv[2]]()\n"
                           "torch.jit.script(m).save(sys.argv[1])\n";
  const std::map<std::string, std::string> expect = {
      {"raises", "forward raised builtins.RuntimeError: this estimator always fails"},
      {"detached", "the estimator's scores have no gradient"},
      // A forward that never returns: given up after BASIN_PLUGIN_TIMEOUT seconds.
      {"loops", "forward did not return within 3 s"}};
  for (const auto& [kind, why] : expect) {
    const std::string model = (dir / (kind + ".pt")).string();
    std::string made = run("/usr/bin/python3 " + script + " " + model + " " + kind + " 2>&1", &status);
    ASSERT_EQ(status, 0) << made;
    std::string err = run("BASIN_PLUGIN_TIMEOUT=3 timeout 300 " + std::string(BASIN_BINARY_DIR) +
                              "/bin/basin tune-op dense --param M=32 --param K=64 --param N=48"
                              " --strategy gradient --trials 40 --quiet --estimator " +
                              model + " --records " + (dir / (kind + ".db")).string() + " 2>&1 >/dev/null",
                          &status);
    EXPECT_NE(status, 0) << kind;
    EXPECT_NE(err.find(why), std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace basin
