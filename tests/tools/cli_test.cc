// The `basin` command line: the listing commands, `basin op` end to end, and a must-fail
// case for every user error (one clear line on stderr, non-zero exit, no crash).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <sstream>
#include <set>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>

#include "core/util/hardware.h"
#include "core/util/host.h"
#include "models/estimator.h"
#include "tests/pyarrow_python.h"
#include "tests/tools/run_basin.h"

namespace {

using basin::testing::Result;

Result run(const std::string& args) { return basin::testing::run_basin(args); }
std::string stderr_of(const std::string& args) { return basin::testing::basin_stderr(args); }

TEST(Cli, OpsJsonListsEveryDesignOperator) {
  Result r = run("ops --json");
  ASSERT_EQ(r.code, 0);
  auto j = nlohmann::json::parse(r.out);
  std::set<std::string> names;
  for (auto& op : j["operators"]) {
    names.insert(op["name"].get<std::string>());
    EXPECT_FALSE(op["params"].empty()) << op["name"];
  }
  for (const char* op : {"dense",
                         "matmul",
                         "batch_matmul",
                         "conv1d",
                         "conv2d",
                         "conv3d",
                         "conv2d_transpose",
                         "max_pool2d",
                         "avg_pool2d",
                         "global_avg_pool2d",
                         "add",
                         "pow",
                         "gelu",
                         "hardswish",
                         "batch_norm",
                         "softmax",
                         "log_softmax",
                         "layer_norm",
                         "rms_norm",
                         "sum",
                         "mean",
                         "reshape",
                         "transpose",
                         "concat",
                         "split",
                         "slice",
                         "pad",
                         "gather",
                         "embedding",
                         "broadcast_to",
                         "squeeze",
                         "unsqueeze",
                         "resize"})
    EXPECT_TRUE(names.count(op)) << op;
}

TEST(Cli, WorkloadsJsonListsTheBenchmarkWorkloads) {
  Result r = run("workloads --json");
  ASSERT_EQ(r.code, 0);
  auto j = nlohmann::json::parse(r.out);
  std::set<std::string> names;
  for (auto& w : j["workloads"]) names.insert(w["name"].get<std::string>());
  for (std::string n : {"gemm-256", "gemm-4096", "bert-768x768", "bert-768x3072", "bert-3072x768", "attn-bmm",
                        "bert-attention", "mobilenet-dw", "resnet18-c1", "resnet18-c12", "vit-qkv", "vit-softmax"})
    EXPECT_TRUE(names.count(n)) << n;
  EXPECT_EQ(names.size(), 25u);
}

// `basin strategies`: every strategy, its default estimator, and its options with
// the values it runs with (the keys --strategy NAME:KEY=VALUE takes).
TEST(Cli, StrategiesListTheirOptions) {
  Result r = run("strategies --json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  std::map<std::string, nlohmann::json> by;
  for (auto& s : j["strategies"]) by[s["name"].get<std::string>()] = s;
  ASSERT_EQ(by.size(), 4u);
  EXPECT_EQ(by["annealing"]["default_estimator"], "gbt");
  EXPECT_EQ(by["random"]["default_estimator"], "none");
  EXPECT_TRUE(by["random"]["options"].empty());
  auto value = [&](const std::string& strategy, const std::string& key) {
    for (auto& o : by[strategy]["options"])
      if (o["key"] == key) return o["default"].get<std::string>();
    return std::string("missing");
  };
  EXPECT_EQ(value("gradient", "tile_slots"), "2");
  EXPECT_EQ(value("gradient", "epsilon"), "0.1");
  EXPECT_EQ(value("annealing", "plan_size"), "64");
  EXPECT_EQ(value("evolutionary", "population"), "256");
  Result text = run("strategies");
  ASSERT_EQ(text.code, 0);
  EXPECT_NE(text.out.find("    tile_slots=2: "), std::string::npos) << text.out;
}

// `basin estimators`: the registered kinds, in order, each with what it is.
TEST(Cli, EstimatorsListTheRegisteredKinds) {
  Result r = run("estimators --json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  std::vector<std::string> kinds;
  for (auto& k : j["estimators"]) {
    kinds.push_back(k["kind"].get<std::string>());
    EXPECT_FALSE(k["doc"].get<std::string>().empty()) << kinds.back();
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"mlp", "gbt", "ensemble", "roofline", "gpu_roofline"}));
  Result text = run("estimators");
  ASSERT_EQ(text.code, 0);
  EXPECT_NE(text.out.find("machine+KIND: "), std::string::npos) << text.out;
}

TEST(Cli, OpVerifiesAgainstLibTorch) {
  Result r = run("op conv2d --param kernel=3 --param stride=2 --param groups=2 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["verified"].get<bool>());
  EXPECT_LE(j["max_abs_error"].get<double>(), 1e-4);
  EXPECT_EQ(j["params"]["groups"], "2");
  Result w = run("op --workload attn-bmm --json");
  ASSERT_EQ(w.code, 0);
  EXPECT_EQ(nlohmann::json::parse(w.out)["op"], "batch_matmul");
  Result llvm = run("op --workload gemm-256 --target llvm --compare --timing quick --json");
  ASSERT_EQ(llvm.code, 0);
  auto lj = nlohmann::json::parse(llvm.out);
  for (const char* key : {"latency_us", "gflops", "max_abs_error", "torch_latency_us", "oracle_max_abs_error"})
    EXPECT_TRUE(lj.contains(key)) << key;
  EXPECT_GT(lj["latency_us"].get<double>(), 0);
  EXPECT_GT(lj["torch_latency_us"].get<double>(), 0);
  Result interp = run("op dense --target interpreter --json");
  ASSERT_EQ(interp.code, 0);
  EXPECT_FALSE(nlohmann::json::parse(interp.out).contains("latency_us"));
  Result big = run("op --workload gemm-2048 --oracle never --timing quick --json");
  ASSERT_EQ(big.code, 0);
  EXPECT_TRUE(nlohmann::json::parse(big.out).contains("oracle"));
  {
    std::string cfg = ::testing::TempDir() + "/basin_cli_cfg.json";
    FILE* f = std::fopen(cfg.c_str(), "w");
    std::fputs(
        R"({"sketch": "tile.vec=j.pack.acc2", "splits": {"i": [2, 2, 4], "j": [1, 2, 16], "k": [8]}, "unroll": 64})",
        f);
    std::fclose(f);
    Result c = run("op --workload gemm-256 --config " + cfg + " --timing quick --json");
    ASSERT_EQ(c.code, 0) << c.out;
    auto cj = nlohmann::json::parse(c.out);
    EXPECT_EQ(cj["config"]["sketch"], "tile.vec=j.pack.acc2");
    EXPECT_EQ(cj["config"]["splits"]["j"], nlohmann::json({1, 2, 16}));
    EXPECT_TRUE(cj["verified"].get<bool>());
    Result c_src = run("op --workload gemm-256 --config " + cfg + " --emit c --timing quick");
    ASSERT_EQ(c_src.code, 0);
    EXPECT_NE(c_src.out.find("void matmul(const float* restrict a_"), std::string::npos) << c_src.out;
    EXPECT_NE(c_src.out.find("#pragma omp parallel for"), std::string::npos);
    EXPECT_NE(c_src.out.find("#pragma omp simd"), std::string::npos);
  }
  Result emit = run("op relu --emit llvm --timing quick");
  EXPECT_NE(emit.out.find("define void @basin_kernel"), std::string::npos);
  Result ir = run("op softmax --emit ir");
  EXPECT_EQ(ir.code, 0);
  EXPECT_NE(ir.out.find("func softmax("), std::string::npos);
}

// BENCHMARKS.md: the peer runs on basin's threads. With basin's kernels held to one
// thread (BASIN_NUM_THREADS), LibTorch is too (it once used every core).
TEST(Cli, ThePeerRunsOnBasinsThreads) {
  Result all = run("op --workload gemm-256 --compare --timing quick --json");
  ASSERT_EQ(all.code, 0);
  EXPECT_EQ(nlohmann::json::parse(all.out)["torch_threads"].get<int>(),
            static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  Result one = basin::testing::capture("BASIN_NUM_THREADS=1 " + basin::testing::basin_path() +
                                       " op --workload gemm-256 --compare --timing quick --json 2>/dev/null");
  ASSERT_EQ(one.code, 0);
  EXPECT_EQ(nlohmann::json::parse(one.out)["torch_threads"].get<int>(), 1);
}

// OpenBLAS 0.3.21 falls back to its SSE3 kernels on CPUs it does not know (this
// project's Intel host, model 207): the peer's GEMM was 4.6x slower than with the
// kernels of the CPU's AVX-512. A peer now runs with the kernels of the CPU's vector
// instructions; a core the user names is kept.
TEST(Cli, ThePeersBlasUsesTheCpusVectorKernels) {
  Result r = run("op --workload gemm-256 --compare --timing quick --json");
  ASSERT_EQ(r.code, 0);
  const std::string core = nlohmann::json::parse(r.out).value("torch_blas_core", "");
  if (core.empty()) GTEST_SKIP() << "LibTorch does not use OpenBLAS here";
  const std::string& isa = basin::this_host().vector_isa;
  if (isa != "avx512" && isa != "avx2") GTEST_SKIP() << "no AVX2 here";
  EXPECT_NE(core, "Prescott") << isa;
  Result chosen = basin::testing::capture("OPENBLAS_CORETYPE=Haswell " + basin::testing::basin_path() +
                                          " op --workload gemm-256 --compare --timing quick --json 2>/dev/null");
  ASSERT_EQ(chosen.code, 0);
  EXPECT_EQ(nlohmann::json::parse(chosen.out)["torch_blas_core"].get<std::string>(), "Haswell");
}

struct BadCall {
  std::string args;
  std::string message;
};

// A thread count that is not one is refused with one line naming it: records would
// name every core while the user meant fewer.
// `basin op` with the variable set to each of `bad` fails with one line naming the value.
void expect_setting_refused(const std::string& var, std::initializer_list<const char*> bad,
                            const std::string& message) {
  for (const char* v : bad) {
    Result r = basin::testing::capture(var + "='" + v + "' " + basin::testing::basin_path() +
                                       " op --workload gemm-256 --timing quick 2>&1");
    EXPECT_EQ(r.code, 1) << v << ": " << r.out;
    EXPECT_NE(r.out.find("basin: error: " + var + "='" + v + "' " + message), std::string::npos) << r.out;
  }
}

TEST(Cli, ABadThreadCountIsRefused) {
  expect_setting_refused("BASIN_NUM_THREADS", {"abc", "0", "-2", "4x", "", "1.5"}, "is not a number of threads");
  Result ok = basin::testing::capture("BASIN_NUM_THREADS=2 " + basin::testing::basin_path() + " ops 2>&1");
  EXPECT_EQ(ok.code, 0) << ok.out;
}

TEST(Cli, ABadPluginTimeoutIsRefused) {
  expect_setting_refused("BASIN_PLUGIN_TIMEOUT", {"abc", "0", "-1", "86401", "1.5", ""},
                         "is not a number of seconds a plug-in's call may take");
}

// An error line stays a line: a name of 100,000 characters is cut in its middle.
TEST(Cli, AnErrorLineIsBoundedInLength) {
  Result r = basin::testing::run_basin("op " + std::string(100000, 'x'), true);
  EXPECT_EQ(r.code, 1) << r.out.substr(0, 200);
  EXPECT_LT(r.out.size(), 2500u);
  EXPECT_NE(r.out.find("unknown operator 'xxx"), std::string::npos) << r.out.substr(0, 200);
  EXPECT_NE(r.out.find("characters ...]"), std::string::npos) << r.out.substr(0, 200);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1);
}

// A records file this process cannot write, or one in a folder it cannot write, is
// named as such: tuning refuses it before measuring anything, reading it works. (Root
// writes anything: the commands run as "nobody" then, through setpriv.)
TEST(Cli, ReadOnlyRecordsAreNamedAsSuch) {
  namespace fs = std::filesystem;
  std::string as_user;
  if (::geteuid() == 0) {
    as_user = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
    if (basin::testing::capture(as_user + basin::testing::basin_path() + " --version >/dev/null 2>&1").code != 0)
      GTEST_SKIP() << "root, and the user nobody cannot run " << basin::testing::basin_path() << " through setpriv";
  }
  const std::string dir = fs::temp_directory_path().string() + "/basin_ro_" + std::to_string(getpid());
  fs::create_directories(dir + "/ro");
  fs::create_directories(dir + "/rw");
  const std::string db = dir + "/ro/r.db";
  ASSERT_EQ(run("tune-op --workload gemm-256 --strategy random --trials 3 --quiet --records " + db).code, 0);
  for (const char* ext : {"-wal", "-shm"}) ASSERT_FALSE(fs::exists(db + ext));
  fs::permissions(db, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  fs::permissions(dir + "/ro", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                   fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(dir + "/rw", fs::perms::all);
  fs::permissions(dir, fs::perms::all);
  const std::string basin = "BASIN_CACHE_DIR=" + dir + "/rw " + as_user + basin::testing::basin_path();
  auto error_of = [&](const std::string& args) {
    Result r = basin::testing::capture(basin + " " + args + " 2>&1 >/dev/null");
    EXPECT_EQ(r.code, 1) << args << ": " << r.out;
    return r.out;
  };
  const std::string tune = "tune-op --workload gemm-256 --strategy random --trials 6 --quiet --records ";
  EXPECT_NE(error_of(tune + db).find("is read-only"), std::string::npos);
  EXPECT_NE(error_of(tune + dir + "/ro/new.db").find("is not writable"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir + "/ro/new.db"));
  Result exported =
      basin::testing::capture(basin + " records export --records " + db + " --out " + dir + "/rw/out.jsonl 2>&1");
  EXPECT_EQ(exported.code, 0) << exported.out;
  const std::string lines = basin::testing::read_file(dir + "/rw/out.jsonl");
  EXPECT_GE(std::count(lines.begin(), lines.end(), '\n'), 3) << lines;
  fs::permissions(dir + "/ro", fs::perms::owner_all);
  fs::remove_all(dir);
}

TEST(Cli, ABadChunkCountIsRefused) {
  expect_setting_refused("BASIN_PARALLEL_CHUNKS", {"abc", "0", "-1", "65", "2x", ""}, "is not a number of chunks");
  for (const char* good : {"1", "64"}) {
    Result ok =
        basin::testing::capture(std::string("BASIN_PARALLEL_CHUNKS=") + good + " " + basin::testing::basin_path() +
                                " op --workload gemm-256 --timing quick --json 2>&1");
    EXPECT_EQ(ok.code, 0) << good << ": " << ok.out;
  }
}

// BASIN_VECTOR_ISA names an x86 set no wider than the CPU's; anything else is refused
// with one line naming it, before anything is compiled or recorded.
TEST(Cli, ABadVectorIsaIsRefused) {
  const std::string isa = basin::cpu_vector_isa();
  if (isa != "avx512" && isa != "avx2" && isa != "sse") {
    expect_setting_refused("BASIN_VECTOR_ISA", {"sse"}, "is not available");
    return;
  }
  expect_setting_refused("BASIN_VECTOR_ISA", {"avx1024", "AVX2", "", "neon", "avx"},
                         "is not a vector instruction set this CPU has");
  if (isa != "avx512")
    expect_setting_refused("BASIN_VECTOR_ISA", {"avx512"}, "is not a vector instruction set this CPU has");
}

// BASIN_LAYOUT is nchwc (the default) or nchw (every value of a network NCHW).
TEST(Cli, ABadLayoutSettingIsRefused) {
  expect_setting_refused("BASIN_LAYOUT", {"nhwc", "NCHW", ""}, "is not a layout plan");
  Result ok = basin::testing::capture("BASIN_LAYOUT=nchw " + basin::testing::basin_path() + " ops 2>&1");
  EXPECT_EQ(ok.code, 0) << ok.out;
}

// BASIN_WINOGRAD is auto (the default), off, 2 or 4 (the output tile).
TEST(Cli, ABadWinogradSettingIsRefused) {
  expect_setting_refused("BASIN_WINOGRAD", {"3", "on", ""}, "is not a Winograd setting");
  for (const char* ok_value : {"off", "4"}) {
    Result ok = basin::testing::capture(std::string("BASIN_WINOGRAD=") + ok_value + " " + basin::testing::basin_path() +
                                        " ops 2>&1");
    EXPECT_EQ(ok.code, 0) << ok.out;
  }
}

// `--emit asm` prints the machine code; BASIN_VECTOR_ISA holds it to a narrower set:
// on an AVX-512 CPU, AVX2's ymm registers and no zmm, or SSE's xmm alone. The kernel
// still matches LibTorch (basin op fails past --tolerance).
TEST(Cli, AVectorIsaHoldsTheMachineCodeToItsRegisters) {
  const std::string isa = basin::cpu_vector_isa();
  if (isa != "avx512" && isa != "avx2") GTEST_SKIP() << "no AVX here (" << isa << ")";
  // 16 lanes of j: one zmm register, or two ymm, or four xmm.
  const std::string cfg = ::testing::TempDir() + "/basin_cli_isa_cfg.json";
  {
    std::ofstream f(cfg);
    f << R"({"sketch": "tile.vec=j.pack.acc2", "splits": {"i": [2, 2, 4], "j": [1, 2, 16], "k": [8]}, "unroll": 64})";
  }
  auto assembly = [&cfg](const std::string& setting) {
    Result r =
        basin::testing::capture(setting + " " + basin::testing::basin_path() + " op --workload gemm-256 --config " +
                                cfg + " --emit asm --timing quick 2>/dev/null");
    EXPECT_EQ(r.code, 0) << setting;
    return r.out;
  };
  auto uses = [](const std::string& text, const std::string& reg) { return text.find("%" + reg) != std::string::npos; };
  const std::string own = assembly("");
  EXPECT_NE(own.find("vfmadd"), std::string::npos) << own.substr(0, 2000);
  EXPECT_EQ(uses(own, "zmm"), isa == "avx512");
  if (isa == "avx512") {
    const std::string avx2 = assembly("BASIN_VECTOR_ISA=avx2");
    EXPECT_TRUE(uses(avx2, "ymm"));
    EXPECT_FALSE(uses(avx2, "zmm"));
    EXPECT_NE(avx2.find("vfmadd"), std::string::npos);
  }
  const std::string sse = assembly("BASIN_VECTOR_ISA=sse");
  EXPECT_TRUE(uses(sse, "xmm"));
  EXPECT_FALSE(uses(sse, "ymm"));
  EXPECT_FALSE(uses(sse, "zmm"));
  EXPECT_EQ(sse.find("vfmadd"), std::string::npos);  // FMA came with AVX2
  EXPECT_NE(sse.find("mulps"), std::string::npos);
  // The setting names the CPU's own set too, and changes nothing then.
  EXPECT_EQ(uses(assembly("BASIN_VECTOR_ISA=" + isa), "zmm"), isa == "avx512");
  std::remove(cfg.c_str());
}

// Under BASIN_VECTOR_ISA the peer keeps to the same instructions: oneDNN says which
// it dispatches to when ONEDNN_VERBOSE is set.
TEST(Cli, ThePeerKeepsToTheSameVectorIsa) {
  if (basin::cpu_vector_isa() != "avx512") GTEST_SKIP() << "no AVX-512 here";
  Result r = basin::testing::capture("BASIN_VECTOR_ISA=avx2 ONEDNN_VERBOSE=1 " + basin::testing::basin_path() +
                                     " op --workload resnet18-c12 --compare --timing quick --oracle never 2>&1");
  ASSERT_EQ(r.code, 0) << r.out;
  const size_t at = r.out.find("onednn_verbose,info,cpu,isa:");
  if (at == std::string::npos) GTEST_SKIP() << "LibTorch's convolution does not go through oneDNN here";
  const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
  EXPECT_NE(line.find("AVX2"), std::string::npos) << line;
  EXPECT_EQ(line.find("AVX-512"), std::string::npos) << line;
}

// BASIN_LLVM_ARGS passes options to LLVM after basin's own (codegen/llvm_jit.cc): one
// LLVM does not take is refused with one line naming it, and one of basin's defaults
// named again (LLVM's own value of the DAG builder's region limit) is accepted.
TEST(Cli, ABadLlvmArgumentIsRefused) {
  expect_setting_refused("BASIN_LLVM_ARGS", {"-bogus", "-dag-maps-huge-region=abc"}, "is refused by LLVM");
  Result ok =
      basin::testing::capture("BASIN_LLVM_ARGS='-dag-maps-huge-region=1000 -enable-misched=false' " +
                              basin::testing::basin_path() + " op --workload gemm-256 --timing quick --json 2>&1");
  EXPECT_EQ(ok.code, 0) << ok.out;
}

// `estimator dataset --max-instructions N`: programs larger than N are failed records.
TEST(Cli, EstimatorDatasetTakesTheInstructionLimit) {
  std::string db = "/tmp/basin_cli_limit_" + std::to_string(::getpid()) + ".db";
  Result d = run("estimator dataset --records " + db +
                 " --tasks gemm-256 --per-task 3 --max-instructions 1 --compile-threads 1 --json");
  ASSERT_EQ(d.code, 0) << d.out;
  auto j = nlohmann::json::parse(d.out);
  EXPECT_EQ(j["measured"], 3);
  EXPECT_EQ(j["failed"], 3);
  std::remove(db.c_str());
}

// `estimator dataset --target cuda` measures the tasks' GPU sketches on GPU 0; where
// there is no GPU it says so in one line before it makes the records file.
TEST(Cli, EstimatorDatasetOnTheGpuNeedsOne) {
  if (run("op relu --target cuda").code == 0)
    GTEST_SKIP() << "a GPU is here (a GPU dataset is measured on one by scripts/gpu-dataset)";
  std::string db = "/tmp/basin_cli_gpu_dataset_" + std::to_string(::getpid()) + ".db";
  std::string err = stderr_of("estimator dataset --target cuda --records " + db + " --tasks gemm-256 --per-task 2");
  EXPECT_NE(err.find("basin: error: the cuda target is unavailable"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(run("estimator dataset --target cuda --records " + db + " --tasks gemm-256 --per-task 2").code, 0);
  EXPECT_FALSE(std::filesystem::exists(db)) << "a records file was made for a dataset that could not be measured";
}

TEST(Cli, EstimatorTrainEvalAndExport) {
  std::string db = "/tmp/basin_cli_est_" + std::to_string(::getpid()) + ".db";
  std::string model = db + ".bin";
  Result d = run("estimator dataset --records " + db + " --tasks gemm-256 --per-task 16 --json");
  ASSERT_EQ(d.code, 0) << d.out;
  EXPECT_EQ(nlohmann::json::parse(d.out)["measured"], 16);
  Result t = run("estimator train --records " + db + " --test-fraction 0 --epochs 5 --out " + model + " --json");
  ASSERT_EQ(t.code, 0) << t.out;
  auto tj = nlohmann::json::parse(t.out);
  EXPECT_EQ(tj["train"]["samples"], 16);
  Result e = run("estimator eval --records " + db + " --all --estimator " + model + " --json");
  ASSERT_EQ(e.code, 0) << e.out;
  auto ej = nlohmann::json::parse(e.out);
  EXPECT_EQ(ej["kind"], "mlp");
  EXPECT_EQ(ej["samples"], 16);
  EXPECT_GE(ej["pairwise_accuracy"].get<double>(), 0.0);
  // --predictions: one line per program with its latency and score; the scores order
  // the pairs as the pairwise accuracy says.
  std::string pred = db + ".pred.jsonl";
  ASSERT_EQ(run("estimator eval --records " + db + " --all --estimator " + model + " --predictions " + pred).code, 0);
  std::vector<nlohmann::json> rows;
  {
    std::ifstream in(pred);
    for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  }
  ASSERT_EQ(rows.size(), 16u);
  double agree = 0, pairs = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i]["task"], rows[0]["task"]);
    EXPECT_TRUE(rows[i]["config"].is_object());
    EXPECT_GT(rows[i]["latency_us"].get<double>(), 0);
    for (size_t j = i + 1; j < rows.size(); ++j) {
      double dl = rows[i]["latency_us"].get<double>() - rows[j]["latency_us"].get<double>();
      double ds = rows[i]["score"].get<double>() - rows[j]["score"].get<double>();
      if (dl == 0) continue;
      pairs += 1;
      agree += (dl < 0) == (ds < 0);
    }
  }
  EXPECT_NEAR(agree / pairs, ej["pairwise_accuracy"].get<double>(), 1e-9);
  std::remove(pred.c_str());
  EXPECT_NE(stderr_of("estimator eval --records " + db + " --all --predictions /nonexistent/dir/p.jsonl")
                .find("cannot write '/nonexistent/dir/p.jsonl': no folder"),
            std::string::npos);
  Result r = run("estimator eval --records " + db + " --all --estimator roofline --json");
  ASSERT_EQ(r.code, 0) << r.out;
  // An estimator that reads the machine: the dataset's programs are this machine's,
  // described in the file. A file describing no machine has nothing to teach it.
  {
    const std::string reads = db + ".machine.bin", bare = db + ".bare.db";
    Result mt = run("estimator train --records " + db + " --estimator machine+mlp --test-fraction 0 --epochs 3 --out " +
                    reads + " --json");
    ASSERT_EQ(mt.code, 0) << mt.out;
    EXPECT_EQ(nlohmann::json::parse(mt.out)["undescribed_left_out"], 0);
    EXPECT_EQ(nlohmann::json::parse(mt.out)["train"]["samples"], 16);
    Result me = run("estimator eval --records " + db + " --all --estimator " + reads + " --json");
    ASSERT_EQ(me.code, 0) << me.out;
    EXPECT_EQ(nlohmann::json::parse(me.out)["kind"], "machine+mlp");
    ASSERT_EQ(run("records merge --into " + bare + " " + db).code, 0);
    ASSERT_EQ(basin::testing::capture("/usr/bin/python3 -c \"import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
                                      "c.execute('DROP TABLE machines'); c.commit()\" " +
                                      bare)
                  .code,
              0);
    EXPECT_NE(stderr_of("estimator train --records " + bare + " --estimator machine+mlp --test-fraction 0")
                  .find("describes none of the machines"),
              std::string::npos);
    EXPECT_NE(stderr_of("estimator train --records " + db + " --estimator machine+roofline").find("unknown estimator"),
              std::string::npos);
    for (const std::string& f : {reads, bare, bare + "-wal", bare + "-shm"}) std::remove(f.c_str());
  }
  // Calibration: a sample of one task measured into a records file of its own, the
  // shipped ensemble fine-tuned and written where --out says; then fine-tuned further
  // with `train --from`, and evaluated against the shipped weights.
  {
    const std::string cal_db = db + ".cal.db", cal = db + ".cal.bin", again = db + ".again.bin";
    Result c =
        run("estimator calibrate --budget 6s --tasks gemm-256 --records " + cal_db + " --out " + cal + " --json");
    ASSERT_EQ(c.code, 0) << c.out;
    auto cj = nlohmann::json::parse(c.out);
    EXPECT_GE(cj["measured"].get<int>(), 2);
    EXPECT_EQ(cj["tasks"], 1);
    EXPECT_EQ(cj["estimator"], cal);
    Result f = run("estimator train --records " + db + " --from " + cal + " --test-fraction 0 --epochs 1 --out " +
                   again + " --json");
    ASSERT_EQ(f.code, 0) << f.out;
    Result ev = run("estimator eval --records " + db + " --all --estimator " + again + " --json");
    ASSERT_EQ(ev.code, 0) << ev.out;
    EXPECT_EQ(nlohmann::json::parse(ev.out)["kind"], "ensemble");
    EXPECT_TRUE(nlohmann::json::parse(ev.out)["families"].contains("matmul"));
    Result shipped = run("estimator eval --records " + db + " --all --estimator ensemble --no-calibrate --json");
    ASSERT_EQ(shipped.code, 0) << shipped.out;
    EXPECT_EQ(nlohmann::json::parse(shipped.out)["estimator_file"],
              basin::models::pretrained_cpu_path("cpu_ensemble.bin"));
    EXPECT_NE(stderr_of("estimator train --records " + db + " --from /nonexistent/e.bin").find("does not exist"),
              std::string::npos);
    for (const std::string& x : {cal_db, cal_db + "-wal", cal_db + "-shm", cal, again}) std::remove(x.c_str());
  }
  Result x = run("records export --records " + db);
  ASSERT_EQ(x.code, 0);
  EXPECT_EQ(std::count(x.out.begin(), x.out.end(), '\n'), 17);  // a header line and 16 programs
  // CSV: a header row, then a row per store of each program, the feature columns last.
  Result csv = run("records export --records " + db + " --format csv");
  ASSERT_EQ(csv.code, 0);
  EXPECT_EQ(csv.out.rfind("program,task,family,host,codegen,sketch,config,latency_us,measurements_us,feature_version,"
                          "stores,store,",
                          0),
            0u)
      << csv.out.substr(0, 200);
  int stores = 0;
  {
    std::istringstream lines(x.out.substr(x.out.find('\n') + 1));
    for (std::string line; std::getline(lines, line);)
      if (!line.empty()) stores += nlohmann::json::parse(line)["stores"].get<int>();
  }
  EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), 1 + stores);
  EXPECT_NE(csv.out.find(",matmul,"), std::string::npos) << "gemm-256's family";
  // This machine's numbers in every row: the dataset command stored its description
  // (`basin machine`), and the JSON lines' header carries it too.
  const auto machine = nlohmann::json::parse(run("machine --json").out);
  ASSERT_EQ(machine["host"], basin::host_description());
  EXPECT_NE(csv.out.find(",stores,store,machine.vector_bits,machine.vector_registers,machine.l1d_bytes,"),
            std::string::npos)
      << csv.out.substr(0, 300);
  const std::string numbers = ",0," + std::to_string(machine["vector_bits"].get<int>()) + "," +
                              std::to_string(machine["vector_registers"].get<int>()) + ",";
  EXPECT_NE(csv.out.find(numbers), std::string::npos) << numbers;
  const auto header = nlohmann::json::parse(x.out.substr(0, x.out.find('\n')));
  EXPECT_EQ(header["machines"][basin::host_description()]["vector_bits"], machine["vector_bits"]);
  // Parquet: the same rows, read back by pyarrow where there is one.
  const std::string pq = db + ".parquet";
  ASSERT_EQ(run("records export --records " + db + " --out " + pq).code, 0);
  {
    const std::string bytes = basin::testing::read_file(pq);
    ASSERT_GT(bytes.size(), 8u);
    EXPECT_EQ(bytes.substr(0, 4), "PAR1");
    EXPECT_EQ(bytes.substr(bytes.size() - 4), "PAR1");
  }
  if (const std::string py = basin::testing::pyarrow_python(); !py.empty()) {
    const std::string check =
        "import sys, pyarrow.parquet as q; t = q.read_table(sys.argv[1]).to_pydict(); "
        "print(len(t['program']), max(t['program']), set(t['machine.vector_bits']), "
        "set(t['family']), len(t['buf0.unique_bytes']))";
    basin::testing::Result r = basin::testing::capture("'" + py + "' -c \"" + check + "\" " + pq + " 2>&1");
    ASSERT_EQ(r.code, 0) << r.out;
    const std::string want = std::to_string(stores) + " 15 {" + std::to_string(machine["vector_bits"].get<int>()) +
                             ".0} {'matmul'} " + std::to_string(stores) + "\n";
    EXPECT_EQ(r.out, want);
  } else {
    std::fprintf(stderr, "no Python with pyarrow: the Parquet export is checked by its framing only\n");
  }
  std::remove(pq.c_str());
  EXPECT_NE(stderr_of("records export --records " + db + " --format parquet").find("--out FILE.parquet"),
            std::string::npos);
  // Merge: into a new file, then again (nothing added), then with a second file.
  std::string merged = db + ".merged.db", other = db + ".other.db";
  Result m1 = run("records merge --into " + merged + " " + db + " --json");
  ASSERT_EQ(m1.code, 0) << m1.out;
  EXPECT_EQ(nlohmann::json::parse(m1.out)["added"], 16);
  {
    // The machines' descriptions come along.
    const std::string jl = run("records export --records " + merged).out;
    EXPECT_TRUE(nlohmann::json::parse(jl.substr(0, jl.find('\n')))["machines"].contains(basin::host_description()));
  }
  Result m2 = run("records merge --into " + merged + " " + db + " --json");
  EXPECT_EQ(nlohmann::json::parse(m2.out)["added"], 0);
  EXPECT_EQ(nlohmann::json::parse(m2.out)["skipped"], 16);
  ASSERT_EQ(run("estimator dataset --records " + other + " --tasks gemm-256 --per-task 20 --seed 9").code, 0);
  // A rerun measures only what is missing, and the log counts the tasks.
  std::string log = stderr_of("estimator dataset --records " + other + " --tasks gemm-256 --per-task 21 --seed 9");
  EXPECT_NE(log.find("[dataset] 1 task, 21 programs each"), std::string::npos) << log;
  EXPECT_NE(log.find("task 1/1 "), std::string::npos) << log;
  auto m3 = nlohmann::json::parse(run("records merge --into " + merged + " " + other + " --json").out);
  EXPECT_EQ(m3["added"].get<int>() + m3["skipped"].get<int>(), 21);
  EXPECT_EQ(m3["total"].get<int>(), 16 + m3["added"].get<int>());
  EXPECT_NE(stderr_of("records merge --into " + merged + " " + merged).find("into itself"), std::string::npos);
  // Four merges of one file into a new one at once: each program once.
  const std::string racing = db + ".racing.db", m = basin::testing::basin_path() + " records merge --into ";
  std::string all_at_once;
  for (int i = 0; i < 4; ++i) all_at_once += m + racing + " " + db + " >/dev/null 2>&1 & ";
  ASSERT_EQ(basin::testing::capture(all_at_once + "wait").code, 0);
  Result counted = run("records merge --into " + racing + " " + db + " --json");
  ASSERT_EQ(counted.code, 0) << counted.out;
  EXPECT_EQ(nlohmann::json::parse(counted.out)["total"], 16) << counted.out;
  for (const char* ext : {"", "-wal", "-shm"}) std::remove((racing + ext).c_str());
  for (const std::string& f : {merged, other})
    for (const char* ext : {"", "-wal", "-shm"}) std::remove((f + ext).c_str());
  // Relabel: the 16 programs' machine renamed and back; a machine the file does not
  // name is refused, the message listing the ones it does.
  const std::string here = basin::host_description(), there = "Other CPU (family 1 model 2), 1 core, sse";
  Result rl = run("records relabel --records " + db + " --from '" + here + "' --to '" + there + "' --json");
  ASSERT_EQ(rl.code, 0) << rl.out;
  EXPECT_EQ(nlohmann::json::parse(rl.out)["relabelled"], 16);
  std::string rerr = stderr_of("records relabel --records " + db + " --from '" + here + "' --to x");
  EXPECT_NE(rerr.find("was measured on '" + here + "'"), std::string::npos) << rerr;
  EXPECT_NE(rerr.find("'" + there + "': 16 records"), std::string::npos) << rerr;
  EXPECT_NE(stderr_of("records relabel --records " + db + " --to x").find("--from must name the machine"),
            std::string::npos);
  EXPECT_NE(stderr_of("records relabel --records " + db + " --from x --to x").find("are the same machine"),
            std::string::npos);
  // Describe: refused while no record names this machine (the message lists those
  // the file names).
  std::string derr = stderr_of("records describe --records " + db);
  EXPECT_NE(derr.find("no record of " + db + " was measured on this machine ('" + here + "'"), std::string::npos)
      << derr;
  EXPECT_NE(derr.find("'" + there + "': 16 records"), std::string::npos) << derr;
  Result back = run("records relabel --records " + db + " --from '" + there + "' --to '" + here + "'");
  ASSERT_EQ(back.code, 0) << back.out;
  EXPECT_NE(back.out.find("16 records"), std::string::npos) << back.out;
  // Described again: this machine's description (basin machine) for its 16 records,
  // replacing the one their first record stored.
  Result ds = run("records describe --records " + db + " --json");
  ASSERT_EQ(ds.code, 0) << ds.out;
  const auto dj = nlohmann::json::parse(ds.out);
  EXPECT_EQ(dj["described"], 16);
  EXPECT_EQ(dj["replaced"], true);
  EXPECT_EQ(dj["host"], here);
  EXPECT_EQ(dj["machine"]["host"], here);
  EXPECT_GT(dj["machine"]["vector_bits"].get<int>(), 0);
  // Must-fail: no held-out task with one task; a bad estimator name or file.
  EXPECT_NE(stderr_of("estimator eval --records " + db).find("no held-out tasks"), std::string::npos);
  EXPECT_NE(stderr_of("estimator eval --records " + db + " --all --estimator svm").find("unknown estimator 'svm'"),
            std::string::npos);
  EXPECT_NE(stderr_of("estimator eval --records " + db + " --all --estimator " + db).find("not a basin estimator file"),
            std::string::npos);
  EXPECT_NE(stderr_of("estimator train --records " + db + " --loss hinge").find("--loss must be rank or mse"),
            std::string::npos);
  EXPECT_NE(stderr_of("estimator train --records " + db + " --estimator gbt --tree-eta 0")
                .find("--tree-eta must be in (0, 1]"),
            std::string::npos);
  EXPECT_NE(stderr_of("estimator train --records " + db + " --estimator gbt --pair-samples 0")
                .find("--pair-samples must be at least 1"),
            std::string::npos);
  // A read-only open of a WAL database leaves its -wal and -shm files (only a writer
  // removes them).
  for (const char* ext : {"", "-wal", "-shm"}) std::remove((db + ext).c_str());
  std::remove(model.c_str());
}

// `basin machine`: this machine's description, kept in basin's cache; a damaged
// cache file is measured again, never an error.
TEST(Cli, MachineDescribesThisHost) {
  Result text = run("machine");
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("machine: " + basin::host_description()), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("GFLOP/s"), std::string::npos) << text.out;
  const std::string path = basin::hardware_cache_path();
  { std::ofstream(path) << "{\"version\": 1, \"host\""; }
  Result j = run("machine --json");
  ASSERT_EQ(j.code, 0) << j.out;
  auto d = nlohmann::json::parse(j.out);
  EXPECT_EQ(d["host"], basin::host_description());
  EXPECT_EQ(d["file"], path);
  EXPECT_GT(d["bandwidth_gbs"].get<double>(), 0);
  EXPECT_NO_THROW(basin::Hardware::from_json(basin::testing::read_file(path)));
  Result again = run("machine --measure --json");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(nlohmann::json::parse(again.out)["host"], basin::host_description());
  // A FIFO where the description is kept (opening it would block until a writer came):
  // measured again, and the FIFO left as it is.
  const std::string cache = ::testing::TempDir() + "basin_fifo_cache_" + std::to_string(getpid());
  std::filesystem::create_directories(cache + "/machines");
  const std::string fifo = cache + "/machines/" + std::filesystem::path(path).filename().string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  Result blocked = basin::testing::capture("BASIN_CACHE_DIR=" + cache + " timeout 120 " + basin::testing::basin_path() +
                                           " machine --json 2>&1");
  EXPECT_EQ(blocked.code, 0) << blocked.out;
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  std::filesystem::remove_all(cache);
}

TEST(Cli, UserErrorsFailWithOneClearLine) {
  const std::vector<BadCall> calls = {
      {"op nosuchop", "unknown operator 'nosuchop'"},
      {"op conv2d --param stride=0", "attribute 'stride'"},
      {"op conv2d --param stride", "--param expects K=V"},
      {"op conv2d --param nosuch=1", "attribute 'nosuch'"},
      {"op conv2d --param kernel=x", "expected an integer"},
      {"op --workload nosuch", "unknown workload 'nosuch'"},
      {"op", "give an operator NAME or --workload"},
      {"op dense --workload gemm-256", "give an operator NAME or --workload"},
      {"op --workload gemm-256 --param M=3", "--param cannot be combined"},
      {"op dense --emit wasm", "--emit"},
      {"op dense --emit asm --target interpreter",
       "--emit asm prints the llvm target's code; this is --target interpreter"},
      {"op dense --emit cuda --target llvm", "--emit cuda prints the cuda target's code; this is --target llvm"},
      {"op dense --seed x", "--seed"},
      {"op dense --target tpu", "--target"},
      {"op dense --precision fp64", "unknown precision 'fp64' (f32 or bf16; on cuda also tf32 or fp16)"},
      {"op dense --precision fp16", "precision 'fp16' is not available on the CPU (--target llvm): f32 or bf16"},
      {"op dense --precision tf32", "precision 'tf32' is not available on the CPU"},
      {"tune-op dense --strategy random --records /tmp/basin_cli_unused.db --trials 1 --precision fp16",
       "precision 'fp16' is not available on the CPU"},
      {"compile zoo:resnet18 --records /tmp/basin_cli_unused.db -o /tmp/basin_cli_unused.basin --precision tf32",
       "precision 'tf32' is not available on the CPU"},
      {"op dense --target cuda --precision fp8", "unknown precision 'fp8'"},
      {"tune-op dense --strategy random --records /tmp/basin_cli_unused.db --trials 1 --precision bf17",
       "unknown precision 'bf17'"},
      {"op dense --oracle sometimes", "--oracle"},
      {"op dense --config /nonexistent/cfg.json", "/nonexistent/cfg.json"},
      {"op dense --config " + std::string(BASIN_BINARY_DIR) + "/CMakeCache.txt", "not valid JSON"},
      {"nosuchcommand", "nosuchcommand"},
      {"estimator train --records /nonexistent/r.db", "/nonexistent/r.db does not exist"},
      {"estimator eval --records /nonexistent/r.db", "/nonexistent/r.db does not exist"},
      {"records export --records /nonexistent/r.db", "/nonexistent/r.db does not exist"},
      {"records merge --into /tmp/basin_cli_unused.db /nonexistent/r.db", "/nonexistent/r.db does not exist"},
      {"records merge /tmp/x.db", "--into is required"},
      {"records relabel --records /nonexistent/r.db --from a --to b", "/nonexistent/r.db does not exist"},
      {"records relabel --records /tmp/x.db --from a", "--to is required"},
      {"records describe --records /nonexistent/r.db", "/nonexistent/r.db does not exist"},
      {"records describe", "--records is required"},
      {"estimator dataset --records /tmp/basin_cli_unused.db --tasks nosuch-workload",
       "unknown workload 'nosuch-workload'"},
      {"estimator dataset --records /tmp/basin_cli_unused.db --per-task 0", "--per-task must be at least 1"},
      {"estimator dataset --records /tmp/basin_cli_unused.db --repeat -1", "--repeat must be 0 or more"},
      {"estimator dataset --records /tmp/basin_cli_unused.db --max-instructions -1", "--max-instructions"},
      {"estimator dataset --records /tmp/basin_cli_unused.db --compile-threads 0", "--compile-threads"},
      {"estimator dataset --records /tmp/basin_cli_unused.db --target tpu", "--target"},
      {"estimator dataset --records " + std::string(BASIN_BINARY_DIR) + "/CMakeCache.txt", "CMakeCache.txt"},
      {"estimator", "A subcommand is required"},
      {"estimator calibrate --estimator gbt", "--estimator"},
      {"estimator calibrate --budget 0", "is not a positive duration"},
      {"estimator calibrate --budget soon", "soon"},
      {"estimator calibrate --epochs 0", "--epochs must be at least 1"},
  };
  for (const BadCall& c : calls) {
    Result r = run(c.args);
    EXPECT_NE(r.code, 0) << c.args;
    EXPECT_LT(r.code, 128) << c.args << " crashed";
    std::string err = stderr_of(c.args);
    EXPECT_NE(err.find(c.message), std::string::npos) << c.args << " said: " << err;
  }
}

}  // namespace
