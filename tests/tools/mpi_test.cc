// `mpirun -n K basin tune-op / tune` on this machine (K of 2 and 3, one thread each,
// --oversubscribe): the records of a shared run hold exactly the trials asked for, no
// program twice, every rank's share; a run resumes from a shared run's file; a killed
// worker rank is survived and named; rank 0's death leaves a file a rerun resumes
// from; a single rank is a run of its own; a run several ranks cannot share is one
// clear error. Skipped where basin was built without MPI or mpirun is missing.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "records/records.h"
#include "tests/tools/run_basin.h"

namespace {

namespace fs = std::filesystem;
using basin::testing::capture;
using basin::testing::Result;

const char* kTask = "dense --param M=64 --param K=64 --param N=64";

class Mpi : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!BASIN_HAVE_MPI) GTEST_SKIP() << "basin was built without MPI (BASIN_WITH_MPI, libopenmpi-dev)";
    if (capture("command -v mpirun >/dev/null 2>&1").code != 0) GTEST_SKIP() << "no mpirun (openmpi-bin)";
    dir = (fs::temp_directory_path() / ("basin_mpi_" + std::to_string(getpid()))).string();
    fs::create_directories(dir);
    // Open MPI refuses root unless told; CI runs as root.
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    // Each rank a one-thread machine, as the scaling figure's.
    setenv("BASIN_NUM_THREADS", "1", 1);
    unsetenv("BASIN_MPI_TEST_KILL");
  }
  void TearDown() override {
    if (!dir.empty()) fs::remove_all(dir);
  }
  // `mpirun -n K [FLAGS] basin ARGS`, stderr into `err` (stdout returned), bounded in
  // time: a run that hangs fails its test instead of the suite.
  Result mpirun(int k, const std::string& args, const std::string& flags = "") {
    const std::string cmd = "timeout -k 10 180 mpirun --oversubscribe " + flags +
                            " -x BASIN_NUM_THREADS -x BASIN_CACHE_DIR -x BASIN_MPI_TEST_KILL -n " + std::to_string(k) +
                            " " + basin::testing::basin_path() + " " + args + " 2>" + dir + "/err";
    Result r = capture(cmd);
    err = basin::testing::read_file(dir + "/err");
    return r;
  }
  // The file's records: how many, and how many distinct programs (task and configuration).
  std::pair<int64_t, size_t> counts(const std::string& db) {
    basin::search::RecordStore s(db, basin::search::RecordStore::ReadOnly::Yes);
    std::set<std::string> programs;
    for (const basin::search::Record& r : s.all()) programs.insert(r.task_key + "\n" + r.config);
    return {s.count(), programs.size()};
  }
  std::string dir, err;
};

// The ranks' shares in a run's JSON: each rank's programs, every worker measured some
// (rank 0 too when `rank0` is set: in a network's short first rounds its time goes to the
// contests), and they add up to the run's.
void expect_shares(const nlohmann::json& ranks, int k, int measured, bool rank0 = true) {
  ASSERT_TRUE(ranks.is_array()) << ranks;
  ASSERT_EQ(ranks.size(), static_cast<size_t>(k));
  int sum = 0;
  for (const nlohmann::json& r : ranks) {
    if (rank0 || r["rank"] != 0) {
      EXPECT_GT(r["measured"].get<int>(), 0) << ranks;
    }
    EXPECT_GE(r["busy_seconds"].get<double>(), 0) << ranks;
    EXPECT_FALSE(r["host"].get<std::string>().empty());
    sum += r["measured"].get<int>();
  }
  EXPECT_EQ(sum, measured) << ranks;
}

TEST_F(Mpi, TwoRanksShareAnOperatorsTrials) {
  const std::string db = dir + "/op.db";
  Result r = mpirun(2, std::string("tune-op ") + kTask +
                           " --strategy gradient --trials 40 --compile-threads 1 --json --records " + db);
  ASSERT_EQ(r.code, 0) << err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["trials"], 40);
  EXPECT_GT(j["best_latency_us"].get<double>(), 0);
  expect_shares(j["ranks"], 2, 40);
  EXPECT_EQ(counts(db), std::make_pair(int64_t{40}, size_t{40}));
  EXPECT_NE(err.find("tuning on 2 ranks"), std::string::npos) << err;
}

TEST_F(Mpi, ThreeRanksTuneANetworkAndTheFileResumes) {
  const std::string db = dir + "/net.db";
  const std::string args = "tune zoo:resnet18 --no-calibrate --compile-threads 1 --json --quiet --records " + db;
  Result r = mpirun(3, args + " --trials 45");
  ASSERT_TRUE(r.code == 0 || r.code == 4) << err;  // 4: tasks left without a program
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["trials"], 45);
  expect_shares(j["ranks"], 3, 45, false);
  EXPECT_EQ(counts(db), std::make_pair(int64_t{45}, size_t{45}));
  // Resumed on two ranks: the 45 count, none is measured again.
  r = mpirun(2, args + " --trials 70");
  ASSERT_TRUE(r.code == 0 || r.code == 4) << err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["resumed"], 45);
  EXPECT_EQ(j["trials"], 70);
  expect_shares(j["ranks"], 2, 25, false);
  EXPECT_EQ(counts(db), std::make_pair(int64_t{70}, size_t{70}));
}

TEST_F(Mpi, AKilledRankIsSurvivedAndNamed) {
  const std::string db = dir + "/kill.db";
  setenv("BASIN_MPI_TEST_KILL", "1:3", 1);  // rank 1: SIGKILL after its third program
  Result r = mpirun(3,
                    std::string("tune-op ") + kTask +
                        " --strategy gradient --trials 40 --compile-threads 1 --json --quiet --records " + db,
                    "--enable-recovery");
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["trials"], 40);
  ASSERT_EQ(j["ranks"].size(), 3u);
  EXPECT_TRUE(j["ranks"][1]["lost"].get<bool>());
  EXPECT_EQ(j["ranks"][1]["measured"], 3);
  EXPECT_FALSE(j["ranks"][2]["lost"].get<bool>());
  EXPECT_NE(err.find("rank 1 ("), std::string::npos) << err;
  EXPECT_NE(err.find("is lost"), std::string::npos) << err;
  EXPECT_NE(err.find("was lost during the run"), std::string::npos) << err;
  // The survivors end without waiting on the dead rank in MPI_Finalize (which can wait
  // forever): mpirun returns, not `timeout`.
  EXPECT_EQ(r.code, 0) << err;
  // Its unfinished programs were measured by the others: the trials asked for, none twice.
  EXPECT_EQ(counts(db), std::make_pair(int64_t{40}, size_t{40}));
}

TEST_F(Mpi, RankZerosDeathLeavesAFileARerunResumes) {
  const std::string db = dir + "/zero.db";
  const std::string args = std::string("tune-op ") + kTask +
                           " --strategy gradient --trials 40 --compile-threads 1 --json --quiet --records " + db;
  setenv("BASIN_MPI_TEST_KILL", "0:6", 1);  // rank 0: SIGKILL after six programs of rank 1
  Result r = mpirun(2, args);
  EXPECT_NE(r.code, 0) << "mpirun ends the run when rank 0 dies";
  const auto [kept, distinct] = counts(db);
  EXPECT_GE(kept, 6);
  EXPECT_LT(kept, 40);
  EXPECT_EQ(static_cast<size_t>(kept), distinct);
  // A rerun on one rank resumes: what the file holds counts, nothing is measured twice.
  unsetenv("BASIN_MPI_TEST_KILL");
  r = basin::testing::run_basin(args);
  ASSERT_EQ(r.code, 0);
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["resumed"], kept);
  EXPECT_EQ(j["trials"], 40);
  EXPECT_EQ(counts(db), std::make_pair(int64_t{40}, size_t{40}));
}

TEST_F(Mpi, OneRankIsARunOfItsOwn) {
  const std::string db = dir + "/one.db";
  Result r = mpirun(
      1, std::string("tune-op ") + kTask + " --strategy random --trials 12 --compile-threads 1 --json --records " + db);
  ASSERT_EQ(r.code, 0) << err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j.contains("ranks"));
  EXPECT_EQ(err.find("ranks"), std::string::npos) << err;
  EXPECT_EQ(counts(db), std::make_pair(int64_t{12}, size_t{12}));
}

TEST_F(Mpi, AnInterleavedRunIsOneClearError) {
  Result r = mpirun(
      2, std::string("tune-op ") + kTask + " --strategy gradient,random --trials 8 --quiet --records " + dir + "/x.db");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(err.find("basin: error: a run on several ranks tunes with one strategy"), std::string::npos) << err;
}

}  // namespace
