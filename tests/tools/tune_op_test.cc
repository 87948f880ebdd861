// `basin tune-op` as a user runs it: killed with SIGKILL mid-run and restarted on the
// same records file, it continues where it stopped and measures no program twice;
// --json carries the keys scripts rely on; every user error fails with one clear line.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "core/util/host.h"
#include "models/estimator.h"
#include "records/records.h"
#include "tests/tools/run_basin.h"

namespace {

const std::string kBasin = basin::testing::basin_path();
const char* kTask = "matmul --param M=64 --param N=64 --param K=64";

using basin::testing::Result;

Result run(const std::string& args, bool keep_stderr = false) { return basin::testing::run_basin(args, keep_stderr); }

std::string temp_db(const char* name) {
  std::string p = "/tmp/basin_tune_op_" + std::string(name) + "_" + std::to_string(::getpid()) + ".db";
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((p + suffix).c_str());
  return p;
}

int64_t records_in(const std::string& db) {
  if (!std::filesystem::exists(db)) return 0;
  try {
    return basin::search::RecordStore(db).count();
  } catch (const std::exception&) {
    return 0;  // still being created by the tuner
  }
}

TEST(TuneOp, ResumesAfterSigkillWithoutMeasuringTwice) {
  const std::string db = temp_db("resume");
  const std::string args = std::string(kTask) + " --strategy gradient --trials 30 --batch 4 --seed 3 --records " + db;
  const std::string log = db + ".log";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    freopen(log.c_str(), "w", stderr);
    freopen("/dev/null", "w", stdout);
    execl("/bin/sh", "sh", "-c", ("exec " + kBasin + " tune-op " + args).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Kill it once it has recorded a few programs, mid-round; a tuner that stops by
  // itself first fails the test at once, with what it printed.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  int status = 0;
  bool exited = false;
  while (records_in(db) < 6 && std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  ASSERT_TRUE(WIFSIGNALED(status)) << "the tuner stopped by itself (exit " << WEXITSTATUS(status) << ") with "
                                   << records_in(db) << " records:\n"
                                   << basin::testing::read_file(log);
  std::remove(log.c_str());
  const int64_t before = records_in(db);
  ASSERT_GE(before, 6);
  ASSERT_LT(before, 30);

  Result r = run("tune-op " + args + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["trials"], 30);
  EXPECT_EQ(j["resumed"], before);
  EXPECT_EQ(j["measured"], 30 - before);
  EXPECT_EQ(j["other_host_records"], 0);
  EXPECT_EQ(j["other_codegen_records"], 0);
  basin::search::RecordStore store(db);
  std::set<std::string> programs;
  for (const basin::search::Record& rec : store.all())
    EXPECT_TRUE(programs.insert(rec.sketch + rec.config).second) << "measured twice: " << rec.config;
  EXPECT_EQ(programs.size(), 30u);

  // Done already: a third run measures nothing.
  Result again = run("tune-op " + args + " --json");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(nlohmann::json::parse(again.out)["measured"], 0);
  EXPECT_EQ(store.count(), 30);
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db + suffix).c_str());
}

// Programs held to narrower vector instructions (BASIN_VECTOR_ISA) are another
// machine's: their records name the set, and a run without the setting on the same file
// starts from nothing, as on another machine.
TEST(TuneOp, ProgramsHeldToNarrowerVectorsAreAnotherMachinesRecords) {
  const std::string isa = basin::cpu_vector_isa();
  const std::string narrower = isa == "avx512" ? "avx2" : isa == "avx2" ? "sse" : "";
  if (narrower.empty()) GTEST_SKIP() << "no narrower vector instructions than " << isa;
  const std::string db = temp_db("isa");
  const std::string args = " tune-op " + std::string(kTask) + " --strategy random --trials 4 --json --records " + db;
  Result held = basin::testing::capture("BASIN_VECTOR_ISA=" + narrower + " " + kBasin + args + " 2>/dev/null");
  ASSERT_EQ(held.code, 0) << held.out;
  for (const basin::search::Record& rec : basin::search::RecordStore(db).all()) {
    const std::string tail = ", " + narrower;
    ASSERT_GE(rec.host.size(), tail.size());
    EXPECT_EQ(rec.host.substr(rec.host.size() - tail.size()), tail) << rec.host;
  }
  Result own = run(args);
  ASSERT_EQ(own.code, 0) << own.out;
  auto j = nlohmann::json::parse(own.out);
  EXPECT_EQ(j["other_host_records"], 4);
  EXPECT_EQ(j["measured"], 4);
  EXPECT_EQ(basin::search::RecordStore(db).count(), 8);
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db + suffix).c_str());
}

TEST(TuneOp, JsonReportsTheRunAndThePeer) {
  const std::string db = temp_db("json");
  Result r = run("tune-op " + std::string(kTask) +
                 " --strategy annealing --trials 12 --batch 6 --compile-threads 2 --compare --json --records " + db);
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  for (const char* key :
       {"best_latency_us", "trials", "search_seconds", "curve", "overhead_fraction", "torch_latency_us",
        "final_latency_us", "speedup_vs_torch", "best_config", "estimator", "brief"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["trials"], 12);
  // Every round's programs compiled ahead on two threads, and the contests' measurements.
  EXPECT_GE(j["measured_ahead"].get<int>(), 12 + j["confirmations"].get<int>());
  EXPECT_EQ(j["estimator"], "gbt");
  EXPECT_GT(j["best_latency_us"].get<double>(), 0);
  EXPECT_GT(j["torch_latency_us"].get<double>(), 0);
  double overhead = j["overhead_fraction"].get<double>();
  EXPECT_GT(overhead, 0);
  EXPECT_LT(overhead, 1);
  // A point per program, one per round (2 rounds) after its confirmations, and one
  // after the fastest programs were measured again at the end (settled).
  ASSERT_EQ(j["curve"].size(), 15u + j["settled"].get<bool>());
  EXPECT_EQ(j["curve"].back()[1], 12);
  EXPECT_DOUBLE_EQ(j["curve"].back()[2].get<double>(), j["best_latency_us"].get<double>());
  EXPECT_GT(j["confirmations"].get<int>(), 0);  // the first round's fastest, at least
  // The first round's best in the second round (twice beside challengers), and up to
  // 3 programs twice at the end.
  EXPECT_GE(j["best_remeasurements"].get<int>(), 1 + 2 * 2 * j["settled"].get<bool>());
  EXPECT_LE(j["best_remeasurements"].get<int>(), 2 + 3 * 2);
  // The programs that were the best, in order; the last is the best.
  ASSERT_TRUE(j["bests"].is_array());
  ASSERT_FALSE(j["bests"].empty());
  EXPECT_EQ(j["bests"].back()["config"], j["best_config"]);
  EXPECT_GT(j["bests"][0]["trials"].get<int>(), 0);
  EXPECT_GT(j["bests"][0]["latency_us"].get<double>(), 0);
  // One line per round on stderr.
  Result log = run("tune-op " + std::string(kTask) + " --strategy random --trials 15 --batch 5 --records " + db, true);
  ASSERT_EQ(log.code, 0) << log.out;
  size_t rounds = 0;
  for (size_t at = log.out.find("round "); at != std::string::npos; at = log.out.find("round ", at + 1)) ++rounds;
  EXPECT_EQ(rounds, 1u) << log.out;  // 12 programs were there already: one round of 3
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db + suffix).c_str());
}

// The gradient search's default estimator is the shipped ensemble: it descends on the
// ensemble's MLP, ranks with both parts and updates both (rounds added to the shipped
// trees).
TEST(TuneOp, GradientSearchRunsOnTheShippedEnsembleByDefault) {
  const std::string db = temp_db("ensemble");
  Result r = run("tune-op " + std::string(kTask) + " --strategy gradient --trials 12 --batch 6 --json --records " + db);
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["estimator"], "ensemble");
  // The file it loaded: the shipped ensemble.
  EXPECT_EQ(j["estimator_file"], basin::models::pretrained_cpu_path("cpu_ensemble.bin"));
  EXPECT_NE(j["estimator_file"].get<std::string>().find("models/weights/cpu_ensemble.bin"), std::string::npos);
  EXPECT_EQ(j["trials"], 12);
  EXPECT_GT(j["best_latency_us"].get<double>(), 0);
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db + suffix).c_str());
}

// Several strategies at once: a round of each in turn, each with its own records file
// (the strategy's name before the extension), one JSON object with a run per strategy,
// each best timed again beside LibTorch.
TEST(TuneOp, SeveralStrategiesTakeTurnsEachWithItsOwnRecords) {
  const std::string db = temp_db("turns");
  const std::string base = db.substr(0, db.size() - 3);
  Result r = run("tune-op " + std::string(kTask) +
                 " --strategy random,annealing --trials 8 --batch 4 --compare --json --records " + db);
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["interleaved"], true);
  ASSERT_EQ(j["runs"].size(), 2u);
  const char* names[] = {"random", "annealing"};
  for (size_t i = 0; i < 2; ++i) {
    const auto& run = j["runs"][i];
    EXPECT_EQ(run["strategy"], names[i]);
    EXPECT_EQ(run["records"], base + "." + names[i] + ".db");
    EXPECT_EQ(run["trials"], 8);
    EXPECT_EQ(records_in(base + "." + names[i] + ".db"), 8);
    for (const char* key : {"best_latency_us", "search_seconds", "curve", "final_latency_us", "torch_latency_us"})
      EXPECT_TRUE(run.contains(key)) << names[i] << " " << key;
  }
  EXPECT_EQ(j["runs"][0]["estimator"], "none");
  EXPECT_EQ(j["runs"][1]["estimator"], "gbt");
  EXPECT_EQ(j["runs"][0]["torch_latency_us"], j["runs"][1]["torch_latency_us"]);  // one peer, timed once
  EXPECT_FALSE(std::filesystem::exists(db));                                      // the named file is not written
  // Run again: each resumes from its own file and measures nothing.
  Result again =
      run("tune-op " + std::string(kTask) + " --strategy random,annealing --trials 8 --json --records " + db);
  ASSERT_EQ(again.code, 0) << again.out;
  auto k = nlohmann::json::parse(again.out);
  for (const auto& run : k["runs"]) {
    EXPECT_EQ(run["resumed"], 8);
    EXPECT_EQ(run["measured"], 0);
  }
  for (const std::string& f : {db, base + ".random.db", base + ".annealing.db"})
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((f + suffix).c_str());
}

// Two variants of one strategy side by side (an A/B run): each is named by its spec,
// in the JSON and the log and in its records file's name, and each ran with its options.
TEST(TuneOp, VariantsOfOneStrategyTakeTurns) {
  const std::string db = temp_db("variants");
  const std::string base = db.substr(0, db.size() - 3);
  const std::string b = "annealing:plan_size=4:epsilon=1";
  Result r = run("tune-op " + std::string(kTask) + " --strategy annealing," + b +
                 " --trials 8 --batch 4 --json --records " + db);
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][0]["strategy"], "annealing");
  EXPECT_EQ(j["runs"][1]["strategy"], b);
  EXPECT_EQ(j["runs"][1]["records"], base + "." + b + ".db");
  EXPECT_EQ(records_in(base + ".annealing.db"), 8);
  EXPECT_EQ(records_in(base + "." + b + ".db"), 8);
  for (const std::string& f : {db, base + ".annealing.db", base + "." + b + ".db"})
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((f + suffix).c_str());
}

TEST(TuneOp, UserErrorsFailWithOneClearLine) {
  const std::string db = temp_db("errors");
  const std::string corrupt = db + ".corrupt";
  {
    FILE* f = std::fopen(corrupt.c_str(), "w");
    std::fputs("this is not a database, it is a text file of some length to look like one\n", f);
    std::fclose(f);
  }
  struct Bad {
    std::string args, message;
  };
  const std::string t = std::string(kTask) + " --records " + db;
  const std::vector<Bad> calls = {
      {"tune-op " + t + " --trials 10", "--strategy is required"},
      {"tune-op " + t + " --strategy hillclimb --trials 10", "--strategy"},
      {"tune-op " + t + " --strategy random,hillclimb --trials 10", "unknown search strategy 'hillclimb'"},
      {"tune-op " + t + " --strategy gradient:tile_slot=1 --trials 10", "has no option 'tile_slot'"},
      {"tune-op " + t + " --strategy annealing:epsilon=2 --trials 10", "must be a number from 0 to 1, not '2'"},
      {"tune-op " + t + " --strategy annealing:chains=8.5 --trials 10", "must be an integer"},
      {"tune-op " + t + " --strategy annealing:chains=8:chains=9 --trials 10", "set twice"},
      {"tune-op " + t + " --strategy annealing:chains --trials 10", "is not KEY=VALUE"},
      {"tune-op " + t + " --strategy random:chains=8 --trials 10", "takes none"},
      {"tune-op " + t + " --strategy random,random --trials 10", "--strategy names random twice"},
      {"tune-op " + t + " --strategy gradient,annealing --trials 10 --estimator mlp",
       "--estimator names one estimator"},
      {"tune-op " + t + " --strategy random", "give one budget"},
      {"tune-op " + t + " --strategy random --trials 10 --budget 5m", "give one budget"},
      {"tune-op " + t + " --strategy random --budget soon", "not a duration"},
      {"tune-op " + t + " --strategy random --budget -5s", "not a positive duration"},
      {"tune-op " + t + " --strategy random --trials 10 --batch 0", "--batch must be positive"},
      {"tune-op " + t + " --strategy random --budget 20s --batch 200000", "at most 1024"},
      // A seed out of range is refused, never clamped (2^64, negative, not a number).
      {"tune-op " + t + " --strategy random --trials 10 --seed 18446744073709551616", "--seed"},
      {"tune-op " + t + " --strategy random --trials 10 --seed -1", "--seed"},
      {"tune-op " + t + " --strategy random --trials 10 --seed 1e3", "--seed"},
      {"tune-op " + t + " --strategy random --trials 10 --confirm -1", "--confirm must be 0 to 50"},
      {"tune-op " + t + " --strategy random --trials 10 --confirm 1000000", "--confirm must be 0 to 50"},
      {"tune-op " + t + " --strategy random --trials 10 --compile-threads 0", "--compile-threads"},
      {"tune-op " + t + " --strategy random --trials 10 --max-instructions -5", "--max-instructions"},
      {"tune-op " + t + " --strategy random --trials 10 --max-instructions many", "--max-instructions"},
      {"tune-op " + t + " --strategy random --trials 10 --slow-factor 0.5", "--slow-factor: 0 (off) or 1 to 1e6"},
      {"tune-op " + t + " --strategy random --trials 10 --slow-factor 1e308", "--slow-factor: 0 (off) or 1 to 1e6"},
      {"tune-op " + t + " --strategy random --trials 10 --slow-factor fast", "--slow-factor: not a number"},
      {"tune-op " + t + " --strategy gradient --trials 10 --estimator gbt", "needs a differentiable estimator"},
      {"tune-op " + t + " --strategy annealing --trials 10 --estimator /nonexistent/e.pt", "/nonexistent/e.pt"},
      {"tune-op " + t + " --strategy random --trials 10 --target opencl", "--target"},
      {"tune-op " + t + " --strategy random --trials 10 --target cuda --compare", "bench/gpu_ops.py"},
      {"tune-op --workload nosuch --strategy random --trials 10 --records " + db, "unknown workload 'nosuch'"},
      {"tune-op " + std::string(kTask) + " --strategy random --trials 10", "--records is required"},
      {"tune-op " + std::string(kTask) + " --strategy random --trials 10 --records " + corrupt, corrupt},
  };
  for (const Bad& c : calls) {
    Result r = run(c.args, true);
    EXPECT_NE(r.code, 0) << c.args;
    EXPECT_LT(r.code, 128) << c.args << " crashed";
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << " said: " << r.out;
  }
  EXPECT_EQ(records_in(db), 0);
  // Without a GPU the cuda target says so in one line (with one, it tunes).
  Result g = run("tune-op " + t + " --strategy random --trials 4 --target cuda", true);
  if (g.code != 0) {
    EXPECT_NE(g.out.find("basin: error: the cuda target is unavailable"), std::string::npos) << g.out;
    EXPECT_EQ(std::count(g.out.begin(), g.out.end(), '\n'), 1) << g.out;
  }
  std::remove(corrupt.c_str());
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db + suffix).c_str());
}

// bench/search.py, the search benchmark, end to end on a small budget: both strategies'
// runs in results.json and the table. With the peers' environment (bench/peers/setup.sh)
// it runs TVM MetaSchedule beside them; without it that part says why and is skipped.
TEST(BenchSearch, RunsTheStrategiesAndTheirPeer) {
  const std::string out = "/tmp/basin_bench_search_" + std::to_string(::getpid());
  std::filesystem::remove_all(out);
  const std::string peer_python = std::string(BASIN_SOURCE_DIR) + "/.cache/peers/bin/python";
  const bool with_peer =
      basin::testing::capture(peer_python + " -c 'import tvm.s_tir.meta_schedule' 2>/dev/null").code == 0;
  const std::string cmd = "/usr/bin/python3 " + std::string(BASIN_SOURCE_DIR) + "/bench/search.py --basin " + kBasin +
                          " --workloads gemm-256 --strategies annealing,gradient --seeds 1 --trials 6 --retime 0"
                          " --threads 1 --interleave --out " +
                          out + (with_peer ? " --peer metaschedule" : "") + " 2>&1";
  Result r = basin::testing::capture(cmd);
  ASSERT_EQ(r.code, 0) << r.out;
  auto results = nlohmann::json::parse(basin::testing::read_file(out + "/results.json"));
  std::set<std::string> strategies;
  for (const auto& run : results["runs"]) {
    strategies.insert(run["strategy"].get<std::string>());
    EXPECT_GE(run["trials"].get<int>(), 1);
    EXPECT_GT(run["best_latency_us"].get<double>(), 0);
  }
  std::set<std::string> want = {"annealing", "gradient"};
  if (with_peer) want.insert("metaschedule");
  EXPECT_EQ(strategies, want);
  const std::string table = basin::testing::read_file(out + "/table.md");
  EXPECT_NE(table.find("| gemm-256 | 1 | gradient |"), std::string::npos) << table;
  EXPECT_EQ(table.find("Against TVM MetaSchedule") != std::string::npos, with_peer) << table;
  std::filesystem::remove_all(out);
  if (!with_peer)
    GTEST_SKIP() << "MetaSchedule's part skipped: no apache-tvm in " << peer_python
                 << " (bench/peers/setup.sh installs it)";
}

// The table's comparison with the peer, from a results file: who reached whose best, when.
TEST(BenchSearch, TheTableSaysWhoReachedWhoseBest) {
  const std::string out = "/tmp/basin_bench_search_from_" + std::to_string(::getpid());
  std::filesystem::create_directories(out);
  nlohmann::json run = {{"workload", "gemm-256"},
                        {"seed", 1},
                        {"trials", 5},
                        {"search_seconds", 2.0},
                        {"overhead_fraction", 0.05},
                        {"final_latency_us", 52.0},
                        {"torch_latency_us", 60.0}};
  nlohmann::json ann = run, grad = run, ms = run;
  ann["strategy"] = "annealing";
  ann["best_latency_us"] = 70.0;
  ann["curve"] = {{1.0, 1, 90.0}, {2.0, 5, 70.0}};
  grad["strategy"] = "gradient";
  grad["best_latency_us"] = 50.0;
  grad["curve"] = {{1.0, 1, 100.0}, {2.0, 5, 50.0}};
  ms = {{"workload", "gemm-256"},
        {"seed", 1},
        {"strategy", "metaschedule"},
        {"peer", true},
        {"trials", 64},
        {"search_seconds", 20.0},
        {"best_latency_us", 60.0},
        {"final_latency_us", 61.0},
        {"tvm", "0.27"},
        {"curve", {{10.0, 1, 80.0}, {20.0, 64, 60.0}}}};
  nlohmann::json results = {{"machine", {{"cpu", "test"}, {"cores", 2}, {"isa", "avx2"}, {"threads", 1}}},
                            {"trials", 5},
                            {"interleaved", true},
                            {"runs", {ann, grad, ms}}};
  std::ofstream(out + "/in.json") << results.dump();
  Result r = basin::testing::capture("/usr/bin/python3 " + std::string(BASIN_SOURCE_DIR) + "/bench/search.py --from " +
                                     out + "/in.json --out " + out + " 2>&1");
  ASSERT_EQ(r.code, 0) << r.out;
  // The gradient search reached MetaSchedule's 60 us at its 5th trial, 2 s; MetaSchedule
  // never reached its 50 us; MetaSchedule reached annealing's 70 us at its 64th trial, 20 s.
  EXPECT_NE(r.out.find("| gemm-256 | 1 | gradient | 50.0 | 5 | 2 | 52.0 | 5, 2 | not reached |"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("| gemm-256 | 1 | annealing | 70.0 | 5 | 2 | 52.0 | not reached | 64, 20 |"), std::string::npos)
      << r.out;
  // The peer is not one of basin's strategies in the tables against annealing.
  EXPECT_EQ(r.out.find("| gemm-256 | 1 | metaschedule | 60.0 | 64 |"), std::string::npos) << r.out;
  std::filesystem::remove_all(out);
}

TEST(BenchSearch, APeerThatCannotRunIsOneClearError) {
  Result r = basin::testing::capture("/usr/bin/python3 " + std::string(BASIN_SOURCE_DIR) +
                                     "/bench/search.py --workloads gemm-256 --peer metaschedule --peer-python "
                                     "/nonexistent/python --out /tmp/basin_bench_search_never 2>&1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("no peers' Python at /nonexistent/python"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists("/tmp/basin_bench_search_never"));
}

}  // namespace
