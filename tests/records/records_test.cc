// The records store: rows round-trip, the best record is the fastest successful one,
// records added by a process killed with SIGKILL are all there, two handles share one
// file, and a file that is not a records database is a clear error naming it.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <sqlite3.h>

#include "codegen/version.h"
#include "core/util/error.h"
#include "core/util/hardware.h"
#include "core/util/host.h"
#include "records/records.h"

namespace basin {
namespace {

std::string temp_path(const std::string& name) {
  std::string p = ::testing::TempDir() + "/basin_" + name + "_" + std::to_string(getpid()) + ".db";
  std::remove(p.c_str());
  std::remove((p + "-wal").c_str());
  std::remove((p + "-shm").c_str());
  return p;
}

search::Record rec(const std::string& cfg, std::vector<double> lat, std::string err = "") {
  search::Record r;
  r.task_key = "dense(K=32,M=16,N=32)";
  r.target = "llvm";
  r.sketch = "tile.vec=j.acc2";
  r.config = cfg;
  r.latencies_us = std::move(lat);
  r.error = std::move(err);
  r.seed = 7;
  return r;
}

TEST(Records, RoundTripAndBest) {
  std::string path = temp_path("roundtrip");
  {
    search::RecordStore s(path);
    s.add(rec("{\"a\":1}", {30, 20, 25}));
    s.add(rec("{\"a\":2}", {10, 12, 11}));
    s.add(rec("{\"a\":3}", {}, "the worker died: signal 11"));
    s.add(rec("{\"a\":4}", {15}));
  }
  search::RecordStore s(path);
  EXPECT_EQ(s.count(), 4);
  auto all = s.task_records("dense(K=32,M=16,N=32)", "llvm");
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].latencies_us, (std::vector<double>{30, 20, 25}));
  EXPECT_EQ(all[2].error, "the worker died: signal 11");
  EXPECT_EQ(all[0].seed, 7u);
  auto best = s.best("dense(K=32,M=16,N=32)", "llvm");
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->config, "{\"a\":2}");
  EXPECT_TRUE(s.contains("dense(K=32,M=16,N=32)", "llvm", "tile.vec=j.acc2", "{\"a\":3}"));
  EXPECT_FALSE(s.contains("dense(K=32,M=16,N=32)", "llvm", "tile.vec=j.acc2", "{\"a\":9}"));
  EXPECT_FALSE(s.best("other", "llvm").has_value());
}

TEST(Records, NothingAddedIsLostWhenTheProcessIsKilled) {
  std::string path = temp_path("killed");
  pid_t pid = fork();
  if (pid == 0) {
    search::RecordStore s(path);
    for (int i = 0; i < 50; ++i) s.add(rec("{\"i\":" + std::to_string(i) + "}", {double(i + 1)}));
    raise(SIGKILL);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  search::RecordStore s(path);
  EXPECT_EQ(s.count(), 50);
  EXPECT_EQ(s.best("dense(K=32,M=16,N=32)", "llvm")->config, "{\"i\":0}");
}

TEST(Records, TwoHandlesShareOneFile) {
  std::string path = temp_path("shared");
  search::RecordStore a(path), b(path);
  a.add(rec("{\"x\":1}", {5}));
  b.add(rec("{\"x\":2}", {4}));
  EXPECT_EQ(a.count(), 2);
  EXPECT_EQ(b.best("dense(K=32,M=16,N=32)", "llvm")->config, "{\"x\":2}");
}

// Two processes tuning one file measure each program once: a program another live
// process claimed, or one the file holds, cannot be claimed; the claim of a process
// that ended is void, and a record ends its claim.
TEST(Records, AProgramIsClaimedByOneProcessAtATime) {
  std::string path = temp_path("claims");
  const std::string task = "dense(K=32,M=16,N=32)", sk = "tile.vec=j.acc2", cfg = "{\"c\":1}";
  int ready[2], done[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(done), 0);
  pid_t pid = fork();
  if (pid == 0) {
    bool ok = false;
    {
      search::RecordStore s(path);
      ok = s.claim(task, "llvm", sk, cfg, "", "");
    }
    char c = ok ? '1' : '0';
    if (write(ready[1], &c, 1) != 1) _exit(2);
    if (read(done[0], &c, 1) != 1) _exit(2);  // alive until told
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, '1');
  search::RecordStore s(path);
  // (The child's store is closed, which voids its claims: claimed again by hand.)
  EXPECT_TRUE(s.claim(task, "llvm", sk, cfg, "", ""));
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const std::string sql = "UPDATE claims SET pid = " + std::to_string(pid);
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  EXPECT_FALSE(s.claim(task, "llvm", sk, cfg, "", ""));  // the child's, and it lives
  EXPECT_TRUE(s.claim(task, "llvm", sk, "{\"c\":2}", "", ""));
  ASSERT_EQ(write(done[1], "x", 1), 1);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(s.claim(task, "llvm", sk, cfg, "", ""));  // its process has ended
  search::Record r = rec(cfg, {5});
  s.add(r);
  EXPECT_FALSE(s.claim(task, "llvm", sk, cfg, "", ""));  // measured
  // Adding only what the file lacks, under one lock.
  EXPECT_EQ(s.add_new({rec(cfg, {6}), rec("{\"c\":3}", {7})}), 1);
  EXPECT_EQ(s.add_new({rec("{\"c\":3}", {7})}), 0);
  EXPECT_EQ(s.count(), 2);
}

// Regression: a tuner creating its records file while another process (`basin
// records`, a test polling the count) opens it failed at once with "database is
// locked": the open kept a read transaction (its schema-version query) while it wrote,
// and SQLite answers that deadlock without waiting. A second cause: converting the new
// file to WAL, for which SQLite runs no busy handler (it failed CI after the first fix;
// without the retry this test fails in every run). Many processes open one fresh file at
// once, each adds records; none fails and nothing is lost.
TEST(Records, ProcessesOpeningOneNewFileAtOnceAllSucceed) {
  for (int round = 0; round < 24; ++round) {
    std::string path = temp_path("race" + std::to_string(round));
    constexpr int kProcesses = 6, kEach = 5;
    int start[2];  // the children wait on it, so that their first opens coincide
    ASSERT_EQ(pipe(start), 0);
    std::vector<pid_t> children;
    for (int p = 0; p < kProcesses; ++p) {
      pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        close(start[1]);
        char byte;
        (void)!read(start[0], &byte, 1);  // returns when the parent closes its end
        int code = 0;
        try {
          for (int i = 0; i < kEach; ++i) {
            search::RecordStore s(path);  // a fresh open each time, as a poller does
            s.add(rec("{\"p\":" + std::to_string(p) + ",\"i\":" + std::to_string(i) + "}", {1.0 + i}));
            (void)s.count();
          }
        } catch (const std::exception& e) {
          std::fprintf(stderr, "process %d: %s\n", p, e.what());
          code = 1;
        }
        _exit(code);
      }
      children.push_back(pid);
    }
    close(start[0]);
    close(start[1]);
    for (pid_t pid : children) {
      int status = 0;
      waitpid(pid, &status, 0);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "round " << round;
    }
    EXPECT_EQ(search::RecordStore(path).count(), kProcesses * kEach) << "round " << round;
  }
}

TEST(Records, AFileThatIsNotARecordsDatabaseIsAClearError) {
  std::string path = temp_path("garbage");
  {
    std::ofstream f(path);
    f << "this is not an SQLite database, just text that is long enough to have a header......";
  }
  try {
    search::RecordStore s(path);
    FAIL() << "opened a text file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  try {
    search::RecordStore s("/nonexistent-dir/x.db");
    FAIL() << "opened a file in a missing directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.db"), std::string::npos) << e.what();
  }
}

// A database of other tables is refused before anything in it changes (no journal
// mode, schema or version of basin's written); SQLite's special names are refused; an
// empty file becomes a records file.
TEST(Records, ADatabaseOfOtherTablesIsLeftAsItIs) {
  const std::string path = temp_path("foreign");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(db, "CREATE TABLE notes(text TEXT); INSERT INTO notes VALUES('mine')", nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(db);
  std::ifstream in(path, std::ios::binary);
  const std::string before((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    search::RecordStore s(path);
    FAIL() << "opened a database of other tables";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a basin records database"), std::string::npos) << e.what();
  }
  std::ifstream again(path, std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>()), before);
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
  for (const std::string special : {"", ":memory:", "file:x.db?mode=memory"})
    EXPECT_THROW(search::RecordStore{special}, Error) << "'" << special << "'";
  const std::string empty = temp_path("empty");
  std::ofstream{empty};
  search::RecordStore s(empty);
  s.add(rec("{\"a\":1}", {5}));
  EXPECT_EQ(s.all().size(), 1u);
}

// A records file edited by another tool, its text columns NULL where basin writes ''
// (no NOT NULL constraint of basin's): every reader takes NULL as empty.
TEST(Records, NullTextColumnsReadAsEmpty) {
  const std::string path = temp_path("nulls");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const char* sql =
      "CREATE TABLE records (id INTEGER PRIMARY KEY AUTOINCREMENT, task_key TEXT, target TEXT, sketch TEXT, config "
      "TEXT, latencies_us TEXT, min_latency_us REAL, error TEXT, compile_seconds REAL, started_at REAL, finished_at "
      "REAL, seed INTEGER, estimator_version TEXT, host TEXT, confirm_us TEXT, latency_us REAL, best_seq INTEGER, "
      "codegen TEXT);"
      "CREATE TABLE machines (host TEXT, description TEXT);"
      "INSERT INTO records (task_key, target, sketch, config, latencies_us, min_latency_us, error, compile_seconds, "
      "started_at, finished_at, seed, estimator_version, host, confirm_us, latency_us, best_seq, codegen) VALUES "
      "('dense(K=32,M=16,N=32)', 'llvm', 's', '{}', '[5]', 5, NULL, 0, 0, 0, 1, NULL, NULL, '[]', 5, 0, NULL);"
      "INSERT INTO machines VALUES (NULL, NULL);"
      "PRAGMA user_version=5;";
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
  search::RecordStore s(path);
  auto all = s.all();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].host, "");
  EXPECT_EQ(all[0].error, "");
  EXPECT_EQ(s.hosts().at(""), 1);
  EXPECT_EQ(s.machines().count(""), 1u);
}

TEST(Records, EachRecordNamesItsMachineAndBestPrefersThisOne) {
  std::string path = temp_path("hosts");
  search::RecordStore s(path);
  search::Record here = rec("{\"h\":1}", {20});
  here.host = host_description();
  search::Record there = rec("{\"h\":2}", {5});  // a faster machine's latency
  there.host = "Other CPU, 64 cores, avx512";
  s.add(there);
  s.add(here);
  auto all = s.task_records("dense(K=32,M=16,N=32)", "llvm");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].host, "Other CPU, 64 cores, avx512");
  EXPECT_EQ(all[1].host, host_description());
  EXPECT_FALSE(all[0].from_host(host_description()));
  EXPECT_TRUE(all[1].from_host(host_description()));
  EXPECT_EQ(s.best("dense(K=32,M=16,N=32)", "llvm")->config, "{\"h\":1}") << "another machine's latency won";
  EXPECT_TRUE(s.contains("dense(K=32,M=16,N=32)", "llvm", "tile.vec=j.acc2", "{\"h\":2}"));
  EXPECT_FALSE(s.contains("dense(K=32,M=16,N=32)", "llvm", "tile.vec=j.acc2", "{\"h\":2}", host_description()));
  EXPECT_TRUE(s.contains("dense(K=32,M=16,N=32)", "llvm", "tile.vec=j.acc2", "{\"h\":1}", host_description()));
  // Only another machine's records: the best of them.
  search::Record other = rec("{\"h\":3}", {7});
  other.task_key = "dense(K=64,M=16,N=32)";
  other.host = "Other CPU, 64 cores, avx512";
  s.add(other);
  EXPECT_EQ(s.best("dense(K=64,M=16,N=32)", "llvm")->config, "{\"h\":3}");
  EXPECT_NE(host_description().find("core"), std::string::npos) << host_description();
}

// A GPU's latencies belong to the GPU: a cuda record names GPU 0
// (machine_description("cuda"); "" where none is known), and one that names this
// CPU (as an older basin's cuda records do) is not this GPU's, so an H100's
// latencies are never taken for an H200's when both are driven by one kind of CPU.
TEST(Records, CudaRecordsNameTheGpuNotTheCpu) {
  EXPECT_EQ(machine_description("llvm"), host_description());
  EXPECT_NE(machine_description("cuda"), host_description());
  search::Record cpu_named = rec("{\"h\":1}", {20});
  cpu_named.target = "cuda";
  cpu_named.codegen = codegen::codegen_version("cuda");
  cpu_named.host = host_description();
  EXPECT_FALSE(cpu_named.measured_here());
  search::Record gpu_named = cpu_named;
  gpu_named.host = machine_description("cuda");
  EXPECT_TRUE(gpu_named.measured_here());
  search::Record llvm = cpu_named;
  llvm.target = "llvm";
  llvm.codegen = codegen::codegen_version("llvm");
  EXPECT_TRUE(llvm.measured_here());
  // The store's best of a cuda task: this GPU's record first (or, where no GPU is
  // known, the record of an unknown machine), though the other GPU's is faster.
  std::string path = temp_path("gpu_hosts");
  search::RecordStore s(path);
  search::Record other_gpu = cpu_named;
  other_gpu.config = "{\"h\":2}";
  other_gpu.latencies_us = {5};
  other_gpu.host = "NVIDIA H100 80GB HBM3 (sm_90)";
  s.add(other_gpu);
  s.add(gpu_named);
  EXPECT_EQ(s.best("dense(K=32,M=16,N=32)", "cuda")->config, "{\"h\":1}");
  EXPECT_FALSE(s.contains("dense(K=32,M=16,N=32)", "cuda", "tile.vec=j.acc2", "{\"h\":2}", "NVIDIA H200 (sm_90)"));
  EXPECT_TRUE(
      s.contains("dense(K=32,M=16,N=32)", "cuda", "tile.vec=j.acc2", "{\"h\":2}", "NVIDIA H100 80GB HBM3 (sm_90)"));
}

// A latency belongs to the code as much as to the machine: a record names the code
// generation that was measured, and one of another generation (an older basin's) is
// neither this machine's best nor a program measured here; an unknown one (a record
// from before schema 5) counts as this generation's, as it did then.
TEST(Records, EachRecordNamesItsCodeGenerationAndBestPrefersThisOne) {
  const std::string now = codegen::codegen_version("llvm");
  EXPECT_NE(now, codegen::codegen_version("cuda"));
  std::string path = temp_path("codegen");
  search::RecordStore s(path);
  search::Record current = rec("{\"g\":1}", {20});
  current.host = host_description();
  current.codegen = now;
  search::Record stale = rec("{\"g\":2}", {5});  // faster, but code this basin no longer emits
  stale.host = host_description();
  stale.codegen = "llvm 0";
  search::Record unknown = rec("{\"g\":3}", {30});
  unknown.host = host_description();
  search::Record elsewhere = rec("{\"g\":4}", {1});  // this generation, another machine
  elsewhere.host = "Other CPU, 64 cores, avx512";
  elsewhere.codegen = now;
  for (const search::Record& r : {stale, current, unknown, elsewhere}) s.add(r);
  const std::string key = "dense(K=32,M=16,N=32)";
  for (const search::Record& r : s.task_records(key, "llvm")) {
    EXPECT_EQ(r.codegen, r.config == "{\"g\":2}" ? "llvm 0" : r.config == "{\"g\":3}" ? "" : now) << r.config;
    EXPECT_EQ(r.measured_here(), r.config == "{\"g\":1}" || r.config == "{\"g\":3}") << r.config;
  }
  EXPECT_EQ(s.best(key, "llvm")->config, "{\"g\":1}") << "another generation's latency won";
  EXPECT_FALSE(s.contains(key, "llvm", "tile.vec=j.acc2", "{\"g\":2}", host_description(), now));
  EXPECT_TRUE(s.contains(key, "llvm", "tile.vec=j.acc2", "{\"g\":2}", host_description()));
  EXPECT_TRUE(s.contains(key, "llvm", "tile.vec=j.acc2", "{\"g\":2}", "", "llvm 0"));
  EXPECT_TRUE(s.contains(key, "llvm", "tile.vec=j.acc2", "{\"g\":3}", host_description(), now)) << "unknown: this one";
  EXPECT_FALSE(s.contains(key, "llvm", "tile.vec=j.acc2", "{\"g\":4}", host_description(), now));
  // Only this machine's records of another generation: they come before another
  // machine's of this generation; failing both, the best of every record.
  search::Record only_stale = stale;
  only_stale.task_key = "dense(K=64,M=16,N=32)";
  only_stale.latencies_us = {9};
  search::Record only_elsewhere = elsewhere;
  only_elsewhere.task_key = only_stale.task_key;
  s.add(only_elsewhere);
  s.add(only_stale);
  EXPECT_EQ(s.best(only_stale.task_key, "llvm")->codegen, "llvm 0");
}

// Two CPU generations that share a name under a hypervisor (a Zen 4 and a Zen 5 EPYC
// both read "AMD EPYC") are told apart by the family and model numbers; a record from
// before descriptions named them counts as this machine's, as it did then, until
// `basin records relabel` names its machine.
TEST(Records, TheHostNamesTheCpuFamilyAndOldDescriptionsStillMatch) {
  const std::string zen5 = "AMD EPYC (family 26 model 2), 1 core, avx512";
  const std::string zen4 = "AMD EPYC (family 25 model 17), 1 core, avx512";
  const std::string legacy = "AMD EPYC, 1 core, avx512";
  EXPECT_EQ(legacy_host_description(zen5), legacy);
  EXPECT_EQ(legacy_host_description(legacy), legacy);
  EXPECT_TRUE(same_host(zen5, zen5));
  EXPECT_TRUE(same_host(legacy, zen5)) << "an old record counts as this machine's";
  EXPECT_TRUE(same_host("", zen5));
  EXPECT_FALSE(same_host(zen4, zen5)) << "another generation of the same name";
  EXPECT_FALSE(same_host(zen5, legacy)) << "a new record is not an old machine's";
  EXPECT_FALSE(same_host("AMD EPYC, 2 cores, avx512", zen5));
#if defined(__x86_64__) && defined(__linux__)
  EXPECT_NE(host_description().find(" (family "), std::string::npos) << host_description();
  EXPECT_EQ(host_description().find(" (family "), this_host().cpu_model.size()) << host_description();
#endif
  // In a records file: an old record of this machine's name is this machine's, one of
  // another family is not, and relabelling moves the old one to another machine.
  std::string path = temp_path("families");
  search::RecordStore s(path);
  search::Record old = rec("{\"h\":1}", {5});
  old.host = legacy_host_description(host_description());
  search::Record other = rec("{\"h\":2}", {3});
  other.host = "Other CPU (family 1 model 2), 1 core, sse";
  search::Record here = rec("{\"h\":3}", {20});
  here.host = host_description();
  for (const search::Record& r : {old, other, here}) s.add(r);
  EXPECT_TRUE(s.contains("dense(K=32,M=16,N=32)", "llvm", "tile.vec=j.acc2", "{\"h\":1}", host_description()));
  EXPECT_FALSE(s.contains("dense(K=32,M=16,N=32)", "llvm", "tile.vec=j.acc2", "{\"h\":2}", host_description()));
  EXPECT_EQ(s.best("dense(K=32,M=16,N=32)", "llvm")->config, "{\"h\":1}") << "the old record is this machine's";
  EXPECT_EQ(s.relabel_host(old.host, "Older CPU (family 9 model 9), 1 core, sse"), 1);
  EXPECT_EQ(s.relabel_host("nothing of that name", "x"), 0);
  EXPECT_FALSE(s.contains("dense(K=32,M=16,N=32)", "llvm", "tile.vec=j.acc2", "{\"h\":1}", host_description()));
  EXPECT_EQ(s.best("dense(K=32,M=16,N=32)", "llvm")->config, "{\"h\":3}") << "another machine's latency won";
  for (const search::Record& r : s.all()) EXPECT_EQ(r.from_host(host_description()), r.config == "{\"h\":3}");
}

// A kernel limited to fewer threads than the cores is another machine as far as its
// latencies go: the host records name says how many threads kernels ran on.
TEST(Records, TheHostNamesTheThreadsKernelsRunOn) {
  const char* was = std::getenv("BASIN_NUM_THREADS");
  const std::string saved = was ? was : "";
  unsetenv("BASIN_NUM_THREADS");
  const HostInfo all_cores = probe_host();
  EXPECT_GE(all_cores.cores, 1);
  setenv("BASIN_NUM_THREADS", "1", 1);
  HostInfo one = probe_host();
  EXPECT_EQ(one.cores, 1);
  EXPECT_NE(one.describe().find(", 1 core, "), std::string::npos) << one.describe();
  setenv("BASIN_NUM_THREADS", "0", 1);  // not a count: the cores
  EXPECT_EQ(probe_host().cores, all_cores.cores);
  if (was) setenv("BASIN_NUM_THREADS", saved.c_str(), 1);
  else unsetenv("BASIN_NUM_THREADS");
}

// A file of schema 1 (before records named their machine), as basin wrote it then.
void write_schema1(const std::string& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const char* sql =
      "CREATE TABLE records (id INTEGER PRIMARY KEY AUTOINCREMENT, task_key TEXT NOT NULL, target TEXT NOT NULL, "
      "sketch TEXT NOT NULL, config TEXT NOT NULL, latencies_us TEXT NOT NULL, min_latency_us REAL, error TEXT NOT "
      "NULL, compile_seconds REAL NOT NULL, started_at REAL NOT NULL, finished_at REAL NOT NULL, seed INTEGER NOT "
      "NULL, estimator_version TEXT NOT NULL);"
      "INSERT INTO records (task_key, target, sketch, config, latencies_us, min_latency_us, error, compile_seconds, "
      "started_at, finished_at, seed, estimator_version) VALUES ('dense(K=32,M=16,N=32)', 'llvm', "
      "'tile.vec=j.acc2', '{\"old\":1}', '[9.0]', 9.0, '', 0.1, 1, 2, 3, 'random');"
      "PRAGMA user_version=1;";
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
}

TEST(Records, AnOldFileIsUpgradedAndItsRecordsHaveAnUnknownMachine) {
  std::string path = temp_path("schema1");
  write_schema1(path);
  {
    search::RecordStore s(path);
    auto all = s.all();
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all[0].config, "{\"old\":1}");
    EXPECT_EQ(all[0].host, "");
    EXPECT_TRUE(all[0].from_host(host_description())) << "an unknown machine counts as this one";
    EXPECT_FALSE(all[0].confirmed());
    EXPECT_EQ(all[0].latency_us(), 9.0);
    search::Record r = rec("{\"new\":1}", {4});
    r.host = host_description();
    s.add(r);
  }
  search::RecordStore s(path);  // opened again: already upgraded
  auto all = s.all();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].host, host_description());
  EXPECT_EQ(s.best("dense(K=32,M=16,N=32)", "llvm")->config, "{\"new\":1}");
  // The upgraded record's latency column was filled: it is ordered by it.
  search::Record old = all[0];
  s.confirm(old.id, {3, 2});  // median 3: now the best
  EXPECT_EQ(s.best("dense(K=32,M=16,N=32)", "llvm")->config, "{\"old\":1}");
  // The upgraded file's records were never named the best, and can be.
  EXPECT_EQ(all[0].best_seq, 0);
  EXPECT_EQ(s.name_best(all[1].id), 1);
  EXPECT_EQ(s.best("dense(K=32,M=16,N=32)", "llvm")->config, "{\"new\":1}");
  EXPECT_EQ(all[0].codegen, "") << "an old record's code generation is unknown";
  EXPECT_TRUE(all[0].measured_here());
}

// A file of schema 4 (the last before records named their code generation) is upgraded
// in place: its records keep everything and their generation is unknown.
TEST(Records, ASchema4FileIsUpgradedAndItsRecordsHaveAnUnknownCodeGeneration) {
  std::string path = temp_path("schema4");
  {
    search::RecordStore s(path);
    search::Record r = rec("{\"four\":1}", {6});
    r.host = host_description();
    r.codegen = "llvm 0";
    s.name_best(s.add(r));
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(db, "ALTER TABLE records DROP COLUMN codegen; PRAGMA user_version=4;", nullptr, nullptr, nullptr),
      SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
  search::RecordStore s(path);
  auto all = s.all();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].config, "{\"four\":1}");
  EXPECT_EQ(all[0].host, host_description());
  EXPECT_EQ(all[0].best_seq, 1);
  EXPECT_EQ(all[0].codegen, "");
  EXPECT_TRUE(all[0].measured_here());
  search::Record r = rec("{\"five\":1}", {7});
  r.codegen = codegen::codegen_version("llvm");
  s.add(r);
  EXPECT_EQ(s.all().back().codegen, codegen::codegen_version("llvm"));
}

// The tuner names the winner of its last side-by-side measurement its best, which need
// not have the lowest median: the file's best is the one named last, per task.
TEST(Records, TheBestIsTheProgramNamedLast) {
  std::string path = temp_path("named");
  search::RecordStore s(path);
  int64_t fast = s.add(rec("{\"fast\":1}", {5}));
  int64_t steady = s.add(rec("{\"steady\":1}", {8}));
  search::Record other_task = rec("{\"o\":1}", {1});
  other_task.task_key = "dense(K=64,M=16,N=32)";
  int64_t other = s.add(other_task);
  s.confirm(fast, {5});
  s.confirm(steady, {8});
  EXPECT_EQ(s.best("dense(K=32,M=16,N=32)", "llvm")->config, "{\"fast\":1}");
  EXPECT_EQ(s.name_best(steady), 1);
  EXPECT_EQ(s.best("dense(K=32,M=16,N=32)", "llvm")->config, "{\"steady\":1}");
  EXPECT_EQ(s.name_best(other), 1) << "each task numbers its own namings";
  EXPECT_EQ(s.name_best(fast), 2);
  EXPECT_EQ(s.name_best(steady), 3);
  search::Record best = *s.best("dense(K=32,M=16,N=32)", "llvm");
  EXPECT_EQ(best.config, "{\"steady\":1}");
  EXPECT_EQ(best.best_seq, 3);
  EXPECT_THROW(s.name_best(12345), InternalError);
}

TEST(Records, AConfirmedRecordsLatencyIsTheMedianOfItsMeasurements) {
  std::string path = temp_path("confirm");
  int64_t lucky = 0;
  {
    search::RecordStore s(path);
    lucky = s.add(rec("{\"lucky\":1}", {5, 6, 7}));
    s.add(rec("{\"steady\":1}", {8, 9}));
    EXPECT_EQ(s.best("dense(K=32,M=16,N=32)", "llvm")->config, "{\"lucky\":1}");
    s.confirm(lucky, {12, 11});
  }
  search::RecordStore s(path);
  search::Record r = s.all()[0];
  EXPECT_TRUE(r.confirmed());
  EXPECT_EQ(r.confirm_us, (std::vector<double>{12, 11}));
  EXPECT_EQ(r.min_latency_us(), 5);
  EXPECT_EQ(r.latency_us(), 11);  // the median of 5, 12, 11
  EXPECT_FALSE(s.all()[1].confirmed());
  EXPECT_EQ(s.all()[1].latency_us(), 8);
  // The confirmed program is the best, though a single measurement of another was faster.
  EXPECT_EQ(s.best("dense(K=32,M=16,N=32)", "llvm")->config, "{\"lucky\":1}");
  // Among confirmed ones, the lower median.
  search::Record steady = s.all()[1];
  s.confirm(steady.id, {8.5});
  EXPECT_EQ(s.best("dense(K=32,M=16,N=32)", "llvm")->config, "{\"steady\":1}");
  EXPECT_EQ(s.best("dense(K=32,M=16,N=32)", "llvm")->latency_us(), 8.5);  // the upper of two
  EXPECT_THROW(s.confirm(12345, {1}), InternalError);
}

// Opened to read only, a records file is never changed: a foreign SQLite database is an
// error and stays byte for byte what it was (no table, no WAL, no version stamped); a
// basin file reads as usual, and writing through the read-only store is an error.
TEST(Records, AReadOnlyStoreChangesNoFile) {
  auto bytes = [](const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  std::string foreign = temp_path("foreign");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(foreign.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(db, "CREATE TABLE notes (x TEXT); INSERT INTO notes VALUES ('mine');", nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(db);
  const std::string before = bytes(foreign);
  try {
    search::RecordStore s(foreign, search::RecordStore::ReadOnly::Yes);
    FAIL() << "opened a foreign database";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(foreign), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not a basin records database"), std::string::npos) << e.what();
  }
  EXPECT_EQ(bytes(foreign), before);
  EXPECT_FALSE(std::filesystem::exists(foreign + "-wal"));
  EXPECT_THROW(search::RecordStore(temp_path("missing_ro"), search::RecordStore::ReadOnly::Yes), Error);

  std::string ours = temp_path("ours_ro");
  {
    search::RecordStore w(ours);
    search::Record r;
    r.task_key = "dense(K=32,M=16,N=32)";
    r.target = "llvm";
    r.sketch = "s";
    r.config = "{}";
    r.latencies_us = {5};
    w.add(r);
  }
  search::RecordStore ro(ours, search::RecordStore::ReadOnly::Yes);
  ASSERT_EQ(ro.all().size(), 1u);
  search::Record more = ro.all()[0];
  more.config = "{\"other\":1}";
  EXPECT_THROW(ro.add(more), Error);
  EXPECT_THROW(ro.name_best(ro.all()[0].id), Error);
}

// A read-only store leaves no -wal or -shm file beside the records when it closes, and
// reads what a writer still holding the file has committed.
TEST(Records, AReadOnlyStoreLeavesNoWalFiles) {
  std::string path = temp_path("ro_wal");
  {
    search::RecordStore w(path);
    w.add(rec("{\"a\":1}", {5}));
  }
  ASSERT_FALSE(std::filesystem::exists(path + "-wal"));
  {
    search::RecordStore ro(path, search::RecordStore::ReadOnly::Yes);
    EXPECT_EQ(ro.count(), 1);
  }
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(path + "-shm"));
  {
    search::RecordStore w(path);
    w.add(rec("{\"b\":1}", {6}));
    search::RecordStore ro(path, search::RecordStore::ReadOnly::Yes);
    EXPECT_EQ(ro.count(), 2);
  }
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(path + "-shm"));
}

// A record whose measurements are not a JSON array of numbers (edited or damaged by
// hand) reads as a failed record naming itself; the others stay usable.
TEST(Records, ADamagedRecordFailsAloneAndNamesItself) {
  std::string path = temp_path("damaged");
  int64_t bad_id = 0;
  {
    search::RecordStore s(path);
    s.add(rec("{\"good\":1}", {7}));
    bad_id = s.add(rec("{\"bad\":1}", {5}));
    s.add(rec("{\"bad2\":1}", {6}));
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(db, ("UPDATE records SET latencies_us = '[1, oops' WHERE id = " + std::to_string(bad_id)).c_str(),
                   nullptr, nullptr, nullptr),
      SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(
                db, ("UPDATE records SET confirm_us = '{\"a\": 1}' WHERE id = " + std::to_string(bad_id + 1)).c_str(),
                nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  search::RecordStore s(path);
  std::vector<search::Record> all = s.all();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_TRUE(all[0].ok());
  EXPECT_FALSE(all[1].ok());
  EXPECT_NE(all[1].error.find("record " + std::to_string(bad_id)), std::string::npos) << all[1].error;
  EXPECT_NE(all[1].error.find("latencies_us"), std::string::npos) << all[1].error;
  EXPECT_FALSE(all[2].ok());
  EXPECT_NE(all[2].error.find("confirm_us"), std::string::npos) << all[2].error;
  EXPECT_EQ(s.best("dense(K=32,M=16,N=32)", "llvm")->config, "{\"good\":1}");
}

TEST(Records, AFileOfANewerSchemaIsAClearError) {
  std::string path = temp_path("schema99");
  write_schema1(path);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=99;", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  try {
    search::RecordStore s(path);
    FAIL() << "opened a file of schema 99";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("schema version 99"), std::string::npos) << e.what();
  }
}

// The machines' descriptions: this machine's comes with its first record, another
// machine's only when given (an MPI rank's hello, a merge), the first one stays, a
// relabel carries it along, and a file without the table reads as describing none.
TEST(Records, TheMachinesThatMeasuredAreDescribed) {
  const std::string path = temp_path("machines");
  const std::string here = host_description(), there = "Other CPU (family 1 model 2), 1 core, sse";
  {
    search::RecordStore s(path);
    EXPECT_TRUE(s.machines().empty());
    search::Record a = rec("{\"a\":1}", {10});
    a.host = there;
    s.add(a);
    EXPECT_TRUE(s.machines().empty()) << "another machine's record brings no description";
    search::Record b = rec("{\"a\":2}", {12});
    b.host = here;
    s.add(b);
    auto m = s.machines();
    ASSERT_EQ(m.size(), 1u);
    ASSERT_EQ(m.count(here), 1u);
    EXPECT_EQ(Hardware::from_json(m[here]).host, here);
    EXPECT_EQ(m[here], this_hardware().to_json());
    Hardware other = this_hardware();
    other.host = there;
    other.cores = 1;
    s.describe_machine(there, other.to_json());
    Hardware second = other;
    second.cores = 7;
    s.describe_machine(there, second.to_json());
    EXPECT_EQ(Hardware::from_json(s.machines()[there]).cores, 1) << "the first description stays";
    EXPECT_THROW(s.set_machine(there, "{\"fast\": true}"), Error);
    // Relabelled records take their description along.
    const std::string renamed = "Renamed CPU (family 3 model 4), 1 core, sse";
    EXPECT_EQ(s.relabel_host(there, renamed), 1);
    EXPECT_EQ(Hardware::from_json(s.machines().at(renamed)).host, renamed);
    EXPECT_EQ(s.machines().count(there), 0u);
  }
  // Read-only, the same descriptions.
  EXPECT_EQ(search::RecordStore(path, search::RecordStore::ReadOnly::Yes).machines().size(), 2u);
  // A file of a basin that kept no descriptions: none, read-only or not.
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "DROP TABLE machines", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  EXPECT_TRUE(search::RecordStore(path, search::RecordStore::ReadOnly::Yes).machines().empty());
  EXPECT_EQ(search::RecordStore(path, search::RecordStore::ReadOnly::Yes).count(), 2);
  EXPECT_TRUE(search::RecordStore(path).machines().empty());
  for (const char* ext : {"", "-wal", "-shm"}) std::remove((path + ext).c_str());
}

}  // namespace
}  // namespace basin
