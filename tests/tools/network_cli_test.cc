// `basin tune / compile / run / compare` on a small ONNX model built here and on a zoo
// network: the round trip tune -> compile -> run (the compiled file and the model give
// the same output), .npy in and out, the JSON keys scripts rely on, untuned tasks named;
// and every broken ONNX file of the corpus, every bad flag and bad input fails with one
// clear error line and a non-zero exit, never a crash.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <thread>
#include <chrono>
#include <map>
#include <sstream>

#include "core/ir/npy.h"
#include "core/util/host.h"
#include "models/calibrate.h"
#include "records/records.h"
#include "tests/tools/run_basin.h"

#if BASIN_HAVE_ONNX
#include "tests/core/onnx_builder.h"
#endif

namespace {

namespace fs = std::filesystem;
using basin::testing::Result;

Result run(const std::string& args, bool keep_stderr = false) { return basin::testing::run_basin(args, keep_stderr); }

// The non-empty lines of a text.
std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

class NetworkCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = (fs::temp_directory_path() / ("basin_netcli_" + std::to_string(getpid()))).string();
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  // One clear error: non-zero exit (not a signal), one line on stderr naming `needle`.
  void expect_one_error(const std::string& args, const std::string& needle) {
    SCOPED_TRACE(args);
    std::string err = basin::testing::basin_stderr(args + " --quiet");
    Result r = run(args + " --quiet");
    EXPECT_NE(r.code, 0);
    EXPECT_LT(r.code, 128) << "killed by a signal";
    std::vector<std::string> l = lines(err);
    ASSERT_EQ(l.size(), 1u) << err;
    EXPECT_EQ(l[0].rfind("basin: error: ", 0), 0u) << l[0];
    EXPECT_NE(l[0].find(needle), std::string::npos) << l[0];
  }
  std::string dir;
};

#if BASIN_HAVE_ONNX

// Ctrl-C (SIGINT) during `basin tune`: the run stops after the program being measured,
// prints its report marked interrupted, exits 130, and the records resume.
TEST_F(NetworkCli, CtrlCStopsTuningCleanlyAndTheRecordsResume) {
  const std::string model = dir + "/cnn.onnx", db = dir + "/r.db", out = dir + "/tune.json";
  basin::testing::small_cnn().save(model);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    freopen(out.c_str(), "w", stdout);
    freopen("/dev/null", "w", stderr);
    execl(basin::testing::basin_path().c_str(), "basin", "tune", model.c_str(), "--budget", "120s", "--strategy",
          "random", "--batch", "4", "--records", db.c_str(), "--json", static_cast<char*>(nullptr));
    _exit(127);
  }
  auto count = [&db]() -> int64_t {
    if (!fs::exists(db)) return 0;
    try {
      return basin::search::RecordStore(db).count();
    } catch (const std::exception&) {
      return 0;  // still being created
    }
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (count() < 4 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_LT(seconds, 60);
  auto j = nlohmann::json::parse(basin::testing::read_file(out));
  EXPECT_TRUE(j["interrupted"].get<bool>());
  const int done = j["trials"].get<int>();
  EXPECT_EQ(done, count());  // every program measured is in the records
  // Enough trials for every task's first round (the interrupt may come before some had one).
  Result again = run("tune " + model + " --trials " + std::to_string(done + 12) +
                     " --strategy random --batch 4 --records " + db + " --json --quiet");
  ASSERT_EQ(again.code, 0) << again.out;
  auto aj = nlohmann::json::parse(again.out);
  EXPECT_EQ(aj["resumed"], done);
  EXPECT_FALSE(aj["interrupted"].get<bool>());
}

TEST_F(NetworkCli, TuneCompileRunAndCompareAnOnnxModel) {
  const std::string model = dir + "/cnn.onnx", db = dir + "/r.db", out = dir + "/cnn.basin";
  basin::testing::small_cnn().save(model);
  // Untuned: run works and names every task as untuned.
  Result u = run("run " + model + " --json --quiet");
  ASSERT_EQ(u.code, 0) << u.out;
  auto uj = nlohmann::json::parse(u.out);
  EXPECT_EQ(uj["untuned_tasks"].size(), 3u);
  std::string warn = basin::testing::basin_stderr("compile " + model + " -o " + out);
  EXPECT_NE(warn.find("3 of 3 tasks have no tuned program"), std::string::npos) << warn;
  EXPECT_NE(warn.find("conv2d+add+relu"), std::string::npos) << warn;

  Result t = run("tune " + model + " --trials 12 --batch 4 --strategy random --records " + db + " --json --quiet");
  ASSERT_EQ(t.code, 0) << t.out;
  auto tj = nlohmann::json::parse(t.out);
  for (const char* k : {"trials", "measured", "search_seconds", "overhead_fraction", "measure_seconds",
                        "propose_seconds", "update_seconds", "setup_seconds", "estimated_latency_us", "tasks", "curve"})
    EXPECT_TRUE(tj.contains(k)) << k;
  EXPECT_EQ(tj["trials"], 12);
  EXPECT_EQ(tj["tasks"].size(), 3u);
  for (const auto& task : tj["tasks"]) EXPECT_GT(task["best_latency_us"].get<double>(), 0) << task.dump();

  Result c = run("compile " + model + " --records " + db + " -o " + out + " --json --quiet");
  ASSERT_EQ(c.code, 0) << c.out;
  auto cj = nlohmann::json::parse(c.out);
  EXPECT_TRUE(cj["untuned_tasks"].empty());
  EXPECT_EQ(cj["kernels"], 3);
  // Every compile checks the network against float32 (LibTorch), and the file keeps it.
  ASSERT_TRUE(cj["accuracy"]["measured"].get<bool>()) << cj.dump();
  EXPECT_EQ(cj["accuracy"]["note"], "random inputs");
  EXPECT_LT(cj["accuracy"]["max_rel_error"].get<double>(), 1e-4);
  EXPECT_EQ(cj["accuracy"]["top1_rows"], 1);  // a classifier: [1, 10]
  EXPECT_EQ(cj["accuracy"]["top1_agree"], 1);

  // The compiled file and the model compiled on the fly give the same output.
  basin::NDArray x = basin::NDArray::random(basin::DType::f32(), {1, 3, 8, 8}, -1, 1, 5);
  basin::write_npy(dir + "/x.npy", x);
  Result r1 = run("run " + out + " --input " + dir + "/x.npy --output " + dir + "/y1.npy --repeat 3 --json --quiet");
  ASSERT_EQ(r1.code, 0) << r1.out;
  auto rj = nlohmann::json::parse(r1.out);
  EXPECT_GT(rj["latency_us"].get<double>(), 0);
  EXPECT_EQ(rj["accuracy"], cj["accuracy"]);  // measured when it was compiled
  Result text = run("compile " + model + " --records " + db + " -o " + dir + "/cnn2.basin --input " + dir + "/x.npy");
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("accuracy against float32 (LibTorch) on the given inputs: max error"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("top-1 agrees on 1 of 1 rows"), std::string::npos) << text.out;
  EXPECT_EQ(rj["outputs"][0]["shape"], (std::vector<int64_t>{1, 10}));
  Result r2 =
      run("run " + model + " --records " + db + " --input " + dir + "/x.npy --output " + dir + "/y2.npy --quiet");
  ASSERT_EQ(r2.code, 0) << r2.out;
  basin::NDArray y1 = basin::read_npy(dir + "/y1.npy"), y2 = basin::read_npy(dir + "/y2.npy");
  ASSERT_EQ(y1.shape(), (std::vector<int64_t>{1, 10}));
  EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.nbytes()));

  Result cmp = run("compare " + model + " --records " + db + " --json --quiet");
  ASSERT_EQ(cmp.code, 0) << cmp.out;
  auto mj = nlohmann::json::parse(cmp.out);
  for (const char* k : {"latency_us", "torch_latency_us", "max_abs_error", "speedup_vs_torch"})
    EXPECT_TRUE(mj.contains(k)) << k;
  EXPECT_LT(mj["max_rel_error"].get<double>(), 1e-4);
  EXPECT_TRUE(mj["untuned_tasks"].empty());
}

// `basin tune A B C`: one scheduler over the networks' tasks, a task they share one task
// whose weight is theirs summed, and each network's estimated latency.
TEST_F(NetworkCli, SeveralModelsAreTunedAtOnce) {
  auto tasks = [&](const std::string& models, int trials, nlohmann::json* out) {
    Result r = run("tune " + models + " --trials " + std::to_string(trials) +
                   " --no-calibrate --json --quiet --records " + dir + "/" + std::to_string(trials) + ".db");
    EXPECT_TRUE(r.code == 0 || r.code == 4) << r.out;  // 4: a task without a program
    *out = nlohmann::json::parse(r.out);
    std::map<std::string, int> weights;
    for (const nlohmann::json& t : (*out)["tasks"]) weights[t["key"]] += t["weight"].get<int>();
    EXPECT_EQ(weights.size(), (*out)["tasks"].size()) << "a task listed twice";
    return weights;
  };
  nlohmann::json a, b, ab;
  std::map<std::string, int> wa = tasks("zoo:resnet18", 1, &a), wb = tasks("zoo:dcgan", 2, &b);
  std::map<std::string, int> wab = tasks("zoo:resnet18 zoo:dcgan zoo:resnet18", 20, &ab);
  std::map<std::string, int> want = wb;
  for (const auto& [key, w] : wa) want[key] += 2 * w;
  EXPECT_EQ(wab, want);
  EXPECT_EQ(ab["trials"], 20);
  ASSERT_EQ(ab["models"].size(), 3u);
  EXPECT_EQ(ab["models"][0]["model"], "zoo:resnet18");
  EXPECT_EQ(ab["models"][1]["model"], "zoo:dcgan");
  EXPECT_EQ(ab["models"][0]["estimated_latency_us"], ab["models"][2]["estimated_latency_us"]);
  EXPECT_FALSE(a.contains("models"));
  expect_one_error("tune zoo:resnet18 zoo:resnet1000 --trials 4 --records " + dir + "/x.db", "resnet1000");
}

// On a machine the shipped estimator was not trained on, a tuning budget of a minute or
// more calibrates it first, within the budget (a quarter of it), says so, and keeps the
// calibration for later runs; --no-calibrate makes none.
TEST_F(NetworkCli, ANewMachineIsCalibratedWithinTheBudget) {
  if (basin::models::shipped_weights_know_this_host())
    GTEST_SKIP() << "the shipped weights were trained on this kind of machine: no calibration is made";
  const std::string model = dir + "/cnn.onnx", cache = dir + "/cache";
  basin::testing::small_cnn().save(model);
  ::setenv("BASIN_CACHE_DIR", cache.c_str(), 1);  // the basin it runs inherits it
  std::string skipped =
      basin::testing::basin_stderr("tune " + model + " --budget 60s --no-calibrate --records " + dir + "/a.db --json");
  EXPECT_EQ(skipped.find("calibrat"), std::string::npos) << skipped;
  EXPECT_EQ(basin::models::calibrated_estimator_path("ensemble"), "");
  std::string err = basin::testing::basin_stderr("tune " + model + " --budget 60s --records " + dir + "/b.db --json");
  EXPECT_NE(err.find("calibrating it for 15 s of the budget first"), std::string::npos) << err;
  EXPECT_NE(err.find("calibrated on "), std::string::npos) << err;
  EXPECT_FALSE(basin::models::calibrated_estimator_path("ensemble").empty());
  ::unsetenv("BASIN_CACHE_DIR");
}

TEST_F(NetworkCli, EveryBrokenOnnxFileIsOneClearError) {
  for (const auto& [file, needle] : basin::testing::write_bad_onnx_corpus(dir)) {
    expect_one_error("run " + dir + "/" + file, needle);
    expect_one_error("compile " + dir + "/" + file + " -o " + dir + "/never.basin", needle);
    EXPECT_FALSE(fs::exists(dir + "/never.basin"));
  }
}

TEST_F(NetworkCli, BadInputsAndFlagsAreOneClearError) {
  const std::string model = dir + "/cnn.onnx";
  basin::testing::small_cnn().save(model);
  basin::write_npy(dir + "/wrong.npy", basin::NDArray::random(basin::DType::f32(), {1, 3, 8, 9}, -1, 1, 1));
  expect_one_error("run " + model + " --input " + dir + "/wrong.npy", "[1, 3, 8, 9]");
  expect_one_error("run " + model + " --input " + dir + "/missing.npy", "missing.npy");
  expect_one_error("run " + model + " --input " + dir + "/wrong.npy --input " + dir + "/wrong.npy",
                   "one --input per input");
  std::ofstream(dir + "/garbage.npy") << "not numpy";
  expect_one_error("run " + model + " --input " + dir + "/garbage.npy", "garbage.npy");
  expect_one_error("tune " + model + " --records " + dir + "/r.db", "--trials N or --budget T");
  expect_one_error("tune " + model + " --records " + dir + "/r.db --trials 5 --budget 1m", "--trials N or --budget T");
  expect_one_error("tune " + model + " --records " + dir + "/r.db --budget soon", "soon");
  expect_one_error("tune " + model + " --records " + dir + "/r.db --trials 5 --max-instructions -1",
                   "--max-instructions");
  expect_one_error("tune " + model + " --records " + dir + "/r.db --trials 5 --slow-factor 0.9", "--slow-factor");
  expect_one_error("tune " + model + " --records " + dir + "/r.db --trials 5 --first-batch -1", "first round");
  expect_one_error("tune " + model + " --records " + dir + "/r.db --budget 20s --batch 5000", "at most 1024");
  expect_one_error("tune " + model + " --records " + dir + "/r.db --trials 5 --strategy gradient:steps=-3",
                   "'steps' must be");
  expect_one_error("compile " + model + " --target opencl -o " + dir + "/x.basin", "--target");
  expect_one_error("compile " + model + " -o " + dir + "/x.basin --input " + dir + "/wrong.npy", "[1, 3, 8, 9]");
  // A records file the command only reads must exist (never created empty).
  expect_one_error("compile " + model + " --records " + dir + "/typo.db -o " + dir + "/x.basin", "does not exist");
  EXPECT_FALSE(std::filesystem::exists(dir + "/typo.db"));
  std::ofstream(dir + "/corrupt.db") << "this is not an SQLite database, not at all, no";
  expect_one_error("compile " + model + " --records " + dir + "/corrupt.db -o " + dir + "/x.basin", "corrupt.db");
}

// `basin profile`: every launch in run order with the keys scripts read, the trials
// behind each task from the records, and the time outside the kernels; on the model
// and on its compiled file alike.
TEST_F(NetworkCli, ProfileTimesEveryLaunch) {
  const std::string model = dir + "/cnn.onnx", db = dir + "/r.db", out = dir + "/cnn.basin";
  basin::testing::small_cnn().save(model);
  Result t = run("tune " + model + " --trials 9 --batch 3 --strategy random --records " + db + " --quiet");
  ASSERT_EQ(t.code, 0) << t.out;
  Result p = run("profile " + model + " --records " + db + " --repeat 3 --json --quiet");
  ASSERT_EQ(p.code, 0) << p.out;
  auto j = nlohmann::json::parse(p.out);
  ASSERT_EQ(j["launches"].size(), 3u) << p.out;
  double sum = 0, alone = 0, with_record = 0;
  int64_t trials = 0;
  for (const auto& l : j["launches"]) {
    for (const char* k :
         {"task", "task_key", "us", "share", "gflops", "peak_share", "bytes", "tuned", "trials", "record_us"})
      EXPECT_TRUE(l.contains(k)) << k << " in " << l.dump();
    // The task's key as the records file has it (what a script joins the records on).
    EXPECT_EQ(l["task_key"].get<std::string>().rfind("subgraph(", 0), 0u) << l.dump();
    EXPECT_GT(l["us"].get<double>(), 0);
    EXPECT_GT(l["bytes"].get<int64_t>(), 0);
    sum += l["us"].get<double>();
    trials += l["trials"].get<int64_t>();
    // A task with records has its best record's latency beside its time in the network.
    if (l["trials"].get<int64_t>() > 0 && l["record_us"].get<double>() > 0) {
      alone += l["record_us"].get<double>();
      with_record += l["us"].get<double>();
    }
  }
  EXPECT_EQ(trials, 9);
  EXPECT_GT(alone, 0);
  EXPECT_NEAR(j["recorded_alone_us"].get<double>(), alone, 1e-9 + 1e-9 * alone);
  EXPECT_NEAR(j["recorded_in_network_us"].get<double>(), with_record, 1e-9 + 1e-9 * with_record);
  // A float32 network's work at the measured peak: the launches' GFLOP over the peak.
  double gflop = 0;
  for (const auto& l : j["launches"]) gflop += l["gflops"].get<double>() * l["us"].get<double>() / 1e6;
  EXPECT_GT(gflop, 0);
  EXPECT_NEAR(j["gflop"].get<double>(), gflop, 1e-6 * gflop);
  ASSERT_TRUE(j.contains("peak_bound_us")) << p.out;
  EXPECT_NEAR(j["peak_bound_us"].get<double>(), 1e6 * gflop / j["peak_gflops"].get<double>(), 1e-6 * 1e6 * gflop);
  // The fastest round's launches summed: no less than each launch's own fastest.
  EXPECT_GE(j["kernels_us"].get<double>(), sum * (1 - 1e-6));
  EXPECT_GE(j["outside_us"].get<double>(), 0);
  // One round: the kernels' time is that round's launches, summed.
  Result once = run("profile " + model + " --records " + db + " --repeat 1 --json --quiet");
  ASSERT_EQ(once.code, 0) << once.out;
  auto j1 = nlohmann::json::parse(once.out);
  double sum1 = 0;
  for (const auto& l : j1["launches"]) sum1 += l["us"].get<double>();
  EXPECT_NEAR(j1["kernels_us"].get<double>(), sum1, 1e-6 * sum1 + 1e-9);
  EXPECT_GT(j["run_us"].get<double>(), 0);
  ASSERT_EQ(run("compile " + model + " --records " + db + " -o " + out + " --quiet").code, 0);
  Result text = run("profile " + out + " --repeat 2 --quiet");
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("outside kernels"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("GFLOP at the peak"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("conv2d+add+relu"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("timed alone in their records"), std::string::npos) << text.out;  // no records given
  // A compiled file with the records it was compiled from: the same records beside it.
  Result with = run("profile " + out + " --records " + db + " --repeat 2 --quiet");
  ASSERT_EQ(with.code, 0) << with.out;
  EXPECT_NE(with.out.find("timed alone in their records"), std::string::npos) << with.out;
  expect_one_error("profile " + model + " --repeat -1", "--repeat");
}

// Outputs are written by core/util/output_file.h's rules: never over the command's own
// inputs, never over something that is not a regular file (a FIFO, a device, a link),
// through a temporary that a killed run's successor removes; every bad --timeout and
// BASIN_NUM_THREADS is one error before any work.
// `basin quantize`: calibrated on two samples, the QDQ model is written, and basin runs
// it (its convolution and Gemm int8); bad calibration and outputs are one clear error,
// and the model is never replaced.
TEST_F(NetworkCli, QuantizeWritesAnInt8ModelBasinRuns) {
  const std::string model = dir + "/cnn.onnx", q = dir + "/cnn.int8.onnx";
  basin::testing::small_cnn().save(model);
  for (int k = 0; k < 2; ++k)
    basin::write_npy(dir + "/c" + std::to_string(k) + ".npy",
                     basin::NDArray::random(basin::DType::f32(), {1, 3, 8, 8}, -1, 1, static_cast<uint64_t>(10 + k)));
  Result r = run("quantize " + model + " --calibrate " + dir + "/c0.npy --calibrate " + dir + "/c1.npy -o " + q, true);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("2 products quantized"), std::string::npos) << r.out;
  Result c = run("compile " + q + " -o " + dir + "/q.basin --json --quiet");
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_EQ(nlohmann::json::parse(c.out)["int8_kernels"], 2) << c.out;
  const std::string model_bytes = basin::testing::read_file(model);
  expect_one_error("quantize " + model + " -o " + dir + "/x.onnx", "--calibrate is required");
  expect_one_error("quantize " + model + " --calibrate " + dir + "/none.npy -o " + dir + "/x.onnx", "none.npy");
  expect_one_error("quantize " + model + " --calibrate " + dir + "/c0.npy," + dir + "/c1.npy -o " + dir + "/x.onnx",
                   "has 2 inputs; the model takes 1");
  expect_one_error("quantize " + model + " --calibrate " + dir + "/c0.npy -o " + model, "also an input");
  expect_one_error("quantize " + model + " --calibrate " + dir + "/c0.npy --method entropy -o " + dir + "/x.onnx",
                   "entropy");
  EXPECT_EQ(basin::testing::read_file(model), model_bytes);
  EXPECT_FALSE(fs::exists(dir + "/x.onnx"));
  // --precision int8 on the network commands: the same quantization, then as usual.
  const std::string cal = " --precision int8 --calibrate " + dir + "/c0.npy --calibrate " + dir + "/c1.npy";
  const std::string db = dir + "/r.db";
  const int tuned =
      run("tune " + model + cal + " --trials 6 --batch 3 --strategy random --records " + db + " --quiet").code;
  ASSERT_TRUE(tuned == 0 || tuned == 4) << tuned;
  Result c8 = run("compile " + model + cal + " --records " + db + " -o " + dir + "/q8.basin --json --quiet");
  ASSERT_EQ(c8.code, 0) << c8.out;
  const auto j8 = nlohmann::json::parse(c8.out);
  EXPECT_EQ(j8["int8_kernels"], 2) << c8.out;
  EXPECT_LT(j8["untuned_tasks"].size(), j8["kernels"].get<size_t>()) << "the int8 records were not found";
  expect_one_error("compile " + model + " --precision int8 -o " + dir + "/x.basin", "give --calibrate");
  expect_one_error("compile " + model + " --calibrate " + dir + "/c0.npy -o " + dir + "/x.basin",
                   "--calibrate applies to --precision int8");
  expect_one_error("compile zoo:resnet18" + cal + " -o " + dir + "/x.basin", "export resnet18 to ONNX");
}

// --precision bf16 where the CPU has bfloat16 instructions: the values between kernels
// stored in bfloat16 (half the arena), the records found again by compile, the error
// measured against float32; --f32-activations keeps them float32 (and is an error at
// another precision). Without AVX512-BF16 every figure is float32's.
TEST_F(NetworkCli, Bf16StoresActivationsBetweenKernels) {
  const std::string model = dir + "/cnn.onnx", db = dir + "/bf.db";
  basin::testing::small_cnn().save(model);
  auto compile = [&](const std::string& flags) {
    Result c = run("compile " + model + flags + " -o " + dir + "/b.basin --json --quiet");
    EXPECT_EQ(c.code, 0) << c.out;
    return c.code == 0 ? nlohmann::json::parse(c.out) : nlohmann::json::object();
  };
  const auto f32 = compile(""), bf = compile(" --precision bf16"),
             kept = compile(" --precision bf16 --f32-activations");
  ASSERT_FALSE(f32.empty() || bf.empty() || kept.empty());
  EXPECT_EQ(kept["arena_bytes"], f32["arena_bytes"]);
  if (basin::this_host().bf16_dot) {
    EXPECT_LT(bf["arena_bytes"].get<double>(), f32["arena_bytes"].get<double>() * 0.75) << bf.dump();
    EXPECT_GT(bf["accuracy"]["max_rel_error"].get<double>(), 1e-5) << bf.dump();
  } else {
    EXPECT_EQ(bf["arena_bytes"], f32["arena_bytes"]);
  }
  EXPECT_LT(bf["accuracy"]["max_rel_error"].get<double>(), 2e-2) << bf.dump();
  const int tuned =
      run("tune " + model + " --precision bf16 --trials 6 --batch 3 --strategy random --records " + db + " --quiet")
          .code;
  ASSERT_TRUE(tuned == 0 || tuned == 4) << tuned;
  Result c = run("compile " + model + " --precision bf16 --records " + db + " -o " + dir + "/t.basin --json --quiet");
  ASSERT_EQ(c.code, 0) << c.out;
  const auto j = nlohmann::json::parse(c.out);
  EXPECT_LT(j["untuned_tasks"].size(), j["kernels"].get<size_t>()) << "the bf16 records were not found";
  expect_one_error("compile " + model + " --f32-activations -o " + dir + "/x.basin",
                   "--f32-activations applies to --precision bf16");
}

TEST_F(NetworkCli, OutputsNeverReplaceInputsOrSpecialFiles) {
  const std::string model = dir + "/cnn.onnx", db = dir + "/r.db", out = dir + "/cnn.basin";
  basin::testing::small_cnn().save(model);
  const int tuned = run("tune " + model + " --trials 3 --batch 3 --strategy random --records " + db + " --quiet").code;
  ASSERT_TRUE(tuned == 0 || tuned == 4) << tuned;  // 4: a task left without a program
  const std::string model_bytes = basin::testing::read_file(model), db_bytes = basin::testing::read_file(db);
  expect_one_error("compile " + model + " --records " + db + " -o " + db, "also an input");
  expect_one_error("compile " + model + " --records " + db + " -o " + model, "also an input");
  EXPECT_EQ(basin::testing::read_file(model), model_bytes);
  EXPECT_EQ(basin::testing::read_file(db), db_bytes);
  ASSERT_EQ(mkfifo((dir + "/fifo").c_str(), 0600), 0);
  expect_one_error("compile " + model + " -o " + dir + "/fifo", "not a regular file");
  EXPECT_TRUE(fs::is_fifo(dir + "/fifo"));
  expect_one_error("run " + model + " --output /dev/full", "not a regular file");
  Result full = run("records export --records " + db + " --out /dev/full", true);
  EXPECT_EQ(full.code, 1) << full.out;
  EXPECT_NE(full.out.find("not a regular file"), std::string::npos) << full.out;
  fs::create_symlink(dir + "/elsewhere", dir + "/link.basin");
  expect_one_error("compile " + model + " -o " + dir + "/link.basin", "symbolic link");
  EXPECT_FALSE(fs::exists(dir + "/elsewhere"));
  expect_one_error("compile " + model + " -o " + dir + "/no/such/folder/x.basin", "no folder");
  // A killed compile's temporary (a process that no longer exists) goes with the next write.
  const std::string stale = dir + "/.cnn.basin.basin-tmp-4194303";
  std::ofstream(stale) << "half a network";
  ASSERT_EQ(run("compile " + model + " --records " + db + " -o " + out + " --quiet").code, 0);
  EXPECT_FALSE(fs::exists(stale));
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find("basin-tmp"), std::string::npos) << e.path();
  EXPECT_TRUE(basin::testing::read_file(out).rfind("BASINNET2", 0) == 0);
  // A compiled network where a model is expected, and one of an older format where a
  // compiled network is: what it is and what to do, never "invalid ONNX".
  expect_one_error("tune " + out + " --records " + dir + "/t.db --trials 3", "is a compiled basin network");
  {
    std::string old = basin::testing::read_file(out);
    old.replace(0, 10, "BASINNET1\n");
    std::ofstream(dir + "/old.basin", std::ios::binary) << old;
  }
  expect_one_error("run " + dir + "/old.basin", "compile the network again");
  for (const char* t : {"0", "-1", "nan", "1e30", "inf", "5s", "1e-300"})
    expect_one_error("tune " + model + " --records " + dir + "/t.db --trials 3 --timeout " + t, "--timeout");
  expect_one_error("tune " + model + " --records " + dir + "/t.db --budget 1e306h", "longer than a year");
  EXPECT_FALSE(fs::exists(dir + "/t.db"));
  Result threads = basin::testing::capture("BASIN_NUM_THREADS=99999 " + basin::testing::basin_path() + " run " + model +
                                           " --quiet 2>&1");
  EXPECT_EQ(threads.code, 1) << threads.out;
  EXPECT_NE(threads.out.find("BASIN_NUM_THREADS"), std::string::npos) << threads.out;
}

// No command destroys a file it reads or writes a file that keeps nothing: a records
// path SQLite reads as special, a model's external-data file named as the output, an
// estimator command's output naming its records or its estimator, a database of other
// tables opened as records; a file replaced keeps its permissions.
TEST_F(NetworkCli, NoCommandDestroysAFileItReadsOrKeepsNothing) {
  auto refused = [&](const std::string& args, const std::string& needle) {
    SCOPED_TRACE(args);
    Result r = run(args, true);
    EXPECT_NE(r.code, 0) << r.out;
    EXPECT_LT(r.code, 128) << "killed by a signal";
    EXPECT_NE(r.out.find(needle), std::string::npos) << r.out;
  };
  const std::string model = dir + "/ext.onnx", db = dir + "/r.db";
  basin::testing::small_cnn(basin::testing::InitForm::External, dir).save(model);
  ASSERT_TRUE(fs::exists(dir + "/w.bin"));
  const std::string weights = basin::testing::read_file(dir + "/w.bin");
  const int tuned = run("tune " + model + " --trials 3 --batch 3 --strategy random --records " + db + " --quiet").code;
  ASSERT_TRUE(tuned == 0 || tuned == 4) << tuned;
  const std::string db_bytes = basin::testing::read_file(db);
  refused("compile " + model + " --records " + db + " -o " + dir + "/w.bin --quiet", "also an input");
  refused("run " + model + " --output " + dir + "/fc_w.bin --quiet", "also an input");
  EXPECT_EQ(basin::testing::read_file(dir + "/w.bin"), weights);
  refused("run " + model + " --output ''", "the output path is empty");
  for (const std::string& special :
       {std::string("''"), std::string(":memory:"), std::string("'file:x.db?mode=memory'")}) {
    refused("tune-op --workload gemm-256 --strategy random --trials 2 --records " + special + " --quiet",
            special == "''" ? "empty" : "keeps nothing");
    refused("tune " + model + " --trials 2 --records " + special + " --quiet",
            special == "''" ? "empty" : "keeps nothing");
    refused("records merge --into " + special + " " + db, special == "''" ? "empty" : "keeps nothing");
  }
  ASSERT_EQ(mkfifo((dir + "/fifo.db").c_str(), 0600), 0);
  refused("tune-op --workload gemm-256 --strategy random --trials 2 --records " + dir + "/fifo.db --quiet",
          "not a regular file");
  refused("estimator train --records " + db + " --out " + db, "also an input");
  refused("estimator eval --records " + db + " --estimator mlp --predictions " + db, "also an input");
  refused("estimator eval --records " + db + " --estimator mlp --predictions /dev/full", "not a regular file");
  refused("estimator calibrate --records " + db + " --out " + db + " --budget 5s", "also an input");
  EXPECT_EQ(basin::testing::read_file(db), db_bytes);
  // A file replaced keeps its permissions.
  const std::string exported = dir + "/private.jsonl";
  std::ofstream(exported) << "old";
  ASSERT_EQ(chmod(exported.c_str(), 0600), 0);
  ASSERT_EQ(run("records export --records " + db + " --out " + exported).code, 0);
  struct stat st;
  ASSERT_EQ(stat(exported.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(basin::testing::read_file(exported), "old");
}

// --shape gives a symbolic dimension its value; without it, the one error line names
// the input, the dimension and the flag.
TEST_F(NetworkCli, SymbolicShapesFromTheCommandLine) {
  const std::string model = dir + "/sym.onnx";
  basin::testing::OnnxBuilder b(17);
  b.input("x", {1, 4});
  b.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_param(
      "seq");
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  b.save(model);
  expect_one_error("run " + model, "--shape seq=");
  Result r = run("run " + model + " --shape seq=7 --json --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["outputs"][0]["shape"], (std::vector<int64_t>{1, 7}));
  Result w = run("run " + model + " --shape x=2,5 --json --quiet");
  ASSERT_EQ(w.code, 0) << w.out;
  EXPECT_EQ(nlohmann::json::parse(w.out)["outputs"][0]["shape"], (std::vector<int64_t>{2, 5}));
  expect_one_error("run " + model + " --shape seq=x", "not an integer");
  expect_one_error("run " + model + " --shape sequence=3", "'seq'");
  expect_one_error("run " + model + " --shape seq", "NAME=DIMS");
  expect_one_error("run zoo:resnet18 --shape seq=3", "zoo network");
}

// --shape NAME=LO..HI: one tuning run over the buckets (each reported), one compiled
// file that runs any length of the range and refuses others, and clear errors for a bad
// range, a range of a zoo network and int8 over a range.
TEST_F(NetworkCli, ARangeOfShapesIsTunedCompiledAndRunAtAnyLength) {
  const std::string model = dir + "/att.onnx", db = dir + "/r.db", out = dir + "/att.basin";
  basin::testing::OnnxBuilder b(17);
  b.input("x", {1, 4, 8});
  b.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_param(
      "seq");
  std::vector<float> w(64);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 37 % 17) / 17.0 - 0.5);
  b.init("wq", {8, 8}, w);
  b.node("MatMul", {"x", "wq"}, {"q"});
  b.attr_ints(b.node("Transpose", {"x"}, {"xt"}), "perm", {0, 2, 1});
  b.node("MatMul", {"q", "xt"}, {"s"});
  b.attr_int(b.node("Softmax", {"s"}, {"p"}), "axis", -1);
  b.node("MatMul", {"p", "x"}, {"y"});
  b.output("y");
  b.save(model);
  Result t = run("tune " + model + " --shape seq=2..12 --records " + db + " --trials 24 --json --quiet");
  ASSERT_EQ(t.code, 0) << t.out;
  nlohmann::json tj = nlohmann::json::parse(t.out);
  ASSERT_EQ(tj["models"].size(), 4u) << tj["models"].dump();  // seq 2, 4, 8, 12
  EXPECT_NE(tj["models"][3]["model"].get<std::string>().find("seq=12"), std::string::npos);
  EXPECT_EQ(tj["models"][3]["weight"], 4);  // 9..12
  Result c = run("compile " + model + " --shape seq=2..12 --records " + db + " -o " + out + " --json --quiet");
  ASSERT_EQ(c.code, 0) << c.out;
  nlohmann::json cj = nlohmann::json::parse(c.out);
  EXPECT_EQ(cj["buckets"].size(), 4u);
  // The projection and the products run along the sequence: their kernels take their
  // iterations at run time (a call of 5 runs the bucket of 8's first 5 rows).
  EXPECT_GE(cj["runtime_extent_launches"].get<int>(), 1) << cj.dump();
  EXPECT_TRUE(cj["accuracy"]["measured"].get<bool>()) << cj["accuracy"].dump();
  EXPECT_LT(cj["accuracy"]["max_rel_error"].get<double>(), 1e-5);
  for (int64_t n : {2, 5, 12}) {
    basin::write_npy(dir + "/x.npy", basin::NDArray::random(basin::DType::f32(), {1, n, 8}, -1, 1, 7));
    Result r = run("run " + out + " --input " + dir + "/x.npy --output " + dir + "/y.npy --json --quiet");
    ASSERT_EQ(r.code, 0) << r.out;
    Result f = run("run " + model + " --shape seq=" + std::to_string(n) + " --input " + dir + "/x.npy --output " + dir +
                   "/f.npy --json --quiet");
    ASSERT_EQ(f.code, 0) << f.out;
    basin::NDArray y = basin::read_npy(dir + "/y.npy"), ref = basin::read_npy(dir + "/f.npy");
    ASSERT_EQ(y.shape(), (std::vector<int64_t>{1, n, 8}));
    EXPECT_LT(basin::compare_arrays(y, ref).max_rel, 1e-5) << "length " << n;
  }
  basin::write_npy(dir + "/x13.npy", basin::NDArray::random(basin::DType::f32(), {1, 13, 8}, -1, 1, 7));
  expect_one_error("run " + out + " --input " + dir + "/x13.npy", "outside the range");
  // A distribution of the values: the buckets weighted by what they serve of it.
  Result tw = run("tune " + model + " --shape seq=2..12 --shape-weights seq=5:1,6:3 --records " + db +
                  " --trials 1 --json --quiet");
  ASSERT_EQ(tw.code, 0) << tw.out;
  nlohmann::json wj = nlohmann::json::parse(tw.out)["models"];
  ASSERT_EQ(wj.size(), 4u);
  EXPECT_EQ(wj[2]["weight"], 6);  // 1 + 3 (the values 5 and 6, of 5..8), x 12 / 8
  EXPECT_EQ(wj[0]["weight"], 1);  // none: the least weight
  expect_one_error("tune " + model + " --shape seq=2..12 --shape-weights seq=13:1 --records " + db + " --trials 1",
                   "must lie in 2..12");
  expect_one_error("tune " + model + " --shape-weights seq=3:1 --records " + db + " --trials 1", "LO..HI");
  // The family sweep: a share of the budget, at most half.
  Result sw = run("tune " + model + " --shape seq=2..12 --family-sweep 0 --records " + db + " --trials 1 --quiet");
  EXPECT_EQ(sw.code, 0) << sw.out;
  expect_one_error("tune " + model + " --shape seq=2..12 --family-sweep 0.9 --records " + db + " --trials 1",
                   "--family-sweep");
  // Weights timed cold on request, whatever their size; a mode that is none is refused.
  Result cold = run("tune " + model + " --shape seq=2..12 --weights-timing cold --records " + db + " --trials 1", true);
  EXPECT_EQ(cold.code, 0) << cold.out;
  EXPECT_NE(cold.out.find("weights evicted, as asked"), std::string::npos) << cold.out;
  expect_one_error("tune " + model + " --weights-timing hot --records " + db + " --trials 1", "--weights-timing");
  expect_one_error("compile " + model + " --shape seq=12..2 -o " + dir + "/bad.basin", "LO <= HI");
  expect_one_error("compile " + model + " --shape seq=2..x -o " + dir + "/bad.basin", "not an integer");
  expect_one_error("compile zoo:resnet18 --shape seq=1..4 -o " + dir + "/bad.basin", "zoo network");
  expect_one_error("compare " + model + " --shape seq=2..12", "one shape");
  expect_one_error(
      "compile " + model + " --shape seq=2..12 --precision int8 --calibrate " + dir + "/x.npy -o " + dir + "/bad.basin",
      "one value");
}

#endif

// The cuda target from the command line: compiled for a named architecture without a
// GPU; running, tuning and comparing need one and say so in one line where there is none.
TEST_F(NetworkCli, CudaTargetFromTheCommandLine) {
  Result c = run("compile zoo:dcgan --target cuda --arch sm_90 -o " + dir + "/dcgan.cuda.basin --json --quiet");
  if (c.code != 0 && c.out.find("without the CUDA toolkit") != std::string::npos) GTEST_SKIP() << "built without NVRTC";
  ASSERT_EQ(c.code, 0) << c.out;
  auto cj = nlohmann::json::parse(c.out);
  EXPECT_EQ(cj["target"], "cuda");
  EXPECT_EQ(cj["arch"], "sm_90");
  Result probe = run("op relu --target cuda");
  if (probe.code == 0) return;  // a GPU is here: running is tested by network_test on it
  expect_one_error("run " + dir + "/dcgan.cuda.basin", "the cuda target is unavailable");
  expect_one_error("tune zoo:dcgan --target cuda --trials 4 --records " + dir + "/g.db",
                   "the cuda target is unavailable");
  expect_one_error("compare zoo:dcgan --target cuda", "llvm target");
}

TEST_F(NetworkCli, ZooModelsAndCompiledFilesFromTheCommandLine) {
  expect_one_error("run zoo:resnet1000", "resnet18");
  expect_one_error("run " + dir + "/no_such_model.onnx", "no_such_model.onnx");
  // A corrupt compiled network: a flipped byte.
  Result c = run("compile zoo:dcgan -o " + dir + "/dcgan.basin --json --quiet");
  ASSERT_EQ(c.code, 0) << c.out;
  auto cj = nlohmann::json::parse(c.out);
  EXPECT_EQ(cj["untuned_tasks"].size(), cj["kernels"].get<size_t>());
  EXPECT_LT(cj["arena_bytes"].get<int64_t>(), cj["tensor_bytes"].get<int64_t>());
  Result r = run("run " + dir + "/dcgan.basin --json --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  std::string bytes;
  {
    std::ifstream f(dir + "/dcgan.basin", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  bytes[bytes.size() / 2] ^= 0x11;
  std::ofstream(dir + "/bad.basin", std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  expect_one_error("run " + dir + "/bad.basin", "SHA-256 mismatch");
  expect_one_error("compile zoo:dcgan", "-o");
}

// A network compiled for fewer vector instructions (BASIN_VECTOR_ISA) runs on the CPU
// that has them all; one that uses instructions the process may not is one clear error
// naming them.
TEST_F(NetworkCli, ACompiledNetworkRunsWhereItsInstructionsAre) {
  const std::string isa = basin::cpu_vector_isa();
  if (isa != "avx512" && isa != "avx2") GTEST_SKIP() << "no AVX here (" << isa << ")";
  const std::string narrow = dir + "/sse.basin", own = dir + "/own.basin";
  auto with = [](const std::string& setting, const std::string& args) {
    return basin::testing::capture(setting + " " + basin::testing::basin_path() + " " + args + " 2>&1");
  };
  ASSERT_EQ(with("BASIN_VECTOR_ISA=sse", "compile zoo:dcgan -o " + narrow + " --quiet").code, 0);
  ASSERT_EQ(run("compile zoo:dcgan -o " + own + " --quiet").code, 0);
  Result r = run("run " + narrow + " --json --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  // It names the CPU it was compiled for (this one: no note on stderr).
  EXPECT_FALSE(nlohmann::json::parse(r.out).value("compiled_for_cpu", "").empty()) << r.out;
  EXPECT_EQ(basin::testing::basin_stderr("run " + narrow).find("note:"), std::string::npos);
  EXPECT_FALSE(nlohmann::json::parse(run("run zoo:dcgan --json --quiet").out).contains("compiled_for_cpu"));
  Result refused = with("BASIN_VECTOR_ISA=sse", "run " + own + " --quiet");
  EXPECT_EQ(refused.code, 1) << refused.out;
  const std::vector<std::string> l = lines(refused.out);
  ASSERT_EQ(l.size(), 1u) << refused.out;
  EXPECT_EQ(l[0].rfind("basin: error: ", 0), 0u) << l[0];
  for (const char* needle : {"own.basin", "BASIN_VECTOR_ISA=sse", "avx", "compile it again here"})
    EXPECT_NE(l[0].find(needle), std::string::npos) << needle << " in " << l[0];
}

}  // namespace
