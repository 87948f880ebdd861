// The dataset tool's pieces: collection resumes without measuring a program twice,
// records become samples (bad ones skipped), splits never put a task on both sides,
// export writes what it says.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/graph/fusion.h"
#include "core/graph/passes.h"
#include "core/graph/zoo.h"
#include "core/ops/registry.h"
#include "core/schedule/sketch.h"
#include "core/util/error.h"
#include "models/dataset.h"
#include "models/estimator.h"
#include "relax/features.h"

namespace basin {
namespace {

std::string key(const std::string& op, const std::map<std::string, std::string>& p) {
  return sched::task_key(ops::build_op(op, p));
}

TEST(Dataset, CollectionResumesWithoutMeasuringTwice) {
  std::string db =
      (std::filesystem::temp_directory_path() / ("basin_ds_" + std::to_string(::getpid()) + ".db")).string();
  std::vector<std::string> tasks = {key("dense", {{"M", "16"}, {"K", "32"}, {"N", "24"}}),
                                    key("softmax", {{"shape", "8,40"}})};
  {
    search::RecordStore store(db);
    models::CollectOptions opt;
    opt.per_task = 4;
    EXPECT_EQ(models::collect_random(store, tasks, opt), 8);
  }
  search::RecordStore store(db);
  models::CollectOptions opt;
  opt.per_task = 7;
  int progress = 0;
  opt.progress = [&](const std::string&, int, int, const search::Record&) { ++progress; };
  EXPECT_EQ(models::collect_random(store, tasks, opt), 6);
  EXPECT_EQ(progress, 6);
  std::set<std::string> programs;
  for (const search::Record& r : store.all()) EXPECT_TRUE(programs.insert(r.task_key + r.sketch + r.config).second);
  EXPECT_EQ(programs.size(), 14u);
  // A record that no longer parses is skipped, not fatal.
  search::Record bad = store.all()[0];
  bad.config = R"({"sketch": "nosuch", "splits": {}, "unroll": 0})";
  store.add(bad);
  int skipped = 0;
  std::vector<models::Sample> samples = models::samples_from_records(store.all(), "llvm", &skipped);
  EXPECT_EQ(skipped, 1);
  EXPECT_EQ(samples.size(), 14u);
  for (const models::Sample& s : samples) {
    EXPECT_GT(s.latency_us, 0);
    EXPECT_EQ(s.features.size(), static_cast<size_t>(s.stores) * relax::num_features());
  }
  std::ostringstream os;
  models::export_samples(samples, os);
  std::istringstream is(os.str());
  std::string line;
  std::getline(is, line);
  EXPECT_EQ(nlohmann::json::parse(line)["feature_version"], relax::kFeatureVersion);
  int rows = 0;
  while (std::getline(is, line)) {
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["features"].size(), j["stores"].get<size_t>());
    ++rows;
  }
  EXPECT_EQ(rows, 14);
  std::filesystem::remove(db);
}

// Collection refuses programs over the instruction limit as tuning does (error records,
// not compiled), by default; 0 lifts the limit.
TEST(Dataset, ProgramsOverTheInstructionLimitAreErrorRecords) {
  EXPECT_EQ(models::CollectOptions{}.max_instructions, codegen::kMaxInstructions);
  std::vector<std::string> tasks = {key("dense", {{"M", "16"}, {"K", "32"}, {"N", "24"}})};
  for (int64_t limit : {int64_t{1}, int64_t{0}}) {
    std::string db = (std::filesystem::temp_directory_path() /
                      ("basin_ds_limit" + std::to_string(limit) + "_" + std::to_string(::getpid()) + ".db"))
                         .string();
    search::RecordStore store(db);
    models::CollectOptions opt;
    opt.per_task = 3;
    opt.max_instructions = limit;
    opt.compile_threads = 1;
    EXPECT_EQ(models::collect_random(store, tasks, opt), 3);
    ASSERT_EQ(store.all().size(), 3u);
    for (const search::Record& r : store.all()) {
      EXPECT_EQ(r.ok(), limit == 0) << r.error;
      EXPECT_EQ(r.error.rfind("too large to compile", 0) == 0, limit != 0) << r.error;
    }
    std::filesystem::remove(db);
  }
}

// --repeat: every program of the task measured again after the others; the latency is
// the median, the samples carry each measurement, a rerun repeats nothing twice.
TEST(Dataset, RepeatMeasuresEveryProgramAgainAfterTheOthers) {
  std::string db =
      (std::filesystem::temp_directory_path() / ("basin_ds_rep_" + std::to_string(::getpid()) + ".db")).string();
  std::vector<std::string> tasks = {key("dense", {{"M", "16"}, {"K", "32"}, {"N", "24"}})};
  search::RecordStore store(db);
  models::CollectOptions opt;
  opt.per_task = 5;
  EXPECT_EQ(models::collect_random(store, tasks, opt), 5);
  for (const search::Record& r : store.all()) EXPECT_FALSE(r.confirmed());
  opt.repeat = 2;  // the same programs, now measured twice more
  EXPECT_EQ(models::collect_random(store, tasks, opt), 0);
  std::vector<search::Record> all = store.all();
  ASSERT_EQ(all.size(), 5u);
  for (const search::Record& r : all) {
    ASSERT_TRUE(r.ok()) << r.error;
    ASSERT_EQ(r.confirm_us.size(), 2u);
    EXPECT_GT(r.confirm_us[0], 0);
    std::vector<double> m = {r.min_latency_us(), r.confirm_us[0], r.confirm_us[1]};
    std::sort(m.begin(), m.end());
    EXPECT_EQ(r.latency_us(), m[1]);
  }
  EXPECT_EQ(models::collect_random(store, tasks, opt), 0);
  for (const search::Record& r : store.all()) EXPECT_EQ(r.confirm_us.size(), 2u) << "repeated twice over";
  std::vector<models::Sample> samples = models::samples_from_records(store.all(), "llvm");
  ASSERT_EQ(samples.size(), 5u);
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ(samples[i].measurements_us.size(), 3u);
    EXPECT_EQ(samples[i].latency_us, all[i].latency_us());
  }
  std::unique_ptr<models::Estimator> roofline = models::make_estimator("roofline");
  models::EvalResult r = models::evaluate(*roofline, samples);
  EXPECT_EQ(r.repeated, 5);
  EXPECT_GE(r.repeatability, 0.0);
  EXPECT_LE(r.repeatability, 1.0);
  std::filesystem::remove(db);
}

// `per_task` samples of each of the tasks t0, t1, ...
std::vector<models::Sample> samples_of_tasks(int tasks, int per_task) {
  std::vector<models::Sample> s;
  for (int t = 0; t < tasks; ++t)
    for (int i = 0; i < per_task; ++i) {
      models::Sample x;
      x.task = "t" + std::to_string(t);
      s.push_back(x);
    }
  return s;
}

// A GPU record of any precision's sketch reads back as features (the records of a
// `--precision fp16` run among TF32 ones), and a sketch of no precision is refused.
TEST(Dataset, GpuRecordsOfEveryPrecisionHaveFeatures) {
  ops::OpGraph g = ops::build_op("dense", {{"M", "64"}, {"K", "64"}, {"N", "64"}});
  const std::string key = sched::task_key(g);
  models::FeatureExtractor fx;
  for (const char* precision : {"tf32", "fp16", "bf16"}) {
    const sched::Sketch s = sched::gpu_sketches(g, precision).at(1);
    ASSERT_EQ(s.name, std::string("gpu.mma.") + precision);
    models::Sample smp = fx.features(key, s.name, sched::config_to_json(s, sched::default_config(s)), "cuda");
    EXPECT_EQ(smp.features.size(), static_cast<size_t>(smp.stores) * relax::num_features(relax::FeatureSet::Gpu));
  }
  EXPECT_THROW(fx.features(key, "gpu.mma.fp8", R"({"sketch": "gpu.mma.fp8", "splits": {}, "unroll": 64})", "cuda"),
               Error);
}

TEST(Dataset, SplitsByTaskNeverByRow) {
  std::vector<models::Sample> s = samples_of_tasks(10, 5);
  models::Split sp = models::split_by_task(s, 0.2, 3);
  EXPECT_EQ(sp.test_tasks.size(), 2u);
  std::set<std::string> train, test;
  for (auto& x : sp.train) train.insert(x.task);
  for (auto& x : sp.test) test.insert(x.task);
  for (auto& t : test) EXPECT_FALSE(train.count(t));
  EXPECT_EQ(sp.train.size() + sp.test.size(), s.size());
  EXPECT_EQ(models::split_by_task(s, 0.2, 3).test_tasks, sp.test_tasks);  // the same seed, the same split
  // A small positive fraction still holds out one task; 0 holds out none (it once held
  // out one, so "train on everything" silently left a task out).
  EXPECT_EQ(models::split_by_task(s, 0.01, 3).test_tasks.size(), 1u);
  models::Split all = models::split_by_task(s, 0.0, 3);
  EXPECT_TRUE(all.test.empty());
  EXPECT_TRUE(all.test_tasks.empty());
  EXPECT_EQ(all.train.size(), s.size());
}

TEST(Dataset, FoldsHoldOutEveryTaskOnce) {
  std::vector<models::Sample> s = samples_of_tasks(7, 3);
  std::vector<models::Split> folds = models::task_folds(s, 3, 5);
  ASSERT_EQ(folds.size(), 3u);
  std::multiset<std::string> held;
  for (const models::Split& f : folds) {
    EXPECT_GE(f.test_tasks.size(), 2u);
    std::set<std::string> train;
    for (auto& x : f.train) train.insert(x.task);
    for (auto& x : f.test) EXPECT_FALSE(train.count(x.task)) << x.task;
    EXPECT_EQ(f.train.size() + f.test.size(), s.size());
    held.insert(f.test_tasks.begin(), f.test_tasks.end());
  }
  EXPECT_EQ(held.size(), 7u);
  EXPECT_EQ(std::set<std::string>(held.begin(), held.end()).size(), 7u);
  EXPECT_THROW(models::task_folds(s, 1, 5), Error);
  EXPECT_THROW(models::task_folds(s, 8, 5), Error);
}

TEST(Dataset, TaskLists) {
  EXPECT_GE(models::dataset_tasks("suite").size(), 25u);
  EXPECT_EQ(models::dataset_tasks("gemm-256,resnet18-c2").size(), 2u);
  EXPECT_THROW(models::dataset_tasks("nosuch-workload"), NotFoundError);
  EXPECT_THROW(models::dataset_tasks("zoo:nosuch-network"), NotFoundError);
}

// shapes:N: the first N of one fixed sequence of suite operators with scaled shapes,
// distinct and none of them a suite task; a bad count is an error.
TEST(Dataset, ShapeVariants) {
  std::vector<std::string> v = models::dataset_tasks("shapes:40");
  ASSERT_EQ(v.size(), 40u);
  EXPECT_EQ(std::set<std::string>(v.begin(), v.end()).size(), v.size());
  std::vector<std::string> suite = models::dataset_tasks("suite");
  for (const std::string& k : v) EXPECT_EQ(std::find(suite.begin(), suite.end(), k), suite.end()) << k;
  std::vector<std::string> first = models::dataset_tasks("shapes:10");
  EXPECT_TRUE(std::equal(first.begin(), first.end(), v.begin())) << "shapes:10 is not the start of shapes:40";
  std::set<std::string> ops;
  for (const std::string& k : v) ops.insert(k.substr(0, k.find('(')));
  EXPECT_GE(ops.size(), 6u) << "the variants come from one or two operators only";
  for (const char* bad : {"shapes:0", "shapes:-3", "shapes:x", "shapes:5x", "shapes:", "shapes:10-10", "shapes:12-5",
                          "shapes:-5-10", "shapes:3-", "shapes:a-9", "shapes:2-9x"})
    EXPECT_THROW(models::dataset_tasks(bad), Error) << bad;
}

// shapes:A-B and nets:A-B are what shapes:B (nets:B) adds to shapes:A (nets:A): a
// dataset grows by new tasks only.
TEST(Dataset, TaskRangesContinueTheSequences) {
  std::vector<std::string> all = models::dataset_tasks("shapes:40"), tail = models::dataset_tasks("shapes:25-40");
  ASSERT_EQ(tail.size(), 15u);
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), all.begin() + 25));
  EXPECT_EQ(models::dataset_tasks("shapes:0-40"), all);
  std::vector<std::string> nets = models::dataset_tasks("nets:6"), head = models::dataset_tasks("nets:4"),
                           rest = models::dataset_tasks("nets:4-6");
  ASSERT_FALSE(rest.empty());
  std::set<std::string> joined(head.begin(), head.end());
  joined.insert(rest.begin(), rest.end());
  EXPECT_EQ(joined, std::set<std::string>(nets.begin(), nets.end()));
  for (const char* bad : {"nets:5-5", "nets:6-2", "nets:0-1000001", "nets:1-"})
    EXPECT_THROW(models::dataset_tasks(bad), Error) << bad;
}

// nets:N: the tasks of the first N random networks, the same sequence on every call,
// fused tasks among them; a bad count is an error.
TEST(Dataset, RandomNetworkTasks) {
  std::vector<std::string> v = models::dataset_tasks("nets:12");
  EXPECT_GE(v.size(), 24u);
  EXPECT_EQ(std::set<std::string>(v.begin(), v.end()).size(), v.size());
  std::vector<std::string> first = models::dataset_tasks("nets:4");
  EXPECT_TRUE(std::equal(first.begin(), first.end(), v.begin())) << "nets:4 is not the start of nets:12";
  int fused_conv = 0, dense = 0;
  for (const std::string& k : v) {
    // NCHW or, where this CPU's layout plan blocks them, NCHWc (core/graph/layout.h).
    bool conv = k.find("conv2d(") != std::string::npos || k.find("conv2d_nchwc(") != std::string::npos;
    fused_conv += conv && k.find("add(") != std::string::npos;
    dense += k.find("dense(") != std::string::npos || k.find("batch_matmul(") != std::string::npos;
  }
  EXPECT_GE(fused_conv, 5) << "few fused convolution tasks";
  EXPECT_GE(dense, 2) << "no transformer tasks";
  for (const std::string& k : v) EXPECT_NO_THROW(sched::task_from_key(k)) << k;
  for (const char* bad : {"nets:0", "nets:-1", "nets:x", "nets:3y", "nets:", "nets:1000000"})
    EXPECT_THROW(models::dataset_tasks(bad), Error) << bad;
}

// Every random network is a valid graph that the compiler's passes and the
// partitioner accept, and the sequence does not change between calls.
TEST(Dataset, RandomNetworksAreValidAndReproducible) {
  for (uint64_t i = 0; i < 40; ++i) {
    graph::Graph g = graph::random_network(i);
    ASSERT_NO_THROW(graph::partition(graph::optimize(g))) << g.name;
    EXPECT_EQ(g.nodes().size(), graph::random_network(i).nodes().size()) << g.name;
  }
}

TEST(Dataset, NetworkTasksAreDeduplicated) {
  std::vector<std::string> r18 = models::dataset_tasks("zoo:resnet18");
  std::vector<std::string> all = models::dataset_tasks("networks");
  EXPECT_GE(r18.size(), 10u);
  EXPECT_GT(all.size(), r18.size());
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()).size(), all.size());
  for (const std::string& k : r18) EXPECT_NE(std::find(all.begin(), all.end(), k), all.end()) << k;
  // Listing a network twice, or with the list that holds it, adds nothing.
  EXPECT_EQ(models::dataset_tasks("zoo:resnet18,zoo:resnet18").size(), r18.size());
  EXPECT_EQ(models::dataset_tasks("networks,zoo:resnet18").size(), all.size());
}

}  // namespace
}  // namespace basin
